-- Every counted click, for analytics: written by the same flush, in the same transaction, as the
-- click counters. The client address is never stored: `visitor` is a keyed hash of (address,
-- User-Agent) whose key changes every UTC day.
--
-- Partitioned by month of `occurred_at` (ms since the epoch), so that retention drops whole
-- partitions. The server creates each month's partition ahead of time (`storage::analytics`);
-- the default partition catches anything outside them and is trimmed in small batches.
CREATE TABLE click_events (
    id BIGSERIAL NOT NULL,
    link_seq BIGINT NOT NULL,
    occurred_at BIGINT NOT NULL,
    country TEXT,
    city TEXT,
    device TEXT NOT NULL,
    browser TEXT,
    os TEXT,
    referrer TEXT NOT NULL,
    referrer_url TEXT,
    visitor BIGINT NOT NULL
) PARTITION BY RANGE (occurred_at);
CREATE TABLE click_events_default PARTITION OF click_events DEFAULT;
-- The one index: a link's events by time. A workspace's are its links' (`link_seq IN (…)`); a
-- deleted link's events leave its workspace's analytics with it (retention removes them).
CREATE INDEX click_events_link_time ON click_events (link_seq, occurred_at);

CREATE TABLE analytics_secret (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    secret TEXT NOT NULL
);
INSERT INTO analytics_secret (id, secret)
VALUES (1, replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
