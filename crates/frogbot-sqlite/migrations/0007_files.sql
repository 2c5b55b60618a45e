-- Files people post and agents send: a record per file and its bytes in chunks of at most
-- 256 KiB, so no write or read holds a whole file. `finished` is 0 while the chunks are written;
-- unfinished files are invisible to readers and purged when an upload was cut off.
CREATE TABLE files (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    media_type TEXT NOT NULL,
    filename TEXT NOT NULL,
    size INTEGER NOT NULL DEFAULT 0,
    sha256 TEXT NOT NULL DEFAULT '',
    chunks INTEGER NOT NULL DEFAULT 0,
    finished INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);
CREATE INDEX files_by_content ON files (chat_id, sha256) WHERE finished = 1;
CREATE INDEX files_unfinished ON files (created_at) WHERE finished = 0;
CREATE TABLE file_chunks (
    file_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (file_id, idx)
) WITHOUT ROWID;
