//! The store conformance suite against PostgreSQL: a fresh database per test, a second handle is a
//! second pool on the same database (as a second process would open it). The suite runs twice:
//! with the one-statement fast paths, and with every operation forced down the careful
//! (lock-first) path that the fast paths fall back to.

mod support;

use std::sync::Arc;

use frogbot_core::store::DynStore;
use frogbot_core::store::conformance::Db;
use frogbot_postgres::PostgresStore;

async fn open(url: String, careful: bool) -> DynStore {
    let store = PostgresStore::open(&url)
        .await
        .expect("open the PostgreSQL store");
    Arc::new(if careful { store.careful_only() } else { store })
}

async fn db(careful: bool) -> Option<Db> {
    let test_db = support::postgres_db()?;
    let url = test_db.url.clone();
    let store = open(url.clone(), careful).await;
    Some(Db::new(
        store,
        Arc::new(move || Box::pin(open(url.clone(), careful))),
        test_db,
    ))
}

async fn fresh() -> Option<Db> {
    db(false).await
}

async fn fresh_careful() -> Option<Db> {
    db(true).await
}

// `frogbot_core::store_conformance_tests!` does not compile at b6a7300 (`super::$fresh` with a
// `$fresh:path` fragment); until the suite's new version lands, the same expansion by hand.
macro_rules! conformance {
    ($fresh:ident; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some(db) = super::$fresh().await else { return };
                frogbot_core::store::conformance::$name(db).await;
            }
        )*
    };
}

mod store_conformance {
    conformance!(fresh; conformance_harness_opens_a_store);
}

mod careful {
    use super::fresh_careful;
    mod store_conformance {
        conformance!(fresh_careful; conformance_harness_opens_a_store);
    }
}
