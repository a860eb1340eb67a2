//! The shortlink server: [`Application::build`] wires configuration, storage, routes and
//! background tasks; `main.rs` only parses the command line, starts logging and calls it.

pub mod admin;
mod config;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::{Server, ServerHandle};
use actix_web::middleware::from_fn;
use actix_web::web::Data;
use actix_web::{App, HttpServer};
use anyhow::Context;
use shortlink_analytics::GeoIp;
use shortlink_domain::BaseUrl;
use shortlink_http::{AppState, HttpSettings};
use shortlink_service::{Service, ServiceSettings};
use shortlink_storage::{PoolOptions, ServerOptions, Store, StoreOptions};
use shortlink_webhooks::WorkerConfig;

pub use config::{Config, DEFAULT_LISTEN, DEFAULT_REDIRECT_INDEX_MIB};

/// How long a graceful stop waits for requests in flight.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// A built server: bound to its port, migrated, not yet serving.
pub struct Application {
    port: u16,
    base_url: BaseUrl,
    server: Server,
    service: Service,
    first_run_key: Option<String>,
    metrics_server: Option<Server>,
    /// SIGTERM, SIGINT and SIGQUIT, listened for from before the server accepts its first
    /// connection: one arriving in between would otherwise end the process on the spot.
    signals: Option<StopSignals>,
}

/// How the server opens its database: as the file's one server, on SQLite.
fn store_options(config: &Config) -> StoreOptions {
    StoreOptions {
        pool: PoolOptions {
            max_connections: config.max_connections,
        },
        server: Some(ServerOptions {
            redirect_index_mib: config.redirect_index_mib,
            click_fold_interval: config.click_fold_interval,
        }),
    }
}

/// The service's settings from the server's.
fn service_settings(
    config: &Config,
    base_url: BaseUrl,
    geoip: Option<Arc<GeoIp>>,
) -> ServiceSettings {
    ServiceSettings {
        webhooks: WorkerConfig {
            schedule: config.webhook_retry_schedule.clone(),
            allow_private: config.webhook_allow_private_targets,
            ..WorkerConfig::default()
        },
        analytics: config.analytics,
        geoip,
        analytics_retention: config.analytics_retention,
        delivery_retention: config.delivery_retention,
        clock: config.clock.clone(),
        ..ServiceSettings::new(base_url)
    }
}

/// Warns of a setup that works but not as several instances, or visitors, would expect: rate
/// limits per instance without Redis on a `shared` (PostgreSQL) database, and short URLs under
/// an address no visitor reaches, or that differs between instances, without `--base-url`.
fn warn_about_sharing(
    config: &Config,
    shared: bool,
    addr: std::net::SocketAddr,
    base_url: &BaseUrl,
) {
    let base_url_given = config.base_url.is_some();
    if shared && config.redis_url.is_none() {
        // Changes reach every instance's caches (LISTEN/NOTIFY); rate limits need Redis.
        tracing::warn!(
            "without --redis-url, rate limits are counted per instance: with N instances, a \
             workspace may make N times its rate"
        );
    }
    if !base_url_given && addr.ip().is_unspecified() {
        // Listening on every interface, the address is no one's way in: short URLs on
        // 0.0.0.0 lead nowhere.
        tracing::warn!(
            base_url = base_url.as_str(),
            "without --base-url, short links are made under the listening address, which no \
             visitor can reach; give the public one with --base-url"
        );
    } else if shared && !base_url_given {
        // Links live under their base's domain: instances on other addresses would each
        // answer only for the links made through them.
        tracing::warn!(
            base_url = base_url.as_str(),
            "without --base-url, short links are made under this instance's own address; \
             give every instance of one database the same --base-url"
        );
    }
}

impl Application {
    /// Binds the listener, then connects and migrates the database, and on first run creates the
    /// `default` workspace with a key. Unless [`Config::stop_on_signals`] is false, it takes
    /// SIGTERM, SIGINT and SIGQUIT over for the process (see there).
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        // What needs no database comes first: a mistyped flag stops the server before it creates
        // or migrates a database.
        let listener = TcpListener::bind(&config.listen)
            .with_context(|| format!("could not listen on {}", config.listen))?;
        if let Some(url) = &config.redis_url {
            // Not echoed: it may hold a password.
            shortlink_http::ratelimit::RedisRateLimiter::check_url(url)
                .context("--redis-url is not a usable Redis URL")?;
        }
        let geoip = match &config.geoip_db {
            Some(path) => Some(Arc::new(GeoIp::open(path)?)),
            None => None,
        };
        reload_on_hangup(geoip.clone());
        let store = Store::open(&config.database_url, store_options(&config))
            .await
            .context("could not open the database")?;

        let addr = listener.local_addr()?;
        let base_url = match config.base_url.clone() {
            Some(base) => base,
            None => BaseUrl::parse(&format!("http://{addr}"))?,
        };

        let shared = store.kind() == shortlink_storage::DatabaseKind::Postgres;
        warn_about_sharing(&config, shared, addr, &base_url);
        let service = Service::new(store, service_settings(&config, base_url.clone(), geoip))?;
        let (metrics, metrics_server) = metrics_server(config.metrics_listen.as_deref(), &service)?;
        // After everything a flag can make fail: a key made and then not shown (the start failed)
        // would never be shown, the next start finding a workspace.
        let first_run_key = if config.first_run_banner {
            first_run(service.store()).await?
        } else {
            None
        };
        let settings = HttpSettings {
            auth_failures_per_minute: config.auth_failures_per_minute,
            root_redirect: config.root_redirect.clone(),
            request_body_timeout: config.request_body_timeout,
            trusted_proxies: config.trusted_proxies.clone(),
            redis_url: config.redis_url.clone(),
        };
        let state = Data::new(AppState::new(service.clone(), settings));
        let access_log = shortlink_http::middleware::AccessLog {
            redirects_at_info: config.log_redirects,
        };
        let signals = config.stop_on_signals.then(StopSignals::listen).flatten();
        let mut server = HttpServer::new(move || {
            let state = state.clone();
            let metrics = metrics.clone();
            App::new()
                .app_data(access_log)
                .configure(|cfg| {
                    if let Some(metrics) = metrics {
                        cfg.app_data(metrics);
                    }
                })
                .wrap(from_fn(shortlink_http::middleware::request_context))
                .configure(|cfg| shortlink_http::configure(cfg, state))
        })
        .shutdown_timeout(SHUTDOWN_TIMEOUT.as_secs())
        // The signals are `StopSignals`' (actix's own stop at once on SIGINT).
        .disable_signals();
        if let Some(workers) = config.workers {
            server = server.workers(workers);
        }
        let server = server.listen(listener)?.run();

        Ok(Self {
            port: addr.port(),
            base_url,
            server,
            service,
            first_run_key,
            metrics_server,
            signals,
        })
    }

    /// The bound port (useful with port 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The base of short URLs.
    pub fn base_url(&self) -> &BaseUrl {
        &self.base_url
    }

    /// The key created on first run, if this build created one.
    pub fn first_run_key(&self) -> Option<&str> {
        self.first_run_key.as_deref()
    }

    /// A handle that stops the server gracefully, as SIGTERM and SIGINT do.
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Serves until SIGTERM, SIGINT (when it listens for them) or [`ServerHandle::stop`]; then
    /// lets requests in flight finish, writes every pending click, and lets webhook attempts in
    /// flight finish.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let background = {
            let service = self.service.clone();
            tokio::spawn(async move {
                service
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await
            })
        };

        let signals = self
            .signals
            .map(|signals| signals.stop(self.server.handle()));
        let metrics = self.metrics_server.map(|server| {
            let handle = server.handle();
            tokio::spawn(server);
            handle
        });
        let served = self.server.await;
        if let Some(signals) = signals {
            signals.abort();
        }
        if let Some(metrics) = metrics {
            metrics.stop(true).await;
        }
        tracing::info!("stopping: writing pending clicks and finishing webhook attempts");
        let _ = stop.send(());
        // Shut down whatever became of the background tasks: what they left pending is written
        // here, and the folds run.
        let ran = background.await;
        let stopped = self.service.shutdown().await;
        served.context("the HTTP server failed")?;
        ran.context("the background tasks panicked")?.and(stopped)?;
        tracing::info!("stopped");
        Ok(())
    }
}

/// With an address, the metrics and their server on it (not yet serving); the service reports
/// its flushes and webhook attempts to them, and at scrape time its pending clicks, the webhook
/// queue's depth and how busy its connection pools are.
fn metrics_server(
    listen: Option<&str>,
    service: &Service,
) -> anyhow::Result<(
    Option<Data<shortlink_http::metrics::Metrics>>,
    Option<Server>,
)> {
    let Some(listen) = listen else {
        return Ok((None, None));
    };
    let listener = TcpListener::bind(listen)
        .with_context(|| format!("could not listen for metrics on {listen}"))?;
    let metrics = Data::new(shortlink_http::metrics::Metrics::new());
    let flushes = metrics.clone();
    service.observe_flushes(Arc::new(move |n, took| flushes.record_flush(n, took)));
    let attempts = metrics.clone();
    service.observe_deliveries(Arc::new(move |next| attempts.record_delivery(next)));
    let service = service.clone();
    // One count of the queue at a time: scrapes are unauthenticated and may come at once, and
    // each count takes a connection of the pool the API uses.
    let counting = Arc::new(tokio::sync::Mutex::new(()));
    let gauges: shortlink_http::metrics::ScrapeGauges = Arc::new(move |m| {
        let (service, counting) = (service.clone(), counting.clone());
        Box::pin(async move {
            m.set_clicks_pending(service.clicks_pending());
            for pool in service.store().pool_usage() {
                m.set_pool_usage(pool.pool, pool.in_use, pool.max);
            }
            // A database that does not answer, or a count already under way, leaves the last
            // depth: the scrape still answers.
            if let Ok(_counting) = counting.try_lock()
                && let Ok(depth) = service.store().pending_deliveries().await
            {
                m.set_webhook_queue(depth);
            }
        })
    });
    let server = shortlink_http::metrics::serve(listener, metrics.clone(), gauges)?;
    Ok((Some(metrics), Some(server)))
}

/// When the database has no workspace at all, creates `default` with one key and prints the key
/// once, so a newcomer can call the API right away. Of several instances started together on a
/// new database, the one whose creation lands prints it; the others start without a banner.
async fn first_run(store: &Store) -> anyhow::Result<Option<String>> {
    if !store.list_workspaces().await?.is_empty() {
        return Ok(None);
    }
    let workspace = admin::new_workspace("default", shortlink_domain::DEFAULT_RATE_LIMIT)?;
    match store.create_workspace(&workspace).await {
        Ok(()) => {}
        // Another instance starting on the same new database made it first, and shows its key.
        Err(shortlink_storage::StorageError::AlreadyExists(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let (_, secret) = admin::create_key(store, &workspace, "first-run").await?;
    Ok(Some(secret.expose().to_owned()))
}

/// The first-run banner, printed on stderr by `serve`.
pub fn first_run_banner(key: &str, base_url: &BaseUrl) -> String {
    let line = "=".repeat(78);
    format!(
        "\n{line}\n  shortlink: first run. Created workspace 'default' and this API key:\n\n    {key}\n\n  \
         It is shown only this once; keep it. Try:\n\n    curl -X POST {base}/api/v1/links \\\n      \
         -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \\\n      \
         -d '{{\"destination\": \"https://example.com\"}}'\n{line}\n",
        base = base_url.as_str()
    )
}

/// The signals that stop the server: SIGTERM and SIGINT (Ctrl-C) gracefully (requests in flight
/// finish, then pending clicks are written), SIGQUIT without waiting for requests in flight.
/// actix's own handling is off: it stops at once on SIGINT, cutting requests in flight.
struct StopSignals {
    #[cfg(unix)]
    streams: [tokio::signal::unix::Signal; 3],
}

impl StopSignals {
    /// Starts listening (the signals' default action, ending the process, no longer applies).
    fn listen() -> Option<Self> {
        #[cfg(not(unix))]
        return None;
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let kinds = [
                SignalKind::terminate(),
                SignalKind::interrupt(),
                SignalKind::quit(),
            ];
            match kinds.map(signal) {
                [Ok(term), Ok(int), Ok(quit)] => Some(Self {
                    streams: [term, int, quit],
                }),
                _ => {
                    tracing::warn!(
                        "cannot listen for SIGTERM, SIGINT and SIGQUIT: they end the process at once"
                    );
                    None
                }
            }
        }
    }

    /// Stops `server` on the first of them; the task ends when aborted.
    fn stop(self, server: ServerHandle) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            #[cfg(unix)]
            {
                let [mut term, mut int, mut quit] = self.streams;
                let (name, graceful) = tokio::select! {
                    _ = term.recv() => ("SIGTERM", true),
                    _ = int.recv() => ("SIGINT", true),
                    _ = quit.recv() => ("SIGQUIT", false),
                };
                tracing::info!(graceful, "{name} received; stopping");
                server.stop(graceful).await;
            }
        })
    }
}

/// Reloads the GeoIP database on every SIGHUP (the databases are updated monthly: replace the
/// file, then `kill -HUP`), keeping the old one when the new one does not open. Without one, a
/// SIGHUP reloads nothing, and says so: its default action would end the process at once,
/// without writing the clicks still in memory (a `systemctl reload`, a `kill -HUP` sent to
/// every server).
fn reload_on_hangup(geoip: Option<Arc<GeoIp>>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: the GeoIP database is not reloadable");
            return;
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let Some(geoip) = &geoip else {
                    tracing::warn!("SIGHUP: nothing to reload (no --geoip-db)");
                    continue;
                };
                match geoip.reload() {
                    Ok(()) => {
                        tracing::info!(path = %geoip.path().display(), "reloaded the GeoIP database")
                    }
                    Err(e) => tracing::warn!(error = %e, "kept the GeoIP database loaded before"),
                }
            }
        });
    }
}
