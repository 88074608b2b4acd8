-- Conversation.usage (docs/native.md): the providers' usage of the messages the log holds,
-- summed at append, taken back by a rewind, copied by a fork. A message's own usage is in its
-- `native` column.
ALTER TABLE conversations ADD COLUMN usage_input bigint NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN usage_output bigint NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN usage_cached bigint NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN usage_reasoning bigint NOT NULL DEFAULT 0;
