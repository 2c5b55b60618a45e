//! The `ChannelQuestions` conformance suite, run against the fake Slack: the crate's real hooks and
//! client, clicks built from the blocks the fake shows.

frogbot_model::channel_questions_conformance!(frogbot_slack::testing::FakeSlack::harness().await);
