-- The change feed (DESIGN 2.11, docs/design.md "Change feed"): every write records one row here
-- in its own transaction, an outbox that WatchChanges reads in `(position, conversation_id,
-- change)` order.
-- `position` is the writing transaction's id (`pg_current_xact_id()`, taken on the coordinator
-- on Citus), raised to the conversation's `change_position` when that is higher, so that a
-- conversation's positions never go down; `change` counts the conversation's changes under its
-- row lock. A reader takes only positions below the oldest transaction still running
-- (`pg_snapshot_xmin`): every change a running transaction will make comes after them.
-- Changes outlive their conversation (DELETED, EXPIRED), until `CTXD_CHANGES_RETENTION`.

ALTER TABLE conversations ADD COLUMN change_position bigint NOT NULL DEFAULT 0;

ALTER TABLE conversations ADD COLUMN changes bigint NOT NULL DEFAULT 0;

CREATE TABLE changes (
    tenant_id text NOT NULL,
    position bigint NOT NULL,
    conversation_id text NOT NULL,
    change bigint NOT NULL,
    kind smallint NOT NULL,
    first_sequence bigint NOT NULL,
    last_sequence bigint NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, position, conversation_id, change)
);

-- The retention sweep finds old changes by time; rows arrive in time order, so a BRIN index
-- costs an append almost nothing.
CREATE INDEX changes_age ON changes USING brin (created_at);

SELECT ctxd_distribute('changes');
