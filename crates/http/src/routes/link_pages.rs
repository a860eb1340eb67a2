//! The redirect of a link with rules, and the small pages it may answer instead: the 410 page of
//! an expired link, the password form, and the link preview a chat app's crawler reads. The
//! service decides ([`shortlink_service::Service::route`]); this module speaks HTTP.
//!
//! Every page is self-contained (one inline style, allowed by its hash; no script) and sent with
//! a strict Content-Security-Policy. Everything a link's owner wrote is HTML-escaped.

use std::sync::LazyLock;

use actix_web::http::header::Quality;
use actix_web::http::{Method, StatusCode, header};
use actix_web::mime::Mime;
use actix_web::web::{BytesMut, Payload};
use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder, ResponseError};
use base64::Engine;
use futures_util::StreamExt;
use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};
use sha2::{Digest, Sha256};
use shortlink_domain::{RedirectRules, RedirectType, Timestamp, Visit};
use shortlink_service::{Route, Unlock, Visitor};
use shortlink_storage::RedirectTarget;

use super::redirect::{agent, header_text};
use crate::client::client_address;
use crate::error::ApiError;
use crate::negotiation::{accepted, is_json};
use crate::state::AppState;

/// The pages' one style.
const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;\
padding:0 1rem;color:#222;background:#fff}@media(prefers-color-scheme:dark){body{color:#eee;\
background:#111}}input,button{font:inherit;padding:.4rem .6rem}p.error{color:#c00}";

/// The Content-Security-Policy of every page: nothing but the style above, images for a preview,
/// and a form posting to the page itself. `form-action` names the destinations' schemes too:
/// browsers hold the redirect that answers a form to it as well (Chromium blocks it otherwise),
/// and the right password's answer is a redirect to another site.
static CSP: LazyLock<String> = LazyLock::new(|| {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src https: http:; \
         form-action 'self' https: http:; base-uri 'none'; frame-ancestors 'none'"
    )
});

/// Largest password form accepted.
const MAX_FORM_BYTES: usize = 4096;

/// Answers a request for a link with rules: GET and HEAD follow them; POST (only for a link with
/// a password: `redirect` answers 405 otherwise) is the password form's submission.
pub(crate) async fn follow_rules(
    state: &AppState,
    req: &HttpRequest,
    payload: Payload,
    link: &RedirectTarget,
    rules: &RedirectRules,
) -> Result<HttpResponse, ApiError> {
    let address = client_address(state, req);
    let post = req.method() == Method::POST;
    let mut unlocked = false;
    // A POST without a password is no attempt (a browser's form cannot send it: the field is
    // required): the route below answers it, with the form again, or the link's expiry.
    let attempt = match post {
        true => password_of(state, req, payload).await?,
        false => None,
    };
    let no_password = post && attempt.is_none();
    if let Some(attempt) = attempt {
        match state
            .service
            .unlock(link, rules, Some(address), attempt)
            .await?
        {
            Unlock::Right => unlocked = true,
            // The route below answers the expiry.
            Unlock::Expired => {}
            Unlock::Wrong => {
                return Ok(password_page(
                    StatusCode::FORBIDDEN,
                    Some("That password is not right."),
                ));
            }
            Unlock::TooMany(wait) => {
                let mut page = password_page(
                    StatusCode::TOO_MANY_REQUESTS,
                    Some("Too many wrong passwords. Try again later."),
                );
                let retry = header::HeaderValue::from(crate::ratelimit::ceil_secs(wait).max(1));
                page.headers_mut().insert(header::RETRY_AFTER, retry);
                return Ok(page);
            }
        }
    }
    let agent = agent(req);
    let crawler = agent.bot;
    let visitor = Visitor {
        user_agent: agent.text.as_deref(),
        address: Some(address),
        crawler,
        counts: req.method() != Method::HEAD && !crawler,
        unlocked,
    };
    match state.service.route(link, rules, &visitor).await? {
        Route::Expired(Some(to)) => Ok(redirect(StatusCode::FOUND, to.as_str())),
        Route::Expired(None) => {
            let mut gone = if wants_json(req) {
                ApiError::LinkExpired.error_response()
            } else {
                page(
                    StatusCode::GONE,
                    "Link expired",
                    "<h1>Link expired</h1><p>This short link has expired.</p>",
                )
            };
            // A 410 may be cached by default; this one is either of two answers.
            let headers = gone.headers_mut();
            headers.insert(
                header::CACHE_CONTROL,
                header::HeaderValue::from_static("no-store"),
            );
            headers.insert(header::VARY, header::HeaderValue::from_static("accept"));
            Ok(gone)
        }
        Route::Password if no_password => Ok(password_page(
            StatusCode::BAD_REQUEST,
            Some("Enter the password."),
        )),
        Route::Password => Ok(password_page(StatusCode::OK, None)),
        Route::Preview => Ok(preview_page(rules, link.destination.as_str())),
        Route::Redirect {
            to,
            status,
            counted,
        } => {
            if counted {
                state.service.record_click(link, || Visit {
                    timestamp: Timestamp::now(),
                    address: Some(address),
                    referrer: header_text(req, header::REFERER),
                    user_agent: agent.text,
                });
            }
            // After the form's POST, a 302 whatever the link's type: a 307 or 308 would make the
            // browser post the password on to the destination.
            let status = if unlocked {
                RedirectType::Found
            } else {
                status
            };
            let status = StatusCode::from_u16(status.status()).unwrap_or(StatusCode::FOUND);
            Ok(redirect(status, &to.with_query(req.query_string())))
        }
    }
}

fn redirect(status: StatusCode, to: &str) -> HttpResponse {
    HttpResponseBuilder::new(status)
        .insert_header((header::LOCATION, to))
        .insert_header((header::CACHE_CONTROL, "private, no-cache"))
        .finish()
}

/// Whether the client asked for JSON rather than a page: `application/json` acceptable and
/// `text/html` not (a browser accepts both, through `*/*`, and gets the page).
fn wants_json(req: &HttpRequest) -> bool {
    let html = |m: &Mime| m.essence_str() == "text/html";
    accepted(req, is_json) > Quality::ZERO && accepted(req, html) == Quality::ZERO
}

/// The `password` field of the form's body (`application/x-www-form-urlencoded`); `None` when
/// it is missing or empty. A body declared larger than the form's bound is refused before it is
/// read, rather than waited for.
async fn password_of(
    state: &AppState,
    req: &HttpRequest,
    mut payload: Payload,
) -> Result<Option<String>, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_FORM_BYTES as u64) {
        return Err(ApiError::PayloadTooLarge);
    }
    let read = async {
        let mut body = BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|_| ApiError::invalid("the form could not be read"))?;
            if body.len() + chunk.len() > MAX_FORM_BYTES {
                return Err(ApiError::PayloadTooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    let timeout = state.settings.request_body_timeout;
    let body = tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| ApiError::RequestTimeout(timeout.as_secs()))??;
    Ok(form_urlencoded::parse(&body)
        .find(|(name, _)| name == "password")
        .map(|(_, value)| value.into_owned())
        .filter(|password| !password.is_empty()))
}

/// A page: `<head>` with `head` extra, `body` as given (already escaped).
fn page_with_head(status: StatusCode, title: &str, head: &str, body: &str) -> HttpResponse {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{}</title>{head}\
         <style>{STYLE}</style></head><body>{body}</body></html>",
        text(title)
    );
    HttpResponseBuilder::new(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::CONTENT_SECURITY_POLICY, CSP.as_str()))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .body(html)
}

fn page(status: StatusCode, title: &str, body: &str) -> HttpResponse {
    page_with_head(status, title, "", body)
}

/// The password form; it posts to the page itself (the same path and query).
fn password_page(status: StatusCode, error: Option<&str>) -> HttpResponse {
    let error = error.map_or(String::new(), |e| {
        format!("<p class=\"error\" role=\"alert\">{}</p>", text(e))
    });
    let body = format!(
        "<h1>This link is protected</h1>{error}<form method=\"post\">\
         <label for=\"password\">Password</label> \
         <input id=\"password\" name=\"password\" type=\"password\" required autofocus \
         autocomplete=\"current-password\"> <button type=\"submit\">Continue</button></form>"
    );
    page(status, "Password required", &body)
}

/// What a crawler gets for a link with preview fields: Open Graph and Twitter card tags.
fn preview_page(rules: &RedirectRules, destination: &str) -> HttpResponse {
    let preview = &rules.preview;
    let title = preview.title.as_deref().unwrap_or(destination);
    let mut head = String::new();
    let mut meta = |kind: &str, name: &str, value: &str| {
        head.push_str(&format!(
            "<meta {kind}=\"{}\" content=\"{}\">",
            attr(name),
            attr(value)
        ));
    };
    meta("property", "og:title", title);
    meta("name", "twitter:title", title);
    if let Some(description) = &preview.description {
        meta("property", "og:description", description);
        meta("name", "twitter:description", description);
        meta("name", "description", description);
    }
    let card = match &preview.image {
        Some(image) => {
            meta("property", "og:image", image.as_str());
            meta("name", "twitter:image", image.as_str());
            "summary_large_image"
        }
        None => "summary",
    };
    meta("name", "twitter:card", card);
    meta("property", "og:url", destination);
    meta("property", "og:type", "website");
    let description = preview
        .description
        .as_deref()
        .map_or(String::new(), |d| format!("<p>{}</p>", text(d)));
    let body = format!(
        "<h1>{}</h1>{description}<p><a href=\"{}\">{}</a></p>",
        text(title),
        attr(destination),
        text(destination)
    );
    page_with_head(StatusCode::OK, title, &head, &body)
}
