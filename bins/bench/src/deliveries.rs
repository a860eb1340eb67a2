//! Webhook deliveries: how many a second shortlink makes to a receiver on this machine while one
//! workspace creates links in bulk, and how soon another workspace's first delivery goes out
//! behind that backlog. The receiver runs in this process and answers 204 to every POST.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::{Context, bail};
use serde::Serialize;

use crate::api::ApiClient;
use crate::seed;
use crate::servers::{free_loopback_addr, sqlite_url, start_shortlink};

/// Links (and so `link.created` events) the busy workspace creates.
pub const EVENTS: usize = 50_000;
/// How long the deliveries may take in all before the run fails.
const DEADLINE: Duration = Duration::from_secs(120);

/// What the delivery measurement found.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryFigure {
    /// Events delivered to the busy workspace's endpoint.
    pub events: usize,
    /// From the first creation to the last delivery.
    pub seconds: f64,
    /// `events / seconds`.
    pub per_second: f64,
    /// From the other workspace's creation, made once the backlog was written, to its first
    /// delivery.
    pub other_first_delivery_ms: f64,
}

/// What the receiver saw.
#[derive(Default)]
pub struct Seen {
    /// Deliveries to any path but `/other`.
    pub busy: AtomicUsize,
    /// When the last of the busy endpoint's deliveries arrived.
    busy_last: Mutex<Option<Instant>>,
    /// When the other endpoint's first delivery arrived.
    other_first: Mutex<Option<Instant>>,
}

/// Runs the receiver on a thread of its own until the returned handle stops it.
pub fn receiver(addr: SocketAddr, seen: Arc<Seen>) -> anyhow::Result<actix_web::dev::ServerHandle> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            let server = HttpServer::new(move || {
                let seen = seen.clone();
                // The body is read, as a receiver that checks signatures reads it: answered
                // before its body arrived, actix closes the connection, and the attempt that
                // reused it fails.
                App::new().default_service(web::post().to(
                    move |req: actix_web::HttpRequest, _body: web::Bytes| {
                        let seen = seen.clone();
                        async move {
                            let now = Instant::now();
                            if req.path() == "/other" {
                                seen.other_first
                                    .lock()
                                    .map(|mut t| *t.get_or_insert(now))
                                    .ok();
                            } else {
                                seen.busy.fetch_add(1, Ordering::Relaxed);
                                seen.busy_last.lock().map(|mut t| *t = Some(now)).ok();
                            }
                            HttpResponse::NoContent().finish()
                        }
                    },
                ))
            })
            .workers(2)
            .disable_signals()
            .bind(addr);
            match server {
                Ok(server) => {
                    let server = server.run();
                    let _ = tx.send(Ok(server.handle()));
                    let _ = server.await;
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
    });
    rx.recv()
        .context("the receiver thread ended")?
        .context("the receiver could not listen")
}

/// shortlink on a fresh SQLite file in `dir`, as a user runs it, allowed to deliver to this
/// machine (the receiver is on loopback).
pub async fn measure(bin: &Path, dir: &Path, base_url: &str) -> anyhow::Result<DeliveryFigure> {
    eprintln!("webhook deliveries: {EVENTS} events of one workspace, then one of another");
    let url = sqlite_url(&dir.join("deliveries.db"));
    let busy_key = seed::workspace_and_key(bin, &url)?;
    let other_key = seed::other_workspace_and_key(bin, &url)?;
    let seen = Arc::new(Seen::default());
    let receiver_addr = free_loopback_addr()?;
    let receiver = receiver(receiver_addr, seen.clone())?;

    let addr = free_loopback_addr()?;
    // The receiver is on loopback, which deliveries otherwise refuse.
    let extra = ["--webhook-allow-private-targets"];
    let log = dir.join("deliveries.log");
    let mut server = start_shortlink(bin, &url, addr, base_url, &extra, log, None)?;
    server.wait_ready("/healthz").await?;
    let target = |path: &str| format!("http://{receiver_addr}/{path}");
    ApiClient::open(addr, &busy_key)
        .await?
        .create_webhook(&target("busy"), "link.created")
        .await?;
    let mut other = ApiClient::open(addr, &other_key).await?;
    other
        .create_webhook(&target("other"), "link.created")
        .await?;

    let started = Instant::now();
    seed::through_api(addr, &busy_key, EVENTS, 4).await?;
    let other_created = Instant::now();
    if !other.create_one("https://example.com/other").await? {
        bail!("the other workspace's link was not created");
    }
    while seen.busy.load(Ordering::Relaxed) < EVENTS
        || seen.other_first.lock().map(|t| t.is_none()).unwrap_or(true)
    {
        if started.elapsed() > DEADLINE {
            bail!(
                "{} of {EVENTS} deliveries within {DEADLINE:?}",
                seen.busy.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.stop()?;
    receiver.stop(false).await;
    let last = seen.busy_last.lock().ok().and_then(|t| *t);
    let other_first = seen.other_first.lock().ok().and_then(|t| *t);
    let (Some(last), Some(other_first)) = (last, other_first) else {
        bail!("the receiver lost its times");
    };
    let seconds = last.duration_since(started).as_secs_f64();
    Ok(DeliveryFigure {
        events: EVENTS,
        seconds,
        per_second: EVENTS as f64 / seconds,
        other_first_delivery_ms: other_first.duration_since(other_created).as_secs_f64() * 1000.0,
    })
}
