//! The buckets of a time series: where each hour, day, week (from Monday) or month begins in a
//! time zone, daylight-saving changes included (a day may last 23 or 25 hours).

use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

/// Most buckets one series may have.
pub const MAX_BUCKETS: usize = 1000;

/// A series' step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    /// An hour.
    Hour,
    /// A day.
    Day,
    /// A week, from Monday.
    Week,
    /// A calendar month.
    Month,
}

impl Interval {
    /// `hour`, `day`, `week` or `month`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "hour" => Interval::Hour,
            "day" => Interval::Day,
            "week" => Interval::Week,
            "month" => Interval::Month,
            _ => return None,
        })
    }
}

/// Why a series cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BucketError {
    /// Over [`MAX_BUCKETS`].
    #[error("the range holds more than {MAX_BUCKETS} buckets of this interval")]
    TooMany,
    /// The range is outside what the calendar handles.
    #[error("the range is out of bounds")]
    OutOfRange,
}

/// The time zone named `name` (IANA), or `None`.
pub fn time_zone(name: &str) -> Option<TimeZone> {
    if name.is_empty() || name.len() > 64 {
        return None;
    }
    TimeZone::get(name).ok()
}

/// Why [`parse_date`] gave no instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateError {
    /// Not a date of the form `YYYY-MM-DD` (a date with a time is not a date: an instant is RFC
    /// 3339, the API's one form for instants, parsed where the API's other instants are).
    NotADate,
    /// A date whose midnight in the zone is past what the calendar handles ([`latest_ms`]).
    OutOfRange,
}

/// Midnight in `zone` of a date given as `YYYY-MM-DD`, in milliseconds since the epoch.
pub fn parse_date(value: &str, zone: &TimeZone) -> Result<i64, DateError> {
    if value.len() != "2026-11-01".len() {
        return Err(DateError::NotADate);
    }
    let date: jiff::civil::Date = value.parse().map_err(|_| DateError::NotADate)?;
    let midnight = date
        .to_zoned(zone.clone())
        .map_err(|_| DateError::OutOfRange)?;
    Ok(midnight.timestamp().as_millisecond())
}

/// The latest instant the calendar handles in every time zone, in milliseconds since the epoch
/// (late on 30 December 9999, UTC): series and dates stop there.
pub fn latest_ms() -> i64 {
    jiff::Timestamp::MAX.as_millisecond()
}

/// A bucket's start as RFC 3339 with its local offset.
pub fn bucket_start(start: &Zoned) -> String {
    start.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
}

/// Where the bucket holding `at` begins.
fn floor(at: &Zoned, interval: Interval) -> Result<Zoned, jiff::Error> {
    let day = at.start_of_day()?;
    match interval {
        Interval::Hour => at.with().minute(0).second(0).subsec_nanosecond(0).build(),
        Interval::Day => Ok(day),
        Interval::Week => {
            let back = i64::from(day.weekday().to_monday_zero_offset());
            day.checked_sub(back.days())?.start_of_day()
        }
        Interval::Month => day.first_of_month()?.start_of_day(),
    }
}

fn next(at: &Zoned, interval: Interval) -> Result<Zoned, jiff::Error> {
    match interval {
        // The start of the first local hour after `at`'s: where the offset moves by half an
        // hour (Lord Howe), an hour added to a local hour's start is no local hour's start, and
        // where it falls back by half an hour, the local hour an hour later may be `at`'s own
        // (which then lasts an hour and a half).
        Interval::Hour => {
            let mut later = at.checked_add(1.hour())?;
            loop {
                let floored = floor(&later, Interval::Hour)?;
                if floored > *at {
                    return Ok(floored);
                }
                later = later.checked_add(1.hour())?;
            }
        }
        Interval::Day => at.checked_add(1.day())?.start_of_day(),
        Interval::Week => at.checked_add(1.week())?.start_of_day(),
        Interval::Month => at.checked_add(1.month())?.start_of_day(),
    }
}

/// The starts of the buckets covering `[start, end)` (milliseconds since the epoch), the first
/// one at or before `start`, each as the instant and its local time.
pub fn buckets(
    start_ms: i64,
    end_ms: i64,
    interval: Interval,
    zone: &TimeZone,
) -> Result<Vec<Zoned>, BucketError> {
    let at = |ms: i64| {
        Timestamp::from_millisecond(ms)
            .map(|t| t.to_zoned(zone.clone()))
            .map_err(|_| BucketError::OutOfRange)
    };
    // An empty range has no bucket, whether or not it falls on a bucket's start.
    if start_ms >= end_ms {
        return Ok(Vec::new());
    }
    let end = at(end_ms)?;
    let mut bucket = floor(&at(start_ms)?, interval).map_err(|_| BucketError::OutOfRange)?;
    let mut starts = Vec::new();
    while bucket < end {
        if starts.len() == MAX_BUCKETS {
            return Err(BucketError::TooMany);
        }
        let following = next(&bucket, interval).map_err(|_| BucketError::OutOfRange)?;
        starts.push(bucket);
        bucket = following;
    }
    Ok(starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        s.parse::<Timestamp>().expect("an instant").as_millisecond()
    }

    fn rfc(z: &Zoned) -> String {
        z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }

    #[test]
    fn days_in_london_across_the_spring_change() {
        let london = time_zone("Europe/London").expect("a zone");
        let days = buckets(
            ms("2026-03-28T12:00:00Z"),
            ms("2026-03-30T23:00:00Z"),
            Interval::Day,
            &london,
        )
        .expect("buckets");
        let starts: Vec<String> = days.iter().map(rfc).collect();
        assert_eq!(
            starts,
            [
                "2026-03-28T00:00:00+00:00",
                "2026-03-29T00:00:00+00:00",
                "2026-03-30T00:00:00+01:00",
            ]
        );
        // The 29th lasts 23 hours.
        let hours = buckets(
            ms("2026-03-29T00:00:00Z"),
            ms("2026-03-29T23:00:00Z"),
            Interval::Hour,
            &london,
        )
        .expect("buckets");
        assert_eq!(hours.len(), 23);
    }

    #[test]
    fn hours_start_on_local_hours_across_half_hour_changes() {
        let lord_howe = time_zone("Australia/Lord_Howe").expect("a zone");
        let hours = |start: &str, end: &str| {
            let starts = buckets(ms(start), ms(end), Interval::Hour, &lord_howe).expect("buckets");
            starts.iter().map(rfc).collect::<Vec<_>>()
        };
        // Back from +11:00 to +10:30 at 02:00: the half hour from 01:30 comes twice, and the
        // local hour 01:00 lasts an hour and a half.
        assert_eq!(
            hours("2026-04-04T13:00:00Z", "2026-04-04T17:00:00Z"),
            [
                "2026-04-05T00:00:00+11:00",
                "2026-04-05T01:00:00+11:00",
                "2026-04-05T02:00:00+10:30",
                "2026-04-05T03:00:00+10:30",
            ]
        );
        // Forward from +10:30 to +11:00 at 02:00: local 02:00 to 02:30 never happens.
        assert_eq!(
            hours("2026-10-03T13:30:00Z", "2026-10-03T17:00:00Z"),
            [
                "2026-10-04T00:00:00+10:30",
                "2026-10-04T01:00:00+10:30",
                "2026-10-04T02:30:00+11:00",
                "2026-10-04T03:00:00+11:00",
            ]
        );
    }

    #[test]
    fn weeks_start_on_monday_and_months_on_the_first() {
        let utc = time_zone("UTC").expect("a zone");
        let weeks = buckets(
            ms("2026-11-25T10:00:00Z"),
            ms("2026-12-01T00:00:00Z"),
            Interval::Week,
            &utc,
        )
        .expect("buckets");
        assert_eq!(
            weeks.iter().map(rfc).collect::<Vec<_>>(),
            ["2026-11-23T00:00:00+00:00", "2026-11-30T00:00:00+00:00"]
        );
        let months = buckets(
            ms("2026-01-31T00:00:00Z"),
            ms("2026-03-01T00:00:00Z"),
            Interval::Month,
            &utc,
        )
        .expect("buckets");
        assert_eq!(
            months.iter().map(rfc).collect::<Vec<_>>(),
            ["2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00"]
        );
    }

    #[test]
    fn dates_and_bucket_starts_are_local() {
        let tokyo = time_zone("Asia/Tokyo").expect("a zone");
        assert_eq!(
            parse_date("2026-11-01", &tokyo),
            Ok(ms("2026-10-31T15:00:00Z"))
        );
        assert_eq!(parse_date("yesterday", &tokyo), Err(DateError::NotADate));
        assert_eq!(parse_date("2026-13-01", &tokyo), Err(DateError::NotADate));
        // A date with a time is neither: its time is not dropped.
        assert_eq!(
            parse_date("2026-11-01T10:50:00", &tokyo),
            Err(DateError::NotADate)
        );
        assert_eq!(
            parse_date("2026-11-01T00:00:00Z", &tokyo),
            Err(DateError::NotADate)
        );
        // A date the calendar has, whose midnight is past what it handles.
        let utc = time_zone("UTC").expect("a zone");
        assert_eq!(parse_date("9999-12-31", &utc), Err(DateError::OutOfRange));
        assert!(parse_date("9999-12-30", &utc).is_ok_and(|ms| ms <= latest_ms()));
        let start = buckets(
            ms("2026-11-01T00:00:00Z"),
            ms("2026-11-01T01:00:00Z"),
            Interval::Day,
            &tokyo,
        )
        .expect("buckets");
        assert_eq!(
            (
                bucket_start(&start[0]),
                start[0].timestamp().as_millisecond()
            ),
            (
                "2026-11-01T00:00:00+09:00".to_owned(),
                ms("2026-10-31T15:00:00Z")
            )
        );
    }

    #[test]
    fn an_empty_range_has_no_bucket_wherever_it_falls() {
        let utc = time_zone("UTC").expect("a zone");
        for at in ["2026-11-28T00:00:00Z", "2026-11-28T05:00:00Z"] {
            for interval in [
                Interval::Hour,
                Interval::Day,
                Interval::Week,
                Interval::Month,
            ] {
                assert_eq!(buckets(ms(at), ms(at), interval, &utc), Ok(Vec::new()));
            }
        }
    }

    #[test]
    fn too_many_buckets_and_bad_zones_are_refused() {
        let utc = time_zone("UTC").expect("a zone");
        assert_eq!(
            buckets(
                ms("2026-01-01T00:00:00Z"),
                ms("2026-03-01T00:00:00Z"),
                Interval::Hour,
                &utc
            ),
            Err(BucketError::TooMany)
        );
        assert!(time_zone("Mars/Olympus").is_none());
        assert!(time_zone("").is_none());
        assert!(
            buckets(
                ms("2026-01-01T00:00:00Z"),
                ms("2026-01-01T00:00:00Z"),
                Interval::Day,
                &utc
            )
            .expect("buckets")
            .is_empty()
        );
    }

    proptest::proptest! {
        /// Any instants, interval and zone: buckets or a refusal, never a panic, never more
        /// than the bound, always in order.
        #[test]
        fn any_range_gives_ordered_buckets_or_a_refusal(
            start in proptest::num::i64::ANY,
            length in 0i64..100_000_000_000,
            interval in 0usize..4,
            zone in 0usize..5,
        ) {
            let zone = [
                "UTC", "Europe/London", "Asia/Kolkata", "America/St_Johns", "Australia/Lord_Howe",
            ][zone];
            let interval = [Interval::Hour, Interval::Day, Interval::Week, Interval::Month][interval];
            let zone = time_zone(zone).expect("a zone");
            if let Ok(starts) = buckets(start, start.saturating_add(length), interval, &zone) {
                proptest::prop_assert!(starts.len() <= MAX_BUCKETS);
                let millis: Vec<i64> = starts.iter().map(|z| z.timestamp().as_millisecond()).collect();
                proptest::prop_assert!(millis.windows(2).all(|w| w[0] < w[1]));
            }
        }

        /// Any text as an instant or a zone name: an answer or `None`, never a panic.
        #[test]
        fn any_text_parses_or_is_refused(text in ".{0,80}") {
            let utc = time_zone("UTC").expect("UTC");
            let _ = parse_date(&text, &utc);
            let _ = time_zone(&text);
        }
    }
}
