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
use shortlink_domain::BaseUrl;
use shortlink_http::clicks::ClickCounter;
use shortlink_http::{AppState, HttpSettings};
use shortlink_storage::{DatabaseKind, PoolOptions, Store};
use shortlink_webhooks::{DeliveryWorker, WakeHandle, WorkerConfig};
use tokio::sync::watch;

pub use config::{Config, DEFAULT_REDIRECT_INDEX_MIB};

/// How long a graceful stop waits for requests in flight.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a graceful stop keeps retrying to write the last clicks.
const CLICK_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A built server: bound to its port, migrated, not yet serving.
pub struct Application {
    port: u16,
    base_url: BaseUrl,
    server: Server,
    store: Store,
    clicks: Arc<ClickCounter>,
    worker: DeliveryWorker<Store>,
    wake: WakeHandle,
    first_run_key: Option<String>,
    metrics_server: Option<Server>,
}

impl Application {
    /// Connects and migrates the database, binds the listener, and on first run creates the
    /// `default` workspace with a key.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let store = Store::connect(
            &config.database_url,
            PoolOptions {
                max_connections: config.max_connections,
            },
        )?;
        store
            .migrate()
            .await
            .context("could not prepare the database")?;
        // First: it also refuses a second server on the same SQLite file, before any loading.
        store
            .start_click_journal(config.click_fold_interval)
            .await
            .context("could not start the click journal")?;
        load_redirect_index(&store, config.redirect_index_mib).await?;

        let listener = TcpListener::bind(&config.listen)
            .with_context(|| format!("could not listen on {}", config.listen))?;
        let addr = listener.local_addr()?;
        let base_url = match config.base_url {
            Some(base) => base,
            None => BaseUrl::parse(&format!("http://{addr}"))?,
        };

        let first_run_key = if config.first_run_banner {
            first_run(&store).await?
        } else {
            None
        };

        let clicks = Arc::new(ClickCounter::default());
        let (metrics, metrics_server) = metrics_server(config.metrics_listen.as_deref(), &clicks)?;
        let wake = WakeHandle::new();
        let mut worker = DeliveryWorker::new(
            store.clone(),
            WorkerConfig {
                schedule: config.webhook_retry_schedule,
                allow_private: config.webhook_allow_private_targets,
                ..WorkerConfig::default()
            },
        )?
        .with_wake_handle(wake.clone());
        if let Some(metrics) = metrics.clone() {
            worker = worker.with_observer(Arc::new(move |next| metrics.record_delivery(next)));
        }

        let settings = HttpSettings {
            base_url: base_url.clone(),
            webhook_allow_private_targets: config.webhook_allow_private_targets,
            auth_failures_per_minute: config.auth_failures_per_minute,
        };
        let state = Data::new(AppState::new(
            store.clone(),
            settings,
            clicks.clone(),
            wake.clone(),
        ));
        let access_log = shortlink_http::middleware::AccessLog {
            redirects_at_info: config.log_redirects,
        };
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
        .shutdown_timeout(SHUTDOWN_TIMEOUT.as_secs());
        if let Some(workers) = config.workers {
            server = server.workers(workers);
        }
        let server = server.listen(listener)?.run();

        Ok(Self {
            port: addr.port(),
            base_url,
            server,
            store,
            clicks,
            worker,
            wake,
            first_run_key,
            metrics_server,
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

    /// Serves until SIGTERM, SIGINT or [`ServerHandle::stop`]; then lets requests in flight
    /// finish, writes every pending click, and lets webhook attempts in flight finish.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let stopped = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let worker = tokio::spawn(self.worker.run(stopped(stop_rx.clone())));
        let clicks = {
            let (store, base, wake, clicks) = (
                self.store.clone(),
                self.base_url.clone(),
                self.wake.clone(),
                self.clicks.clone(),
            );
            let stop = stopped(stop_rx);
            tokio::spawn(async move {
                clicks
                    .run(&store, &base, &wake, stop, CLICK_DRAIN_TIMEOUT)
                    .await
            })
        };

        let metrics = self.metrics_server.map(|server| {
            let handle = server.handle();
            tokio::spawn(server);
            handle
        });
        let served = self.server.await;
        if let Some(metrics) = metrics {
            metrics.stop(true).await;
        }
        tracing::info!("stopping: writing pending clicks and finishing webhook attempts");
        let _ = stop_tx.send(true);
        let all_written = clicks.await.unwrap_or(false);
        if let Err(e) = self.store.fold_clicks().await {
            // Nothing is lost: the next start folds the journal.
            tracing::warn!(error = %e, "could not fold the click journal before stopping");
        }
        if let Err(e) = self.store.fold_codes().await {
            // Nothing is lost: the codes are in `links`, and the next start folds them.
            tracing::warn!(error = %e, "could not fold recent short codes before stopping");
        }
        let _ = worker.await;
        served.context("the HTTP server failed")?;
        anyhow::ensure!(
            all_written,
            "some clicks could not be written before stopping"
        );
        tracing::info!("stopped");
        Ok(())
    }
}

/// With an address, the metrics and their server on it (not yet serving); `clicks` reports its
/// flushes to them and its pending clicks at scrape time.
fn metrics_server(
    listen: Option<&str>,
    clicks: &Arc<ClickCounter>,
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
    clicks.observe_flushes(Arc::new(move |n, took| flushes.record_flush(n, took)));
    let pending = clicks.clone();
    let gauges = Arc::new(move |m: &shortlink_http::metrics::Metrics| {
        m.set_clicks_pending(pending.pending());
    });
    let server = shortlink_http::metrics::serve(listener, metrics.clone(), gauges)?;
    Ok((Some(metrics), Some(server)))
}

/// On SQLite, every link's redirect target in memory (the server is its database's one writer).
async fn load_redirect_index(store: &Store, mib: usize) -> anyhow::Result<()> {
    if mib == 0 || store.kind() != DatabaseKind::Sqlite {
        return Ok(());
    }
    let started = std::time::Instant::now();
    if store
        .load_redirect_index(mib << 20)
        .await
        .context("could not load the redirect index")?
    {
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "redirect index loaded"
        );
    } else {
        tracing::warn!(
            budget_mib = mib,
            "the links do not fit the redirect index: redirects read the database (raise \
             --redirect-index-mib)"
        );
    }
    Ok(())
}

/// When the database has no workspace at all, creates `default` with one key and prints the key
/// once, so a newcomer can call the API right away.
async fn first_run(store: &Store) -> anyhow::Result<Option<String>> {
    if !store.list_workspaces().await?.is_empty() {
        return Ok(None);
    }
    let workspace =
        admin::create_workspace(store, "default", shortlink_domain::DEFAULT_RATE_LIMIT).await?;
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
