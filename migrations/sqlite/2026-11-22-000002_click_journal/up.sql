-- The click journal (crates/storage/src/click_journal.rs): one row per flush of clicks, holding
-- its (counter, clicks) pairs, folded into `link_clicks` every few seconds and then deleted.
CREATE TABLE click_journal (
    id      INTEGER PRIMARY KEY,
    counts  BLOB NOT NULL
);
