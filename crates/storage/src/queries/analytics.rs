//! Click events: written with the click counters, read by the analytics API, trimmed by
//! retention. Which query reads what (a link's events are found by `(link_seq, occurred_at)`, a
//! workspace's through its links; `rollups.rs` holds per-day rollups of each workspace):
//! - a range is split ([`split`]) into the whole UTC days it holds that are rolled up and not
//!   stale, read from the rollups, and the rest (its edges, today, stale days), read from the
//!   events; rollups answer a workspace's queries with at most one filter (totals and time
//!   series) or none (breakdowns other than `links`), the rest reads only events;
//! - totals and breakdowns: the rollup rows of the days added up, and one aggregate over the
//!   rest of the range, grouped by the dimension;
//! - time series: per run of equally long buckets (the caller's buckets follow a time zone: a
//!   day with a daylight-saving change, or a month, is a run of its own), the rollup rows of the
//!   days when every bucket is made of whole UTC days, and the rest grouped by bucket number;
//! - export: pages of events in (time, id) order, 2,000 at a time, each seeking to where the
//!   last one ended on the time index.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use diesel::dsl::{count, count_star};
use diesel::expression::{AppearsOnTable, BoxableExpression, ValidGrouping};
use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment};
use diesel::sql_types::Bool;
use diesel_async::RunQueryDsl;
use shortlink_domain::Timestamp;

use super::rollups::{TOTAL, rolled_up_as, rolled_up_days, rolled_up_values, usable_days};
use super::{Backend, Conn, EXPORT_JOINS_LINKS, IN_BYTE_ORDER, insert_event_rows, load_rows};
use crate::StorageError;
use crate::model::{ClickBatch, DAY, Dimension, EventFilter, ExportedEvent, Tally};
use crate::schema::{analytics_secret, click_events as events, links};

/// Writes every click of `batch` as an event; part of the flush's transaction.
pub(crate) async fn insert_click_events(
    c: &mut Conn,
    batch: &Arc<ClickBatch>,
) -> Result<(), StorageError> {
    Ok(insert_event_rows(c, batch.clone()).await?)
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

/// Applies `$apply!` (a macro of the caller's, adding a condition to its query) to each of
/// `$filter`'s equality filters. The values are copied: a query that owns them can be sent to
/// SQLite's connection thread (the export's pages, `load_rows`).
macro_rules! for_each_filter {
    ($filter:expr, $apply:ident) => {
        if let Some(v) = &$filter.country {
            $apply!(events::country.assume_not_null().eq(v.clone()));
        }
        if let Some(v) = &$filter.city {
            $apply!(events::city.assume_not_null().eq(v.clone()));
        }
        if let Some(v) = &$filter.device {
            $apply!(events::device.eq(v.clone()));
        }
        if let Some(v) = &$filter.browser {
            $apply!(events::browser.assume_not_null().eq(v.clone()));
        }
        if let Some(v) = &$filter.os {
            $apply!(events::os.assume_not_null().eq(v.clone()));
        }
        if let Some(v) = &$filter.referrer {
            $apply!(events::referrer.eq(v.clone()));
        }
    };
}

/// The events `filter` selects within `ranges` (`[start, end)` pieces of its range; none: the
/// whole range).
fn selected<'a>(filter: &'a EventFilter, ranges: &[(i64, i64)]) -> Condition<'a> {
    let within = |&(start, end): &(i64, i64)| -> Condition<'a> {
        Box::new(
            events::occurred_at
                .ge(start)
                .and(events::occurred_at.lt(end)),
        )
    };
    let mut during = ranges.first().map_or_else(
        || within(&(filter.start.unix_millis(), filter.end.unix_millis())),
        within,
    );
    for range in ranges.iter().skip(1) {
        during = Box::new(during.or(within(range)));
    }
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
    macro_rules! and {
        ($e:expr) => {
            condition = Box::new(condition.and($e))
        };
    }
    for_each_filter!(filter, and);
    condition
}

/// The rollup rows that answer totals and time series for `filter`: a workspace's totals, or
/// the rows of its one filter's value. `None` when they cannot (one link, several filters).
fn rollup_scope(filter: &EventFilter) -> Option<(&'static str, Option<&str>)> {
    if filter.link.is_some() {
        return None;
    }
    let set: Vec<(&'static str, &str)> = (Dimension::ALL.into_iter())
        .filter_map(|dimension| Some((rolled_up_as(dimension)?, filter.value(dimension)?)))
        .collect();
    match set.as_slice() {
        [] => Some((TOTAL, None)),
        [(dimension, value)] => Some((dimension, Some(value))),
        _ => None,
    }
}

/// How a query's range divides between the rollups and the events.
struct Split {
    /// The whole UTC days of the range that are rolled up and not stale.
    days: Vec<i64>,
    /// The rest of the range, in `[start, end)` pieces, oldest first.
    rest: Vec<(i64, i64)>,
}

/// Splits `filter`'s range; all of it is left to the events unless `rollups` says they can
/// answer.
async fn split(c: &mut Conn, filter: &EventFilter, rollups: bool) -> Result<Split, StorageError> {
    let (start, end) = (filter.start.unix_millis(), filter.end.unix_millis());
    let first = start.div_euclid(DAY) + i64::from(start.rem_euclid(DAY) != 0);
    let days = if rollups && first < end.div_euclid(DAY) {
        usable_days(c, first, end.div_euclid(DAY)).await?
    } else {
        Vec::new()
    };
    let mut rest = Vec::new();
    let mut from = start;
    for day in &days {
        if day * DAY > from {
            rest.push((from, day * DAY));
        }
        from = (day + 1) * DAY;
    }
    if end > from {
        rest.push((from, end));
    }
    Ok(Split { days, rest })
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

/// `(key, clicks, visitors)` rows from the rollups and from the events, added up by key.
struct Sums<K>(BTreeMap<K, (i64, i64)>);

impl<K: Ord> Sums<K> {
    fn new() -> Self {
        Self(BTreeMap::new())
    }

    fn add(&mut self, rows: impl IntoIterator<Item = (K, i64, i64)>) {
        for (key, clicks, visitors) in rows {
            let sum = self.0.entry(key).or_default();
            sum.0 += clicks;
            sum.1 += visitors;
        }
    }

    fn into_rows(self) -> Vec<(K, i64, i64)> {
        (self.0.into_iter())
            .map(|(key, (clicks, visitors))| (key, clicks, visitors))
            .collect()
    }
}

/// The rollup rows of `scope` (from [`rollup_scope`]) on `days`: `(day, clicks, visitors)`.
async fn rolled_up(
    c: &mut Conn,
    filter: &EventFilter,
    scope: Option<(&'static str, Option<&str>)>,
    days: &[i64],
) -> Result<Vec<(i64, i64, i64)>, StorageError> {
    match scope {
        Some((dimension, value)) if !days.is_empty() => {
            let workspace = filter.workspace_id.to_string();
            rolled_up_days(c, &workspace, dimension, value, days).await
        }
        _ => Ok(Vec::new()),
    }
}

/// Clicks and unique visitors of the events `filter` selects.
pub(crate) async fn analytics_totals(
    c: &mut Conn,
    filter: &EventFilter,
) -> Result<Tally, StorageError> {
    let scope = rollup_scope(filter);
    let split = split(c, filter, scope.is_some()).await?;
    let (mut clicks, mut visitors) = (0, 0);
    for (_, day_clicks, day_visitors) in rolled_up(c, filter, scope, &split.days).await? {
        clicks += day_clicks;
        visitors += day_visitors;
    }
    if !split.rest.is_empty() {
        let (rest_clicks, rest_visitors): (i64, i64) = events::table
            .filter(selected(filter, &split.rest))
            .select((count_star(), count(events::visitor).aggregate_distinct()))
            .get_result(c)
            .await?;
        clicks += rest_clicks;
        visitors += rest_visitors;
    }
    Ok(Tally {
        key: None,
        clicks: tally(clicks),
        visitors: tally(visitors),
    })
}

/// The events `filter` selects within `ranges`, grouped by `column`, most clicks first (ties by
/// key, unknown last, the same on both backends), at most `limit` groups.
macro_rules! grouped {
    ($c:expr, $filter:expr, $ranges:expr, $column:expr, $limit:expr) => {
        events::table
            .filter(selected($filter, $ranges))
            .group_by($column)
            .select((
                $column.nullable(),
                count_star(),
                count(events::visitor).aggregate_distinct(),
            ))
            .order((
                count_star().desc(),
                $column.nullable().is_null().asc(),
                InByteOrder($column.nullable()).asc(),
            ))
            .limit($limit)
            .load::<(Option<String>, i64, i64)>($c)
            .await?
    };
}

/// `E`, ordered by its bytes whatever the database's collation: in the order an answer from
/// rollups is sorted in (Rust's `str` order), so ties, and which of them a `limit` keeps, are
/// the same whether or not the days are rolled up.
#[derive(Debug, Clone, Copy, diesel::query_builder::QueryId)]
struct InByteOrder<E>(E);

impl<E: Expression> Expression for InByteOrder<E> {
    type SqlType = E::SqlType;
}

impl<E: QueryFragment<Backend>> QueryFragment<Backend> for InByteOrder<E> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Backend>) -> QueryResult<()> {
        self.0.walk_ast(out.reborrow())?;
        out.push_sql(IN_BYTE_ORDER);
        Ok(())
    }
}

impl<E: AppearsOnTable<QS>, QS> AppearsOnTable<QS> for InByteOrder<E> {}

impl<E: SelectableExpression<QS>, QS> SelectableExpression<QS> for InByteOrder<E> {}

impl<E: ValidGrouping<GB>, GB> ValidGrouping<GB> for InByteOrder<E> {
    type IsAggregate = E::IsAggregate;
}

/// The events `filter` selects within `ranges` by `dimension` (not `links`), at most `limit`
/// groups.
async fn events_by(
    c: &mut Conn,
    filter: &EventFilter,
    ranges: &[(i64, i64)],
    dimension: Dimension,
    limit: i64,
) -> Result<Vec<(Option<String>, i64, i64)>, StorageError> {
    Ok(match dimension {
        Dimension::Country => grouped!(c, filter, ranges, events::country, limit),
        Dimension::City => grouped!(c, filter, ranges, events::city, limit),
        Dimension::Device => grouped!(c, filter, ranges, events::device, limit),
        Dimension::Browser => grouped!(c, filter, ranges, events::browser, limit),
        Dimension::Os => grouped!(c, filter, ranges, events::os, limit),
        Dimension::Referrer => grouped!(c, filter, ranges, events::referrer, limit),
        // Keyed by the link's id: `by_link`.
        Dimension::Link => Vec::new(),
    })
}

/// Clicks and unique visitors by `dimension`, most clicks first, at most `limit` groups.
pub(crate) async fn analytics_breakdown(
    c: &mut Conn,
    filter: &EventFilter,
    dimension: Dimension,
    limit: i64,
) -> Result<Vec<Tally>, StorageError> {
    let Some(name) = rolled_up_as(dimension) else {
        return by_link(c, filter, limit).await;
    };
    let unfiltered = rollup_scope(filter) == Some((TOTAL, None));
    let split = split(c, filter, unfiltered).await?;
    if split.days.is_empty() {
        return Ok(tallies(
            events_by(c, filter, &split.rest, dimension, limit).await?,
        ));
    }
    let mut sums = Sums::new();
    let workspace = filter.workspace_id.to_string();
    sums.add(rolled_up_values(c, &workspace, name, &split.days).await?);
    if !split.rest.is_empty() {
        sums.add(events_by(c, filter, &split.rest, dimension, i64::MAX).await?);
    }
    let mut rows = sums.into_rows();
    // The order the events' query gives: most clicks, unknown last, then by key.
    rows.sort_by(|a, b| {
        (b.1.cmp(&a.1))
            .then(a.0.is_none().cmp(&b.0.is_none()))
            .then(a.0.cmp(&b.0))
    });
    rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(tallies(rows))
}

/// The `links` breakdown: grouped by the link's row, keyed by its id (`None` once deleted).
async fn by_link(
    c: &mut Conn,
    filter: &EventFilter,
    limit: i64,
) -> Result<Vec<Tally>, StorageError> {
    let rows: Vec<(i64, i64, i64)> = events::table
        .filter(selected(filter, &[]))
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
/// `origin` (at or before `filter.start`): `(bucket number, clicks, visitors)` for each bucket
/// with events. The database counts; nothing per event comes back (a range of millions of events
/// loaded as pairs grew the server by gigabytes).
pub(crate) async fn analytics_series(
    c: &mut Conn,
    filter: &EventFilter,
    origin: i64,
    width: i64,
) -> Result<Vec<Tally<i64>>, StorageError> {
    let width = width.max(1);
    // Rollups answer when every bucket is made of whole UTC days (a day the range cuts is read
    // from the events, `split`).
    let scope = rollup_scope(filter).filter(|_| origin.rem_euclid(DAY) == 0 && width % DAY == 0);
    let split = split(c, filter, scope.is_some()).await?;
    let mut sums = Sums::new();
    sums.add(
        (rolled_up(c, filter, scope, &split.days).await?.into_iter())
            .map(|(day, clicks, visitors)| ((day * DAY - origin) / width, clicks, visitors)),
    );
    if !split.rest.is_empty() {
        // Both numbers are the caller's, never text from a request. Events are at or after
        // `origin`, so the division truncates as a floor would.
        let bucket = diesel::dsl::sql::<diesel::sql_types::BigInt>(&format!(
            "(occurred_at - {origin}) / {width}"
        ));
        let rows: Vec<(i64, i64, i64)> = events::table
            .filter(selected(filter, &split.rest))
            .group_by(bucket.clone())
            .select((
                bucket,
                count_star(),
                count(events::visitor).aggregate_distinct(),
            ))
            .load(c)
            .await?;
        sums.add(rows);
    }
    Ok(tallies(sums.into_rows()))
}

/// Up to `limit` events `filter` selects after `after` (time, id), in that order, each with its
/// link's id and code, read in the same statement: joined with the links on PostgreSQL, looked
/// up by subqueries on SQLite ([`EXPORT_JOINS_LINKS`]); either way the database walks the
/// events' time index from where the last page ended and stops after `limit`.
pub(crate) async fn export_events(
    c: &mut Conn,
    filter: &EventFilter,
    after: Option<(i64, i64)>,
    limit: i64,
) -> Result<Vec<ExportedEvent>, StorageError> {
    // The page starts at the last one's time: a range the time index seeks to, instead of
    // reading every earlier event of the export again to skip it.
    let from = after.map_or(filter.start.unix_millis(), |(time, _)| time);
    let workspace = filter.workspace_id.to_string();
    // The conditions and order both forms share.
    macro_rules! page {
        ($query:expr) => {{
            let mut query = $query
                .filter(events::occurred_at.ge(from))
                .filter(events::occurred_at.lt(filter.end.unix_millis()))
                .order((events::occurred_at.asc(), events::id.asc()))
                .limit(limit)
                .into_boxed();
            if let Some(link) = filter.link {
                query = query.filter(events::link_seq.eq(link.0));
            }
            if let Some((time, id)) = after {
                query = query.filter(
                    events::occurred_at
                        .gt(time)
                        .or(events::occurred_at.eq(time).and(events::id.gt(id))),
                );
            }
            macro_rules! and {
                ($e:expr) => {
                    query = query.filter($e)
                };
            }
            for_each_filter!(filter, and);
            query
        }};
    }
    let rows: Vec<ExportRow> = if EXPORT_JOINS_LINKS {
        let page = page!(
            events::table
                .inner_join(links::table.on(links::seq.eq(events::link_seq)))
                .filter(links::workspace_id.eq(workspace))
                .select((
                    events::id,
                    events::occurred_at,
                    links::id.nullable(),
                    links::short_code.nullable(),
                    EVENT_COLUMNS,
                ))
        );
        load_rows(c, page).await?
    } else {
        let of_link = links::table.filter(links::seq.eq(events::link_seq));
        let page = page!(
            events::table
                .filter((of_link.select(links::workspace_id).single_value()).eq(workspace))
                .select((
                    events::id,
                    events::occurred_at,
                    of_link.select(links::id).single_value(),
                    of_link.select(links::short_code).single_value(),
                    EVENT_COLUMNS,
                ))
        );
        load_rows(c, page).await?
    };
    Ok(rows
        .into_iter()
        .map(|(id, time, link_id, short_code, fields)| {
            let (country, city, device, browser, os, referrer, referrer_url) = fields;
            ExportedEvent {
                position: (time, id),
                timestamp: Timestamp::from_unix_millis(time),
                link_id: link_id.unwrap_or_default(),
                short_code: short_code.unwrap_or_default(),
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

/// An event's own columns as exported.
const EVENT_COLUMNS: (
    events::country,
    events::city,
    events::device,
    events::browser,
    events::os,
    events::referrer,
    events::referrer_url,
) = (
    events::country,
    events::city,
    events::device,
    events::browser,
    events::os,
    events::referrer,
    events::referrer_url,
);

/// One exported event as read: id, time, its link's id and code, and [`EVENT_COLUMNS`]. The id
/// and code are `Option` because SQLite's subqueries are nullable (the join's columns are made
/// so to match); never `None` in fact: the workspace condition leaves out an event whose link
/// is gone.
type ExportRow = (
    i64,
    i64,
    Option<String>,
    Option<String>,
    (
        Option<String>,
        Option<String>,
        String,
        Option<String>,
        Option<String>,
        String,
        Option<String>,
    ),
);

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
