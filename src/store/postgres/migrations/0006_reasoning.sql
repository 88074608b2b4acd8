-- Provider-native data of assistant messages (docs/design.md, "Reasoning and provider-native data"): reasoning blocks, the text's
-- item id and signature, and what they cost in tokens in a pack of their provider; NULL for
-- the messages that have none (the tool calls' signatures and item ids live in `tool_calls`).
-- A nullable column without a default: adding it rewrites nothing.
ALTER TABLE messages ADD COLUMN native jsonb;
