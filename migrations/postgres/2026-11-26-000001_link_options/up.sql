-- Link options (docs/API.md, "Link options"). What the redirect needs is one column, `rules`
-- (JSON; NULL for a plain link), so a link without options is read and cached as before.
-- `tags` (a JSON array, NULL for none) is what a link shows; `link_tags` is the index that
-- `GET /links?tag=` searches, written in the same transactions.
ALTER TABLE links ADD COLUMN rules TEXT;
ALTER TABLE links ADD COLUMN tags TEXT;
ALTER TABLE links ADD COLUMN archived BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE link_tags (
    link_seq  BIGINT NOT NULL REFERENCES links (seq) ON DELETE CASCADE,
    tag       TEXT NOT NULL,
    PRIMARY KEY (link_seq, tag)
);
CREATE INDEX link_tags_by_tag ON link_tags (tag, link_seq);
