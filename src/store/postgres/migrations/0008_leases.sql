-- Rows that database-wide leases lock (docs/scaling.md). An advisory lock exists only on the
-- node that takes it; a lease taken by a statement that reads a row of a distributed table is
-- taken on the worker holding that row, whichever node a replica is connected to, so replicas
-- connected to different workers still exclude each other. The table is distributed like the
-- per-conversation tables; the row's key is the lease's name.

CREATE TABLE ctxd_leases (
    conversation_id text PRIMARY KEY
);

SELECT ctxd_distribute('ctxd_leases');

INSERT INTO ctxd_leases (conversation_id) VALUES ('ctxd-retention');
