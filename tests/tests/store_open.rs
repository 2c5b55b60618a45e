//! Opening stores by URL, as `frogbot serve` does: a SQLite file is created on first open, its
//! migrations are applied once, and what one process wrote is there for the next.

use frogbot_core::model::{
    ChatId, Delivery, MessageMetadata, MessagePart, Role, UiMessage, UserId,
};
use frogbot_core::store::{self, Backend, NewChat};

fn message(id: &str) -> UiMessage {
    UiMessage {
        id: id.into(),
        role: Role::User,
        parts: vec![MessagePart::text("hello")],
        metadata: MessageMetadata {
            author: Some(UserId::new("alice")),
            ..Default::default()
        },
    }
}

async fn write_then_reopen(url: &str, backend: Backend) {
    let chat = ChatId::new("reopen").unwrap();
    {
        let s = store::open(url).await.unwrap();
        assert_eq!(s.backend(), backend);
        s.ping().await.unwrap();
        s.create_chat(
            &NewChat {
                chat_id: chat.clone(),
                owner: Some(UserId::new("alice")),
                channel: None,
            },
            1,
        )
        .await
        .unwrap();
        s.enqueue_message(&chat, &message("m1"), Delivery::Queue, 2)
            .await
            .unwrap();
    }
    let s = store::open(url).await.unwrap();
    let queued = s.queued_messages(&chat).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].message.text(), "hello");
    assert_eq!(queued[0].author(), Some(&UserId::new("alice")));
}

#[tokio::test]
async fn sqlite_file_is_created_and_reopened() {
    let db = frogbot_testkit::sqlite_db();
    write_then_reopen(&db.url, Backend::Sqlite).await;
}

#[tokio::test]
async fn postgres_database_is_migrated_and_reopened() {
    let Some(db) = frogbot_testkit::postgres_db() else {
        return;
    };
    write_then_reopen(&db.url, Backend::Postgres).await;
}

#[tokio::test]
async fn unknown_database_urls_are_refused() {
    let err = store::open("mysql://localhost/x").await.unwrap_err();
    assert!(
        err.to_string().contains("unsupported database url"),
        "{err}"
    );
}
