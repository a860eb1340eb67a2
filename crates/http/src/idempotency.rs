//! `Idempotency-Key` on the creating POSTs (`/links`, `/links/bulk`, `/webhooks`): a client that
//! retries a creation (a timeout, a dropped connection) with the same key and body gets the first
//! answer again and creates nothing. Keys are per workspace and count for 24 hours.
//!
//! A request with a key is validated first (a refused request creates nothing and claims
//! nothing), then claims its key in the database, then creates; the creation's own transaction
//! records the answer under the key (`shortlink_storage::LinkCompletion`), so a creation is never
//! committed without its answer, on any instance. A creation that fails gives its key back.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use sha2::{Digest, Sha256};
use shortlink_storage::{ClaimOutcome, IdempotencyClaim, StoredResponse};

use crate::auth::Authenticated;
use crate::envelope::Envelope;
use crate::error::ApiError;
use crate::state::AppState;

/// The request header.
pub const HEADER: &str = "idempotency-key";

/// Set on an answer that is a replay of the first one.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// Longest key accepted (a UUID is 36; Stripe allows 255).
pub const MAX_KEY_LEN: usize = 255;

/// Whether the request carries an `Idempotency-Key` (well-formed or not).
pub fn has_key(req: &HttpRequest) -> bool {
    req.headers().contains_key(HEADER)
}

/// The request's route and body, hashed: what "the same request" means for a retry. The body is
/// compared byte for byte, as a retry sends it. What is stored is [`stored_fingerprint`].
pub fn fingerprint(route: &str, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(route.as_bytes());
    hash.update([0]);
    hash.update(body);
    hex(&hash.finalize())
}

/// The [`fingerprint`] kept with a request's key, salted with the key when the body may hold a
/// link's `password` (it says `password`, or escapes a character, which could spell it) and
/// made as slow to guess as a stored password
/// ([`Service::stretch`](shortlink_service::Service::stretch), Argon2id). It is kept for a day:
/// a fast hash of such a body would give the password away to whoever reads the database (a
/// million guesses a second, where the password's own hash allows a few).
pub async fn stored_fingerprint(
    service: &shortlink_service::Service,
    route: &str,
    key: &[u8],
    body: &[u8],
) -> Result<String, ApiError> {
    let fast = fingerprint(route, body);
    let may_hold_a_password =
        body.windows(8).any(|w| w == b"password") || body.windows(2).any(|w| w == b"\\u");
    if !may_hold_a_password {
        return Ok(fast);
    }
    let mut salt = [0; 16];
    salt.copy_from_slice(&Sha256::digest(key)[..16]);
    Ok(hex(&service.stretch(fast.into_bytes(), salt).await?))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The request's key: absent, or 1 to [`MAX_KEY_LEN`] visible ASCII characters.
fn key(req: &HttpRequest) -> Result<Option<String>, ApiError> {
    let mut values = req.headers().get_all(HEADER);
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let refuse = |why: &str| ApiError::field("Idempotency-Key", why);
    if values.next().is_some() {
        return Err(refuse("send one Idempotency-Key header"));
    }
    let key = value
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= MAX_KEY_LEN)
        .filter(|k| k.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| {
            refuse("Idempotency-Key must be 1 to 255 visible ASCII characters (a UUID, say)")
        })?;
    Ok(Some(key.to_owned()))
}

/// What a validated creating request does next.
pub enum Begin {
    /// Create; with a claim to complete when the request has a key.
    Run(Option<IdempotencyClaim>),
    /// Answer this, creating nothing: the same request was answered before.
    Replay(HttpResponse),
}

/// Claims the request's key, if it has one. `fingerprint` is [`crate::extract::JsonBody`]'s.
pub async fn begin(
    state: &AppState,
    auth: &Authenticated,
    req: &HttpRequest,
    fingerprint: Option<&str>,
) -> Result<Begin, ApiError> {
    let Some(key) = key(req)? else {
        return Ok(Begin::Run(None));
    };
    let claim = IdempotencyClaim {
        workspace_id: auth.workspace.id,
        key,
        fingerprint: fingerprint.unwrap_or_default().to_owned(),
        token: hex(&rand::random::<[u8; 16]>()),
    };
    match state.store.claim_idempotency_key(&claim).await? {
        ClaimOutcome::Claimed => Ok(Begin::Run(Some(claim))),
        ClaimOutcome::Replay(stored) => {
            let mut response = respond(&stored);
            response.headers_mut().insert(
                header::HeaderName::from_static(REPLAYED_HEADER),
                header::HeaderValue::from_static("true"),
            );
            Ok(Begin::Replay(response))
        }
        ClaimOutcome::InUse => Err(ApiError::IdempotencyKeyInUse),
        ClaimOutcome::Reused => Err(ApiError::IdempotencyKeyReused),
    }
}

/// Gives the key back after the creation failed (best effort: an unreleased claim lapses after
/// `shortlink_storage::ABANDONED_CLAIM`).
pub async fn release(state: &AppState, claim: Option<&IdempotencyClaim>) {
    if let Some(claim) = claim
        && let Err(e) = state.store.release_idempotency_key(claim).await
    {
        tracing::warn!(error = %e, "could not release an idempotency key");
    }
}

/// An answer as it is recorded: the success envelope of `data`, or the error's envelope.
pub fn stored<T: Serialize>(answer: Result<T, ApiError>) -> StoredResponse {
    let (status, body) = match answer {
        Ok(data) => (
            StatusCode::OK,
            serde_json::to_string(&Envelope::success(data)),
        ),
        Err(e) => (e.status_and_code().0, serde_json::to_string(&e.envelope())),
    };
    StoredResponse {
        status: status.as_u16(),
        body: body.unwrap_or_default(),
    }
}

/// The HTTP response of a recorded answer.
pub fn respond(stored: &StoredResponse) -> HttpResponse {
    HttpResponse::build(
        StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
    )
    .content_type("application/json")
    .body(stored.body.clone())
}
