//! One HTTP attempt of one delivery.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::CONTENT_TYPE;
use reqwest::redirect;
use shortlink_domain::{AttemptRecord, ClaimedDelivery, Delivery, NextStep, Timestamp};

use crate::guard::{GuardError, GuardedResolver};
use crate::signing::{HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, sign};

/// How long one attempt may take in all (connecting, sending, the response head) by default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The `User-Agent` of every delivery, so receivers can tell webhook traffic apart.
pub const USER_AGENT: &str = concat!("shortlink-webhooks/", env!("CARGO_PKG_VERSION"));

/// How the sender's HTTP client is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderConfig {
    /// The limit on one attempt, from the first byte of DNS to the response head; past it the
    /// attempt fails as a timeout. Default [`DEFAULT_REQUEST_TIMEOUT`].
    pub timeout: Duration,
    /// Deliver to loopback, private and link-local addresses too. Default false.
    pub allow_private: bool,
}

impl Default for SenderConfig {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_REQUEST_TIMEOUT,
            allow_private: false,
        }
    }
}

/// The HTTP client could not be built (the TLS backend failed to start).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the webhook HTTP client")]
pub struct SenderError(#[source] reqwest::Error);

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver answered 2xx: delivered.
    Delivered {
        /// The status code.
        status: u16,
    },
    /// The receiver answered with anything else, redirects included (they are not followed).
    Rejected {
        /// The status code.
        status: u16,
    },
    /// No answer: timeout, connection or TLS error, or a target the SSRF guard refused.
    NoResponse {
        /// What went wrong, for the deliveries list and the log.
        error: String,
    },
}

impl Outcome {
    /// Whether the delivery is done.
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Delivered { .. })
    }

    /// The receiver's status code, if it answered.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Outcome::Delivered { status } | Outcome::Rejected { status } => Some(*status),
            Outcome::NoResponse { .. } => None,
        }
    }

    /// Why no answer came, if none did.
    pub fn error(&self) -> Option<&str> {
        match self {
            Outcome::NoResponse { error } => Some(error),
            Outcome::Delivered { .. } | Outcome::Rejected { .. } => None,
        }
    }
}

/// One attempt, measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// When it started.
    pub started_at: Timestamp,
    /// How long it took, in milliseconds.
    pub duration_ms: i64,
    /// How it ended.
    pub outcome: Outcome,
}

impl Attempt {
    /// The record the queue stores for this attempt of `delivery`, moving it on to `next`.
    pub fn into_record(self, delivery: &Delivery, next: NextStep) -> AttemptRecord {
        AttemptRecord {
            event_id: delivery.event_id,
            webhook_id: delivery.webhook_id,
            started_at: self.started_at,
            duration_ms: self.duration_ms,
            status_code: self.outcome.status_code().map(i32::from),
            error: self.outcome.error().map(str::to_owned),
            next,
        }
    }
}

/// Sends deliveries: one HTTP client, built once and shared (it is a cheap clone), with the
/// timeout, no redirects, the SSRF guard and the `User-Agent` set.
#[derive(Debug, Clone)]
pub struct WebhookSender {
    client: reqwest::Client,
    guard: GuardedResolver,
    timeout: Duration,
}

impl WebhookSender {
    /// Builds the client.
    pub fn new(config: &SenderConfig) -> Result<Self, SenderError> {
        let guard = GuardedResolver::new(config.allow_private);
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            // A redirect is an answer, and a failure: following it would let a public receiver
            // send us to an internal address past the checks made for the target.
            .redirect(redirect::Policy::none())
            // Through a proxy the resolver would see the proxy's name, not the target's, and the
            // guard would check the wrong host. Deliveries go direct.
            .no_proxy()
            .dns_resolver(Arc::new(guard))
            .user_agent(USER_AGENT)
            .build()
            .map_err(SenderError)?;
        Ok(Self {
            client,
            guard,
            timeout: config.timeout,
        })
    }

    /// POSTs the delivery's stored payload, byte for byte, to its target, signed for this
    /// attempt, and reports how it went. Never fails: every failure is an [`Outcome`].
    pub async fn attempt(&self, claimed: &ClaimedDelivery) -> Attempt {
        let started_at = Timestamp::now();
        let clock = Instant::now();
        let outcome = self.send(claimed).await;
        Attempt {
            started_at,
            duration_ms: i64::try_from(clock.elapsed().as_millis()).unwrap_or(i64::MAX),
            outcome,
        }
    }

    async fn send(&self, claimed: &ClaimedDelivery) -> Outcome {
        let url = claimed.target.url();
        if let Err(refused) = self.guard.check_literal(url) {
            return Outcome::NoResponse {
                error: refused.to_string(),
            };
        }
        let msg_id = claimed.delivery.event_id.to_string();
        let timestamp = Timestamp::now().unix_seconds();
        let body = claimed.delivery.payload.clone().into_bytes();
        let signature = sign(&claimed.secret, &msg_id, timestamp, &body);
        let response = self
            .client
            .post(url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(HEADER_ID, msg_id)
            .header(HEADER_TIMESTAMP, timestamp.to_string())
            .header(HEADER_SIGNATURE, signature)
            .body(body)
            .send()
            .await;
        // The response body is not read: only the status matters, and a receiver that streams
        // a body forever must not hold a delivery slot.
        match response {
            Ok(response) if response.status().is_success() => Outcome::Delivered {
                status: response.status().as_u16(),
            },
            Ok(response) => Outcome::Rejected {
                status: response.status().as_u16(),
            },
            Err(e) => Outcome::NoResponse {
                error: self.describe(&e),
            },
        }
    }

    /// A short, stable text for a failed request: what the deliveries list shows.
    fn describe(&self, e: &reqwest::Error) -> String {
        if e.is_timeout() {
            return format!("timed out after {:?}", self.timeout);
        }
        let mut cause: &(dyn StdError + 'static) = e;
        while let Some(next) = cause.source() {
            if let Some(refused) = next.downcast_ref::<GuardError>() {
                return refused.to_string();
            }
            cause = next;
        }
        if e.is_connect() {
            format!("connection failed: {cause}")
        } else {
            format!("request failed: {cause}")
        }
    }
}
