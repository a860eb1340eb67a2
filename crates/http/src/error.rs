//! The error envelope and the one table that maps every error to (HTTP status, `error.code`).
//!
//! Which error type to use where: handlers and extractors return [`ApiError`]; the service's
//! and storage's errors convert into it (`?` works); nothing else reaches the client. Bodies and
//! query strings are read by this crate's own extractors (`extract.rs`: `JsonBody`,
//! `QueryParams`), which answer in the envelope; a handler that took actix's `web::Json` or
//! `web::Query` instead would answer actix's plain-text 400. actix's path errors, unknown routes
//! and wrong methods are routed here by the path config and the default services set up in
//! [`crate::configure`].

use std::time::Instant;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use shortlink_analytics::{BucketError, MAX_BUCKETS};
use shortlink_service::ServiceError;
use shortlink_storage::StorageError;

use shortlink_domain::{OUTAGE_LOGGED_EVERY, Repeated, ThrottledLog};

/// One invalid field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// The field or parameter, e.g. `destination`, `[3].customSlug`, `limit`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// An error on `field`.
    pub fn new(field: impl Into<String>, message: impl ToString) -> Self {
        Self {
            field: field.into(),
            message: message.to_string(),
        }
    }
}

/// Every way a request can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Invalid input: a field, a parameter, the JSON itself, the content type.
    #[error("{message}")]
    Validation {
        /// Summary for `error.message`.
        message: String,
        /// Per-field errors for `error.details`.
        details: Vec<FieldError>,
    },
    /// No valid API key.
    #[error("a valid API key is required: send 'Authorization: Bearer <key>'")]
    Unauthorized,
    /// No such resource in this workspace, or no such route.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The route exists, the method does not.
    #[error("method not allowed; this route serves {allow}")]
    MethodNotAllowed {
        /// The methods the route serves, for the `Allow` header.
        allow: &'static str,
    },
    /// The custom slug is taken on this domain.
    #[error("customSlug '{0}' is already taken")]
    SlugConflict(String),
    /// The workspace has as many webhook endpoints as it may.
    #[error(
        "a workspace has at most {} webhook endpoints; delete one first",
        shortlink_domain::MAX_WEBHOOKS
    )]
    TooManyWebhooks,
    /// The `Idempotency-Key`'s first request has not finished.
    #[error("a request with this Idempotency-Key is still being processed; retry later")]
    IdempotencyKeyInUse,
    /// The `Idempotency-Key` was used for another request.
    #[error("this Idempotency-Key was used for a different request")]
    IdempotencyKeyReused,
    /// The body did not arrive whole in time.
    #[error("the request body did not arrive within {0} s")]
    RequestTimeout(u64),
    /// The body is over the limit.
    #[error("request body must be at most {} MiB", crate::extract::MAX_BODY_BYTES >> 20)]
    PayloadTooLarge,
    /// The request target is over [`crate::head_limits::MAX_URI_BYTES`].
    #[error("request URI must be at most {} KiB", crate::head_limits::MAX_URI_BYTES >> 10)]
    UriTooLong,
    /// The header fields together are over [`crate::head_limits::MAX_HEADER_BYTES`].
    #[error(
        "request header fields must be at most {} KiB in all",
        crate::head_limits::MAX_HEADER_BYTES >> 10
    )]
    HeadersTooLarge,
    /// The workspace's rate, or the client address's failed-authentication budget, is spent.
    #[error("rate limit exceeded; retry after {retry_after} s")]
    RateLimited {
        /// Whole seconds until a request would be admitted.
        retry_after: u64,
    },
    /// The link expired (by time or by clicks); only JSON clients get this, browsers a page.
    #[error("this link has expired")]
    LinkExpired,
    /// The database is unreachable.
    #[error("the service is temporarily unavailable; retry shortly")]
    Unavailable,
    /// A bug. The cause is logged, never sent.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    /// A validation error on a single field, whose message is also the summary.
    pub fn field(field: impl Into<String>, message: impl ToString) -> Self {
        let detail = FieldError::new(field, message);
        ApiError::Validation {
            message: detail.message.clone(),
            details: vec![detail],
        }
    }

    /// A validation error about the request as a whole (no field to name).
    pub fn invalid(message: impl ToString) -> Self {
        ApiError::Validation {
            message: message.to_string(),
            details: Vec::new(),
        }
    }

    /// The table. Exhaustive, no wildcard: a new variant does not compile without a decision.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::Validation { .. } => (StatusCode::BAD_REQUEST, "VALIDATION_FAILED"),
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "NOT_FOUND"),
            ApiError::MethodNotAllowed { .. } => {
                (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED")
            }
            ApiError::SlugConflict(_) => (StatusCode::CONFLICT, "SLUG_CONFLICT"),
            ApiError::TooManyWebhooks => (StatusCode::CONFLICT, "WEBHOOK_LIMIT_REACHED"),
            ApiError::IdempotencyKeyInUse => (StatusCode::CONFLICT, "IDEMPOTENCY_KEY_IN_USE"),
            ApiError::IdempotencyKeyReused => {
                (StatusCode::UNPROCESSABLE_ENTITY, "IDEMPOTENCY_KEY_REUSED")
            }
            ApiError::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "REQUEST_TIMEOUT"),
            ApiError::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE"),
            ApiError::UriTooLong => (StatusCode::URI_TOO_LONG, "URI_TOO_LONG"),
            ApiError::HeadersTooLarge => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "HEADERS_TOO_LARGE",
            ),
            ApiError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMIT_EXCEEDED"),
            ApiError::LinkExpired => (StatusCode::GONE, "LINK_EXPIRED"),
            ApiError::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR"),
        }
    }

    /// The `error` object: code, message and, for validation errors, details. Also used for the
    /// per-item errors of a bulk request.
    pub fn body(&self) -> ErrorBody {
        let (_, code) = self.status_and_code();
        let details = match self {
            ApiError::Validation { details, .. } if !details.is_empty() => Some(details.clone()),
            _ => None,
        };
        ErrorBody {
            code,
            message: self.to_string(),
            details,
        }
    }
}

/// The `error` member of the envelope.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Machine-readable code.
    #[schema(value_type = String, pattern = "^[A-Z_]+$", example = "VALIDATION_FAILED")]
    pub code: &'static str,
    /// Human-readable text.
    pub message: String,
    /// Field errors, for validation errors only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Vec<FieldError>>,
}

/// The error envelope.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorEnvelope {
    /// Always `error`.
    #[schema(value_type = String, pattern = "^error$", example = "error")]
    status: &'static str,
    /// Always false.
    success: bool,
    /// The HTTP status.
    #[schema(example = 400)]
    status_code: u16,
    /// What went wrong.
    error: ErrorBody,
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status_and_code().0
    }

    fn error_response(&self) -> HttpResponse {
        let (status, _) = self.status_and_code();
        if let ApiError::Internal(cause) = self {
            // The request id is on the enclosing span, so this line carries it.
            tracing::error!(%cause, "internal error");
        }
        let mut response = HttpResponse::build(status);
        match self {
            ApiError::Unauthorized => {
                response
                    .insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
            }
            ApiError::RateLimited { retry_after } => {
                response.insert_header((header::RETRY_AFTER, retry_after.to_string()));
            }
            ApiError::MethodNotAllowed { allow } => {
                response.insert_header((header::ALLOW, HeaderValue::from_static(allow)));
            }
            _ => {}
        }
        response.json(self.envelope())
    }
}

impl ApiError {
    /// The error envelope this error answers.
    pub fn envelope(&self) -> ErrorEnvelope {
        ErrorEnvelope {
            status: "error",
            success: false,
            status_code: self.status_and_code().0.as_u16(),
            error: self.body(),
        }
    }
}

impl From<StorageError> for ApiError {
    fn from(e: StorageError) -> Self {
        Self::from(&e)
    }
}

impl From<&StorageError> for ApiError {
    fn from(e: &StorageError) -> Self {
        // Every variant by name: a new one does not compile without a decision.
        match e {
            StorageError::Unavailable(_) => {
                log_unavailable(e);
                ApiError::Unavailable
            }
            // Another request took the key over while this one's creation stalled: that one
            // creates, as for a request still running.
            StorageError::ClaimLost => ApiError::IdempotencyKeyInUse,
            // The handlers check what a client sends before it reaches storage, and a store that
            // opened has a supported URL and its schema: any of these here is a bug.
            StorageError::AlreadyExists(_)
            | StorageError::Query(_)
            | StorageError::Corrupt(_)
            | StorageError::Invalid(_)
            | StorageError::UnsupportedUrl(_)
            | StorageError::InMemory(_)
            | StorageError::Migration(_) => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::Storage(e) => ApiError::from(e.as_ref()),
            ServiceError::Buckets(BucketError::TooMany) => ApiError::field(
                "interval",
                format!(
                    "the range holds more than {MAX_BUCKETS} buckets of this interval; pick a longer interval or a shorter range"
                ),
            ),
            ServiceError::Buckets(BucketError::OutOfRange) => {
                ApiError::field("start", "the range is out of bounds")
            }
            ServiceError::Stopped
            | ServiceError::AlreadyRunning
            | ServiceError::NoRuntime
            | ServiceError::Webhooks(_)
            | ServiceError::ClicksNotWritten
            | ServiceError::Internal(_) => ApiError::Internal(e.to_string()),
        }
    }
}

/// Every request fails alike during an outage: one warning per interval says so, with a count,
/// rather than a line per request.
fn log_unavailable(e: &StorageError) {
    static UNAVAILABLE: ThrottledLog = ThrottledLog::new(OUTAGE_LOGGED_EVERY);
    match UNAVAILABLE.occurred(Instant::now()) {
        Some(Repeated { times: 0, .. }) => tracing::warn!(error = %e, "database unavailable"),
        Some(Repeated { times, over }) => tracing::warn!(
            error = %e,
            "database unavailable (repeated {times} times in the last {} s)",
            over.as_secs()
        ),
        None => {}
    }
}
