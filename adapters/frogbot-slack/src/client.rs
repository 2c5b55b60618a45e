//! The thin Slack Web API client the hooks use: the [`SlackApi`] trait and its implementation over
//! slack-morphism's [`SlackClient`].

use std::sync::Arc;

use async_trait::async_trait;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

use crate::Error;

/// The Slack Web API calls the hooks need.
#[async_trait]
pub trait SlackApi: Send + Sync {
    /// `chat.postMessage`; returns the new message's `ts`.
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

fn api_err(method: &'static str) -> impl FnOnce(SlackClientError) -> Error {
    move |e| Error::Api {
        method,
        message: e.to_string(),
    }
}

fn content(blocks: Vec<SlackBlock>, text: &str) -> SlackMessageContent {
    SlackMessageContent::new()
        .with_text(text.to_string())
        .with_blocks(blocks)
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
}
