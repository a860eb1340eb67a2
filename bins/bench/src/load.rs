//! The redirect load generator: N connections, each a task sending GETs back to back over its own
//! keep-alive connection, for a warm-up and then a measured period. Latency (request sent to
//! response read) goes to an HDR histogram; every 302 is counted against the path it answered,
//! warm-up included, so the server's click counters can be checked against it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use hyper::{Method, StatusCode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::http::Connection;
use crate::tasks::Tasks;

/// No connection sends more requests than this in one run, whatever the durations.
const MAX_REQUESTS_PER_CONNECTION: u64 = 50_000_000;
/// Latencies above this are recorded as this (a minute: far beyond any sane answer).
const MAX_LATENCY_NANOS: u64 = 60_000_000_000;

/// How hard and how long to drive a server.
#[derive(Debug, Clone, Copy)]
pub struct LoadSettings {
    /// Concurrent connections, one task each.
    pub connections: usize,
    /// Not measured: fills caches and connection pools, lets the CPU clock settle.
    pub warmup: Duration,
    /// Measured.
    pub duration: Duration,
    /// Draw paths from a Zipf distribution of this exponent (path 0 the most requested) instead
    /// of uniformly: closer to real traffic, where a few links get most clicks.
    pub zipf: Option<f64>,
}

/// What one load run saw.
pub struct LoadResult {
    /// Responses to requests started in the measured period.
    pub measured: u64,
    /// Responses in the whole run, warm-up included.
    pub total: u64,
    /// Length of the measured period.
    pub duration: Duration,
    /// Latency of the measured requests, in nanoseconds.
    pub latency: Histogram<u64>,
    /// Requests that failed (connection error or timeout); the connection is reopened.
    pub errors: u64,
    /// Responses other than 302.
    pub not_redirected: u64,
    /// 302s per path, by index into the paths driven, warm-up included.
    pub redirects: Vec<u32>,
}

impl LoadResult {
    /// Measured requests per second.
    pub fn requests_per_second(&self) -> f64 {
        self.measured as f64 / self.duration.as_secs_f64()
    }

    /// Latency at `quantile` (0..=1), in microseconds.
    pub fn latency_micros(&self, quantile: f64) -> f64 {
        self.latency.value_at_quantile(quantile) as f64 / 1000.0
    }
}

/// What one connection task saw.
struct ConnectionResult {
    measured: u64,
    total: u64,
    latency: Histogram<u64>,
    errors: u64,
    not_redirected: u64,
}

/// Drives `addr` with requests (`method`: GET, or HEAD, which shortlink answers alike without
/// counting a click) for paths picked at random from `paths` (uniformly, or by
/// [`LoadSettings::zipf`]).
pub async fn run(
    addr: SocketAddr,
    paths: Arc<Vec<String>>,
    settings: LoadSettings,
    method: Method,
) -> anyhow::Result<LoadResult> {
    anyhow::ensure!(!paths.is_empty(), "no paths to request");
    let redirects: Arc<Vec<AtomicU32>> = Arc::new((0..paths.len()).map(|_| 0.into()).collect());
    let start = Instant::now();
    let measure_from = start + settings.warmup;
    let end = measure_from + settings.duration;

    let mut tasks = Tasks::new();
    for _ in 0..settings.connections {
        let conn = Connection::open(addr).await?;
        let target = Target {
            addr,
            method: method.clone(),
            paths: paths.clone(),
            redirects: redirects.clone(),
        };
        let pick = Pick::new(paths.len(), settings.zipf)?;
        tasks.spawn(drive(conn, target, pick, measure_from, end));
    }

    let mut result = LoadResult {
        measured: 0,
        total: 0,
        duration: settings.duration,
        latency: new_histogram()?,
        errors: 0,
        not_redirected: 0,
        redirects: Vec::new(),
    };
    for part in tasks.join().await? {
        let part = part?;
        result.measured += part.measured;
        result.total += part.total;
        result.errors += part.errors;
        result.not_redirected += part.not_redirected;
        result.latency.add(&part.latency)?;
    }
    result.redirects = redirects
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    Ok(result)
}

fn new_histogram() -> anyhow::Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, MAX_LATENCY_NANOS, 3)?)
}

/// What one connection task sends, and where it counts the answers.
struct Target {
    addr: SocketAddr,
    method: Method,
    paths: Arc<Vec<String>>,
    redirects: Arc<Vec<AtomicU32>>,
}

/// How a connection picks the next path.
enum Pick {
    Uniform(usize),
    Zipf(rand_distr::Zipf<f64>),
}

impl Pick {
    fn new(paths: usize, zipf: Option<f64>) -> anyhow::Result<Self> {
        Ok(match zipf {
            None => Self::Uniform(paths),
            Some(s) => Self::Zipf(rand_distr::Zipf::new(paths as f64, s)?),
        })
    }

    fn next(&self, rng: &mut SmallRng) -> usize {
        match self {
            Self::Uniform(n) => rng.random_range(0..*n),
            // Ranks run from 1.
            Self::Zipf(zipf) => rand_distr::Distribution::sample(zipf, rng) as usize - 1,
        }
    }
}

async fn drive(
    mut conn: Connection,
    target: Target,
    pick: Pick,
    measure_from: Instant,
    end: Instant,
) -> anyhow::Result<ConnectionResult> {
    let Target {
        addr,
        method,
        paths,
        redirects,
    } = target;
    let mut rng = SmallRng::from_os_rng();
    let mut out = ConnectionResult {
        measured: 0,
        total: 0,
        latency: new_histogram()?,
        errors: 0,
        not_redirected: 0,
    };
    for _ in 0..MAX_REQUESTS_PER_CONNECTION {
        let sent = Instant::now();
        if sent >= end {
            break;
        }
        let i = pick.next(&mut rng).min(paths.len() - 1);
        match conn.send(method.clone(), &paths[i], None, None).await {
            Ok((status, _)) => {
                out.total += 1;
                if status == StatusCode::FOUND {
                    redirects[i].fetch_add(1, Ordering::Relaxed);
                } else {
                    out.not_redirected += 1;
                }
                if sent >= measure_from {
                    out.measured += 1;
                    let nanos = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    out.latency.saturating_record(nanos.max(1));
                }
            }
            Err(_) => {
                out.errors += 1;
                conn = Connection::open(addr).await?;
            }
        }
    }
    Ok(out)
}
