//! Unique visitors without storing or tracking an address: a click's visitor is a keyed hash of
//! (client address, User-Agent) under a key that changes every UTC day, derived from a secret the
//! instances share (kept in their database). The same visitor hashes the same within a day and
//! differently across days, and nobody without the secret can test an address against a hash.

use std::hash::Hasher;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use siphasher::sip::SipHasher13;

const MILLIS_PER_DAY: i64 = 24 * 60 * 60 * 1000;

/// The secret the daily keys derive from.
pub struct VisitorKey {
    secret: Vec<u8>,
    /// The last day's hasher, keyed and ready (a flush's clicks share their day).
    today: Mutex<Option<(i64, SipHasher13)>>,
}

impl std::fmt::Debug for VisitorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VisitorKey(…)")
    }
}

impl VisitorKey {
    /// A key over `secret` (at least 16 bytes of randomness).
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        Self {
            secret: secret.into(),
            today: Mutex::new(None),
        }
    }

    /// The hasher keyed with `day`'s key: the first 16 bytes of HMAC-SHA256(secret, day), made
    /// once a day.
    fn day_hasher(&self, day: i64) -> SipHasher13 {
        let mut today = self.today.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((cached, hasher)) = today.as_ref()
            && *cached == day
        {
            return *hasher;
        }
        // HMAC takes a key of any length.
        let mut daily =
            Hmac::<Sha256>::new_from_slice(&self.secret).unwrap_or_else(|_| unreachable!());
        daily.update(b"shortlink visitor day ");
        daily.update(&day.to_be_bytes());
        let mut key = [0u8; 16];
        key.copy_from_slice(&daily.finalize().into_bytes()[..16]);
        let hasher = SipHasher13::new_with_key(&key);
        *today = Some((day, hasher));
        hasher
    }

    /// The visitor of a click at `unix_millis` (UTC) from `address` with `user_agent`, as a
    /// number: SipHash-1-3 under the day's key of (the address's family, its bytes, the agent).
    /// SipHash is a keyed pseudo-random function, as a MAC is, at a tenth of HMAC-SHA256's cost
    /// (which was most of the cost of making a click's event). Clicks with no known address (an
    /// embedder's) hash with an empty address: one visitor per agent and day, like any other, so
    /// that visitors still add up across days.
    pub fn visitor(&self, unix_millis: i64, address: Option<IpAddr>, user_agent: &str) -> i64 {
        let mut hasher = self.day_hasher(unix_millis.div_euclid(MILLIS_PER_DAY));
        match address {
            Some(IpAddr::V4(v4)) => {
                hasher.write_u8(4);
                hasher.write(&v4.octets());
            }
            Some(IpAddr::V6(v6)) => {
                hasher.write_u8(6);
                hasher.write(&v6.octets());
            }
            None => hasher.write_u8(0),
        }
        hasher.write(user_agent.as_bytes());
        hasher.finish() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_visitor_within_a_day_and_not_across_days() {
        let key = VisitorKey::new(*b"0123456789abcdef0123456789abcdef");
        let addr: IpAddr = "81.2.69.142".parse().expect("an address");
        let noon = 1_764_000_000_000 - 1_764_000_000_000 % MILLIS_PER_DAY + MILLIS_PER_DAY / 2;
        let a = key.visitor(noon, Some(addr), "UA");
        assert_eq!(a, key.visitor(noon + 3_600_000, Some(addr), "UA"));
        assert_ne!(a, key.visitor(noon + MILLIS_PER_DAY, Some(addr), "UA"));
        assert_ne!(a, key.visitor(noon, Some(addr), "other UA"));
        assert_ne!(a, key.visitor(noon, "81.2.69.143".parse().ok(), "UA"));
        let other_secret = VisitorKey::new(*b"fedcba9876543210fedcba9876543210");
        assert_ne!(a, other_secret.visitor(noon, Some(addr), "UA"));
    }

    /// The hash of a visitor must not change between builds: instances of two builds on one
    /// database (a rolling upgrade) would count one visitor twice that day. A change to it is a
    /// decision to write down (DECISIONS.md, "The visitor hash"), and this value changes with it.
    #[test]
    fn the_hash_is_the_same_in_every_build() {
        let key = VisitorKey::new(*b"0123456789abcdef0123456789abcdef");
        let noon = 1_764_000_000_000 - 1_764_000_000_000 % MILLIS_PER_DAY + MILLIS_PER_DAY / 2;
        let addr: IpAddr = "81.2.69.142".parse().expect("an address");
        assert_eq!(
            key.visitor(noon, Some(addr), "UA"),
            2_379_030_642_749_620_045
        );
    }

    /// Clicks with no known address are one visitor per agent and day, as any address's are:
    /// they used to be visitor 0 on every day, counted once over a range read from the events
    /// and once a day from the rollups.
    #[test]
    fn no_address_is_a_visitor_of_its_day() {
        let key = VisitorKey::new(*b"0123456789abcdef0123456789abcdef");
        let noon = 1_764_000_000_000 - 1_764_000_000_000 % MILLIS_PER_DAY + MILLIS_PER_DAY / 2;
        let a = key.visitor(noon, None, "UA");
        assert_eq!(a, key.visitor(noon + 3_600_000, None, "UA"));
        assert_ne!(a, key.visitor(noon + MILLIS_PER_DAY, None, "UA"));
        assert_ne!(a, key.visitor(noon, None, "other UA"));
        assert_ne!(a, key.visitor(noon, "0.0.0.0".parse().ok(), "UA"));
        assert_ne!(a, 0);
    }
}
