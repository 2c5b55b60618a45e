//! The `ChannelQuestions` conformance suite against the fake Bot API: the question hooks over
//! teloxide's `Bot`, every click read off the keyboard the fake shows and converted from a real
//! `callback_query` update.

frogbot_model::channel_questions_conformance!(
    frogbot_telegram::testing::ConformanceHarness::start().await
);
