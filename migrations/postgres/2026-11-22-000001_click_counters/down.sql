DROP TRIGGER links_counter ON links;
DROP FUNCTION links_counter();
ALTER TABLE links ADD COLUMN clicks BIGINT NOT NULL DEFAULT 0;
UPDATE links SET clicks = c.clicks FROM link_clicks c WHERE c.link_seq = links.seq;
DROP TABLE link_clicks;
ALTER TABLE links DROP CONSTRAINT links_pkey;
ALTER TABLE links DROP CONSTRAINT links_id_key;
ALTER TABLE links ADD PRIMARY KEY (id);
ALTER TABLE links DROP COLUMN seq;
