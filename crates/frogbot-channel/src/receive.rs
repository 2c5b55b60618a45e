//! What every adapter's receive path and platform client share beyond [`crate::engine`]:
//! platform-neutral rules about calls and deliveries, never a platform type.
//!
//! - [`Recent`]: a bounded memory of recent deliveries (a repeat recognised, what an edit needs
//!   of the message it changes).
//! - [`Pending`]: a bound on the deliveries waiting or running at once (load shedding).
//! - [`lets_in`]: the access check asked before an adapter does anything for a person (opens a
//!   thread for them).
//! - [`agent_thread`]: which agent conversation of a direct chat without threads a message
//!   belongs to.
//! - [`logged`]: what became of a delivery, logged the same by every adapter.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};

use frogbot_model::{
    BoxError, ChannelIdentity, ChannelRef, ChatInfo, IdentityResolver, PlatformUser,
};
use hashlink::LinkedHashMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{debug, error, warn};

use crate::{AccessCheck, EngineError, EngineHandle, channel_chat_id};

/// Whether `user` of `platform` may start a conversation in `thread`, asked before an adapter
/// does anything for them (opens a thread, starts one for a command); the engine decides again
/// when their message comes. Their FrogBot identity (the channel's identity hook) let in by the
/// access check for the thread's chat, owned by them. A failing identity hook checks them as
/// anonymous (the access check decides what an unknown person may do); a failing access check
/// comes back for the caller to decide on.
pub async fn lets_in(
    identity: &dyn IdentityResolver,
    access: &dyn AccessCheck,
    platform: &str,
    user: &PlatformUser,
    thread: &str,
) -> Result<bool, BoxError> {
    let who = identity
        .resolve(&ChannelIdentity {
            platform: platform.into(),
            user: user.clone(),
        })
        .await
        .unwrap_or_else(|e| {
            warn!(error = %e, "{platform}: identity hook failed: checked as anonymous");
            None
        });
    let chat = ChatInfo {
        chat_id: channel_chat_id(platform, thread),
        owner: who.clone(),
        channel: Some(ChannelRef {
            platform: platform.into(),
            thread: thread.to_owned(),
        }),
    };
    access.allow(who.as_ref(), &chat).await
}

/// The agent conversation a message of a direct chat belongs to, on a platform whose direct
/// chats have no threads (an agent's conversation there is a thread id of its own, made from the
/// chat and its first message): the first of `roots` (such thread ids) the engine knows, else
/// the thread of the question whose current message is `message` (the platform's id) when
/// `here` takes it for one of this chat. A failing look-up is logged and finds nothing.
pub async fn agent_thread(
    engine: &EngineHandle,
    platform: &str,
    roots: impl IntoIterator<Item = String>,
    message: &str,
    here: impl Fn(&str) -> bool,
) -> Option<String> {
    for thread in roots {
        match engine.thread_known(platform, &thread).await {
            Ok(true) => return Some(thread),
            Ok(false) => {}
            Err(e) => {
                warn!(error = %e, thread, "{platform}: could not look up an agent conversation")
            }
        }
    }
    match engine.form_open(platform, message).await {
        Ok(target) => target.map(|t| t.thread.id).filter(|t| here(t)),
        Err(e) => {
            warn!(error = %e, message, "{platform}: could not look up a question's message");
            None
        }
    }
}

/// Logs what the engine did with `what` (a message, a click…) from `platform`: the outcome at
/// debug level, a failure as an error. The outcome, when there is one.
pub fn logged<T: Debug>(platform: &str, what: &str, result: Result<T, EngineError>) -> Option<T> {
    match result {
        Ok(outcome) => {
            debug!(?outcome, "{platform}: {what} handled");
            Some(outcome)
        }
        Err(e) => {
            error!(error = %e, "{platform}: {what} not handled");
            None
        }
    }
}

/// A bounded memory of recently seen keys, each with a value, the oldest forgotten first: a
/// platform's repeated deliveries recognised (Slack's event ids), or what an edit needs of the
/// message it changes (Matrix's thread and author).
#[derive(Debug)]
pub struct Recent<V = ()> {
    cap: usize,
    entries: Mutex<LinkedHashMap<String, V>>,
}

impl<V> Recent<V> {
    /// Remembers up to `cap` (at least 1) keys.
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            entries: Mutex::default(),
        }
    }

    fn entries(&self) -> MutexGuard<'_, LinkedHashMap<String, V>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers `value` under `key` (a known key keeps its place); `true` when the key is new.
    pub fn note(&self, key: &str, value: V) -> bool {
        let mut entries = self.entries();
        let new = entries.replace(key.to_owned(), value).is_none();
        while entries.len() > self.cap {
            entries.pop_front();
        }
        new
    }

    /// What `key` was remembered with.
    pub fn get(&self, key: &str) -> Option<V>
    where
        V: Clone,
    {
        self.entries().get(key).cloned()
    }

    /// Forgets `key` (its delivery failed: a retry should be processed).
    pub fn forget(&self, key: &str) {
        self.entries().remove(key);
    }
}

impl Recent {
    /// `true` the first time `key` is seen (it is remembered), `false` for a repeat.
    pub fn first(&self, key: &str) -> bool {
        self.note(key, ())
    }
}

/// How many deliveries wait in the thread queues or run now, bounded: a delivery takes a place
/// (a permit) before it is queued and gives it back when it is done (or its task failed).
#[derive(Debug)]
pub struct Pending {
    max: usize,
    places: Arc<Semaphore>,
}

impl Pending {
    /// At most `max` (at least 1) at once.
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            max,
            places: Arc::new(Semaphore::new(max)),
        }
    }

    /// How many there are now.
    pub fn len(&self) -> usize {
        self.max - self.places.available_permits()
    }

    /// Whether none waits or runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }

    /// A place for one more (given back when dropped), or `None` when all are taken.
    pub fn take(&self) -> Option<OwnedSemaphorePermit> {
        self.places.clone().try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An identity hook that fails, or names `platform:id`.
    struct Identity(bool);

    #[async_trait::async_trait]
    impl IdentityResolver for Identity {
        async fn resolve(
            &self,
            who: &ChannelIdentity,
        ) -> Result<Option<frogbot_model::UserId>, BoxError> {
            if self.0 {
                return Err("identity service down".into());
            }
            Ok(Some(frogbot_model::UserId::new(format!(
                "{}:{}",
                who.platform, who.user.id
            ))))
        }
    }

    /// Lets in a known person only, and records whom it was asked about and the chat's owner.
    #[derive(Default)]
    struct KnownOnly(Mutex<Vec<(Option<String>, Option<String>)>>);

    #[async_trait::async_trait]
    impl AccessCheck for KnownOnly {
        async fn allow(
            &self,
            user: Option<&frogbot_model::UserId>,
            chat: &ChatInfo,
        ) -> Result<bool, BoxError> {
            let owner = chat.owner.as_ref().map(|u| u.0.clone());
            self.0
                .lock()
                .unwrap()
                .push((user.map(|u| u.0.clone()), owner));
            Ok(user.is_some())
        }
    }

    #[tokio::test]
    async fn a_failing_identity_hook_is_checked_as_anonymous_not_let_in() {
        let ada = PlatformUser {
            id: "U1".into(),
            ..Default::default()
        };
        let access = KnownOnly::default();
        let known = lets_in(&Identity(false), &access, "slack", &ada, "C1").await;
        assert!(known.unwrap(), "a known person may start");
        let failing = lets_in(&Identity(true), &access, "slack", &ada, "C1").await;
        assert!(!failing.unwrap(), "checked as anonymous, so refused");
        assert_eq!(
            *access.0.lock().unwrap(),
            vec![
                (Some("slack:U1".into()), Some("slack:U1".into())),
                (None, None)
            ],
            "the chat is theirs when known; anonymous when the hook fails"
        );
    }

    #[test]
    fn recent_keys_are_bounded_oldest_first_and_a_forgotten_one_is_new_again() {
        let seen = Recent::new(2);
        assert!(seen.first("a") && seen.first("b"));
        assert!(!seen.first("a"), "a duplicate");
        assert!(seen.first("c"), "a third key pushes out the oldest");
        assert!(seen.first("a"), "a was forgotten");
        seen.forget("c");
        assert!(seen.first("c"), "a failed delivery is processed again");
        let recent = Recent::new(1);
        assert!(recent.note("m", ("thread", "author")));
        assert_eq!(recent.get("m"), Some(("thread", "author")));
    }

    #[test]
    fn pending_places_are_bounded_and_given_back_when_dropped() {
        let pending = Pending::new(2);
        let one = pending.take().unwrap();
        let two = pending.take().unwrap();
        assert!(pending.take().is_none(), "past the bound");
        assert_eq!((pending.len(), pending.max()), (2, 2));
        drop(one);
        assert_eq!(pending.len(), 1);
        let three = pending.take();
        assert!(three.is_some());
        drop((two, three));
        assert!(pending.is_empty());
        assert_eq!(Pending::new(0).max(), 1, "at least one");
    }
}
