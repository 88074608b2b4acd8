-- Conversations as resources (docs/design.md, "Conversations as resources"): title, status, labels, last activity, expiry and
-- fork origin on the conversation row, and the indexes of the newest-activity-first listing
-- and of the retention sweeper. One statement per change and no CHECK in ADD COLUMN, so the
-- file also applies on distributed schemas; the application validates status and labels.

ALTER TABLE conversations ADD COLUMN title text NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN status text NOT NULL DEFAULT 'active';
ALTER TABLE conversations ADD COLUMN labels jsonb NOT NULL DEFAULT '{}';
ALTER TABLE conversations ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE conversations ADD COLUMN expire_time timestamptz;
ALTER TABLE conversations ADD COLUMN forked_from_conversation_id text;
ALTER TABLE conversations ADD COLUMN forked_from_sequence bigint;
-- Counts RedactMessage calls: a summary computed from messages read before a redaction is not
-- stored after it.
ALTER TABLE conversations ADD COLUMN redactions bigint NOT NULL DEFAULT 0;

-- Existing conversations were last active when their newest message was stored.
UPDATE conversations c
SET updated_at = coalesce(
    (SELECT max(m.created_at) FROM messages m
     WHERE m.tenant_id = c.tenant_id AND m.conversation_id = c.conversation_id),
    c.created_at);

-- ListConversations: a tenant's conversations, newest activity first, in keyset pages. Ids
-- compare bytewise (COLLATE "C"), as the in-memory store compares them.
CREATE INDEX conversations_activity
    ON conversations (tenant_id, updated_at DESC, conversation_id COLLATE "C" DESC);
-- The retention sweeper's explicit expiries. (Inactivity is found by scanning: one more index
-- on updated_at would be one more index write on every append.)
CREATE INDEX conversations_expiry ON conversations (expire_time) WHERE expire_time IS NOT NULL;
