//! Link passwords: Argon2id hashes (the `argon2` crate's defaults, the OWASP recommendation:
//! 19 MiB, two passes), made and checked on the blocking pool, since each takes tens of
//! milliseconds of CPU on purpose; and the budget of wrong attempts, per link and per client
//! address, that stops guessing.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Argon2, PasswordHash as Phc};
use shortlink_domain::{Password, PasswordHash};
use shortlink_storage::CounterKey;

use crate::ServiceError;

/// Wrong passwords one client address may send (to any links) per [`ATTEMPT_WINDOW`].
pub const ATTEMPTS_PER_ADDRESS: u32 = 10;
/// Wrong passwords one link may receive (from anyone) per [`ATTEMPT_WINDOW`].
pub const ATTEMPTS_PER_LINK: u32 = 100;
/// How long wrong attempts count against their budgets.
pub const ATTEMPT_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Hashes a password for storage.
pub(crate) async fn hash(password: Password) -> Result<PasswordHash, ServiceError> {
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.expose().as_bytes(), &salt)
            .map(|phc| PasswordHash::from_phc(phc.to_string()))
            .map_err(|e| ServiceError::Internal(format!("hashing a password failed: {e}")))
    })
    .await
    .map_err(|e| ServiceError::Internal(format!("hashing a password failed: {e}")))?
}

/// Whether `attempt` is the password `hash` was made from. A hash that does not parse matches
/// nothing.
pub(crate) async fn verify(hash: PasswordHash, attempt: String) -> bool {
    tokio::task::spawn_blocking(move || {
        Phc::new(hash.as_str()).is_ok_and(|phc| {
            Argon2::default()
                .verify_password(attempt.as_bytes(), &phc)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false)
}

/// Who wrong attempts are counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Budget {
    Link(CounterKey),
    Address(IpAddr),
}

/// Wrong attempts in the current window of each link and address; bounded (the least recently
/// used entries go first).
pub(crate) struct WrongAttempts {
    counts: quick_cache::sync::Cache<Budget, (u32, Instant)>,
}

impl Default for WrongAttempts {
    fn default() -> Self {
        Self {
            counts: quick_cache::sync::Cache::new(100_000),
        }
    }
}

impl WrongAttempts {
    fn count(&self, budget: Budget, now: Instant) -> u32 {
        match self.counts.get(&budget) {
            Some((count, since)) if now.duration_since(since) < ATTEMPT_WINDOW => count,
            _ => 0,
        }
    }

    /// Whether `link` or `address` has used its budget up.
    pub(crate) fn exhausted(&self, link: CounterKey, address: Option<IpAddr>) -> bool {
        let now = Instant::now();
        self.count(Budget::Link(link), now) >= ATTEMPTS_PER_LINK
            || address.is_some_and(|a| self.count(Budget::Address(a), now) >= ATTEMPTS_PER_ADDRESS)
    }

    /// Counts one wrong attempt against both.
    pub(crate) fn record(&self, link: CounterKey, address: Option<IpAddr>) {
        let now = Instant::now();
        let budgets = [Some(Budget::Link(link)), address.map(Budget::Address)];
        for budget in budgets.into_iter().flatten() {
            let since = match self.counts.get(&budget) {
                Some((_, since)) if now.duration_since(since) < ATTEMPT_WINDOW => since,
                _ => now,
            };
            self.counts
                .insert(budget, (self.count(budget, now) + 1, since));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_its_password_only() {
        let hash = hash(Password::parse("open sesame").unwrap()).await.unwrap();
        assert!(hash.as_str().starts_with("$argon2id$"));
        assert!(verify(hash.clone(), "open sesame".into()).await);
        assert!(!verify(hash, "open sesame ".into()).await);
        assert!(!verify(PasswordHash::from_phc("garbage".into()), "x".into()).await);
    }

    #[test]
    fn budgets_run_out_per_address_and_per_link() {
        let attempts = WrongAttempts::default();
        let (link, other) = (CounterKey(1), CounterKey(2));
        let (me, you): (IpAddr, IpAddr) =
            ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        for _ in 0..ATTEMPTS_PER_ADDRESS {
            assert!(!attempts.exhausted(link, Some(me)));
            attempts.record(link, Some(me));
        }
        assert!(attempts.exhausted(link, Some(me)));
        assert!(
            attempts.exhausted(other, Some(me)),
            "the address's budget is spent"
        );
        assert!(!attempts.exhausted(link, Some(you)));
        for _ in ATTEMPTS_PER_ADDRESS..ATTEMPTS_PER_LINK {
            attempts.record(link, None);
        }
        assert!(
            attempts.exhausted(link, Some(you)),
            "the link's budget is spent"
        );
        assert!(!attempts.exhausted(other, Some(you)));
    }
}
