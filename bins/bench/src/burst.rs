//! A burst of clicks with a `link.clicked` subscriber: 100,000 redirects of one link as fast as
//! 64 connections make them, then how long until the API shows every one of them, and how much
//! the server's memory grew. On SQLite, and on PostgreSQL when `TEST_POSTGRES_URL` is set.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use hyper::{Method, StatusCode};
use serde::Serialize;

use crate::api::ApiClient;
use crate::deliveries::{Seen, receiver};
use crate::http::Connection;
use crate::postgres::TempDatabase;
use crate::seed;
use crate::servers::{free_loopback_addr, sqlite_url, start_shortlink};

/// Clicks in the burst.
pub const CLICKS: usize = 100_000;
/// Connections making them.
const CONNECTIONS: usize = 64;
/// Longer than this for the clicks to show fails the run.
const GIVE_UP: Duration = Duration::from_secs(60);

/// One backend's burst.
#[derive(Debug, Clone, Serialize)]
pub struct BurstFigure {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// How long the burst took, s.
    pub burst_seconds: f64,
    /// From the burst's last answer until the API showed every click, ms.
    pub visible_after_ms: f64,
    /// The server's peak resident memory after the burst minus before it, MiB.
    pub rss_growth_mib: f64,
}

/// The burst on SQLite, and on PostgreSQL when `postgres_admin_url` is given.
pub async fn measure(
    bin: &Path,
    dir: &Path,
    base_url: &str,
    postgres_admin_url: Option<&str>,
) -> anyhow::Result<Vec<BurstFigure>> {
    let seen = Arc::new(Seen::default());
    let receiver_addr = free_loopback_addr()?;
    let receiver = receiver(receiver_addr, seen)?;
    let target = format!("http://{receiver_addr}/clicked");
    let sqlite = sqlite_url(&dir.join("burst.db"));
    let mut figures = vec![on(bin, dir, base_url, "sqlite", &sqlite, &target).await?];
    if let Some(admin_url) = postgres_admin_url {
        let postgres = async |url: &str| on(bin, dir, base_url, "postgres", url, &target).await;
        figures.push(TempDatabase::around(admin_url, postgres).await?);
    }
    receiver.stop(false).await;
    Ok(figures)
}

async fn on(
    bin: &Path,
    dir: &Path,
    base_url: &str,
    backend: &str,
    url: &str,
    target: &str,
) -> anyhow::Result<BurstFigure> {
    eprintln!("a burst of {CLICKS} clicks with a link.clicked subscriber, {backend}");
    let key = seed::workspace_and_key(bin, url)?;
    let addr = free_loopback_addr()?;
    // The receiver is on loopback, which deliveries otherwise refuse.
    let extra = ["--webhook-allow-private-targets"];
    let log = dir.join(format!("burst-{backend}.log"));
    let mut server = start_shortlink(bin, url, addr, base_url, &extra, log, None)?;
    server.wait_ready("/healthz").await?;
    let mut api = ApiClient::open(addr, &key).await?;
    api.create_webhook(target, "link.clicked").await?;
    let code = api.create_bulk(&[seed::destination(0)]).await?.remove(0);

    let rss_before = server.peak_rss_bytes()?;
    let started = Instant::now();
    burst(addr, &code).await?;
    let ended = Instant::now();
    // A fresh connection: the seeding one sat idle through the burst, which can outlast the
    // server's keep-alive (5 s), and a request on a connection the server just closed fails.
    let mut api = ApiClient::open(addr, &key).await?;
    while api.clicks(&code).await? < CLICKS as u64 {
        if ended.elapsed() > GIVE_UP {
            bail!("the burst's clicks did not show within {GIVE_UP:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let visible_after = ended.elapsed();
    let rss_after = server.peak_rss_bytes()?;
    server.stop()?;
    Ok(BurstFigure {
        backend: backend.to_owned(),
        burst_seconds: ended.duration_since(started).as_secs_f64(),
        visible_after_ms: visible_after.as_secs_f64() * 1e3,
        rss_growth_mib: rss_after.saturating_sub(rss_before) as f64 / (1024.0 * 1024.0),
    })
}

/// [`CLICKS`] redirects of `/code`, shared by [`CONNECTIONS`] connections.
async fn burst(addr: SocketAddr, code: &str) -> anyhow::Result<()> {
    let path = Arc::new(format!("/{code}"));
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|i| {
            let path = path.clone();
            let share = CLICKS / CONNECTIONS + usize::from(i < CLICKS % CONNECTIONS);
            tokio::spawn(async move {
                let mut conn = Connection::open(addr).await?;
                for _ in 0..share {
                    let (status, _) = conn.send(Method::GET, &path, None, None).await?;
                    anyhow::ensure!(status == StatusCode::FOUND, "a redirect answered {status}");
                }
                Ok::<_, anyhow::Error>(())
            })
        })
        .collect();
    for client in clients {
        client.await??;
    }
    Ok(())
}
