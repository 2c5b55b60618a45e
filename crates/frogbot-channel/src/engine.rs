//! The engine as an adapter sees it: one entry, [`ChannelEngine::receive`], taking every kind of
//! thing a platform delivers ([`Incoming`]) and saying what became of it ([`Received`]). An
//! adapter's receive path converts the platform's event into an `Incoming` and shows the outcome
//! (a refusal's text, a stale click's notice); it decides nothing itself.
//!
//! FrogBot's engine (`frogbot_core::agent::Engine`) implements [`ChannelEngine`]; a host hands an
//! adapter an [`EngineHandle`] over it. A project of its own may implement it over anything.

use std::sync::Arc;

use async_trait::async_trait;
use frogbot_model::{
    BoxError, ChatId, EventClick, Interaction, PlatformUser, QuestionCall, QuestionRecord, Thread,
    ThreadMessage,
};

/// Something a platform delivered, converted by its adapter.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Incoming {
    /// A person's message in `thread`. A reply that answers a question is consumed by it; `stop`
    /// from the turn's driver stops the turn; anything else goes to the thread's chat (a turn,
    /// the queue, or the inbox of an agent's chat).
    Message {
        /// The thread, as the adapter writes thread ids.
        thread: String,
        /// The message.
        message: ThreadMessage,
    },
    /// A person edited (`text: Some`) or deleted (`None`) their message `message_id` (the
    /// platform's id) in `thread`.
    Changed {
        /// The thread.
        thread: String,
        /// The platform's id of the message.
        message_id: String,
        /// The new text; `None`: deleted.
        text: Option<String>,
    },
    /// A click, a selection, a form submission or a thread reply meant for a question (in
    /// `thread`, when the platform says).
    Interaction {
        /// The thread, when known.
        thread: Option<String>,
        /// What the person did.
        interaction: Interaction,
    },
    /// The platform's Stop control, pressed by `who` in `thread`.
    Stop {
        /// The thread.
        thread: String,
        /// Who pressed it.
        who: PlatformUser,
    },
    /// An agent message's event button, clicked in `thread`.
    Event {
        /// The thread.
        thread: String,
        /// The click.
        click: EventClick,
    },
    /// A question's "Other…" control asks for its form: the question whose current message is
    /// `message_id` (the platform's id), when it is still open.
    FormOpen {
        /// The platform's id of the clicked message.
        message_id: String,
    },
}

/// What the engine did with an [`Incoming`]: the variant of the same name.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Received {
    /// For [`Incoming::Message`].
    Message(MessageOutcome),
    /// For [`Incoming::Changed`].
    Changed(ChangeOutcome),
    /// For [`Incoming::Interaction`].
    Interaction(InteractionOutcome),
    /// For [`Incoming::Stop`].
    Stop(StopOutcome),
    /// For [`Incoming::Event`].
    Event(EventOutcome),
    /// For [`Incoming::FormOpen`]: the question, or `None` when the message is not an open
    /// question's current one (the click is stale).
    FormOpen(Option<Box<FormTarget>>),
}

/// What happened to a person's message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageOutcome {
    /// It answered (or was otherwise consumed by) a question.
    Consumed(InteractionOutcome),
    /// The person failed the access check.
    Denied,
    /// It started a turn.
    Started,
    /// A turn was running: it waits in the queue (or steers the running turn).
    Queued,
    /// The same platform message was taken before (a repeated delivery); nothing was done.
    Duplicate,
    /// A `stop` from the driving user: the running turn stops.
    Stopped,
    /// A `stop` from someone else: refused, with a notice in the thread.
    StopRefused,
    /// A command answered with a notice in the thread, nothing saved: what `model` lists, or a
    /// refusal (`new` while a reply is written, [`COMMAND_BUSY_TEXT`]; a model not offered).
    Told,
    /// The thread's chat is bound to an external agent: the message waits in its inbox.
    Inbox,
}

/// What a person's edit or deletion of their own message on the platform did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeOutcome {
    /// The message still waited in the queue: its turn will read the new text.
    Edited,
    /// The message still waited in the queue: it is removed and never runs.
    Deleted,
    /// The message already ran (or runs now): the conversation keeps what the agent read, and
    /// nothing is done (a person who wants the new text answered sends it again).
    AlreadyRan,
    /// Not a message FrogBot took (another thread, a message it ignored).
    Unknown,
}

/// What the engine did with an interaction.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InteractionOutcome {
    /// It belongs to no question (a thread reply continues as an ordinary message).
    Ignored,
    /// The answer was recorded and the agent continues.
    Answered,
    /// The dismissal was recorded and the turn stops.
    Dismissed,
    /// Progress was saved (`updated` ran or a retry is scheduled).
    Partial,
    /// Refused with a reason shown to the participant.
    Rejected(String),
    /// The participant failed the access check.
    Denied,
    /// Out of date.
    Stale,
}

impl InteractionOutcome {
    /// Whether a thread reply was consumed (anything but `Ignored`).
    pub fn consumed(&self) -> bool {
        *self != InteractionOutcome::Ignored
    }
}

/// What a stop request found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopOutcome {
    /// The running turn stops at its next step boundary (a streaming model answer is cut off);
    /// what it produced is kept.
    Stopping,
    /// No turn of the chat runs in this process.
    NotRunning,
    /// Only the user driving the turn may stop it.
    NotDriver,
}

impl StopOutcome {
    /// What the person who pressed Stop is told: [`STOP_REFUSED_TEXT`] when they do not drive
    /// the turn, else nothing.
    pub fn notice(self) -> Option<&'static str> {
        (self == StopOutcome::NotDriver).then_some(STOP_REFUSED_TEXT)
    }
}

/// What an event click found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventOutcome {
    /// The event is in the agent's inbox.
    Sent,
    /// The message, block or button is gone (edited away, deleted) or the chat has no agent.
    Stale,
    /// The person may not write in this chat.
    Denied,
}

impl EventOutcome {
    /// What the person who clicked is told: [`frogbot_model::NOT_ALLOWED_TEXT`] when denied, else
    /// nothing.
    pub fn notice(self) -> Option<&'static str> {
        (self == EventOutcome::Denied).then_some(frogbot_model::NOT_ALLOWED_TEXT)
    }
}

/// What a channel needs to open a form for a question ("Other…"): the question, when the clicked
/// message is its current message and it is still open.
#[derive(Clone, Debug, PartialEq)]
pub struct FormTarget {
    /// The chat.
    pub chat_id: ChatId,
    /// The question call.
    pub call: QuestionCall,
    /// Its record.
    pub record: QuestionRecord,
    /// Its thread.
    pub thread: Thread,
}

/// The engine failed to take something in (its store is unreachable, a write conflicted past its
/// retries). When [`EngineError::is_transient`], the same delivery may succeed later: the
/// platform's delivery is answered with a retry, or the person told to try again.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct EngineError {
    source: BoxError,
    transient: bool,
}

impl EngineError {
    /// A failure that trying again will not mend.
    pub fn new(e: impl Into<BoxError>) -> Self {
        Self {
            source: e.into(),
            transient: false,
        }
    }

    /// A failure that trying again later may mend (the store was unavailable, a record locked).
    pub fn transient(e: impl Into<BoxError>) -> Self {
        Self {
            source: e.into(),
            transient: true,
        }
    }

    /// Whether trying the same delivery again later may succeed.
    pub fn is_transient(&self) -> bool {
        self.transient
    }
}

/// The engine an adapter delivers into. Implemented by FrogBot's engine; see the module docs.
#[async_trait]
pub trait ChannelEngine: std::any::Any + Send + Sync {
    /// Takes in what `platform` delivered. One entry for every kind ([`Incoming`]); the outcome is
    /// the [`Received`] variant of the same name.
    async fn receive(&self, platform: &str, incoming: Incoming) -> Result<Received, EngineError>;

    /// Whether `thread` of `platform` already has a chat: a platform that delivers thread
    /// replies without a mention asks before taking one in.
    async fn thread_known(&self, platform: &str, thread: &str) -> Result<bool, EngineError>;

    /// The models people may choose with [`Command::Model`], each with its reasoning options
    /// (the default first): a platform that registers its commands offers them as the command's
    /// choices. None by default.
    fn models(&self) -> Vec<(String, Vec<String>)> {
        Vec::new()
    }
}

/// A cheap, cloneable handle on a [`ChannelEngine`], with one typed method per [`Incoming`] kind
/// (each is [`ChannelEngine::receive`] with its outcome unwrapped).
#[derive(Clone)]
pub struct EngineHandle(Arc<dyn ChannelEngine>);

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EngineHandle")
    }
}

impl<E: ChannelEngine> From<Arc<E>> for EngineHandle {
    fn from(engine: Arc<E>) -> Self {
        Self(engine)
    }
}

impl EngineHandle {
    /// A handle on `engine`.
    pub fn new(engine: impl ChannelEngine) -> Self {
        Self(Arc::new(engine))
    }

    /// The engine behind the handle, when it is an `E`: how a host reaches more of its own engine
    /// than an adapter needs (serve's Discord shards share out their gateway through it).
    pub fn downcast_ref<E: ChannelEngine>(&self) -> Option<&E> {
        (&*self.0 as &dyn std::any::Any).downcast_ref::<E>()
    }

    /// [`ChannelEngine::receive`].
    pub async fn receive(
        &self,
        platform: &str,
        incoming: Incoming,
    ) -> Result<Received, EngineError> {
        self.0.receive(platform, incoming).await
    }

    /// [`ChannelEngine::thread_known`].
    pub async fn thread_known(&self, platform: &str, thread: &str) -> Result<bool, EngineError> {
        self.0.thread_known(platform, thread).await
    }

    /// [`ChannelEngine::models`].
    pub fn models(&self) -> Vec<(String, Vec<String>)> {
        self.0.models()
    }

    /// Receives [`Incoming::Message`].
    pub async fn message(
        &self,
        platform: &str,
        thread: &str,
        message: ThreadMessage,
    ) -> Result<MessageOutcome, EngineError> {
        let thread = thread.to_owned();
        match self
            .receive(platform, Incoming::Message { thread, message })
            .await?
        {
            Received::Message(o) => Ok(o),
            other => Err(mismatch(other)),
        }
    }

    /// Receives [`Incoming::Changed`].
    pub async fn changed(
        &self,
        platform: &str,
        thread: &str,
        message_id: &str,
        text: Option<String>,
    ) -> Result<ChangeOutcome, EngineError> {
        let incoming = Incoming::Changed {
            thread: thread.to_owned(),
            message_id: message_id.to_owned(),
            text,
        };
        match self.receive(platform, incoming).await? {
            Received::Changed(o) => Ok(o),
            other => Err(mismatch(other)),
        }
    }

    /// Receives [`Incoming::Interaction`].
    pub async fn interaction(
        &self,
        platform: &str,
        thread: Option<&str>,
        interaction: Interaction,
    ) -> Result<InteractionOutcome, EngineError> {
        let incoming = Incoming::Interaction {
            thread: thread.map(str::to_owned),
            interaction,
        };
        match self.receive(platform, incoming).await? {
            Received::Interaction(o) => Ok(o),
            other => Err(mismatch(other)),
        }
    }

    /// Receives [`Incoming::Stop`].
    pub async fn stop(
        &self,
        platform: &str,
        thread: &str,
        who: &PlatformUser,
    ) -> Result<StopOutcome, EngineError> {
        let incoming = Incoming::Stop {
            thread: thread.to_owned(),
            who: who.clone(),
        };
        match self.receive(platform, incoming).await? {
            Received::Stop(o) => Ok(o),
            other => Err(mismatch(other)),
        }
    }

    /// Receives [`Incoming::Event`].
    pub async fn event(
        &self,
        platform: &str,
        thread: &str,
        click: EventClick,
    ) -> Result<EventOutcome, EngineError> {
        let thread = thread.to_owned();
        match self
            .receive(platform, Incoming::Event { thread, click })
            .await?
        {
            Received::Event(o) => Ok(o),
            other => Err(mismatch(other)),
        }
    }

    /// Receives [`Incoming::FormOpen`].
    pub async fn form_open(
        &self,
        platform: &str,
        message_id: &str,
    ) -> Result<Option<FormTarget>, EngineError> {
        let message_id = message_id.to_owned();
        match self
            .receive(platform, Incoming::FormOpen { message_id })
            .await?
        {
            Received::FormOpen(o) => Ok(o.map(|t| *t)),
            other => Err(mismatch(other)),
        }
    }
}

fn mismatch(other: Received) -> EngineError {
    EngineError::new(format!("the engine answered with {other:?}"))
}

/// A command a person types in a thread, read the same on every platform: the message is the
/// command's word after `/` (Telegram's command menu, Discord) or `!` (Matrix and Slack, whose
/// clients take a leading `/` for their own commands), any case, then its arguments if it takes
/// any. A platform's adapter strips a mention of the bot first (`@bot /new`, `/new@bot` on
/// Telegram).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// `stop` (also bare): the turn's driver stops the running turn.
    Stop,
    /// `skip`: the question waiting in the thread is skipped (read by the question, which takes
    /// a bare `skip` too); with none waiting, the person is told so.
    Skip,
    /// `new`: a new conversation in the thread. The thread keeps its chat and every message, but
    /// the model sees nothing said before. Refused while a reply is written or a question waits
    /// (nothing is dropped: stop or answer first).
    New,
    /// `model` lists the offered models and the thread's; `model ID [REASONING]` chooses the
    /// model (and reasoning option) the thread's later messages are answered with. A model or
    /// option that is not offered is refused, nothing changed.
    Model,
    /// `ask @person QUESTION` (`QUESTION | OPTION | OPTION…` for choices): the bot asks the person
    /// named first, in the thread, as a question only they may answer; the thread waits for the
    /// answer like any question (`skip` ends it; it expires after a day).
    Ask,
}

impl Command {
    /// Every command with its word and the line a command menu shows for it (Telegram's
    /// `setMyCommands`, Discord's application commands, a help text).
    pub const ALL: [(Command, &'static str, &'static str); 5] = [
        (Command::Stop, "stop", "Stop the reply being written"),
        (
            Command::Skip,
            "skip",
            "Skip the question waiting for an answer",
        ),
        (
            Command::New,
            "new",
            "Start a new conversation (the bot forgets this thread's earlier messages)",
        ),
        (
            Command::Model,
            "model",
            "Show or choose the model (and reasoning) for this thread",
        ),
        (
            Command::Ask,
            "ask",
            "Ask someone here a question: ask @person question",
        ),
    ];

    /// The command's word (`new`).
    pub fn word(self) -> &'static str {
        Command::ALL
            .iter()
            .find(|(c, _, _)| *c == self)
            .map(|(_, w, _)| *w)
            .expect("every command is in ALL")
    }

    /// Whether the command takes arguments after its word.
    pub fn takes_arguments(self) -> bool {
        matches!(self, Command::Model | Command::Ask)
    }

    /// Reads `text` as a command and its arguments (trimmed; empty when none): `None` for
    /// anything else, and for arguments given to a command that takes none. `stop` is also read
    /// bare (as people say it); the others only after their `/` or `!`, so an answer that happens
    /// to be "new" stays one.
    pub fn read(text: &str) -> Option<(Command, &str)> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("stop") {
            return Some((Command::Stop, ""));
        }
        let rest = t.strip_prefix(['/', '!'])?;
        let (word, args) = rest
            .split_once(char::is_whitespace)
            .map_or((rest, ""), |(w, a)| (w, a.trim()));
        let (command, _, _) = Command::ALL
            .iter()
            .find(|(_, name, _)| word.eq_ignore_ascii_case(name))?;
        (args.is_empty() || command.takes_arguments()).then_some((*command, args))
    }

    /// [`Command::read`] without the arguments.
    pub fn parse(text: &str) -> Option<Command> {
        Command::read(text).map(|(c, _)| c)
    }
}

/// Whether a thread message asks to stop the running turn: `stop`, `/stop` or `!stop`.
pub fn is_stop_word(text: &str) -> bool {
    Command::parse(text) == Some(Command::Stop)
}

/// Said to `skip` when no question waits in the thread.
pub const NOTHING_TO_SKIP_TEXT: &str = "No question waits for an answer here: nothing to skip.";

/// Said when `new` or `model ID` comes while a reply is written or a question waits.
pub const COMMAND_BUSY_TEXT: &str = "A reply is still being written here, or a question waits: \
    say stop (or answer the question, or skip it) first, then send the command again.";

/// Said to an `ask` that names nobody or asks nothing.
pub const ASK_USAGE_TEXT: &str = "Name the person first, then the question: ask @person Should we \
    ship today? (for choices: ask @person Ship today? | yes | no).";

/// How long a person's `ask` waits for its answer before it expires (the thread waits with it).
pub const PERSON_ASK_SECONDS: u64 = 24 * 60 * 60;

/// Said to someone who is not driving the turn they try to stop.
pub const STOP_REFUSED_TEXT: &str = "Only the person who started this can stop it.";

/// The chat id a channel thread's chat is created with: stable, so every process maps a thread to
/// the same chat, and in the channel chats' id space (it starts with
/// [`frogbot_model::CHANNEL_CHAT_PREFIX`]), which the HTTP API never creates, so no web caller can
/// take it first. Chats are looked up by their channel thread, so chats created before this id
/// space existed stay in use.
pub fn channel_chat_id(platform: &str, thread: &str) -> ChatId {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{platform}\u{0}{thread}").as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let platform: String = platform
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(32)
        .collect();
    ChatId::new(format!(
        "{}{platform}-{hex}",
        frogbot_model::CHANNEL_CHAT_PREFIX
    ))
    .expect("the prefix, alphanumerics, a dash and hex")
}

/// The stored id of a channel message: the platform's message id, prefixed with the platform.
pub fn channel_message_id(platform: &str, platform_message_id: &str) -> String {
    format!("{platform}-{platform_message_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_the_same_on_every_platform() {
        for (text, want) in [
            ("stop", Some(Command::Stop)),
            (" STOP ", Some(Command::Stop)),
            ("/stop", Some(Command::Stop)),
            ("!Stop", Some(Command::Stop)),
            ("/new", Some(Command::New)),
            ("!NEW", Some(Command::New)),
            ("  /new\n", Some(Command::New)),
            // `new` needs its prefix: an answer that happens to be "new" stays one.
            ("new", None),
            ("/new please", None),
            ("/renew", None),
            ("/model", Some(Command::Model)),
            ("!skip", Some(Command::Skip)),
            ("skip", None),
            ("!model alt high", Some(Command::Model)),
            ("/stop now", None),
            ("//new", None),
            ("", None),
            ("/", None),
        ] {
            assert_eq!(Command::parse(text), want, "{text:?}");
        }
        assert!(is_stop_word("/STOP") && !is_stop_word("stop it"));
        assert_eq!(
            Command::read("!MODEL   alt  high "),
            Some((Command::Model, "alt  high"))
        );
        assert_eq!(Command::read("/model"), Some((Command::Model, "")));
        assert_eq!(Command::New.word(), "new");
    }
}
