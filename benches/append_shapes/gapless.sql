-- A gapless append by hand, searchable: a counter row bumped and the message inserted with
-- PostgreSQL's own to_tsvector into the same GIN-indexed column, four round trips (the bench's
-- dbcost baseline, "the same, searchable").
BEGIN;
INSERT INTO bench_dbcost_counters (id, last) VALUES ('h' || :client_id::text || :run::text, 1) ON CONFLICT (id) DO UPDATE SET last = bench_dbcost_counters.last + 1 RETURNING last \gset
INSERT INTO bench_dbcost_messages (tenant_id, conversation_id, sequence, role, content, name, tool_calls, attachments, metadata, exclude_from_context, pinned, response_id, created_at, search) VALUES ('default', 'h' || :client_id::text || :run::text, :last, 'user', 'message 1: a few words of ordinary prose', '', '[]', '[]', '{}', false, false, '', now(), to_tsvector('english', 'message 1: a few words of ordinary prose'));
COMMIT;
