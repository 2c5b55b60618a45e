//! What the fake Discord sends a bot: the gateway websocket (sessions by shard, dispatches
//! routed by Discord's formula), and the messages and interactions of people.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::payloads::message;
use super::state::{FakeDiscord, Inner, Session};

pub(super) async fn gateway_session(inner: Arc<Inner>, stream: tokio::net::TcpStream) {
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    // This connection's number, once identified (its entry in `sessions` goes when it closes).
    let mut identified: Option<u64> = None;
    let hello =
        json!({"op": 10, "d": {"heartbeat_interval": inner.heartbeat_ms}, "s": null, "t": null});
    if sink.send(WsMessage::Text(hello.to_string())).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            outgoing = rx.recv() => {
                let Some(text) = outgoing else { break };
                if sink.send(WsMessage::Text(text)).await.is_err() {
                    break;
                }
            }
            incoming = source.next() => {
                let Some(Ok(frame)) = incoming else { break };
                let WsMessage::Text(text) = frame else { continue };
                let Ok(payload) = serde_json::from_str::<Value>(&text) else { continue };
                match payload["op"].as_u64() {
                    Some(1) => {
                        inner.heartbeats.fetch_add(1, Ordering::SeqCst);
                        let ack = json!({"op": 11, "d": null, "s": null, "t": null}).to_string();
                        if sink.send(WsMessage::Text(ack)).await.is_err() {
                            break;
                        }
                    }
                    Some(2) => {
                        inner.identifies.lock().unwrap().push(payload["d"].clone());
                        let want = inner.token.lock().unwrap().clone();
                        if want.is_some_and(|t| payload["d"]["token"] != format!("Bot {t}")) {
                            // Discord's close code 4004: Authentication failed.
                            let close = tokio_tungstenite::tungstenite::protocol::CloseFrame {
                                code: 4004.into(),
                                reason: "Authentication failed.".into(),
                            };
                            let _ = sink.send(WsMessage::Close(Some(close))).await;
                            break;
                        }
                        let shard = &payload["d"]["shard"];
                        let shard = (
                            shard[0].as_u64().unwrap_or(0),
                            shard[1].as_u64().unwrap_or(1).max(1),
                        );
                        let number = inner.next_id();
                        let url = inner.gateway_url.lock().unwrap().clone();
                        let ready = json!({
                            "v": 10,
                            "user": {"id": inner.bot_id.to_string(), "username": "frogbot", "discriminator": "0", "avatar": null, "bot": true, "verified": true, "mfa_enabled": false, "flags": 0},
                            "guilds": [],
                            "session_id": format!("fake-session-{number}"),
                            "resume_gateway_url": url,
                            "shard": [shard.0, shard.1],
                            "application": {"id": inner.app_id.to_string(), "flags": 0}
                        });
                        let seq = inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
                        let text = json!({"op": 0, "s": seq, "t": "READY", "d": ready}).to_string();
                        if sink.send(WsMessage::Text(text)).await.is_err() {
                            break;
                        }
                        inner.sessions.lock().unwrap().push(Session {
                            number,
                            shard,
                            tx: tx.clone(),
                        });
                        identified = Some(number);
                        inner.readies.fetch_add(1, Ordering::SeqCst);
                        inner.changed.notify_waiters();
                    }
                    _ => {}
                }
            }
        }
    }
    if let Some(number) = identified {
        inner
            .sessions
            .lock()
            .unwrap()
            .retain(|s| s.number != number);
        inner.changed.notify_waiters();
    }
}

impl FakeDiscord {
    /// Stores a message `author` wrote in `channel` (ids after every earlier message's) and
    /// returns it; dispatch it as `MESSAGE_CREATE` to deliver it.
    pub fn user_message(
        &self,
        channel: u64,
        guild: Option<u64>,
        author: &Value,
        text: &str,
    ) -> Value {
        let m = message(self.new_id(), channel, guild, author, text, &[]);
        self.inner
            .messages
            .lock()
            .unwrap()
            .insert(m["id"].as_str().unwrap_or_default().to_owned(), m.clone());
        m
    }

    /// [`FakeDiscord::user_message`] with attachments `(filename, media type, bytes)` on the
    /// fake CDN, each an attachment object as Discord sends it (`id`, `filename`, `size`, `url`,
    /// `proxy_url`, `content_type`, and `width`/`height` for an image). A `size` of `Some(n)`
    /// states another size than the bytes' (a file the person sent larger than it is served).
    pub fn user_message_with_files(
        &self,
        channel: u64,
        guild: Option<u64>,
        author: &Value,
        text: &str,
        files: &[(&str, &str, Vec<u8>)],
    ) -> Value {
        let mut m = message(self.new_id(), channel, guild, author, text, &[]);
        let attachments: Vec<Value> = files
            .iter()
            .map(|(name, media, bytes)| {
                let id = self.new_id();
                let path = format!("{channel}/{id}/{name}");
                self.inner
                    .attachments
                    .lock()
                    .unwrap()
                    .insert(path.clone(), ((*media).to_owned(), bytes.clone()));
                let mut a = serde_json::json!({
                    "id": id.to_string(),
                    "filename": name,
                    "size": bytes.len(),
                    "url": format!("{}/attachments/{path}?ex=6a1b2c3d&is=6a1a0000&hm=00ff", self.api_url),
                    "proxy_url": format!("{}/attachments/{path}", self.api_url),
                    "content_type": media,
                });
                if media.starts_with("image/") {
                    a["width"] = 1.into();
                    a["height"] = 1.into();
                }
                a
            })
            .collect();
        m["attachments"] = Value::Array(attachments);
        self.inner
            .messages
            .lock()
            .unwrap()
            .insert(m["id"].as_str().unwrap_or_default().to_owned(), m.clone());
        m
    }

    /// Registers an interaction payload delivered some other way than the gateway (e.g. posted
    /// to the interactions endpoint, whose HTTP response is its answer: `responded`), so its
    /// token answers followups.
    pub fn register_interaction(&self, payload: &Value, responded: bool) {
        self.inner.issue(payload, responded);
    }

    /// The identify payloads received (`d` of op 2).
    pub fn identifies(&self) -> Vec<Value> {
        self.inner.identifies.lock().unwrap().clone()
    }

    /// How many heartbeats (op 1) were acknowledged.
    pub fn heartbeats(&self) -> u64 {
        self.inner.heartbeats.load(Ordering::SeqCst)
    }

    /// Sends a dispatch (op 0) `t` with data `d` to the identified sessions that Discord sends
    /// it to: with a `guild_id`, each session whose shard `[id, total]` has
    /// `(guild_id >> 22) % total == id`; without (a DM), each session of shard 0 — so with
    /// unsharded sessions (`[0, 1]`), every one. Returns the time it was handed to the sockets.
    /// A guild's dispatches are counted per session reached ([`FakeDiscord::deliveries`]). An
    /// `INTERACTION_CREATE` is registered first (its token then answers one callback and
    /// followups).
    pub fn dispatch(&self, t: &str, d: Value) -> Instant {
        if t == "INTERACTION_CREATE" {
            self.inner.issue(&d, false);
        }
        let guild = d["guild_id"].as_str().and_then(|g| g.parse::<u64>().ok());
        let seq = self.inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let text = json!({"op": 0, "s": seq, "t": t, "d": d}).to_string();
        let at = Instant::now();
        let mut reached = 0;
        self.inner.sessions.lock().unwrap().retain(|s| {
            if !s.receives(guild) {
                return true;
            }
            let sent = s.tx.send(text.clone()).is_ok();
            reached += u64::from(sent);
            sent
        });
        if let Some(g) = guild {
            *self.inner.deliveries.lock().unwrap().entry(g).or_default() += reached;
        }
        at
    }

    /// Sends a raw text frame to every identified session (for malformed payloads).
    pub fn send_raw(&self, text: &str) -> Instant {
        let at = Instant::now();
        self.inner
            .sessions
            .lock()
            .unwrap()
            .retain(|s| s.tx.send(text.to_owned()).is_ok());
        at
    }

    /// Makes `GET /gateway/bot` recommend `shards` shards (1 until set).
    pub fn set_shards(&self, shards: u64) {
        self.inner.shards.store(shards, Ordering::SeqCst);
    }

    /// The shards (`[id, total]`) of the identified sessions still connected, sorted (a shard
    /// twice when two sessions identified as it).
    pub fn live_shards(&self) -> Vec<(u64, u64)> {
        let mut shards: Vec<_> = self
            .inner
            .sessions
            .lock()
            .unwrap()
            .iter()
            .filter(|s| !s.tx.is_closed())
            .map(|s| s.shard)
            .collect();
        shards.sort_unstable();
        shards
    }

    /// Waits until the live sessions are exactly shards `0..total` of `total`, once each (every
    /// guild reaches one session), or `timeout` passes (then `false`).
    pub async fn wait_shards_covered(&self, total: u64, timeout: Duration) -> bool {
        let want: Vec<(u64, u64)> = (0..total).map(|id| (id, total)).collect();
        self.wait_until(timeout, || self.live_shards() == want)
            .await
    }

    /// How many sessions the dispatches of `guild` were handed to, all told.
    pub fn deliveries(&self, guild: u64) -> u64 {
        self.inner
            .deliveries
            .lock()
            .unwrap()
            .get(&guild)
            .copied()
            .unwrap_or(0)
    }

    /// The shard (of `total`) that receives `guild`'s events: `(guild_id >> 22) % total`.
    pub fn shard_of(guild: u64, total: u64) -> u64 {
        (guild >> 22) % total.max(1)
    }
}
