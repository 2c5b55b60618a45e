//! Socket Mode: the fake's WebSocket server, which greets an app with `hello`, and
//! [`SocketConnection`], one app's connection (envelopes sent to it, acknowledgements read back).

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::APP;

/// One Socket Mode connection an app opened: envelopes to send it, acknowledgements it sent.
#[derive(Debug)]
pub struct SocketConnection {
    send: mpsc::UnboundedSender<String>,
    recv: mpsc::UnboundedReceiver<String>,
    seq: u64,
}

impl SocketConnection {
    /// Sends an envelope of `kind` (`events_api`, `interactive`, …) carrying `payload`; returns
    /// its `envelope_id`.
    pub fn send(&mut self, kind: &str, payload: Value) -> String {
        self.seq += 1;
        let id = format!("fake-envelope-{}", self.seq);
        self.send_envelope(&id, kind, payload);
        id
    }

    /// Sends an envelope with a given id.
    pub fn send_envelope(&self, id: &str, kind: &str, payload: Value) {
        self.send_frame(
            json!({"envelope_id": id, "type": kind, "accepts_response_payload": kind != "events_api",
                   "retry_attempt": 0, "retry_reason": "", "payload": payload})
            .to_string(),
        );
    }

    /// Sends a raw text frame (e.g. `{"type": "disconnect", …}`).
    pub fn send_frame(&self, frame: String) {
        let _ = self.send.send(frame);
    }

    /// The next frame the app sends (an acknowledgement `{"envelope_id": …}`), within 20 s.
    pub async fn ack(&mut self) -> Value {
        let frame = tokio::time::timeout(Duration::from_secs(20), self.recv.recv())
            .await
            .expect("an acknowledgement in time")
            .expect("the socket is open");
        serde_json::from_str(&frame).expect("an acknowledgement is JSON")
    }
}

pub(super) async fn ws_server(
    listener: tokio::net::TcpListener,
    conns: mpsc::UnboundedSender<SocketConnection>,
) {
    while let Ok((tcp, _)) = listener.accept().await {
        let conns = conns.clone();
        tokio::spawn(async move {
            let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            let (mut sink, mut stream) = ws.split();
            let (to_app, mut outbox) = mpsc::unbounded_channel::<String>();
            let (from_app, inbox) = mpsc::unbounded_channel::<String>();
            let hello = json!({
                "type": "hello", "num_connections": 1,
                "debug_info": {"host": "applink-fake", "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP}
            });
            if sink.send(WsMessage::text(hello.to_string())).await.is_err() {
                return;
            }
            let _ = conns.send(SocketConnection {
                send: to_app,
                recv: inbox,
                seq: 0,
            });
            loop {
                tokio::select! {
                    out = outbox.recv() => match out {
                        Some(f) => if sink.send(WsMessage::text(f)).await.is_err() { return },
                        None => return,
                    },
                    msg = stream.next() => match msg {
                        Some(Ok(WsMessage::Text(t))) => { let _ = from_app.send(t.to_string()); }
                        Some(Ok(WsMessage::Ping(p))) => { let _ = sink.send(WsMessage::Pong(p)).await; }
                        Some(Ok(_)) => {}
                        _ => return,
                    },
                }
            }
        });
    }
}
