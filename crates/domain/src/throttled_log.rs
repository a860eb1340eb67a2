//! Logging a failure that repeats (every request during a database outage) once per interval,
//! with how many times it happened since the last line, instead of once per occurrence.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often a failure that repeats through a database outage is logged, by every part of the
/// service alike (requests, the click flush, stale redirects, the webhook worker's claims).
pub const OUTAGE_LOGGED_EVERY: Duration = Duration::from_secs(10);

/// Decides which occurrences of one repeated event get a log line: the first, then the first
/// after each `interval`, which reports the occurrences it stood for.
#[derive(Debug)]
pub struct ThrottledLog {
    interval: Duration,
    window: Mutex<Option<Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    unlogged: u64,
}

/// An occurrence to log, and the earlier ones it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeated {
    /// Occurrences since the last line, not logged themselves (0 for the first of a run).
    pub times: u64,
    /// Since the last line.
    pub over: Duration,
}

impl ThrottledLog {
    /// At most one line per `interval`.
    pub const fn new(interval: Duration) -> Self {
        Self {
            interval,
            window: Mutex::new(None),
        }
    }

    /// Counts an occurrence at `now`; `Some` when this one should be logged.
    pub fn occurred(&self, now: Instant) -> Option<Repeated> {
        // A panic elsewhere while holding the lock leaves a count, which is still usable.
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        match *window {
            Some(ref mut w) if now.saturating_duration_since(w.started) < self.interval => {
                w.unlogged += 1;
                None
            }
            previous => {
                *window = Some(Window {
                    started: now,
                    unlogged: 0,
                });
                Some(previous.map_or(
                    Repeated {
                        times: 0,
                        over: Duration::ZERO,
                    },
                    |w| Repeated {
                        times: w.unlogged,
                        over: now.saturating_duration_since(w.started),
                    },
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_the_first_then_one_line_per_interval_with_the_count() {
        let log = ThrottledLog::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(
            log.occurred(at(0)),
            Some(Repeated {
                times: 0,
                over: Duration::ZERO
            })
        );
        for i in 1..=37 {
            assert_eq!(log.occurred(at(i * 200)), None, "occurrence {i}");
        }
        assert_eq!(
            log.occurred(at(10_000)),
            Some(Repeated {
                times: 37,
                over: Duration::from_secs(10)
            })
        );
        assert_eq!(log.occurred(at(10_001)), None);
        // A quiet hour, then the next occurrence is logged at once with what it stands for.
        assert_eq!(
            log.occurred(at(3_610_000)),
            Some(Repeated {
                times: 1,
                over: Duration::from_secs(3600)
            })
        );
    }
}
