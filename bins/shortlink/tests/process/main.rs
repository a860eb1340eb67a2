//! Process-level tests: the real `shortlink` binary, each test with its own database and port,
//! spoken to over HTTP, stopped with real signals, delivering webhooks to a real receiver.

mod cli;
mod dashboard;
mod first_run;
mod helpers;
mod instances;
mod logging;
mod metrics;
mod nginx;
#[path = "../support/redis.rs"]
mod redis;
mod shutdown;
mod transport_refusals;
mod webhooks;
