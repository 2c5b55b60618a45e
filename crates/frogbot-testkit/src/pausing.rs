//! [`PausingStore`]: a [`Store`] that delegates to another and holds the engine once at a chosen
//! point around one of its operations, so a test can act in that window (a settle racing the turn
//! that asks the question) without sleeping and hoping.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Semaphore;

use frogbot_core::store::{Call, DynStore, QuestionRow, Result, Store, StoreLayer};

/// Where a [`PausingStore`] holds the engine (once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausePoint {
    /// Before the operation that saves a step asking a question (`await_answers`): a client saw
    /// the call streamed, the question record does not exist yet.
    BeforeAwaitAnswers,
    /// After it: the question records exist and the chat is released, the asking turn has not
    /// finished (its channel has not drawn the question yet).
    AfterAwaitAnswers,
    /// Before `await_answers`, held until a look-up of a question record (`get_question`) finds
    /// none; then the held save runs to its end before that look-up answers "none" — the save
    /// lands between a reader's two reads, the worst moment for a settle that looks for the record
    /// and at the chat. Released by the look-up, not by [`PausingStore::resume`].
    SaveDuringLookUp,
    /// Before a `send` (a message starting or joining a turn): whatever the caller read before
    /// it (e.g. the thread's chat) may change in the window.
    BeforeSend,
}
/// A store that pauses the first call reaching its [`PausePoint`] until [`PausingStore::resume`].
#[derive(Debug)]
pub struct PausingStore {
    inner: DynStore,
    at: PausePoint,
    armed: AtomicBool,
    arrived: Semaphore,
    go_on: Semaphore,
    /// `SaveDuringLookUp`: the held save has finished.
    saved: Semaphore,
    /// `SaveDuringLookUp`: a save is held (the look-up releases it once).
    holding: AtomicBool,
}

impl PausingStore {
    /// Wraps `inner`, pausing once at `at`.
    pub fn new(inner: DynStore, at: PausePoint) -> Arc<Self> {
        Arc::new(Self {
            inner,
            at,
            armed: AtomicBool::new(true),
            arrived: Semaphore::new(0),
            go_on: Semaphore::new(0),
            saved: Semaphore::new(0),
            holding: AtomicBool::new(false),
        })
    }

    /// Waits (at most 30 s) until a call is held at the pause point.
    pub async fn reached(&self) {
        tokio::time::timeout(Duration::from_secs(30), self.arrived.acquire())
            .await
            .unwrap_or_else(|_| panic!("nothing reached {:?}", self.at))
            .expect("semaphore open")
            .forget();
    }

    /// Lets the held call go on.
    pub fn resume(&self) {
        self.go_on.add_permits(1);
    }

    async fn point(&self, here: PausePoint) {
        if here == self.at && self.armed.swap(false, Ordering::SeqCst) {
            if here == PausePoint::SaveDuringLookUp {
                self.holding.store(true, Ordering::SeqCst);
            }
            self.arrived.add_permits(1);
            if let Ok(p) = self.go_on.acquire().await {
                p.forget();
            }
        }
    }
}

#[async_trait]
impl StoreLayer for PausingStore {
    fn inner(&self) -> &dyn Store {
        self.inner.as_ref()
    }

    async fn around<T: Send + 'static>(&self, op: &'static str, call: Call<'_, T>) -> Result<T> {
        match op {
            "await_answers" => {
                self.point(PausePoint::BeforeAwaitAnswers).await;
                self.point(PausePoint::SaveDuringLookUp).await;
                let saved = call.await;
                if self.at == PausePoint::SaveDuringLookUp {
                    self.saved.add_permits(1);
                }
                self.point(PausePoint::AfterAwaitAnswers).await;
                saved
            }
            "send" => {
                self.point(PausePoint::BeforeSend).await;
                call.await
            }
            "get_question" => {
                let found = call.await?;
                let none = (&found as &dyn Any)
                    .downcast_ref::<Option<QuestionRow>>()
                    .is_some_and(Option::is_none);
                if none && self.holding.swap(false, Ordering::SeqCst) {
                    // Let the held save run to its end, then answer what was read before it.
                    self.go_on.add_permits(1);
                    tokio::time::timeout(Duration::from_secs(30), self.saved.acquire())
                        .await
                        .expect("the held save finishes")
                        .expect("semaphore open")
                        .forget();
                }
                Ok(found)
            }
            _ => call.await,
        }
    }
}
