-- A delivery's endpoint is no longer checked row by row: the foreign key took a key-share lock
-- on the endpoint for every inserted delivery (a burst of clicks inserts one per click), about
-- a third of the outbox's insert time. The transaction that writes an event's deliveries takes
-- that lock once per endpoint instead, when it reads the subscriptions, and deleting an endpoint
-- deletes its deliveries itself (crates/storage/src/queries/outbox.rs, webhooks.rs).
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_webhook_id_fkey;
