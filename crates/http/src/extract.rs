//! Extractors that turn a request into typed input or an [`ApiError`], never actix's own
//! plain-text errors.

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{FromRequest, HttpRequest};
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, FieldError};

/// How long a request body may take to arrive whole, by default: a client that trickles its
/// body (or stops sending it) holds a connection and a worker's attention no longer.
pub const REQUEST_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A JSON body: `Content-Type: application/json` (parameters allowed), at most 1 MiB,
/// deserialised with the path of the first offending field kept for `error.details`.
///
/// Extraction itself never fails: actix runs a handler's extractors side by side and answers
/// with whichever error comes first, and a bad body must not beat a missing API key (401 comes
/// before 400, and the failed authentication must be counted). The handler reads the outcome
/// with [`JsonBody::into_inner`] once [`crate::auth::Authenticated`] has succeeded.
#[derive(Debug)]
pub struct JsonBody<T> {
    parsed: Result<T, ApiError>,
    fingerprint: Option<String>,
}

impl<T> JsonBody<T> {
    /// The parsed body, or why it is not acceptable.
    pub fn into_inner(self) -> Result<T, ApiError> {
        self.parsed
    }

    /// What the request was (route and body bytes), hashed; only for requests that carry an
    /// `Idempotency-Key`, whose retries must be the same request.
    pub fn fingerprint(&self) -> Option<&str> {
        self.fingerprint.as_deref()
    }
}

/// What a request body is at its top. serde reads a struct from a JSON array too, its fields
/// taken by position (`["https://…","slug"]` would create a link), which no client means: a body
/// of the other shape is refused before it is read.
pub trait BodyShape {
    /// A list (the bulk creation) rather than one object.
    const LIST: bool = false;
}

/// The bulk creation's items, each parsed on its own later.
impl BodyShape for Vec<Box<serde_json::value::RawValue>> {
    const LIST: bool = true;
}

impl<T: DeserializeOwned + BodyShape + 'static> FromRequest for JsonBody<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let json = has_json_content_type(req);
        // The route's pattern, not the path as sent: `/api/v1/%6cinks` is the same route.
        let route = crate::idempotency::has_key(req)
            .then(|| req.match_pattern().unwrap_or_else(|| req.path().to_owned()));
        let bytes = Bytes::from_request(req, payload);
        let state = req
            .app_data::<actix_web::web::Data<crate::AppState>>()
            .cloned();
        let timeout = state.as_ref().map_or(REQUEST_BODY_TIMEOUT, |state| {
            state.settings.request_body_timeout
        });
        let key = req
            .headers()
            .get(crate::idempotency::HEADER)
            .map(|key| key.as_bytes().to_vec())
            .unwrap_or_default();
        Box::pin(async move {
            // The body is read even when the content type is wrong, so the connection stays
            // usable for the next request.
            let bytes = match tokio::time::timeout(timeout, bytes).await {
                Ok(bytes) => bytes.map_err(body_error),
                Err(_) => Err(ApiError::RequestTimeout(timeout.as_secs())),
            };
            let fingerprint = match (&route, &bytes, &state) {
                (Some(route), Ok(bytes), Some(state)) => Some(
                    crate::idempotency::stored_fingerprint(&state.service, route, &key, bytes)
                        .await?,
                ),
                _ => None,
            };
            let parsed = if json {
                bytes.and_then(|bytes| parse_body(&bytes))
            } else {
                Err(ApiError::field(
                    "Content-Type",
                    "Content-Type must be application/json",
                ))
            };
            Ok(JsonBody {
                parsed,
                fingerprint,
            })
        })
    }
}

fn has_json_content_type(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

fn body_error(e: actix_web::Error) -> ApiError {
    use actix_web::error::PayloadError;
    match e.as_error::<PayloadError>() {
        Some(PayloadError::Overflow) => ApiError::PayloadTooLarge,
        _ => match e.as_response_error().status_code().as_u16() {
            413 => ApiError::PayloadTooLarge,
            _ => ApiError::invalid("the request body could not be read"),
        },
    }
}

/// A request body of `T`'s shape ([`BodyShape`]), deserialised as [`parse_json`] does.
fn parse_body<T: DeserializeOwned + BodyShape>(bytes: &[u8]) -> Result<T, ApiError> {
    let (opener, shape) = match T::LIST {
        true => (b'[', "an array"),
        false => (b'{', "an object"),
    };
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(&first) if first != opener => Err(ApiError::invalid(format!(
            "the request body must be {shape} in JSON"
        ))),
        _ => parse_json(bytes),
    }
}

/// Deserialises JSON, reporting where it failed: `destination`, `[2].customSlug`, … . Anything
/// but whitespace after the value makes the body invalid, as a value followed by more is not one
/// JSON document.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = deserialize(&mut de, describe)?;
    de.end().map_err(|e| ApiError::invalid(describe(&e)))?;
    Ok(value)
}

/// Runs a deserialiser through `serde_path_to_error` and turns its error into a validation
/// error naming the field: the failing path, or the unknown or missing field serde names.
fn deserialize<'de, D, T>(de: D, describe: impl Fn(&D::Error) -> String) -> Result<T, ApiError>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    serde_path_to_error::deserialize(de).map_err(|e| {
        let message = in_json_terms(describe(e.inner()));
        let text = e.inner().to_string();
        let path = e.path().to_string();
        let field = unknown_field(&text)
            .or_else(|| missing_field(&text))
            .or_else(|| duplicate_field(&text))
            .map(|f| join(&path, f))
            .unwrap_or(if path == "." { String::new() } else { path });
        if field.is_empty() {
            ApiError::invalid(message)
        } else {
            ApiError::Validation {
                message: message.clone(),
                details: vec![FieldError::new(field, message)],
            }
        }
    })
}

/// `path.field`, unless the path already ends at the field (serde_path_to_error includes an
/// unknown field in the path, but not a missing one).
fn join(path: &str, field: &str) -> String {
    if path == "." || path == field {
        field.to_owned()
    } else if path.ends_with(&format!(".{field}")) {
        path.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

/// serde's message without the "at line 1 column 7" suffix, which means nothing to a client
/// that sent its body in one line.
fn describe(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof => "request body is not valid JSON".to_owned(),
        Category::Io | Category::Data => {
            let text = e.to_string();
            match text.rfind(" at line ") {
                Some(i) => text[..i].to_owned(),
                None => text,
            }
        }
    }
}

/// serde's message with the Rust integer type it expected (`expected u16`) said as a client
/// of a JSON API reads it: the integers allowed.
fn in_json_terms(message: String) -> String {
    let Some((head, expected)) = message.rsplit_once(", expected ") else {
        return message;
    };
    let range = |min: i128, max: i128| format!("an integer from {min} to {max}");
    let integers = match expected {
        "u8" => range(0, u8::MAX.into()),
        "u16" => range(0, u16::MAX.into()),
        "u32" => range(0, u32::MAX.into()),
        "u64" | "usize" => range(0, u64::MAX.into()),
        "i8" => range(i8::MIN.into(), i8::MAX.into()),
        "i16" => range(i16::MIN.into(), i16::MAX.into()),
        "i32" => range(i32::MIN.into(), i32::MAX.into()),
        "i64" | "isize" => range(i64::MIN.into(), i64::MAX.into()),
        _ => return message,
    };
    format!("{head}, expected {integers}")
}

fn backticked<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    let rest = rest.strip_prefix('`')?;
    rest.split('`').next()
}

fn unknown_field(message: &str) -> Option<&str> {
    backticked(message, "unknown field ")
}

fn missing_field(message: &str) -> Option<&str> {
    backticked(message, "missing field ")
}

/// A query parameter given twice (`?limit=5&limit=500`): which one was meant is not ours to guess.
fn duplicate_field(message: &str) -> Option<&str> {
    backticked(message, "duplicate field ")
}

/// The query string, deserialised; a bad parameter is a 400 naming it. Like [`JsonBody`], the
/// outcome is read by the handler ([`QueryParams::into_inner`]), after authentication.
#[derive(Debug)]
pub struct QueryParams<T>(Result<T, ApiError>);

impl<T> QueryParams<T> {
    /// The parsed query, or why it is not acceptable.
    pub fn into_inner(self) -> Result<T, ApiError> {
        self.0
    }
}

impl<T: DeserializeOwned> FromRequest for QueryParams<T> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(Ok(QueryParams(parse_query(req.query_string()))))
    }
}

/// Deserialises a query string, naming the parameter that failed.
pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let pairs = form_urlencoded::parse(query.as_bytes());
    deserialize(serde_urlencoded::Deserializer::new(pairs), |e| {
        e.to_string()
    })
}

/// The most items a page holds: `limit` of the lists and of the analytics breakdowns.
pub const MAX_PAGE_LIMIT: i64 = 100;

/// The items a page of a list (links, deliveries) holds unless `limit` says otherwise.
pub const DEFAULT_PAGE_LIMIT: i64 = 20;

/// Longest text a filter or a search takes, in characters: the longest value a breakdown lists,
/// a referrer host, so that every entry can be picked as a filter.
pub const MAX_FILTER_CHARS: usize = shortlink_analytics::MAX_REFERRER_HOST;

/// A filter's or a search's text (`name` the parameter): 1 to [`MAX_FILTER_CHARS`] characters,
/// none a control character (no value a link or a click holds has one; PostgreSQL refuses text
/// with a NUL, and SQLite would end a pattern at it and match everything).
pub fn filter_text(name: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        Some(v) if v.is_empty() || v.chars().count() > MAX_FILTER_CHARS => Err(ApiError::field(
            name,
            format!("{name} must be 1 to {MAX_FILTER_CHARS} characters"),
        )),
        Some(v) if v.chars().any(char::is_control) => Err(ApiError::field(
            name,
            format!("{name} must not contain control characters"),
        )),
        other => Ok(other),
    }
}

/// A page size from a query (`#[serde(default, deserialize_with = "page_limit")]`): 1 to
/// [`MAX_PAGE_LIMIT`]. Anything else, a word as much as a number out of range, is refused
/// saying what is allowed (the query parser's own text, "invalid digit found in string", says
/// nothing of it).
pub fn page_limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
    match text.parse::<i64>() {
        Ok(limit) if (1..=MAX_PAGE_LIMIT).contains(&limit) => Ok(Some(limit)),
        _ => Err(serde::de::Error::custom(format!(
            "limit must be an integer from 1 to {MAX_PAGE_LIMIT}"
        ))),
    }
}

/// The query of an endpoint that takes no parameters: any is a 400 naming it, so a client that
/// believes it filters or pages (`?limit=`, `?cursor=`) learns that it does not.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[expect(dead_code, reason = "fields exist to be deserialised")]
    struct Item {
        destination: String,
        custom_slug: Option<String>,
    }

    impl BodyShape for Item {}

    fn details(e: ApiError) -> Vec<String> {
        match e {
            ApiError::Validation { details, .. } => details.into_iter().map(|d| d.field).collect(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn names_the_offending_field() {
        let e = parse_json::<Item>(br#"{"destination":"x","customslug":"y"}"#).unwrap_err();
        assert_eq!(details(e), vec!["customslug"]);
        let e = parse_json::<Item>(br#"{"customSlug":"y"}"#).unwrap_err();
        assert_eq!(details(e), vec!["destination"]);
        let e = parse_json::<Item>(br#"{"destination":5}"#).unwrap_err();
        assert_eq!(details(e), vec!["destination"]);
        let e = parse_json::<Vec<Item>>(br#"[{"destination":"x"},{"destination":"y","nope":1}]"#)
            .unwrap_err();
        assert_eq!(details(e), vec!["[1].nope"]);
        let e = parse_json::<Item>(br#"{"destination":"x"} {"destination":"y"}"#).unwrap_err();
        assert!(
            matches!(e, ApiError::Validation { ref message, .. } if message == "request body is not valid JSON")
        );
        let e = parse_body::<Item>(br#" ["x","y"]"#).unwrap_err();
        assert!(
            matches!(e, ApiError::Validation { ref message, .. } if message == "the request body must be an object in JSON")
        );
        let e = parse_query::<Item>("destination=x&destination=y").unwrap_err();
        assert_eq!(details(e), vec!["destination"]);
        #[derive(Debug, Deserialize)]
        struct Status {
            #[expect(dead_code, reason = "the field exists to be deserialised")]
            status: u16,
        }
        for (body, said) in [
            (&br#"{"status": 302.0}"#[..], "floating point `302.0`"),
            (br#"{"status": -1}"#, "integer `-1`"),
            (br#"{"status": "302"}"#, "string \"302\""),
        ] {
            let e = parse_json::<Status>(body).unwrap_err();
            let ApiError::Validation { message, .. } = e else {
                panic!("a validation error")
            };
            assert!(message.contains(said), "{message}");
            assert!(
                message.ends_with(", expected an integer from 0 to 65535"),
                "{message}"
            );
        }
        let e = parse_json::<Item>(b"{not json").unwrap_err();
        assert!(
            matches!(e, ApiError::Validation { ref message, .. } if message == "request body is not valid JSON")
        );
    }

    #[test]
    fn a_page_limit_says_what_is_allowed() {
        #[derive(Debug, Deserialize)]
        struct Page {
            #[serde(default, deserialize_with = "page_limit")]
            limit: Option<i64>,
        }
        let page = parse_query::<Page>("").expect("no limit is the default");
        assert_eq!(page.limit, None);
        let page = parse_query::<Page>("limit=100").expect("a limit in range");
        assert_eq!(page.limit, Some(100));
        for query in [
            "limit=abc",
            "limit=",
            "limit=0",
            "limit=101",
            "limit=-1",
            "limit=1.5",
        ] {
            let e = parse_query::<Page>(query).expect_err("the limit is refused");
            let ApiError::Validation { message, details } = e else {
                panic!("a validation error for {query}")
            };
            assert_eq!(message, "limit must be an integer from 1 to 100", "{query}");
            assert_eq!(details.len(), 1, "{query}");
            assert_eq!(details[0].field, "limit", "{query}");
        }
    }
}
