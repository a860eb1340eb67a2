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
fn accepted(req: &HttpRequest, matches: impl Fn(&Mime) -> bool) -> Quality {
    let Ok(accept) = Accept::parse(req) else {
        return Quality::ZERO;
    };
    (accept.iter().filter(|item| matches(&item.item)))
        .map(|item| item.quality)
        .max()
        .unwrap_or(Quality::ZERO)
}

/// `application/json`, in any case and with any parameters.
fn is_json(mime: &Mime) -> bool {
    mime.essence_str() == "application/json"
}

/// Whether the client asked for JSON rather than a page: `application/json` acceptable and
/// `text/html` not (a browser accepts both, through `*/*`, and gets the page).
pub(crate) fn prefers_json_to_html(req: &HttpRequest) -> bool {
    let html = |m: &Mime| m.essence_str() == "text/html";
    accepted(req, is_json) > Quality::ZERO && accepted(req, html) == Quality::ZERO
}

/// Whether the client's `Accept` prefers JSON to the image of type `image`: `application/json`
/// acceptable and ranked no lower than that type or `image/*`. An `*/*` beside it still means
/// JSON, as `application/json, */*` from most HTTP libraries does.
pub(crate) fn prefers_json_to_image(req: &HttpRequest, image: &str) -> bool {
    use actix_web::mime;
    let json = accepted(req, is_json);
    let picture = accepted(req, |m| {
        m.type_() == mime::IMAGE && (m.subtype() == mime::STAR || m.essence_str() == image)
    });
    json > Quality::ZERO && json >= picture
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
