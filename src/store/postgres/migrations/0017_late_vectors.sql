-- Vectors stored late (docs/reliability.md, "Hardening V"): a message whose text the embeddings
-- endpoint refused is passed by the watermark without vectors and tried again later; when it
-- is accepted, its vectors are stored at or before the watermark. `embedded_late` counts those
-- stores, so a replica's held codes (read up to the watermark) are read again after one.

ALTER TABLE conversations ADD COLUMN embedded_late bigint NOT NULL DEFAULT 0;
