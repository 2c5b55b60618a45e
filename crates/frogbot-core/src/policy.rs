//! Who may do what: the one authorization policy of FrogBot.
//!
//! Every caller is a [`Principal`]: a person (a configured user's token, or a platform identity
//! on a channel), an **agent** (a token given agent rights, with the platform targets it may
//! reach), the **operator** (the CLI working on the database) or **anonymous**. Every HTTP route
//! and every engine entry that takes a caller (`Engine::with_policy`) asks [`Policy::decide`] about one
//! `(principal, action)` — the resource (a chat row, an ask's asker, a target) travels inside the
//! [`Action`] — and gets `Ok(())` or a [`Denied`] saying why. Nothing else decides access; the
//! handlers only load the resource and ask.
//!
//! | action | anonymous (if `anonymous = "chat"`) | user | agent | operator |
//! |---|---|---|---|---|
//! | route `Public` (`/`, `/healthz`, `/readyz`; an app's web view `/apps/…`, whose address is its capability) | yes | yes | yes | yes |
//! | route `Caller` (chats, asks) | only if admitted, else 401 | yes | yes | yes |
//! | route `Agent` (agent chats, agent messages, pins, acks, inbox) | 401 | 403 | yes | yes |
//! | `ListChats` | ownerless chats | its own | its own | all |
//! | `CreateChat` | yes | yes | yes | yes |
//! | `ReadChat` | ownerless web chats no agent holds | those and its own | those, its own, and chats bound to it | all |
//! | `WriteChat` (send, edit / delete queued, settle, withdraw, stop, unpin) | ownerless web chats no agent holds | those and its own web chats | the same | all |
//! | `OpenAgentChat(target)` | 401 | 403 | if `targets` allow it | all |
//! | `AgentWrite(chat)` | 401 | 403 | chats bound to it, else 404 | all |
//! | `UploadFile(chat)` | as `WriteChat` | as `WriteChat` | as `WriteChat`, and chats bound to it | all |
//! | `ReadInbox` | 401 | 403 | its own | all |
//! | `BlockEvent(web chat)` / `(channel chat)` | as `WriteChat` / 401 | as `WriteChat` / 403 | as `WriteChat` / chats bound to it | all |
//! | `CreateAsk(web: new or owned chat)` / `(platform target)` | ownerless or new / 401 | owned or new / 403 | owned or new / if `targets` allow it | all |
//! | `ReadAsk` (read, wait, cancel) | asks asked anonymously | its own | its own | all |
//!
//! Stopping a turn is `WriteChat` plus the engine's rule that only its driver stops it (over HTTP a
//! turn without a driver only by an anonymous caller). Binding a chat to an agent is the store's
//! `bind_decision`: only a chat the call creates, or one bound to that agent already (an ask's own
//! chat, made only of asks, for the asker) — never a person's conversation.
//!
//! Anonymous callers are admitted only where the configuration says so ([`AnonymousAccess`]):
//! by default, only when no user and no agent is configured (the embedded default, where the
//! web chat works with no account). Public routes (`/`, `/healthz`, `/readyz`) ask nothing.
//!
//! This module decides; it must not load anything (no store, no I/O): callers pass what they read.

use std::fmt;

use crate::model::UserId;
use crate::store::ChatRow;

/// What the policy reads of a chat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChatView<'a> {
    /// Its id (for messages).
    pub chat_id: &'a str,
    /// Its owner.
    pub owner: Option<&'a UserId>,
    /// Whether it is a platform thread's chat.
    pub channel: bool,
    /// The agent it is bound to (`""`: bound by an anonymous caller before agents needed tokens).
    pub agent: Option<&'a str>,
}

impl<'a> ChatView<'a> {
    /// The view of a stored chat.
    pub fn of(row: &'a ChatRow) -> ChatView<'a> {
        ChatView {
            chat_id: row.chat_id.as_str(),
            owner: row.owner.as_ref(),
            channel: row.channel.is_some(),
            agent: row.agent.as_deref(),
        }
    }
}

/// Who calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// No credentials.
    Anonymous,
    /// A person with a configured user's token.
    User(UserId),
    /// An agent: a token given agent rights, with the targets it may reach.
    Agent(Agent),
    /// The operator: the CLI working on the database directly.
    Operator,
}

/// An agent principal: its id (the chats it opens are owned by and bound to it) and its targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agent {
    /// Its id, in the same space as user ids.
    pub id: UserId,
    /// Where it may open conversations and ask people.
    pub targets: Targets,
}

impl Principal {
    /// The id the engine records as author, owner or agent (`None`: anonymous or the operator).
    pub fn user_id(&self) -> Option<&UserId> {
        match self {
            Principal::User(u) => Some(u),
            Principal::Agent(a) => Some(&a.id),
            Principal::Anonymous | Principal::Operator => None,
        }
    }

    /// Whether this is an agent principal.
    pub fn is_agent(&self) -> bool {
        matches!(self, Principal::Agent(_))
    }

    /// A short word for logs and messages: `anonymous`, `user alice`, `agent deploy`, `operator`.
    pub fn describe(&self) -> String {
        match self {
            Principal::Anonymous => "anonymous".into(),
            Principal::User(u) => format!("user {u}"),
            Principal::Agent(a) => format!("agent {}", a.id),
            Principal::Operator => "operator".into(),
        }
    }
}

/// The platform targets an agent may reach: patterns `platform:*` (anywhere on the platform),
/// `platform:ID` (a channel, a person or a thread with that id — and the threads inside a
/// channel whose ids start with `ID:` or `ID|`), `web` (web chats of its own) and `web:USER`
/// (web chats for that user; `web:*` any user).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets(Vec<String>);

/// A target pattern that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("target {pattern:?}: {reason}")]
pub struct BadTarget {
    /// The pattern.
    pub pattern: String,
    /// What is wrong.
    pub reason: &'static str,
}

impl Targets {
    /// Parses patterns (see [`Targets`]).
    pub fn parse<I, S>(patterns: I) -> Result<Targets, BadTarget>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut out = Vec::new();
        for p in patterns {
            let p: String = p.into();
            let bad = |reason| BadTarget {
                pattern: p.clone(),
                reason,
            };
            if p == "web" {
                out.push(p);
                continue;
            }
            let Some((platform, id)) = p.split_once(':') else {
                return Err(bad(
                    "write it as `platform:ID`, `platform:*`, `web` or `web:USER`",
                ));
            };
            if platform.is_empty() || !platform.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(bad("the platform is a word such as slack or telegram"));
            }
            if id.is_empty() || id.chars().any(char::is_whitespace) {
                return Err(bad("the id after `:` is empty or has spaces"));
            }
            if id.contains('*') && id != "*" {
                return Err(bad("`*` stands alone: `platform:*`"));
            }
            out.push(p);
        }
        Ok(Targets(out))
    }

    /// The patterns as written.
    pub fn patterns(&self) -> &[String] {
        &self.0
    }

    /// Whether `target` is allowed.
    pub fn allows(&self, target: &Target<'_>) -> bool {
        self.0.iter().any(|p| pattern_allows(p, target))
    }
}

fn pattern_allows(pattern: &str, target: &Target<'_>) -> bool {
    match target {
        Target::Web { for_user: None } => pattern == "web" || pattern.starts_with("web:"),
        Target::Web {
            for_user: Some(user),
        } => pattern == "web:*" || pattern.strip_prefix("web:") == Some(user.as_str()),
        Target::Platform { platform, id } => {
            let Some((p, pid)) = pattern.split_once(':') else {
                return false;
            };
            if p == "web" || p != *platform {
                return false;
            }
            pid == "*"
                || *id == pid
                || id
                    .strip_prefix(pid)
                    .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('|'))
        }
    }
}

/// Where an agent opens a conversation or an ask goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// A web chat: the agent's own (`for_user: None`) or one for a configured user.
    Web {
        /// The user the chat is for.
        for_user: Option<&'a UserId>,
    },
    /// A platform: a channel, a thread or a person, by the platform's id.
    Platform {
        /// The platform (`slack`, `telegram`, …).
        platform: &'a str,
        /// The channel, thread or person.
        id: &'a str,
    },
}

/// Whether anonymous callers are admitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AnonymousAccess {
    /// Never: every API call needs a token.
    #[default]
    None,
    /// As the web chat: they create, read and write ownerless web chats (shared by every
    /// anonymous caller) and ask into them. Never the agent APIs.
    Chat,
}

/// What a caller wants to do (and to what).
#[derive(Clone, Copy, Debug)]
pub enum Action<'a> {
    /// List chats (the handler lists only the caller's: see [`Policy::list_owner`]).
    ListChats,
    /// Read a chat, its pending calls or its live events.
    ReadChat(&'a ChatView<'a>),
    /// Create a new web chat by writing into it.
    CreateChat,
    /// Send, edit or delete a queued message, settle or withdraw a question, stop a turn, unpin
    /// (a person in their own chat).
    WriteChat(&'a ChatView<'a>),
    /// Open an agent conversation at a target.
    OpenAgentChat(Target<'a>),
    /// Post, edit, delete, pin or acknowledge as the chat's agent.
    AgentWrite(&'a ChatView<'a>),
    /// Upload a file to a chat (to send it in a message): whoever may write it, and its agent.
    UploadFile(&'a ChatView<'a>),
    /// Read the caller's inbox.
    ReadInbox,
    /// Send a block event (an event button) into a chat.
    BlockEvent(&'a ChatView<'a>),
    /// Ask a person: into a web chat (`None`: a new one) or at a platform target.
    CreateAsk(AskInto<'a>),
    /// Read, wait on or cancel an ask asked by `asker`.
    ReadAsk {
        /// Who asked it (`None`: anonymous).
        asker: Option<&'a UserId>,
    },
}

/// Where an ask goes, for [`Action::CreateAsk`].
#[derive(Clone, Copy, Debug)]
pub enum AskInto<'a> {
    /// A web chat: `None` when it does not exist yet.
    Web(Option<&'a ChatView<'a>>),
    /// A platform target.
    Platform(Target<'a>),
}

/// Who may call a route at all, before its handler loads anything: every HTTP route is
/// registered with one (the route × principal test fails for a route without).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Anyone, with or without a token (the web chat page, `/healthz`, `/readyz`).
    Public,
    /// Any admitted caller: a user, an agent, or anonymous where admitted.
    Caller,
    /// Agents only (the agent APIs).
    Agent,
}

/// Why an action is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// Anonymous callers are not admitted here: send a token (HTTP 401).
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// The caller is known but may not do this (HTTP 403).
    #[error("{0}")]
    Forbidden(String),
    /// The resource is hidden from the caller: answered as if it did not exist (HTTP 404).
    #[error("{0}")]
    Hidden(String),
}

impl Denied {
    fn forbidden(m: impl fmt::Display) -> Denied {
        Denied::Forbidden(m.to_string())
    }
}

/// The policy: the configuration's answer to "are anonymous callers admitted".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Whether anonymous callers are admitted.
    pub anonymous: AnonymousAccess,
}

const NEED_TOKEN: &str = "this server needs a bearer token (Authorization: Bearer …)";
const NEED_AGENT: &str = "this needs an agent's token: agent APIs are for configured [[agents]]";

impl Policy {
    /// A policy admitting anonymous callers as `anonymous` says.
    pub fn new(anonymous: AnonymousAccess) -> Policy {
        Policy { anonymous }
    }

    /// Whether `who` may do `action`.
    pub fn decide(&self, who: &Principal, action: Action<'_>) -> Result<(), Denied> {
        if matches!(who, Principal::Operator) {
            return Ok(());
        }
        if matches!(who, Principal::Anonymous) && self.anonymous == AnonymousAccess::None {
            return Err(match action {
                Action::OpenAgentChat(_)
                | Action::AgentWrite(_)
                | Action::ReadInbox
                | Action::CreateAsk(AskInto::Platform(_)) => Denied::Unauthenticated(NEED_AGENT),
                _ => Denied::Unauthenticated(NEED_TOKEN),
            });
        }
        let me = who.user_id();
        match action {
            Action::ListChats | Action::CreateChat => Ok(()),
            Action::ReadChat(chat) => {
                if may_read(chat, me) {
                    Ok(())
                } else {
                    Err(Denied::forbidden(format!(
                        "chat {} belongs to another user",
                        chat.chat_id
                    )))
                }
            }
            Action::WriteChat(chat) => {
                if !may_write(chat, me) {
                    // A channel chat is written from its thread (the handler says 409 first).
                    Err(Denied::forbidden(format!(
                        "chat {} belongs to another user",
                        chat.chat_id
                    )))
                } else {
                    Ok(())
                }
            }
            Action::OpenAgentChat(target) => match who {
                Principal::Agent(a) if a.targets.allows(&target) => Ok(()),
                Principal::Agent(a) => Err(Denied::forbidden(format!(
                    "agent {} may not reach {} (its targets: {})",
                    a.id,
                    describe_target(&target),
                    a.targets.patterns().join(", ")
                ))),
                Principal::Anonymous => Err(Denied::Unauthenticated(NEED_AGENT)),
                _ => Err(Denied::forbidden(NEED_AGENT)),
            },
            Action::AgentWrite(chat) => match who {
                Principal::Agent(a) if chat.agent == Some(a.id.as_str()) => Ok(()),
                // A chat bound to another agent, or to none, reads as absent.
                Principal::Agent(_) => Err(Denied::Hidden(format!(
                    "no agent chat {} of yours",
                    chat.chat_id
                ))),
                Principal::Anonymous => Err(Denied::Unauthenticated(NEED_AGENT)),
                _ => Err(Denied::forbidden(NEED_AGENT)),
            },
            Action::UploadFile(chat) => match who {
                Principal::Agent(a) if chat.agent == Some(a.id.as_str()) => Ok(()),
                _ => self.decide(who, Action::WriteChat(chat)),
            },
            Action::ReadInbox => match who {
                Principal::Agent(_) => Ok(()),
                Principal::Anonymous => Err(Denied::Unauthenticated(NEED_AGENT)),
                _ => Err(Denied::forbidden(NEED_AGENT)),
            },
            Action::BlockEvent(chat) => {
                if chat.channel {
                    match who {
                        Principal::Agent(a) if chat.agent == Some(a.id.as_str()) => Ok(()),
                        Principal::Anonymous => Err(Denied::Unauthenticated(NEED_AGENT)),
                        _ => Err(Denied::forbidden(
                            "events in a channel thread come from its platform; over HTTP only the chat's agent sends them",
                        )),
                    }
                } else {
                    self.decide(who, Action::WriteChat(chat))
                }
            }
            Action::CreateAsk(AskInto::Web(None)) => Ok(()),
            Action::CreateAsk(AskInto::Web(Some(chat))) => {
                if chat.channel {
                    return Err(Denied::forbidden(format!(
                        "chat {} belongs to a channel thread: ask its platform target",
                        chat.chat_id
                    )));
                }
                let mine = match chat.owner {
                    Some(owner) => Some(owner) == me,
                    None => me.is_none(),
                };
                if mine && (chat.agent.is_none() || chat.agent == me.map(|u| u.as_str())) {
                    Ok(())
                } else {
                    Err(Denied::forbidden(format!(
                        "chat {} is not yours: ask into a chat you own or a new one",
                        chat.chat_id
                    )))
                }
            }
            Action::CreateAsk(AskInto::Platform(target)) => {
                self.decide(who, Action::OpenAgentChat(target))
            }
            Action::ReadAsk { asker } => {
                if asker == me {
                    Ok(())
                } else {
                    Err(Denied::forbidden("this ask was asked by someone else"))
                }
            }
        }
    }

    /// Whether `who` may call a route of `access` at all.
    pub fn admit(&self, who: &Principal, access: Access) -> Result<(), Denied> {
        match (access, who) {
            (Access::Public, _) | (_, Principal::Operator) => Ok(()),
            (Access::Caller, Principal::Anonymous) if self.anonymous == AnonymousAccess::None => {
                Err(Denied::Unauthenticated(NEED_TOKEN))
            }
            (Access::Caller, _) => Ok(()),
            (Access::Agent, Principal::Agent(_)) => Ok(()),
            (Access::Agent, Principal::Anonymous) => Err(Denied::Unauthenticated(NEED_AGENT)),
            (Access::Agent, _) => Err(Denied::forbidden(NEED_AGENT)),
        }
    }

    /// The owner whose chats `GET /api/chats` lists for `who` (`None`: the ownerless ones).
    pub fn list_owner<'a>(&self, who: &'a Principal) -> Option<&'a UserId> {
        who.user_id()
    }
}

/// Owned chats: the owner only (and the agent bound to them); ownerless web chats: every
/// admitted caller (the contract's shared chats) unless an agent is bound, when they are its;
/// ownerless channel chats: their bound agent.
fn may_read(chat: &ChatView<'_>, me: Option<&UserId>) -> bool {
    let bound_to_me = chat
        .agent
        .is_some_and(|a| me.is_some_and(|m| m.as_str() == a));
    if let Some(owner) = chat.owner {
        return Some(owner) == me || bound_to_me;
    }
    if chat.agent.is_some() {
        return bound_to_me;
    }
    !chat.channel
}

/// Written from the web: a web chat's owner; an ownerless web chat that no agent holds: anyone.
fn may_write(chat: &ChatView<'_>, me: Option<&UserId>) -> bool {
    !chat.channel
        && match chat.owner {
            Some(owner) => Some(owner) == me,
            None => chat.agent.is_none(),
        }
}

fn describe_target(t: &Target<'_>) -> String {
    match t {
        Target::Web { for_user: None } => "a web chat".into(),
        Target::Web { for_user: Some(u) } => format!("web:{u}"),
        Target::Platform { platform, id } => format!("{platform}:{id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: &str, targets: &[&str]) -> Principal {
        Principal::Agent(Agent {
            id: UserId::new(id),
            targets: Targets::parse(targets.iter().copied()).unwrap(),
        })
    }

    fn tg(id: &str) -> Target<'_> {
        Target::Platform {
            platform: "telegram",
            id,
        }
    }

    #[test]
    fn targets_match_platforms_ids_and_threads_inside_channels() {
        let t = Targets::parse(["telegram:*", "slack:C0123", "matrix:!room:hs"]).unwrap();
        assert!(t.allows(&tg("777")));
        let slack = |id| Target::Platform {
            platform: "slack",
            id,
        };
        assert!(t.allows(&slack("C0123")));
        assert!(t.allows(&slack("C0123:1700.000100")));
        assert!(!t.allows(&slack("C0124")));
        assert!(!t.allows(&slack("C01234")));
        assert!(!t.allows(&Target::Platform {
            platform: "discord",
            id: "1"
        }));
        assert!(t.allows(&Target::Platform {
            platform: "matrix",
            id: "!room:hs|$event"
        }));
        assert!(!t.allows(&Target::Web { for_user: None }));
        let w = Targets::parse(["web:alice"]).unwrap();
        assert!(w.allows(&Target::Web { for_user: None }));
        assert!(w.allows(&Target::Web {
            for_user: Some(&UserId::new("alice"))
        }));
        assert!(!w.allows(&Target::Web {
            for_user: Some(&UserId::new("bob"))
        }));
        for bad in [
            "telegram",
            "telegram:",
            ":1",
            "tele gram:1",
            "slack:C*",
            "slack:a b",
        ] {
            assert!(Targets::parse([bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn agent_apis_need_an_agent_allowed_the_target() {
        let open = Policy::new(AnonymousAccess::Chat);
        let alice = Principal::User(UserId::new("alice"));
        let a = agent("deploy", &["slack:*"]);
        let act = Action::OpenAgentChat(tg("777"));
        assert!(matches!(
            open.decide(&Principal::Anonymous, act),
            Err(Denied::Unauthenticated(_))
        ));
        assert!(matches!(
            open.decide(&alice, act),
            Err(Denied::Forbidden(_))
        ));
        assert!(matches!(open.decide(&a, act), Err(Denied::Forbidden(_))));
        assert!(open.decide(&agent("t", &["telegram:*"]), act).is_ok());
        assert!(
            open.decide(&Principal::Anonymous, Action::ReadInbox)
                .is_err()
        );
        assert!(open.decide(&alice, Action::ReadInbox).is_err());
        assert!(open.decide(&a, Action::ReadInbox).is_ok());
    }

    #[test]
    fn anonymous_is_admitted_only_when_configured() {
        let closed = Policy::new(AnonymousAccess::None);
        for act in [Action::ListChats, Action::CreateChat] {
            assert!(matches!(
                closed.decide(&Principal::Anonymous, act),
                Err(Denied::Unauthenticated(_))
            ));
            assert!(
                Policy::new(AnonymousAccess::Chat)
                    .decide(&Principal::Anonymous, act)
                    .is_ok()
            );
        }
    }

    #[test]
    fn chats_are_read_and_written_by_their_owners() {
        let p = Policy::new(AnonymousAccess::Chat);
        let alice = UserId::new("alice");
        let owned = ChatView {
            chat_id: "c1",
            owner: Some(&alice),
            channel: false,
            agent: None,
        };
        let ownerless = ChatView {
            owner: None,
            ..owned
        };
        let agents = ChatView {
            owner: None,
            agent: Some("deploy"),
            ..owned
        };
        let a = Principal::User(alice.clone());
        let bob = Principal::User(UserId::new("bob"));
        assert!(p.decide(&a, Action::ReadChat(&owned)).is_ok());
        assert!(p.decide(&bob, Action::ReadChat(&owned)).is_err());
        assert!(
            p.decide(&Principal::Anonymous, Action::ReadChat(&owned))
                .is_err()
        );
        assert!(
            p.decide(&Principal::Anonymous, Action::WriteChat(&ownerless))
                .is_ok()
        );
        // A user writes in the shared chats (as the contract says) but does not ask into them.
        assert!(p.decide(&a, Action::WriteChat(&ownerless)).is_ok());
        assert!(
            p.decide(&a, Action::CreateAsk(AskInto::Web(Some(&ownerless))))
                .is_err()
        );
        // A chat bound to an agent is not the anonymous callers'.
        assert!(
            p.decide(&Principal::Anonymous, Action::ReadChat(&agents))
                .is_err()
        );
        assert!(
            p.decide(&agent("deploy", &[]), Action::ReadChat(&agents))
                .is_ok()
        );
        assert!(
            p.decide(&agent("other", &[]), Action::AgentWrite(&agents))
                .is_err()
        );
        assert!(
            p.decide(&agent("deploy", &[]), Action::AgentWrite(&agents))
                .is_ok()
        );
        // Files: the chat's writers and its agent upload; another agent or user does not.
        let alices_with_agent = ChatView {
            agent: Some("deploy"),
            ..owned
        };
        assert!(
            p.decide(
                &agent("deploy", &[]),
                Action::UploadFile(&alices_with_agent)
            )
            .is_ok()
        );
        assert!(
            p.decide(&agent("other", &[]), Action::UploadFile(&alices_with_agent))
                .is_err()
        );
        assert!(p.decide(&a, Action::UploadFile(&owned)).is_ok());
        assert!(p.decide(&bob, Action::UploadFile(&owned)).is_err());
        assert!(
            p.decide(&Principal::Operator, Action::ReadChat(&owned))
                .is_ok()
        );
    }

    #[test]
    fn asks_belong_to_their_asker() {
        let p = Policy::new(AnonymousAccess::Chat);
        let alice = UserId::new("alice");
        let a = Principal::User(alice.clone());
        assert!(
            p.decide(
                &a,
                Action::ReadAsk {
                    asker: Some(&alice)
                }
            )
            .is_ok()
        );
        assert!(p.decide(&a, Action::ReadAsk { asker: None }).is_err());
        assert!(
            p.decide(
                &Principal::Anonymous,
                Action::ReadAsk {
                    asker: Some(&alice)
                }
            )
            .is_err()
        );
        assert!(
            p.decide(&a, Action::CreateAsk(AskInto::Platform(tg("780"))))
                .is_err()
        );
    }
}
