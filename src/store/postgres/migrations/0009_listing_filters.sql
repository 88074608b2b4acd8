-- ListConversations with a status or label filter in O(page), per tenant (docs/scaling.md):
-- `listing` holds the filtered fields with the tenant, {"t": tenant, "s": status, "l": labels},
-- so one GIN containment lookup finds only the tenant's matching conversations, however many
-- other conversations it or other tenants have. The application keeps it in step with status
-- and labels wherever it writes them (creation, update, fork).

ALTER TABLE conversations ADD COLUMN listing jsonb;

-- Built from immutable functions only: Citus refuses a STABLE function (jsonb_build_object)
-- called with column references in an UPDATE. The same value: jsonb orders its keys itself.
UPDATE conversations
SET listing = jsonb_set(jsonb_object(ARRAY['t', tenant_id, 's', status]), '{l}', labels);

-- A small pending list: a lookup scans it whole, so it is flushed into the index every 64 kB
-- instead of every 4 MB (the default), keeping a filtered listing O(matches) between vacuums.
CREATE INDEX conversations_listing ON conversations USING gin (listing jsonb_path_ops)
    WITH (gin_pending_list_limit = 64);
