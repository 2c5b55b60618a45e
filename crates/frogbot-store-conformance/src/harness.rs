//! The harness: a [`Db`] is what each case runs on, and the first case checks the harness itself.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use frogbot_core::store::*;

use crate::support::*;

/// Opens another handle on the same database.
pub type Reopen = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = DynStore> + Send>> + Send + Sync>;

/// A fresh database for one test.
pub struct Db {
    /// The first handle.
    pub store: DynStore,
    reopen: Reopen,
    _guard: Box<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("store", &self.store).finish()
    }
}

impl Db {
    /// A database: its first handle, how to open another, and whatever keeps it alive.
    pub fn new(store: DynStore, reopen: Reopen, guard: impl Any + Send + Sync) -> Self {
        Self {
            store,
            reopen,
            _guard: Box::new(guard),
        }
    }

    /// Another handle on the same database (another process).
    pub async fn second_handle(&self) -> DynStore {
        (self.reopen)().await
    }
}

/// The harness itself: a fresh store answers, and a second handle sees the same database.
pub async fn conformance_harness_opens_a_store(db: Db) {
    db.store.ping().await.expect("ping");
    let other = db.second_handle().await;
    other.ping().await.expect("ping the second handle");
    let c = web("harness", None);
    start(&*db.store, &c, "u1", None, T0).await;
    assert!(
        other.get_chat(&c.chat_id).await.unwrap().is_some(),
        "the second handle reads what the first wrote"
    );
}
