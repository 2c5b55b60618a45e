//! Agents: a model, instructions and tools; the turn engine that runs them.

mod channel;
mod engine;
pub mod model;
pub mod scripted;
mod tool;

pub use channel::*;
pub use engine::*;
pub use model::*;
pub use tool::*;
