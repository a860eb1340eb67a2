//! The dashboard: its page at `/` and its embedded assets under [`shortlink_dashboard::PREFIX`]
//! (`/assets`, a reserved slug), or, with `--root-redirect`, `/` sending visitors elsewhere.
//!
//! Every answer carries a strict Content-Security-Policy: the page runs only its own module
//! scripts and style sheets and talks only to this origin, so data shown in it cannot run as
//! code, and no other site may frame it.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{StatusCode, Uri};
use actix_web::web::{self, Bytes, Data};
use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder};
use shortlink_dashboard::Asset;

use crate::negotiation::matches_etag;
use crate::state::AppState;

/// No inline script or style, nothing from elsewhere; images may be data or blob URLs (the QR
/// preview); `fetch` only to this origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; \
    base-uri 'none'; form-action 'none'";

/// Where `/` sends visitors instead of the dashboard: an absolute `http` or `https` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootRedirect(HeaderValue);

/// Why a `--root-redirect` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the root redirect must be an absolute http or https URL, got '{0}'")]
pub struct RootRedirectError(String);

impl RootRedirect {
    /// Accepts an absolute `http`/`https` URL with a host.
    pub fn parse(s: &str) -> Result<Self, RootRedirectError> {
        let refuse = || RootRedirectError(s.to_owned());
        let uri: Uri = s.parse().map_err(|_| refuse())?;
        let web = matches!(uri.scheme_str(), Some("http" | "https"));
        if !web || uri.host().is_none_or(str::is_empty) {
            return Err(refuse());
        }
        HeaderValue::from_str(s).map(Self).map_err(|_| refuse())
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        self.0.to_str().unwrap_or_default()
    }
}

/// `/` and the assets. One static resource and one static prefix, so a redirect (which comes
/// after them in routing) pays two string comparisons for them, no pattern match.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::get_only("/", index)).service(
        web::scope(shortlink_dashboard::PREFIX)
            .service(web::resource("/{path:.+}").route(crate::get().to(asset))),
    );
}

async fn index(req: HttpRequest, state: Data<AppState>) -> HttpResponse {
    if let Some(target) = &state.settings.root_redirect {
        return HttpResponse::Found()
            .insert_header((header::LOCATION, target.0.clone()))
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .finish();
    }
    match shortlink_dashboard::lookup(shortlink_dashboard::INDEX) {
        Some(page) => serve(&req, page),
        None => not_found(),
    }
}

async fn asset(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    match shortlink_dashboard::lookup(&path) {
        Some(file) => serve(&req, file),
        None => not_found(),
    }
}

/// The file, gzipped when the client accepts it, or 304 when its copy is current. `no-cache`:
/// the names carry no version, so the browser asks each time and the tag keeps that cheap.
fn serve(req: &HttpRequest, file: &'static Asset) -> HttpResponse {
    let current = matches_etag(req, file.etag());
    let mut answer = secured(if current {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    });
    answer
        .insert_header((header::ETAG, file.etag()))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::VARY, "Accept-Encoding"));
    if current {
        return answer.finish();
    }
    answer.insert_header((header::CONTENT_TYPE, file.content_type()));
    match file.gzip().filter(|_| accepts_gzip(req)) {
        Some(gz) => answer
            .insert_header((header::CONTENT_ENCODING, "gzip"))
            .body(Bytes::from_static(gz)),
        None => answer.body(Bytes::from_static(file.bytes())),
    }
}

fn not_found() -> HttpResponse {
    secured(StatusCode::NOT_FOUND)
        .content_type("text/plain; charset=utf-8")
        .body("Not found\n")
}

/// A response with the headers every dashboard answer carries.
fn secured(status: StatusCode) -> HttpResponseBuilder {
    let mut answer = HttpResponse::build(status);
    answer
        .insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"));
    answer
}

fn accepts_gzip(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',').any(|coding| {
                let mut parts = coding.split(';');
                let name = parts.next().unwrap_or_default().trim();
                let refused =
                    parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
                (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_redirect_takes_web_urls_only() {
        assert_eq!(
            RootRedirect::parse("https://example.com/home").map(|r| r.as_str().to_owned()),
            Ok("https://example.com/home".to_owned())
        );
        for bad in [
            "",
            "/relative",
            "ftp://example.com/",
            "https://",
            "javascript:alert(1)",
            "http://a b/",
        ] {
            assert!(RootRedirect::parse(bad).is_err(), "{bad}");
        }
    }
}
