//! The store conformance suite against PostgreSQL: a fresh database per test, a second handle is a
//! second pool on the same database (as a second process would open it). The suite runs twice:
//! with the one-statement fast paths, and with every operation forced down the careful
//! (lock-first) path that the fast paths fall back to.

use std::sync::Arc;

use frogbot_core::store::DynStore;
use frogbot_postgres::PostgresStore;
use frogbot_store_conformance::Db;

async fn open(url: String, careful: bool) -> DynStore {
    let store = PostgresStore::open(&url)
        .await
        .expect("open the PostgreSQL store");
    Arc::new(if careful { store.careful_only() } else { store })
}

async fn db(careful: bool) -> Option<Db> {
    let test_db = frogbot_testdb::postgres_db()?;
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

frogbot_store_conformance::store_conformance_tests!(fresh);

mod careful {
    use super::fresh_careful;
    frogbot_store_conformance::store_conformance_tests!(fresh_careful);
}
