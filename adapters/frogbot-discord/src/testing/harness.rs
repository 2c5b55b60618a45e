//! The `ChannelQuestions` conformance harness over the fake Discord.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use frogbot_model::conformance::{Harness, Limits};
use frogbot_model::{
    ChannelQuestions, Interaction, PlatformUser, QuestionCall, QuestionRecord, Thread,
};
use serde_json::{Value, json};

use super::GUILD;
use super::payloads::{component_on, user};
use super::state::FakeDiscord;
use crate::DiscordQuestions;
use crate::convert;

/// The `ChannelQuestions` conformance harness: [`DiscordQuestions`] over serenity's real `Http`
/// against a [`FakeDiscord`]. Interactions are built from the components the fake shows on the
/// message (their real `custom_id`s and option values), as Discord delivers them
/// (`INTERACTION_CREATE` JSON with a token the fake knows), and converted through
/// [`convert::interaction_from_gateway`]; replies through [`convert::message_interaction`].
pub struct DiscordHarness {
    /// The fake.
    pub fake: FakeDiscord,
    hooks: DiscordQuestions,
    users: Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for DiscordHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordHarness")
            .field("fake", &self.fake.api_url)
            .finish_non_exhaustive()
    }
}

/// A fresh fake Discord and a harness over it.
pub async fn conformance_harness() -> DiscordHarness {
    let fake = FakeDiscord::start(600_000_000_000_000_006, 610_000_000_000_000_006).await;
    DiscordHarness {
        hooks: DiscordQuestions::new(fake.http()),
        fake,
        users: Mutex::default(),
    }
}

impl DiscordHarness {
    /// The Discord user object standing for `user` (a snowflake of its own per id).
    fn discord_user(&self, user: &PlatformUser) -> Value {
        let id = *self
            .users
            .lock()
            .unwrap()
            .entry(user.id.clone())
            .or_insert_with(|| self.fake.new_id());
        self::user(id, user.name.as_deref().unwrap_or("someone"), user.is_bot)
    }

    /// The components of question `q`'s current message of `record`, as the fake shows them.
    fn shown(&self, record: &QuestionRecord, q: usize) -> Option<Value> {
        let m = record
            .messages
            .iter()
            .rev()
            .find(|m| m.question == Some(q))
            .or(record.messages.last())?;
        self.fake.message(&m.id)
    }
}

/// The answer controls of a message's components: buttons (but "Other…" and "Answer…", which
/// open a form, "No answer" and "Skip") and select options, as `(custom_id, Some(value) for a
/// select option)`, in display order.
fn answer_controls(shown: &Value) -> Vec<(String, Option<String>)> {
    controls_of(shown)
        .into_iter()
        .filter(|(_, label, _)| {
            ![
                "Other…",
                "Skip",
                crate::render::ANSWER_LABEL,
                crate::render::NO_ANSWER_LABEL,
            ]
            .contains(&label.as_str())
        })
        .map(|(id, _, value)| (id, value))
        .collect()
}

/// Every control of a message's components: each button as `(custom_id, label, None)`, each
/// select option as `(select's custom_id, "", Some(value))`, in display order.
fn controls_of(shown: &Value) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    for row in shown["components"].as_array().into_iter().flatten() {
        for c in row["components"].as_array().into_iter().flatten() {
            let id = c["custom_id"].as_str().unwrap_or_default().to_owned();
            match c["type"].as_u64() {
                Some(2) => {
                    let label = c["label"].as_str().unwrap_or_default().to_owned();
                    out.push((id, label, None));
                }
                Some(3) => {
                    for o in c["options"].as_array().into_iter().flatten() {
                        let value = o["value"].as_str().map(str::to_owned);
                        out.push((id.clone(), String::new(), value));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

#[async_trait]
impl Harness for DiscordHarness {
    fn hooks(&self) -> &dyn ChannelQuestions {
        &self.hooks
    }

    async fn thread(&self) -> Thread {
        let id = self.fake.new_id().to_string();
        Thread {
            chat_id: format!("discord:{id}"),
            id,
            platform: crate::PLATFORM.into(),
        }
    }

    fn limits(&self) -> Limits {
        // One question a message, asked in turn; up to 4 string selects of 25 options (the
        // fifth row holds "Skip").
        Limits {
            questions: 10,
            options: 100,
            label: 100,
        }
    }

    async fn choose(
        &self,
        _thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        q: usize,
        options: &[usize],
        user: &PlatformUser,
    ) -> Vec<Interaction> {
        let Some(shown) = self.shown(record, q) else {
            return Vec::new();
        };
        let controls = answer_controls(&shown);
        // One interaction per control: a button click each, or one select with every value.
        let mut picked: Vec<(String, Vec<String>, bool)> = Vec::new();
        for &o in options {
            let Some((id, value)) = controls.get(o) else {
                continue;
            };
            match (
                value,
                picked.iter_mut().find(|(p, _, select)| p == id && *select),
            ) {
                (Some(v), Some((_, values, _))) => values.push(v.clone()),
                (Some(v), None) => picked.push((id.clone(), vec![v.clone()], true)),
                (None, _) => picked.push((id.clone(), vec![], false)),
            }
        }
        let clicker = self.discord_user(user);
        picked
            .into_iter()
            .map(|(custom_id, values, select)| {
                let id = self.fake.new_id();
                let token = format!("tok-{id}");
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                let payload = component_on(
                    id,
                    self.fake.app_id(),
                    &shown,
                    Some(GUILD),
                    &clicker,
                    &custom_id,
                    select.then_some(values.as_slice()),
                    &token,
                );
                self.fake.register_interaction(&payload, false);
                let dispatch = json!({"op": 0, "s": 1, "t": "INTERACTION_CREATE", "d": payload});
                convert::interaction_from_gateway(&dispatch.to_string())
                    .expect("the fake's interaction converts")
            })
            .collect()
    }

    async fn reply(&self, thread: &Thread, text: &str, user: &PlatformUser) -> Interaction {
        let author = self.discord_user(user);
        let channel = thread.id.parse().expect("a snowflake thread");
        let m = self.fake.user_message(channel, Some(GUILD), &author, text);
        let message: serenity::model::channel::Message =
            serde_json::from_value(m).expect("a Discord message");
        convert::message_interaction(&message)
    }

    async fn skip(
        &self,
        _thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        user: &PlatformUser,
    ) -> Interaction {
        let current = record.current().expect("a question message");
        let shown = self
            .fake
            .message(&current.id)
            .unwrap_or_else(|| panic!("the fake knows no message {}", current.id));
        let (custom_id, _, _) = controls_of(&shown)
            .into_iter()
            .find(|(_, label, _)| label == "Skip")
            .unwrap_or_else(|| panic!("message {} shows no Skip button: {shown}", current.id));
        let id = self.fake.new_id();
        let token = format!("tok-{id}");
        let payload = component_on(
            id,
            self.fake.app_id(),
            &shown,
            Some(GUILD),
            &self.discord_user(user),
            &custom_id,
            None,
            &token,
        );
        self.fake.register_interaction(&payload, false);
        let dispatch = json!({"op": 0, "s": 1, "t": "INTERACTION_CREATE", "d": payload});
        convert::interaction_from_gateway(&dispatch.to_string())
            .expect("the fake's interaction converts")
    }

    async fn controls(&self, message_id: &str) -> usize {
        self.fake
            .message(message_id)
            .map_or(0, |m| controls_of(&m).len())
    }

    async fn shown_text(&self, message_id: &str) -> String {
        self.fake.message(message_id).map_or_else(String::new, |m| {
            m["content"].as_str().unwrap_or_default().to_owned()
        })
    }

    async fn notices(&self, user: &PlatformUser) -> Vec<String> {
        let id = self.discord_user(user);
        self.fake.notices(id["id"].as_str().unwrap_or_default())
    }
}
