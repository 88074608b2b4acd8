-- A random number drawn when a conversation row is created (append, update with allow_missing,
-- fork), never changed: with `created_at` and the redaction and rewind counters it is the log
-- version a replica's message cache is checked against (docs/design.md, "Database work per
-- call"). A deleted id that comes back gets a new one even when `created_at` repeats to the
-- microsecond. NULL for rows created before: they keep their version until deleted.
ALTER TABLE conversations ADD COLUMN incarnation bigint;
