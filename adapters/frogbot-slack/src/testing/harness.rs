//! The `ChannelQuestions` conformance [`Harness`] over the fake Slack.

use std::collections::HashMap;

use async_trait::async_trait;
use frogbot_model::conformance::{Harness, Limits};
use frogbot_model::{
    ChannelQuestions, Interaction, PlatformUser, QuestionCall, QuestionRecord, Thread,
};
use serde_json::{Value, json};

use super::BOT_USER;
use super::api::FakeSlack;
use super::push::input_state;
use crate::channel::Connector;
use crate::convert::{interaction_from_payload, message_from_push_json};
use crate::ids::{split_id, thread_id};
use crate::{PLATFORM, SlackQuestions, SlackWebApi};

impl FakeSlack {
    /// The `ChannelQuestions` conformance harness over a new fake.
    pub async fn harness() -> SlackHarness {
        let fake = FakeSlack::start().await;
        let hooks = fake.questions();
        SlackHarness { fake, hooks }
    }
}

/// The `ChannelQuestions` conformance [`Harness`] over a [`FakeSlack`]: the crate's
/// [`SlackQuestions`] talking to the fake through its real client.
#[derive(Debug)]
pub struct SlackHarness {
    /// The fake.
    pub fake: FakeSlack,
    hooks: SlackQuestions<SlackWebApi<Connector>>,
}

/// The conversation the harness's threads live in.
const CONFORMANCE_CHANNEL: &str = "C0CONFORM";

#[async_trait]
impl Harness for SlackHarness {
    fn hooks(&self) -> &dyn ChannelQuestions {
        &self.hooks
    }

    async fn thread(&self) -> Thread {
        let root = self.fake.user_message(
            CONFORMANCE_CHANNEL,
            None,
            &frogbot_model::conformance::participant().id,
            &format!("<@{BOT_USER}> ask me"),
        );
        let id = thread_id(CONFORMANCE_CHANNEL, &root.ts);
        Thread {
            chat_id: format!("chat-{id}"),
            id,
            platform: PLATFORM.into(),
        }
    }

    fn limits(&self) -> Limits {
        // Twelve questions of two blocks each stay under FrogBot's 25 blocks (Slack allows 50);
        // a static select takes 100 options; Slack cuts nothing of a 75-character option text.
        Limits {
            questions: 12,
            options: 100,
            label: 75,
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
        let Some(current) = record.current() else {
            return Vec::new();
        };
        let Some(message) = self.fake.message(&current.id) else {
            return Vec::new();
        };
        let Some(blocks) = message.blocks.as_array() else {
            return Vec::new();
        };
        // Question `q` is drawn as its section and the `q`-th actions block after it.
        let Some(at) = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b["type"] == "actions")
            .map(|(i, _)| i)
            .nth(q)
        else {
            return Vec::new();
        };
        let actions = &blocks[at];
        let section = at.checked_sub(1).map(|i| &blocks[i]);
        let with_block = |e: &Value, block: &Value| {
            let mut a = e.clone();
            a["block_id"] = block["block_id"].clone();
            a
        };
        let elements = actions["elements"].as_array().cloned().unwrap_or_default();
        let multiple = call.input.questions.get(q).is_some_and(|x| x.multiple);
        let (action, chosen) = if multiple {
            // Checks (a checkbox group, or a multi-select beside the question), then Submit: the
            // Submit click carries what is checked in the message's state, as Slack sends it.
            let Some(group) = elements
                .iter()
                .find(|e| e["type"] == "checkboxes")
                .or_else(|| section.and_then(|s| s.get("accessory")))
            else {
                return Vec::new();
            };
            let picked: Vec<Value> = options
                .iter()
                .filter_map(|&o| group["options"].get(o).cloned())
                .collect();
            let Some(submit) = elements.iter().find(|e| e["type"] == "button") else {
                return Vec::new();
            };
            let id = group["action_id"].as_str().unwrap_or_default().to_owned();
            (with_block(submit, actions), HashMap::from([(id, picked)]))
        } else {
            let &[o] = options else {
                return Vec::new();
            };
            // Option buttons carry a value (Submit and "Other…" carry none); else a select.
            let buttons: Vec<&Value> = elements
                .iter()
                .filter(|e| e["type"] == "button" && e.get("value").is_some())
                .collect();
            if let Some(b) = buttons.get(o) {
                (with_block(b, actions), HashMap::new())
            } else if let Some(select) = elements.iter().find(|e| e["type"] == "static_select") {
                let Some(opt) = select["options"].get(o).cloned() else {
                    return Vec::new();
                };
                let a = json!({
                    "type": "static_select", "action_id": select["action_id"],
                    "block_id": actions["block_id"], "selected_option": opt,
                    "placeholder": select["placeholder"]
                });
                let id = select["action_id"].as_str().unwrap_or_default().to_owned();
                (a, HashMap::from([(id, vec![opt])]))
            } else {
                return Vec::new();
            }
        };
        let state = input_state(&message.blocks, &chosen);
        let payload = self.fake.block_actions(
            &user.id,
            &current.id,
            action,
            state,
            &self.fake.trigger_id(),
        );
        match interaction_from_payload(&payload) {
            Ok(Some(i)) => vec![i],
            _ => Vec::new(),
        }
    }

    async fn reply(&self, thread: &Thread, text: &str, user: &PlatformUser) -> Interaction {
        let (channel, root) = split_id(&thread.id).expect("a Slack thread id");
        let m = self.fake.user_message(channel, Some(root), &user.id, text);
        let body = self
            .fake
            .event_callback(self.fake.message_event(&m, "channel"));
        let incoming = message_from_push_json(&body, BOT_USER)
            .expect("a readable event")
            .expect("a person's message");
        Interaction::Message {
            message: incoming.message,
        }
    }

    async fn skip(
        &self,
        _thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        user: &PlatformUser,
    ) -> Interaction {
        let current = record.current().expect("a question message");
        let payload = self
            .fake
            .click(&user.id, &current.id, "Skip")
            .unwrap_or_else(|| panic!("message {} shows no Skip button", current.id));
        interaction_from_payload(&payload)
            .expect("a readable click")
            .expect("an interaction")
    }

    async fn controls(&self, message_id: &str) -> usize {
        self.fake.controls(message_id)
    }

    async fn shown_text(&self, message_id: &str) -> String {
        fn texts(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(o) => {
                    if let Some(Value::String(t)) = o.get("text") {
                        out.push(t.clone());
                    }
                    o.values().for_each(|v| texts(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| texts(v, out)),
                _ => {}
            }
        }
        let Some(m) = self.fake.message(message_id) else {
            return String::new();
        };
        let mut out = Vec::new();
        texts(&m.blocks, &mut out);
        if out.is_empty() {
            out.push(m.text);
        }
        out.join("\n")
    }

    async fn notices(&self, user: &PlatformUser) -> Vec<String> {
        self.fake.notices(&user.id)
    }
}
