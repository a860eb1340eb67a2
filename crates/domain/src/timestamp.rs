//! Instants as the API shows them: RFC 3339, UTC, exactly three fractional digits and `Z`.

use std::fmt;

use serde::{Serialize, Serializer};
use time::{
    OffsetDateTime, PrimitiveDateTime, UtcOffset, format_description::FormatItem,
    macros::format_description,
};

const FORMAT: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// A UTC instant with millisecond precision, which is what the databases store.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

impl Timestamp {
    /// The current instant, truncated to whole milliseconds.
    pub fn now() -> Self {
        Self::from_unix_millis(unix_millis(OffsetDateTime::now_utc()))
    }

    /// The instant `ms` milliseconds after the Unix epoch. Values beyond what `time` can
    /// represent (the years -9999 to 9999) saturate at its first or last instant, so reading a
    /// corrupt row cannot panic, and a time far ahead stays far ahead.
    pub fn from_unix_millis(ms: i64) -> Self {
        let dt = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap_or(
            match ms < 0 {
                true => PrimitiveDateTime::MIN.assume_utc(),
                false => PrimitiveDateTime::MAX.assume_utc(),
            },
        );
        Self(dt.to_offset(UtcOffset::UTC))
    }

    /// Parses an RFC 3339 date-time with any offset, truncated to whole milliseconds; `None`
    /// when it is not one, or when in UTC it lies outside the years 1 to 9999
    /// (`9999-12-31T23:30:00-01:00` is in the year 10000).
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let dt = OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
        let utc = dt.checked_to_offset(UtcOffset::UTC)?;
        (1..=9999)
            .contains(&utc.year())
            .then(|| Self::from_unix_millis(unix_millis(utc)))
    }

    /// Milliseconds since the Unix epoch: the storage representation.
    pub fn unix_millis(self) -> i64 {
        unix_millis(self.0)
    }

    /// Whole seconds since the Unix epoch (the `webhook-timestamp` header).
    pub fn unix_seconds(self) -> i64 {
        self.0.unix_timestamp()
    }

    /// This instant moved by `d`.
    pub fn plus(self, d: std::time::Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Self::from_unix_millis(self.unix_millis().saturating_add(ms))
    }

    /// This instant moved back by `d`.
    pub fn minus(self, d: std::time::Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Self::from_unix_millis(self.unix_millis().saturating_sub(ms))
    }
}

fn unix_millis(dt: OffsetDateTime) -> i64 {
    i64::try_from(dt.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (year, month, day) = self.0.to_calendar_date();
        if !(0..=9999).contains(&year) {
            // Only a corrupt row is this far out; the description signs and widens the year.
            return f.write_str(&self.0.format(FORMAT).map_err(|_| fmt::Error)?);
        }
        // Written field by field rather than through the description, which builds a `String`
        // first and was an eighth of an export's CPU.
        let (hour, minute, second, milli) = self.0.to_hms_milli();
        let month = u8::from(month);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z"
        )
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::openapi::string_schema(
            "RFC 3339 UTC instant with exactly three fractional digits, e.g. 2026-11-21T23:02:32.123Z.",
            Some(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"),
            Some(utoipa::openapi::schema::KnownFormat::DateTime),
        )
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Timestamp {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_three_fraction_digits_and_z() {
        let t = Timestamp::from_unix_millis(1_795_647_752_123);
        assert_eq!(t.to_string(), "2026-11-25T23:02:32.123Z");
        assert_eq!(
            Timestamp::from_unix_millis(0).to_string(),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(t.unix_millis(), 1_795_647_752_123);
    }

    #[test]
    fn parses_instants_of_the_years_1_to_9999_in_utc() {
        let last = Timestamp::parse_rfc3339("9999-12-31T23:59:59.999Z").unwrap();
        assert_eq!(last.to_string(), "9999-12-31T23:59:59.999Z");
        let first = Timestamp::parse_rfc3339("0001-01-01T01:00:00+01:00").unwrap();
        assert_eq!(first.to_string(), "0001-01-01T00:00:00.000Z");
        for beyond in [
            "9999-12-31T23:59:59-01:00",
            "9999-12-31T23:30:00-00:45",
            "0001-01-01T00:30:00+01:00",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(beyond), None, "{beyond}");
        }
        // Far beyond: at the last instant, not back at the epoch.
        assert_eq!(
            Timestamp::from_unix_millis(i64::MAX).to_string(),
            "9999-12-31T23:59:59.999Z"
        );
        assert!(Timestamp::from_unix_millis(i64::MIN) < Timestamp::from_unix_millis(0));
    }

    #[test]
    fn writes_what_the_format_description_writes() {
        // From year 0 to 9999 in uneven steps, and the ends outside, where the description
        // is used itself.
        let (first, last) = (-62_167_219_200_000_i64, 253_402_300_799_999_i64);
        let mut ms = first - 86_400_000;
        while ms <= last + 86_400_000 {
            let t = Timestamp::from_unix_millis(ms);
            assert_eq!(t.to_string(), t.0.format(FORMAT).unwrap(), "{ms}");
            ms += 7_777_777_777;
        }
        for ms in [first, last, -1, 0, 999, 1_000] {
            let t = Timestamp::from_unix_millis(ms);
            assert_eq!(t.to_string(), t.0.format(FORMAT).unwrap(), "{ms}");
        }
    }
}
