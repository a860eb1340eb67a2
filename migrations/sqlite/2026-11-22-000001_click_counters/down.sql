DROP TRIGGER links_counter;
ALTER TABLE links RENAME TO links_new;
DROP INDEX links_workspace_id;

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
CREATE INDEX links_workspace_id ON links (workspace_id, id);

INSERT INTO links (id, workspace_id, domain, short_code, destination, clicks, created_at, updated_at)
    SELECT l.id, l.workspace_id, l.domain, l.short_code, l.destination, c.clicks, l.created_at,
           l.updated_at
    FROM links_new l JOIN link_clicks c ON c.link_seq = l.seq;
DROP TABLE link_clicks;
DROP TABLE links_new;
