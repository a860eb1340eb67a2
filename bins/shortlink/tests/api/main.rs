//! The HTTP API as a client sees it: the real server on a random port, its own database per
//! test, every contract rule asserted on status, envelope and headers.

mod analytics;
mod auth;
mod bulk;
mod dashboard;
mod errors;
mod health;
mod helpers;
mod idempotency;
mod instances;
mod link_options;
mod links;
mod qr;
mod rate_limit;
mod redirect;
#[path = "../support/redis.rs"]
mod redis;
mod webhooks_api;
