DROP TABLE click_journal;
