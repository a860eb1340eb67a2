//! The referrer of a click: the `Referer` header's host, or [`DIRECT`] without one.

use url::{Host, Url};

/// The referrer of a click without a (usable) `Referer`.
pub const DIRECT: &str = "(direct)";

/// Longest `referrerUrl` kept; longer ones are cut (on a character boundary).
pub const MAX_REFERRER_URL: usize = 2048;

/// Longest referrer host recorded: a DNS name's longest (253). A longer one names no host that
/// could have sent the visitor, and the click counts as direct.
pub const MAX_REFERRER_HOST: usize = 253;

/// What a click records of its `Referer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referrer {
    /// The host (lower case), or [`DIRECT`].
    pub host: String,
    /// The whole header, at most [`MAX_REFERRER_URL`] characters; `None` without one.
    pub url: Option<String>,
}

/// A host as clicks record it: as a URL's host reads once parsed (lower case, an international
/// name in punycode), without a trailing dot. A filter on the referrer goes through it, so
/// `News.Example.` finds `news.example` and `bücher.example` finds `xn--bcher-kva.example`;
/// text that is no host (`(direct)`) is only lower-cased.
pub fn referrer_host(host: &str) -> String {
    match Host::parse(host) {
        Ok(parsed) => recorded(&parsed.to_string()),
        Err(_) => recorded(&host.to_ascii_lowercase()),
    }
}

/// A parsed host as clicks record it: without a trailing dot.
fn recorded(host: &str) -> String {
    host.trim_end_matches('.').to_owned()
}

/// The referrer of a click whose `Referer` header is `header`. A header that is not an absolute
/// URL with a host (`android-app://…` has one; `about:blank` has none) is kept as the URL and
/// counts as direct.
pub fn referrer(header: Option<&str>) -> Referrer {
    let Some(header) = header.map(str::trim).filter(|h| !h.is_empty()) else {
        return Referrer {
            host: DIRECT.into(),
            url: None,
        };
    };
    let host = Url::parse(header)
        .ok()
        .and_then(|url| url.host_str().map(recorded))
        .filter(|h| !h.is_empty() && h.len() <= MAX_REFERRER_HOST)
        .unwrap_or_else(|| DIRECT.into());
    let url = match header.char_indices().nth(MAX_REFERRER_URL) {
        Some((cut, _)) => header[..cut].to_owned(),
        None => header.to_owned(),
    };
    Referrer {
        host,
        url: Some(url),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_direct_visits() {
        let r = referrer(Some("https://News.Example./story?id=1"));
        assert_eq!(r.host, "news.example");
        assert_eq!(r.url.as_deref(), Some("https://News.Example./story?id=1"));
        assert_eq!(
            referrer(None),
            Referrer {
                host: DIRECT.into(),
                url: None
            }
        );
        assert_eq!(referrer(Some("  ")).host, DIRECT);
        assert_eq!(referrer(Some("not a url")).host, DIRECT);
        assert_eq!(referrer(Some("about:blank")).host, DIRECT);
        assert_eq!(referrer(Some("android-app://com.slack/")).host, "com.slack");
        let longest = format!("{0}.{0}.{0}.{1}.example", "a".repeat(63), "b".repeat(53));
        assert_eq!(longest.len(), MAX_REFERRER_HOST);
        assert_eq!(referrer(Some(&format!("https://{longest}/"))).host, longest);
        let longer = format!("https://b{longest}/");
        assert_eq!(referrer(Some(&longer)).host, DIRECT);
        assert_eq!(
            referrer(Some(&longer)).url.as_deref(),
            Some(longer.as_str())
        );
    }

    #[test]
    fn a_filter_names_a_host_as_clicks_record_it() {
        for (filter, recorded) in [
            ("News.Example.", "news.example"),
            ("Bücher.Example", "xn--bcher-kva.example"),
            ("XN--BCHER-KVA.EXAMPLE.", "xn--bcher-kva.example"),
            ("[2001:DB8::1]", "[2001:db8::1]"),
            ("(Direct)", DIRECT),
        ] {
            assert_eq!(referrer_host(filter), recorded, "{filter}");
        }
        assert_eq!(
            referrer(Some("https://bücher.example/x")).host,
            referrer_host("bücher.example")
        );
    }

    #[test]
    fn long_urls_are_cut_on_a_character() {
        let long = format!("https://example.com/{}", "é".repeat(3000));
        let r = referrer(Some(&long));
        assert_eq!(
            r.url.as_deref().map(|u| u.chars().count()),
            Some(MAX_REFERRER_URL)
        );
        assert_eq!(r.host, "example.com");
    }
}
