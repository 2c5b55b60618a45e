-- Fewer index pages per write (each write of a message rewrote every index naming a column it
-- sets): live views read by version since 0003, so the updated_at index has no reader; and only
-- queued messages are looked up by the queue index, so it holds only them.
DROP INDEX messages_by_update;
DROP INDEX messages_queue;
CREATE INDEX messages_queued ON messages (chat_id, seq) WHERE queued = TRUE;
