-- Full-text search over messages (SearchMessages, BuildContext's recall; docs/design.md,
-- "Recall"). ctxd computes each message's document itself (its words stemmed in
-- CTXD_SEARCH_LANGUAGE, src/domain/search) and stores it as a tsvector whose lexemes carry the
-- conversation's scope prefix, so this one GIN index keeps every conversation's postings apart
-- and a search reads only its own conversation's matches. NULL for a message search never
-- finds: UI-only, redacted, no words, or appended before this migration. Without fastupdate:
-- new entries go straight into the index instead of a pending list that every search would
-- read whole (measured: a search of a freshly filled 100k-message conversation 42 ms with the
-- pending list, 2 ms without; AppendMessage's database CPU no higher, docs/benchmarks.md).
ALTER TABLE messages ADD COLUMN search tsvector;
CREATE INDEX messages_search ON messages USING gin (search) WITH (fastupdate = off);
