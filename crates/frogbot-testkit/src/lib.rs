//! `frogbot-testkit`: what FrogBot's test suites share, in one place (no suite defines its own
//! copy, no `#[path]` includes):
//!
//! - databases: frogbot-testdb's, re-exported (a private, throwaway PostgreSQL cluster
//!   ([`PgCluster`]), a fresh database for every test ([`sqlite_db`], [`postgres_db`], [`TestDb`])
//!   and ways to break one under a running store ([`lock_sqlite`], [`drop_postgres_db`])), and the
//!   store of a URL ([`open_store`]);
//! - the backend matrix: [`backends!`] runs `async fn NAME(url: &str)` tests once on SQLite and
//!   once on PostgreSQL;
//! - engines: [`TestModel`] (a scripted model that records its calls, can be held at a gate and
//!   measures concurrent steps with a [`Concurrency`] probe), [`test_engine`] / [`engine_over`]
//!   (an engine over a store offering a `TestModel` as `main`), [`offer`], and shorthands for
//!   messages and questions ([`chat`], [`msg`], [`started`], [`queued`], [`ask_input`],
//!   [`answer`]);
//! - waiting: [`eventually`] (poll a condition with a deadline) and [`wait_quiet`];
//! - [`PausingStore`]: a store wrapper that holds the engine once at a [`PausePoint`] between two
//!   of its writes, so a test can act inside that window.
//!
//! The dependency graph stays acyclic, and no arrow runs back up: this crate depends on
//! `frogbot-core`, `frogbot-sqlite` and `frogbot-postgres`, so none of those names it, not even as
//! a dev-dependency (`scripts/check-invariants.sh`). The engine's own tests are
//! `frogbot-engine-tests`; the store crates' tests take their databases from `frogbot-testdb`.
//!
//! Not for production code: nothing here is hardened, and it must never be a dependency of a
//! published crate.

mod engine;
mod pausing;
pub mod peak;

pub use engine::{
    Call, Concurrency, QUESTION_CALL, TestModel, after_tool, answer, ask_input, chat, engine_over,
    engine_with, eventually, last_user, msg, offer, queued, started, test_engine, texts,
    user_texts, wait_quiet,
};
pub use frogbot_testdb::{
    PgCluster, SqliteWriteLock, TestDb, drop_postgres_db, lock_sqlite, postgres_db,
    postgres_required, sqlite_db, sqlite_exec,
};
pub use pausing::{PausePoint, PausingStore};

/// Opens the store of a test database URL (`sqlite://…` or `postgres://…`), applying migrations.
///
/// # Panics
/// When the store cannot be opened.
pub async fn open_store(url: &str) -> frogbot_core::store::DynStore {
    if url.starts_with("postgres") {
        std::sync::Arc::new(
            frogbot_postgres::PostgresStore::open(url)
                .await
                .expect("open the PostgreSQL store"),
        )
    } else {
        std::sync::Arc::new(
            frogbot_sqlite::SqliteStore::open(url)
                .await
                .expect("open the SQLite store"),
        )
    }
}

/// Instantiates `async fn NAME(url: &str)` test functions for both backends: `sqlite::NAME` on a
/// fresh SQLite file and `postgres::NAME` on a fresh PostgreSQL database (returning early, with
/// the testkit's message, when PostgreSQL is not installed). Attributes written before a name
/// (`#[ignore = "…"]`) go on both tests. With `db:` first, the functions take the [`TestDb`]
/// itself (`async fn NAME(db: TestDb)`), for suites that keep it (a server's configuration).
///
/// ```ignore
/// async fn a_chat_starts_idle(url: &str) { /* … */ }
/// frogbot_testkit::backends!(a_chat_starts_idle);
/// ```
#[macro_export]
macro_rules! backends {
    (db: $($(#[$meta:meta])* $name:ident),* $(,)?) => {
        mod sqlite {
            $(
                $(#[$meta])*
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::sqlite_db()).await;
                }
            )*
        }
        mod postgres {
            $(
                $(#[$meta])*
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = $crate::postgres_db() else { return };
                    super::$name(db).await;
                }
            )*
        }
    };
    ($($(#[$meta:meta])* $name:ident),* $(,)?) => {
        mod sqlite {
            $(
                $(#[$meta])*
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = $crate::sqlite_db();
                    super::$name(&db.url).await;
                }
            )*
        }
        mod postgres {
            $(
                $(#[$meta])*
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = $crate::postgres_db() else { return };
                    super::$name(&db.url).await;
                }
            )*
        }
    };
}
