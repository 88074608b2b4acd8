-- Scale-out on Citus (docs/scaling.md). On a database with the citus extension, every
-- per-conversation table is distributed by conversation_id and co-located with
-- `conversations`, so each RPC touches one shard group, and the migrations table becomes a
-- reference table. On plain PostgreSQL this migration only creates the function and changes
-- nothing else.
--
-- Every later migration that creates a table calls `ctxd_distribute` on it. Migrations run
-- statement by statement (a distributed table refuses a multi-statement query); from here on
-- each ALTER TABLE has one subcommand, and constraints are added by statements of their own.

CREATE FUNCTION ctxd_distribute(relation regclass, reference boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    -- Already distributed (by hand, or by an earlier run): left as it is.
    IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = relation) THEN
        RETURN;
    END IF;
    IF reference THEN
        PERFORM create_reference_table(relation);
    ELSIF relation = 'conversations'::regclass THEN
        PERFORM create_distributed_table(relation, 'conversation_id');
    ELSE
        PERFORM create_distributed_table(relation, 'conversation_id', colocate_with => 'conversations');
    END IF;
END
$$;

SELECT ctxd_distribute('conversations');
SELECT ctxd_distribute('messages');
SELECT ctxd_distribute('tool_calls');
SELECT ctxd_distribute('idempotency_keys');
SELECT ctxd_distribute('summaries');
SELECT ctxd_distribute('working_memory');
SELECT ctxd_distribute('ctxd_schema_migrations', true);
