-- A claim takes each endpoint's oldest pending deliveries in turn (fair between endpoints,
-- crates/storage/src/queries/deliveries.rs): this index finds them without reading past the
-- endpoint's delivered and failed ones.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, state, next_attempt_at);
