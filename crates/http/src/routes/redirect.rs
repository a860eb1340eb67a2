//! `GET /{shortCode}`: the hot path. The service resolves the code (from memory, or through its
//! cache; see `shortlink_service::Service::resolve`) and records the click in memory, written
//! later in a batch; this module judges the request (method, bots) and answers it.
//!
//! The redirect is the application's default service, not a `/{code}` resource: matching a
//! dynamic segment runs the router's regular expression on every request (3 % of the server's
//! CPU on the redirect), while every path that is not one of the service's own routes is either a
//! code or a 404 anyway.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use actix_web::http::{Method, StatusCode, header};
use actix_web::web::{Data, Payload};
use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder, ResponseError};
use shortlink_domain::{Timestamp, Visit};

use crate::error::ApiError;
use crate::state::AppState;

/// Known bots and link-preview crawlers (Slack, WhatsApp, Twitter, …), whose fetches are not
/// clicks: isbot's list, and [`WHATSAPP`].
static BOTS: LazyLock<isbot::Bots> = LazyLock::new(|| {
    let mut bots = isbot::Bots::default();
    bots.append(&[WHATSAPP]);
    bots
});

/// WhatsApp's link previews, by every agent that begins `WhatsApp/`. isbot's own pattern takes
/// only a full version and a platform letter (`WhatsApp/2.21.4.22 A`); previews also come as
/// `WhatsApp/2.23.20.0` and as `WhatsApp/2`, which Signal's link previews send.
const WHATSAPP: &str = r"^whatsapp\+?/";

/// Recently seen User-Agent strings, with their verdicts. Traffic repeats a limited set of
/// agents: the bot patterns are one large regular expression (4 % of the server's CPU on the
/// redirect), and every click of a known agent shares its text instead of a copy of its own.
static AGENTS: LazyLock<quick_cache::sync::Cache<Arc<str>, Agent>> =
    LazyLock::new(|| quick_cache::sync::Cache::new(4096));

/// Longer agents are judged every time rather than remembered.
const MAX_REMEMBERED_AGENT: usize = 512;

/// The plain page for unknown codes and paths outside the API.
pub fn not_found_page() -> HttpResponse {
    plain_page(
        HttpResponse::NotFound(),
        "Link not found",
        "This short link does not exist or was removed.",
    )
}

/// A short link's page for a method it does not take (the API's routes answer the envelope).
fn method_not_allowed_page(allow: &'static str) -> HttpResponse {
    let mut page = HttpResponse::MethodNotAllowed();
    page.insert_header((header::ALLOW, allow));
    plain_page(
        page,
        "Method not allowed",
        "A short link is followed with GET; this request used another method.",
    )
}

/// A failure's page (a database that does not answer, say; nothing on this path fails with a
/// header of its own, such as `Retry-After`): its status and its message, as the envelope would
/// say them (the error's own logging included).
fn error_page(error: &ApiError) -> HttpResponse {
    let status = error.error_response().status();
    let title = status.canonical_reason().unwrap_or("Error");
    let mut line = error.to_string();
    if let Some(first) = line.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    plain_page(HttpResponseBuilder::new(status), title, &format!("{line}."))
}

/// A page of a title and a line, with the headers every page of the service carries (it needs
/// nothing: no style, no script, no frame).
fn plain_page(mut page: HttpResponseBuilder, title: &str, line: &str) -> HttpResponse {
    page.content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .body(format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
             <body><h1>{title}</h1><p>{line}</p></body></html>",
            title = html_escape::encode_text(title),
            line = html_escape::encode_text(line),
        ))
}

/// Every path outside the service's own routes: `/{code}` redirects on GET and HEAD (HEAD answers
/// the same without counting), takes a password-protected link's form on POST, and is a 405 page
/// for other methods; any other path is the 404 page. A link with rules (expiry, password, …) is
/// answered by `link_pages.rs`; a plain one right here.
pub async fn redirect(state: Data<AppState>, req: HttpRequest, payload: Payload) -> HttpResponse {
    match answer(state, req, payload).await {
        Ok(answer) => answer,
        Err(error) => error_page(&error),
    }
}

/// [`redirect`]'s answer, or the error its page says.
async fn answer(
    state: Data<AppState>,
    req: HttpRequest,
    payload: Payload,
) -> Result<HttpResponse, ApiError> {
    let Some(code) = single_segment(req.path()) else {
        return Ok(not_found_page());
    };
    // Whatever the method: an unknown code is not found.
    let Some(target) = state.service.resolve(&code).await? else {
        return Ok(not_found_page());
    };
    let rules = target.rules.as_ref();
    let password = rules.is_some_and(|r| r.password.is_some());
    let method = req.method();
    if method != Method::GET && method != Method::HEAD && !(method == Method::POST && password) {
        let allow = if password {
            "GET, HEAD, POST"
        } else {
            "GET, HEAD"
        };
        return Ok(method_not_allowed_page(allow));
    }
    if let Some(rules) = rules {
        return super::link_pages::follow_rules(&state, &req, payload, &target, rules).await;
    }
    let agent = agent(&req);
    if agent.clicks(req.method()) {
        state.service.record_click(&target, || Visit {
            timestamp: Timestamp::now(),
            address: Some(crate::client::client_address(&state, &req)),
            referrer: header_text(&req, header::REFERER),
            user_agent: agent.text,
        });
    }
    Ok(super::link_pages::redirect(
        StatusCode::FOUND,
        target.destination.with_query(req.query_string()),
    ))
}

/// The one segment of `/{segment}`, percent-decoded; `None` for `/` and deeper paths.
fn single_segment(path: &str) -> Option<Cow<'_, str>> {
    let segment = path.strip_prefix('/')?;
    if segment.is_empty() || segment.contains('/') {
        return None;
    }
    // Undecodable bytes cannot be part of a code; the lookup then finds nothing.
    Some(percent_encoding::percent_decode_str(segment).decode_utf8_lossy())
}

/// A request's `User-Agent` as a click keeps it, and whether it is a known bot's.
#[derive(Debug, Clone, Default)]
pub(super) struct Agent {
    /// At most [`MAX_HEADER_TEXT`] characters of the header, as [`header_text`] reads it.
    pub text: Option<Arc<str>>,
    /// A known bot or link-preview crawler (Slack, WhatsApp, …): its fetches are not clicks.
    pub bot: bool,
}

impl Agent {
    /// Whether its visit with `method` is a click: one that follows the link (GET, or the
    /// password form's POST), by no bot. HEAD only asks where the link goes.
    pub fn clicks(&self, method: &Method) -> bool {
        *method != Method::HEAD && !self.bot
    }
}

/// The request's `User-Agent`: its text as [`header_text`] keeps it, and its verdict.
pub(super) fn agent(req: &HttpRequest) -> Agent {
    let Some(value) = header_str(req, header::USER_AGENT) else {
        return Agent::default();
    };
    if let Some(known) = AGENTS.get(&*value) {
        return known;
    }
    let text: Arc<str> = bounded(&value).into();
    let agent = Agent {
        text: Some(text.clone()),
        bot: BOTS.is_bot(&value),
    };
    if value.len() <= MAX_REMEMBERED_AGENT {
        AGENTS.insert(text, agent.clone());
    }
    agent
}

/// Longest header text a click keeps: the whole `Referer` an event keeps (DECISIONS.md's 2,048
/// characters), and the `User-Agent` sent to webhooks is held to the same.
const MAX_HEADER_TEXT: usize = shortlink_analytics::MAX_REFERRER_URL;

/// A header's text, at most [`MAX_HEADER_TEXT`] characters, copied at once (collecting it
/// character by character was 2 % of the server's CPU on a redirect).
pub(super) fn header_text(req: &HttpRequest, name: header::HeaderName) -> Option<String> {
    header_str(req, name).map(|value| bounded(&value).to_owned())
}

/// A header's whole value as text. Browsers send visible ASCII (a `Referer` percent-encoded),
/// borrowed as it is; other clients may send UTF-8 (an app's name in its `User-Agent`, an IRI as
/// the `Referer`), read as such, any byte that is not UTF-8 replaced by U+FFFD, so the click still
/// has its agent and referrer.
fn header_str(req: &HttpRequest, name: header::HeaderName) -> Option<Cow<'_, str>> {
    let value = req.headers().get(name)?;
    Some(match value.to_str() {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(value.as_bytes()),
    })
}

/// The first [`MAX_HEADER_TEXT`] characters of a header's text. A value of no more bytes than
/// that, which is nearly every one, is whole without counting its characters.
pub(super) fn bounded(value: &str) -> &str {
    if value.len() <= MAX_HEADER_TEXT {
        return value;
    }
    match value.char_indices().nth(MAX_HEADER_TEXT) {
        Some((cut, _)) => &value[..cut],
        None => value,
    }
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderValue, REFERER, USER_AGENT};
    use actix_web::test::TestRequest;

    use super::{MAX_HEADER_TEXT, agent, header_text};

    fn with_agent(value: &[u8]) -> actix_web::HttpRequest {
        let value = HeaderValue::from_bytes(value).expect("a value");
        TestRequest::default()
            .insert_header((USER_AGENT, value))
            .to_http_request()
    }

    #[test]
    fn whatsapp_previews_are_bots_in_every_form() {
        for preview in [
            "WhatsApp/2.21.4.22 A",
            "WhatsApp/2.23.20.0",
            "WhatsApp/2.23.20.0 i",
            "WhatsApp/2",
        ] {
            assert!(agent(&with_agent(preview.as_bytes())).bot, "{preview}");
        }
        // A browser that names WhatsApp further on is not its preview.
        let browser = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like \
                       Gecko) Chrome/126.0.0.0 Mobile Safari/537.36 WhatsApp/2.24.1";
        assert!(!agent(&with_agent(browser.as_bytes())).bot);
    }

    #[test]
    fn clicks_of_a_known_agent_share_its_text_and_verdict() {
        let firefox = b"Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0";
        let first = agent(&with_agent(firefox));
        let again = agent(&with_agent(firefox));
        assert_eq!(
            (first.text.as_deref(), first.bot),
            (Some(std::str::from_utf8(firefox).unwrap()), false)
        );
        assert!(
            std::sync::Arc::ptr_eq(&first.text.unwrap(), &again.text.unwrap()),
            "one text, shared"
        );

        let slack = agent(&with_agent(
            b"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
        ));
        assert!(slack.bot);

        let long = "a".repeat(MAX_HEADER_TEXT) + "bcd";
        let kept = agent(&with_agent(long.as_bytes()));
        assert_eq!(kept.text.as_deref(), Some(&long[..MAX_HEADER_TEXT]));

        let app = agent(&with_agent("Mästare/2.1 (iPhone)".as_bytes()));
        assert_eq!(
            app.text.as_deref(),
            Some("Mästare/2.1 (iPhone)"),
            "UTF-8 kept"
        );
        let none = agent(&TestRequest::default().to_http_request());
        assert_eq!((none.text, none.bot), (None, false), "no agent");
    }

    #[test]
    fn header_text_keeps_a_bounded_prefix_of_its_characters() {
        let long = "a".repeat(MAX_HEADER_TEXT) + "bcd";
        let req = TestRequest::default()
            .insert_header((USER_AGENT, long.as_str()))
            .insert_header((
                REFERER,
                HeaderValue::from_bytes("https://bücher.example/ä".as_bytes()).expect("a value"),
            ))
            .to_http_request();
        assert_eq!(
            header_text(&req, USER_AGENT),
            Some("a".repeat(MAX_HEADER_TEXT))
        );
        assert_eq!(
            header_text(&req, REFERER).as_deref(),
            Some("https://bücher.example/ä"),
            "UTF-8 as it is"
        );

        let accents = "é".repeat(MAX_HEADER_TEXT + 1);
        let latin1 = TestRequest::default()
            .insert_header((
                USER_AGENT,
                HeaderValue::from_bytes(accents.as_bytes()).unwrap(),
            ))
            .insert_header((
                REFERER,
                HeaderValue::from_bytes(b"caf\xe9").expect("a value"),
            ))
            .to_http_request();
        assert_eq!(
            header_text(&latin1, USER_AGENT),
            Some("é".repeat(MAX_HEADER_TEXT)),
            "cut on a character, counted in characters"
        );
        assert_eq!(
            header_text(&latin1, REFERER).as_deref(),
            Some("caf\u{FFFD}"),
            "a byte that is not UTF-8 replaced"
        );

        let short = TestRequest::default()
            .insert_header((USER_AGENT, "curl/8.5"))
            .to_http_request();
        assert_eq!(header_text(&short, USER_AGENT).as_deref(), Some("curl/8.5"));
        assert_eq!(header_text(&short, REFERER), None);
    }
}
