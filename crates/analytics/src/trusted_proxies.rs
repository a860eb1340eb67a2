//! The client address of a request: its TCP peer, or, when the peer is a trusted proxy, the
//! right-most `X-Forwarded-For` entry that is not itself trusted (entries left of it were written
//! by the client and prove nothing).

use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed (`--trusted-proxies`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

/// A `--trusted-proxies` value that is not a list of CIDRs or addresses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("'{0}' is not an address or a CIDR block (e.g. 10.0.0.0/8, 2001:db8::/32, 127.0.0.1)")]
pub struct TrustedProxiesError(pub String);

impl FromStr for TrustedProxies {
    type Err = TrustedProxiesError;

    /// `CIDR[,CIDR…]`; a bare address is a block of one. Empty: none.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .map(|part| {
                part.parse::<IpNet>()
                    .or_else(|_| part.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| TrustedProxiesError(part.to_owned()))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

impl TrustedProxies {
    /// Whether `addr` is one of the trusted proxies.
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        self.0.iter().any(|net| net.contains(&addr))
    }

    /// Whether any proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The client address of a request from `peer` carrying these `X-Forwarded-For` values (in
    /// header order). A malformed header falls back to the peer; it never fails.
    pub fn client_address<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl IntoIterator<Item = &'a str>,
    ) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.contains(peer) {
            return peer;
        }
        let entries: Vec<&str> = forwarded_for
            .into_iter()
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .collect();
        let mut client = peer;
        for entry in entries.iter().rev() {
            let Some(addr) = parse_entry(entry) else {
                return peer;
            };
            client = addr;
            if !self.contains(addr) {
                break;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, possibly with a port (`1.2.3.4:5678`,
/// `[2001:db8::1]:443`).
fn parse_entry(entry: &str) -> Option<IpAddr> {
    if let Ok(addr) = entry.parse::<IpAddr>() {
        return Some(addr.to_canonical());
    }
    entry
        .parse::<std::net::SocketAddr>()
        .ok()
        .map(|s| s.ip().to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|_| panic!("{s} is an address"))
    }

    fn proxies(s: &str) -> TrustedProxies {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let none = TrustedProxies::default();
        assert_eq!(
            none.client_address(ip("203.0.113.9"), ["81.2.69.142"]),
            ip("203.0.113.9")
        );
        let some = proxies("10.0.0.0/8");
        assert_eq!(
            some.client_address(ip("203.0.113.9"), ["81.2.69.142"]),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn the_rightmost_untrusted_entry_is_the_client() {
        let trusted = proxies("10.0.0.0/8, 192.168.1.1");
        let peer = ip("10.1.2.3");
        assert_eq!(
            trusted.client_address(peer, ["81.2.69.142"]),
            ip("81.2.69.142")
        );
        // The client wrote the left-most entry itself: it is not believed.
        assert_eq!(
            trusted.client_address(peer, ["1.1.1.1, 81.2.69.142, 192.168.1.1"]),
            ip("81.2.69.142")
        );
        // Several header lines are one list, in order.
        assert_eq!(
            trusted.client_address(peer, ["1.1.1.1", "81.2.69.142", "10.9.9.9"]),
            ip("81.2.69.142")
        );
        // Every entry trusted: the left-most is the nearest to the client there is.
        assert_eq!(trusted.client_address(peer, ["10.5.5.5"]), ip("10.5.5.5"));
        // Ports and IPv4-mapped addresses.
        assert_eq!(
            trusted.client_address(peer, ["81.2.69.142:5555"]),
            ip("81.2.69.142")
        );
        assert_eq!(
            trusted.client_address(peer, ["[2001:db8::1]:443"]),
            ip("2001:db8::1")
        );
        assert_eq!(
            trusted.client_address(ip("::ffff:10.0.0.1"), ["81.2.69.142"]),
            ip("81.2.69.142")
        );
    }

    #[test]
    fn a_malformed_header_falls_back_to_the_peer() {
        let trusted = proxies("10.0.0.0/8");
        let peer = ip("10.1.2.3");
        for header in ["", "nonsense", "81.2.69.142, unknown", "1.2.3.4.5"] {
            assert_eq!(trusted.client_address(peer, [header]), peer, "{header:?}");
        }
        assert_eq!(trusted.client_address(peer, []), peer);
    }

    #[test]
    fn a_bad_list_is_refused_naming_the_entry() {
        assert_eq!(
            "10.0.0.0/8, nope".parse::<TrustedProxies>(),
            Err(TrustedProxiesError("nope".into()))
        );
        assert!(proxies("").is_empty());
    }
}
