//! Signatures checked against an independent implementation, the `standardwebhooks` crate.

use proptest::prelude::*;
use shortlink_domain::WebhookSecret;
use shortlink_webhooks::{
    DEFAULT_TOLERANCE, HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, VerifyError, sign, verify,
};

fn now() -> i64 {
    shortlink_domain::Timestamp::now().unix_seconds()
}

fn headers(id: &str, timestamp: i64, signature: &str) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    map.insert(HEADER_ID, id.parse().unwrap());
    map.insert(HEADER_TIMESTAMP, timestamp.to_string().parse().unwrap());
    map.insert(HEADER_SIGNATURE, signature.parse().unwrap());
    map
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn theirs_verifies_ours(id in "msg_[0-9A-Za-z]{1,40}", body in any::<String>()) {
        let secret = WebhookSecret::generate();
        let ts = now();
        let signature = sign(&secret, &id, ts, body.as_bytes());
        let theirs = standardwebhooks::Webhook::new(secret.expose()).unwrap();
        prop_assert!(theirs.verify(body.as_bytes(), &headers(&id, ts, &signature)).is_ok());
        // And not a different body.
        let other = format!("{body} ");
        prop_assert!(theirs.verify(other.as_bytes(), &headers(&id, ts, &signature)).is_err());
    }

    #[test]
    fn ours_verifies_theirs(id in "msg_[0-9A-Za-z]{1,40}", body in any::<String>()) {
        let secret = WebhookSecret::generate();
        let ts = now();
        let theirs = standardwebhooks::Webhook::new(secret.expose()).unwrap();
        let signature = theirs.sign(&id, ts, body.as_bytes()).unwrap();
        prop_assert_eq!(&signature, &sign(&secret, &id, ts, body.as_bytes()));
        let map = headers(&id, ts, &signature);
        prop_assert_eq!(verify(&secret, &map, body.as_bytes(), DEFAULT_TOLERANCE), Ok(()));
        prop_assert_eq!(
            verify(&WebhookSecret::generate(), &map, body.as_bytes(), DEFAULT_TOLERANCE),
            Err(VerifyError::NoMatchingSignature)
        );
    }
}

#[test]
fn both_reject_stale_timestamps() {
    let secret = WebhookSecret::generate();
    let ts = now() - 301;
    let signature = sign(&secret, "msg_1", ts, b"{}");
    let map = headers("msg_1", ts, &signature);
    assert_eq!(
        verify(&secret, &map, b"{}", DEFAULT_TOLERANCE),
        Err(VerifyError::TooOld)
    );
    let theirs = standardwebhooks::Webhook::new(secret.expose()).unwrap();
    assert!(theirs.verify(b"{}", &map).is_err());
}
