DROP INDEX click_events_time;
DROP TABLE click_rollup_stale;
DROP TABLE click_rollup_days;
DROP TABLE click_rollups;
