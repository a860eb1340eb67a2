-- Every counted click, for analytics: written by the same flush, in the same transaction, as the
-- click counters, so a link's `clicks` and its number of events agree. The client address is
-- never stored: `visitor` is a keyed hash of (address, User-Agent) whose key changes every UTC day.
CREATE TABLE click_events (
    id INTEGER PRIMARY KEY,
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
);
-- The one index: a link's events by time. A workspace's are its links' (`link_seq IN (…)`); a
-- deleted link's events leave its workspace's analytics with it (retention removes them).
CREATE INDEX click_events_link_time ON click_events (link_seq, occurred_at);

-- The secret the daily visitor keys derive from, one per database, so every instance on it
-- counts the same visitor once.
CREATE TABLE analytics_secret (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    secret TEXT NOT NULL
);
INSERT INTO analytics_secret (id, secret) VALUES (1, lower(hex(randomblob(32))));
