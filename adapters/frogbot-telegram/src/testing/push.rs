//! What the fake sends a bot: updates queued for `getUpdates` ([`FakeBotApi::push`]) or posted to
//! its webhook ([`post_update`]), and the clicks and messages of people built from what the fake
//! shows.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::api::FakeBotApi;
use super::updates::{as_reply_to, callback_update, now};

impl FakeBotApi {
    /// Queues an update (`{"message": …}` etc.) for `getUpdates`; its `update_id` is assigned
    /// unless given. Returns the `update_id`. The id is assigned and the update queued under one
    /// lock, so updates are visible in id order, as Telegram's are (two pushes racing queued a
    /// higher id first; a bot confirming it then lost the lower one — a loss of the fake's making
    /// that the crash suite reported).
    pub fn push(&self, mut update: Value) -> i64 {
        let mut pending = self.inner.pending.lock().expect("not poisoned");
        let id = match update["update_id"].as_i64() {
            Some(id) => {
                self.inner.next_update.fetch_max(id + 1, Ordering::SeqCst);
                id
            }
            None => {
                let id = self.inner.next_update.fetch_add(1, Ordering::SeqCst);
                update["update_id"] = json!(id);
                id
            }
        };
        self.note_query(&update);
        // A message a person sends is one the bot may react to later.
        if let Some(id) = update["message"]["message_id"].as_i64() {
            self.inner
                .messages
                .lock()
                .expect("not poisoned")
                .entry(id)
                .or_insert_with(|| update["message"].clone());
        }
        pending.push(update);
        drop(pending);
        self.inner.queued.send_modify(|n| *n += 1);
        id
    }

    fn note_query(&self, update: &Value) {
        let q = &update["callback_query"];
        if let (Some(id), Some(from)) = (q["id"].as_str(), q["from"]["id"].as_i64()) {
            self.inner
                .queries
                .lock()
                .expect("not poisoned")
                .insert(id.to_owned(), from);
        }
    }

    /// A `callback_query` update: `from` clicked the button with `data` under message
    /// `message_id` as the fake shows it now (the query id is made up and remembered).
    pub fn click(&self, from: &Value, message_id: i64, data: &str) -> Value {
        let n = self.inner.next_query.fetch_add(1, Ordering::SeqCst);
        let update = callback_update(
            &format!("fake-cbq-{n}"),
            from.clone(),
            self.sent(message_id),
            data,
        );
        self.note_query(&update);
        update
    }

    /// Stores a file a person sends (Telegram keeps it under a `file_id` and a `file_path`):
    /// its `file_id`, for a `photo` size or a `document` in a message.
    pub fn store_file(&self, path: &str, bytes: Vec<u8>) -> String {
        self.inner.store(path, bytes)
    }

    /// A message `from` writes in `chat` (replying to message `reply_to` when set), as a
    /// `message` update; the fake keeps the message. Not queued: [`Self::push`] it, post it, or
    /// convert it.
    pub fn user_message(
        &self,
        chat: Value,
        from: Value,
        text: &str,
        reply_to: Option<i64>,
    ) -> Value {
        let id = self.inner.next_message.fetch_add(1, Ordering::SeqCst);
        let mut m = json!({
            "message_id": id, "date": now(), "chat": chat, "from": from, "text": text
        });
        if let Some(r) = reply_to {
            m["reply_to_message"] = as_reply_to(&self.sent(r));
        }
        self.inner
            .messages
            .lock()
            .expect("not poisoned")
            .insert(id, m.clone());
        json!({"message": m})
    }
}

/// Posts `body` to a bot's webhook at `url` as Telegram does (JSON, with the secret token header
/// when given); the future gives the HTTP status.
pub fn post_update(
    url: &str,
    secret: Option<&str>,
    body: &str,
) -> impl Future<Output = u16> + Send + use<> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(s) = secret {
        req = req.header("x-telegram-bot-api-secret-token", s);
    }
    let url = url.to_owned();
    async move {
        req.send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or_else(|e| panic!("posting to the webhook {url} failed: {e}"))
    }
}
