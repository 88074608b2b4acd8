-- Appends count only the tokenizers a deployment uses (CTXD_TOKENIZERS, issue 62); a read that
-- needs another counts it when it first reads the message and stores it. NULL is a count not
-- made yet. The approximation is always counted.
ALTER TABLE messages ALTER COLUMN tokens_o200k DROP NOT NULL;
ALTER TABLE messages ALTER COLUMN tokens_cl100k DROP NOT NULL;
