-- Rolling summaries (every version kept) and working memory. The summary watermark lives on the
-- conversation row so that advancing it is one compare-and-set statement.

ALTER TABLE conversations
    ADD COLUMN summary_version          bigint NOT NULL DEFAULT 0,
    ADD COLUMN summary_through_sequence bigint NOT NULL DEFAULT 0;

CREATE TABLE summaries (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
    version          bigint      NOT NULL,
    text             text        NOT NULL,
    through_sequence bigint      NOT NULL,
    summarizer       text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, conversation_id, version)
);

CREATE TABLE working_memory (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL,
    document         jsonb       NOT NULL,
    through_sequence bigint      NOT NULL,
    version          bigint      NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, conversation_id)
);
