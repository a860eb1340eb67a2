//! What wraps every request: a request id (echoed or made) on the response and on every log line
//! of the request, the access log line, the `RateLimit-*` headers of authenticated requests, and
//! the refusal of heads over [`crate::head_limits`].

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::web::Data;
use actix_web::{Error, HttpMessage, ResponseError};
use tracing::Instrument;

use crate::head_limits;
use crate::metrics::{Metrics, REDIRECT_ROUTE, UNMATCHED_ROUTE};
use crate::ratelimit::Decision;

/// The request id header.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Where the API lives; every other path (redirects, `/healthz`) is logged at the level
/// [`AccessLog::redirects_at_info`] chooses.
const API_PREFIX: &str = "/api/";

/// How the access log treats requests outside the API: the server puts one in the app data
/// (`App::app_data`); without it, the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct AccessLog {
    /// Log redirects and the other non-API requests at `info` (otherwise `debug`: a line per
    /// redirect is the volume of the traffic itself).
    pub redirects_at_info: bool,
}

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

/// Request id, access log line, metrics (when the app data holds [`Metrics`]), rate-limit
/// headers. The request's span carries the id onto every line logged while it runs; the access
/// line says the method, the path, the route label, the status and the latency. Headers are
/// never logged (the `Authorization` header is a secret).
///
/// The span holds the id alone because the text formatter writes a span's fields out when the
/// span is made, whether or not a line is logged in it: with the method and path as well, that
/// was 4.5 % of the server's CPU on a redirect (which logs nothing by default). The access line's
/// fields are written only when it is logged.
pub async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let id = request_id(&req);
    let span = tracing::info_span!("request", id = id.to_str().unwrap_or("-"));
    within_span(req, next, id).instrument(span).await
}

/// Everything [`request_context`] does for a request, run inside the request's span: every line
/// logged here or by the services it calls carries the id.
async fn within_span(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
    id: HeaderValue,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let api = req.path().starts_with(API_PREFIX);
    let at_info = api
        || req
            .app_data::<AccessLog>()
            .is_some_and(|a| a.redirects_at_info);
    let started = Instant::now();
    let mut res = match head_limits::refusal(&req) {
        Some(refused) => {
            tracing::warn!(%refused, "request head refused");
            req.into_response(refused.error_response())
                .map_into_right_body()
        }
        None => next.call(req).await?.map_into_left_body(),
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
    let elapsed = started.elapsed();
    let pattern = res.request().match_pattern();
    let route = match (&pattern, api) {
        (Some(pattern), _) => pattern.as_str(),
        (None, true) => UNMATCHED_ROUTE,
        // Every other path is the redirect's (the default service).
        (None, false) => REDIRECT_ROUTE,
    };
    if let Some(metrics) = res.request().app_data::<Data<Metrics>>() {
        metrics.record_request(route, res.status(), elapsed);
    }
    let status = res.status().as_u16();
    let micros = elapsed.as_micros() as u64;
    let (method, path) = (res.request().method(), res.request().path());
    if at_info {
        tracing::info!(%method, path, route, status, micros, "request handled");
    } else {
        tracing::debug!(%method, path, route, status, micros, "request handled");
    }
    Ok(res)
}
