//! The public address short links are built on (`--base-url`).

use std::borrow::Cow;
use std::net::Ipv6Addr;

use url::Url;

use crate::Slug;

/// A base URL that is not a bare `http(s)://host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaseUrlError {
    /// Not a URL at all.
    #[error("base URL is not a valid URL: {0}")]
    Invalid(#[from] url::ParseError),
    /// A scheme other than http or https.
    #[error("base URL must use http or https")]
    Scheme,
    /// Has a path, query, fragment or credentials, which short URLs could not carry.
    #[error("base URL must be only scheme, host and optional port (no path, query or credentials)")]
    NotBare,
}

/// `scheme://host[:port]`, without a trailing slash. Short links are `<base>/<shortCode>` and
/// a link's `domain` is `host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    origin: String,
    scheme_len: usize,
    /// Where the host ends in `origin` (a port may follow).
    host_end: usize,
    /// The host as [`comparable_host`] gives it, for the loop check.
    host: String,
}

impl BaseUrl {
    /// Parses and normalises (lower-case host, default port dropped) a base URL.
    pub fn parse(s: &str) -> Result<Self, BaseUrlError> {
        let url = Url::parse(s.trim_end_matches('/'))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(BaseUrlError::Scheme);
        }
        let bare = url.host_str().is_some()
            && url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none()
            && url.username().is_empty()
            && url.password().is_none();
        if !bare {
            return Err(BaseUrlError::NotBare);
        }
        let origin = url.as_str().trim_end_matches('/').to_owned();
        Ok(Self {
            origin,
            scheme_len: url.scheme().len() + 3,
            host_end: url.scheme().len() + 3 + url.host_str().unwrap_or_default().len(),
            host: comparable_host(url.host_str().unwrap_or_default()).into_owned(),
        })
    }

    /// Whether `host` (as the `url` crate gives it: lower-case, IDNs in punycode) names this
    /// base's host, on any port and with or without the DNS root's trailing dot.
    pub fn is_host(&self, host: &str) -> bool {
        comparable_host(host) == self.host
    }

    /// The host as written in the base (lower-case, an IPv6 address in brackets), without its
    /// port.
    pub fn host(&self) -> &str {
        &self.origin[self.scheme_len..self.host_end]
    }

    /// `host[:port]`: the `domain` of links made under this base.
    pub fn domain(&self) -> &str {
        &self.origin[self.scheme_len..]
    }

    /// `scheme://host[:port]`.
    pub fn as_str(&self) -> &str {
        &self.origin
    }

    /// The short URL of `code` on `domain` (the link's own domain, which is this base's domain
    /// for every link created under it).
    pub fn short_url_on(&self, domain: &str, code: &str) -> String {
        let scheme = &self.origin[..self.scheme_len];
        format!("{scheme}{domain}/{code}")
    }

    /// The short URL of `slug` under this base.
    pub fn short_url(&self, slug: &Slug) -> String {
        format!("{}/{}", self.origin, slug.as_str())
    }
}

/// `host` without trailing dots: `sho.rt.` is the fully qualified form of `sho.rt`, the same
/// server; an IPv4-mapped IPv6 address (`[::ffff:127.0.0.1]`) as the IPv4 address it maps, which
/// a dual-stack client reaches. Case, IDN and IPv4 forms (`0x7f.1`, `2130706433`) need nothing
/// here, as the WHATWG parser already lower-cases, punycodes and writes IPv4 addresses dotted.
fn comparable_host(host: &str) -> Cow<'_, str> {
    let mapped = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .and_then(|h| h.parse::<Ipv6Addr>().ok())
        .and_then(|ip| ip.to_ipv4_mapped());
    match mapped {
        Some(ipv4) => Cow::Owned(ipv4.to_string()),
        None => Cow::Borrowed(host.trim_end_matches('.')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_port_and_drops_trailing_slash() {
        let b = BaseUrl::parse("http://127.0.0.1:8080/").unwrap();
        assert_eq!(b.as_str(), "http://127.0.0.1:8080");
        assert_eq!(b.domain(), "127.0.0.1:8080");
        assert_eq!(b.host(), "127.0.0.1");
        let b = BaseUrl::parse("https://Sho.RT:443").unwrap();
        assert_eq!(b.domain(), "sho.rt");
        assert_eq!(b.host(), "sho.rt");
        assert_eq!(
            b.short_url(&Slug::parse("abc").unwrap()),
            "https://sho.rt/abc"
        );
        let b = BaseUrl::parse("http://[::1]:8080").unwrap();
        assert_eq!((b.domain(), b.host()), ("[::1]:8080", "[::1]"));
    }

    #[test]
    fn its_host_matches_in_every_spelling_and_on_every_port() {
        let b = BaseUrl::parse("http://sho.rt.").unwrap();
        for host in ["sho.rt", "sho.rt.", "sho.rt.."] {
            assert!(b.is_host(host), "{host}");
        }
        assert!(!b.is_host("sho.rt.example"));
        assert!(!b.is_host("ho.rt"));
    }

    #[test]
    fn rejects_paths_and_other_schemes() {
        assert_eq!(
            BaseUrl::parse("https://sho.rt/x"),
            Err(BaseUrlError::NotBare)
        );
        assert_eq!(BaseUrl::parse("ftp://sho.rt"), Err(BaseUrlError::Scheme));
        assert!(BaseUrl::parse("nonsense").is_err());
    }
}
