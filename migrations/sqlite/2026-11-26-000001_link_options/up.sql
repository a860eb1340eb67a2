-- Link options (docs/API.md, "Link options"). What the redirect needs is one column, `rules`
-- (JSON; NULL for a plain link), so a link without options is read and held in memory as before.
-- `tags` (a JSON array, NULL for none) is what a link shows; `link_tags` is the index that
-- `GET /links?tag=` searches, written in the same transactions.
ALTER TABLE links ADD COLUMN rules TEXT;
ALTER TABLE links ADD COLUMN tags TEXT;
ALTER TABLE links ADD COLUMN archived BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE link_tags (
    link_seq  INTEGER NOT NULL REFERENCES links (seq) ON DELETE CASCADE,
    tag       TEXT NOT NULL,
    PRIMARY KEY (link_seq, tag)
) WITHOUT ROWID;
CREATE INDEX link_tags_by_tag ON link_tags (tag, link_seq);

-- A link's new short code takes its old one's place in the code index (a recent link, whose code
-- is not there yet, gets it at the next fold, which reads `links`).
CREATE TRIGGER links_code_changed AFTER UPDATE OF short_code ON links
BEGIN
    UPDATE link_codes SET short_code = NEW.short_code
    WHERE domain = OLD.domain AND short_code = OLD.short_code AND link_seq = OLD.seq;
END;
