-- Click counters move out of `links` into a narrow table keyed by a new integer row number.
-- A flush of clicks then updates small rows instead of whole link rows (each update of a wide
-- row writes a new version of all of it). Every link has exactly one counter row, created by
-- the trigger below and deleted with the link. An identity never reuses a number, so clicks
-- still pending for a deleted link can never land on a new one.

ALTER TABLE links ADD COLUMN seq BIGINT GENERATED ALWAYS AS IDENTITY;
ALTER TABLE links DROP CONSTRAINT links_pkey;
ALTER TABLE links ADD PRIMARY KEY (seq);
ALTER TABLE links ADD CONSTRAINT links_id_key UNIQUE (id);

CREATE TABLE link_clicks (
    link_seq  BIGINT PRIMARY KEY REFERENCES links (seq) ON DELETE CASCADE,
    clicks    BIGINT NOT NULL
);
INSERT INTO link_clicks (link_seq, clicks) SELECT seq, clicks FROM links;
ALTER TABLE links DROP COLUMN clicks;

-- One statement-level trigger per insert, not one call per row: bulk creation inserts 100 at once.
CREATE FUNCTION links_counter() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO link_clicks (link_seq, clicks) SELECT seq, 0 FROM inserted;
    RETURN NULL;
END
$$;
CREATE TRIGGER links_counter AFTER INSERT ON links
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION links_counter();
