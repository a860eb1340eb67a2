//! Link passwords: Argon2id hashes (the `argon2` crate's defaults, the OWASP recommendation:
//! 19 MiB, two passes), made and checked on the blocking pool, since each takes tens of
//! milliseconds of CPU on purpose; and the budget of wrong attempts, per link and per client
//! address, that stops guessing.

use std::net::IpAddr;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Argon2, PasswordHash as Phc};
use shortlink_domain::{Password, PasswordHash};
use shortlink_storage::CounterKey;
use tokio::sync::Semaphore;

use crate::ServiceError;

/// Wrong passwords one client address may send (to any links) per [`ATTEMPT_WINDOW`].
pub const ATTEMPTS_PER_ADDRESS: u32 = 10;
/// Wrong passwords one link may receive (from anyone) per [`ATTEMPT_WINDOW`].
pub const ATTEMPTS_PER_LINK: u32 = 100;
/// How long wrong attempts count against their budgets.
pub const ATTEMPT_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Argon2 computations running at once, process-wide: one per CPU. Each holds 19 MiB and keeps a
/// CPU busy, so more at once gain nothing and, unbounded (the blocking pool runs hundreds of
/// tasks), a burst of password forms or of bulk creations with passwords took gigabytes; the rest
/// wait their turn here, at the cost of a few bytes each.
static ARGON2_SLOTS: LazyLock<Semaphore> =
    LazyLock::new(|| Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get())));

/// Runs one Argon2 computation on the blocking pool, in its turn.
async fn run_argon2<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let _slot = ARGON2_SLOTS.acquire().await.ok()?;
    tokio::task::spawn_blocking(work).await.ok()
}

/// Hashes a password for storage.
pub(crate) async fn hash(password: Password) -> Result<PasswordHash, ServiceError> {
    let failed = |e: &dyn std::fmt::Display| {
        ServiceError::Internal(format!("hashing a password failed: {e}"))
    };
    run_argon2(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.expose().as_bytes(), &salt)
            .map(|phc| PasswordHash::from_phc(phc.to_string()))
            .map_err(|e| failed(&e))
    })
    .await
    .unwrap_or_else(|| Err(failed(&"the task did not finish")))
}

/// Whether `attempt` is the password `hash` was made from. A hash that does not parse matches
/// nothing.
pub(crate) async fn verify(hash: PasswordHash, attempt: String) -> bool {
    run_argon2(move || {
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

impl Budget {
    fn limit(self) -> u32 {
        match self {
            Budget::Link(_) => ATTEMPTS_PER_LINK,
            Budget::Address(_) => ATTEMPTS_PER_ADDRESS,
        }
    }

    /// The budgets an attempt at `link` from `address` counts against.
    fn of(link: CounterKey, address: Option<IpAddr>) -> impl Iterator<Item = Budget> {
        [Some(Budget::Link(link)), address.map(Budget::Address)]
            .into_iter()
            .flatten()
    }
}

/// Attempts in the current window of each link and address; bounded (the least recently used
/// entries go first). An attempt is taken from its budgets before its password is checked and
/// given back when it was right: guesses sent at once each take their own, so no more are
/// checked than the budgets allow.
pub(crate) struct WrongAttempts {
    counts: Mutex<Counts>,
}

/// Each budget's count of attempts and the start of its window.
type Counts = quick_cache::unsync::Cache<Budget, (u32, Instant)>;

impl Default for WrongAttempts {
    fn default() -> Self {
        Self {
            counts: Mutex::new(Counts::new(100_000)),
        }
    }
}

/// A budget's count and the start of its window, if the window is still open at `now`.
fn current(counts: &Counts, budget: Budget, now: Instant) -> Option<(u32, Instant)> {
    counts
        .get(&budget)
        .copied()
        .filter(|&(_, since)| now.duration_since(since) < ATTEMPT_WINDOW)
}

impl WrongAttempts {
    /// Takes one attempt from the budgets of `link` and `address`; `false`, taking nothing,
    /// when either is spent.
    pub(crate) fn take(&self, link: CounterKey, address: Option<IpAddr>) -> bool {
        let now = Instant::now();
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let spent = Budget::of(link, address).any(|budget| {
            current(&counts, budget, now).is_some_and(|(count, _)| count >= budget.limit())
        });
        if spent {
            return false;
        }
        for budget in Budget::of(link, address) {
            let (count, since) = current(&counts, budget, now).unwrap_or((0, now));
            counts.insert(budget, (count + 1, since));
        }
        true
    }

    /// Gives back an attempt [`take`](Self::take) took, whose password was right.
    pub(crate) fn give_back(&self, link: CounterKey, address: Option<IpAddr>) {
        let now = Instant::now();
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        for budget in Budget::of(link, address) {
            if let Some((count, since)) = current(&counts, budget, now) {
                counts.insert(budget, (count.saturating_sub(1), since));
            }
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
        // A right password's attempt is given back.
        assert!(attempts.take(link, Some(me)));
        attempts.give_back(link, Some(me));
        for _ in 0..ATTEMPTS_PER_ADDRESS {
            assert!(attempts.take(link, Some(me)));
        }
        assert!(!attempts.take(link, Some(me)));
        assert!(
            !attempts.take(other, Some(me)),
            "the address's budget is spent"
        );
        assert!(attempts.take(link, Some(you)));
        for _ in ATTEMPTS_PER_ADDRESS + 1..ATTEMPTS_PER_LINK {
            assert!(attempts.take(link, None));
        }
        assert!(
            !attempts.take(link, Some("192.0.2.3".parse().unwrap())),
            "the link's budget is spent"
        );
        assert!(attempts.take(other, Some(you)), "a refusal takes nothing");
    }
}
