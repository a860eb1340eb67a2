-- Codes that were never folded are in `links` too, so the constraint is rebuilt from there.
DROP TRIGGER links_code_deleted;
DROP TABLE link_codes_folded;
DROP TABLE link_codes;

CREATE TABLE links_old (
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
INSERT INTO links_old (seq, id, workspace_id, domain, short_code, destination, created_at, updated_at)
    SELECT seq, id, workspace_id, domain, short_code, destination, created_at, updated_at
    FROM links ORDER BY seq;
DELETE FROM sqlite_sequence WHERE name = 'links_old';
INSERT INTO sqlite_sequence (name, seq) SELECT 'links_old', seq FROM sqlite_sequence WHERE name = 'links';
DROP TABLE links;
ALTER TABLE links_old RENAME TO links;

CREATE INDEX links_workspace_id ON links (workspace_id, id);
CREATE TRIGGER links_counter AFTER INSERT ON links
BEGIN
    INSERT INTO link_clicks (link_seq, clicks) VALUES (NEW.seq, 0);
END;
