//! Webhook endpoints, their secrets and targets, and the deliveries of events to them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use url::{Host, Url};

use crate::destination::names_its_host;
use crate::{EventKind, MessageId, Timestamp, WebhookId, WorkspaceId};

/// An endpoint is disabled after this many deliveries in a row end `failed`.
pub const MAX_CONSECUTIVE_FAILURES: i32 = 20;

/// Most webhook endpoints a workspace may have, enabled or disabled: each event is sent to every
/// one subscribed, so without a bound one workspace could turn each of its clicks into any number
/// of requests to one URL. Storage counts them under the workspace's row lock.
pub const MAX_WEBHOOKS: i64 = 25;

const SECRET_PREFIX: &str = "whsec_";

/// A webhook signing secret: `whsec_` + base64 of 32 random bytes. Shown once, at creation;
/// does not print itself through `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    /// A new random secret.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)))
    }

    /// Rebuilds a secret read back from storage.
    pub fn from_stored(s: String) -> Self {
        Self(s)
    }

    /// The secret text (`whsec_…`).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The key bytes the HMAC is keyed with: the base64 after `whsec_`, decoded. A secret that is
    /// not valid base64 is used as raw bytes, as the Standard Webhooks libraries do not agree there.
    pub fn key_bytes(&self) -> Vec<u8> {
        let b64 = self.0.strip_prefix(SECRET_PREFIX).unwrap_or(&self.0);
        STANDARD
            .decode(b64)
            .unwrap_or_else(|_| b64.as_bytes().to_vec())
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

/// Why a URL cannot receive webhooks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookTargetError {
    /// Not an absolute http(s) URL with a host, or too long.
    #[error("targetUrl must be an absolute http or https URL of at most 2048 characters")]
    NotHttpUrl,
    /// Whitespace or control characters.
    #[error("targetUrl must not contain whitespace or control characters")]
    Whitespace,
    /// Carries `user@` or `user:password@`: a secret that the API would show to every key of the
    /// workspace. Receivers authenticate deliveries by their signature.
    #[error("targetUrl must not contain credentials")]
    Credentials,
    /// Loopback, private, link-local, multicast or unspecified address (server-side request
    /// forgery guard).
    #[error(
        "targetUrl must not point at a loopback, private, link-local or otherwise non-public address"
    )]
    PrivateAddress,
}

/// A URL that may receive webhooks. The address check here covers IP literals and `localhost`;
/// names are resolved and checked again at each delivery, against DNS rebinding.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookTarget(Url);

impl WebhookTarget {
    /// Validates a target; `allow_private` lifts the address check (for tests and private
    /// networks).
    pub fn parse(s: &str, allow_private: bool) -> Result<Self, WebhookTargetError> {
        if s.chars().count() > 2048 {
            return Err(WebhookTargetError::NotHttpUrl);
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(WebhookTargetError::Whitespace);
        }
        if !names_its_host(s) {
            return Err(WebhookTargetError::NotHttpUrl);
        }
        let url = Url::parse(s).map_err(|_| WebhookTargetError::NotHttpUrl)?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(WebhookTargetError::NotHttpUrl);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(WebhookTargetError::Credentials);
        }
        if !allow_private {
            let public = match url.host() {
                Some(Host::Ipv4(ip)) => is_public_ip(IpAddr::V4(ip)),
                Some(Host::Ipv6(ip)) => is_public_ip(IpAddr::V6(ip)),
                Some(Host::Domain(d)) => {
                    let d = d.trim_end_matches('.');
                    !(d.eq_ignore_ascii_case("localhost")
                        || d.to_ascii_lowercase().ends_with(".localhost"))
                }
                None => false,
            };
            if !public {
                return Err(WebhookTargetError::PrivateAddress);
            }
        }
        Ok(Self(url))
    }

    /// Rebuilds a target read back from storage.
    pub fn from_trusted(s: &str) -> Option<Self> {
        Url::parse(s).ok().map(Self)
    }

    /// The URL.
    pub fn url(&self) -> &Url {
        &self.0
    }

    /// The URL as text, credentials included: what deliveries are sent to.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The URL as text without credentials, for showing. Targets registered before credentials
    /// were refused may still carry them.
    pub fn redacted(&self) -> String {
        let mut url = self.0.clone();
        // Only fails for URLs that cannot have credentials, which a target never is.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        String::from(url)
    }
}

impl fmt::Debug for WebhookTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_str(), f)
    }
}

/// Whether a webhook may be sent to `ip`: false for loopback, private (RFC 1918, unique local),
/// link-local, carrier-grade NAT, multicast, broadcast, documentation, benchmarking, reserved
/// and unspecified addresses (IPv6's NAT64, discard-only, Teredo and ORCHID prefixes among
/// them), and for IPv6 forms that embed such an IPv4 address.
pub fn is_public_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_unspecified()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
                || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
                || (a == 198 && (b == 18 || b == 19)) // benchmarking
                || a >= 240) // reserved
        }
        IpAddr::V6(v6) => {
            // Addresses that carry an IPv4 one are judged by it: mapped (::ffff:a.b.c.d),
            // compatible (::a.b.c.d, deprecated but still routed to it by some stacks) and 6to4
            // (2002:aabb:ccdd::/48).
            if let Some(v4) = v6.to_ipv4() {
                return is_public_ip(IpAddr::V4(v4));
            }
            let segments = v6.segments();
            let v4_in = |hi: u16, lo: u16| {
                is_public_ip(IpAddr::V4(Ipv4Addr::from(
                    (u32::from(hi) << 16) | u32::from(lo),
                )))
            };
            match segments {
                // 6to4 (2002:aabb:ccdd::/48).
                [0x2002, hi, lo, ..] => return v4_in(hi, lo),
                // IPv4-translated (::ffff:0:a.b.c.d, SIIT).
                [0, 0, 0, 0, 0xffff, 0, hi, lo] => return v4_in(hi, lo),
                _ => {}
            }
            let [seg0, seg1, seg2, seg3, ..] = segments;
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (seg0 & 0xfe00) == 0xfc00 // unique local
                || (seg0 & 0xffc0) == 0xfe80 // link-local
                || (seg0 & 0xffc0) == 0xfec0 // site-local (deprecated)
                || seg0 == 0x2001 && seg1 == 0x0db8 // documentation
                || seg0 == 0x3fff && seg1 < 0x1000 // documentation (3fff::/20)
                || seg0 == 0x0064 && seg1 == 0xff9b // NAT64, well-known and local-use
                || seg0 == 0x0100 && seg1 == 0 && seg2 == 0 && seg3 == 0 // discard-only
                || seg0 == 0x2001 && seg1 == 0 // Teredo (carries IPv4 addresses)
                || seg0 == 0x2001 && seg1 == 0x0002 && seg2 == 0 // benchmarking
                || seg0 == 0x2001 && (seg1 & 0xfff0) == 0x0020 // ORCHIDv2, not routed
                || seg0 == 0x2001 && (seg1 & 0xfff0) == 0x0010) // ORCHID (deprecated)
        }
    }
}

/// A registered webhook endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// `wh_<ulid>`.
    pub id: WebhookId,
    /// Only this workspace's events reach it.
    pub workspace_id: WorkspaceId,
    /// Where events are POSTed.
    pub target: WebhookTarget,
    /// The kinds it subscribes to; never empty.
    pub events: Vec<EventKind>,
    /// The signing secret.
    pub secret: WebhookSecret,
    /// When it was registered.
    pub created_at: Timestamp,
    /// Set once [`MAX_CONSECUTIVE_FAILURES`] deliveries in a row failed; no events reach it then.
    pub disabled_at: Option<Timestamp>,
    /// Deliveries in a row that ended `failed`.
    pub consecutive_failures: i32,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// Waiting for its first or next attempt.
    Pending,
    /// A receiver answered 2xx.
    Delivered,
    /// Every attempt of the retry schedule failed.
    Failed,
}

impl DeliveryState {
    /// The wire and storage name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    /// Parses a stored state name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            DeliveryState::Pending,
            DeliveryState::Delivered,
            DeliveryState::Failed,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
}

/// One event on its way to one webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The event's message id: the `webhook-id` header, the same on every attempt.
    pub event_id: MessageId,
    /// The receiving endpoint.
    pub webhook_id: WebhookId,
    /// The event's kind.
    pub event_type: EventKind,
    /// The exact JSON body that is signed and sent.
    pub payload: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// Attempts made so far.
    pub attempts: i32,
    /// When the next attempt is due (meaningful while pending).
    pub next_attempt_at: Timestamp,
    /// HTTP status of the last attempt, if a response came.
    pub last_status_code: Option<i32>,
    /// Why the last attempt failed without a response (timeout, connection refused, …).
    pub last_error: Option<String>,
    /// When the event was written.
    pub created_at: Timestamp,
    /// When the row last changed.
    pub updated_at: Timestamp,
}

/// Where a page of an endpoint's deliveries ends: the last delivery's creation time and event
/// id, the key they are listed by (newest first). Opaque to clients: the text is base64url.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryCursor {
    /// Unix milliseconds, as stored.
    created_at: i64,
    event_id: MessageId,
}

/// A cursor text that this service did not issue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cursor is not one this service issued")]
pub struct DeliveryCursorError;

impl DeliveryCursor {
    /// The cursor after `delivery`: the next page starts with the delivery listed after it.
    pub fn after(delivery: &Delivery) -> Self {
        Self {
            created_at: delivery.created_at.unix_millis(),
            event_id: delivery.event_id,
        }
    }

    /// Reads a cursor's text back: `<unix millis>.<event id>`, 1 to 15 digits and an event id as
    /// the service writes it (upper case, within a ULID's 128 bits). Every text of that shape is
    /// a position in the list, so the shape is the whole rule (the API documents it as a
    /// pattern, `^[0-9]{1,15}\.msg_[0-7][0-9A-HJKMNP-TV-Z]{25}$`).
    pub fn parse(s: &str) -> Result<Self, DeliveryCursorError> {
        let (millis, event_id) = s.split_once('.').ok_or(DeliveryCursorError)?;
        if !(1..=15).contains(&millis.len()) || !millis.bytes().all(|b| b.is_ascii_digit()) {
            return Err(DeliveryCursorError);
        }
        let id = MessageId::parse_as_written(event_id).map_err(|_| DeliveryCursorError)?;
        Ok(Self {
            created_at: millis.parse().map_err(|_| DeliveryCursorError)?,
            event_id: id,
        })
    }

    /// The last listed delivery's creation time, in Unix milliseconds.
    pub fn created_at_millis(&self) -> i64 {
        self.created_at
    }

    /// The last listed delivery's event id.
    pub fn event_id(&self) -> MessageId {
        self.event_id
    }
}

impl fmt::Display for DeliveryCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.created_at, self.event_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_cursors_round_trip_and_refuse_foreign_text() {
        let cursor = DeliveryCursor {
            created_at: 1_764_000_000_123,
            event_id: MessageId::generate(),
        };
        assert_eq!(DeliveryCursor::parse(&cursor.to_string()), Ok(cursor));
        let foreign = [
            String::new(),
            "msg_01JD0000000000000000000000".to_owned(),
            "not base64!".to_owned(),
            "123".to_owned(),
            ".msg_01JD0000000000000000000000".to_owned(),
            "x.msg_01JD0000000000000000000000".to_owned(),
            "-1.msg_01JD0000000000000000000000".to_owned(),
            "123.link_01JD0000000000000000000000".to_owned(),
            // Outside the documented pattern, though the numbers and the ULID parser take them.
            "9999999999999999.msg_01JD0000000000000000000000".to_owned(),
            "00000000000000000001.msg_01JD0000000000000000000000".to_owned(),
            "123.msg_01jd0000000000000000000000".to_owned(),
            "123.msg_8ZZZZZZZZZZZZZZZZZZZZZZZZZ".to_owned(),
        ];
        for s in foreign {
            assert_eq!(DeliveryCursor::parse(&s), Err(DeliveryCursorError), "{s}");
        }
    }

    #[test]
    fn targets_with_credentials_are_refused() {
        for s in [
            "https://user:pass@hooks.example.com/in",
            "https://user@hooks.example.com/in",
            "https://:pass@hooks.example.com/in",
        ] {
            assert_eq!(
                WebhookTarget::parse(s, true),
                Err(WebhookTargetError::Credentials),
                "{s}"
            );
        }
        assert!(WebhookTarget::parse("https://hooks.example.com/in", false).is_ok());
    }

    #[test]
    fn targets_a_parser_would_repair_into_another_host_are_refused() {
        for s in [
            "https:///in",
            "https:hooks.example.com/in",
            "https:\\\\hooks.example.com",
        ] {
            assert_eq!(
                WebhookTarget::parse(s, true),
                Err(WebhookTargetError::NotHttpUrl),
                "{s}"
            );
        }
    }

    #[test]
    fn addresses_carrying_a_private_ipv4_one_are_private() {
        let public = |s: &str| is_public_ip(s.parse().unwrap());
        for private in [
            "127.0.0.1",
            "::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "::10.0.0.1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "fd00::1",
            "::ffff:0:10.0.0.1",
            "64:ff9b:1::a00:1",
            "2001:2::1",
            "100::1",
            "2001::1",
            "2001:20::1",
            "2001:10::1",
            "3fff::1",
        ] {
            assert!(!public(private), "{private}");
        }
        for address in [
            "8.8.8.8",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
            "2606:4700::1111",
            "::ffff:0:8.8.8.8",
            "2001:4860:4860::8888",
        ] {
            assert!(public(address), "{address}");
        }
        assert_eq!(
            WebhookTarget::parse("http://[::127.0.0.1]/", false),
            Err(WebhookTargetError::PrivateAddress)
        );
    }

    #[test]
    fn a_stored_target_with_credentials_is_shown_without_them() {
        let t = WebhookTarget::from_trusted("https://user:pass@hooks.example.com/in?a=1").unwrap();
        assert_eq!(t.redacted(), "https://hooks.example.com/in?a=1");
        assert_eq!(t.as_str(), "https://user:pass@hooks.example.com/in?a=1");
    }
}
