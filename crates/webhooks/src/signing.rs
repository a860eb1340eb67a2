//! Standard Webhooks signatures (<https://www.standardwebhooks.com/>): what the sender puts in
//! `webhook-signature`, and how a receiver checks it.
//!
//! The signed content is `{webhook-id}.{webhook-timestamp}.{body}`, the MAC is HMAC-SHA256 keyed
//! with the secret's decoded bytes ([`WebhookSecret::key_bytes`]), and the header carries
//! `v1,<base64 of the MAC>`. Receivers may see several space-separated signatures during a secret
//! rotation; one match is enough.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use shortlink_domain::WebhookSecret;

/// The message id header: the same on every attempt of one event, so receivers de-duplicate by it.
pub const HEADER_ID: &str = "webhook-id";
/// The header with the unix time (seconds) at which the attempt was signed.
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// The header with one or more space-separated `v1,<base64>` signatures.
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// How far a signature's timestamp may be from the receiver's clock, either way, by default:
/// five minutes, as the Standard Webhooks libraries use. Limits how long a captured request can be
/// replayed.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5 * 60);

const VERSION: &str = "v1";

type HmacSha256 = Hmac<Sha256>;

/// Why a delivery does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// One of the three headers is absent (or not visible ASCII text).
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// `webhook-timestamp` is not an integer number of seconds.
    #[error("webhook-timestamp is not a unix time in seconds")]
    BadTimestamp,
    /// The timestamp is further in the past than the tolerance: possibly a replay.
    #[error("webhook-timestamp is too old")]
    TooOld,
    /// The timestamp is further in the future than the tolerance.
    #[error("webhook-timestamp is too far in the future")]
    TooNew,
    /// No `v1` signature in `webhook-signature` matches the body and the secret.
    #[error("no signature matches")]
    NoMatchingSignature,
}

/// Where [`verify`] reads the three headers from. Implemented for [`http::HeaderMap`] (the map
/// reqwest, axum and hyper use) and for [`SignatureHeaders`], which any other framework can fill.
pub trait HeaderSource {
    /// The value of the header `name` (given in lower case), if present and text.
    fn header(&self, name: &str) -> Option<&str>;
}

impl HeaderSource for http::HeaderMap {
    fn header(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The three Standard Webhooks header values, for frameworks whose header map is not
/// [`http::HeaderMap`] (actix-web, for one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignatureHeaders<'a> {
    /// `webhook-id`.
    pub id: &'a str,
    /// `webhook-timestamp`.
    pub timestamp: &'a str,
    /// `webhook-signature`.
    pub signature: &'a str,
}

impl HeaderSource for SignatureHeaders<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        match name {
            HEADER_ID => Some(self.id),
            HEADER_TIMESTAMP => Some(self.timestamp),
            HEADER_SIGNATURE => Some(self.signature),
            _ => None,
        }
    }
}

fn mac(secret: &WebhookSecret, msg_id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
    let mut mac =
        HmacSha256::new_from_slice(&secret.key_bytes()).expect("HMAC accepts keys of any length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `webhook-signature` value for one attempt: `v1,` + base64 of HMAC-SHA256 over
/// `{msg_id}.{timestamp}.{body}`, keyed with the secret's decoded bytes.
///
/// ```
/// use shortlink_domain::WebhookSecret;
///
/// let secret = WebhookSecret::from_stored("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into());
/// let sig = shortlink_webhooks::sign(
///     &secret,
///     "msg_p5jXN8AQM9LWM0D4loKWxJek",
///     1614265330,
///     br#"{"test": 2432232314}"#,
/// );
/// assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
/// ```
pub fn sign(secret: &WebhookSecret, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let tag = mac(secret, msg_id, timestamp, body).finalize().into_bytes();
    format!("{VERSION},{}", STANDARD.encode(tag))
}

/// Checks a received delivery against the clock of this machine: the headers are present, the
/// timestamp is within `tolerance` of now (use [`DEFAULT_TOLERANCE`]), and one of the `v1`
/// signatures matches `body` (the raw bytes received, before any JSON parsing).
///
/// ```
/// use shortlink_domain::WebhookSecret;
/// use shortlink_webhooks::{DEFAULT_TOLERANCE, SignatureHeaders, sign, verify};
///
/// let secret = WebhookSecret::generate();
/// let body = br#"{"type":"link.created"}"#;
/// let now = std::time::SystemTime::now()
///     .duration_since(std::time::UNIX_EPOCH)
///     .unwrap()
///     .as_secs() as i64;
/// let signature = sign(&secret, "msg_1", now, body);
/// let headers = SignatureHeaders {
///     id: "msg_1",
///     timestamp: &now.to_string(),
///     signature: &signature,
/// };
/// assert_eq!(verify(&secret, &headers, body, DEFAULT_TOLERANCE), Ok(()));
/// ```
pub fn verify<H: HeaderSource + ?Sized>(
    secret: &WebhookSecret,
    headers: &H,
    body: &[u8],
    tolerance: Duration,
) -> Result<(), VerifyError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    verify_at(secret, headers, body, tolerance, now)
}

/// [`verify`] with the receiver's clock given as `now` (unix seconds), for tests and replays of
/// recorded traffic.
pub fn verify_at<H: HeaderSource + ?Sized>(
    secret: &WebhookSecret,
    headers: &H,
    body: &[u8],
    tolerance: Duration,
    now: i64,
) -> Result<(), VerifyError> {
    let header = |name: &'static str| headers.header(name).ok_or(VerifyError::MissingHeader(name));
    let msg_id = header(HEADER_ID)?;
    let timestamp = header(HEADER_TIMESTAMP)?;
    let signatures = header(HEADER_SIGNATURE)?;

    let timestamp: i64 = timestamp.parse().map_err(|_| VerifyError::BadTimestamp)?;
    let tolerance = i64::try_from(tolerance.as_secs()).unwrap_or(i64::MAX);
    if now.saturating_sub(timestamp) > tolerance {
        return Err(VerifyError::TooOld);
    }
    if timestamp.saturating_sub(now) > tolerance {
        return Err(VerifyError::TooNew);
    }

    let expected = mac(secret, msg_id, timestamp, body);
    let matches = signatures
        .split(' ')
        .filter_map(|entry| entry.split_once(','))
        .filter(|(version, _)| *version == VERSION)
        .filter_map(|(_, b64)| STANDARD.decode(b64).ok())
        // `verify_slice` compares in constant time.
        .any(|tag| expected.clone().verify_slice(&tag).is_ok());
    if matches {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The test vector published with the Standard Webhooks specification.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn secret() -> WebhookSecret {
        WebhookSecret::from_stored(SECRET.into())
    }

    fn headers(signature: &str) -> SignatureHeaders<'_> {
        SignatureHeaders {
            id: MSG_ID,
            timestamp: "1614265330",
            signature,
        }
    }

    fn check(h: &SignatureHeaders<'_>, body: &[u8], now: i64) -> Result<(), VerifyError> {
        verify_at(&secret(), h, body, DEFAULT_TOLERANCE, now)
    }

    #[test]
    fn signs_the_published_test_vector() {
        assert_eq!(sign(&secret(), MSG_ID, TIMESTAMP, BODY), SIGNATURE);
    }

    #[test]
    fn verifies_the_published_test_vector() {
        assert_eq!(check(&headers(SIGNATURE), BODY, TIMESTAMP), Ok(()));
    }

    #[test]
    fn accepts_any_matching_entry_among_several() {
        let other = sign(&WebhookSecret::generate(), MSG_ID, TIMESTAMP, BODY);
        let several = format!("v1a,c29tZXRoaW5nIGVsc2U= {other} v1,!!notbase64 {SIGNATURE}");
        assert_eq!(check(&headers(&several), BODY, TIMESTAMP), Ok(()));
    }

    #[test]
    fn rejects_a_changed_body_id_or_secret() {
        assert_eq!(
            check(&headers(SIGNATURE), br#"{"test": 2432232315}"#, TIMESTAMP),
            Err(VerifyError::NoMatchingSignature)
        );
        let other_id = SignatureHeaders {
            id: "msg_other",
            ..headers(SIGNATURE)
        };
        assert_eq!(
            check(&other_id, BODY, TIMESTAMP),
            Err(VerifyError::NoMatchingSignature)
        );
        assert_eq!(
            verify_at(
                &WebhookSecret::generate(),
                &headers(SIGNATURE),
                BODY,
                DEFAULT_TOLERANCE,
                TIMESTAMP
            ),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn rejects_other_versions_and_truncated_signatures() {
        let v2 = SIGNATURE.replacen("v1,", "v2,", 1);
        assert_eq!(
            check(&headers(&v2), BODY, TIMESTAMP),
            Err(VerifyError::NoMatchingSignature)
        );
        let truncated = &SIGNATURE[..SIGNATURE.len() - 4];
        assert_eq!(
            check(&headers(truncated), BODY, TIMESTAMP),
            Err(VerifyError::NoMatchingSignature)
        );
        assert_eq!(
            check(&headers(""), BODY, TIMESTAMP),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn enforces_the_tolerance_both_ways() {
        let tol = 300;
        assert_eq!(check(&headers(SIGNATURE), BODY, TIMESTAMP + tol), Ok(()));
        assert_eq!(check(&headers(SIGNATURE), BODY, TIMESTAMP - tol), Ok(()));
        assert_eq!(
            check(&headers(SIGNATURE), BODY, TIMESTAMP + tol + 1),
            Err(VerifyError::TooOld)
        );
        assert_eq!(
            check(&headers(SIGNATURE), BODY, TIMESTAMP - tol - 1),
            Err(VerifyError::TooNew)
        );
    }

    #[test]
    fn rejects_timestamps_that_are_not_integers() {
        for bad in [
            "",
            "1614265330.5",
            "soon",
            "0x60376a72",
            "99999999999999999999",
        ] {
            let h = SignatureHeaders {
                timestamp: bad,
                ..headers(SIGNATURE)
            };
            assert_eq!(
                check(&h, BODY, TIMESTAMP),
                Err(VerifyError::BadTimestamp),
                "{bad}"
            );
        }
    }

    #[test]
    fn reads_an_http_header_map_and_names_what_is_missing() {
        let mut map = http::HeaderMap::new();
        assert_eq!(check_map(&map), Err(VerifyError::MissingHeader(HEADER_ID)));
        map.insert(HEADER_ID, http::HeaderValue::from_static(MSG_ID));
        assert_eq!(
            check_map(&map),
            Err(VerifyError::MissingHeader(HEADER_TIMESTAMP))
        );
        map.insert(
            HEADER_TIMESTAMP,
            http::HeaderValue::from_static("1614265330"),
        );
        assert_eq!(
            check_map(&map),
            Err(VerifyError::MissingHeader(HEADER_SIGNATURE))
        );
        map.insert(HEADER_SIGNATURE, http::HeaderValue::from_static(SIGNATURE));
        assert_eq!(check_map(&map), Ok(()));
    }

    fn check_map(map: &http::HeaderMap) -> Result<(), VerifyError> {
        verify_at(&secret(), map, BODY, DEFAULT_TOLERANCE, TIMESTAMP)
    }
}
