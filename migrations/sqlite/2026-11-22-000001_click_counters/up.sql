-- Click counters move out of `links` into a narrow table keyed by a new integer row number.
-- A flush of clicks then rewrites ~10-byte rows that stay in the writer's page cache instead of
-- whole link rows: with a million links drawn at random, every clicked link dirtied a page of
-- a ~250 MB table (see docs/PERFORMANCE.md). Every link has exactly one counter row, created by
-- the trigger below and deleted with the link.
--
-- SQLite cannot add a primary key to a table, so `links` is rebuilt. AUTOINCREMENT: a row
-- number is never reused, so clicks still pending for a deleted link can never land on a new one.

ALTER TABLE links RENAME TO links_old;
DROP INDEX links_workspace_id;

CREATE TABLE links (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    domain        TEXT NOT NULL,
    short_code    TEXT NOT NULL,
    destination   TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    UNIQUE (domain, short_code)
);
-- Newest-first listing per workspace: ids are ULIDs, so id order is creation order.
CREATE INDEX links_workspace_id ON links (workspace_id, id);

CREATE TABLE link_clicks (
    link_seq  INTEGER PRIMARY KEY REFERENCES links (seq) ON DELETE CASCADE,
    clicks    BIGINT NOT NULL
);

INSERT INTO links (id, workspace_id, domain, short_code, destination, created_at, updated_at)
    SELECT id, workspace_id, domain, short_code, destination, created_at, updated_at
    FROM links_old ORDER BY id;
INSERT INTO link_clicks (link_seq, clicks)
    SELECT links.seq, links_old.clicks FROM links JOIN links_old ON links_old.id = links.id;
DROP TABLE links_old;

CREATE TRIGGER links_counter AFTER INSERT ON links
BEGIN
    INSERT INTO link_clicks (link_seq, clicks) VALUES (NEW.seq, 0);
END;
