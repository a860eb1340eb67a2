//! Click events: written with the click counters, read by the analytics API, trimmed by
//! retention. Which query reads what (one index, `(link_seq, occurred_at)`; a workspace's events
//! are its links'):
//! - totals and breakdowns: one aggregate over the range, grouped by the dimension;
//! - time series: one aggregate per run of equally long buckets (the caller's buckets follow a
//!   time zone: a day with a daylight-saving change, or a month, is a run of its own), grouped
//!   by bucket number;
//! - export: pages of events in (time, id) order, 5,000 at a time.

use std::collections::HashMap;
use std::sync::Arc;

use diesel::dsl::{count, count_star};
use diesel::expression::BoxableExpression;
use diesel::prelude::*;
use diesel::sql_types::Bool;
use diesel_async::RunQueryDsl;
use shortlink_domain::Timestamp;

use super::{Backend, Conn, insert_event_rows};
use crate::StorageError;
use crate::model::{ClickBatch, Dimension, EventFilter, ExportedEvent, Tally};
use crate::schema::{analytics_secret, click_events as events, links};

/// Rows per insert statement (12 parameters each: well under SQLite's 32,766).
const INSERT_CHUNK: usize = 1000;

/// Writes every click of `batch` as an event; part of the flush's transaction.
pub(crate) async fn insert_click_events(
    c: &mut Conn,
    batch: &Arc<ClickBatch>,
) -> Result<(), StorageError> {
    Ok(insert_event_rows(c, batch.clone(), INSERT_CHUNK).await?)
}

/// The secret daily visitor keys derive from (written by the migration).
pub(crate) async fn read_analytics_secret(c: &mut Conn) -> Result<String, StorageError> {
    Ok(analytics_secret::table
        .select(analytics_secret::secret)
        .get_result(c)
        .await?)
}

/// The condition of the events `filter` selects.
type Condition<'a> = Box<dyn BoxableExpression<events::table, Backend, SqlType = Bool> + 'a>;

fn selected(filter: &EventFilter) -> Condition<'_> {
    let during = events::occurred_at
        .ge(filter.start.unix_millis())
        .and(events::occurred_at.lt(filter.end.unix_millis()));
    let mut condition: Condition<'_> = match filter.link {
        // The caller found the link among the workspace's.
        Some(link) => Box::new(events::link_seq.eq(link.0).and(during)),
        None => Box::new(
            events::link_seq
                .eq_any(
                    links::table
                        .filter(links::workspace_id.eq(filter.workspace_id.to_string()))
                        .select(links::seq),
                )
                .and(during),
        ),
    };
    if let Some(v) = &filter.country {
        condition = Box::new(condition.and(events::country.assume_not_null().eq(v)));
    }
    if let Some(v) = &filter.city {
        condition = Box::new(condition.and(events::city.assume_not_null().eq(v)));
    }
    if let Some(v) = &filter.device {
        condition = Box::new(condition.and(events::device.eq(v)));
    }
    if let Some(v) = &filter.browser {
        condition = Box::new(condition.and(events::browser.assume_not_null().eq(v)));
    }
    if let Some(v) = &filter.os {
        condition = Box::new(condition.and(events::os.assume_not_null().eq(v)));
    }
    if let Some(v) = &filter.referrer {
        condition = Box::new(condition.and(events::referrer.eq(v)));
    }
    condition
}

fn tally(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// `(key, clicks, visitors)` rows as tallies.
fn tallies<K>(rows: Vec<(K, i64, i64)>) -> Vec<Tally<K>> {
    rows.into_iter()
        .map(|(key, clicks, visitors)| Tally {
            key,
            clicks: tally(clicks),
            visitors: tally(visitors),
        })
        .collect()
}

/// Clicks and unique visitors of the events `filter` selects.
pub(crate) async fn analytics_totals(
    c: &mut Conn,
    filter: &EventFilter,
) -> Result<Tally, StorageError> {
    let (clicks, visitors): (i64, i64) = events::table
        .filter(selected(filter))
        .select((count_star(), count(events::visitor).aggregate_distinct()))
        .get_result(c)
        .await?;
    Ok(Tally {
        key: None,
        clicks: tally(clicks),
        visitors: tally(visitors),
    })
}

/// The events `filter` selects, grouped by `column`, most clicks first (ties by key, unknown
/// last, the same on both backends), at most `limit` groups.
macro_rules! grouped {
    ($c:expr, $filter:expr, $column:expr, $limit:expr) => {
        events::table
            .filter(selected($filter))
            .group_by($column)
            .select((
                $column.nullable(),
                count_star(),
                count(events::visitor).aggregate_distinct(),
            ))
            .order((
                count_star().desc(),
                $column.nullable().is_null().asc(),
                $column.nullable().asc(),
            ))
            .limit($limit)
            .load::<(Option<String>, i64, i64)>($c)
            .await?
    };
}

/// Clicks and unique visitors by `dimension`, most clicks first, at most `limit` groups.
pub(crate) async fn analytics_breakdown(
    c: &mut Conn,
    filter: &EventFilter,
    dimension: Dimension,
    limit: i64,
) -> Result<Vec<Tally>, StorageError> {
    let rows = match dimension {
        Dimension::Country => grouped!(c, filter, events::country, limit),
        Dimension::City => grouped!(c, filter, events::city, limit),
        Dimension::Device => grouped!(c, filter, events::device, limit),
        Dimension::Browser => grouped!(c, filter, events::browser, limit),
        Dimension::Os => grouped!(c, filter, events::os, limit),
        Dimension::Referrer => grouped!(c, filter, events::referrer, limit),
        Dimension::Link => return by_link(c, filter, limit).await,
    };
    Ok(tallies(rows))
}

/// The `links` breakdown: grouped by the link's row, keyed by its id (`None` once deleted).
async fn by_link(
    c: &mut Conn,
    filter: &EventFilter,
    limit: i64,
) -> Result<Vec<Tally>, StorageError> {
    let rows: Vec<(i64, i64, i64)> = events::table
        .filter(selected(filter))
        .group_by(events::link_seq)
        .select((
            events::link_seq,
            count_star(),
            count(events::visitor).aggregate_distinct(),
        ))
        .order((count_star().desc(), events::link_seq.asc()))
        .limit(limit)
        .load(c)
        .await?;
    let seqs: Vec<i64> = rows.iter().map(|(seq, _, _)| *seq).collect();
    let ids: HashMap<i64, String> = links::table
        .filter(links::seq.eq_any(&seqs))
        .select((links::seq, links::id))
        .load::<(i64, String)>(c)
        .await?
        .into_iter()
        .collect();
    Ok(rows
        .into_iter()
        .map(|(seq, clicks, visitors)| Tally {
            key: ids.get(&seq).cloned(),
            clicks: tally(clicks),
            visitors: tally(visitors),
        })
        .collect())
}

/// Clicks and unique visitors of the events `filter` selects, in buckets of `width` ms from
/// `filter.start`: `(bucket number, clicks, visitors)` for each bucket with events. The database
/// counts; nothing per event comes back (a range of millions of events loaded as pairs grew the
/// server by gigabytes).
pub(crate) async fn analytics_series(
    c: &mut Conn,
    filter: &EventFilter,
    width: i64,
) -> Result<Vec<Tally<i64>>, StorageError> {
    // Both numbers are the caller's, never text from a request. Events are at or after
    // `start`, so the division truncates as a floor would.
    let bucket = diesel::dsl::sql::<diesel::sql_types::BigInt>(&format!(
        "(occurred_at - {}) / {}",
        filter.start.unix_millis(),
        width.max(1)
    ));
    let rows: Vec<(i64, i64, i64)> = events::table
        .filter(selected(filter))
        .group_by(bucket.clone())
        .select((
            bucket,
            count_star(),
            count(events::visitor).aggregate_distinct(),
        ))
        .load(c)
        .await?;
    Ok(tallies(rows))
}

/// Up to `limit` events `filter` selects after `after` (time, id), in that order.
pub(crate) async fn export_events(
    c: &mut Conn,
    filter: &EventFilter,
    after: Option<(i64, i64)>,
    limit: i64,
) -> Result<Vec<ExportedEvent>, StorageError> {
    let mut condition = selected(filter);
    if let Some((time, id)) = after {
        condition = Box::new(
            condition.and(
                events::occurred_at
                    .gt(time)
                    .or(events::occurred_at.eq(time).and(events::id.gt(id))),
            ),
        );
    }
    type Row = (
        i64,
        i64,
        i64,
        Option<String>,
        Option<String>,
        String,
        Option<String>,
        Option<String>,
        String,
        Option<String>,
    );
    let rows: Vec<Row> = events::table
        .filter(condition)
        .select((
            events::id,
            events::occurred_at,
            events::link_seq,
            events::country,
            events::city,
            events::device,
            events::browser,
            events::os,
            events::referrer,
            events::referrer_url,
        ))
        .order((events::occurred_at.asc(), events::id.asc()))
        .limit(limit)
        .load(c)
        .await?;
    let mut seqs: Vec<i64> = rows.iter().map(|row| row.2).collect();
    seqs.sort_unstable();
    seqs.dedup();
    let known: HashMap<i64, (String, String)> = links::table
        .filter(links::seq.eq_any(&seqs))
        .select((links::seq, links::id, links::short_code))
        .load::<(i64, String, String)>(c)
        .await?
        .into_iter()
        .map(|(seq, id, code)| (seq, (id, code)))
        .collect();
    Ok(rows
        .into_iter()
        .map(|row| {
            let (id, time, seq, country, city, device, browser, os, referrer, referrer_url) = row;
            let link = known.get(&seq);
            ExportedEvent {
                position: (time, id),
                timestamp: Timestamp::from_unix_millis(time),
                link_id: link.map(|(id, _)| id.clone()),
                short_code: link.map(|(_, code)| code.clone()),
                country,
                city,
                device,
                browser,
                os,
                referrer,
                referrer_url,
            }
        })
        .collect())
}

/// Deletes up to `limit` events older than `before` (ms); returns how many.
pub(crate) async fn delete_events_before(
    c: &mut Conn,
    before: i64,
    limit: i64,
) -> Result<usize, StorageError> {
    let doomed: Vec<i64> = events::table
        .filter(events::occurred_at.lt(before))
        .select(events::id)
        .limit(limit)
        .load(c)
        .await?;
    if doomed.is_empty() {
        return Ok(0);
    }
    Ok(
        diesel::delete(events::table.filter(events::id.eq_any(&doomed)))
            .execute(c)
            .await?,
    )
}
