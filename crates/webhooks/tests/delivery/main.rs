//! The crate's integration tests, one binary: an independent Standard Webhooks implementation
//! for the signatures.

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

mod signing;
