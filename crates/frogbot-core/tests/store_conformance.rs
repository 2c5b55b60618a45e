//! The store conformance suite on every backend: `sqlite::…` and `postgres::…`.

mod sqlite {
    async fn fresh() -> Option<frogbot_testkit::TestDb> {
        Some(frogbot_testkit::sqlite_db())
    }
    frogbot_core::store_conformance_tests!(fresh);
}

mod postgres {
    async fn fresh() -> Option<frogbot_testkit::TestDb> {
        frogbot_testkit::postgres_db()
    }
    frogbot_core::store_conformance_tests!(fresh);
}
