//! The redirect during a database outage: links this instance has seen keep redirecting from
//! memory (stale-if-error, up to [`crate::STALE_FOR`] past their cache lifetime), and once a
//! lookup found the database unavailable, the next lookups for [`PROBE_EVERY`] do not wait for
//! it again: a known link answers from memory at once, an unknown code gets "unavailable" at
//! once. Then one lookup tries the database again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use shortlink_domain::{OUTAGE_LOGGED_EVERY, ThrottledLog};

/// How long after the database failed a lookup the next ones skip it.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Whether the database is down, as the redirect last found it.
pub(crate) struct Outage {
    since: Instant,
    /// Milliseconds after `since` until which lookups skip the database; 0 when it answers.
    down_until: AtomicU64,
    stale_answers: ThrottledLog,
}

impl Default for Outage {
    fn default() -> Self {
        Self {
            since: Instant::now(),
            down_until: AtomicU64::new(0),
            stale_answers: ThrottledLog::new(OUTAGE_LOGGED_EVERY),
        }
    }
}

impl Outage {
    fn now(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether a lookup should skip the database now.
    pub fn is_down(&self) -> bool {
        self.now() < self.down_until.load(Ordering::Relaxed)
    }

    /// A lookup found the database unavailable.
    pub fn went_down(&self) {
        let until = self.now() + u64::try_from(PROBE_EVERY.as_millis()).unwrap_or(1000);
        self.down_until.store(until, Ordering::Relaxed);
    }

    /// A lookup found the database answering.
    pub fn came_up(&self) {
        if self.down_until.load(Ordering::Relaxed) != 0 {
            self.down_until.store(0, Ordering::Relaxed);
        }
    }

    /// A redirect answered from a stale entry (logged once per interval, with a count).
    pub fn answered_stale(&self) {
        if let Some(repeated) = self.stale_answers.occurred(Instant::now()) {
            tracing::warn!(
                stale_redirects = repeated.times + 1,
                over_s = repeated.over.as_secs(),
                "the database is unavailable: redirecting links seen before from memory"
            );
        }
    }
}
