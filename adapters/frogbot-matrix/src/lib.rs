//! `frogbot-matrix`: the Matrix adapter for FrogBot, on matrix-sdk 0.18 — poll responses,
//! reactions and thread replies converted to FrogBot interactions, questions drawn as native polls.
//!
//! What it must not do: depend on sqlx of ours or FrogBot's store (matrix-sdk's own SQLite store is
//! fine), or decide anything the question engine decides.

/// The platform name of this adapter.
pub const PLATFORM: &str = "matrix";
