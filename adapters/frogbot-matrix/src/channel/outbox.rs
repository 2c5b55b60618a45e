//! The outbox (feature `engine`): the agent's replies, posted in the thread as `m.room.message`s
//! with the Markdown as `body` and its HTML as `formatted_body` ([`crate::format`]), split with
//! [`frogbot_model::text::split`] at [`MESSAGE_CHARS`] characters of `body` and
//! [`MAX_TEXT_BYTES`](crate::format::MAX_TEXT_BYTES) of both texts (Matrix has no message-length
//! limit of its own, only the 65,536-byte event limit).

use async_trait::async_trait;
use frogbot_core::agent::ChannelOutbox;
use frogbot_model::{BoxError, Thread, UiMessage};

use crate::client::MatrixApi;
use crate::format;
use crate::ids::split_message_id;
use crate::render::thread_message;

/// The most characters of one reply message; longer replies are split.
pub const MESSAGE_CHARS: usize = 32_000;

/// Posts the agent's replies in the thread, over any [`MatrixApi`].
#[derive(Debug)]
pub struct MatrixOutbox<A> {
    api: A,
}

impl<A: MatrixApi> MatrixOutbox<A> {
    /// An outbox sending through `api` (matrix-sdk's `Client`, or a recording one in tests).
    pub fn new(api: A) -> Self {
        Self { api }
    }

    /// The client.
    pub fn api(&self) -> &A {
        &self.api
    }
}

#[async_trait]
impl<A: MatrixApi> ChannelOutbox for MatrixOutbox<A> {
    async fn post_reply(&self, thread: &Thread, reply: &UiMessage) -> Result<(), BoxError> {
        let parts = format::messages(&reply.text(), MESSAGE_CHARS);
        if parts.is_empty() {
            return Ok(());
        }
        let (room, root) = split_message_id(&thread.id)?;
        for part in parts {
            let (event_type, mut content) = thread_message(&part.body, &root)?;
            part.add_to(&mut content);
            self.api.send(&room, event_type, content).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::RecordingMatrix;

    fn thread() -> Thread {
        Thread {
            id: "!r:localhost|$root".into(),
            platform: "matrix".into(),
            chat_id: "matrix-x".into(),
        }
    }

    fn reply(text: &str) -> UiMessage {
        serde_json::from_value(serde_json::json!({
            "id": "m1", "role": "assistant", "parts": [{"type": "text", "text": text}]
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn long_replies_are_split_in_the_thread_and_blank_ones_send_nothing() {
        let outbox = MatrixOutbox::new(RecordingMatrix::new());
        outbox.post_reply(&thread(), &reply("  \n ")).await.unwrap();
        assert!(outbox.api().sent().is_empty());
        let long = "word ".repeat(MESSAGE_CHARS / 5 * 2 + 10);
        outbox.post_reply(&thread(), &reply(&long)).await.unwrap();
        let sent = outbox.api().sent();
        // 64,050 characters: 4 parts of at most 18,000 (body and HTML keep the event's bytes).
        assert_eq!(sent.len(), 4, "{} chars in 4 parts", long.len());
        for s in &sent {
            assert_eq!(s.event_type, "m.room.message");
            assert_eq!(s.content["m.relates_to"]["rel_type"], "m.thread");
            assert_eq!(s.content["m.relates_to"]["event_id"], "$root");
            assert!(s.content["body"].as_str().unwrap().chars().count() <= MESSAGE_CHARS);
            assert!(serde_json::to_string(&s.content).unwrap().len() < 45_000);
        }
    }

    #[tokio::test]
    async fn replies_carry_the_markdown_as_body_and_its_html_as_formatted_body() {
        let outbox = MatrixOutbox::new(RecordingMatrix::new());
        let text = "**Hi** <b>there</b> & [docs](https://x.io)\n\n```sh\nls\n```";
        outbox.post_reply(&thread(), &reply(text)).await.unwrap();
        let sent = outbox.api().sent();
        assert_eq!(sent.len(), 1);
        let c = &sent[0].content;
        assert_eq!(c["msgtype"], "m.text");
        assert_eq!(c["body"], text);
        assert_eq!(c["format"], "org.matrix.custom.html");
        assert_eq!(
            c["formatted_body"],
            "<p><strong>Hi</strong> &lt;b&gt;there&lt;/b&gt; &amp; \
             <a href=\"https://x.io\">docs</a></p>\n\
             <pre><code class=\"language-sh\">ls\n</code></pre>"
        );
        assert_eq!(c["m.relates_to"]["rel_type"], "m.thread");
    }
}
