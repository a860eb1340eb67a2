//! Link passwords: Argon2id hashes (the `argon2` crate's defaults, the OWASP recommendation:
//! 19 MiB, two passes), made and checked on threads of their own, since each takes tens of
//! milliseconds of CPU on purpose; and the budget of wrong attempts, per link and per client
//! address, that stops guessing.

use std::net::IpAddr;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Argon2, PasswordHash as Phc};
use shortlink_domain::{Password, PasswordHash, attempt_source};
use shortlink_storage::CounterKey;

use crate::ServiceError;

/// Wrong passwords one client address may send (to any links) per [`ATTEMPT_WINDOW`].
pub const ATTEMPTS_PER_ADDRESS: u32 = 10;
/// Wrong passwords one link may receive (from anyone) per [`ATTEMPT_WINDOW`].
pub const ATTEMPTS_PER_LINK: u32 = 100;
/// How long wrong attempts count against their budgets.
pub const ATTEMPT_WINDOW: Duration = Duration::from_secs(10 * 60);

/// An Argon2 computation for [`ARGON2_THREADS`].
type Job = Box<dyn FnOnce() + Send>;

/// Argon2's own threads, one per CPU, fed by one queue. Each computation holds 19 MiB and keeps a
/// CPU busy, so more at once gain nothing: on the blocking pool, 200 password forms posted
/// together ran at once and took 2.7 GB. The allocator also keeps freed memory in the arenas of
/// the threads that used it (up to 57 MiB each): few threads use few arenas (on 2 CPUs, 241 MB
/// resident after 15 checks and still after 75), where the blocking pool's many threads each kept
/// theirs (636 MB after 100, though no more than two ran at once). A waiting computation costs a
/// few bytes.
static ARGON2_THREADS: LazyLock<mpsc::Sender<Job>> = LazyLock::new(|| {
    let (jobs, queue) = mpsc::channel::<Job>();
    let queue = Arc::new(Mutex::new(queue));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    for i in 0..threads {
        let queue = Arc::clone(&queue);
        let work = move || loop {
            // The lock is held while waiting for a job, not while running it.
            let next = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
            let Ok(job) = next else { return };
            // A job that panics drops its answer (its caller sees no result); the thread stays.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        };
        // Without a thread, the jobs would wait for ever: a process that cannot start two
        // threads at its first password cannot serve anyway.
        std::thread::Builder::new()
            .name(format!("argon2-{i}"))
            .spawn(work)
            .expect("the argon2 threads start");
    }
    jobs
});

/// Runs one Argon2 computation on [`ARGON2_THREADS`], in its turn.
async fn run_argon2<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = answer.send(work());
    });
    ARGON2_THREADS.send(job).ok()?;
    answered.await.ok()
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
        let address = address.map(|a| Budget::Address(attempt_source(a)));
        [Some(Budget::Link(link)), address].into_iter().flatten()
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
    /// Takes one attempt from the budgets of `link` and `address`; when either is spent, takes
    /// nothing and returns how long until the last spent one's window ends.
    pub(crate) fn take(&self, link: CounterKey, address: Option<IpAddr>) -> Result<(), Duration> {
        let now = Instant::now();
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let spent = (Budget::of(link, address))
            .filter_map(|budget| match current(&counts, budget, now) {
                Some((count, since)) if count >= budget.limit() => {
                    Some(ATTEMPT_WINDOW.saturating_sub(now.duration_since(since)))
                }
                _ => None,
            })
            .max();
        if let Some(wait) = spent {
            return Err(wait);
        }
        for budget in Budget::of(link, address) {
            let (count, since) = current(&counts, budget, now).unwrap_or((0, now));
            counts.insert(budget, (count + 1, since));
        }
        Ok(())
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
        let taken = |link, address| attempts.take(link, address).is_ok();
        // A right password's attempt is given back.
        assert!(taken(link, Some(me)));
        attempts.give_back(link, Some(me));
        for _ in 0..ATTEMPTS_PER_ADDRESS {
            assert!(taken(link, Some(me)));
        }
        let wait = attempts.take(link, Some(me)).unwrap_err();
        assert!(wait <= ATTEMPT_WINDOW && wait > ATTEMPT_WINDOW - Duration::from_secs(60));
        assert!(!taken(other, Some(me)), "the address's budget is spent");
        assert!(taken(link, Some(you)));
        for _ in ATTEMPTS_PER_ADDRESS + 1..ATTEMPTS_PER_LINK {
            assert!(taken(link, None));
        }
        let stranger = "192.0.2.3".parse().unwrap();
        assert!(!taken(link, Some(stranger)), "the link's budget is spent");
        assert!(taken(other, Some(you)), "a refusal takes nothing");
    }
}
