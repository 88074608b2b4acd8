-- Where each message sits in the log's token stream (docs/design.md, "Cache-stable packs"): the approximate tokens
-- of everything before it, and for every message the offset of the newest turn start before
-- it. Cache-stable packs begin their history at anchors computed from these two numbers
-- (`domain::context::anchor`). One statement per change, so the file also applies on
-- distributed schemas.

ALTER TABLE messages ADD COLUMN token_offset bigint NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN previous_turn_offset bigint;

-- The running totals appends continue from, and the newest turn start's offset as it was
-- before the latest append (which that append reads back).
ALTER TABLE conversations ADD COLUMN token_offset bigint NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN turn_offset bigint;
ALTER TABLE conversations ADD COLUMN turn_offset_before bigint;

-- Existing logs get the positions their appends would have given them.
UPDATE messages m
SET token_offset = p.token_offset, previous_turn_offset = p.previous_turn_offset
FROM (
    SELECT tenant_id, conversation_id, sequence, token_offset,
           max(CASE WHEN turn THEN token_offset END) OVER (
               PARTITION BY tenant_id, conversation_id ORDER BY sequence
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS previous_turn_offset
    FROM (
        SELECT tenant_id, conversation_id, sequence,
               role = 'user' AND NOT exclude_from_context AS turn,
               coalesce(sum(greatest(tokens_approx, 1)) OVER (
                   PARTITION BY tenant_id, conversation_id ORDER BY sequence
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS token_offset
        FROM messages
    ) o
) p
WHERE m.tenant_id = p.tenant_id AND m.conversation_id = p.conversation_id
  AND m.sequence = p.sequence;

UPDATE conversations c
SET token_offset = t.total, turn_offset = t.last_turn
FROM (
    SELECT tenant_id, conversation_id, sum(greatest(tokens_approx, 1)) AS total,
           max(CASE WHEN role = 'user' AND NOT exclude_from_context THEN token_offset END) AS last_turn
    FROM messages
    GROUP BY tenant_id, conversation_id
) t
WHERE c.tenant_id = t.tenant_id AND c.conversation_id = t.conversation_id;
