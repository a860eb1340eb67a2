//! `/healthz` (the process is up) and `/readyz` (the database answers, with the schema this
//! build expects).

use actix_web::web::Data;
use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::envelope::ok;
use crate::error::ApiError;
use crate::state::AppState;

/// The two probes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    // Another method is a 405, not the missing link's page (the paths are reserved slugs).
    cfg.service(crate::get_only("/healthz", healthz))
        .service(crate::get_only("/readyz", readyz));
}

async fn healthz() -> HttpResponse {
    ok(json!({ "status": "ok" }))
}

async fn readyz(state: Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.store.check_ready().await.map_err(|e| {
        tracing::warn!(error = %e, "readiness check failed");
        ApiError::Unavailable
    })?;
    // Redis is not the source of truth: without it the instance serves, limiting on its own.
    let rate_limits = match state.rate_limiter.sharing().await {
        None => "per instance",
        Some(true) => "shared",
        Some(false) => "per instance (Redis does not answer)",
    };
    Ok(ok(
        json!({ "status": "ok", "database": "ok", "rateLimits": rate_limits }),
    ))
}
