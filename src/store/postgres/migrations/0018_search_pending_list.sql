-- The search index takes new entries through a small pending list (issue 62, docs/design.md,
-- "Recall"). Inserted straight into the index, each message decoded and re-encoded the posting
-- list of every word its conversation repeats: PostgreSQL spent about as much on the GIN
-- entries as on the row. Through a pending list they are merged in bulk, sorted, once it holds
-- 64 kB (the least PostgreSQL allows); a search reads that pending list whole, which 64 kB keeps
-- small (the 42 ms of migration 14 came from the default 4 MB).
ALTER INDEX messages_search SET (fastupdate = on, gin_pending_list_limit = 64);
