//! Analytics rollups: per workspace, UTC day and dimension value, the day's clicks and distinct
//! visitors (table `click_rollups`). The visitor hash's key changes every UTC day, so distinct
//! visitors add up across days and a range of whole days is answered from these rows; the rest
//! of a range is read from the events (`analytics.rs` splits a query in the two).
//!
//! A day is rolled up by the upkeep once it has been over for a while (`Store::roll_up_analytics`), all
//! workspaces at once. Its events may still change after that: a flush carrying clicks of an
//! earlier day (clicks retried after an outage, a journal replayed after a crash) and a link's
//! deletion mark the day stale (`click_rollup_stale`), and a stale day is read from its events
//! until it is rolled up again.

use diesel::dsl::{count, count_star, sql};
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

use shortlink_domain::Timestamp;

use super::{Conn, insert_rollup_rows, write_transaction};
use crate::StorageError;
use crate::model::{ClickBatch, DAY, Dimension};
use crate::rows::RollupRow;
use crate::schema::{
    click_events as events, click_rollup_days as rolled, click_rollup_stale as stale,
    click_rollups as rollups, links,
};

/// Most rolled-up days one query uses (each is a bound parameter; SQLite takes 32,766); the
/// days of a longer range beyond them are read from the events.
const MOST_DAYS: i64 = 20_000;

/// Rollup rows written per insert statement (6 parameters each).
const INSERT_CHUNK: usize = 1000;

/// The dimension name of the rows that count everything.
pub(crate) const TOTAL: &str = "total";

/// The rollups' name of `dimension`; `None` for `links`, which has no rollup (a workspace may
/// have as many links as clicks a day, so a per-link rollup would be no smaller than the events).
pub(crate) fn rolled_up_as(dimension: Dimension) -> Option<&'static str> {
    Some(match dimension {
        Dimension::Country => "country",
        Dimension::City => "city",
        Dimension::Device => "device",
        Dimension::Browser => "browser",
        Dimension::Os => "os",
        Dimension::Referrer => "referrer",
        Dimension::Link => return None,
    })
}

/// The rolled-up days in `[first, end)` that are not stale, in order: what a query may read
/// from the rollups.
pub(crate) async fn usable_days(
    c: &mut Conn,
    first: i64,
    end: i64,
) -> Result<Vec<i64>, StorageError> {
    Ok(rolled::table
        .filter(rolled::day.ge(first).and(rolled::day.lt(end)))
        .filter(diesel::dsl::not(
            rolled::day.eq_any(stale::table.select(stale::day)),
        ))
        .select(rolled::day)
        .order(rolled::day)
        .limit(MOST_DAYS)
        .load(c)
        .await?)
}

/// One scope's rows on `days`: `(day, clicks, visitors)`. `value` `None` reads the totals
/// (`dimension` is then [`TOTAL`]); a day without clicks has no row.
pub(crate) async fn rolled_up_days(
    c: &mut Conn,
    workspace: &str,
    dimension: &str,
    value: Option<&str>,
    days: &[i64],
) -> Result<Vec<(i64, i64, i64)>, StorageError> {
    let mut query = rollups::table
        .filter(rollups::workspace_id.eq(workspace))
        .filter(rollups::dimension.eq(dimension))
        .filter(rollups::day.eq_any(days))
        .select((rollups::day, rollups::clicks, rollups::visitors))
        .into_boxed();
    if let Some(value) = value {
        query = query.filter(rollups::value.eq(value));
    }
    Ok(query.load(c).await?)
}

/// One dimension's rows on `days`, added up by value: `(value, clicks, visitors)`.
pub(crate) async fn rolled_up_values(
    c: &mut Conn,
    workspace: &str,
    dimension: &str,
    days: &[i64],
) -> Result<Vec<(Option<String>, i64, i64)>, StorageError> {
    // Cast: PostgreSQL's SUM of BIGINT is NUMERIC.
    Ok(rollups::table
        .filter(rollups::workspace_id.eq(workspace))
        .filter(rollups::dimension.eq(dimension))
        .filter(rollups::day.eq_any(days))
        .group_by(rollups::value)
        .select((
            rollups::value,
            sql::<BigInt>("CAST(SUM(clicks) AS BIGINT)"),
            sql::<BigInt>("CAST(SUM(visitors) AS BIGINT)"),
        ))
        .load(c)
        .await?)
}

/// The events of `$day`, each with its link (a deleted link's are left out, as the queries
/// leave them out).
macro_rules! events_of_day {
    ($day:expr) => {
        events::table
            .inner_join(links::table.on(links::seq.eq(events::link_seq)))
            .filter(events::occurred_at.ge($day * DAY))
            .filter(events::occurred_at.lt(($day + 1) * DAY))
    };
}

/// The events of `$day` grouped by workspace and `$column`, as rollup rows of `$dimension`.
macro_rules! day_by {
    ($c:expr, $day:expr, $dimension:expr, $column:expr) => {
        events_of_day!($day)
            .group_by((links::workspace_id, $column))
            .select((
                links::workspace_id,
                $column.nullable(),
                count_star(),
                count(events::visitor).aggregate_distinct(),
            ))
            .load::<(String, Option<String>, i64, i64)>($c)
            .await?
            .into_iter()
            .map(|(workspace_id, value, clicks, visitors)| RollupRow {
                workspace_id,
                day: $day,
                // Never `links`: it has no column here.
                dimension: rolled_up_as($dimension).unwrap_or(TOTAL),
                value,
                clicks,
                visitors,
            })
    };
}

/// Every rollup row of `day`, computed from its events.
pub(crate) async fn day_rollup(c: &mut Conn, day: i64) -> Result<Vec<RollupRow>, StorageError> {
    let mut rows: Vec<RollupRow> = events_of_day!(day)
        .group_by(links::workspace_id)
        .select((
            links::workspace_id,
            count_star(),
            count(events::visitor).aggregate_distinct(),
        ))
        .load::<(String, i64, i64)>(c)
        .await?
        .into_iter()
        .map(|(workspace_id, clicks, visitors)| RollupRow {
            workspace_id,
            day,
            dimension: TOTAL,
            value: None,
            clicks,
            visitors,
        })
        .collect();
    for dimension in Dimension::ALL {
        match dimension {
            Dimension::Country => rows.extend(day_by!(c, day, dimension, events::country)),
            Dimension::City => rows.extend(day_by!(c, day, dimension, events::city)),
            Dimension::Device => rows.extend(day_by!(c, day, dimension, events::device)),
            Dimension::Browser => rows.extend(day_by!(c, day, dimension, events::browser)),
            Dimension::Os => rows.extend(day_by!(c, day, dimension, events::os)),
            Dimension::Referrer => rows.extend(day_by!(c, day, dimension, events::referrer)),
            // No rollup (`rolled_up_as`).
            Dimension::Link => {}
        }
    }
    Ok(rows)
}

/// `day`'s stale mark's version, if it is marked.
pub(crate) async fn stale_version(c: &mut Conn, day: i64) -> Result<Option<i64>, StorageError> {
    Ok(stale::table
        .filter(stale::day.eq(day))
        .select(stale::version)
        .get_result(c)
        .await
        .optional()?)
}

/// Replaces `day`'s rollup with `rows` and marks it rolled up, in one transaction; clears its
/// stale mark if it is still the one read (`seen`) before `rows` were computed.
pub(crate) async fn replace_day(
    c: &mut Conn,
    day: i64,
    rows: &[RollupRow],
    seen: Option<i64>,
) -> Result<(), StorageError> {
    write_transaction(c, async |c| -> Result<(), StorageError> {
        // First, and an update if the day is there: two instances rolling up the same day
        // (PostgreSQL) take turns instead of both inserting its rows.
        diesel::insert_into(rolled::table)
            .values(rolled::day.eq(day))
            .on_conflict(rolled::day)
            .do_update()
            .set(rolled::day.eq(day))
            .execute(c)
            .await?;
        diesel::delete(rollups::table.filter(rollups::day.eq(day)))
            .execute(c)
            .await?;
        for chunk in rows.chunks(INSERT_CHUNK) {
            insert_rollup_rows(c, chunk.to_vec()).await?;
        }
        if let Some(version) = seen {
            diesel::delete(stale::table.filter(stale::day.eq(day).and(stale::version.eq(version))))
                .execute(c)
                .await?;
        }
        Ok(())
    })
    .await
}

/// The days in `[first, end)` to roll up: those not rolled up yet, and the stale ones.
pub(crate) async fn days_to_roll_up(
    c: &mut Conn,
    first: i64,
    end: i64,
) -> Result<Vec<i64>, StorageError> {
    let usable = usable_days(c, first, end).await?;
    let mut usable = usable.into_iter().peekable();
    Ok((first..end)
        .filter(|day| {
            while usable.next_if(|u| u < day).is_some() {}
            usable.next_if_eq(day).is_none()
        })
        .collect())
}

/// The day of the oldest event, if there is one.
pub(crate) async fn first_event_day(c: &mut Conn) -> Result<Option<i64>, StorageError> {
    let oldest: Option<i64> = events::table
        .select(diesel::dsl::min(events::occurred_at))
        .get_result(c)
        .await?;
    Ok(oldest.map(|at| at.div_euclid(DAY)))
}

/// Marks `days` stale (their events changed), rolled up or not: a roll-up of the day under way
/// has read no mark and may have read the events before this change, and the mark keeps the day
/// to be rolled up again (a mark on a day not rolled up is cleared by its first roll-up).
pub(crate) async fn mark_stale(c: &mut Conn, days: &[i64]) -> Result<(), StorageError> {
    for &day in days {
        diesel::insert_into(stale::table)
            .values((stale::day.eq(day), stale::version.eq(1)))
            .on_conflict(stale::day)
            .do_update()
            .set(stale::version.eq(stale::version + 1))
            .execute(c)
            .await?;
    }
    Ok(())
}

/// Marks stale the days `batch`'s clicks fall on that may be rolled up already: the days before
/// today (written late), and later ones found rolled up, which another instance whose clock is
/// ahead of this one's (or this one, before its clock was set back) rolled up. Checking the
/// rollups for every day would cost each flush a query for nothing; today's is the one that
/// might be there without this clock knowing.
pub(crate) async fn mark_late_days_stale(
    c: &mut Conn,
    batch: &ClickBatch,
) -> Result<(), StorageError> {
    let today = Timestamp::now().unix_millis().div_euclid(DAY);
    let mut days: Vec<i64> = (batch.links.iter())
        .flat_map(|link| &link.clicks)
        .map(|event| event.click.timestamp.unix_millis().div_euclid(DAY))
        .collect();
    days.sort_unstable();
    days.dedup();
    let since_today = days.partition_point(|&day| day < today);
    if since_today < days.len() {
        let rolled_up: Vec<i64> = rolled::table
            .filter(rolled::day.eq_any(&days[since_today..]))
            .select(rolled::day)
            .load(c)
            .await?;
        days.truncate(since_today);
        days.extend(rolled_up);
    }
    if days.is_empty() {
        return Ok(());
    }
    mark_stale(c, &days).await
}

/// Marks stale the days with events of the link `seq` (it is being deleted).
pub(crate) async fn mark_link_days_stale(c: &mut Conn, seq: i64) -> Result<(), StorageError> {
    let days: Vec<i64> = events::table
        .filter(events::link_seq.eq(seq))
        .select(events::occurred_at / DAY)
        .distinct()
        .load(c)
        .await?;
    mark_stale(c, &days).await
}

/// Forgets the rollups of the days before `day` (retention has passed them) and marks `day`
/// stale: retention deletes its older events, so it is rolled up again from what is left.
pub(crate) async fn forget_rollups_before(c: &mut Conn, day: i64) -> Result<(), StorageError> {
    write_transaction(c, async |c| -> Result<(), StorageError> {
        diesel::delete(rollups::table.filter(rollups::day.lt(day)))
            .execute(c)
            .await?;
        diesel::delete(rolled::table.filter(rolled::day.lt(day)))
            .execute(c)
            .await?;
        diesel::delete(stale::table.filter(stale::day.lt(day)))
            .execute(c)
            .await?;
        mark_stale(c, &[day]).await
    })
    .await
}
