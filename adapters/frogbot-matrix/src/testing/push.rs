//! What the fake homeserver sends the bot: `/sync` (the push side), and people's events
//! injected into its rooms.

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use matrix_sdk::ruma::{OwnedEventId, RoomId, UserId};
use serde_json::{Value, json};

use super::state::{FakeHomeserver, St};

fn token(pos: u64) -> String {
    format!("s{pos}")
}

pub(super) async fn sync(State(s): St, Query(q): Query<HashMap<String, String>>) -> Json<Value> {
    let since: Option<u64> = q
        .get("since")
        .and_then(|t| t.strip_prefix('s'))
        .and_then(|t| t.parse().ok());
    let timeout = q
        .get("timeout")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0u64)
        .min(30_000);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout);
    loop {
        let changed = s.changed.notified();
        {
            let inner = s.lock();
            let pos = inner.events.len() as u64;
            let mut join = serde_json::Map::new();
            match since {
                // The first sync: the rooms and their state, no history.
                None => {
                    for room in inner.rooms.keys() {
                        let state: Vec<&Value> = inner
                            .events
                            .iter()
                            .filter(|e| &e.room == room && e.event.get("state_key").is_some())
                            .map(|e| &e.event)
                            .collect();
                        join.insert(
                            room.to_string(),
                            json!({"state": {"events": state},
                                   "timeline": {"events": [], "limited": false, "prev_batch": token(pos)}}),
                        );
                    }
                }
                Some(since) => {
                    for e in inner.events.iter().skip(since as usize) {
                        let entry = join.entry(e.room.to_string()).or_insert_with(|| {
                            json!({"timeline": {"events": [], "limited": false, "prev_batch": token(since)}})
                        });
                        if let Some(events) = entry["timeline"]["events"].as_array_mut() {
                            events.push(e.event.clone());
                        }
                    }
                }
            }
            if since.is_none() || !join.is_empty() || tokio::time::Instant::now() >= deadline {
                return Json(json!({"next_batch": token(pos), "rooms": {"join": join}}));
            }
        }
        let _ = tokio::time::timeout_at(deadline, changed).await;
    }
}

impl FakeHomeserver {
    /// Injects an event `sender` sends to `room` (the bot receives it through `/sync`); returns
    /// its id.
    pub fn inject(
        &self,
        room: &RoomId,
        sender: &UserId,
        event_type: &str,
        content: Value,
    ) -> OwnedEventId {
        let id = self
            .shared
            .append(room, sender, event_type, json!({"content": content}));
        OwnedEventId::try_from(id).expect("an event id")
    }
}
