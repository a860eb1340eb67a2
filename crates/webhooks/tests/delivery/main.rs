//! The crate's integration tests, one binary: real HTTP receivers on 127.0.0.1, an in-memory
//! queue for the worker, and an independent Standard Webhooks implementation for the signatures.

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

mod docs;
mod helpers;
mod receiver;
mod sender;
mod signing;
mod worker;
