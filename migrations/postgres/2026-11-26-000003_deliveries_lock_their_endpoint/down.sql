ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_webhook_id_fkey
    FOREIGN KEY (webhook_id) REFERENCES webhooks (id) ON DELETE CASCADE;
