-- Each message's size as ctxd loads it (`Message::loaded_bytes`), stored at append so that a
-- byte-capped page sums a column instead of serializing every row's JSON to measure it
-- (issue 41). NULL for rows stored before: their size is measured as before.
ALTER TABLE messages ADD COLUMN loaded_bytes integer;
