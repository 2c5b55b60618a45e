-- The lease sweeper finds chats whose turn lease ran out without being released.
CREATE INDEX chats_by_lease ON chats (lease_until) WHERE lease_holder IS NOT NULL;
-- Live views poll a chat for the messages changed since they last looked.
CREATE INDEX messages_by_update ON messages (chat_id, updated_at);
