-- What a creating POST answered, by the Idempotency-Key its client sent (per workspace), so that a
-- retry gets the same answer and creates nothing. A row is claimed (status NULL) before the
-- creation and completed in the creation's own transaction; it counts for 24 hours.
CREATE TABLE idempotency_keys (
    workspace_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    -- SHA-256 of the request (route and body bytes), hex: another body under the same key is refused.
    fingerprint TEXT NOT NULL,
    -- Which request holds the key: only it may complete the row.
    claim TEXT NOT NULL,
    -- NULL while the first request runs.
    status INTEGER,
    body TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, idempotency_key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
