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

/// Runs one Argon2 computation that may fail on [`ARGON2_THREADS`]; an error names `what` it was.
async fn computed<T, E>(
    what: &'static str,
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, ServiceError>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let failed = |e: &dyn std::fmt::Display| ServiceError::Internal(format!("{what} failed: {e}"));
    match run_argon2(work).await {
        Some(result) => result.map_err(|e| failed(&e)),
        None => Err(failed(&"the task did not finish")),
    }
}

/// Hashes a password for storage.
pub(crate) async fn hash(password: Password) -> Result<PasswordHash, ServiceError> {
    computed("hashing a password", move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.expose().as_bytes(), &salt)
            .map(|phc| PasswordHash::from_phc(phc.to_string()))
    })
    .await
}

/// `text` made as slow to guess as a stored password: Argon2id with the same parameters, and
/// `salt`. The same text and salt give the same bytes, so it can be compared.
pub(crate) async fn stretch(text: Vec<u8>, salt: [u8; 16]) -> Result<[u8; 32], ServiceError> {
    computed("stretching a fingerprint", move || {
        let mut out = [0; 32];
        Argon2::default()
            .hash_password_into(&text, &salt, &mut out)
            .map(|()| out)
    })
    .await
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
/// checked than the budgets allow. An attempt that finds a budget taken up by checks still under
/// way waits for them (they may be right, and give their places back) rather than being refused
/// for the rest of the window: right passwords sent together from one office all get in.
pub(crate) struct WrongAttempts {
    counts: Mutex<Counts>,
    /// Told whenever a check ends, for the attempts waiting on checks under way.
    settled: tokio::sync::Notify,
}

/// Each budget's attempts in the current window (wrong ones and those being checked), how many
/// of them are being checked, and the start of the window.
type Counts = quick_cache::unsync::Cache<Budget, Window>;

#[derive(Debug, Clone, Copy)]
struct Window {
    taken: u32,
    checking: u32,
    since: Instant,
}

/// Why [`WrongAttempts::take`] took nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotTaken {
    /// A budget is spent on wrong attempts: its window ends after this.
    Spent(Duration),
    /// A budget is taken up, partly by checks still under way.
    Checking,
}

/// Longest an attempt waits for the checks that take up its budget before it is refused.
const WAIT_FOR_CHECKS: Duration = Duration::from_secs(10);

impl Default for WrongAttempts {
    fn default() -> Self {
        Self {
            counts: Mutex::new(Counts::new(100_000)),
            settled: tokio::sync::Notify::new(),
        }
    }
}

/// A budget's window, if it is still open at `now`.
fn current(counts: &Counts, budget: Budget, now: Instant) -> Option<Window> {
    counts
        .get(&budget)
        .copied()
        .filter(|w| now.duration_since(w.since) < ATTEMPT_WINDOW)
}

impl WrongAttempts {
    /// Takes one attempt from the budgets of `link` and `address`, waiting while checks under
    /// way take them up; when one is spent on wrong attempts (or the checks take longer than
    /// [`WAIT_FOR_CHECKS`]), takes nothing and returns how long until the client may try again.
    pub(crate) async fn take(
        &self,
        link: CounterKey,
        address: Option<IpAddr>,
    ) -> Result<Check<'_>, Duration> {
        let deadline = tokio::time::Instant::now() + WAIT_FOR_CHECKS;
        loop {
            // Made before looking, so a check that ends in between still wakes this one.
            let settled = self.settled.notified();
            match self.try_take(link, address) {
                Ok(()) => {
                    return Ok(Check {
                        attempts: self,
                        link,
                        address,
                        settled: false,
                    });
                }
                Err(NotTaken::Spent(wait)) => return Err(wait),
                Err(NotTaken::Checking) => {
                    if tokio::time::timeout_at(deadline, settled).await.is_err() {
                        return Err(Duration::from_secs(1));
                    }
                }
            }
        }
    }

    /// [`take`](Self::take) without waiting.
    pub(crate) fn try_take(
        &self,
        link: CounterKey,
        address: Option<IpAddr>,
    ) -> Result<(), NotTaken> {
        let now = Instant::now();
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let windows: Vec<(Budget, Window)> = Budget::of(link, address)
            .filter_map(|budget| Some((budget, current(&counts, budget, now)?)))
            .collect();
        // Spent on wrong attempts: until the last spent window ends.
        let spent = (windows.iter())
            .filter(|(budget, w)| w.taken.saturating_sub(w.checking) >= budget.limit())
            .map(|(_, w)| ATTEMPT_WINDOW.saturating_sub(now.duration_since(w.since)))
            .max();
        if let Some(wait) = spent {
            return Err(NotTaken::Spent(wait));
        }
        if windows.iter().any(|(budget, w)| w.taken >= budget.limit()) {
            return Err(NotTaken::Checking);
        }
        for budget in Budget::of(link, address) {
            let w = current(&counts, budget, now).unwrap_or(Window {
                taken: 0,
                checking: 0,
                since: now,
            });
            counts.insert(
                budget,
                Window {
                    taken: w.taken + 1,
                    checking: w.checking + 1,
                    ..w
                },
            );
        }
        Ok(())
    }

    /// Ends the check of an attempt [`try_take`](Self::try_take) took: a right one gives its
    /// place back, a wrong one keeps it for the rest of the window.
    pub(crate) fn settle(&self, link: CounterKey, address: Option<IpAddr>, right: bool) {
        let now = Instant::now();
        {
            let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
            for budget in Budget::of(link, address) {
                if let Some(w) = current(&counts, budget, now) {
                    let taken = if right {
                        w.taken.saturating_sub(1)
                    } else {
                        w.taken
                    };
                    let checking = w.checking.saturating_sub(1);
                    counts.insert(
                        budget,
                        Window {
                            taken,
                            checking,
                            ..w
                        },
                    );
                }
            }
        }
        self.settled.notify_waiters();
    }
}

/// An attempt taken from its budgets, being checked: [`Check::settle`] ends it, and one dropped
/// unsettled (its request went away during the check) counts as wrong, as it would have
/// before the waiting for checks.
pub(crate) struct Check<'a> {
    attempts: &'a WrongAttempts,
    link: CounterKey,
    address: Option<IpAddr>,
    settled: bool,
}

impl Check<'_> {
    /// The password was `right`, or not.
    pub(crate) fn settle(mut self, right: bool) {
        self.settled = true;
        self.attempts.settle(self.link, self.address, right);
    }
}

impl Drop for Check<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.attempts.settle(self.link, self.address, false);
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
        // Each attempt checked at once, and wrong unless said otherwise.
        let wrong = |link, address| {
            let taken = attempts.try_take(link, address);
            if taken.is_ok() {
                attempts.settle(link, address, false);
            }
            taken.is_ok()
        };
        // A right password's attempt is given back.
        attempts.try_take(link, Some(me)).unwrap();
        attempts.settle(link, Some(me), true);
        for _ in 0..ATTEMPTS_PER_ADDRESS {
            assert!(wrong(link, Some(me)));
        }
        let Err(NotTaken::Spent(wait)) = attempts.try_take(link, Some(me)) else {
            panic!("the address's budget is spent")
        };
        assert!(wait <= ATTEMPT_WINDOW && wait > ATTEMPT_WINDOW - Duration::from_secs(60));
        assert!(!wrong(other, Some(me)), "the address's budget is spent");
        assert!(wrong(link, Some(you)));
        for _ in ATTEMPTS_PER_ADDRESS + 1..ATTEMPTS_PER_LINK {
            assert!(wrong(link, None));
        }
        let stranger = "192.0.2.3".parse().unwrap();
        assert!(!wrong(link, Some(stranger)), "the link's budget is spent");
        assert!(wrong(other, Some(you)), "a refusal takes nothing");
    }

    /// Attempts sent together from one address: those past its budget wait for the checks
    /// under way, and get in when those were right; once wrong ones spend it, they are refused.
    #[tokio::test]
    async fn an_attempt_waits_for_the_checks_that_take_up_its_budget() {
        let attempts = std::sync::Arc::new(WrongAttempts::default());
        let (link, me): (CounterKey, IpAddr) = (CounterKey(1), "192.0.2.1".parse().unwrap());
        for _ in 0..ATTEMPTS_PER_ADDRESS {
            attempts.try_take(link, Some(me)).unwrap();
        }
        assert_eq!(attempts.try_take(link, Some(me)), Err(NotTaken::Checking));
        let waiting = tokio::spawn({
            let attempts = std::sync::Arc::clone(&attempts);
            // Its check is dropped unsettled, as when its request goes away: a wrong attempt.
            async move { attempts.take(link, Some(me)).await.map(drop) }
        });
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "it waits while every place is being checked"
        );
        attempts.settle(link, Some(me), true);
        assert_eq!(waiting.await.unwrap(), Ok(()), "a right check made room");
        // The other nine turn out wrong, and the one that waited went away unsettled: the
        // budget is spent.
        for _ in 1..ATTEMPTS_PER_ADDRESS {
            attempts.settle(link, Some(me), false);
        }
        assert!(matches!(
            attempts.take(link, Some(me)).await,
            Err(wait) if wait > Duration::from_secs(60)
        ));
    }
}
