#![doc = include_str!("../README.md")]

mod cache;
mod clicks;
mod create;
mod enrich;
mod error;
mod outage;
mod propagation;
mod service;
pub mod throttled_log;

pub use cache::{FOUND_TTL, STALE_FOR};
pub use clicks::{FLUSH_EARLY_AT, FLUSH_INTERVAL, FlushObserver, MAX_PENDING_DETAILS};
pub use create::{MAX_GROUP, POSTGRES_WRITERS};
pub use error::ServiceError;
pub use outage::PROBE_EVERY;
pub use propagation::KeyObserver;
pub use service::{ANALYTICS_RETENTION, CLICK_DRAIN_TIMEOUT, Service, ServiceSettings};
