-- Fewer index entries per write: live views read by version since 0003, so the updated_at index
-- has no reader; and only queued messages are looked up by the queue index, so it holds only them
-- (a message's every non-HOT update inserted an entry into each index).
DROP INDEX messages_by_update;
DROP INDEX messages_queue;
CREATE INDEX messages_queued ON messages (chat_id, seq) WHERE queued;
