-- Room for HOT updates. A question's outcome, rendering and lock, and a job's claim, change no
-- indexed column (once `expires_at` is not indexed, below), so PostgreSQL can write the new row
-- version on the same page without touching any index (a heap-only tuple) -- but only when the
-- page has room, and rows inserted one after another fill their pages. Leave a fifth of each new
-- page free. (Chats and messages are left alone: their updates move indexed columns -- the lease,
-- `updated_at`, `version` -- so they are never HOT.) Applies to pages written from now on.
ALTER TABLE questions SET (fillfactor = 80);
ALTER TABLE jobs SET (fillfactor = 80);
-- An answer moves a question's `expires_at` (the record is kept a while after it), which kept
-- every answer from being HOT while `expires_at` was indexed. Only the housekeeping purge (every
-- 10 minutes per process) looks questions up by it: it scans the table instead.
DROP INDEX questions_by_expiry;
