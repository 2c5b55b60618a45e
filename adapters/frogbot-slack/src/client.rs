//! The thin Slack Web API client the hooks and the outbox use: the [`SlackApi`] trait and its
//! implementation over slack-morphism's [`SlackClient`] ([`SlackWebApi`]). A recording
//! implementation for unit tests is `testing::RecordingSlack` (feature `testing`).

use std::ops::ControlFlow;
use std::sync::Arc;

use async_trait::async_trait;
use slack_morphism::errors::{
    SlackClientError, SlackClientHttpError, SlackClientHttpProtocolError, SlackRateLimitError,
};
use slack_morphism::prelude::*;

use frogbot_channel::files::OutFile;
use frogbot_channel::retry::Failure;
use frogbot_model::Transient;

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

    /// `chat.postMessage` of a plain text reply in the thread `thread_ts`, carrying the message
    /// metadata `{"event_type": event_type, "event_payload": {"key": key}}` (how a retried
    /// delivery finds the pieces an earlier attempt posted, [`SlackApi::thread_keyed`]); returns
    /// the new message's `ts`.
    async fn post_keyed(
        &self,
        channel: &str,
        thread_ts: &str,
        text: &str,
        event_type: &str,
        key: &str,
    ) -> Result<String, Error> {
        self.post_blocks_keyed(channel, thread_ts, Vec::new(), text, event_type, key)
            .await
    }

    /// `chat.postMessage` of a plain text message at the top of `channel` (it starts a thread),
    /// carrying the message metadata `{"event_type": event_type, "event_payload": {"key": key}}`
    /// (how a retried ask finds the root an earlier attempt posted, [`SlackApi::find_keyed_root`]);
    /// returns the new message's `ts`.
    async fn post_root_keyed(
        &self,
        channel: &str,
        text: &str,
        event_type: &str,
        key: &str,
    ) -> Result<String, Error>;

    /// `conversations.history` of `channel` with `include_all_metadata=true`, one page: at most
    /// `limit` top-level messages posted after `oldest` (a `ts`), newest first. The `ts` of the
    /// newest one whose metadata is `{"event_type": event_type, "event_payload": {"key": key}}`
    /// (see [`SlackApi::post_root_keyed`]), if any.
    async fn find_keyed_root(
        &self,
        channel: &str,
        event_type: &str,
        key: &str,
        oldest: &str,
        limit: u16,
    ) -> Result<Option<String>, Error>;

    /// `conversations.open` with `users=user`: the direct message conversation with `user`
    /// (`D…`), opened if it was not (Slack answers with the same one every time).
    async fn open_dm(&self, user: &str) -> Result<String, Error>;

    /// `conversations.replies` with `include_all_metadata=true`, every page: `(key, ts)` of the
    /// thread's messages whose metadata has `event_type`, in thread order (how a retried
    /// [`SlackApi::post_keyed`] or [`SlackApi::post_blocks_keyed`] finds the messages an earlier
    /// attempt posted).
    async fn thread_keyed(
        &self,
        channel: &str,
        thread_ts: &str,
        event_type: &str,
    ) -> Result<Vec<(String, String)>, Error>;

    /// `chat.postMessage` of `blocks` (with `text` as the notification fallback) in the thread
    /// `thread_ts`, carrying the message metadata `{"event_type": event_type, "event_payload":
    /// {"key": key}}`; returns the new message's `ts`.
    async fn post_blocks_keyed(
        &self,
        channel: &str,
        thread_ts: &str,
        blocks: Vec<SlackBlock>,
        text: &str,
        event_type: &str,
        key: &str,
    ) -> Result<String, Error>;

    /// `chat.delete` of the bot's message `ts`; `message_not_found` counts as done (it is gone).
    async fn delete_message(&self, channel: &str, ts: &str) -> Result<(), Error>;

    /// `pins.add` (`pinned`) or `pins.remove` of the message `ts`; `already_pinned` and `no_pin`
    /// count as done.
    async fn pin_message(&self, channel: &str, ts: &str, pinned: bool) -> Result<(), Error>;

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

    /// The first two steps of Slack's external upload: `files.getUploadURLExternal` (`filename`,
    /// `length`, `alt_txt` when given: an image's description for screen readers), then the
    /// file's bytes `POST`ed to the `upload_url` it answered (as the raw body, `Content-Type`
    /// its media type, streamed from [`OutFile::open`] and read anew for each attempt). Returns the new file's id (`F…`), not shared yet
    /// ([`SlackApi::complete_upload`]); an upload never completed is discarded by Slack.
    async fn upload_file(&self, file: &OutFile, alt_txt: Option<&str>) -> Result<String, Error>;

    /// `files.completeUploadExternal` of the uploaded file `file_id` (`files=[{"id", "title"}]`)
    /// with `channel_id` and `thread_ts`: Slack shares it as a new message in that thread.
    /// Slack takes it once per file: not repeated by the client's own retries.
    async fn complete_upload(
        &self,
        channel: &str,
        thread_ts: &str,
        file_id: &str,
        title: &str,
    ) -> Result<(), Error>;

    /// `conversations.replies`, every page: the `ts` of the thread's first message that carries
    /// the file `file_id` (its `files[].id`), if any.
    async fn find_file_message(
        &self,
        channel: &str,
        thread_ts: &str,
        file_id: &str,
    ) -> Result<Option<String>, Error>;

    /// `files.delete` of the bot's file `file_id` (its messages go with it); `file_not_found`
    /// and `file_deleted` count as done.
    async fn delete_file(&self, file_id: &str) -> Result<(), Error>;

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

/// How [`SlackWebApi`] retries a call by itself: at most `attempts` calls in all; a failure
/// worth retrying ([`Error::Unavailable`]) is retried after Slack's `Retry-After` (a 429) or a
/// short backoff (250 ms, then 500 ms, …) — unless Slack asked to wait longer than `max_wait`
/// (the error goes up, carrying the wait, and the caller's own retry waits it out), or the call
/// may have been carried out (a timeout, a reset after sending) and repeating it is not
/// harmless (`chat.postMessage`, `chat.postEphemeral`, `views.open`, `chat.startStream`,
/// `chat.appendStream`, `files.completeUploadExternal`). Calls whose repetition is harmless
/// (`chat.update`, `chat.delete`, pins, reactions, `chat.stopStream`, statuses,
/// `conversations.open`, `files.getUploadURLExternal`, the upload of a file's bytes,
/// `files.delete`, reads) are retried on any such failure.
///
/// The policy is frogbot-channel's one [`RetryPolicy`]; its default is Slack's: three calls,
/// 250 ms then 500 ms apart, a `Retry-After` up to 10 s waited out.
pub use frogbot_channel::RetryPolicy;

/// How long [`SlackWebApi`] waits for an answer by default.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The name the upload of a file's bytes to its `upload_url` goes by in errors, logs and metrics
/// (it is no Web API method).
pub const UPLOAD_STEP: &str = "files.upload_url";

/// The message metadata `event_type` of a reply's pieces ([`SlackApi::post_keyed`]).
pub const DELIVERY_EVENT_TYPE: &str = "frogbot_delivery";

/// The message metadata `event_type` of an ask's first message ([`SlackApi::post_root_keyed`]).
pub const ASK_EVENT_TYPE: &str = "frogbot_ask";

/// The most pages of a thread [`SlackApi::thread_keyed`] reads (1,000 messages each).
const MAX_REPLY_PAGES: usize = 20;

/// A Web API method as [`SlackWebApi`] runs it: its name; whether repeating a call that may have
/// been carried out is harmless (see [`RetryPolicy`]); Slack's error codes that mean the call's
/// effect is there already (it counts as done).
#[derive(Clone, Copy)]
struct Method {
    name: &'static str,
    harmless: bool,
    done: &'static [&'static str],
}

/// A method whose repetition is harmless; `done`: see [`Method`].
const fn harmless(name: &'static str, done: &'static [&'static str]) -> Method {
    Method {
        name,
        harmless: true,
        done,
    }
}

/// A method whose call, when it may have been carried out, is not repeated.
const fn once(name: &'static str) -> Method {
    Method {
        name,
        harmless: false,
        done: &[],
    }
}

const POST_MESSAGE: Method = once("chat.postMessage");
const POST_EPHEMERAL: Method = once("chat.postEphemeral");
const OPEN_VIEW: Method = once("views.open");
const START_STREAM: Method = once("chat.startStream");
const APPEND_STREAM: Method = once("chat.appendStream");
const COMPLETE_UPLOAD: Method = once("files.completeUploadExternal");
const UPDATE_MESSAGE: Method = harmless("chat.update", &[]);
const DELETE_MESSAGE: Method = harmless("chat.delete", &["message_not_found"]);
const ADD_PIN: Method = harmless("pins.add", &["already_pinned"]);
const REMOVE_PIN: Method = harmless("pins.remove", &["no_pin"]);
const ADD_REACTION: Method = harmless("reactions.add", &["already_reacted"]);
const REMOVE_REACTION: Method = harmless("reactions.remove", &["no_reaction"]);
const STOP_STREAM: Method = harmless("chat.stopStream", &[NOT_STREAMING]);
const SET_STATUS: Method = harmless("assistant.threads.setStatus", &[]);
const GET_UPLOAD_URL: Method = harmless("files.getUploadURLExternal", &[]);
const DELETE_FILE: Method = harmless("files.delete", &["file_not_found", "file_deleted"]);
const OPEN_CONVERSATION: Method = harmless("conversations.open", &[]);
const REPLIES: Method = harmless("conversations.replies", &[]);
const AUTH_TEST: Method = harmless("auth.test", &[]);

/// [`SlackApi`] over slack-morphism's [`SlackClient`] with a bot token.
///
/// Every call is bounded by a timeout ([`DEFAULT_TIMEOUT`], [`SlackWebApi::with_timeout`]) and
/// retried by the [`RetryPolicy`]; a failure worth retrying comes back as
/// [`Error::Unavailable`] (a [`Transient`] in the source chain), any other as [`Error::Api`].
///
/// For production use `SlackClientHyperConnector::new()` (HTTPS; install a rustls crypto provider
/// first when the build enables more than one); tests point a connector at a local fake with
/// `SlackClientHyperConnector::with_connector(..).with_slack_api_url("http://127.0.0.1:N/api")`.
pub struct SlackWebApi<C: SlackClientHttpConnector + Send + Sync> {
    client: Arc<SlackClient<C>>,
    token: SlackApiToken,
    timeout: std::time::Duration,
    retry: RetryPolicy,
    /// The configured Web API base, whose host the bot token may go to besides Slack's own.
    api_url: Option<String>,
    /// The guarded client a file's bytes are streamed to its upload URL through.
    files: Arc<frogbot_channel::files::Downloads>,
}

impl<C: SlackClientHttpConnector + Send + Sync> std::fmt::Debug for SlackWebApi<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackWebApi")
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
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
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            api_url: None,
            files: Arc::default(),
        }
    }

    /// Uploads go through `files` (its policy: which addresses an upload URL may be on; public
    /// ones only by default) instead of a client of their own.
    #[must_use]
    pub fn with_files(mut self, files: Arc<frogbot_channel::files::Downloads>) -> Self {
        self.files = files;
        self
    }

    /// The Web API base is `api_url` (a fake, a proxy): an upload URL on its host gets the bot
    /// token like one on Slack's hosts (see [`crate::convert::slack_file_host`]); any other host
    /// never does.
    #[must_use]
    pub fn with_api_url(mut self, api_url: Option<&str>) -> Self {
        self.api_url = api_url.map(str::to_owned);
        self
    }

    /// A call without an answer after `timeout` fails ([`Error::Unavailable`], maybe done).
    #[must_use]
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retries by `retry` (see [`RetryPolicy`]).
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Runs `call` (a Web API call of `method`), each try bounded by `timeout` (the client's; a
    /// file's bytes take as long as their size needs: the transfer policy's limit), retrying by
    /// the policy; `harmless`: repeating a call that may have been carried out does no harm.
    async fn run<T, F, Fut>(
        &self,
        method: &'static str,
        harmless: bool,
        timeout: std::time::Duration,
        call: F,
    ) -> Result<T, Error>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, SlackClientError>>,
    {
        let mut retry = self.retry.start();
        loop {
            let answer = tokio::time::timeout(timeout, call()).await;
            let status = call_status(&answer);
            frogbot_channel::metrics::platform_call("slack", method, &status);
            let err = match answer {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => classify(method, e),
                Err(_) => Error::Unavailable {
                    method,
                    source: Failure::MaybeDone.mark(Transient::new(format!(
                        "{method}: no answer within {timeout:?}"
                    ))),
                },
            };
            let Some(wait) = err.transient().and_then(|t| retry.next(t, harmless)) else {
                return Err(err);
            };
            tracing::debug!(method, attempt = retry.attempts(), ?wait, error = %err, "Slack call failed; retrying");
            if matches!(status.as_str(), "429" | "ratelimited") {
                frogbot_channel::metrics::platform_rate_limit_wait("slack");
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// `chat.postMessage` of a plain text message (in the thread `thread_ts`, else at the top of
    /// the channel) with the metadata `{"event_type": event_type, "event_payload": {"key": key}}`.
    async fn post_with_metadata(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        blocks: Vec<SlackBlock>,
        text: &str,
        event_type: &str,
        key: &str,
    ) -> Result<String, Error> {
        let metadata = SlackMessageMetadata::new(event_type.to_string()).with_event_payload(
            std::collections::HashMap::from([("key".to_string(), key.to_string())]),
        );
        self.post(
            channel,
            thread_ts,
            content(blocks, text).with_metadata(metadata),
        )
        .await
    }

    /// `chat.postMessage` of `content` in the thread `thread_ts` (else at the top of the
    /// channel); the message's `ts`.
    async fn post(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        content: SlackMessageContent,
    ) -> Result<String, Error> {
        let req = SlackApiChatPostMessageRequest::new(channel.into(), content)
            .opt_thread_ts(thread_ts.map(SlackTs::from));
        let res = self
            .call(POST_MESSAGE, req, async |s, r| s.chat_post_message(r).await)
            .await?;
        Ok(res.ts.0)
    }

    /// slack-morphism's Web API call `call` (of `method`) of `req` with a session of the bot
    /// token, run by [`run`](Self::run); its answer.
    async fn call<RQ, RS>(
        &self,
        method: Method,
        req: RQ,
        call: impl AsyncFn(&SlackClientSession<'_, C>, &RQ) -> Result<RS, SlackClientError>,
    ) -> Result<RS, Error> {
        let session = self.client.open_session(&self.token);
        self.run(method.name, method.harmless, self.timeout, || {
            call(&session, &req)
        })
        .await
    }

    /// [`call`](Self::call) of a call whose answer is not needed; a failure with one of the
    /// method's `done` codes counts as done.
    async fn act<RQ, RS>(
        &self,
        method: Method,
        req: RQ,
        call: impl AsyncFn(&SlackClientSession<'_, C>, &RQ) -> Result<RS, SlackClientError>,
    ) -> Result<(), Error> {
        let session = self.client.open_session(&self.token);
        self.run(method.name, method.harmless, self.timeout, || {
            unless_code(call(&session, &req), method.done)
        })
        .await
    }

    /// A read of `method` (`GET`, harmless to repeat) with the query `params`, its answer as `T`:
    /// for what slack-morphism's requests do not carry (`include_all_metadata`).
    async fn get<T: for<'de> serde::Deserialize<'de> + Send>(
        &self,
        method: &'static str,
        params: Vec<(&str, Option<String>)>,
    ) -> Result<T, Error> {
        let session = self.client.open_session(&self.token);
        self.run(method, true, self.timeout, || {
            session.http_session_api.http_get(method, &params, None)
        })
        .await
    }

    /// The thread `thread_ts`'s messages, a page (1,000) at a time to `visit` until it breaks,
    /// for at most [`MAX_REPLY_PAGES`] pages (`conversations.replies`; message metadata only
    /// when `metadata`: `include_all_metadata`, which slack-morphism's request does not carry).
    async fn each_reply_page(
        &self,
        channel: &str,
        thread_ts: &str,
        metadata: bool,
        mut visit: impl FnMut(Vec<PageMessage>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_REPLY_PAGES {
            let params = vec![
                ("channel", Some(channel.to_string())),
                ("ts", Some(thread_ts.to_string())),
                ("include_all_metadata", metadata.then(|| "true".to_string())),
                ("limit", Some("1000".to_string())),
                ("cursor", cursor.clone()),
            ];
            let page: Page = self.get("conversations.replies", params).await?;
            cursor = page
                .response_metadata
                .and_then(|r| r.next_cursor)
                .filter(|c| !c.is_empty());
            if visit(page.messages).is_break() || !page.has_more || cursor.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// Who the bot is (`auth.test`): what [`crate::convert::is_own_message`] and mention
    /// detection need.
    pub async fn bot_identity(&self) -> Result<BotIdentity, Error> {
        let res = self
            .call(AUTH_TEST, (), async |s, _| s.auth_test().await)
            .await?;
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

/// `call`'s outcome, its answer dropped, with a failure of one of Slack's error codes `done`
/// (they mean the call's effect is there already) as `Ok`.
async fn unless_code<T>(
    call: impl std::future::Future<Output = Result<T, SlackClientError>>,
    done: &[&str],
) -> Result<(), SlackClientError> {
    match call.await {
        Err(SlackClientError::ApiError(e)) if done.contains(&e.code.as_str()) => Ok(()),
        other => other.map(drop),
    }
}

/// Whether a transport error happened before the request was sent (no connection was made).
fn not_sent(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        if e.to_string().contains("client error (Connect)") {
            return true;
        }
        next = e.source();
    }
    false
}

/// The status label of a Web API call's answer (`frogbot_platform_api_calls_total`): `200`, the HTTP
/// status of a failed answer (`429`, `503`), Slack's error code of an `ok: false` answer
/// (`channel_not_found`, `ratelimited`), `network` or `timeout`.
fn call_status<T, E>(answer: &Result<Result<T, SlackClientError>, E>) -> String {
    match answer {
        Ok(Ok(_)) => "200".into(),
        Ok(Err(SlackClientError::ApiError(a))) => a.code.clone(),
        Ok(Err(SlackClientError::RateLimitError(_))) => "429".into(),
        Ok(Err(SlackClientError::HttpError(h))) => h.status_code.as_u16().to_string(),
        Ok(Err(
            SlackClientError::HttpProtocolError(_)
            | SlackClientError::SystemError(_)
            | SlackClientError::EndOfStream(_),
        )) => "network".into(),
        Ok(Err(_)) => "error".into(),
        Err(_) => "timeout".into(),
    }
}

/// An upload URL's answer as slack-morphism's error (what [`classify`] reads): 2xx is done, a
/// 429 is a rate limit with its `Retry-After`, any other status an HTTP error with its body's
/// start, a failed request a protocol error (a network failure, retried).
fn upload_answer(
    answer: Result<frogbot_channel::files::UploadAnswer, frogbot_channel::files::UploadError>,
) -> Result<(), SlackClientError> {
    let answer = answer.map_err(|e| {
        SlackClientError::HttpProtocolError(
            SlackClientHttpProtocolError::new().with_cause(Box::new(e)),
        )
    })?;
    if answer.is_success() {
        return Ok(());
    }
    Err(if answer.status == 429 {
        SlackClientError::RateLimitError(
            SlackRateLimitError::new()
                .opt_retry_after(answer.retry_after)
                .with_http_response_body(answer.body),
        )
    } else {
        let code =
            http::StatusCode::from_u16(answer.status).unwrap_or(http::StatusCode::BAD_GATEWAY);
        SlackClientError::HttpError(
            SlackClientHttpError::new(code).with_http_response_body(answer.body),
        )
    })
}

/// slack-morphism's error as this crate's, by frogbot-channel's one [`Failure`] classification:
/// a 429 (`RateLimitError`, its `Retry-After`), a 5xx, Slack's `ratelimited` (a 429) /
/// `service_unavailable` (a 503) / `internal_error` / `fatal_error` (maybe carried out), a network
/// failure → [`Error::Unavailable`]; anything else → [`Error::Api`].
pub fn classify(method: &'static str, e: SlackClientError) -> Error {
    let failure = match &e {
        SlackClientError::RateLimitError(r) => Some(Failure::Refused {
            status: 429,
            wait: r.retry_after,
        }),
        SlackClientError::ApiError(a) => match a.code.as_str() {
            "ratelimited" => Some(Failure::status(429)),
            "service_unavailable" => Some(Failure::status(503)),
            // "It's possible some aspect of the operation succeeded before the error was raised."
            "internal_error" | "fatal_error" => Some(Failure::MaybeDone),
            _ => None,
        },
        SlackClientError::HttpError(h) => Some(Failure::status(h.status_code.as_u16())),
        SlackClientError::HttpProtocolError(_) if not_sent(&e) => Some(Failure::NotSent),
        // Reading the answer failed (the connection dropped after the request went out).
        SlackClientError::HttpProtocolError(_)
        | SlackClientError::SystemError(_)
        | SlackClientError::EndOfStream(_) => Some(Failure::MaybeDone),
        _ => None,
    };
    match failure.filter(|f| f.retryable()) {
        Some(f) => Error::Unavailable {
            method,
            source: f.mark(Transient::from_source(format!("{method}: {e}"), e)),
        },
        None => Error::Api {
            method,
            message: e.to_string(),
        },
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

/// One page of `conversations.replies` or `conversations.history`, as far as
/// [`SlackApi::thread_keyed`], [`SlackApi::find_file_message`] and [`SlackApi::find_keyed_root`]
/// read it.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Page {
    messages: Vec<PageMessage>,
    has_more: bool,
    response_metadata: Option<NextCursor>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct PageMessage {
    ts: String,
    thread_ts: Option<String>,
    metadata: Option<serde_json::Value>,
    files: Vec<FileRef>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct FileRef {
    id: String,
}

/// `conversations.open`'s answer as far as [`SlackApi::open_dm`] reads it.
#[derive(serde::Deserialize)]
struct OpenedConversation {
    channel: OpenedChannel,
}

#[derive(serde::Deserialize)]
struct OpenedChannel {
    id: String,
}

#[derive(serde::Deserialize)]
struct NextCursor {
    next_cursor: Option<String>,
}

/// The piece key a message's metadata carries (`{"event_type": event_type, "event_payload":
/// {"key": …}}`), if any.
fn metadata_key(metadata: &serde_json::Value, event_type: &str) -> Option<String> {
    (metadata.get("event_type")?.as_str()? == event_type)
        .then(|| {
            metadata
                .pointer("/event_payload/key")?
                .as_str()
                .map(str::to_owned)
        })
        .flatten()
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
        self.post(channel, thread_ts, content(blocks, text)).await
    }

    async fn post_root_keyed(
        &self,
        channel: &str,
        text: &str,
        event_type: &str,
        key: &str,
    ) -> Result<String, Error> {
        self.post_with_metadata(channel, None, Vec::new(), text, event_type, key)
            .await
    }

    async fn find_keyed_root(
        &self,
        channel: &str,
        event_type: &str,
        key: &str,
        oldest: &str,
        limit: u16,
    ) -> Result<Option<String>, Error> {
        let params = vec![
            ("channel", Some(channel.to_string())),
            ("include_all_metadata", Some("true".to_string())),
            ("oldest", Some(oldest.to_string())),
            ("limit", Some(limit.to_string())),
        ];
        let page: Page = self.get("conversations.history", params).await?;
        Ok(page
            .messages
            .into_iter()
            .filter(|m| m.thread_ts.as_deref().is_none_or(|t| t == m.ts))
            .find(|m| {
                m.metadata
                    .as_ref()
                    .and_then(|meta| metadata_key(meta, event_type))
                    .is_some_and(|k| k == key)
            })
            .map(|m| m.ts))
    }

    async fn open_dm(&self, user: &str) -> Result<String, Error> {
        // `users` as Slack documents it: a comma-separated string (one user: a 1:1 DM).
        let req = serde_json::json!({ "users": user });
        let res: OpenedConversation = self
            .call(OPEN_CONVERSATION, req, async |s, r| {
                s.http_session_api
                    .http_post("conversations.open", r, None)
                    .await
            })
            .await?;
        Ok(res.channel.id)
    }

    async fn thread_keyed(
        &self,
        channel: &str,
        thread_ts: &str,
        event_type: &str,
    ) -> Result<Vec<(String, String)>, Error> {
        let mut keys = Vec::new();
        self.each_reply_page(channel, thread_ts, true, |messages| {
            keys.extend(
                messages
                    .into_iter()
                    .filter_map(|m| Some((metadata_key(m.metadata.as_ref()?, event_type)?, m.ts))),
            );
            ControlFlow::Continue(())
        })
        .await?;
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
        self.post_with_metadata(channel, Some(thread_ts), blocks, text, event_type, key)
            .await
    }

    async fn delete_message(&self, channel: &str, ts: &str) -> Result<(), Error> {
        let req = SlackApiChatDeleteRequest::new(channel.into(), ts.into());
        self.act(DELETE_MESSAGE, req, async |s, r| s.chat_delete(r).await)
            .await
    }

    async fn pin_message(&self, channel: &str, ts: &str, pinned: bool) -> Result<(), Error> {
        if pinned {
            let req = SlackApiPinsAddRequest::new(channel.into(), ts.into());
            self.act(ADD_PIN, req, async |s, r| s.pins_add(r).await)
                .await
        } else {
            let req = SlackApiPinsRemoveRequest::new(channel.into(), ts.into());
            self.act(REMOVE_PIN, req, async |s, r| s.pins_remove(r).await)
                .await
        }
    }

    async fn update_message(
        &self,
        channel: &str,
        ts: &str,
        blocks: Vec<SlackBlock>,
        text: &str,
    ) -> Result<(), Error> {
        let req = SlackApiChatUpdateRequest::new(channel.into(), content(blocks, text), ts.into());
        self.act(UPDATE_MESSAGE, req, async |s, r| s.chat_update(r).await)
            .await
    }

    async fn post_ephemeral(
        &self,
        channel: &str,
        user: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<(), Error> {
        let req = SlackApiChatPostEphemeralRequest::new(
            channel.into(),
            user.into(),
            content(Vec::new(), text),
        )
        .opt_thread_ts(thread_ts.map(SlackTs::from));
        self.act(POST_EPHEMERAL, req, async |s, r| {
            s.chat_post_ephemeral(r).await
        })
        .await
    }

    async fn open_view(&self, trigger_id: &str, view: SlackView) -> Result<(), Error> {
        let req = SlackApiViewsOpenRequest::new(trigger_id.into(), view);
        self.act(OPEN_VIEW, req, async |s, r| s.views_open(r).await)
            .await
    }

    async fn add_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), Error> {
        let req = SlackApiReactionsAddRequest::new(channel.into(), name.into(), ts.into());
        self.act(ADD_REACTION, req, async |s, r| s.reactions_add(r).await)
            .await
    }

    async fn remove_reaction(&self, channel: &str, ts: &str, name: &str) -> Result<(), Error> {
        let req = SlackApiReactionsRemoveRequest::new(name.into())
            .with_channel(channel.into())
            .with_timestamp(ts.into());
        self.act(REMOVE_REACTION, req, async |s, r| {
            s.reactions_remove(r).await
        })
        .await
    }

    async fn start_stream(
        &self,
        channel: &str,
        thread_ts: &str,
        recipient: Option<(&str, &str)>,
        markdown: &str,
    ) -> Result<String, Error> {
        let req = SlackApiChatStartStreamRequest::new(channel.into())
            .with_thread_ts(thread_ts.into())
            .with_markdown_text(markdown.to_string())
            .opt_recipient_user_id(recipient.map(|(user, _)| user.into()))
            .opt_recipient_team_id(recipient.map(|(_, team)| team.into()));
        let res = self
            .call(START_STREAM, req, async |s, r| s.chat_start_stream(r).await)
            .await?;
        Ok(res.ts.0)
    }

    async fn append_stream(&self, channel: &str, ts: &str, markdown: &str) -> Result<(), Error> {
        let req = SlackApiChatAppendStreamRequest::new(channel.into(), ts.into())
            .with_markdown_text(markdown.to_string());
        self.act(APPEND_STREAM, req, async |s, r| {
            s.chat_append_stream(r).await
        })
        .await
    }

    /// `message_not_in_streaming_state` counts as done: the message is stopped (by an earlier
    /// call whose answer was lost, or it never streamed).
    async fn stop_stream(&self, channel: &str, ts: &str) -> Result<(), Error> {
        let req = SlackApiChatStopStreamRequest::new(
            channel.into(),
            ts.into(),
            SlackMessageContent::new(),
        );
        self.act(STOP_STREAM, req, async |s, r| s.chat_stop_stream(r).await)
            .await
    }

    async fn set_status(&self, channel: &str, thread_ts: &str, status: &str) -> Result<(), Error> {
        let req = SlackApiAssistantThreadsSetStatusRequest::new(
            channel.into(),
            status.to_string(),
            thread_ts.into(),
        );
        self.act(SET_STATUS, req, async |s, r| {
            s.assistant_threads_set_status(r).await
        })
        .await
    }

    async fn upload_file(&self, file: &OutFile, alt_txt: Option<&str>) -> Result<String, Error> {
        let length = usize::try_from(file.size).map_err(|_| Error::Api {
            method: "files.getUploadURLExternal",
            message: format!("{} bytes do not fit this machine", file.size),
        })?;
        let req = SlackApiFilesGetUploadUrlExternalRequest::new(file.filename.clone(), length)
            .opt_alt_txt(alt_txt.map(str::to_owned));
        let reserved = self
            .call(GET_UPLOAD_URL, req, async |s, r| {
                s.get_upload_url_external(r).await
            })
            .await?;
        let url = reserved.upload_url.0.as_str();
        // The bot token goes only to Slack's hosts (and the configured API's); the URL is
        // signed, so any other host gets the bytes alone.
        let bearer = format!("Bearer {}", self.token.token_value.0);
        let auth = [("authorization", bearer.as_str())];
        let headers: &[(&str, &str)] =
            if crate::convert::slack_file_host(url, self.api_url.as_deref()) {
                &auth
            } else {
                &[]
            };
        // Not through slack-morphism (its upload takes the file whole): streamed by the
        // guarded client, its answer read as slack-morphism would (a 429's `Retry-After`, a 5xx).
        // Bounded by the transfer policy's time (the guarded client's), not an API call's.
        let within = self.files.policy().timeout.max(self.timeout);
        self.run(UPLOAD_STEP, true, within, || async {
            upload_answer(self.files.upload(url, headers, file).await)
        })
        .await?;
        Ok(reserved.file_id.0)
    }

    async fn complete_upload(
        &self,
        channel: &str,
        thread_ts: &str,
        file_id: &str,
        title: &str,
    ) -> Result<(), Error> {
        let req = SlackApiFilesCompleteUploadExternalRequest::new(vec![
            SlackApiFilesComplete::new(file_id.into()).with_title(title.to_string()),
        ])
        .with_channel_id(channel.into())
        .with_thread_ts(thread_ts.into());
        self.act(COMPLETE_UPLOAD, req, async |s, r| {
            s.files_complete_upload_external(r).await
        })
        .await
    }

    async fn find_file_message(
        &self,
        channel: &str,
        thread_ts: &str,
        file_id: &str,
    ) -> Result<Option<String>, Error> {
        let mut found = None;
        self.each_reply_page(channel, thread_ts, false, |messages| {
            found = messages
                .into_iter()
                .find(|m| m.files.iter().any(|f| f.id == file_id))
                .map(|m| m.ts);
            if found.is_some() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await?;
        Ok(found)
    }

    async fn delete_file(&self, file_id: &str) -> Result<(), Error> {
        let req = SlackApiFilesDeleteRequest::new(file_id.into());
        self.act(DELETE_FILE, req, async |s, r| s.files_delete(r).await)
            .await
    }

    async fn replies(
        &self,
        channel: &str,
        ts: &str,
        latest: &str,
        limit: u16,
    ) -> Result<Vec<HistoryMessage>, Error> {
        let req = SlackApiConversationsRepliesRequest::new(channel.into(), ts.into())
            .with_latest(latest.into())
            .with_inclusive(false)
            .with_limit(limit);
        let res = self
            .call(REPLIES, req, async |s, r| s.conversations_replies(r).await)
            .await?;
        Ok(res
            .messages
            .iter()
            .map(HistoryMessage::from_slack)
            .collect())
    }
}

/// Slack's answer to `chat.stopStream` (and `chat.appendStream`) of a message that is not
/// streaming.
pub const NOT_STREAMING: &str = "message_not_in_streaming_state";
