//! The redirect of a link with rules, and the small pages it may answer instead: the 410 page of
//! an expired link, the password form, and the link preview a chat app's crawler reads. The
//! service decides ([`shortlink_service::Service::route`]); this module speaks HTTP.
//!
//! Every page is self-contained (one inline style, allowed by its hash; no script) and sent with
//! a strict Content-Security-Policy. Everything a link's owner wrote is HTML-escaped.

use std::sync::LazyLock;

use actix_web::http::{Method, StatusCode, header};
use actix_web::web::{BytesMut, Payload};
use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder, ResponseError};
use base64::Engine;
use futures_util::StreamExt;
use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};
use sha2::{Digest, Sha256};
use shortlink_domain::{RedirectRules, RedirectType, Timestamp, Visit};
use shortlink_service::{Route, Unlock, Visitor};
use shortlink_storage::RedirectTarget;

use super::redirect::{agent, bounded, header_text};
use crate::client::client_address;
use crate::error::ApiError;
use crate::negotiation::prefers_json_to_html;
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

/// Largest password form accepted: a password and the referrer the form carries (up to 2,048
/// characters, percent-encoded at up to three bytes each).
const MAX_FORM_BYTES: usize = 8192;

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
    // The visit's referrer: a POST's is the form's page, which sends none (`no-referrer`), so
    // the form carries the one its page was reached from.
    // A POST without a password is no attempt (a browser's form cannot send it: the field is
    // required): the route below answers it, with the form again, or the link's expiry.
    let (attempt, referrer) = match post {
        true => match read_form(state, req, payload).await {
            Ok(form) => (form.password, form.referrer),
            // The form's own page again, saying why: a browser posted it, and gets no envelope.
            Err(refused) => return Ok(password_page(refused.status, Some(refused.says), None)),
        },
        false => (None, header_text(req, header::REFERER)),
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
                    referrer.as_deref(),
                ));
            }
            Unlock::TooMany(wait) => return Ok(too_many_attempts_page(wait, referrer.as_deref())),
        }
    }
    let agent = agent(req);
    let visitor = Visitor {
        user_agent: agent.text.as_deref(),
        address: Some(address),
        crawler: agent.bot,
        counts: agent.clicks(req.method()),
        unlocked,
    };
    match state.service.route(link, rules, &visitor).await? {
        Route::Expired(Some(to)) => Ok(redirect(StatusCode::FOUND, to.as_str().to_owned())),
        Route::Expired(None) => Ok(expired(req)),
        Route::Password if no_password => Ok(password_page(
            StatusCode::BAD_REQUEST,
            Some("Enter the password."),
            referrer.as_deref(),
        )),
        Route::Password => Ok(password_page(StatusCode::OK, None, referrer.as_deref())),
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
                    referrer,
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
            Ok(redirect(status, to.with_query(req.query_string())))
        }
    }
}

/// An expired link with nowhere to go: a 410 page, or `LINK_EXPIRED` for a client that asks
/// for JSON alone.
fn expired(req: &HttpRequest) -> HttpResponse {
    let mut gone = if prefers_json_to_html(req) {
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
    gone
}

/// The password form again, for an address or link whose budget of wrong passwords is spent
/// for `wait`.
fn too_many_attempts_page(wait: std::time::Duration, referrer: Option<&str>) -> HttpResponse {
    let mut page = password_page(
        StatusCode::TOO_MANY_REQUESTS,
        Some("Too many wrong passwords. Try again later."),
        referrer,
    );
    let retry = header::HeaderValue::from(crate::ratelimit::ceil_secs(wait).max(1));
    page.headers_mut().insert(header::RETRY_AFTER, retry);
    page
}

/// A redirect to `to` with `status`, which browsers and proxies keep no copy of: the link may
/// change, and a click must reach the server to count.
pub(super) fn redirect(status: StatusCode, to: String) -> HttpResponse {
    HttpResponseBuilder::new(status)
        .insert_header((header::LOCATION, to))
        .insert_header((header::CACHE_CONTROL, "private, no-cache"))
        .finish()
}

/// The password form's fields, each `None` when missing or empty.
#[derive(Debug, Default, PartialEq)]
struct PasswordForm {
    password: Option<String>,
    /// The `Referer` the form's page was reached with, as the redirect keeps one: at most its
    /// bound in characters; none with a control character (no header could carry one).
    referrer: Option<String>,
}

impl PasswordForm {
    /// The fields of a body in `application/x-www-form-urlencoded`.
    fn parse(body: &[u8]) -> Self {
        let mut form = Self::default();
        for (name, value) in form_urlencoded::parse(body) {
            match &*name {
                _ if value.is_empty() => {}
                "password" => form.password = Some(value.into_owned()),
                "referrer" if !value.chars().any(char::is_control) => {
                    form.referrer = Some(bounded(&value).to_owned());
                }
                _ => {}
            }
        }
        form
    }
}

/// Why a password form was not read: the status and what the form's page says.
#[derive(Debug, PartialEq)]
struct FormRefused {
    status: StatusCode,
    says: &'static str,
}

const FORM_TOO_LARGE: FormRefused = FormRefused {
    status: StatusCode::PAYLOAD_TOO_LARGE,
    says: "That form is too large to be read.",
};

/// The password form's body. A body declared larger than the form's bound is refused before it
/// is read, rather than waited for.
async fn read_form(
    state: &AppState,
    req: &HttpRequest,
    mut payload: Payload,
) -> Result<PasswordForm, FormRefused> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_FORM_BYTES as u64) {
        return Err(FORM_TOO_LARGE);
    }
    let read = async {
        let mut body = BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|_| FormRefused {
                status: StatusCode::BAD_REQUEST,
                says: "That form could not be read.",
            })?;
            if body.len() + chunk.len() > MAX_FORM_BYTES {
                return Err(FORM_TOO_LARGE);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    let body = tokio::time::timeout(state.settings.request_body_timeout, read)
        .await
        .map_err(|_| FormRefused {
            status: StatusCode::REQUEST_TIMEOUT,
            says: "That form did not arrive in time.",
        })??;
    Ok(PasswordForm::parse(&body))
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

/// The password form; it posts to the page itself (the same path and query), with the visit's
/// `referrer`.
fn password_page(status: StatusCode, error: Option<&str>, referrer: Option<&str>) -> HttpResponse {
    let error = error.map_or(String::new(), |e| {
        format!("<p class=\"error\" role=\"alert\">{}</p>", text(e))
    });
    let referrer = referrer.map_or(String::new(), |r| {
        format!(
            "<input type=\"hidden\" name=\"referrer\" value=\"{}\">",
            attr(r)
        )
    });
    let body = format!(
        "<h1>This link is protected</h1>{error}<form method=\"post\">{referrer}\
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_keeps_a_referrer_a_header_could_carry() {
        let form = PasswordForm::parse(b"password=open+sesame&referrer=https%3A%2F%2Fa.example%2F");
        assert_eq!(form.password.as_deref(), Some("open sesame"));
        assert_eq!(form.referrer.as_deref(), Some("https://a.example/"));
        let long = format!("referrer={}", "r".repeat(3000));
        let kept = PasswordForm::parse(long.as_bytes()).referrer.unwrap();
        assert_eq!(kept.len(), shortlink_analytics::MAX_REFERRER_URL);
        assert_eq!(
            PasswordForm::parse(b"password=&referrer=https%3A%2F%2Fa.example%2F%0D%0Ax"),
            PasswordForm::default(),
            "an empty password and a referrer with a line break are none"
        );
    }
}
