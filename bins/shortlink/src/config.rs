//! The server's settings, as a typed value passed in (never a global), so tests build as many
//! differently configured servers as they like.

use std::time::Duration;

use shortlink_domain::BaseUrl;
use shortlink_http::HttpSettings;
use shortlink_http::routes::dashboard::RootRedirect;
use shortlink_storage::{PoolOptions, ServerOptions};
use shortlink_webhooks::{RetrySchedule, WorkerConfig};

pub use shortlink_storage::DEFAULT_REDIRECT_INDEX_MIB;

/// Where the server listens unless told otherwise (`--listen`).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// Everything [`crate::Application::build`] needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// `sqlite://PATH` or `postgres://…`.
    pub database_url: String,
    /// Address to bind, e.g. `127.0.0.1:8080`; port 0 picks a free one.
    pub listen: String,
    /// Public base of short URLs; `http://<bound address>` when not set.
    pub base_url: Option<BaseUrl>,
    /// Whether webhooks may target loopback and private addresses.
    pub webhook_allow_private_targets: bool,
    /// Delays between webhook delivery attempts.
    pub webhook_retry_schedule: RetrySchedule,
    /// Failed authentications allowed per client address per minute before it gets 429.
    pub auth_failures_per_minute: u32,
    /// Database connections (PostgreSQL) or reader connections (SQLite).
    pub max_connections: usize,
    /// On SQLite, memory for every link's redirect target (0: none; redirects then read the
    /// database behind the bounded cache). See `ServerOptions::redirect_index_mib`.
    pub redirect_index_mib: usize,
    /// On SQLite, how often journaled clicks are folded into the file's counters: how stale the
    /// counters another process reads may be. See `ServerOptions::click_fold_interval`.
    pub click_fold_interval: Duration,
    /// HTTP worker threads; the number of CPUs when not set.
    pub workers: Option<usize>,
    /// Whether to create the `default` workspace and print its key when there is no workspace.
    pub first_run_banner: bool,
    /// Whether SIGTERM and SIGINT stop the server gracefully and SIGQUIT at once (the binary's
    /// way; true by default). Listening takes the signals over for the whole process, for good
    /// (their default action, ending it, no longer applies): a program that embeds the server and
    /// handles signals itself sets this false and stops it through [`crate::Application::handle`].
    pub stop_on_signals: bool,
    /// Where `/` sends visitors instead of serving the dashboard.
    pub root_redirect: Option<RootRedirect>,
    /// Log redirects (and every other request outside the API) at `info` instead of `debug`.
    pub log_redirects: bool,
    /// Where to serve Prometheus metrics at `/metrics`; `None`: no metrics are recorded.
    pub metrics_listen: Option<String>,
    /// How long a request body may take to arrive whole before the request is answered 408.
    pub request_body_timeout: Duration,
    /// Proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: shortlink_analytics::TrustedProxies,
    /// The GeoIP database, if any.
    pub geoip_db: Option<std::path::PathBuf>,
    /// Redis for the rate limits shared by every instance.
    pub redis_url: Option<String>,
    /// Whether every click is recorded as an analytics event.
    pub analytics: bool,
    /// How long click events are kept; `None`: forever.
    pub analytics_retention: Option<Duration>,
    /// How long ended webhook deliveries are kept; `None`: forever.
    pub delivery_retention: Option<Duration>,
    /// What time it is for links' expiry: the system's clock (an embedding test sets its own;
    /// not a command-line option).
    pub clock: shortlink_service::Clock,
}

impl Config {
    /// The defaults of the command line for `database_url`: each the default of the crate
    /// that uses the setting, so that it is written once.
    pub fn new(database_url: impl Into<String>) -> Self {
        let server = ServerOptions::default();
        let http = HttpSettings::default();
        Self {
            database_url: database_url.into(),
            listen: DEFAULT_LISTEN.into(),
            base_url: None,
            webhook_allow_private_targets: WorkerConfig::default().allow_private,
            webhook_retry_schedule: RetrySchedule::default(),
            auth_failures_per_minute: http.auth_failures_per_minute,
            max_connections: PoolOptions::default().max_connections,
            redirect_index_mib: server.redirect_index_mib,
            click_fold_interval: server.click_fold_interval,
            workers: None,
            first_run_banner: true,
            stop_on_signals: true,
            root_redirect: http.root_redirect,
            log_redirects: false,
            metrics_listen: None,
            request_body_timeout: http.request_body_timeout,
            trusted_proxies: http.trusted_proxies,
            geoip_db: None,
            redis_url: http.redis_url,
            analytics: true,
            analytics_retention: Some(shortlink_service::ANALYTICS_RETENTION),
            delivery_retention: Some(shortlink_service::DELIVERY_RETENTION),
            clock: shortlink_service::Clock::system(),
        }
    }
}
