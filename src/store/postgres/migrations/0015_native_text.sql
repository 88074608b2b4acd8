-- Native data as the provider sent it, byte for byte (docs/native.md, "Numbers"): `json`
-- keeps its text as written, where `jsonb` rewrites numbers (1e-400 came back as 0.000...1,
-- written out) and refuses text PostgreSQL could store as `json`. ctxd never queries inside it
-- but for the usage sums, which the `json` operators serve alike.
ALTER TABLE messages ALTER COLUMN native TYPE json USING native::json;
