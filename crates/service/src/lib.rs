#![doc = include_str!("../README.md")]

mod cache;
mod clicks;
mod create;
mod error;
mod outage;
mod service;
pub mod throttled_log;

pub use cache::{FOUND_TTL, STALE_FOR};
pub use clicks::{FLUSH_INTERVAL, FlushObserver, MAX_DETAILED_CLICKS};
pub use create::{MAX_GROUP, POSTGRES_WRITERS};
pub use error::ServiceError;
pub use outage::PROBE_EVERY;
pub use service::{CLICK_DRAIN_TIMEOUT, Service, ServiceSettings};
