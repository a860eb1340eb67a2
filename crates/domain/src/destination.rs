//! The one place that says what a link may point at.

use std::fmt;

use url::Url;

use crate::BaseUrl;

/// Longest accepted destination, in characters, both as sent and as stored (normalised), so a
/// `Location` header never exceeds it.
pub const MAX_DESTINATION_LEN: usize = 8192;

/// Why a string is not an acceptable destination.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// Missing or empty.
    #[error("destination is required")]
    Empty,
    /// Longer than [`MAX_DESTINATION_LEN`] as sent or once normalised (percent-encoding a
    /// non-ASCII character takes up to 12 characters).
    #[error("destination must be at most {MAX_DESTINATION_LEN} characters, once percent-encoded")]
    TooLong,
    /// Whitespace or a control character somewhere in the string. Checked before parsing because
    /// WHATWG parsers silently drop tab, CR and LF, which would hide header-injection attempts.
    #[error("destination must not contain whitespace or control characters")]
    Whitespace,
    /// Not an absolute http(s) URL with a host.
    #[error("destination must be an absolute http or https URL")]
    NotHttpUrl,
    /// Carries `user:password@`.
    #[error("destination must not contain credentials")]
    Credentials,
    /// Points at this service's own short domain, which would loop.
    #[error("destination must not point at this service's own short domain")]
    Loop,
}

/// An absolute http(s) URL with a host, without credentials, that does not point back at the
/// short domain. Held in the normalised form of the WHATWG URL standard (punycode host,
/// percent-encoded path), so it is always a valid `Location` header value.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Destination(String);

impl Destination {
    /// Validates `s` as a destination for links under `base`.
    pub fn parse(s: &str, base: &BaseUrl) -> Result<Self, DestinationError> {
        if s.is_empty() {
            return Err(DestinationError::Empty);
        }
        if s.chars().count() > MAX_DESTINATION_LEN {
            return Err(DestinationError::TooLong);
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(DestinationError::Whitespace);
        }
        if !names_its_host(s) {
            return Err(DestinationError::NotHttpUrl);
        }
        let url = Url::parse(s).map_err(|_| DestinationError::NotHttpUrl)?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
            return Err(DestinationError::NotHttpUrl);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(DestinationError::Credentials);
        }
        if url.host_str().is_some_and(|h| base.is_host(h)) {
            return Err(DestinationError::Loop);
        }
        // Checked again on the stored form, which becomes the `Location` header: percent-encoding
        // multiplies a non-ASCII character up to twelvefold. The serialisation is ASCII, so its
        // length in bytes is its length in characters.
        let normalised = String::from(url);
        if normalised.len() > MAX_DESTINATION_LEN {
            return Err(DestinationError::TooLong);
        }
        Ok(Self(normalised))
    }

    /// Rebuilds a destination read back from storage, where it was validated on the way in.
    pub fn from_trusted(s: String) -> Self {
        Self(s)
    }

    /// The URL as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The redirect target for a request whose own query string is `query` (without `?`):
    /// the destination's parameters first, then the request's, before any fragment. A query that
    /// would take the target past [`MAX_DESTINATION_LEN`] is left off: the visitor still gets the
    /// link's destination, and a `Location` header never exceeds the bound.
    pub fn with_query(&self, query: &str) -> String {
        if query.is_empty() || self.0.len() + 1 + query.len() > MAX_DESTINATION_LEN {
            return self.0.clone();
        }
        let (head, fragment) = match self.0.find('#') {
            Some(i) => self.0.split_at(i),
            None => (self.0.as_str(), ""),
        };
        let sep = match head.find('?') {
            Some(i) if i + 1 == head.len() => "",
            Some(_) => "&",
            None => "?",
        };
        let mut out = String::with_capacity(self.0.len() + query.len() + 1);
        out.push_str(head);
        out.push_str(sep);
        out.push_str(query);
        out.push_str(fragment);
        out
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `s` writes its scheme's `//` with a host right after it. A WHATWG parser repairs
/// `http:///path`, `https:example.com` and `https:\\example.com` into URLs with a host that was
/// not written as one (`http://path/`): such text is refused rather than sent somewhere else.
pub(crate) fn names_its_host(s: &str) -> bool {
    s.split_once(':')
        .and_then(|(_, rest)| rest.strip_prefix("//"))
        .is_some_and(|rest| !rest.is_empty() && !rest.starts_with(['/', '\\', '?', '#']))
}

impl fmt::Debug for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn base() -> BaseUrl {
        BaseUrl::parse("https://sho.rt").unwrap()
    }

    #[test]
    fn accepts_http_and_https() {
        let d = Destination::parse("https://example.com/page?a=1", &base()).unwrap();
        assert_eq!(d.as_str(), "https://example.com/page?a=1");
        assert_eq!(
            Destination::parse("http://EXAMPLE.com", &base())
                .unwrap()
                .as_str(),
            "http://example.com/"
        );
    }

    #[test]
    fn rejects_what_the_contract_rejects() {
        let b = base();
        assert_eq!(Destination::parse("", &b), Err(DestinationError::Empty));
        assert_eq!(
            Destination::parse("example.com", &b),
            Err(DestinationError::NotHttpUrl)
        );
        assert_eq!(
            Destination::parse("ftp://example.com", &b),
            Err(DestinationError::NotHttpUrl)
        );
        assert_eq!(
            Destination::parse("javascript:alert(1)", &b),
            Err(DestinationError::NotHttpUrl)
        );
        assert_eq!(
            Destination::parse("https://a b.com", &b),
            Err(DestinationError::Whitespace)
        );
        assert_eq!(
            Destination::parse("https://x.com/\r\nSet-Cookie:a", &b),
            Err(DestinationError::Whitespace)
        );
        assert_eq!(
            Destination::parse("https://x.com/\t", &b),
            Err(DestinationError::Whitespace)
        );
        assert_eq!(
            Destination::parse("https://u:p@x.com", &b),
            Err(DestinationError::Credentials)
        );
        assert_eq!(
            Destination::parse("https://sho.rt/abc", &b),
            Err(DestinationError::Loop)
        );
        assert_eq!(
            Destination::parse("https://SHO.RT:443/abc", &b),
            Err(DestinationError::Loop)
        );
        // What a WHATWG parser would repair into another host than the one written.
        for repaired in [
            "http:///path",
            "https:example.com/a",
            "https:/example.com/a",
            "https:\\\\example.com\\a",
            "https://\\example.com",
            "https://?q",
        ] {
            assert_eq!(
                Destination::parse(repaired, &b),
                Err(DestinationError::NotHttpUrl),
                "{repaired}"
            );
        }
        assert_eq!(
            Destination::parse("HTTPS://Example.COM/A", &b)
                .unwrap()
                .as_str(),
            "https://example.com/A"
        );
        let long = format!("https://x.com/{}", "a".repeat(MAX_DESTINATION_LEN));
        assert_eq!(
            Destination::parse(&long, &b),
            Err(DestinationError::TooLong)
        );
    }

    #[test]
    fn the_bound_applies_to_the_normalised_form() {
        let b = base();
        // 8,020 characters as sent, 48,020 once percent-encoded.
        let sent = format!("https://example.com/{}", "é".repeat(8000));
        assert_eq!(
            Destination::parse(&sent, &b),
            Err(DestinationError::TooLong)
        );
        // Exactly at the bound once encoded: 20 + 6 × 1362 = 8,192.
        let at_bound = format!("https://example.com/{}", "é".repeat(1362));
        let d = Destination::parse(&at_bound, &b).unwrap();
        assert_eq!(d.as_str().len(), MAX_DESTINATION_LEN);
        let over = format!("https://example.com/{}a", "é".repeat(1362));
        assert_eq!(
            Destination::parse(&over, &b),
            Err(DestinationError::TooLong)
        );
    }

    #[test]
    fn the_loop_check_compares_normalised_hosts_on_any_port() {
        let loops = [
            (
                "http://sho.rt",
                &[
                    "http://sho.rt/x",
                    "http://sho.rt./x",
                    "http://SHO.RT/x",
                    "http://sho.rt:443/x",
                    "https://sho.rt:8443/x",
                    "https://sho%2Ert/x",
                ][..],
            ),
            (
                "http://127.0.0.1:8080",
                &[
                    "http://[::ffff:127.0.0.1]:8080/x",
                    "http://[::FFFF:7f00:1]/x",
                    "http://0x7f.1/x",
                    "http://2130706433/x",
                ],
            ),
            (
                "https://bücher.example",
                &[
                    "https://BÜCHER.example/x",
                    "https://xn--bcher-kva.example./x",
                ],
            ),
        ];
        for (base, destinations) in loops {
            let base = BaseUrl::parse(base).unwrap();
            for s in destinations {
                assert_eq!(
                    Destination::parse(s, &base),
                    Err(DestinationError::Loop),
                    "{s}"
                );
            }
        }
        let b = BaseUrl::parse("http://sho.rt").unwrap();
        assert!(Destination::parse("http://sho.rt.example/x", &b).is_ok());
        let ip = BaseUrl::parse("http://127.0.0.1:8080").unwrap();
        assert!(Destination::parse("http://[::1]/x", &ip).is_ok());
    }

    #[test]
    fn merges_the_request_query_after_the_destinations_own() {
        let b = base();
        let d = |s| Destination::parse(s, &b).unwrap();
        assert_eq!(d("https://x.com/p").with_query(""), "https://x.com/p");
        assert_eq!(
            d("https://x.com/p").with_query("b=2"),
            "https://x.com/p?b=2"
        );
        assert_eq!(
            d("https://x.com/p?a=1").with_query("b=2"),
            "https://x.com/p?a=1&b=2"
        );
        assert_eq!(
            d("https://x.com/p?a=1#top").with_query("b=2"),
            "https://x.com/p?a=1&b=2#top"
        );
        assert_eq!(
            d("https://x.com/p?#top").with_query("b=2"),
            "https://x.com/p?b=2#top"
        );
        // Up to the bound, and not past it.
        let long = format!("https://x.com/{}", "p".repeat(MAX_DESTINATION_LEN - 100));
        let fits = "q=".to_owned() + &"v".repeat(MAX_DESTINATION_LEN - long.len() - 3);
        assert_eq!(d(&long).with_query(&fits).len(), MAX_DESTINATION_LEN);
        assert_eq!(d(&long).with_query(&(fits + "v")), long);
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_accepted_values_round_trip(s in "\\PC{0,200}") {
            if let Ok(d) = Destination::parse(&s, &base()) {
                let again = Destination::parse(d.as_str(), &base());
                prop_assert_eq!(again, Ok(d));
            }
        }

        #[test]
        fn urls_with_any_path_round_trip(path in "[a-zA-Z0-9/._~%-]{0,100}", q in "[a-z0-9=&]{0,30}") {
            let s = format!("https://example.com/{path}?{q}");
            let d = Destination::parse(&s, &base()).unwrap();
            prop_assert_eq!(Destination::parse(d.as_str(), &base()), Ok(d.clone()));
        }
    }
}
