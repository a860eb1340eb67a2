//! The redirect during a database outage: links this instance has seen keep redirecting from
//! memory (stale-if-error, up to [`crate::STALE_FOR`] past their cache lifetime). Once a lookup
//! found the database unavailable, no lookup waits for it again until it answers: a known link
//! answers from memory at once, an unknown code gets "unavailable" at once, and every
//! [`PROBE_EVERY`] one lookup sends a probe to the database in the background, whose answer ends
//! the outage.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use shortlink_domain::{OUTAGE_LOGGED_EVERY, ThrottledLog};

/// How long after the database failed a lookup (or a probe) the next probe is sent.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long a probe in flight keeps others from being sent. A probe ends within the database's
/// bound on an answer and then sets the next one's time; this is only for one that never ends
/// (its task dropped as the runtime stops).
const PROBE_HELD_AT_MOST: Duration = Duration::from_secs(60);

/// How a lookup treats the database now ([`Outage::ask`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ask {
    /// It answers: ask it.
    Database,
    /// It is down: answer from memory, and, when `probe`, ask it again in the background.
    Memory { probe: bool },
}

/// Whether the database is down, as the redirect last found it.
pub(crate) struct Outage {
    since: Instant,
    /// Milliseconds after `since` until which lookups send no probe; 0 when the database
    /// answers.
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

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Outage {
    /// Milliseconds since `since`, at least 1 (0 in `down_until` means "up").
    fn now(&self) -> u64 {
        millis(self.since.elapsed()).max(1)
    }

    /// How a lookup treats the database now. During an outage, one lookup per [`PROBE_EVERY`]
    /// is told to probe (the first to find the time come), and none while its probe runs: a
    /// lookup that waited for a database that does not answer would keep its visitor waiting
    /// for the database's bound, and every lookup then waited at once.
    pub fn ask(&self) -> Ask {
        let until = self.down_until.load(Ordering::Relaxed);
        if until == 0 {
            return Ask::Database;
        }
        let now = self.now();
        let probe = now >= until
            && self
                .down_until
                .compare_exchange(
                    until,
                    now + millis(PROBE_HELD_AT_MOST),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok();
        Ask::Memory { probe }
    }

    /// A lookup or a probe found the database unavailable.
    pub fn went_down(&self) {
        let until = self.now() + millis(PROBE_EVERY);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_lookup_probes_per_interval_and_none_while_its_probe_runs() {
        let outage = Outage::default();
        assert_eq!(outage.ask(), Ask::Database);
        outage.went_down();
        assert_eq!(outage.ask(), Ask::Memory { probe: false });
        std::thread::sleep(PROBE_EVERY + Duration::from_millis(5));
        assert_eq!(outage.ask(), Ask::Memory { probe: true });
        assert_eq!(outage.ask(), Ask::Memory { probe: false }, "its probe runs");
        // The probe found the database down: the next is a probe interval away.
        outage.went_down();
        assert_eq!(outage.ask(), Ask::Memory { probe: false });
        outage.came_up();
        assert_eq!(outage.ask(), Ask::Database);
    }
}
