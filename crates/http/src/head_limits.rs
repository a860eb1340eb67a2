//! Bounds on a request's head (its URI and header fields), enforced by the application so that
//! a refusal is the JSON envelope with a request id, like every other error.
//!
//! actix's HTTP/1 parser refuses a head larger than its fixed 128 KiB buffer (or with more than
//! 96 header fields) itself, with an empty 431, before the application sees the request. These
//! bounds sit well below that (16 KiB + 64 KiB), so every realistic oversized request reaches the
//! application and gets the envelope; only a head past actix's own limit gets actix's answer.

use actix_web::dev::ServiceRequest;

use crate::ApiError;

/// Longest accepted request target (path and query), in bytes.
pub const MAX_URI_BYTES: usize = 16 * 1024;

/// Most bytes of header fields accepted, counted as sent (`name: value\r\n`).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Why the request's head is refused, if it is.
pub fn refusal(req: &ServiceRequest) -> Option<ApiError> {
    let uri = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if uri > MAX_URI_BYTES {
        return Some(ApiError::UriTooLong);
    }
    let headers: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    (headers > MAX_HEADER_BYTES).then_some(ApiError::HeadersTooLarge)
}
