//! The analytics queries on a large history: 10,000,000 click events over the last 400 days and
//! 100,000 links, all in one workspace (the worst case of "one workspace": every query of the
//! workspace reads all of them), written through storage ([`click_history`]); then a server with
//! default flags on that database answers, through its API and with the workspace's key, a
//! 30-day and a 400-day daily time series and a 30-day country breakdown (each asked
//! [`RUNS`] times: median and slowest), and exports about 1,000,000 events as NDJSON and as CSV
//! (rows/s, and how much the server's memory grew while it streamed them). On SQLite, and on
//! PostgreSQL when `TEST_POSTGRES_URL` is set.
//!
//! Slow answers are figures, not failures: a query that does not answer (PostgreSQL bounds
//! every call of the store to 5 s) is reported as such. Wrong answers fail the run.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use http_body_util::BodyExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use shortlink_domain::{BaseUrl, Timestamp};
use shortlink_storage::{PoolOptions, Store};

use crate::api::{ApiClient, Counted};
use crate::click_history::{self, DAY_MS, DAYS};
use crate::http::REQUEST_TIMEOUT;
use crate::postgres::{self, TempDatabase};
use crate::servers::{ServerProcess, free_loopback_addr, sqlite_url, start_shortlink};
use crate::tasks::Tasks;
use crate::{procfs, seed};

/// Times each query is asked.
const RUNS: usize = 20;
/// A query is asked no more once its runs took this long together (after the first): a query
/// that takes a minute today would otherwise hold the run for twenty.
const RUNS_WITHIN: Duration = Duration::from_secs(60);
/// How long one answer is waited for before the query counts as failed.
const ANSWER_WITHIN: Duration = Duration::from_secs(300);
/// About how many events an export covers: the range is the most recent whole days holding
/// about this many.
const EXPORT_EVENTS: u64 = 1_000_000;
/// Between two looks at the server's resident memory during an export.
const RSS_EVERY: Duration = Duration::from_millis(50);
/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// How large a history to measure on, from the command line.
#[derive(Debug, Clone, Copy)]
pub struct QuerySettings {
    /// Click events in the history.
    pub events: usize,
    /// Links they are spread over.
    pub links: usize,
}

/// A query measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Query {
    /// `groupBy=timeseries&interval=day` over the last 30 UTC days.
    #[serde(rename = "daily_series_30_days")]
    DailySeries30,
    /// The same over the last 400 UTC days (400 buckets, within the 1,000 allowed).
    #[serde(rename = "daily_series_400_days")]
    DailySeries400,
    /// `groupBy=countries` over the last 30 UTC days.
    #[serde(rename = "countries_30_days")]
    Countries30,
}

impl Query {
    /// As the summary names it.
    pub fn label(self) -> &'static str {
        match self {
            Query::DailySeries30 => "30-day series",
            Query::DailySeries400 => "400-day series",
            Query::Countries30 => "30-day countries",
        }
    }
}

/// An export's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// One JSON object a line.
    Ndjson,
    /// A header line, then one line an event.
    Csv,
}

impl Format {
    /// The `format` parameter's value.
    pub fn name(self) -> &'static str {
        match self {
            Format::Ndjson => "ndjson",
            Format::Csv => "csv",
        }
    }

    /// Lines of the body that are no event.
    fn header_lines(self) -> u64 {
        match self {
            Format::Ndjson => 0,
            Format::Csv => 1,
        }
    }
}

/// One query's answers on one backend.
#[derive(Debug, Clone, Serialize)]
pub struct QueryTiming {
    /// Which.
    pub query: Query,
    /// Times it was answered (fewer than [`RUNS`] when slow, see [`RUNS_WITHIN`]).
    pub runs: usize,
    /// Median answer time, ms; `None` when it never answered.
    pub median_ms: Option<f64>,
    /// Slowest answer, ms.
    pub max_ms: Option<f64>,
    /// Why it stopped answering, if it did (the status and message, or the client's timeout).
    pub failure: Option<String>,
}

/// One export on one backend.
#[derive(Debug, Clone, Serialize)]
pub struct ExportFigure {
    /// NDJSON or CSV.
    pub format: Format,
    /// The whole UTC days it covered, the most recent ones.
    pub days: u64,
    /// Events read (lines, less the CSV header).
    pub rows: u64,
    /// From the request to the body's end, s.
    pub seconds: f64,
    /// `rows / seconds`.
    pub rows_per_second: f64,
    /// The server's largest resident memory during the export less its resident memory before
    /// it, MiB.
    pub rss_growth_mib: f64,
    /// Why it ended early, if it did.
    pub failure: Option<String>,
}

/// The whole case on one backend.
#[derive(Debug, Clone, Serialize)]
pub struct QueriesFigure {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// Click events in the history.
    pub events: usize,
    /// Links they were spread over.
    pub links: usize,
    /// Writing them through storage, s (informational: not the ingestion case's measure).
    pub generation_seconds: f64,
    /// `events / generation_seconds`.
    pub generated_per_second: f64,
    /// Rolling up every past day of the history at once, s (informational: a server does it
    /// a day at a time).
    pub rollup_seconds: f64,
    /// The queries.
    pub queries: Vec<QueryTiming>,
    /// The exports.
    pub exports: Vec<ExportFigure>,
}

/// The case on SQLite, and on PostgreSQL when `postgres_admin_url` is given.
pub async fn measure(
    bin: &Path,
    dir: &Path,
    base_url: &str,
    base: &BaseUrl,
    postgres_admin_url: Option<&str>,
    settings: QuerySettings,
) -> anyhow::Result<Vec<QueriesFigure>> {
    let case = Case {
        bin,
        dir,
        base_url,
        base,
        settings,
    };
    let sqlite = sqlite_url(&dir.join("queries.db"));
    let mut figures = vec![case.on("sqlite", &sqlite).await?];
    if let Some(admin_url) = postgres_admin_url {
        let postgres = async |url: &str| case.on("postgres", url).await;
        figures.push(TempDatabase::around(admin_url, postgres).await?);
    }
    Ok(figures)
}

/// Runs the store's analytics upkeep on the history before anything is measured, as a server
/// that had been running over the history's days would have run it every ten minutes: each
/// past day rolled up; and on PostgreSQL vacuums it and gathers the planner's statistics, as
/// autovacuum would have ([`postgres::vacuum_analyze`]). Returns how long rolling up every day
/// at once took (informational).
pub async fn prepare(store: &Store, url: &str, now: Timestamp) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let horizon = now.minus(Duration::from_secs(DAYS * 24 * 60 * 60));
    let days = store
        .roll_up_analytics(now, Some(horizon))
        .await
        .context("could not roll up the history")?;
    let took = started.elapsed();
    eprintln!("  {days} days rolled up in {:.1} s", took.as_secs_f64());
    if url.starts_with("postgres") {
        postgres::vacuum_analyze(url).await?;
    }
    Ok(took)
}

/// What each backend's run shares.
struct Case<'a> {
    bin: &'a Path,
    dir: &'a Path,
    base_url: &'a str,
    base: &'a BaseUrl,
    settings: QuerySettings,
}

impl Case<'_> {
    async fn on(&self, backend: &str, url: &str) -> anyhow::Result<QueriesFigure> {
        let QuerySettings { events, links } = self.settings;
        eprintln!(
            "analytics queries: {events} events over {DAYS} days and {links} links, {backend}"
        );
        let key = seed::workspace_and_key(self.bin, url)?;
        let codes = seed::through_store(url, self.base, links).await?;
        let now = Timestamp::now();
        let (written, rolled_up) = {
            let store = Store::connect(url, PoolOptions::default())?;
            let targets = seed::redirect_targets(&store, self.base, &codes).await?;
            let written = click_history::write(&store, self.base, &targets, events, now).await?;
            (written, prepare(&store, url, now).await?)
        };
        let generation_seconds = written.as_secs_f64();
        eprintln!(
            "  written in {generation_seconds:.1} s, {:.0} events/s",
            events as f64 / generation_seconds
        );

        let addr = free_loopback_addr()?;
        let log = self.dir.join(format!("queries-{backend}.log"));
        let mut server = start_shortlink(self.bin, url, addr, self.base_url, &[], log, None)?;
        server.wait_ready("/healthz").await?;
        let mut api = ApiClient::open(addr, &key).await?;
        let today = now.unix_millis().div_euclid(DAY_MS);
        let last_30_days = range(today, 30);
        let queries = vec![
            series(&mut api, Query::DailySeries30, &last_30_days, 30).await?,
            series(&mut api, Query::DailySeries400, &range(today, DAYS), DAYS).await?,
            countries(&mut api, &last_30_days).await?,
        ];
        let export_days = (EXPORT_EVENTS * DAYS).div_ceil(events.max(1) as u64);
        let export_range = range(today, export_days.clamp(1, DAYS));
        let mut exports = Vec::new();
        for format in [Format::Ndjson, Format::Csv] {
            exports.push(export(&server, &mut api, format, &export_range).await?);
        }
        drop(api);
        server.stop()?;
        Ok(QueriesFigure {
            backend: backend.to_owned(),
            events,
            links,
            generation_seconds,
            generated_per_second: events as f64 / generation_seconds,
            rollup_seconds: rolled_up.as_secs_f64(),
            queries,
            exports,
        })
    }
}

/// The whole UTC days before `today` (a day number since the epoch), as the API's `start`
/// (inclusive) and `end` (exclusive) dates.
struct Range {
    days: u64,
    start: String,
    end: String,
}

impl Range {
    /// `start=…&end=…`.
    fn params(&self) -> String {
        format!("start={}&end={}", self.start, self.end)
    }
}

fn range(today: i64, days: u64) -> Range {
    Range {
        days,
        start: utc_date(today - days as i64),
        end: utc_date(today),
    }
}

/// Day number `day` since the epoch as `YYYY-MM-DD`: the date part of its midnight's RFC 3339
/// form, which is how `Timestamp` prints.
fn utc_date(day: i64) -> String {
    let midnight = Timestamp::from_unix_millis(day * DAY_MS).to_string();
    midnight
        .split_once('T')
        .map_or(midnight.clone(), |(date, _)| date.to_owned())
}

/// A query's timing and its last answer (`None` when it failed).
struct Timed<T> {
    timing: QueryTiming,
    answer: Option<T>,
}

/// Asks `GET /api/v1/analytics?{params}` up to [`RUNS`] times (fewer once [`RUNS_WITHIN`] has
/// passed), each answer timed from the request to the body's end; stops at the first failure.
async fn timed<T: DeserializeOwned>(api: &mut ApiClient, query: Query, params: &str) -> Timed<T> {
    eprintln!("  {}", query.label());
    let started = Instant::now();
    let mut times = Vec::with_capacity(RUNS);
    let (mut answer, mut failure) = (None, None);
    while times.len() < RUNS && (times.is_empty() || started.elapsed() < RUNS_WITHIN) {
        let asked = Instant::now();
        match api.analytics::<T>(params, ANSWER_WITHIN).await {
            Ok(data) => {
                times.push(asked.elapsed().as_secs_f64() * 1e3);
                answer = Some(data);
            }
            Err(e) => {
                failure = Some(format!("{e:#}"));
                break;
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let timing = QueryTiming {
        query,
        runs: times.len(),
        median_ms: (!times.is_empty()).then(|| times[times.len() / 2]),
        max_ms: times.last().copied(),
        failure,
    };
    match (&timing.median_ms, &timing.failure) {
        (Some(median), _) => eprintln!(
            "    median {median:.0} ms, max {:.0} ms ({} runs)",
            timing.max_ms.unwrap_or_default(),
            timing.runs
        ),
        (None, Some(failure)) => eprintln!("    failed: {failure}"),
        (None, None) => {}
    }
    Timed { timing, answer }
}

/// `groupBy=count`'s clicks over `range`: what the other answers are checked against.
async fn clicks_in(api: &mut ApiClient, range: &Range) -> anyhow::Result<u64> {
    let params = format!("groupBy=count&{}", range.params());
    let totals: Counted = api
        .analytics(&params, ANSWER_WITHIN)
        .await
        .context("the count the answers are checked against failed")?;
    Ok(totals.clicks)
}

/// A daily time series over `range`, checked: one bucket a day, and (over 30 days) as many
/// clicks in all as `groupBy=count` finds, more than none.
async fn series(
    api: &mut ApiClient,
    query: Query,
    range: &Range,
    buckets: u64,
) -> anyhow::Result<QueryTiming> {
    let params = format!("groupBy=timeseries&interval=day&{}", range.params());
    let Timed { timing, answer } = timed::<Vec<Counted>>(api, query, &params).await;
    if let Some(series) = answer {
        anyhow::ensure!(
            series.len() as u64 == buckets,
            "{}: {} buckets, not {buckets}",
            query.label(),
            series.len()
        );
        if query == Query::DailySeries30 {
            let sum: u64 = series.iter().map(|b| b.clicks).sum();
            let count = clicks_in(api, range).await?;
            anyhow::ensure!(
                sum == count && count > 0,
                "{}: {sum} clicks in its buckets, groupBy=count has {count}",
                query.label()
            );
        }
    }
    Ok(timing)
}

/// The 30-day country breakdown, checked: at most the default 10 countries, with some clicks
/// and no more than the range holds.
async fn countries(api: &mut ApiClient, range: &Range) -> anyhow::Result<QueryTiming> {
    let query = Query::Countries30;
    let params = format!("groupBy=countries&{}", range.params());
    let Timed { timing, answer } = timed::<Vec<Counted>>(api, query, &params).await;
    if let Some(groups) = answer {
        let sum: u64 = groups.iter().map(|g| g.clicks).sum();
        let count = clicks_in(api, range).await?;
        anyhow::ensure!(
            !groups.is_empty() && groups.len() <= 10 && sum > 0 && sum <= count,
            "{}: {} groups with {sum} clicks, of {count} in the range",
            query.label(),
            groups.len()
        );
    }
    Ok(timing)
}

/// Exports `range` as `format`, reading the body to its end while a task samples the server's
/// resident memory; checks that every event of the range came.
async fn export(
    server: &ServerProcess,
    api: &mut ApiClient,
    format: Format,
    range: &Range,
) -> anyhow::Result<ExportFigure> {
    eprintln!("  export, {}, {} days", format.name(), range.days);
    let pid = server.pid()?;
    let before = procfs::rss_bytes(pid)?;
    let largest = Arc::new(AtomicU64::new(before));
    let mut sampler = Tasks::new();
    let seen = largest.clone();
    sampler.spawn(async move {
        loop {
            tokio::time::sleep(RSS_EVERY).await;
            if let Ok(rss) = procfs::rss_bytes(pid) {
                seen.fetch_max(rss, Ordering::Relaxed);
            }
        }
    });
    let started = Instant::now();
    let params = format!("format={}&{}", format.name(), range.params());
    let read = lines_of(api, &params).await;
    let seconds = started.elapsed().as_secs_f64();
    drop(sampler);
    largest.fetch_max(procfs::rss_bytes(pid)?, Ordering::Relaxed);
    let growth = largest.load(Ordering::Relaxed).saturating_sub(before) as f64 / MIB;
    let (rows, failure) = match read {
        Ok(lines) => (lines.saturating_sub(format.header_lines()), None),
        Err(e) => (0, Some(format!("{e:#}"))),
    };
    if failure.is_none() {
        let count = clicks_in(api, range).await?;
        anyhow::ensure!(
            rows == count,
            "the {} export has {rows} rows, groupBy=count has {count} clicks",
            format.name()
        );
    }
    let figure = ExportFigure {
        format,
        days: range.days,
        rows,
        seconds,
        rows_per_second: rows as f64 / seconds,
        rss_growth_mib: growth,
        failure,
    };
    match &figure.failure {
        None => eprintln!(
            "    {rows} rows in {seconds:.1} s, {:.0} rows/s, memory +{growth:.1} MiB",
            figure.rows_per_second
        ),
        Some(failure) => eprintln!("    failed: {failure}"),
    }
    Ok(figure)
}

/// Reads the export's body to its end and counts its lines. A body that sends nothing for
/// [`REQUEST_TIMEOUT`] has stalled.
async fn lines_of(api: &mut ApiClient, params: &str) -> anyhow::Result<u64> {
    let mut body = api.export(params).await?;
    let mut lines = 0;
    while let Some(frame) = tokio::time::timeout(REQUEST_TIMEOUT, body.frame())
        .await
        .context("the export stalled")?
    {
        if let Some(data) = frame.context("the export broke off")?.data_ref() {
            lines += data.iter().filter(|&&b| b == b'\n').count() as u64;
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_whole_utc_days_before_today() {
        // 2026-03-01 is day 20,513 since the epoch.
        let r = range(20_513, 30);
        assert_eq!(
            (r.start.as_str(), r.end.as_str()),
            ("2026-01-30", "2026-03-01")
        );
        assert_eq!(r.params(), "start=2026-01-30&end=2026-03-01");
    }
}
