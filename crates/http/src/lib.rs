#![doc = include_str!("../README.md")]

pub mod auth;
pub mod client;
pub mod envelope;
pub mod error;
pub mod extract;
pub mod head_limits;
pub mod idempotency;
pub mod metrics;
pub mod middleware;
mod negotiation;
pub mod openapi;
pub mod ratelimit;
pub mod routes;
pub mod state;

use actix_web::web::{self, Data};
use actix_web::{HttpResponse, middleware as actix_middleware};

pub use error::{ApiError, FieldError};
pub use state::{AppState, HttpSettings};

/// Mounts every route, at the root of an `App` wrapped in [`middleware::request_context`]
/// (which gives responses their `X-Request-Id` and `RateLimit-*` headers). It also registers,
/// for the whole app and so for the embedder's own routes too, a `web::PayloadConfig` of
/// [`extract::MAX_BODY_BYTES`] (1 MiB), a `web::PathConfig` that answers a bad path with a 400
/// envelope, and the redirect as the app's default service (an `App::default_service` called
/// afterwards replaces it). The crate's documentation shows the whole embedding: the store,
/// the service and its background tasks ([`shortlink_service::Service::run`]), and the stop.
///
/// ```no_run
/// # fn demo(state: actix_web::web::Data<shortlink_http::AppState>) {
/// use actix_web::{App, middleware::from_fn};
/// let app = App::new()
///     .wrap(from_fn(shortlink_http::middleware::request_context))
///     .configure(|cfg| shortlink_http::configure(cfg, state.clone()));
/// # }
/// ```
pub fn configure(cfg: &mut web::ServiceConfig, state: Data<AppState>) {
    cfg.app_data(state)
        .app_data(web::PayloadConfig::new(extract::MAX_BODY_BYTES))
        .app_data(web::PathConfig::default().error_handler(|e, _| ApiError::invalid(e).into()))
        .configure(routes::health::configure)
        .configure(openapi::configure_page)
        .configure(routes::dashboard::configure)
        .service(
            web::scope("/api/v1")
                .configure(openapi::configure_document)
                .wrap(actix_middleware::DefaultHeaders::new().add(("Cache-Control", "no-store")))
                .configure(routes::links::configure)
                .configure(routes::analytics::configure)
                .configure(routes::export::configure)
                .configure(routes::qr::configure)
                .configure(routes::webhooks::configure)
                .default_service(web::to(api_not_found)),
        )
        // The rest of `/api` (another version, a typo) is the API's too: a JSON 404, never a
        // short code (`api` is reserved).
        .service(web::scope("/api").default_service(web::to(api_not_found)))
        .default_service(web::to(routes::redirect::redirect));
}

/// A GET route that answers HEAD too, with the same head and no body: a server that serves GET
/// serves HEAD (RFC 9110), and load balancers probe `/healthz` with it.
pub(crate) fn get() -> actix_web::Route {
    web::route().guard(actix_web::guard::Any(actix_web::guard::Get()).or(actix_web::guard::Head()))
}

/// A resource that serves `handler` to GET and HEAD (`get`) and answers any other method 405.
pub(crate) fn get_only<F, Args>(path: &str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    web::resource(path)
        .route(get().to(handler))
        .default_service(method_not_allowed("GET, HEAD"))
}

/// A known route's answer to a method it does not serve: 405 with `Allow` listing those it does.
pub(crate) fn method_not_allowed(allow: &'static str) -> actix_web::Route {
    web::to(move || async move { Err::<HttpResponse, _>(ApiError::MethodNotAllowed { allow }) })
}

async fn api_not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound("route"))
}
