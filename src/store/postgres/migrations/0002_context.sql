-- What BuildContext reads: per-message token counts (computed once at append, with the chat
-- framing included), the call each tool result answers (so tool-call groups are found without
-- a lookup), and per-conversation facts that would otherwise need a scan.

ALTER TABLE messages
    ADD COLUMN tokens_o200k  integer NOT NULL DEFAULT 0,
    ADD COLUMN tokens_cl100k integer NOT NULL DEFAULT 0,
    ADD COLUMN tokens_approx integer NOT NULL DEFAULT 0,
    ADD COLUMN call_sequence bigint;

ALTER TABLE conversations
    ADD COLUMN last_user_sequence bigint,
    ADD COLUMN last_response_id   text;

-- Pinned messages are read on every BuildContext; they are few.
CREATE INDEX messages_pinned ON messages (tenant_id, conversation_id, sequence)
    WHERE pinned AND NOT exclude_from_context;
