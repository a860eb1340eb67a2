#![doc = include_str!("../README.md")]
//!
//! # Which error type where
//!
//! - [`VerifyError`]: a receiver checking a delivery it got ([`verify`]).

mod signing;

pub use signing::{
    DEFAULT_TOLERANCE, HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, HeaderSource,
    SignatureHeaders, VerifyError, sign, verify, verify_at,
};
