//! What wraps every request: a request id (echoed or made) on the response and on every log line
//! of the request, the `RateLimit-*` headers of authenticated requests, and the refusal of heads
//! over [`crate::head_limits`].

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, ResponseError};
use tracing::Instrument;

use crate::head_limits;
use crate::ratelimit::Decision;

/// The request id header.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A client's id is echoed when it is short and printable; otherwise a fresh one is made.
fn request_id(req: &ServiceRequest) -> HeaderValue {
    req.headers()
        .get(&X_REQUEST_ID)
        .filter(|v| {
            !v.is_empty() && v.len() <= 128 && v.as_bytes().iter().all(|b| b.is_ascii_graphic())
        })
        .cloned()
        .unwrap_or_else(|| {
            HeaderValue::from_str(&ulid::Ulid::new().to_string())
                .unwrap_or(HeaderValue::from_static("-"))
        })
}

/// Request id, log line, rate-limit headers.
pub async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let id = request_id(&req);
    let span = tracing::info_span!(
        "request",
        id = id.to_str().unwrap_or("-"),
        method = %req.method(),
        path = req.path(),
    );
    let started = Instant::now();
    let mut res = match head_limits::refusal(&req) {
        Some(refused) => {
            span.in_scope(|| tracing::warn!(%refused, "request head refused"));
            req.into_response(refused.error_response())
                .map_into_right_body()
        }
        None => next
            .call(req)
            .instrument(span.clone())
            .await?
            .map_into_left_body(),
    };
    let decision = res.request().extensions().get::<Decision>().copied();
    let headers = res.headers_mut();
    if let Some(d) = decision {
        headers.insert(HeaderName::from_static("ratelimit-limit"), d.limit.into());
        headers.insert(
            HeaderName::from_static("ratelimit-remaining"),
            d.remaining.into(),
        );
        headers.insert(HeaderName::from_static("ratelimit-reset"), d.reset.into());
    }
    headers.insert(X_REQUEST_ID, id);
    let status = res.status().as_u16();
    let micros = started.elapsed().as_micros() as u64;
    span.in_scope(|| tracing::info!(status, micros, "request handled"));
    Ok(res)
}
