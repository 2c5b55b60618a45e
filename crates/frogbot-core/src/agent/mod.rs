//! Agents: a model, instructions and tools; the turn engine that runs them.

pub mod model;
pub use model::*;
