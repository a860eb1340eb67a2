//! When a failed delivery is tried again, and when it is given up.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use shortlink_domain::{NextStep, Timestamp};

/// The schedule used when none is configured: the delays after the first try, a little over
/// 27 hours in all, so a receiver that is down for a day still gets its events.
pub const DEFAULT_RETRY_SCHEDULE: &str = "5s,5m,30m,2h,5h,10h,10h";

/// Why a retry schedule does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// No delay at all.
    #[error(
        "retry schedule is empty; expected comma-separated delays such as {DEFAULT_RETRY_SCHEDULE}"
    )]
    Empty,
    /// One entry is not a positive integer followed by a unit.
    #[error(
        "retry schedule entry '{0}' is not a positive integer followed by a unit (ms, s, m, h or d), e.g. 30m"
    )]
    BadDelay(String),
    /// One entry is zero or too large to represent.
    #[error("retry schedule entry '{0}' must be more than zero and less than a million years")]
    OutOfRange(String),
}

/// The delays between the tries of one delivery: the first try is immediate, the k-th retry
/// (k counted from 1) waits the k-th delay after the previous try, and after
/// `1 + delays` tries the delivery is failed.
///
/// Written as comma-separated delays, each a positive integer with a unit: `s`, `m`, `h` or `d`,
/// and `ms`, which exists for tests that must not wait seconds. Whitespace around the commas is
/// ignored. The default is [`DEFAULT_RETRY_SCHEDULE`].
///
/// ```
/// use std::time::Duration;
/// use shortlink_webhooks::RetrySchedule;
///
/// let s: RetrySchedule = "5s, 5m ,2h".parse().unwrap();
/// assert_eq!(s.delays()[1], Duration::from_secs(300));
/// assert_eq!(s.max_attempts(), 4);
/// assert_eq!(s.to_string(), "5s,5m,2h");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule(Vec<Duration>);

impl RetrySchedule {
    /// A schedule of these delays; each must be a positive whole number of milliseconds, and
    /// there must be at least one.
    pub fn new(delays: Vec<Duration>) -> Result<Self, ScheduleError> {
        if delays.is_empty() {
            return Err(ScheduleError::Empty);
        }
        if let Some(bad) = delays
            .iter()
            .find(|d| d.is_zero() || d.subsec_nanos() % 1_000_000 != 0 || d.as_secs() > MAX_SECS)
        {
            return Err(ScheduleError::OutOfRange(format!("{bad:?}")));
        }
        Ok(Self(delays))
    }

    /// The delays after the first try.
    pub fn delays(&self) -> &[Duration] {
        &self.0
    }

    /// How many tries a delivery gets in all: the first and one per delay.
    pub fn max_attempts(&self) -> u32 {
        u32::try_from(self.0.len()).map_or(u32::MAX, |n| n.saturating_add(1))
    }

    /// How long to wait before the next try once `attempts_made` tries have failed, or `None`
    /// when that was the last. Zero tries made means the first try, which is immediate.
    pub fn delay_after(&self, attempts_made: u32) -> Option<Duration> {
        match attempts_made {
            0 => Some(Duration::ZERO),
            k => self.0.get(usize::try_from(k - 1).ok()?).copied(),
        }
    }

    /// What follows a failed try, the `attempts_made`-th (counting it), that ended at `now`:
    /// another try after the scheduled delay, or [`NextStep::Failed`] after the last.
    pub fn next_step(&self, attempts_made: u32, now: Timestamp) -> NextStep {
        match self.delay_after(attempts_made) {
            Some(delay) => NextStep::RetryAt(now.plus(delay)),
            None => NextStep::Failed,
        }
    }
}

// A delay this long is a typo; refusing it also keeps every sum of delays far from overflow.
const MAX_SECS: u64 = 1_000_000 * 365 * 86_400;

impl Default for RetrySchedule {
    fn default() -> Self {
        Self(
            [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
        )
    }
}

const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

fn parse_delay(entry: &str) -> Result<Duration, ScheduleError> {
    let bad = || ScheduleError::BadDelay(entry.to_owned());
    let digits_end = entry.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = entry.split_at(digits_end);
    if number.is_empty() {
        return Err(bad());
    }
    let millis_per_unit = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, ms)| *ms)
        .ok_or_else(bad)?;
    let out_of_range = || ScheduleError::OutOfRange(entry.to_owned());
    let n: u64 = number.parse().map_err(|_| out_of_range())?;
    let ms = n.checked_mul(millis_per_unit).ok_or_else(out_of_range)?;
    if ms == 0 || ms / 1000 > MAX_SECS {
        return Err(out_of_range());
    }
    Ok(Duration::from_millis(ms))
}

impl FromStr for RetrySchedule {
    type Err = ScheduleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Err(ScheduleError::Empty);
        }
        let delays = s
            .split(',')
            .map(|entry| parse_delay(entry.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(delays)
    }
}

impl fmt::Display for RetrySchedule {
    /// The canonical form: each delay in the largest unit that divides it exactly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, delay) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            // `new` guarantees whole, positive milliseconds, so the `ms` unit always divides.
            let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            let (unit, per) = UNITS
                .iter()
                .find(|(_, per)| ms % per == 0)
                .copied()
                .unwrap_or(("ms", 1));
            write!(f, "{}{unit}", ms / per)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_default_is_the_documented_schedule() {
        let parsed: RetrySchedule = DEFAULT_RETRY_SCHEDULE.parse().unwrap();
        assert_eq!(parsed, RetrySchedule::default());
        assert_eq!(RetrySchedule::default().to_string(), DEFAULT_RETRY_SCHEDULE);
        assert_eq!(RetrySchedule::default().max_attempts(), 8);
    }

    #[test]
    fn parses_every_unit_and_tolerates_spaces_around_commas() {
        let s: RetrySchedule = " 250ms , 5s,2m,\t3h ,1d ".parse().unwrap();
        assert_eq!(
            s.delays(),
            [
                Duration::from_millis(250),
                secs(5),
                secs(120),
                secs(3 * 3600),
                secs(86_400)
            ]
        );
    }

    #[test]
    fn displays_in_the_largest_exact_unit_and_round_trips() {
        let s: RetrySchedule = "90s,60m,1500ms,48h".parse().unwrap();
        assert_eq!(s.to_string(), "90s,1h,1500ms,2d");
        assert_eq!(s.to_string().parse::<RetrySchedule>().unwrap(), s);
    }

    #[test]
    fn rejects_empty_schedules() {
        for input in ["", "   "] {
            assert_eq!(input.parse::<RetrySchedule>(), Err(ScheduleError::Empty));
        }
        assert_eq!(RetrySchedule::new(vec![]), Err(ScheduleError::Empty));
    }

    #[test]
    fn rejects_malformed_entries_naming_them() {
        for (input, entry) in [
            ("5s,,5m", ""),
            ("5s,", ""),
            ("5", "5"),
            ("s", "s"),
            ("5 s", "5 s"),
            ("5sec", "5sec"),
            ("-5s", "-5s"),
            ("1.5h", "1.5h"),
            ("5S", "5S"),
            ("5s;5m", "5s;5m"),
        ] {
            assert_eq!(
                input.parse::<RetrySchedule>(),
                Err(ScheduleError::BadDelay(entry.into())),
                "{input}"
            );
        }
        let message = "5s,soon".parse::<RetrySchedule>().unwrap_err().to_string();
        assert!(message.contains("'soon'"), "{message}");
    }

    #[test]
    fn rejects_zero_and_absurd_delays() {
        for input in [
            "0s",
            "5s,0m",
            "99999999999999999999s",
            "18446744073709551615d",
        ] {
            assert!(
                matches!(
                    input.parse::<RetrySchedule>(),
                    Err(ScheduleError::OutOfRange(_))
                ),
                "{input}"
            );
        }
        assert!(matches!(
            RetrySchedule::new(vec![Duration::from_micros(1500)]),
            Err(ScheduleError::OutOfRange(_))
        ));
        assert!(matches!(
            RetrySchedule::new(vec![Duration::ZERO]),
            Err(ScheduleError::OutOfRange(_))
        ));
    }

    #[test]
    fn tells_the_delay_after_each_attempt() {
        let s: RetrySchedule = "5s,5m".parse().unwrap();
        assert_eq!(s.delay_after(0), Some(Duration::ZERO));
        assert_eq!(s.delay_after(1), Some(secs(5)));
        assert_eq!(s.delay_after(2), Some(secs(300)));
        assert_eq!(s.delay_after(3), None);
        assert_eq!(s.delay_after(u32::MAX), None);
    }

    #[test]
    fn next_step_retries_until_the_schedule_is_spent() {
        let s: RetrySchedule = "5s,5m".parse().unwrap();
        let now = Timestamp::from_unix_millis(1_000_000);
        assert_eq!(
            s.next_step(1, now),
            NextStep::RetryAt(Timestamp::from_unix_millis(1_005_000))
        );
        assert_eq!(
            s.next_step(2, now),
            NextStep::RetryAt(Timestamp::from_unix_millis(1_300_000))
        );
        assert_eq!(s.next_step(3, now), NextStep::Failed);
        assert_eq!(s.max_attempts(), 3);
    }
}
