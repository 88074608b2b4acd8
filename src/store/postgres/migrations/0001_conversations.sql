-- Conversations, their messages, tool-call bookkeeping and idempotency records.
-- Every primary key starts with tenant_id and every query filters by it, so the schema
-- distributes by tenant on Citus-style sharded Postgres unchanged.

CREATE TABLE conversations (
    tenant_id       text        NOT NULL,
    conversation_id text        NOT NULL,
    -- The per-conversation counter: sequences are allocated by incrementing it inside the
    -- append transaction (never a SEQUENCE, which leaves gaps on rollback).
    last_sequence   bigint      NOT NULL CHECK (last_sequence >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, conversation_id)
);

CREATE TABLE messages (
    tenant_id            text        NOT NULL,
    conversation_id      text        NOT NULL,
    sequence             bigint      NOT NULL CHECK (sequence >= 1),
    role                 text        NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content              text        NOT NULL,
    name                 text        NOT NULL,
    tool_calls           jsonb       NOT NULL,
    tool_call_id         text,
    attachments          jsonb       NOT NULL,
    metadata             jsonb       NOT NULL,
    exclude_from_context boolean     NOT NULL,
    pinned               boolean     NOT NULL,
    error                jsonb,
    response_id          text        NOT NULL,
    created_at           timestamptz NOT NULL,
    -- The backstop of gapless allocation: one row per sequence.
    PRIMARY KEY (tenant_id, conversation_id, sequence)
);

CREATE TABLE tool_calls (
    tenant_id       text   NOT NULL,
    conversation_id text   NOT NULL,
    call_id         text   NOT NULL,
    call_sequence   bigint NOT NULL,
    -- NULL while the call has no result.
    result_sequence bigint,
    PRIMARY KEY (tenant_id, conversation_id, call_id)
);

CREATE TABLE idempotency_keys (
    tenant_id                  text        NOT NULL,
    conversation_id            text        NOT NULL,
    idempotency_key            text        NOT NULL,
    payload_hash               bytea       NOT NULL,
    first_sequence             bigint      NOT NULL,
    last_sequence              bigint      NOT NULL,
    conversation_last_sequence bigint      NOT NULL,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, conversation_id, idempotency_key)
);
