//! The `ChannelQuestions` conformance harness over the fake homeserver.

use async_trait::async_trait;
use frogbot_model::conformance::{Harness, Limits};
use frogbot_model::{
    ChannelQuestions, Interaction, PlatformUser, QuestionCall, QuestionRecord, Thread,
};
use matrix_sdk::Client;
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UserId};
use serde_json::json;

use super::SERVER_NAME;
use super::state::FakeHomeserver;
use crate::convert::{Incoming, classify};
use crate::ids::{message_id, split_message_id};
use crate::render::{ANSWER_CHARS, MAX_ANSWERS};
use crate::{MatrixQuestions, PLATFORM};

/// The Matrix user a [`PlatformUser`] of the conformance suite is on the fake: its id when it is a
/// Matrix user id, else `@{id in lower case}:fake.test`.
pub fn matrix_user(user: &PlatformUser) -> OwnedUserId {
    UserId::parse(user.id.as_str())
        .or_else(|_| UserId::parse(format!("@{}:{SERVER_NAME}", user.id.to_lowercase())))
        .expect("a user id")
}

/// The `ChannelQuestions` conformance harness: [`MatrixQuestions`] over matrix-sdk's `Client`
/// talking to a [`FakeHomeserver`], one room with the suite's participant; interactions are the
/// events the fake delivers, converted by [`crate::convert::classify`].
#[derive(Debug)]
pub struct MatrixHarness {
    fake: FakeHomeserver,
    room: OwnedRoomId,
    hooks: MatrixQuestions<Client>,
}

/// A fresh harness (its own fake homeserver).
pub async fn conformance_harness() -> MatrixHarness {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = FakeHomeserver::start().await;
    let person = matrix_user(&frogbot_model::conformance::participant());
    let room = fake.create_room(&[&person]);
    let hooks = MatrixQuestions::new(fake.client().await);
    MatrixHarness { fake, room, hooks }
}

impl MatrixHarness {
    /// The fake homeserver.
    pub fn fake(&self) -> &FakeHomeserver {
        &self.fake
    }

    /// The harness's room.
    pub fn room(&self) -> &RoomId {
        &self.room
    }

    /// The event `id` of the fake converted as the adapter's sync loop converts it.
    fn deliver(&self, room: &RoomId, id: &OwnedEventId) -> Interaction {
        let event = self.fake.event(id.as_str()).expect("the injected event");
        let raw: Raw<AnySyncTimelineEvent> =
            Raw::from_json(serde_json::value::to_raw_value(&event).expect("JSON"));
        match classify(&raw, room, self.fake.bot()) {
            Ok(Some(Incoming::Action(interaction))) => interaction,
            Ok(Some(Incoming::Message(m))) => Interaction::Message { message: m.message },
            Ok(Some(other @ Incoming::Event(_))) => {
                panic!("an event click, not an interaction: {other:?}")
            }
            other => panic!("the event {event} converts to no interaction: {other:?}"),
        }
    }
}

#[async_trait]
impl Harness for MatrixHarness {
    fn hooks(&self) -> &dyn ChannelQuestions {
        &self.hooks
    }

    async fn thread(&self) -> Thread {
        let person = matrix_user(&frogbot_model::conformance::participant());
        let root = self.fake.inject(
            &self.room,
            &person,
            "m.room.message",
            json!({"msgtype": "m.text", "body": "a conversation with the bot"}),
        );
        Thread {
            id: message_id(&self.room, &root),
            platform: PLATFORM.into(),
            chat_id: format!("matrix-{root}"),
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            questions: 5,
            options: MAX_ANSWERS,
            label: ANSWER_CHARS,
        }
    }

    async fn choose(
        &self,
        thread: &Thread,
        call: &QuestionCall,
        record: &QuestionRecord,
        q: usize,
        options: &[usize],
        user: &PlatformUser,
    ) -> Vec<Interaction> {
        let Some(message) = record
            .messages
            .iter()
            .find(|m| m.question == Some(q))
            .or_else(|| record.messages.first().filter(|_| q == 0))
        else {
            return Vec::new();
        };
        let shown = self.fake.open_answers(&message.id);
        let ids: Vec<&str> = options
            .iter()
            .filter_map(|&o| shown.get(o).map(|(id, _)| id.as_str()))
            .collect();
        if ids.is_empty() {
            return Vec::new();
        }
        let (room, poll) = split_message_id(&message.id).expect("a message id");
        let response = self.fake.inject(
            &room,
            &matrix_user(user),
            "m.poll.response",
            json!({"m.selections": ids,
                   "m.relates_to": {"rel_type": "m.reference", "event_id": poll}}),
        );
        let mut out = vec![self.deliver(&room, &response)];
        // A multiple-choice poll takes the selection when the person says done.
        if call.input.questions.get(q).is_some_and(|i| i.multiple) {
            out.push(self.reply(thread, crate::render::DONE_REPLY, user).await);
        }
        out
    }

    async fn reply(&self, thread: &Thread, text: &str, user: &PlatformUser) -> Interaction {
        let (room, root) = split_message_id(&thread.id).expect("a thread id");
        let reply = self.fake.inject(
            &room,
            &matrix_user(user),
            "m.room.message",
            json!({"msgtype": "m.text", "body": text,
                   "m.relates_to": {"rel_type": "m.thread", "event_id": root,
                                    "is_falling_back": true, "m.in_reply_to": {"event_id": root}}}),
        );
        self.deliver(&room, &reply)
    }

    async fn skip(
        &self,
        thread: &Thread,
        _call: &QuestionCall,
        record: &QuestionRecord,
        user: &PlatformUser,
    ) -> Interaction {
        // Polls have no buttons: the question says to reply `skip` in the thread.
        let current = record.current().expect("a question message");
        let shown = self.fake.shown_text(&current.id);
        assert!(
            shown.contains("Reply skip to skip"),
            "the question says how to skip it: {shown:?}"
        );
        self.reply(thread, "skip", user).await
    }

    async fn controls(&self, message_id: &str) -> usize {
        self.fake.open_answers(message_id).len()
    }

    async fn shown_text(&self, message_id: &str) -> String {
        self.fake.shown_text(message_id)
    }

    async fn notices(&self, user: &PlatformUser) -> Vec<String> {
        let user = matrix_user(user);
        self.fake
            .sent()
            .into_iter()
            .filter(|e| {
                e["type"] == "m.room.message"
                    && e["content"]["m.mentions"]["user_ids"]
                        .as_array()
                        .is_some_and(|ids| ids.iter().any(|u| u == user.as_str()))
            })
            .map(|e| e["content"]["body"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}
