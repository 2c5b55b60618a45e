-- Versions: a chat's version rises with every write of one of its messages, and a message keeps
-- the version of its last write, so readers that hold a chat up to a version read only what is
-- newer. A question record's revision gets its own column, so answers can be fenced with it.
ALTER TABLE chats ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
CREATE INDEX messages_by_version ON messages (chat_id, version);
ALTER TABLE questions ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;
UPDATE questions SET revision = COALESCE((record::jsonb ->> 'revision')::BIGINT, 0);
