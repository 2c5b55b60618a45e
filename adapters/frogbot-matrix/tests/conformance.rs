//! The `ChannelQuestions` conformance suite against the fake homeserver: `MatrixQuestions` over
//! matrix-sdk's `Client`, polls and notices as the fake records them, poll responses and thread
//! replies converted from the events the fake delivers.
//!
//! On Matrix a notice is a thread message mentioning the person (`m.mentions`): Matrix has no
//! ephemeral messages.

#![recursion_limit = "256"]

frogbot_model::channel_questions_conformance!(frogbot_matrix::testing::conformance_harness().await);
