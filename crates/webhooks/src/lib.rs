#![doc = include_str!("../README.md")]
//!
//! # Which error type where
//!
//! Each error type belongs to one step, so a caller matches only on what that step can do:
//!
//! - [`VerifyError`]: a receiver checking a delivery it got ([`verify`]).
//! - [`ScheduleError`]: reading a retry schedule from the command line or the environment.
//! - [`SenderError`]: building the HTTP client at start-up ([`WebhookSender::new`]).
//! - [`WorkerError`]: making a worker ([`DeliveryWorker::new`]): its client, or a lease too short
//!   for its request timeout.
//! - [`GuardError`]: a target refused by the SSRF guard. It is not returned to callers; it travels
//!   as the source of the request error and ends in the attempt's error text.
//!
//! Failed deliveries are not errors of this crate: they are [`Outcome`]s, recorded through
//! [`shortlink_domain::DeliveryQueue::record_attempts`]. Errors of the queue itself are logged and
//! retried by the worker.

mod guard;
mod pacing;
mod schedule;
mod sender;
mod signing;
mod worker;

pub use guard::{GuardError, GuardedResolver};
pub use schedule::{DEFAULT_RETRY_SCHEDULE, RetrySchedule, ScheduleError};
pub use sender::{
    Attempt, DEFAULT_REQUEST_TIMEOUT, Outcome, SenderConfig, SenderError, USER_AGENT, WebhookSender,
};
pub use signing::{
    DEFAULT_TOLERANCE, HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, HeaderSource,
    SignatureHeaders, VerifyError, sign, verify, verify_at,
};
pub use worker::{AttemptObserver, DeliveryWorker, WakeHandle, WorkerConfig, WorkerError};
