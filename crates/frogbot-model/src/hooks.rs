use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{
    Actor, ChannelIdentity, ChannelRef, Interaction, ParseResult, QuestionCall, QuestionChange,
    QuestionMessage, QuestionOutcome, QuestionRecord, UserId,
};
use crate::BoxError;

/// The conversation a hook works in: the channel thread of the chat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    /// The adapter's thread id (as in [`ChannelRef::thread`]).
    pub id: String,
    /// The adapter's platform name.
    pub platform: String,
    /// The FrogBot chat of this thread.
    pub chat_id: String,
}

impl Thread {
    /// The channel reference of this thread.
    pub fn channel(&self) -> ChannelRef {
        ChannelRef {
            platform: self.platform.clone(),
            thread: self.id.clone(),
        }
    }

    /// The platform message `id` in this thread.
    pub fn message<'a>(&'a self, id: &'a str) -> MessageAt<'a> {
        MessageAt { thread: self, id }
    }
}

/// One platform message in its thread ([`Thread::message`]): what an outbox edits, pins or reads
/// the history before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageAt<'a> {
    /// The thread the message is in.
    pub thread: &'a Thread,
    /// The platform's message id.
    pub id: &'a str,
}

/// The request a hook runs for (`req` in the specification): who is acting, once known.
/// `stale` may run before the participant is identified, so `user` may be `None` there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestContext {
    /// The FrogBot user, once the identity hook resolved the participant.
    pub user: Option<UserId>,
    /// The participant's channel identity.
    pub identity: Option<ChannelIdentity>,
}

/// One entry of what `render` returns: which calls a set of posted messages covers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RenderedQuestion {
    /// The tool call ids this entry covers (each gets its own record with the same messages).
    pub calls: Vec<String>,
    /// The messages posted (never empty).
    pub messages: Vec<QuestionMessage>,
    /// The piece's initial state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
}

/// Arguments of [`ChannelQuestions::supports`].
#[derive(Clone, Copy, Debug)]
pub struct SupportsArgs<'a> {
    /// The conversation.
    pub thread: &'a Thread,
}

/// Arguments of [`ChannelQuestions::render`].
#[derive(Clone, Copy, Debug)]
pub struct RenderArgs<'a> {
    /// The calls waiting to be posted, in call order.
    pub calls: &'a [QuestionCall],
    /// The request.
    pub req: &'a RequestContext,
    /// The conversation.
    pub thread: &'a Thread,
}

/// Arguments of [`ChannelQuestions::parse`].
#[derive(Clone, Copy, Debug)]
pub struct ParseArgs<'a> {
    /// The call.
    pub call: &'a QuestionCall,
    /// The interaction to classify.
    pub interaction: &'a Interaction,
    /// The call's record.
    pub question: &'a QuestionRecord,
    /// Whether the question has already been answered (classify the same way; a match goes to `stale`).
    pub settled: bool,
}

/// The arguments every hook after `render` shares.
#[derive(Clone, Copy, Debug)]
pub struct HookArgs<'a> {
    /// The call.
    pub call: &'a QuestionCall,
    /// The call's record.
    pub question: &'a QuestionRecord,
    /// The request.
    pub req: &'a RequestContext,
    /// The conversation.
    pub thread: &'a Thread,
}

/// How a question call was settled ([`ChannelQuestions::settled`]): its outcome, and who
/// settled it ([`QuestionOutcome::by`]).
#[derive(Clone, Copy, Debug)]
pub struct Settlement<'a> {
    /// How the call ended.
    pub outcome: &'a QuestionOutcome,
    /// Who answered or dismissed it; `None` when FrogBot closes a question whose earlier close
    /// was interrupted.
    pub actor: Option<&'a Actor>,
}

impl QuestionOutcome {
    /// This outcome, settled by `actor`.
    pub fn by<'a>(&'a self, actor: Option<&'a Actor>) -> Settlement<'a> {
        Settlement {
            outcome: self,
            actor,
        }
    }
}

/// What [`ChannelQuestions::updated`] and [`ChannelQuestions::settled`] return: the change to
/// the question's record (`None`: none).
pub type Changed = Result<Option<QuestionChange>, BoxError>;

/// The channel-questions hooks: how a channel draws the agent's questions with its own controls and
/// reads its platform's interactions back as answers.
///
/// The piece holds its own platform client (the specification's `client` argument is `self` here).
/// FrogBot keeps the record, decides staleness, checks identity and access, records the first answer,
/// retries failed updates and continues the agent.
#[async_trait]
pub trait ChannelQuestions: Send + Sync {
    /// Before each turn: may the model get the question tool in this thread? An error is logged and
    /// means no.
    async fn supports(&self, _args: SupportsArgs<'_>) -> Result<bool, BoxError> {
        Ok(true)
    }

    /// After a turn stops to wait for answers: post one or more messages and say which calls each
    /// entry covers. Calls left out are rendered once the posted ones are answered. An error means the
    /// questions are posted again with the next message in the conversation.
    async fn render(&self, args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError>;

    /// Classifies an interaction. Must be free of side effects: FrogBot may call it twice.
    ///
    /// Every question can be skipped, which dismisses the whole call ([`ParseResult::Dismiss`]):
    /// with a [`SKIP_LABEL`] control where the platform draws controls (its id carries the
    /// revision like the others, so an old Skip is [`ParseResult::Stale`]), and with a typed
    /// reply `skip` or `/skip` (trimmed, any case: [`crate::is_skip_reply`]) wherever the
    /// adapter takes the reply as addressed to the question
    /// ([`crate::QuestionItem::skip_in_reply`]). On a `custom` question the word `skip` alone
    /// means skip, not an own answer "skip"; only an option labelled "skip" takes the bare
    /// word as its choice.
    fn parse(&self, args: ParseArgs<'_>) -> ParseResult;

    /// After `parse` returned `partial` (`interaction` set), or from a retry job (`interaction` unset):
    /// show the current question. An error schedules a retry.
    async fn updated(&self, _args: HookArgs<'_>, _interaction: Option<&Interaction>) -> Changed {
        Ok(None)
    }

    /// After an answer or dismissal is recorded (`how.outcome`): replace the controls on every
    /// message of the call. `how.actor` is `None` when FrogBot closes a question whose earlier
    /// close was interrupted. A dismissal reads [`skipped_text`]: `Skipped by <name>`, or
    /// "Skipped." without an actor.
    async fn settled(&self, args: HookArgs<'_>, how: Settlement<'_>) -> Changed;

    /// Show `to.notice` to the one participant whose `to.interaction` it is about — privately
    /// where the platform can (an ephemeral message, a callback-query toast), else as a reply that
    /// mentions them. The single place a piece speaks to one person; `rejected`, `denied` and
    /// `stale` call it.
    async fn notify(&self, args: HookArgs<'_>, to: NoticeTo<'_>) -> Result<(), BoxError>;

    /// Show `reason` to the participant (a parse rejection, an invalid answer, or "still posting").
    async fn rejected(
        &self,
        args: HookArgs<'_>,
        interaction: &Interaction,
        reason: &str,
    ) -> Result<(), BoxError> {
        self.notify(args, NoticeTo::new(interaction, Notice::Rejected(reason)))
            .await
    }

    /// The participant failed the access check; the question stays open.
    async fn denied(&self, args: HookArgs<'_>, interaction: &Interaction) -> Result<(), BoxError> {
        self.notify(args, NoticeTo::new(interaction, Notice::Denied))
            .await
    }

    /// The interaction is out of date. May run before the participant is identified.
    async fn stale(&self, args: HookArgs<'_>, interaction: &Interaction) -> Result<(), BoxError> {
        self.notify(args, NoticeTo::new(interaction, Notice::Stale))
            .await
    }
}

/// What a person the channel's access check refuses is told, on every platform (privately where
/// the platform can).
pub const NOT_ALLOWED_TEXT: &str = "Sorry, you are not allowed to talk to this bot.";
/// What a participant is told on a denied interaction.
pub const DENIED_TEXT: &str = "You can't answer this question.";
/// What a participant is told on an out-of-date interaction.
pub const STALE_TEXT: &str =
    "This question has already been answered or has changed — your answer was not recorded.";

/// The label of the control that skips (dismisses) a question call.
pub const SKIP_LABEL: &str = "Skip";

/// How a skipped (dismissed) question reads once settled: `Skipped by <name>` with the actor's
/// name as the platform writes it (a mention, a display name), "Skipped." without one.
pub fn skipped_text(by: Option<&str>) -> String {
    match by {
        Some(name) if !name.trim().is_empty() => format!("Skipped by {name}"),
        _ => "Skipped.".to_owned(),
    }
}

/// What [`ChannelQuestions::notify`] tells one participant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice<'a> {
    /// Their answer was not taken, for this reason (a parse rejection, an invalid answer, or
    /// "still posting").
    Rejected(&'a str),
    /// They failed the access check; the question stays open.
    Denied,
    /// Their control or reply is out of date.
    Stale,
}

impl<'a> Notice<'a> {
    /// The notice's text: the reason of a rejection, [`DENIED_TEXT`], [`STALE_TEXT`].
    pub fn text(&self) -> &'a str {
        match self {
            Notice::Rejected(reason) => reason,
            Notice::Denied => DENIED_TEXT,
            Notice::Stale => STALE_TEXT,
        }
    }
}

/// What [`ChannelQuestions::notify`] shows, and to whom: the [`Notice`] and the interaction of the
/// one participant it is about (bundled like [`HookArgs`], so the hook is one argument more than
/// the others, not two).
#[derive(Clone, Copy, Debug)]
pub struct NoticeTo<'a> {
    /// The participant's interaction the notice answers (whose author is told).
    pub interaction: &'a Interaction,
    /// What they are told.
    pub notice: Notice<'a>,
}

impl<'a> NoticeTo<'a> {
    /// `notice`, for the author of `interaction`.
    pub fn new(interaction: &'a Interaction, notice: Notice<'a>) -> Self {
        Self {
            interaction,
            notice,
        }
    }

    /// The notice's text ([`Notice::text`]).
    pub fn text(&self) -> &'a str {
        self.notice.text()
    }
}

/// The identity hook of a channel: maps a platform participant to a FrogBot user (`None`: unknown,
/// treated as anonymous).
#[async_trait]
pub trait IdentityResolver: Send + Sync {
    /// Resolves a channel identity.
    async fn resolve(&self, identity: &ChannelIdentity) -> Result<Option<UserId>, BoxError>;
}

/// The default identity hook: every platform user becomes the FrogBot user `platform:id`.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrefixedIdentity;

#[async_trait]
impl IdentityResolver for PrefixedIdentity {
    async fn resolve(&self, identity: &ChannelIdentity) -> Result<Option<UserId>, BoxError> {
        Ok(Some(UserId(format!(
            "{}:{}",
            identity.platform, identity.user.id
        ))))
    }
}

/// An identity hook from configuration: platform user ids listed in `map` become the FrogBot user
/// given there; everyone else becomes `platform:id` (as [`PrefixedIdentity`]).
#[derive(Clone, Debug, Default)]
pub struct MappedIdentity {
    /// Platform user id → FrogBot user.
    pub map: std::collections::HashMap<String, UserId>,
}

impl MappedIdentity {
    /// From `(platform user id, FrogBot user id)` pairs.
    pub fn new<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            map: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), UserId(v.into())))
                .collect(),
        }
    }
}

#[async_trait]
impl IdentityResolver for MappedIdentity {
    async fn resolve(&self, identity: &ChannelIdentity) -> Result<Option<UserId>, BoxError> {
        if let Some(user) = self.map.get(&identity.user.id) {
            return Ok(Some(user.clone()));
        }
        PrefixedIdentity.resolve(identity).await
    }
}
