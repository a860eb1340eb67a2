#![doc = include_str!("../README.md")]

mod cache;
mod click_limits;
mod clicks;
mod clock;
mod create;
mod enrich;
mod error;
mod outage;
mod passwords;
mod propagation;
mod routing;
mod series;
mod service;
mod shared_reads;
mod spill;
#[cfg(test)]
mod test_log;

pub use cache::{FOUND_TTL, STALE_FOR};
pub use clicks::{FLUSH_EARLY_AT, FLUSH_INTERVAL, FLUSH_PART, FlushObserver, MAX_PENDING_DETAILS};
pub use clock::Clock;
pub use create::{MAX_GROUP, POSTGRES_WRITERS};
pub use error::ServiceError;
pub use outage::PROBE_EVERY;
pub use passwords::{ATTEMPT_WINDOW, ATTEMPTS_PER_ADDRESS, ATTEMPTS_PER_LINK};
pub use propagation::KeyObserver;
pub use routing::{Route, Unlock, Visitor};
pub use service::{
    ANALYTICS_RETENTION, CLICK_DRAIN_TIMEOUT, DELIVERY_RETENTION, Service, ServiceSettings,
};
