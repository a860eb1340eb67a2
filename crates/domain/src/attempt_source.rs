//! Client addresses as budgets of attempts count them.

use std::net::{IpAddr, Ipv6Addr};

/// What a budget of attempts (failed authentications, wrong link passwords) counts against for a
/// client at `addr`: an IPv4 address itself, an IPv6 address's /64. One subscriber is given a
/// whole /64 and may use any of its 2^64 addresses, so counting them one by one would give a
/// guesser a fresh budget with every address. An IPv4-mapped address is its IPv4 address.
pub fn attempt_source(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !u128::from(u64::MAX))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_addresses_count_by_their_64_and_ipv4_ones_alone() {
        let source = |a: &str| attempt_source(a.parse().unwrap()).to_string();
        assert_eq!(source("203.0.113.7"), "203.0.113.7");
        assert_eq!(source("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(source("2001:db8:1:2::1"), "2001:db8:1:2::");
        assert_eq!(source("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::");
        assert_ne!(source("2001:db8:1:3::1"), source("2001:db8:1:2::1"));
    }
}
