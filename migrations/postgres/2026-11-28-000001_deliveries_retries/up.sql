-- A claim leases an endpoint's due retries before the deliveries it never tried
-- (crates/storage/src/queries/deliveries.rs, `Due`): this index finds them without reading the
-- endpoint's backlog, which grows without bound while the endpoint is slower than its events.
-- The claim states the predicate as text, not bound values (a prepared statement's generic plan
-- on PostgreSQL could not use the index otherwise).
-- `state` in the key is redundant but not idle: with the same key as `webhook_deliveries_pending`
-- SQLite's planner prefers the smaller, partial index; with fewer key columns it took the other.
CREATE INDEX webhook_deliveries_retries ON webhook_deliveries (webhook_id, state, next_attempt_at)
    WHERE state = 'pending' AND attempts > 0;
