//! `GET /{shortCode}`: the hot path. A cache hit answers without touching the database; the click
//! is recorded in memory and written later in a batch.

use std::sync::{Arc, LazyLock};

use actix_web::http::{Method, header};
use actix_web::web::{Data, Path};
use actix_web::{HttpRequest, HttpResponse, web};
use shortlink_domain::{ClickInfo, Slug, Timestamp};

use crate::cache::{Cached, RedirectTarget};
use crate::error::ApiError;
use crate::state::AppState;

/// Known bots and link-preview crawlers (Slack, WhatsApp, Twitter, …), whose fetches are not
/// clicks.
static BOTS: LazyLock<isbot::Bots> = LazyLock::new(isbot::Bots::default);

const NOT_FOUND_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Link not found</title></head>\
<body><h1>Link not found</h1><p>This short link does not exist or was removed.</p></body></html>";

/// The redirect route, for GET and HEAD (HEAD answers the same without counting).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/{code}")
            .route(web::get().to(redirect))
            .route(web::head().to(redirect))
            .default_service(crate::method_not_allowed("GET, HEAD")),
    );
}

/// The plain page for unknown codes and paths outside the API.
pub fn not_found_page() -> HttpResponse {
    HttpResponse::NotFound()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(NOT_FOUND_PAGE)
}

async fn redirect(
    state: Data<AppState>,
    req: HttpRequest,
    code: Path<String>,
) -> Result<HttpResponse, ApiError> {
    let Some(target) = find(&state, &code).await? else {
        return Ok(not_found_page());
    };
    if req.method() == Method::GET && !is_bot(&req) {
        state.clicks.record(&target, || ClickInfo {
            timestamp: Timestamp::now(),
            referrer: header_text(&req, header::REFERER),
            user_agent: header_text(&req, header::USER_AGENT),
        });
    }
    Ok(HttpResponse::Found()
        .insert_header((
            header::LOCATION,
            target.destination.with_query(req.query_string()),
        ))
        .insert_header((header::CACHE_CONTROL, "private, no-cache"))
        .finish())
}

async fn find(state: &AppState, code: &str) -> Result<Option<Arc<RedirectTarget>>, ApiError> {
    match state.links.get(code) {
        Cached::Found(target) => return Ok(Some(target)),
        Cached::Absent => return Ok(None),
        Cached::Unknown => {}
    }
    // A path that could never be a slug never reaches the database, nor the negative cache.
    if Slug::parse(code).is_err() {
        return Ok(None);
    }
    // On SQLite the lookup runs right here, which beats handing it to another thread.
    let found = match state.store.resolve_now(state.domain(), code) {
        Some(result) => result?,
        None => state.store.resolve(state.domain(), code).await?,
    };
    match found {
        Some(link) => {
            let target = Arc::new(RedirectTarget::from(&link));
            state.links.insert(code, target.clone());
            Ok(Some(target))
        }
        None => {
            state.links.insert_absent(code);
            Ok(None)
        }
    }
}

fn is_bot(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::USER_AGENT)
        .and_then(|ua| ua.to_str().ok())
        .is_some_and(|ua| BOTS.is_bot(ua))
}

fn header_text(req: &HttpRequest, name: header::HeaderName) -> Option<String> {
    let value = req.headers().get(name)?.to_str().ok()?;
    // Bounded: these end up in webhook payloads.
    Some(value.chars().take(1024).collect())
}
