DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
DROP TABLE links;
DROP TABLE api_keys;
DROP TABLE workspaces;
