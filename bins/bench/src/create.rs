//! Creation throughput: `POST /api/v1/links` (one link per request) and `POST
//! /api/v1/links/bulk` (100 per request), each from several connections sending back to back
//! for a fixed time, in links created per second.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::api::{ApiClient, BULK_BATCH};
use crate::servers::ServerProcess;
use crate::tasks::Tasks;

/// No connection sends more requests than this in one measurement.
const MAX_REQUESTS_PER_CONNECTION: u64 = 10_000_000;

/// One request at a time per connection: single links or bulk batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// `POST /api/v1/links`.
    Single,
    /// `POST /api/v1/links/bulk` with 100 links.
    Bulk,
}

/// What one creation measurement saw.
#[derive(Debug, Clone, Serialize)]
pub struct CreationFigure {
    /// `sqlite` or `postgres`.
    pub database: &'static str,
    /// Single or bulk.
    pub mode: Mode,
    /// Concurrent connections.
    pub connections: usize,
    /// Links created.
    pub links: u64,
    /// Requests that failed (any status but 200, or a connection error).
    pub failed_requests: u64,
    /// Wall time, from the first request to the last answer.
    pub seconds: f64,
    /// Links created per second.
    pub links_per_second: f64,
    /// Server CPU time per link created, microseconds.
    pub server_cpu_micros_per_link: f64,
}

/// Creates links on `server` with `connections` connections for `duration`.
pub async fn measure(
    database: &'static str,
    mode: Mode,
    server: &ServerProcess,
    key: &str,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<CreationFigure> {
    let addr = server.addr();
    let mut clients = Vec::with_capacity(connections);
    for _ in 0..connections {
        clients.push(ApiClient::open(addr, key).await?);
    }
    let server_cpu = server.cpu_time()?;
    let started = Instant::now();
    let end = started + duration;
    let mut tasks = Tasks::new();
    for (task, client) in clients.into_iter().enumerate() {
        let key = key.to_owned();
        tasks.spawn(create_until(client, addr, key, mode, task, end));
    }
    let (mut links, mut failed_requests) = (0, 0);
    for outcome in tasks.join().await? {
        let (made, failed) = outcome?;
        links += made;
        failed_requests += failed;
    }
    let seconds = started.elapsed().as_secs_f64();
    let server_cpu = server.cpu_time()?.saturating_sub(server_cpu);
    Ok(CreationFigure {
        database,
        mode,
        connections,
        links,
        failed_requests,
        seconds,
        links_per_second: links as f64 / seconds,
        server_cpu_micros_per_link: server_cpu.as_secs_f64() * 1e6 / links.max(1) as f64,
    })
}

/// Sends creation requests back to back until `end`; returns (links created, failed requests).
async fn create_until(
    mut client: ApiClient,
    addr: SocketAddr,
    key: String,
    mode: Mode,
    task: usize,
    end: Instant,
) -> anyhow::Result<(u64, u64)> {
    let (mut links, mut failed) = (0u64, 0u64);
    for n in 0..MAX_REQUESTS_PER_CONNECTION {
        if Instant::now() >= end {
            break;
        }
        let made = match mode {
            Mode::Single => client
                .create_one(&format!("https://example.com/created/{task}/{n}"))
                .await
                .map(u64::from),
            Mode::Bulk => {
                let destinations: Vec<String> = (0..BULK_BATCH)
                    .map(|i| format!("https://example.com/created/{task}/{n}/{i}"))
                    .collect();
                client
                    .create_bulk(&destinations)
                    .await
                    .map(|codes| codes.len() as u64)
            }
        };
        match made {
            Ok(0) => failed += 1,
            Ok(made) => links += made,
            Err(_) => {
                failed += 1;
                client = ApiClient::open(addr, &key).await?;
            }
        }
    }
    Ok((links, failed))
}
