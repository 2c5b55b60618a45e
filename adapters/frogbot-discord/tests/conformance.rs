//! The `ChannelQuestions` conformance suite against the fake Discord
//! (`frogbot_discord::testing`): serenity's real `Http`, Discord's limits enforced.

frogbot_model::channel_questions_conformance!(
    frogbot_discord::testing::conformance_harness().await
);
