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
    cfg.route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz));
}

async fn healthz() -> HttpResponse {
    ok(json!({ "status": "ok" }))
}

async fn readyz(state: Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.store.check_ready().await.map_err(|e| {
        tracing::warn!(error = %e, "readiness check failed");
        ApiError::Unavailable
    })?;
    Ok(ok(json!({ "status": "ok", "database": "ok" })))
}
