//! A history of click events for the analytics query case: a number of clicks spread uniformly
//! over the last [`DAYS`] days and over the links given (one workspace's), written oldest first
//! through `Store::record_clicks` in transactions of [`PER_TRANSACTION`] clicks, as a server's
//! click flush would have written them over those days.
//!
//! The fields are drawn from a generator with a fixed seed, so every run writes the same history
//! (relative to its `now`), skewed as real traffic is: a few countries, browsers and referrers
//! take most clicks, and each UTC day has its own visitors, each clicking several times (the
//! visitor hash's key changes every UTC day, so unique visitors are counted per day).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::distr::Distribution;
use rand::distr::weighted::WeightedIndex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shortlink_domain::{BaseUrl, ClickInfo, Timestamp, WorkspaceId};
use shortlink_storage::{ClickBatch, ClickEvent, CounterKey, LinkClicks, RedirectTarget, Store};
use tokio::sync::mpsc;

use crate::ingestion::PER_TRANSACTION;

/// Days of history: the server's default retention (`--analytics-retention-days`).
pub const DAYS: u64 = 400;
/// Milliseconds in a day.
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// The generator's seed: the same history on every run.
const SEED: u64 = 0x5107_71c5;
/// Visitors a UTC day's clicks are drawn from: with millions of events, each clicks several
/// times a day, so the daily unique visitors are fewer than the clicks.
const VISITORS_PER_DAY: u64 = 5_000;
/// Share of clicks the GeoIP database has no answer for (country and city null).
const NO_GEOIP_ANSWER: f64 = 0.02;
/// Share of clicks without a `Referer`.
const DIRECT: f64 = 0.4;
/// Transactions made ahead of the one being written: generating overlaps writing.
const AHEAD: usize = 4;

/// Countries (ISO 3166-1 alpha-2), their weights, and a few cities each (the first the most
/// frequent).
const COUNTRIES: &[(&str, u32, &[&str])] = &[
    (
        "US",
        280,
        &["New York", "Los Angeles", "Chicago", "Houston", "Seattle"],
    ),
    (
        "GB",
        90,
        &["London", "Manchester", "Birmingham", "Edinburgh"],
    ),
    ("DE", 70, &["Berlin", "Munich", "Hamburg", "Cologne"]),
    ("IN", 70, &["Mumbai", "Bengaluru", "Delhi", "Chennai"]),
    ("FR", 50, &["Paris", "Lyon", "Marseille"]),
    ("CA", 40, &["Toronto", "Vancouver", "Montreal"]),
    ("BR", 40, &["São Paulo", "Rio de Janeiro", "Brasília"]),
    ("JP", 35, &["Tokyo", "Osaka", "Yokohama"]),
    ("NL", 30, &["Amsterdam", "Rotterdam", "Utrecht"]),
    ("AU", 30, &["Sydney", "Melbourne", "Brisbane"]),
    ("ES", 25, &["Madrid", "Barcelona", "Valencia"]),
    ("IT", 25, &["Milan", "Rome", "Turin"]),
    ("PL", 20, &["Warsaw", "Kraków", "Wrocław"]),
    ("SE", 15, &["Stockholm", "Gothenburg"]),
    ("MX", 15, &["Mexico City", "Guadalajara", "Monterrey"]),
    ("KR", 15, &["Seoul", "Busan"]),
    ("ID", 12, &["Jakarta", "Surabaya"]),
    ("TR", 12, &["Istanbul", "Ankara"]),
    ("CH", 10, &["Zurich", "Geneva"]),
    ("BE", 10, &["Brussels", "Antwerp"]),
    ("SG", 10, &["Singapore"]),
    ("IE", 8, &["Dublin", "Cork"]),
    ("AT", 8, &["Vienna", "Graz"]),
    ("DK", 7, &["Copenhagen", "Aarhus"]),
    ("NO", 6, &["Oslo", "Bergen"]),
    ("FI", 5, &["Helsinki", "Espoo"]),
    ("PT", 5, &["Lisbon", "Porto"]),
    ("AR", 5, &["Buenos Aires", "Córdoba"]),
    ("ZA", 4, &["Johannesburg", "Cape Town"]),
    ("NG", 4, &["Lagos", "Abuja"]),
];
/// Devices and their weights.
const DEVICES: &[(&str, u32)] = &[("desktop", 52), ("mobile", 40), ("tablet", 6), ("other", 2)];
/// Browser families and their weights.
const BROWSERS: &[(&str, u32)] = &[
    ("Chrome", 62),
    ("Safari", 20),
    ("Edge", 7),
    ("Firefox", 5),
    ("Samsung Internet", 3),
    ("Opera", 3),
];
/// OS families and their weights.
const OSES: &[(&str, u32)] = &[
    ("Windows", 33),
    ("Android", 30),
    ("iOS", 20),
    ("macOS", 10),
    ("Linux", 5),
    ("ChromeOS", 2),
];
/// Referrer hosts, the most frequent first: the `n`th takes a share proportional to `1 / n` of
/// the clicks that have a referrer.
const REFERRERS: &[&str] = &[
    "google.com",
    "t.co",
    "facebook.com",
    "linkedin.com",
    "reddit.com",
    "news.ycombinator.com",
    "instagram.com",
    "youtube.com",
    "bing.com",
    "duckduckgo.com",
    "l.facebook.com",
    "mail.google.com",
    "outlook.live.com",
    "slack.com",
    "discord.com",
    "medium.com",
    "substack.com",
    "github.com",
    "stackoverflow.com",
    "en.wikipedia.org",
    "pinterest.com",
    "tiktok.com",
    "x.com",
    "web.telegram.org",
    "web.whatsapp.com",
    "search.yahoo.com",
    "baidu.com",
    "yandex.ru",
    "naver.com",
    "ecosia.org",
    "news.google.com",
    "flipboard.com",
    "quora.com",
    "producthunt.com",
    "dev.to",
    "lobste.rs",
    "mastodon.social",
    "bsky.app",
    "threads.net",
    "tumblr.com",
    "vk.com",
    "weibo.com",
    "line.me",
    "teams.microsoft.com",
    "notion.so",
    "docs.google.com",
    "feedly.com",
    "getpocket.com",
    "newsletter.example",
    "blog.example",
];

/// Writes `events` clicks of `links` over the [`DAYS`] days before `now` into `store`, and
/// returns how long the writing took (the generating overlaps it).
///
/// First it runs the upkeep a server runs every ten minutes, with the default retention: on
/// PostgreSQL, a server that had been running for those days would have made each month's
/// partition of `click_events` before writing its events, so this one makes them back to the
/// retention horizon before the history is written (events written without their month's
/// partition would stay in the default partition).
pub async fn write(
    store: &Store,
    base: &BaseUrl,
    links: &[RedirectTarget],
    events: usize,
    now: Timestamp,
) -> anyhow::Result<Duration> {
    anyhow::ensure!(!links.is_empty(), "a history needs links");
    let horizon = now.minus(Duration::from_secs(DAYS * 24 * 60 * 60));
    store
        .maintain_events(now, Some(horizon), 5_000)
        .await
        .context("could not make the events' partitions")?;
    let started = Instant::now();
    let links: Vec<(CounterKey, WorkspaceId)> = (links.iter())
        .map(|link| (link.counter, link.workspace_id))
        .collect();
    let (batches, mut written) = mpsc::channel::<ClickBatch>(AHEAD);
    // Making a transaction's clicks is CPU work: on a thread of its own, ahead of the writes.
    let maker = tokio::task::spawn_blocking(move || {
        let mut history = History::new(&links, horizon, now, events)?;
        while let Some(batch) = history.next_batch() {
            if batches.blocking_send(batch).is_err() {
                // The writer stopped (it failed): nothing more to make.
                break;
            }
        }
        anyhow::Ok(())
    });
    while let Some(batch) = written.recv().await {
        store.record_clicks(Arc::new(batch), base).await?;
    }
    maker.await.context("making the history panicked")??;
    Ok(started.elapsed())
}

/// The generator: the clicks still to make, oldest first.
struct History<'a> {
    links: &'a [(CounterKey, WorkspaceId)],
    rng: StdRng,
    draws: Draws,
    start_ms: i64,
    span_ms: i64,
    total: usize,
    made: usize,
}

impl<'a> History<'a> {
    fn new(
        links: &'a [(CounterKey, WorkspaceId)],
        start: Timestamp,
        end: Timestamp,
        total: usize,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            links,
            rng: StdRng::seed_from_u64(SEED),
            draws: Draws::new()?,
            start_ms: start.unix_millis(),
            span_ms: end.unix_millis() - start.unix_millis(),
            total,
            made: 0,
        })
    }

    /// The next [`PER_TRANSACTION`] clicks (fewer at the end), one entry per link as the click
    /// flush writes them; `None` when every click was made.
    fn next_batch(&mut self) -> Option<ClickBatch> {
        let count = PER_TRANSACTION.min(self.total - self.made);
        if count == 0 {
            return None;
        }
        let mut clicks: Vec<(usize, ClickEvent)> = Vec::with_capacity(count);
        for _ in 0..count {
            let link = self.rng.random_range(0..self.links.len());
            let at = self.timestamp(self.made);
            self.made += 1;
            clicks.push((link, self.draws.click(&mut self.rng, at)));
        }
        // Stable: each link's clicks stay oldest first.
        clicks.sort_by_key(|(link, _)| *link);
        let mut per_link: Vec<LinkClicks> = Vec::new();
        for (link, click) in clicks {
            let (counter, workspace_id) = self.links[link];
            match per_link.last_mut() {
                Some(last) if last.counter == counter => {
                    last.count += 1;
                    last.clicks.push(click);
                }
                _ => per_link.push(LinkClicks {
                    counter,
                    workspace_id,
                    count: 1,
                    clicks: vec![click],
                }),
            }
        }
        Some(ClickBatch {
            links: per_link,
            events: true,
        })
    }

    /// Click `i`'s time: at a random point of the `i`th of `total` equal slots of the span, so
    /// the clicks are uniform over the span and in time order.
    fn timestamp(&mut self, i: usize) -> Timestamp {
        let (span, total) = (i128::from(self.span_ms), self.total as i128);
        let slot_start = i128::from(self.start_ms) + i as i128 * span / total;
        let slot = (span / total).max(1);
        let at = slot_start + self.rng.random_range(0..slot);
        Timestamp::from_unix_millis(i64::try_from(at).unwrap_or(self.start_ms))
    }
}

/// The skewed draws of a click's fields.
struct Draws {
    countries: WeightedIndex<u32>,
    devices: WeightedIndex<u32>,
    browsers: WeightedIndex<u32>,
    oses: WeightedIndex<u32>,
    /// Over [`REFERRERS`], by `1 / rank`.
    referrers: WeightedIndex<f64>,
}

impl Draws {
    fn new() -> anyhow::Result<Self> {
        let weights = |table: &[(&str, u32)]| WeightedIndex::new(table.iter().map(|(_, w)| *w));
        Ok(Self {
            countries: WeightedIndex::new(COUNTRIES.iter().map(|(_, weight, _)| *weight))?,
            devices: weights(DEVICES)?,
            browsers: weights(BROWSERS)?,
            oses: weights(OSES)?,
            referrers: WeightedIndex::new((1..=REFERRERS.len()).map(|rank| 1.0 / rank as f64))?,
        })
    }

    /// One click at `at`.
    fn click(&self, rng: &mut StdRng, at: Timestamp) -> ClickEvent {
        let (country, city) = if rng.random_bool(NO_GEOIP_ANSWER) {
            (None, None)
        } else {
            let (country, _, cities) = COUNTRIES[self.countries.sample(rng)];
            let city = cities[skewed(rng, cities.len())];
            (Some(country.to_owned()), Some(city.to_owned()))
        };
        let (referrer, referrer_url) = if rng.random_bool(DIRECT) {
            ("(direct)".to_owned(), None)
        } else {
            let host = REFERRERS[self.referrers.sample(rng)];
            let page = rng.random_range(0..1_000);
            (host.to_owned(), Some(format!("https://{host}/p/{page}")))
        };
        let day = at.unix_millis().div_euclid(DAY_MS);
        ClickEvent {
            click: ClickInfo {
                country,
                city,
                device: DEVICES[self.devices.sample(rng)].0.to_owned(),
                browser: Some(BROWSERS[self.browsers.sample(rng)].0.to_owned()),
                os: Some(OSES[self.oses.sample(rng)].0.to_owned()),
                referrer,
                referrer_url,
                ..ClickInfo::bare(at)
            },
            visitor: visitor(day, rng.random_range(0..VISITORS_PER_DAY)),
        }
    }
}

/// An index below `n`, the first the most likely: index `i` has `n - i` shares.
fn skewed(rng: &mut StdRng, n: usize) -> usize {
    let mut draw = rng.random_range(0..n * (n + 1) / 2);
    for i in 0..n {
        let shares = n - i;
        if draw < shares {
            return i;
        }
        draw -= shares;
    }
    0
}

/// Visitor `n` of UTC day `day`: distinct for every (day, n), as the visitor hash is for
/// every (day, client) (splitmix64's finalizer over both).
fn visitor(day: i64, n: u64) -> i64 {
    let mut z = (day as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ n;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> Vec<(CounterKey, WorkspaceId)> {
        let workspace = WorkspaceId::generate();
        (0..10).map(|i| (CounterKey(i), workspace)).collect()
    }

    #[test]
    fn makes_every_click_in_time_order_within_the_span() {
        let links = links();
        let (start, end) = (
            Timestamp::from_unix_millis(0),
            Timestamp::from_unix_millis(DAY_MS),
        );
        let mut history = History::new(&links, start, end, 4_500).unwrap();
        let mut times = Vec::new();
        while let Some(batch) = history.next_batch() {
            let mut in_batch = 0;
            for link in &batch.links {
                assert_eq!(link.count, link.clicks.len() as u64);
                assert!(link.clicks.is_sorted_by_key(|c| c.click.timestamp));
                in_batch += link.clicks.len();
                times.extend(link.clicks.iter().map(|c| c.click.timestamp.unix_millis()));
            }
            assert!(in_batch <= PER_TRANSACTION);
        }
        assert_eq!(times.len(), 4_500);
        assert!(times.iter().all(|t| (0..DAY_MS).contains(t)));
    }

    #[test]
    fn the_same_seed_makes_the_same_history() {
        let links = links();
        let (start, end) = (
            Timestamp::from_unix_millis(0),
            Timestamp::from_unix_millis(DAY_MS),
        );
        let first = History::new(&links, start, end, 100).unwrap().next_batch();
        let again = History::new(&links, start, end, 100).unwrap().next_batch();
        let clicks = |batch: Option<ClickBatch>| -> Vec<ClickEvent> {
            batch
                .into_iter()
                .flat_map(|b| b.links)
                .flat_map(|l| l.clicks)
                .collect()
        };
        assert_eq!(clicks(first), clicks(again));
    }

    #[test]
    fn skewed_favours_the_first_and_stays_in_bounds() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut seen = [0; 4];
        for _ in 0..10_000 {
            seen[skewed(&mut rng, 4)] += 1;
        }
        assert!(seen[0] > seen[1] && seen[1] > seen[2] && seen[2] > seen[3] && seen[3] > 0);
        assert_eq!(skewed(&mut rng, 1), 0);
    }
}
