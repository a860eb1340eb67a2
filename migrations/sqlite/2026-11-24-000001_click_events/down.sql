DROP TABLE analytics_secret;
DROP TABLE click_events;
