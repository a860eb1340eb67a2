//! Authentication: `Authorization: Bearer <key>` → the key's workspace, then the workspace's
//! rate limit. Keys are looked up by the SHA-256 of the secret (one indexed read) and cached for
//! a few seconds, so a revoked key stops working within [`KEY_CACHE_TTL`].

use std::time::Duration;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::web::Data;
use actix_web::{FromRequest, HttpMessage, HttpRequest};
use futures_util::future::LocalBoxFuture;
use shortlink_domain::{ApiKeyHash, ApiKeyId, ApiKeySecret, Workspace, attempt_source};
use shortlink_storage::AuthenticatedKey;

use crate::error::ApiError;
use crate::state::AppState;

/// How long an authenticated key is trusted without asking the database again; also the longest
/// a revoked key keeps working (and a changed plan rate takes to apply).
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(5);

/// Recently authenticated keys, by hash. Unknown keys are not cached, so a key works the moment
/// it is created.
#[derive(Clone)]
pub struct KeyCache(moka::sync::Cache<ApiKeyHash, AuthenticatedKey>);

impl Default for KeyCache {
    fn default() -> Self {
        Self(
            moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(KEY_CACHE_TTL)
                .build(),
        )
    }
}

impl KeyCache {
    /// Forgets every key (keys changed on another instance).
    pub fn clear(&self) {
        self.0.invalidate_all();
    }
}

/// The workspace a request acts for. As an extractor it authenticates the request and counts it
/// against the workspace's rate; put it first among a handler's arguments so a request without
/// a valid key gets 401 before anything else is looked at.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// The key used.
    pub key_id: ApiKeyId,
    /// Its workspace.
    pub workspace: Workspace,
}

impl FromRequest for Authenticated {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = req
                .app_data::<Data<AppState>>()
                .ok_or_else(|| ApiError::Internal("application state missing".into()))?
                .clone();
            let addr = attempt_source(crate::client::client_address(&state, &req));
            if let Some(retry_after) = state.auth_failures.blocked_for(addr) {
                return Err(ApiError::RateLimited { retry_after });
            }
            let found = match bearer_token(&req) {
                Some(token) => lookup(&state, ApiKeySecret::from_presented(token).hash()).await?,
                None => None,
            };
            let Some(key) = found else {
                let over = state
                    .rate_limiter
                    .auth_failure(addr, &state.auth_failures)
                    .await;
                return Err(match over {
                    Some(retry_after) => ApiError::RateLimited { retry_after },
                    None => ApiError::Unauthorized,
                });
            };
            let decision = state
                .rate_limiter
                .check(key.workspace.id, key.workspace.rate_limit)
                .await;
            req.extensions_mut().insert(decision);
            if !decision.allowed {
                return Err(ApiError::RateLimited {
                    retry_after: decision.retry_after,
                });
            }
            Ok(Authenticated {
                key_id: key.key_id,
                workspace: key.workspace,
            })
        })
    }
}

async fn lookup(state: &AppState, hash: ApiKeyHash) -> Result<Option<AuthenticatedKey>, ApiError> {
    if let Some(found) = state.keys.0.get(&hash) {
        return Ok(Some(found));
    }
    let found = state.store.authenticate(&hash).await?;
    if let Some(key) = &found {
        state.keys.0.insert(hash, key.clone());
    }
    Ok(found)
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive), if well-formed. Two
/// `Authorization` fields are not: which one is meant cannot be told (a proxy that adds its own
/// must not make the first one win).
fn bearer_token(req: &HttpRequest) -> Option<&str> {
    let mut fields = req.headers().get_all(header::AUTHORIZATION);
    let value = fields.next()?.to_str().ok()?;
    if fields.next().is_some() {
        return None;
    }
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}
