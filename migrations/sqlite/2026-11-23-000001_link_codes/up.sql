-- Short codes move to a table of their own, written in sorted batches: `link_codes` holds the
-- code of every link up to `link_codes_folded.through_seq`; the codes of newer links are held in
-- memory by the store until the next fold (crates/storage/src/recent_codes.rs). The
-- `UNIQUE (domain, short_code)` of `links` put each new link's random code on a random page of
-- its index, written once per link at commit and again at the next checkpoint: half of what
-- creating a link cost (docs/PERFORMANCE.md).
--
-- SQLite cannot drop a constraint, so `links` is rebuilt: the documented procedure (new table,
-- copy, drop, rename), run with foreign keys off (crate::migrate) so that dropping the old table
-- leaves the counters that refer to it alone.

CREATE TABLE links_new (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    domain        TEXT NOT NULL,
    short_code    TEXT NOT NULL,
    destination   TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
INSERT INTO links_new (seq, id, workspace_id, domain, short_code, destination, created_at, updated_at)
    SELECT seq, id, workspace_id, domain, short_code, destination, created_at, updated_at
    FROM links ORDER BY seq;
-- Row numbers are never reused, deleted links' included: clicks still journaled for one must not
-- land on a new link.
DELETE FROM sqlite_sequence WHERE name = 'links_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'links_new', seq FROM sqlite_sequence WHERE name = 'links';
DROP TABLE links;
ALTER TABLE links_new RENAME TO links;

-- Newest-first listing per workspace: ids are ULIDs, so id order is creation order.
CREATE INDEX links_workspace_id ON links (workspace_id, id);
CREATE TRIGGER links_counter AFTER INSERT ON links
BEGIN
    INSERT INTO link_clicks (link_seq, clicks) VALUES (NEW.seq, 0);
END;

-- No foreign key: a fold would check each row's link and keep an index of `link_seq` for the
-- cascade, doubling its work. A deleted link takes its code along by the trigger below instead.
CREATE TABLE link_codes (
    domain      TEXT NOT NULL,
    short_code  TEXT NOT NULL,
    link_seq    INTEGER NOT NULL,
    PRIMARY KEY (domain, short_code)
) WITHOUT ROWID;
CREATE TRIGGER links_code_deleted AFTER DELETE ON links
BEGIN
    DELETE FROM link_codes
    WHERE domain = OLD.domain AND short_code = OLD.short_code AND link_seq = OLD.seq;
END;
INSERT INTO link_codes (domain, short_code, link_seq)
    SELECT domain, short_code, seq FROM links ORDER BY domain, short_code;

-- One row: every link up to `through_seq` has its code in `link_codes`.
CREATE TABLE link_codes_folded (
    through_seq  INTEGER NOT NULL
);
INSERT INTO link_codes_folded (through_seq) SELECT coalesce(max(seq), 0) FROM links;
