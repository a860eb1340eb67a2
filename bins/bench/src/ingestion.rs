//! Analytics ingestion: how many click events a second storage writes through the call the
//! server's click flush makes (`Store::record_clicks`, each call one transaction of 2,000 clicks,
//! the service's `FLUSH_PART`), counters included, on SQLite and, with `TEST_POSTGRES_URL`, on
//! PostgreSQL. The clicks are spread over 100 links and carry what a browser's click has
//! (country, city, device, browser, OS, referrer).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use shortlink_domain::{BaseUrl, ClickInfo, Timestamp};
use shortlink_storage::{ClickBatch, ClickEvent, EventFilter, LinkClicks, PoolOptions, Store};

use crate::postgres::TempDatabase;
use crate::seed;
use crate::servers::sqlite_url;

/// Events written per backend.
pub const EVENTS: usize = 1_000_000;
/// Links the events are spread over.
const LINKS: usize = 100;
/// Clicks per transaction: the service's `FLUSH_PART`.
pub const PER_TRANSACTION: usize = 2_000;

/// One backend's ingestion.
#[derive(Debug, Clone, Serialize)]
pub struct IngestionFigure {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// Events written.
    pub events: usize,
    /// How long it took, s.
    pub seconds: f64,
    /// `events / seconds`.
    pub per_second: f64,
}

/// Ingestion on SQLite, and on PostgreSQL when `postgres_admin_url` is given.
pub async fn measure(
    bin: &Path,
    dir: &Path,
    base: &BaseUrl,
    postgres_admin_url: Option<&str>,
) -> anyhow::Result<Vec<IngestionFigure>> {
    let sqlite = sqlite_url(&dir.join("ingestion.db"));
    let mut figures = vec![on(bin, base, "sqlite", &sqlite).await?];
    if let Some(admin_url) = postgres_admin_url {
        let postgres = async |url: &str| on(bin, base, "postgres", url).await;
        figures.push(TempDatabase::around(admin_url, postgres).await?);
    }
    Ok(figures)
}

async fn on(
    bin: &Path,
    base: &BaseUrl,
    backend: &str,
    url: &str,
) -> anyhow::Result<IngestionFigure> {
    eprintln!("analytics ingestion: {EVENTS} events through storage, {backend}");
    seed::workspace_and_key(bin, url)?;
    let codes = seed::through_store(url, base, LINKS).await?;
    let store = Store::connect(url, PoolOptions::default())?;
    let links = seed::redirect_targets(&store, base, &codes).await?;
    let click = ClickEvent {
        click: ClickInfo {
            country: Some("GB".into()),
            city: Some("London".into()),
            device: "desktop".into(),
            browser: Some("Chrome".into()),
            os: Some("Windows".into()),
            referrer: "news.example".into(),
            referrer_url: Some("https://news.example/today".into()),
            ..ClickInfo::bare(Timestamp::now())
        },
        visitor: 0x5eed,
    };
    let per_link = PER_TRANSACTION / LINKS;
    // One batch, written again and again: what is measured is the writing, not the making.
    let batch = Arc::new(ClickBatch {
        links: (links.iter())
            .map(|link| LinkClicks {
                counter: link.counter,
                workspace_id: link.workspace_id,
                count: per_link as u64,
                clicks: vec![click.clone(); per_link],
            })
            .collect(),
        events: true,
    });
    let started = Instant::now();
    for _ in 0..EVENTS / PER_TRANSACTION {
        store.record_clicks(batch.clone(), base).await?;
    }
    let seconds = started.elapsed().as_secs_f64();
    // Every event is there.
    let everything = EventFilter::between(
        links[0].workspace_id,
        None,
        Timestamp::from_unix_millis(0),
        Timestamp::now().plus(Duration::from_secs(3600)),
    );
    let written = store.analytics_totals(&everything).await?.clicks;
    anyhow::ensure!(
        written == EVENTS as u64,
        "{written} events stored of {EVENTS} written"
    );
    Ok(IngestionFigure {
        backend: backend.to_owned(),
        events: EVENTS,
        seconds,
        per_second: EVENTS as f64 / seconds,
    })
}
