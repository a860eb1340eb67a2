//! The monthly partitions of `click_events` on PostgreSQL: made ahead of the months they hold and
//! back to the retention horizon, dropped whole once retention has passed them (a `DROP TABLE`
//! instead of deleting rows).

use diesel::prelude::*;
use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use shortlink_domain::Timestamp;
use time::{Date, Month, OffsetDateTime};

use crate::StorageError;

/// Months made ahead of the current one.
const MONTHS_AHEAD: i32 = 3;
/// Most months made behind the current one: a retention of decades would otherwise make a table
/// per month of it.
const MONTHS_BEHIND_AT_MOST: i32 = 120;

#[derive(QueryableByName)]
struct Partition {
    #[diesel(sql_type = Text)]
    name: String,
}

/// The first day of the month `offset` months from `date`'s.
fn month_start(date: Date, offset: i32) -> Date {
    let index = date.year() * 12 + i32::from(u8::from(date.month())) - 1 + offset;
    let (year, month) = (index.div_euclid(12), index.rem_euclid(12) + 1);
    let month = Month::try_from(u8::try_from(month).unwrap_or(1)).unwrap_or(Month::January);
    Date::from_calendar_date(year, month, 1).unwrap_or(date)
}

fn millis(date: Date) -> i64 {
    i64::try_from(date.midnight().assume_utc().unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

fn name(month: Date) -> String {
    format!(
        "click_events_{:04}_{:02}",
        month.year(),
        u8::from(month.month())
    )
}

/// Makes the partitions that do not exist yet, from the month of `keep_after` (the retention
/// horizon; this month without one) to [`MONTHS_AHEAD`] after this one, and drops those that end
/// at or before `keep_after`. Months behind this one are made for events written with an earlier
/// time (a history imported, a clock set back), which would otherwise land in the default
/// partition and stay there until deleted row by row.
pub(crate) async fn maintain(
    c: &mut AsyncPgConnection,
    now: Timestamp,
    keep_after: Option<Timestamp>,
) -> Result<(), StorageError> {
    let today = date_of(now)?;
    let behind = match keep_after {
        Some(horizon) => months_between(date_of(horizon)?, today).clamp(0, MONTHS_BEHIND_AT_MOST),
        None => 0,
    };
    let existing = partitions(c).await?;
    for offset in -behind..=MONTHS_AHEAD {
        let start = month_start(today, offset);
        if !existing.contains(&name(start)) {
            create(c, start).await?;
        }
    }
    let Some(keep_after) = keep_after else {
        return Ok(());
    };
    for partition in existing {
        let Some(month) = parse_name(&partition) else {
            continue;
        };
        if millis(month_start(month, 1)) <= keep_after.unix_millis() {
            c.batch_execute(&format!("DROP TABLE IF EXISTS {partition}"))
                .await?;
            tracing::info!(partition = %partition, "dropped click events past retention");
        }
    }
    Ok(())
}

/// The UTC date of `at`.
fn date_of(at: Timestamp) -> Result<Date, StorageError> {
    Ok(OffsetDateTime::from_unix_timestamp(at.unix_seconds())
        .map_err(|_| StorageError::Corrupt("the clock is out of range"))?
        .date())
}

/// Whole months from `earlier`'s month to `later`'s (negative when `earlier` is later).
fn months_between(earlier: Date, later: Date) -> i32 {
    let index = |d: Date| d.year() * 12 + i32::from(u8::from(d.month()));
    index(later) - index(earlier)
}

/// The names of `click_events`' partitions (the default one included).
async fn partitions(c: &mut AsyncPgConnection) -> Result<Vec<String>, StorageError> {
    let partitions: Vec<Partition> = diesel::sql_query(
        "SELECT c.relname AS name FROM pg_inherits i \
         JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent \
         WHERE p.relname = 'click_events'",
    )
    .load(c)
    .await?;
    Ok(partitions.into_iter().map(|p| p.name).collect())
}

#[derive(QueryableByName)]
struct Held {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    held: bool,
}

/// Makes the partition of the month beginning at `start`, unless the default partition holds
/// events of that month (written before the partition existed): PostgreSQL would refuse, after
/// locking the whole table (ACCESS EXCLUSIVE) to scan the default partition for them. That month
/// stays in the default partition, where retention deletes its rows in batches; looking first
/// is one probe of the default partition's time index.
async fn create(c: &mut AsyncPgConnection, start: Date) -> Result<(), StorageError> {
    let (from, to) = (millis(start), millis(month_start(start, 1)));
    let held: Held = diesel::sql_query(format!(
        "SELECT EXISTS (SELECT 1 FROM click_events_default \
         WHERE occurred_at >= {from} AND occurred_at < {to}) AS held"
    ))
    .get_result(c)
    .await?;
    if held.held {
        tracing::debug!(partition = %name(start), "events of this month are in the default partition");
        return Ok(());
    }
    let sql = format!(
        "CREATE TABLE IF NOT EXISTS {} PARTITION OF click_events FOR VALUES FROM ({from}) TO ({to})",
        name(start),
    );
    // Still fails if events of that month are written between the look and the creation: tried
    // again at the next upkeep. `IF NOT EXISTS` is no guard against another instance creating
    // the same partition at the same moment (both pass the check): that one did the work.
    match c.batch_execute(&sql).await {
        Err(e) if e.to_string().contains("already exists") => {
            tracing::debug!(partition = %name(start), "another instance made this partition");
        }
        Err(e) => {
            tracing::warn!(error = %e, partition = %name(start), "could not create a partition of click_events");
        }
        Ok(()) => {}
    }
    Ok(())
}

/// The month of a partition named `click_events_YYYY_MM`.
fn parse_name(name: &str) -> Option<Date> {
    let rest = name.strip_prefix("click_events_")?;
    let (year, month) = rest.split_once('_')?;
    let month = Month::try_from(month.parse::<u8>().ok()?).ok()?;
    Date::from_calendar_date(year.parse().ok()?, month, 1).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_roll_over_years_and_names_round_trip() {
        let date = Date::from_calendar_date(2026, Month::November, 24).expect("a date");
        assert_eq!(
            month_start(date, 0),
            Date::from_calendar_date(2026, Month::November, 1).expect("a date")
        );
        assert_eq!(
            month_start(date, 2),
            Date::from_calendar_date(2027, Month::January, 1).expect("a date")
        );
        assert_eq!(
            month_start(date, -11),
            Date::from_calendar_date(2025, Month::December, 1).expect("a date")
        );
        assert_eq!(name(month_start(date, 2)), "click_events_2027_01");
        assert_eq!(
            parse_name("click_events_2027_01"),
            Some(month_start(date, 2))
        );
        assert_eq!(parse_name("click_events_default"), None);
        assert_eq!(
            millis(Date::from_calendar_date(1970, Month::January, 2).expect("a date")),
            86_400_000
        );
    }

    #[test]
    fn months_between_counts_across_years() {
        let day = |y, m, d| Date::from_calendar_date(y, m, d).expect("a date");
        assert_eq!(
            months_between(
                day(2025, Month::October, 20),
                day(2026, Month::November, 24)
            ),
            13
        );
        assert_eq!(
            months_between(
                day(2026, Month::November, 30),
                day(2026, Month::November, 1)
            ),
            0
        );
        assert_eq!(
            months_between(day(2026, Month::December, 1), day(2026, Month::November, 1)),
            -1
        );
    }
}
