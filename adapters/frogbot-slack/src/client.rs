//! The thin Slack Web API client the hooks and the outbox use: the [`SlackApi`] trait, its
//! implementation over slack-morphism's [`SlackClient`] ([`SlackWebApi`]), and [`RecordingSlack`],
//! a recording implementation for unit tests.

use std::sync::Arc;

use async_trait::async_trait;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

use crate::Error;

/// The Slack Web API calls the hooks need.
#[async_trait]
pub trait SlackApi: Send + Sync {
    /// `chat.postMessage` (`blocks` empty: a plain text message); returns the new message's `ts`.
    async fn post_message(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        blocks: Vec<SlackBlock>,
        text: &str,
    ) -> Result<String, Error>;

    /// `chat.update`.
    async fn update_message(
        &self,
        channel: &str,
        ts: &str,
        blocks: Vec<SlackBlock>,
        text: &str,
    ) -> Result<(), Error>;

    /// `chat.postEphemeral`.
    async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<(), Error>;

    /// `views.open`.
    async fn open_view(&self, trigger_id: &str, view: SlackView) -> Result<(), Error>;

    /// `reactions.add`: the bot reacts with the emoji `name` (`eyes`, no colons) to the message
    /// `ts`; `already_reacted` counts as done.
    async fn add_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), Error>;

    /// `reactions.remove`: the bot's reaction `name` on the message `ts` goes; `no_reaction`
    /// counts as done.
    async fn remove_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), Error>;

    /// `chat.startStream`: starts a streamed reply in the thread `thread_ts` showing `markdown`
    /// (Markdown, at most 12,000 characters); `recipient` (user, team) is who the stream is for,
    /// which Slack requires outside DMs. Returns the streaming message's `ts`.
    async fn start_stream(
        &self,
        channel: &str,
        thread_ts: &str,
        recipient: Option<(&str, &str)>,
        markdown: &str,
    ) -> Result<String, Error>;

    /// `chat.appendStream`: appends `markdown` to the streaming message `ts`.
    async fn append_stream(&self, channel: &str, ts: &str, markdown: &str) -> Result<(), Error>;

    /// `chat.stopStream`: finalises the streaming message `ts`.
    async fn stop_stream(&self, channel: &str, ts: &str) -> Result<(), Error>;

    /// `assistant.threads.setStatus`: the status line of an assistant thread (`""` clears it).
    async fn set_status(&self, channel: &str, thread_ts: &str, status: &str) -> Result<(), Error>;

    /// `conversations.replies`: the messages of the thread `ts` before `latest` (exclusive),
    /// oldest first, at most `limit` (the oldest ones: Slack pages from the start).
    async fn replies(
        &self,
        channel: &str,
        ts: &str,
        latest: &str,
        limit: u16,
    ) -> Result<Vec<HistoryMessage>, Error>;
}

/// A thread message as `conversations.replies` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryMessage {
    /// Its `ts`.
    pub ts: String,
    /// The author's user id (`U…`), or the bot id for a bot without a user.
    pub user: String,
    /// The author's display name when Slack includes their profile (`user_profile`,
    /// `bot_profile`).
    pub name: Option<String>,
    /// Whether a bot wrote it.
    pub bot: bool,
    /// Its text (`mrkdwn`).
    pub text: String,
}

impl HistoryMessage {
    fn from_slack(m: &SlackHistoryMessage) -> Self {
        let s = &m.sender;
        let profile_name = s.user_profile.as_ref().and_then(|p| {
            [&p.display_name, &p.real_name]
                .into_iter()
                .flatten()
                .find(|n| !n.trim().is_empty())
                .cloned()
        });
        let name = profile_name
            .or_else(|| s.bot_profile.as_ref().map(|b| b.name.clone()))
            .or_else(|| s.username.clone())
            .filter(|n| !n.trim().is_empty());
        let user = s
            .user
            .as_ref()
            .map(|u| u.0.clone())
            .or_else(|| s.bot_id.as_ref().map(|b| b.0.clone()))
            .unwrap_or_default();
        Self {
            ts: m.origin.ts.0.clone(),
            user,
            name,
            bot: s.bot_id.is_some(),
            text: m.content.text.clone().unwrap_or_default(),
        }
    }
}

/// [`SlackApi`] over slack-morphism's [`SlackClient`] with a bot token.
///
/// For production use `SlackClientHyperConnector::new()` (HTTPS; install a rustls crypto provider
/// first when the build enables more than one); tests point a connector at a local fake with
/// `SlackClientHyperConnector::with_connector(..).with_slack_api_url("http://127.0.0.1:N/api")`.
pub struct SlackWebApi<C: SlackClientHttpConnector + Send + Sync> {
    client: Arc<SlackClient<C>>,
    token: SlackApiToken,
}

impl<C: SlackClientHttpConnector + Send + Sync> std::fmt::Debug for SlackWebApi<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackWebApi").finish_non_exhaustive()
    }
}

impl<C: SlackClientHttpConnector + Send + Sync> SlackWebApi<C> {
    /// A client over `connector` with the bot token `token` (`xoxb-…`).
    pub fn new(connector: C, token: &str) -> Self {
        Self::with_client(Arc::new(SlackClient::new(connector)), token)
    }

    /// Shares an existing client.
    pub fn with_client(client: Arc<SlackClient<C>>, token: &str) -> Self {
        Self {
            client,
            token: SlackApiToken::new(SlackApiTokenValue(token.to_string())),
        }
    }

    /// Who the bot is (`auth.test`): what [`crate::convert::is_own_message`] and mention
    /// detection need.
    pub async fn bot_identity(&self) -> Result<BotIdentity, Error> {
        let res = self
            .client
            .open_session(&self.token)
            .auth_test()
            .await
            .map_err(api_err("auth.test"))?;
        Ok(BotIdentity {
            user_id: res.user_id.0,
            bot_id: res.bot_id.map(|b| b.0),
            team_id: res.team_id.0,
        })
    }
}

/// The bot's own ids, from `auth.test`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotIdentity {
    /// The bot user's id (`U…`): messages from it are the bot's own; `<@U…>` mentions it.
    pub user_id: String,
    /// The bot id (`B…`).
    pub bot_id: Option<String>,
    /// The workspace.
    pub team_id: String,
}

/// `Ok` for a call that failed with Slack's error `code` (it means the call's effect is there
/// already), else the error.
fn unless_code(
    r: Result<(), SlackClientError>,
    method: &'static str,
    code: &str,
) -> Result<(), Error> {
    match r {
        Err(SlackClientError::ApiError(e)) if e.code == code => Ok(()),
        other => other.map_err(api_err(method)),
    }
}

fn api_err(method: &'static str) -> impl FnOnce(SlackClientError) -> Error {
    move |e| Error::Api {
        method,
        message: e.to_string(),
    }
}

/// A message's content: `text` alone for a plain reply (no `blocks` key), else blocks with
/// `text` as the notification fallback.
fn content(blocks: Vec<SlackBlock>, text: &str) -> SlackMessageContent {
    let c = SlackMessageContent::new().with_text(text.to_string());
    if blocks.is_empty() {
        c
    } else {
        c.with_blocks(blocks)
    }
}

#[async_trait]
impl<C: SlackClientHttpConnector + Send + Sync> SlackApi for SlackWebApi<C> {
    async fn post_message(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        blocks: Vec<SlackBlock>,
        text: &str,
    ) -> Result<String, Error> {
        let session = self.client.open_session(&self.token);
        let mut req = SlackApiChatPostMessageRequest::new(
            SlackChannelId(channel.to_string()),
            content(blocks, text),
        );
        if let Some(t) = thread_ts {
            req = req.with_thread_ts(SlackTs(t.to_string()));
        }
        let res = session
            .chat_post_message(&req)
            .await
            .map_err(api_err("chat.postMessage"))?;
        Ok(res.ts.0)
    }

    async fn update_message(
        &self,
        channel: &str,
        ts: &str,
        blocks: Vec<SlackBlock>,
        text: &str,
    ) -> Result<(), Error> {
        let session = self.client.open_session(&self.token);
        let req = SlackApiChatUpdateRequest::new(
            SlackChannelId(channel.to_string()),
            content(blocks, text),
            SlackTs(ts.to_string()),
        );
        session
            .chat_update(&req)
            .await
            .map_err(api_err("chat.update"))?;
        Ok(())
    }

    async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<(), Error> {
        let session = self.client.open_session(&self.token);
        let mut req = SlackApiChatPostEphemeralRequest::new(
            SlackChannelId(channel.to_string()),
            SlackUserId(user.to_string()),
            SlackMessageContent::new().with_text(text.to_string()),
        );
        if let Some(t) = thread_ts {
            req = req.with_thread_ts(SlackTs(t.to_string()));
        }
        session
            .chat_post_ephemeral(&req)
            .await
            .map_err(api_err("chat.postEphemeral"))?;
        Ok(())
    }

    async fn open_view(&self, trigger_id: &str, view: SlackView) -> Result<(), Error> {
        let session = self.client.open_session(&self.token);
        let req = SlackApiViewsOpenRequest::new(SlackTriggerId(trigger_id.to_string()), view);
        session
            .views_open(&req)
            .await
            .map_err(api_err("views.open"))?;
        Ok(())
    }

    async fn add_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), Error> {
        let session = self.client.open_session(&self.token);
        let req = SlackApiReactionsAddRequest::new(
            SlackChannelId(channel.to_string()),
            SlackReactionName(name.to_string()),
            SlackTs(ts.to_string()),
        );
        let r = session.reactions_add(&req).await.map(drop);
        unless_code(r, "reactions.add", "already_reacted")
    }

    async fn remove_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), Error> {
        let session = self.client.open_session(&self.token);
        let req = SlackApiReactionsRemoveRequest::new(SlackReactionName(name.to_string()))
            .with_channel(SlackChannelId(channel.to_string()))
            .with_timestamp(SlackTs(ts.to_string()));
        let r = session.reactions_remove(&req).await.map(drop);
        unless_code(r, "reactions.remove", "no_reaction")
    }

    async fn start_stream(
        &self,
        channel: &str,
        thread_ts: &str,
        recipient: Option<(&str, &str)>,
        markdown: &str,
    ) -> Result<String, Error> {
        let session = self.client.open_session(&self.token);
        let mut req = SlackApiChatStartStreamRequest::new(SlackChannelId(channel.to_string()))
            .with_thread_ts(SlackTs(thread_ts.to_string()))
            .with_markdown_text(markdown.to_string());
        if let Some((user, team)) = recipient {
            req = req
                .with_recipient_user_id(SlackUserId(user.to_string()))
                .with_recipient_team_id(SlackTeamId(team.to_string()));
        }
        let res = session
            .chat_start_stream(&req)
            .await
            .map_err(api_err("chat.startStream"))?;
        Ok(res.ts.0)
    }

    async fn append_stream(&self, channel: &str, ts: &str, markdown: &str) -> Result<(), Error> {
        let session = self.client.open_session(&self.token);
        let req = SlackApiChatAppendStreamRequest::new(
            SlackChannelId(channel.to_string()),
            SlackTs(ts.to_string()),
        )
        .with_markdown_text(markdown.to_string());
        session
            .chat_append_stream(&req)
            .await
            .map_err(api_err("chat.appendStream"))?;
        Ok(())
    }

    async fn stop_stream(&self, channel: &str, ts: &str) -> Result<(), Error> {
        let session = self.client.open_session(&self.token);
        let req = SlackApiChatStopStreamRequest::new(
            SlackChannelId(channel.to_string()),
            SlackTs(ts.to_string()),
            SlackMessageContent::new(),
        );
        session
            .chat_stop_stream(&req)
            .await
            .map_err(api_err("chat.stopStream"))?;
        Ok(())
    }

    async fn set_status(&self, channel: &str, thread_ts: &str, status: &str) -> Result<(), Error> {
        let session = self.client.open_session(&self.token);
        let req = SlackApiAssistantThreadsSetStatusRequest::new(
            SlackChannelId(channel.to_string()),
            status.to_string(),
            SlackTs(thread_ts.to_string()),
        );
        session
            .assistant_threads_set_status(&req)
            .await
            .map_err(api_err("assistant.threads.setStatus"))?;
        Ok(())
    }

    async fn replies(
        &self,
        channel: &str,
        ts: &str,
        latest: &str,
        limit: u16,
    ) -> Result<Vec<HistoryMessage>, Error> {
        let session = self.client.open_session(&self.token);
        let req = SlackApiConversationsRepliesRequest::new(
            SlackChannelId(channel.to_string()),
            SlackTs(ts.to_string()),
        )
        .with_latest(SlackTs(latest.to_string()))
        .with_inclusive(false)
        .with_limit(limit);
        let res = session
            .conversations_replies(&req)
            .await
            .map_err(api_err("conversations.replies"))?;
        Ok(res
            .messages
            .iter()
            .map(HistoryMessage::from_slack)
            .collect())
    }
}

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
