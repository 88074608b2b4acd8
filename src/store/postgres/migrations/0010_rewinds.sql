-- Counts RewindConversation calls (docs/design.md, "Conversations as resources"): a summary or a
-- first working memory computed from messages read before a rewind is not stored after it.
ALTER TABLE conversations ADD COLUMN rewinds bigint NOT NULL DEFAULT 0;
