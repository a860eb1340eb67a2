DROP TRIGGER links_code_changed;
DROP TABLE link_tags;
ALTER TABLE links DROP COLUMN archived;
ALTER TABLE links DROP COLUMN tags;
ALTER TABLE links DROP COLUMN rules;
