//! What a request's headers ask of the answer's form: the media types `Accept` takes, and whether
//! `If-None-Match` already holds the answer's tag. The routes that answer in more than one form
//! (a QR code as an image or JSON, an expired link as a page or JSON) and the ones that answer
//! 304 decide with these.

use actix_web::HttpRequest;
use actix_web::http::header::{self, Accept, Header, Quality};
use actix_web::mime::Mime;

/// The highest q-value `Accept` gives a media type `matches` takes (RFC 9110: `q=0` is "not
/// acceptable", types compare in any case); zero without an `Accept`, or with one that does not
/// parse.
pub(crate) fn accepted(req: &HttpRequest, matches: impl Fn(&Mime) -> bool) -> Quality {
    let Ok(accept) = Accept::parse(req) else {
        return Quality::ZERO;
    };
    (accept.iter().filter(|item| matches(&item.item)))
        .map(|item| item.quality)
        .max()
        .unwrap_or(Quality::ZERO)
}

/// `application/json`, in any case and with any parameters.
pub(crate) fn is_json(mime: &Mime) -> bool {
    mime.essence_str() == "application/json"
}

/// Whether `If-None-Match` names `tag`, by the weak comparison RFC 9110 prescribes for it: a
/// proxy that compresses may have weakened the tag (`W/"…"`).
pub(crate) fn matches_etag(req: &HttpRequest, tag: &str) -> bool {
    fn opaque(t: &str) -> &str {
        t.strip_prefix("W/").unwrap_or(t)
    }
    let tag = opaque(tag);
    req.headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .map(|t| t.trim())
                .any(|t| t == "*" || opaque(t) == tag)
        })
}
