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

/// A large file (ten chunks: more than a backend may keep in one place) reads back exact, chunk
/// by chunk, from another handle too; the same upload twice is kept once and still reads back;
/// a large upload cut off half way is purged, none of its chunks readable; a chunk rewritten
/// before the end is replaced whole.
pub async fn large_files_read_back_and_are_purged_whole(db: Db) {
    let other = db.second_handle().await;
    let chunk = |i: usize| -> Vec<u8> {
        let n = if i == 9 { 1_000 } else { FILE_CHUNK_BYTES };
        (0..n).map(|k| ((k * 31 + i * 7) % 251) as u8).collect()
    };
    let chunks: Vec<Vec<u8>> = (0..10).map(chunk).collect();
    let refs: Vec<&[u8]> = chunks.iter().map(|c| c.as_slice()).collect();
    let a = new_file("big1", "chat-a", "big.bin");
    db.store.begin_file(&a).await.unwrap();
    // Chunk 7 written wrong first, then again: the second is what stays.
    for (i, c) in refs.iter().enumerate() {
        if i == 7 {
            db.store.put_file_chunk("big1", 7, b"wrong").await.unwrap();
        }
        db.store.put_file_chunk("big1", i as u32, c).await.unwrap();
    }
    let size: u64 = chunks.iter().map(|c| c.len() as u64).sum();
    let row = db
        .store
        .finish_file(&FinishFile {
            id: "big1",
            size,
            sha256: "big",
            chunks: 10,
        })
        .await
        .unwrap();
    for (i, c) in chunks.iter().enumerate() {
        let got = other.file_chunk("big1", i as u32).await.unwrap();
        assert!(got.as_ref() == Some(c), "chunk {i} reads back exact");
    }
    assert_eq!(other.file_chunk("big1", 10).await.unwrap(), None);

    let again = write(&db, &new_file("big2", "chat-a", "big.bin"), &refs, "big").await;
    assert_eq!(again, row, "the same upload twice is one file");
    assert_eq!(db.store.file_chunk("big2", 9).await.unwrap(), None);
    let last = other.file_chunk("big1", 9).await.unwrap();
    assert!(last.as_ref() == Some(&chunks[9]), "the first stays whole");

    db.store
        .begin_file(&new_file("cut", "chat-a", "cut.bin"))
        .await
        .unwrap();
    for (i, c) in refs.iter().take(8).enumerate() {
        db.store.put_file_chunk("cut", i as u32, c).await.unwrap();
    }
    assert_eq!(db.store.purge_files(T0 + 1).await.unwrap(), 1);
    for i in 0..8 {
        let got = db.store.file_chunk("cut", i).await.unwrap();
        assert!(got.is_none(), "chunk {i} of a purged upload");
    }
    let kept = other.file_chunk("big1", 5).await.unwrap();
    assert!(
        kept.as_ref() == Some(&chunks[5]),
        "a purge leaves finished files whole"
    );
}
