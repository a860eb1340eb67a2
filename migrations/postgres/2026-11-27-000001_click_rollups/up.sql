-- Analytics rollups (crates/storage/src/queries/rollups.rs): per workspace, UTC day and value of
-- a dimension, the day's clicks and distinct visitors. The visitor hash's key changes every UTC
-- day, so distinct visitors add up across days: any range of whole UTC days is answered from
-- these rows, and only the rest of a range (a day not rolled up yet, the part of a day at an
-- edge) from click_events.
CREATE TABLE click_rollups (
    workspace_id TEXT NOT NULL,
    day BIGINT NOT NULL,
    -- 'total' (value NULL), 'country', 'city', 'device', 'browser', 'os' or 'referrer'.
    dimension TEXT NOT NULL,
    value TEXT,
    clicks BIGINT NOT NULL,
    visitors BIGINT NOT NULL
);
CREATE INDEX click_rollups_by_day ON click_rollups (workspace_id, dimension, day);
-- A day's rows, replaced together when it is rolled up again.
CREATE INDEX click_rollups_day ON click_rollups (day);
-- Days rolled up (all workspaces at once).
CREATE TABLE click_rollup_days (
    day BIGINT PRIMARY KEY
);
-- Days whose events changed after they were rolled up (a late flush, a deleted link): read from
-- click_events until rolled up again. `version` grows with each change, so a roll-up that read
-- the day before a change leaves the mark in place.
CREATE TABLE click_rollup_stale (
    day BIGINT PRIMARY KEY,
    version BIGINT NOT NULL
);
-- Events by time: for rolling up a day, for the export's pages, for retention.
CREATE INDEX click_events_time ON click_events (occurred_at, id);
