-- Agent chats: a chat bound to an external agent (its user id; '' for an anonymous caller) sends
-- people's messages and block events to that agent's inbox instead of a model turn.
ALTER TABLE chats ADD COLUMN agent TEXT;
ALTER TABLE messages ADD COLUMN inbox BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX chats_by_agent ON chats (agent) WHERE agent IS NOT NULL;
CREATE INDEX messages_inbox ON messages (chat_id, seq) WHERE inbox;
