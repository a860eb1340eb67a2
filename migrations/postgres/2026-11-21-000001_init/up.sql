-- Timestamps are milliseconds since the Unix epoch (BIGINT) on both backends, so one diesel
-- schema and one set of queries serve SQLite and PostgreSQL.

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL UNIQUE,
    rate_limit  INTEGER NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY NOT NULL,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    prefix        TEXT NOT NULL,
    key_hash      TEXT NOT NULL UNIQUE,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT
);
CREATE INDEX api_keys_workspace ON api_keys (workspace_id);

CREATE TABLE links (
    id            TEXT PRIMARY KEY NOT NULL,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    domain        TEXT NOT NULL,
    short_code    TEXT NOT NULL,
    destination   TEXT NOT NULL,
    clicks        BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    UNIQUE (domain, short_code)
);
-- Newest-first listing per workspace: ids are ULIDs, so id order is creation order.
CREATE INDEX links_workspace_id ON links (workspace_id, id);

CREATE TABLE webhooks (
    id                    TEXT PRIMARY KEY NOT NULL,
    workspace_id          TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    target_url            TEXT NOT NULL,
    secret                TEXT NOT NULL,
    -- Subscribed event kinds, comma-separated, e.g. 'link.clicked,link.created'.
    events                TEXT NOT NULL,
    created_at            BIGINT NOT NULL,
    disabled_at           BIGINT,
    consecutive_failures  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhooks_workspace ON webhooks (workspace_id, id);

-- The outbox: one row per (event, endpoint), written in the transaction that caused the event.
CREATE TABLE webhook_deliveries (
    event_id          TEXT NOT NULL,
    webhook_id        TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_type        TEXT NOT NULL,
    payload           TEXT NOT NULL,
    state             TEXT NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    next_attempt_at   BIGINT NOT NULL,
    locked_until      BIGINT,
    last_status_code  INTEGER,
    last_error        TEXT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    PRIMARY KEY (event_id, webhook_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at);

CREATE TABLE webhook_attempts (
    event_id     TEXT NOT NULL,
    webhook_id   TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    started_at   BIGINT NOT NULL,
    duration_ms  BIGINT NOT NULL,
    status_code  INTEGER,
    error        TEXT,
    PRIMARY KEY (event_id, webhook_id, attempt),
    FOREIGN KEY (event_id, webhook_id) REFERENCES webhook_deliveries (event_id, webhook_id) ON DELETE CASCADE
);
