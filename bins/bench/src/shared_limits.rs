//! The price of sharing rate limits through Redis (`--redis-url`): the same API request (an
//! authenticated `GET /api/v1/links?limit=1`) against shortlink on SQLite without and with a
//! Redis of the bench's own, in one run. Skipped, and said so, where `redis-server` is not
//! installed.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hyper::{Method, StatusCode};
use serde::Serialize;

use crate::http::Connection;
use crate::seed;
use crate::servers::{free_loopback_addr, sqlite_url, start_shortlink};

/// Connections sending API requests at once for the throughput.
const CONNECTIONS: usize = 16;
/// How long each side's throughput is measured.
const DURATION: Duration = Duration::from_secs(4);
/// How long each side's latency is measured, on one connection (no queueing in the server).
const LATENCY_DURATION: Duration = Duration::from_secs(2);

/// API requests without and with Redis: throughput over [`CONNECTIONS`] connections, median
/// latency on one.
#[derive(Debug, Clone, Serialize)]
pub struct SharedLimitFigure {
    /// Requests/s without Redis.
    pub local_per_second: f64,
    /// Median latency without Redis, µs.
    pub local_p50_micros: f64,
    /// Requests/s with Redis.
    pub shared_per_second: f64,
    /// Median latency with Redis, µs.
    pub shared_p50_micros: f64,
}

/// A `redis-server` on a free port, stopped when dropped.
struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis(addr: SocketAddr) -> anyhow::Result<Redis> {
    let child = Command::new("redis-server")
        .args([
            "--port",
            &addr.port().to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .context("redis-server is not installed")?;
    let redis = Redis(child);
    for _ in 0..250 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Ok(redis);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    anyhow::bail!("redis-server did not listen on {addr}")
}

/// Both sides, or `None` (said on stderr) without `redis-server`.
pub async fn measure(
    bin: &Path,
    dir: &Path,
    base_url: &str,
) -> anyhow::Result<Option<SharedLimitFigure>> {
    let redis_addr = free_loopback_addr()?;
    let _redis = match start_redis(redis_addr) {
        Ok(redis) => redis,
        Err(e) => {
            eprintln!("API with Redis: skipped ({e:#})");
            return Ok(None);
        }
    };
    let local = side(bin, dir, base_url, None).await?;
    let shared = side(bin, dir, base_url, Some(&format!("redis://{redis_addr}"))).await?;
    Ok(Some(SharedLimitFigure {
        local_per_second: local.0,
        local_p50_micros: local.1,
        shared_per_second: shared.0,
        shared_p50_micros: shared.1,
    }))
}

/// Requests/s and median latency (µs) of shortlink on a fresh SQLite file, with `redis_url`.
async fn side(
    bin: &Path,
    dir: &Path,
    base_url: &str,
    redis_url: Option<&str>,
) -> anyhow::Result<(f64, f64)> {
    let name = if redis_url.is_some() {
        "shared"
    } else {
        "local"
    };
    eprintln!("API requests, rate limits {name}");
    let url = sqlite_url(&dir.join(format!("api-{name}.db")));
    let key = Arc::new(seed::workspace_and_key(bin, &url)?);
    let addr = free_loopback_addr()?;
    let redis_flag = redis_url.map(|url| ["--redis-url", url]);
    let extra = redis_flag.as_ref().map_or(&[][..], |flag| &flag[..]);
    let log = dir.join(format!("api-{name}.log"));
    let mut server = start_shortlink(bin, &url, addr, base_url, extra, log, None)?;
    server.wait_ready("/healthz").await?;
    let (latencies, _) = load(addr, &key, 1, LATENCY_DURATION).await?;
    let (_, per_second) = load(addr, &key, CONNECTIONS, DURATION).await?;
    server.stop()?;
    let median = latencies.get(latencies.len() / 2).copied().unwrap_or(0.0);
    Ok((per_second, median))
}

/// `connections` clients sending the API request back to back for `duration`: every latency
/// (µs, sorted) and the requests per second.
async fn load(
    addr: SocketAddr,
    key: &Arc<String>,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let until = Instant::now() + duration;
    let clients: Vec<_> = (0..connections)
        .map(|_| {
            let key = key.clone();
            tokio::spawn(async move {
                let mut conn = Connection::open(addr).await?;
                let mut latencies = Vec::new();
                while Instant::now() < until {
                    let sent = Instant::now();
                    let (status, _) = conn
                        .send(Method::GET, "/api/v1/links?limit=1", Some(&key), None)
                        .await?;
                    anyhow::ensure!(status == StatusCode::OK, "the API answered {status}");
                    latencies.push(sent.elapsed().as_secs_f64() * 1e6);
                }
                Ok::<_, anyhow::Error>(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for client in clients {
        latencies.extend(client.await??);
    }
    latencies.sort_by(f64::total_cmp);
    let per_second = latencies.len() as f64 / duration.as_secs_f64();
    Ok((latencies, per_second))
}
