#![doc = include_str!("../README.md")]

mod cache;
mod clicks;
mod create;
mod error;
mod service;

pub use clicks::{FLUSH_INTERVAL, FlushObserver, MAX_DETAILED_CLICKS};
pub use create::{MAX_GROUP, POSTGRES_WRITERS};
pub use error::ServiceError;
pub use service::{CLICK_DRAIN_TIMEOUT, Service, ServiceSettings};
