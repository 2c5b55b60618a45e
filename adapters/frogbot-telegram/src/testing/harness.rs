//! The `ChannelQuestions` conformance harness over the fake Bot API.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use frogbot_model::conformance::{Harness, Limits};
use frogbot_model::{
    ChannelQuestions, Interaction, PlatformUser, QuestionCall, QuestionRecord, Thread,
};
use serde_json::{Value, json};
use teloxide::Bot;

use super::api::FakeBotApi;
use super::updates::private_chat;
use crate::convert::{interaction, parse_update};
use crate::ids::split_message_id;
use crate::render::{MAX_BUTTON_TEXT, MAX_BUTTONS};
use crate::{PLATFORM, TelegramQuestions};

/// The `ChannelQuestions` conformance harness over [`FakeBotApi`]: the hooks under test are
/// [`TelegramQuestions`] over teloxide's `Bot` pointed at the fake; every interaction is a real
/// update shape (built from what the fake shows) read back through [`crate::convert`].
#[derive(Debug)]
pub struct ConformanceHarness {
    /// The fake the hooks talk to.
    pub fake: FakeBotApi,
    hooks: TelegramQuestions<Bot>,
    /// FrogBot participant id → Telegram user id.
    users: Mutex<HashMap<String, i64>>,
    next_thread: AtomicI64,
}

impl ConformanceHarness {
    /// A harness over a fresh fake.
    pub async fn start() -> Self {
        let fake = FakeBotApi::start().await;
        let hooks = TelegramQuestions::new(fake.bot());
        Self {
            fake,
            hooks,
            users: Mutex::default(),
            next_thread: AtomicI64::new(1),
        }
    }

    /// The Telegram user id standing for `user` (numeric ids are used as they are).
    fn user_id(&self, user: &PlatformUser) -> i64 {
        if let Ok(id) = user.id.parse() {
            return id;
        }
        let mut users = self.users.lock().expect("not poisoned");
        let next = 4_200 + users.len() as i64;
        *users.entry(user.id.clone()).or_insert(next)
    }

    fn user_json(&self, user: &PlatformUser) -> Value {
        json!({
            "id": self.user_id(user), "is_bot": user.is_bot,
            "first_name": user.name.clone().unwrap_or_else(|| "Someone".into())
        })
    }

    /// The message of question `q` that shows its keyboard.
    fn keyboard_message(&self, record: &QuestionRecord, q: usize) -> Option<i64> {
        record
            .messages
            .iter()
            .filter(|m| m.question == Some(q))
            .filter_map(|m| split_message_id(&m.id).ok())
            .map(|(_, id)| i64::from(id.0))
            .find(|&id| self.fake.buttons(id) > 0)
    }

    /// The click on the `index`-th button of message `id` (or the button with text `text`).
    fn click(&self, user: &PlatformUser, id: i64, button: Button<'_>) -> Interaction {
        let message = self.fake.sent(id);
        let buttons: Vec<Value> = message["reply_markup"]["inline_keyboard"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .cloned()
            .collect();
        let found = match button {
            Button::Nth(n) => buttons.get(n),
            Button::Text(t) => buttons.iter().find(|b| b["text"] == t),
        }
        .unwrap_or_else(|| panic!("message {id} shows no such button: {message}"));
        let data = found["callback_data"].as_str().expect("a callback button");
        let update = self
            .fake
            .push_free(self.fake.click(&self.user_json(user), id, data));
        let update = parse_update(update.to_string().as_bytes()).expect("a readable update");
        interaction(&update)
            .expect("a usable callback query")
            .expect("an interaction")
    }
}

enum Button<'a> {
    Nth(usize),
    Text(&'a str),
}

impl FakeBotApi {
    /// Gives `update` an `update_id` without queueing it.
    fn push_free(&self, mut update: Value) -> Value {
        update["update_id"] = json!(self.inner.next_update.fetch_add(1, Ordering::SeqCst));
        update
    }
}

#[async_trait]
impl Harness for ConformanceHarness {
    fn hooks(&self) -> &dyn ChannelQuestions {
        &self.hooks
    }

    async fn thread(&self) -> Thread {
        // A private chat with the participant is where a person answers the bot; each thread of
        // the suite gets its own FrogBot chat.
        let n = self.next_thread.fetch_add(1, Ordering::SeqCst);
        let chat = self.user_id(&frogbot_model::conformance::participant());
        Thread {
            id: chat.to_string(),
            platform: PLATFORM.into(),
            chat_id: format!("conformance-{n}"),
        }
    }

    fn limits(&self) -> Limits {
        // One message per question (no limit but patience), a keyboard of at most 100 buttons
        // (one is Skip; on a `multiple` question one more is Done, so it shows one option
        // fewer), button texts cut to 64 characters.
        Limits {
            questions: 10,
            options: MAX_BUTTONS - 1,
            label: MAX_BUTTON_TEXT,
        }
    }

    async fn choose(
        &self,
        _thread: &Thread,
        call: &QuestionCall,
        record: &QuestionRecord,
        q: usize,
        options: &[usize],
        user: &PlatformUser,
    ) -> Vec<Interaction> {
        let Some(id) = self.keyboard_message(record, q) else {
            return Vec::new();
        };
        if !call.input.questions[q].multiple {
            return options
                .iter()
                .map(|&o| self.click(user, id, Button::Nth(o)))
                .collect();
        }
        // Each check redraws the keyboard (a new revision in its callback data): press the first
        // chosen option the keyboard does not show checked ("✓ label"), or Done once all are.
        let message = self.fake.sent(id);
        let texts: Vec<String> = message["reply_markup"]["inline_keyboard"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|b| b["text"].as_str().map(String::from))
            .collect();
        let next = options
            .iter()
            .copied()
            .find(|&o| texts.get(o).is_some_and(|t| !t.starts_with("✓ ")));
        vec![match next {
            Some(o) => self.click(user, id, Button::Nth(o)),
            None => self.click(user, id, Button::Text("Done")),
        }]
    }

    async fn reply(&self, thread: &Thread, text: &str, user: &PlatformUser) -> Interaction {
        let chat: i64 = thread.id.parse().expect("a private chat's thread id");
        let from = self.user_json(user);
        // A client shows an open ForceReply prompt's reply field: the message replies to it.
        let reply_to = self.fake.open_force_reply(chat);
        let chat_json = private_chat(chat, from["first_name"].as_str().unwrap_or("Someone"));
        let update = self
            .fake
            .push_free(self.fake.user_message(chat_json, from, text, reply_to));
        let update = parse_update(update.to_string().as_bytes()).expect("a readable update");
        interaction(&update)
            .expect("a usable message")
            .expect("an interaction")
    }

    async fn skip(
        &self,
        _thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        user: &PlatformUser,
    ) -> Interaction {
        // The latest message of the call whose keyboard shows Skip.
        let id = record
            .messages
            .iter()
            .rev()
            .filter_map(|m| split_message_id(&m.id).ok())
            .map(|(_, id)| i64::from(id.0))
            .find(|&id| {
                self.fake.message(id).is_some_and(|m| {
                    m["reply_markup"]["inline_keyboard"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_array)
                        .flatten()
                        .any(|b| b["text"] == "Skip")
                })
            })
            .unwrap_or_else(|| panic!("no message of the call shows Skip: {record:?}"));
        self.click(user, id, Button::Text("Skip"))
    }

    async fn controls(&self, message_id: &str) -> usize {
        split_message_id(message_id).map_or(0, |(_, id)| self.fake.buttons(i64::from(id.0)))
    }

    async fn shown_text(&self, message_id: &str) -> String {
        split_message_id(message_id)
            .ok()
            .and_then(|(_, id)| self.fake.message(i64::from(id.0)))
            .map_or_else(String::new, |m| {
                m["text"].as_str().unwrap_or_default().to_owned()
            })
    }

    async fn notices(&self, user: &PlatformUser) -> Vec<String> {
        self.fake.notices(self.user_id(user))
    }
}
