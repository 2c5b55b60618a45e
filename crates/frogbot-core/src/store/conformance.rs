//! The store conformance suite: one set of tests every [`Store`] backend must pass.
//!
//! Each test takes a [`Db`]: a fresh, empty database's store, and a way to open a second handle on
//! the same database (as a second process would). A backend runs the whole suite with
//! [`crate::store_conformance_tests!`], given an async function that makes a [`Db`] (or `None` to
//! skip, e.g. when a database server is not installed):
//!
//! ```ignore
//! async fn fresh() -> Option<frogbot_core::store::conformance::Db> { … }
//! frogbot_core::store_conformance_tests!(fresh);
//! ```
//!
//! The factory, not a URL, is the interface, so a wrapped or third-party store runs the suite too.

#![allow(missing_docs, clippy::missing_panics_doc)]

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::*;

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

/// Runs every conformance test against the store that `$fresh().await` makes (an
/// `async fn() -> Option<Db>`; `None` skips the test).
#[macro_export]
macro_rules! store_conformance_tests {
    ($fresh:path) => {
        $crate::store_conformance_tests!(@tests $fresh;
            conformance_harness_opens_a_store,
        );
    };
    (@tests $fresh:path; $($name:ident),* $(,)?) => {
        mod store_conformance {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = super::$fresh().await else { return };
                    $crate::store::conformance::$name(db).await;
                }
            )*
        }
    };
}

/// The harness itself: a fresh store answers, and a second handle sees the same database.
pub async fn conformance_harness_opens_a_store(db: Db) {
    db.store.ping().await.expect("ping");
    let other = db.second_handle().await;
    other.ping().await.expect("ping the second handle");
}
