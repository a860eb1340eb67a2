//! Per-workspace rate limiting (GCRA, burst = one second's rate) behind a small trait, so a
//! shared store (Redis) can stand in for the in-process one when several instances serve one
//! database.

use std::future::Future;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

mod shared;

pub use shared::RedisRateLimiter;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter as Gcra};
use shortlink_domain::{RateLimit, WorkspaceId};

/// What the limiter decided, with what the `RateLimit-*` headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// The plan's rate (requests per second, also the burst).
    pub limit: u32,
    /// Requests that could be made right now.
    pub remaining: u32,
    /// Whole seconds until the full burst is available again.
    pub reset: u64,
    /// When refused: whole seconds until one request would be admitted (at least 1).
    pub retry_after: u64,
}

/// A boxed future, so the trait can be used as `dyn` by the extractor.
pub type DecisionFuture<'a> = Pin<Box<dyn Future<Output = Decision> + Send + 'a>>;

/// What counting a failed authentication tells: the seconds to wait when the address is over
/// its budget.
pub type FailureFuture<'a> = Pin<Box<dyn Future<Output = Option<u64>> + Send + 'a>>;

/// Whether limits are shared: `None` when they never are.
pub type SharingFuture<'a> = Pin<Box<dyn Future<Output = Option<bool>> + Send + 'a>>;

/// Admits or refuses one request of a workspace under its plan, and counts failed
/// authentications per client address.
pub trait RateLimiter: Send + Sync + 'static {
    /// Counts one request of `workspace` against `rate`.
    fn check(&self, workspace: WorkspaceId, rate: RateLimit) -> DecisionFuture<'_>;

    /// Counts a failed authentication from `addr` against its budget (`guard`'s, on this
    /// instance, unless the budget is shared); the wait when this one went over it, after which
    /// `guard` refuses the address on this instance until the wait is over.
    fn auth_failure<'a>(&'a self, addr: IpAddr, guard: &'a AuthFailureGuard) -> FailureFuture<'a> {
        Box::pin(std::future::ready(guard.record_failure(addr)))
    }

    /// Whether the limits are shared with other instances right now (asking may reach the
    /// shared store): `None` when they never are (this limiter is the instance's own).
    fn sharing(&self) -> SharingFuture<'_> {
        Box::pin(std::future::ready(None))
    }
}

type DirectGcra = Gcra<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;

/// The in-process limiter: one governor GCRA per workspace, rebuilt when its plan changes.
/// Idle workspaces are evicted after ten minutes, when their bucket is long full anyway.
pub struct LocalRateLimiter {
    limiters: moka::sync::Cache<WorkspaceId, Arc<(u32, DirectGcra)>>,
    clock: DefaultClock,
}

impl Default for LocalRateLimiter {
    fn default() -> Self {
        Self {
            limiters: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_idle(Duration::from_secs(600))
                .build(),
            clock: DefaultClock::default(),
        }
    }
}

impl LocalRateLimiter {
    fn limiter(&self, workspace: WorkspaceId, per_second: u32) -> Arc<(u32, DirectGcra)> {
        let make = || Arc::new((per_second, gcra(per_second)));
        let current = self.limiters.get_with(workspace, make);
        if current.0 == per_second {
            return current;
        }
        let fresh = make();
        self.limiters.insert(workspace, fresh.clone());
        fresh
    }
}

fn gcra(per_second: u32) -> DirectGcra {
    let rate = NonZeroU32::new(per_second).unwrap_or(NonZeroU32::MIN);
    Gcra::direct(Quota::per_second(rate)).with_middleware::<StateInformationMiddleware>()
}

/// `d` in whole seconds, rounded up: a client told to wait that long finds the wait over (the
/// `Retry-After` and `RateLimit-Reset` headers count whole seconds).
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

impl RateLimiter for LocalRateLimiter {
    fn check(&self, workspace: WorkspaceId, rate: RateLimit) -> DecisionFuture<'_> {
        let per_second = rate.per_second();
        let limiter = self.limiter(workspace, per_second);
        let decision = match limiter.1.check() {
            Ok(state) => {
                let remaining = state.remaining_burst_capacity();
                let used = per_second.saturating_sub(remaining);
                // Each used cell is restored after 1/rate seconds.
                let reset = ceil_secs(Duration::from_secs(u64::from(used)) / per_second);
                Decision {
                    allowed: true,
                    limit: per_second,
                    remaining,
                    reset,
                    retry_after: 0,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                Decision {
                    allowed: false,
                    limit: per_second,
                    remaining: 0,
                    reset: 1,
                    retry_after: ceil_secs(wait).max(1),
                }
            }
        };
        Box::pin(std::future::ready(decision))
    }
}

/// Failed authentications allowed per client address per minute, by default.
pub const AUTH_FAILURES_PER_MINUTE: u32 = 20;

/// Counts failed authentications per client address. Once an address has spent its budget it is
/// refused before any key it sends is even looked at, so refusals cannot be told apart from
/// valid keys and guessing keys gains nothing.
pub struct AuthFailureGuard {
    failures: Gcra<
        IpAddr,
        governor::state::keyed::DefaultKeyedStateStore<IpAddr>,
        DefaultClock,
        StateInformationMiddleware,
    >,
    blocked: moka::sync::Cache<IpAddr, std::time::Instant>,
    clock: DefaultClock,
    per_minute: u32,
    /// Failures counted since the addresses were last forgotten ([`AuthFailureGuard::shrink`]).
    since_shrink: std::sync::atomic::AtomicU32,
}

/// Failures counted between two [`AuthFailureGuard::shrink`]s: the keyed counts keep an entry
/// for every address that ever failed until told to forget the full ones, so addresses sending
/// bad keys from everywhere grew the server's memory for good. Forgetting walks every entry; once
/// in so many failures it costs each failure little.
const SHRINK_EVERY: u32 = 10_000;

impl Default for AuthFailureGuard {
    fn default() -> Self {
        Self::new(AUTH_FAILURES_PER_MINUTE)
    }
}

impl AuthFailureGuard {
    /// A guard allowing `per_minute` failures per address per minute (burst included).
    pub fn new(per_minute: u32) -> Self {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        Self {
            per_minute: per_minute.get(),
            failures: Gcra::keyed(Quota::per_minute(per_minute))
                .with_middleware::<StateInformationMiddleware>(),
            blocked: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(Duration::from_secs(60))
                .build(),
            clock: DefaultClock::default(),
            since_shrink: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Seconds the address must wait, when it is blocked.
    pub fn blocked_for(&self, addr: IpAddr) -> Option<u64> {
        let until = self.blocked.get(&addr)?;
        let left = until.checked_duration_since(std::time::Instant::now())?;
        Some(ceil_secs(left).max(1))
    }

    /// Records a failure; returns the wait in seconds when this one went over the budget (only
    /// failures counted at once, in flight together, can: the one that spends the budget blocks
    /// the address).
    pub fn record_failure(&self, addr: IpAddr) -> Option<u64> {
        let counted = 1 + (self.since_shrink).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if counted >= SHRINK_EVERY {
            self.since_shrink
                .store(0, std::sync::atomic::Ordering::Relaxed);
            self.shrink();
        }
        match self.failures.check_key(&addr) {
            Ok(left) => {
                if left.remaining_burst_capacity() == 0 {
                    self.spent(addr);
                }
                None
            }
            Err(not_until) => Some(self.block(addr, not_until.wait_time_from(self.clock.now()))),
        }
    }

    /// The failure just counted spent the address's budget: from its next request on, valid key
    /// or not, the address is refused until the budget allows one failure again, so no more
    /// than the budget is ever tried.
    pub fn spent(&self, addr: IpAddr) {
        self.block(addr, Duration::from_secs(60) / self.per_minute);
    }

    /// Refuses `addr` for `wait` (its budget is spent, here or on the instances together);
    /// returns the wait in whole seconds.
    pub fn block(&self, addr: IpAddr, wait: Duration) -> u64 {
        self.blocked.insert(addr, std::time::Instant::now() + wait);
        ceil_secs(wait).max(1)
    }

    /// Failures allowed per address per minute.
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Forgets addresses whose budget is full again (every [`SHRINK_EVERY`] failures).
    fn shrink(&self) {
        self.failures.retain_recent();
        self.failures.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses whose budget is full again are forgotten as failures go on: the counts of
    /// addresses that failed once, long enough ago, do not stay in memory for good.
    #[test]
    fn addresses_that_failed_long_ago_are_forgotten() {
        // A failure a millisecond: an address's budget is full again a millisecond after.
        let guard = AuthFailureGuard::new(60_000);
        let address = |n: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n));
        for n in 0..SHRINK_EVERY - 1 {
            guard.record_failure(address(n));
        }
        assert_eq!(guard.failures.len(), (SHRINK_EVERY - 1) as usize);
        std::thread::sleep(Duration::from_millis(20));
        guard.record_failure(address(SHRINK_EVERY));
        assert!(guard.failures.len() <= 1, "{}", guard.failures.len());
    }

    fn check(l: &LocalRateLimiter, ws: WorkspaceId, rate: u32) -> Decision {
        let fut = l.check(ws, RateLimit::new(rate).unwrap());
        futures_util::FutureExt::now_or_never(fut).unwrap()
    }

    #[test]
    fn admits_one_seconds_burst_then_refuses_per_workspace() {
        let limiter = LocalRateLimiter::default();
        let (a, b) = (WorkspaceId::generate(), WorkspaceId::generate());
        for i in 0..10 {
            let d = check(&limiter, a, 10);
            assert!(d.allowed, "request {i} is within the burst");
            assert_eq!(d.remaining, 9 - i);
            assert_eq!(d.limit, 10);
        }
        let refused = check(&limiter, a, 10);
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after, 1);
        assert!(
            check(&limiter, b, 10).allowed,
            "another workspace has its own budget"
        );
    }

    #[test]
    fn a_changed_plan_takes_effect() {
        let limiter = LocalRateLimiter::default();
        let a = WorkspaceId::generate();
        assert_eq!(check(&limiter, a, 5).remaining, 4);
        assert_eq!(check(&limiter, a, 50).remaining, 49);
    }

    #[test]
    fn the_auth_guard_blocks_after_the_budget() {
        let guard = AuthFailureGuard::default();
        let addr: IpAddr = "203.0.113.9".parse().unwrap();
        for _ in 1..AUTH_FAILURES_PER_MINUTE {
            assert_eq!(guard.record_failure(addr), None);
            assert_eq!(guard.blocked_for(addr), None);
        }
        // The last failure of the budget is answered as a failure, and blocks what follows.
        assert_eq!(guard.record_failure(addr), None);
        assert_eq!(
            guard.blocked_for(addr),
            Some(3),
            "one failure comes back in 60 s / 20"
        );
        assert!(guard.record_failure(addr).is_some());
        assert_eq!(guard.blocked_for("203.0.113.10".parse().unwrap()), None);
    }
}
