-- FrogBot store, SQLite dialect. Times are milliseconds since the Unix epoch; JSON is TEXT.

CREATE TABLE chats (
    chat_id             TEXT PRIMARY KEY NOT NULL,
    owner               TEXT,
    channel_platform    TEXT,
    channel_thread      TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    awaiting_message_id TEXT,
    lease_holder        TEXT,
    lease_token         INTEGER NOT NULL DEFAULT 0,
    lease_until         INTEGER NOT NULL DEFAULT 0,
    driver              TEXT
);
CREATE INDEX chats_by_owner ON chats (owner, updated_at);
CREATE UNIQUE INDEX chats_by_channel ON chats (channel_platform, channel_thread)
    WHERE channel_platform IS NOT NULL;

CREATE TABLE messages (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id    TEXT NOT NULL REFERENCES chats (chat_id) ON DELETE CASCADE,
    id         TEXT NOT NULL,
    role       TEXT NOT NULL,
    author     TEXT,
    queued     BOOLEAN NOT NULL,
    delivery   TEXT NOT NULL,
    position   INTEGER,
    sub        INTEGER NOT NULL DEFAULT 0,
    body       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (chat_id, id)
);
CREATE INDEX messages_queue ON messages (chat_id, queued, seq);
CREATE INDEX messages_order ON messages (chat_id, position, sub, seq);

CREATE TABLE questions (
    chat_id         TEXT NOT NULL,
    tool_call_id    TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    call_index      INTEGER NOT NULL,
    input           TEXT NOT NULL,
    record          TEXT NOT NULL,
    rendered        BOOLEAN NOT NULL DEFAULT FALSE,
    posting         BOOLEAN NOT NULL DEFAULT FALSE,
    outcome         TEXT,
    actor           TEXT,
    outcome_at      INTEGER,
    closed          BOOLEAN NOT NULL DEFAULT FALSE,
    answer_deadline INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    lock_holder     TEXT,
    lock_token      INTEGER NOT NULL DEFAULT 0,
    lock_until      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (chat_id, tool_call_id)
);
CREATE INDEX questions_by_message ON questions (chat_id, message_id, call_index);
CREATE INDEX questions_by_expiry ON questions (expires_at);

CREATE TABLE question_links (
    platform     TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    chat_id      TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    PRIMARY KEY (platform, message_id, chat_id, tool_call_id)
);
CREATE INDEX question_links_by_call ON question_links (chat_id, tool_call_id);

CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL,
    key         TEXT UNIQUE,
    payload     TEXT NOT NULL,
    run_at      INTEGER NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    claimed_by  TEXT,
    claim_until INTEGER,
    last_error  TEXT,
    dead        BOOLEAN NOT NULL DEFAULT FALSE,
    generation  INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
);
CREATE INDEX jobs_due ON jobs (dead, run_at);
