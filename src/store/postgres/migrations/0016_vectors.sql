-- Semantic search (docs/design.md, "Recall"): the vectors of each message's chunks, written
-- after append by the replica that embeds them (`domain::search::vectors`): `code` the sign
-- bits that the replica's scan compares first, `vector` the quantized vector it rescores with.
-- Removed with their messages (rewind, redaction, delete, retention) and copied by forks.
-- `embedded_through` is the watermark: every message up to it has its vectors.

ALTER TABLE conversations ADD COLUMN embedded_through bigint NOT NULL DEFAULT 0;

CREATE TABLE message_vectors (
    tenant_id text NOT NULL,
    conversation_id text NOT NULL,
    sequence bigint NOT NULL,
    chunk smallint NOT NULL,
    code bytea NOT NULL,
    vector bytea NOT NULL,
    PRIMARY KEY (tenant_id, conversation_id, sequence, chunk)
);

SELECT ctxd_distribute('message_vectors');
