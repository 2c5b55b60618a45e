//! Files (`begin_file`, `put_file_chunk`, `finish_file`, `get_file`, `file_chunk`,
//! `purge_files`): bytes in chunks, invisible until finished, scoped to their chat, the same
//! upload twice kept once, cut-off uploads purged.

use frogbot_core::model::ChatId;
use frogbot_core::store::*;

use crate::Db;
use crate::support::T0;

fn new_file(id: &str, chat: &str, name: &str) -> NewFile {
    NewFile {
        id: id.into(),
        chat: ChatId::new(chat).unwrap(),
        owner: "ann".into(),
        media_type: "image/png".into(),
        filename: name.into(),
        now: T0,
    }
}

async fn write(db: &Db, file: &NewFile, chunks: &[&[u8]], sha: &str) -> FileRow {
    db.store.begin_file(file).await.unwrap();
    for (i, c) in chunks.iter().enumerate() {
        db.store
            .put_file_chunk(&file.id, i as u32, c)
            .await
            .unwrap();
    }
    db.store
        .finish_file(&FinishFile {
            id: &file.id,
            size: chunks.iter().map(|c| c.len() as u64).sum(),
            sha256: sha,
            chunks: chunks.len() as u32,
        })
        .await
        .unwrap()
}

/// A file is read back chunk by chunk, from another handle too, only once finished and only
/// through its own chat; writing into a finished or unknown file, or beginning a known id, is a
/// conflict and changes nothing.
pub async fn files_are_written_in_chunks_and_read_back_once_finished(db: Db) {
    let other = db.second_handle().await;
    let a = new_file("f1", "chat-a", "shot.png");
    let chat_a = a.chat.clone();
    db.store.begin_file(&a).await.unwrap();
    let big = vec![7u8; FILE_CHUNK_BYTES];
    db.store.put_file_chunk("f1", 0, &big).await.unwrap();
    db.store.put_file_chunk("f1", 1, b"tail").await.unwrap();
    assert_eq!(
        other.get_file(&chat_a, "f1").await.unwrap(),
        None,
        "an unfinished file is invisible"
    );
    assert!(matches!(
        db.store.begin_file(&a).await,
        Err(StoreError::Conflict { .. })
    ));
    let row = db
        .store
        .finish_file(&FinishFile {
            id: "f1",
            size: FILE_CHUNK_BYTES as u64 + 4,
            sha256: "aa",
            chunks: 2,
        })
        .await
        .unwrap();
    assert_eq!(row.id, "f1");
    assert_eq!(row.size, FILE_CHUNK_BYTES as u64 + 4);
    assert_eq!((row.chunks, row.filename.as_str()), (2, "shot.png"));
    assert_eq!(other.get_file(&chat_a, "f1").await.unwrap(), Some(row));
    assert_eq!(
        other
            .get_file(&ChatId::new("chat-b").unwrap(), "f1")
            .await
            .unwrap(),
        None,
        "another chat's file is not found through this one"
    );
    assert_eq!(other.file_chunk("f1", 0).await.unwrap(), Some(big));
    assert_eq!(other.file_chunk("f1", 1).await.unwrap().unwrap(), b"tail");
    assert_eq!(other.file_chunk("f1", 2).await.unwrap(), None);
    assert!(matches!(
        db.store.put_file_chunk("f1", 1, b"changed").await,
        Err(StoreError::Conflict { .. })
    ));
    assert!(matches!(
        db.store.put_file_chunk("nope", 0, b"x").await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(other.file_chunk("f1", 1).await.unwrap().unwrap(), b"tail");
    let empty = write(&db, &new_file("f0", "chat-a", "empty.txt"), &[], "e3").await;
    assert_eq!((empty.size, empty.chunks), (0, 0));
}

/// The same bytes, type and name finished twice in one chat (an upload delivered twice) are
/// one file: the second finish returns the first and removes its own; in another chat, or
/// under another name, they are files of their own.
pub async fn the_same_upload_twice_is_kept_once(db: Db) {
    let first = write(&db, &new_file("f1", "chat-a", "a.png"), &[b"abc"], "s1").await;
    let again = write(&db, &new_file("f2", "chat-a", "a.png"), &[b"abc"], "s1").await;
    assert_eq!(again, first);
    assert_eq!(db.store.file_chunk("f2", 0).await.unwrap(), None);
    let chat_a = ChatId::new("chat-a").unwrap();
    assert_eq!(db.store.get_file(&chat_a, "f2").await.unwrap(), None);
    let renamed = write(&db, &new_file("f3", "chat-a", "b.png"), &[b"abc"], "s1").await;
    assert_eq!(renamed.id, "f3");
    let elsewhere = write(&db, &new_file("f4", "chat-b", "a.png"), &[b"abc"], "s1").await;
    assert_eq!(elsewhere.id, "f4");
}

/// Unfinished files begun before the cut-off are purged with their chunks; newer unfinished
/// ones and finished ones stay.
pub async fn cut_off_uploads_are_purged(db: Db) {
    let done = write(&db, &new_file("done", "chat-a", "a.png"), &[b"abc"], "s1").await;
    db.store
        .begin_file(&new_file("old", "chat-a", "b.png"))
        .await
        .unwrap();
    db.store.put_file_chunk("old", 0, b"xyz").await.unwrap();
    let mut young = new_file("young", "chat-a", "c.png");
    young.now = T0 + 10_000;
    db.store.begin_file(&young).await.unwrap();
    assert_eq!(db.store.purge_files(T0 + 5_000).await.unwrap(), 1);
    assert_eq!(db.store.file_chunk("old", 0).await.unwrap(), None);
    assert!(matches!(
        db.store.put_file_chunk("old", 1, b"x").await,
        Err(StoreError::Conflict { .. })
    ));
    db.store.put_file_chunk("young", 0, b"ok").await.unwrap();
    assert_eq!(
        db.store.get_file(&done.chat, "done").await.unwrap(),
        Some(done)
    );
}
