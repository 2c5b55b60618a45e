//! [`RecordingSlack`]: a [`SlackApi`] for unit tests that records every call ([`SlackCall`]) and
//! answers with canned ids, without a server.

use async_trait::async_trait;
use slack_morphism::prelude::*;

use crate::Error;
use crate::client::{HistoryMessage, SlackApi};

/// A call [`RecordingSlack`] received.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SlackCall {
    /// `chat.postMessage`.
    PostMessage {
        /// The conversation.
        channel: String,
        /// The thread, if any.
        thread_ts: Option<String>,
        /// The blocks, as JSON.
        blocks: serde_json::Value,
        /// The notification text.
        text: String,
    },
    /// `chat.postMessage` of a reply's piece with its metadata key.
    PostKeyed {
        /// The conversation.
        channel: String,
        /// The thread.
        thread_ts: String,
        /// The text.
        text: String,
        /// The metadata's `event_type`.
        event_type: String,
        /// The metadata's `event_payload.key`.
        key: String,
    },
    /// `chat.postMessage` of an ask's first message with its metadata key.
    PostRootKeyed {
        /// The conversation.
        channel: String,
        /// The text.
        text: String,
        /// The metadata's `event_type`.
        event_type: String,
        /// The metadata's `event_payload.key`.
        key: String,
    },
    /// `conversations.history` with `include_all_metadata`.
    FindKeyedRoot {
        /// The conversation.
        channel: String,
        /// The key looked for.
        key: String,
    },
    /// `conversations.open`.
    OpenDm {
        /// The user.
        user: String,
    },
    /// `conversations.replies` with `include_all_metadata`.
    ThreadKeys {
        /// The conversation.
        channel: String,
        /// The thread.
        thread_ts: String,
    },
    /// `chat.postMessage` of blocks with a metadata key.
    PostBlocksKeyed {
        /// The conversation.
        channel: String,
        /// The thread.
        thread_ts: String,
        /// The blocks, as JSON.
        blocks: serde_json::Value,
        /// The notification text.
        text: String,
        /// The metadata's `event_type`.
        event_type: String,
        /// The metadata's `event_payload.key`.
        key: String,
    },
    /// `chat.delete`.
    DeleteMessage {
        /// The conversation.
        channel: String,
        /// The message.
        ts: String,
    },
    /// `pins.add` / `pins.remove`.
    Pin {
        /// The conversation.
        channel: String,
        /// The message.
        ts: String,
        /// Pinned (`pins.add`) or not (`pins.remove`).
        pinned: bool,
    },
    /// `chat.update`.
    UpdateMessage {
        /// The conversation.
        channel: String,
        /// The message.
        ts: String,
        /// The blocks, as JSON.
        blocks: serde_json::Value,
        /// The notification text.
        text: String,
    },
    /// `chat.postEphemeral`.
    PostEphemeral {
        /// The conversation.
        channel: String,
        /// Who sees it.
        user: String,
        /// The thread, if any.
        thread_ts: Option<String>,
        /// The text.
        text: String,
    },
    /// `views.open`.
    OpenView {
        /// The trigger of the click that opens it.
        trigger_id: String,
        /// The view, as JSON.
        view: serde_json::Value,
    },
    /// `reactions.add`.
    AddReaction {
        /// The conversation.
        channel: String,
        /// The message.
        ts: String,
        /// The emoji's name (`eyes`).
        name: String,
    },
    /// `reactions.remove`.
    RemoveReaction {
        /// The conversation.
        channel: String,
        /// The message.
        ts: String,
        /// The emoji's name.
        name: String,
    },
    /// `chat.startStream`.
    StartStream {
        /// The conversation.
        channel: String,
        /// The thread.
        thread_ts: String,
        /// The first Markdown.
        markdown: String,
    },
    /// `chat.appendStream`.
    AppendStream {
        /// The conversation.
        channel: String,
        /// The streaming message.
        ts: String,
        /// The Markdown appended.
        markdown: String,
    },
    /// `chat.stopStream`.
    StopStream {
        /// The conversation.
        channel: String,
        /// The streaming message.
        ts: String,
    },
    /// `assistant.threads.setStatus`.
    SetStatus {
        /// The conversation.
        channel: String,
        /// The thread.
        thread_ts: String,
        /// The status.
        status: String,
    },
    /// `conversations.replies`.
    Replies {
        /// The conversation.
        channel: String,
        /// The thread.
        ts: String,
    },
    /// `files.getUploadURLExternal` and the upload of the bytes.
    UploadFile {
        /// The file name.
        filename: String,
        /// The media type the bytes went with.
        media_type: String,
        /// The image description, if any.
        alt_txt: Option<String>,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// `files.completeUploadExternal`.
    CompleteUpload {
        /// The conversation.
        channel: String,
        /// The thread.
        thread_ts: String,
        /// The file.
        file_id: String,
        /// Its title.
        title: String,
    },
    /// `conversations.replies` looking for a file's message.
    FindFileMessage {
        /// The conversation.
        channel: String,
        /// The thread.
        thread_ts: String,
        /// The file.
        file_id: String,
    },
    /// `files.delete`.
    DeleteFile {
        /// The file.
        file_id: String,
    },
}

/// A [`SlackApi`] for unit tests: records every call and answers with canned ids (message `ts`
/// `1700000100.000001`, `…002`, … in call order), no network. For the real Web API shapes and
/// Slack's limits, use the fake of the `testing` feature.
#[derive(Debug, Default)]
pub struct RecordingSlack {
    calls: std::sync::Mutex<Vec<SlackCall>>,
}

impl RecordingSlack {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<SlackCall> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn record(&self, call: SlackCall) -> usize {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.push(call);
        calls.len()
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

#[async_trait]
impl SlackApi for RecordingSlack {
    async fn post_message(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        blocks: Vec<SlackBlock>,
        text: &str,
    ) -> Result<String, Error> {
        let n = self.record(SlackCall::PostMessage {
            channel: channel.into(),
            thread_ts: thread_ts.map(Into::into),
            blocks: to_json(&blocks),
            text: text.into(),
        });
        Ok(format!("1700000100.{n:06}"))
    }

    async fn post_keyed(
        &self,
        channel: &str,
        thread_ts: &str,
        text: &str,
        event_type: &str,
        key: &str,
    ) -> Result<String, Error> {
        let n = self.record(SlackCall::PostKeyed {
            channel: channel.into(),
            thread_ts: thread_ts.into(),
            text: text.into(),
            event_type: event_type.into(),
            key: key.into(),
        });
        Ok(format!("1700000100.{n:06}"))
    }

    async fn post_root_keyed(
        &self,
        channel: &str,
        text: &str,
        event_type: &str,
        key: &str,
    ) -> Result<String, Error> {
        let n = self.record(SlackCall::PostRootKeyed {
            channel: channel.into(),
            text: text.into(),
            event_type: event_type.into(),
            key: key.into(),
        });
        Ok(format!("1700000100.{n:06}"))
    }

    /// The `ts` of the last root recorded in that channel with that `event_type` and `key`.
    async fn find_keyed_root(
        &self,
        channel: &str,
        event_type: &str,
        key: &str,
        _oldest: &str,
        _limit: u16,
    ) -> Result<Option<String>, Error> {
        let found = self
            .calls()
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c {
                SlackCall::PostRootKeyed {
                    channel: c,
                    event_type: e,
                    key: k,
                    ..
                } if c == channel && e == event_type && k == key => {
                    Some(format!("1700000100.{:06}", i + 1))
                }
                _ => None,
            })
            .next_back();
        self.record(SlackCall::FindKeyedRoot {
            channel: channel.into(),
            key: key.into(),
        });
        Ok(found)
    }

    /// `D` and the user id without its first letter.
    async fn open_dm(&self, user: &str) -> Result<String, Error> {
        self.record(SlackCall::OpenDm { user: user.into() });
        Ok(format!("D{}", user.get(1..).unwrap_or_default()))
    }

    /// `(key, ts)` of the pieces recorded in that thread with that `event_type`.
    async fn thread_keyed(
        &self,
        channel: &str,
        thread_ts: &str,
        event_type: &str,
    ) -> Result<Vec<(String, String)>, Error> {
        let keys = self
            .calls()
            .into_iter()
            .enumerate()
            .filter_map(|(i, c)| match c {
                SlackCall::PostKeyed {
                    channel: c,
                    thread_ts: t,
                    event_type: e,
                    key,
                    ..
                }
                | SlackCall::PostBlocksKeyed {
                    channel: c,
                    thread_ts: t,
                    event_type: e,
                    key,
                    ..
                } if c == channel && t == thread_ts && e == event_type => {
                    Some((key, format!("1700000100.{:06}", i + 1)))
                }
                _ => None,
            })
            .collect();
        self.record(SlackCall::ThreadKeys {
            channel: channel.into(),
            thread_ts: thread_ts.into(),
        });
        Ok(keys)
    }

    async fn post_blocks_keyed(
        &self,
        channel: &str,
        thread_ts: &str,
        blocks: Vec<SlackBlock>,
        text: &str,
        event_type: &str,
        key: &str,
    ) -> Result<String, Error> {
        let n = self.record(SlackCall::PostBlocksKeyed {
            channel: channel.into(),
            thread_ts: thread_ts.into(),
            blocks: to_json(&blocks),
            text: text.into(),
            event_type: event_type.into(),
            key: key.into(),
        });
        Ok(format!("1700000100.{n:06}"))
    }

    async fn delete_message(&self, channel: &str, ts: &str) -> Result<(), Error> {
        self.record(SlackCall::DeleteMessage {
            channel: channel.into(),
            ts: ts.into(),
        });
        Ok(())
    }

    async fn pin_message(&self, channel: &str, ts: &str, pinned: bool) -> Result<(), Error> {
        self.record(SlackCall::Pin {
            channel: channel.into(),
            ts: ts.into(),
            pinned,
        });
        Ok(())
    }

    async fn update_message(
        &self,
        channel: &str,
        ts: &str,
        blocks: Vec<SlackBlock>,
        text: &str,
    ) -> Result<(), Error> {
        self.record(SlackCall::UpdateMessage {
            channel: channel.into(),
            ts: ts.into(),
            blocks: to_json(&blocks),
            text: text.into(),
        });
        Ok(())
    }

    async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<(), Error> {
        self.record(SlackCall::PostEphemeral {
            channel: channel.into(),
            user: user.into(),
            thread_ts: thread_ts.map(Into::into),
            text: text.into(),
        });
        Ok(())
    }

    async fn open_view(&self, trigger_id: &str, view: SlackView) -> Result<(), Error> {
        self.record(SlackCall::OpenView {
            trigger_id: trigger_id.into(),
            view: to_json(&view),
        });
        Ok(())
    }

    async fn add_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), Error> {
        self.record(SlackCall::AddReaction {
            channel: channel.into(),
            ts: ts.into(),
            name: name.into(),
        });
        Ok(())
    }

    async fn remove_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), Error> {
        self.record(SlackCall::RemoveReaction {
            channel: channel.into(),
            ts: ts.into(),
            name: name.into(),
        });
        Ok(())
    }

    async fn start_stream(
        &self,
        channel: &str,
        thread_ts: &str,
        _recipient: Option<(&str, &str)>,
        markdown: &str,
    ) -> Result<String, Error> {
        let n = self.record(SlackCall::StartStream {
            channel: channel.into(),
            thread_ts: thread_ts.into(),
            markdown: markdown.into(),
        });
        Ok(format!("1700000100.{n:06}"))
    }

    async fn append_stream(&self, channel: &str, ts: &str, markdown: &str) -> Result<(), Error> {
        self.record(SlackCall::AppendStream {
            channel: channel.into(),
            ts: ts.into(),
            markdown: markdown.into(),
        });
        Ok(())
    }

    async fn stop_stream(&self, channel: &str, ts: &str) -> Result<(), Error> {
        self.record(SlackCall::StopStream {
            channel: channel.into(),
            ts: ts.into(),
        });
        Ok(())
    }

    async fn set_status(&self, channel: &str, thread_ts: &str, status: &str) -> Result<(), Error> {
        self.record(SlackCall::SetStatus {
            channel: channel.into(),
            thread_ts: thread_ts.into(),
            status: status.into(),
        });
        Ok(())
    }

    async fn replies(
        &self,
        channel: &str,
        ts: &str,
        _latest: &str,
        _limit: u16,
    ) -> Result<Vec<HistoryMessage>, Error> {
        self.record(SlackCall::Replies {
            channel: channel.into(),
            ts: ts.into(),
        });
        Ok(Vec::new())
    }

    /// Answers the file id `F{n}` (`n` the call's number).
    async fn upload_file(
        &self,
        file: &frogbot_channel::files::OutFile,
        alt_txt: Option<&str>,
    ) -> Result<String, Error> {
        let bytes = file.bytes().await.map_err(|e| Error::Api {
            method: "files.upload_url",
            message: e.to_string(),
        })?;
        let n = self.record(SlackCall::UploadFile {
            filename: file.filename.clone(),
            media_type: file.media_type.clone(),
            alt_txt: alt_txt.map(Into::into),
            bytes,
        });
        Ok(format!("F{n:08}"))
    }

    async fn complete_upload(
        &self,
        channel: &str,
        thread_ts: &str,
        file_id: &str,
        title: &str,
    ) -> Result<(), Error> {
        self.record(SlackCall::CompleteUpload {
            channel: channel.into(),
            thread_ts: thread_ts.into(),
            file_id: file_id.into(),
            title: title.into(),
        });
        Ok(())
    }

    /// Finds nothing.
    async fn find_file_message(
        &self,
        channel: &str,
        thread_ts: &str,
        file_id: &str,
    ) -> Result<Option<String>, Error> {
        self.record(SlackCall::FindFileMessage {
            channel: channel.into(),
            thread_ts: thread_ts.into(),
            file_id: file_id.into(),
        });
        Ok(None)
    }

    async fn delete_file(&self, file_id: &str) -> Result<(), Error> {
        self.record(SlackCall::DeleteFile {
            file_id: file_id.into(),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_recorder_records_and_answers_in_order() {
        let r = RecordingSlack::new();
        assert_eq!(
            r.post_message("C1", Some("1.0"), vec![], "hi")
                .await
                .unwrap(),
            "1700000100.000001"
        );
        r.post_ephemeral("C1", "U1", None, "psst").await.unwrap();
        let calls = r.calls();
        assert_eq!(calls.len(), 2);
        assert!(matches!(&calls[1], SlackCall::PostEphemeral { user, .. } if user == "U1"));
    }
}
