//! Prometheus metrics, served in the text format at `/metrics` on a listener of their own
//! (`--metrics-listen`). The recorder is owned by the application and reached through the app
//! data, never installed as the process's global recorder: tests start many servers in one
//! process, and each must count only its own traffic.
//!
//! Recording costs atomics: a counter is an atomic add, a histogram sample a push onto a
//! lock-free bucket that the exporter drains when it renders or tidies up. Registering a series
//! (a map lookup behind a lock) is done once at start for every series a redirect can touch;
//! other routes register on first use and look the series up after that.

use std::collections::HashMap;
use std::net::TcpListener;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::http::StatusCode;
use actix_web::web::Data;
use actix_web::{App, HttpResponse, HttpServer};
use metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata, Recorder, Unit};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use shortlink_domain::NextStep;

/// Requests answered, by route and status.
pub const REQUESTS: &str = "shortlink_http_requests_total";
/// Time from a request's arrival to its answer, by route.
pub const REQUEST_SECONDS: &str = "shortlink_http_request_duration_seconds";
/// Redirects answered (3xx on a short link).
pub const REDIRECTS: &str = "shortlink_redirects_total";
/// Requests refused with 429, by route.
pub const RATE_LIMITED: &str = "shortlink_rate_limited_requests_total";

/// Webhook attempts, by outcome: `delivered`, `retry` (failed, tried again later) or `failed`
/// (failed, the last of the schedule).
pub const WEBHOOK_DELIVERIES: &str = "shortlink_webhook_deliveries_total";

/// Webhook deliveries waiting for their next attempt (read at scrape time).
pub const WEBHOOK_QUEUE: &str = "shortlink_webhook_queue_depth";
/// Database connections handed out, by pool (read at scrape time).
pub const POOL_IN_USE: &str = "shortlink_db_connections_in_use";
/// The most connections a pool opens, by pool.
pub const POOL_MAX: &str = "shortlink_db_connections_max";

/// Clicks counted and not yet written.
pub const CLICKS_PENDING: &str = "shortlink_clicks_pending";
/// Clicks written to the database.
pub const CLICKS_FLUSHED: &str = "shortlink_clicks_flushed_total";
/// Time one flush of clicks took (flushes that wrote some).
pub const FLUSH_SECONDS: &str = "shortlink_clicks_flush_duration_seconds";

/// The route label of a short link (actix-web's default service serves them).
pub const REDIRECT_ROUTE: &str = "redirect";
/// The route label of a path under the API that matches no route.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Latency buckets, in seconds: a redirect answers in tens of microseconds, a bulk creation in
/// tens of milliseconds.
const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5,
];

/// Statuses a short link answers with, registered at start so a redirect never registers.
const REDIRECT_STATUSES: &[u16] = &[301, 302, 307, 308, 400, 404, 405, 410, 429, 500, 503];

/// How often histogram samples nobody scraped are folded into their buckets.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

const METADATA: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, None);

/// The series one route records into.
struct RouteSeries {
    by_status: HashMap<u16, Counter>,
    latency: Histogram,
    rate_limited: Counter,
}

/// The application's metrics: the recorder, its renderer, and the redirect's series.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    redirect: RouteSeries,
    redirects: Counter,
    /// Delivered, retry, failed.
    deliveries: [Counter; 3],
    clicks_pending: Gauge,
    clicks_flushed: Counter,
    flush_seconds: Histogram,
    webhook_queue: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A recorder of its own, with every redirect series registered.
    pub fn new() -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(REQUEST_SECONDS.into()), LATENCY_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(FLUSH_SECONDS.into()), LATENCY_BUCKETS)
            })
            .expect("the latency buckets are not empty")
            .build_recorder();
        describe(&recorder);
        let handle = recorder.handle();
        let redirects = recorder.register_counter(&Key::from_static_name(REDIRECTS), &METADATA);
        let deliveries = ["delivered", "retry", "failed"].map(|outcome| {
            let key = Key::from_parts(WEBHOOK_DELIVERIES, vec![Label::new("outcome", outcome)]);
            recorder.register_counter(&key, &METADATA)
        });
        let clicks_pending =
            recorder.register_gauge(&Key::from_static_name(CLICKS_PENDING), &METADATA);
        let clicks_flushed =
            recorder.register_counter(&Key::from_static_name(CLICKS_FLUSHED), &METADATA);
        let flush_seconds =
            recorder.register_histogram(&Key::from_static_name(FLUSH_SECONDS), &METADATA);
        let webhook_queue =
            recorder.register_gauge(&Key::from_static_name(WEBHOOK_QUEUE), &METADATA);
        let mut metrics = Self {
            redirect: RouteSeries {
                by_status: HashMap::new(),
                latency: recorder
                    .register_histogram(&route_key(REQUEST_SECONDS, REDIRECT_ROUTE), &METADATA),
                rate_limited: recorder
                    .register_counter(&route_key(RATE_LIMITED, REDIRECT_ROUTE), &METADATA),
            },
            recorder,
            handle,
            redirects,
            deliveries,
            clicks_pending,
            clicks_flushed,
            flush_seconds,
            webhook_queue,
        };
        for &status in REDIRECT_STATUSES {
            let counter = metrics.requests(REDIRECT_ROUTE, status);
            metrics.redirect.by_status.insert(status, counter);
        }
        metrics
    }

    fn requests(&self, route: &str, status: u16) -> Counter {
        let key = Key::from_parts(
            REQUESTS,
            vec![
                Label::new("route", route.to_owned()),
                Label::new("status", status.to_string()),
            ],
        );
        self.recorder.register_counter(&key, &METADATA)
    }

    /// Records one answered request: its route label (see [`REDIRECT_ROUTE`]), status and
    /// latency.
    pub fn record_request(&self, route: &str, status: StatusCode, latency: Duration) {
        let code = status.as_u16();
        if route == REDIRECT_ROUTE {
            match self.redirect.by_status.get(&code) {
                Some(counter) => counter.increment(1),
                None => self.requests(route, code).increment(1),
            }
            self.redirect.latency.record(latency.as_secs_f64());
            if status.is_redirection() {
                self.redirects.increment(1);
            }
            if status == StatusCode::TOO_MANY_REQUESTS {
                self.redirect.rate_limited.increment(1);
            }
            return;
        }
        self.requests(route, code).increment(1);
        self.recorder
            .register_histogram(&route_key(REQUEST_SECONDS, route), &METADATA)
            .record(latency.as_secs_f64());
        if status == StatusCode::TOO_MANY_REQUESTS {
            self.recorder
                .register_counter(&route_key(RATE_LIMITED, route), &METADATA)
                .increment(1);
        }
    }

    /// Records one webhook attempt by what comes next.
    pub fn record_delivery(&self, next: &NextStep) {
        let index = match next {
            NextStep::Delivered => 0,
            NextStep::RetryAt(_) => 1,
            NextStep::Failed => 2,
        };
        self.deliveries[index].increment(1);
    }

    /// Records one flush that wrote `clicks` in `took`.
    pub fn record_flush(&self, clicks: u64, took: Duration) {
        self.clicks_flushed.increment(clicks);
        self.flush_seconds.record(took.as_secs_f64());
    }

    /// Sets the clicks counted and not yet written (read at scrape time).
    pub fn set_clicks_pending(&self, clicks: u64) {
        self.clicks_pending.set(clicks as f64);
    }

    /// Sets the webhook deliveries waiting (read at scrape time).
    pub fn set_webhook_queue(&self, deliveries: u64) {
        self.webhook_queue.set(deliveries as f64);
    }

    /// Sets how busy a connection pool is (read at scrape time).
    pub fn set_pool_usage(&self, pool: &'static str, in_use: usize, max: usize) {
        let key = |name| Key::from_parts(name, vec![Label::new("pool", pool)]);
        (self.recorder.register_gauge(&key(POOL_IN_USE), &METADATA)).set(in_use as f64);
        (self.recorder.register_gauge(&key(POOL_MAX), &METADATA)).set(max as f64);
    }

    /// Every series, in the Prometheus text format.
    pub fn render(&self) -> String {
        self.handle.render()
    }
}

fn route_key(name: &'static str, route: &str) -> Key {
    Key::from_parts(name, vec![Label::new("route", route.to_owned())])
}

fn describe(recorder: &PrometheusRecorder) {
    recorder.describe_counter(
        REQUESTS.into(),
        None,
        "Requests answered, by route and status.".into(),
    );
    recorder.describe_histogram(
        REQUEST_SECONDS.into(),
        Some(Unit::Seconds),
        "Time from a request's arrival to its answer, by route.".into(),
    );
    recorder.describe_counter(REDIRECTS.into(), None, "Redirects answered.".into());
    recorder.describe_counter(
        RATE_LIMITED.into(),
        None,
        "Requests refused with 429, by route.".into(),
    );
    recorder.describe_counter(
        WEBHOOK_DELIVERIES.into(),
        None,
        "Webhook attempts, by outcome (delivered, retry, failed).".into(),
    );
    recorder.describe_gauge(
        CLICKS_PENDING.into(),
        None,
        "Clicks counted and not yet written.".into(),
    );
    recorder.describe_counter(
        CLICKS_FLUSHED.into(),
        None,
        "Clicks written to the database.".into(),
    );
    recorder.describe_gauge(
        WEBHOOK_QUEUE.into(),
        None,
        "Webhook deliveries waiting for their next attempt.".into(),
    );
    recorder.describe_gauge(
        POOL_IN_USE.into(),
        None,
        "Database connections handed out, by pool.".into(),
    );
    recorder.describe_gauge(
        POOL_MAX.into(),
        None,
        "The most connections a pool opens, by pool.".into(),
    );
    recorder.describe_histogram(
        FLUSH_SECONDS.into(),
        Some(Unit::Seconds),
        "Time one flush of clicks took.".into(),
    );
}

/// Sets the gauges read at scrape time, just before the metrics are rendered (some ask the
/// database, hence a future).
pub type ScrapeGauges = std::sync::Arc<
    dyn Fn(Data<Metrics>) -> futures_util::future::BoxFuture<'static, ()> + Send + Sync,
>;

/// Serves `GET /metrics` on `listener` (one worker, no signal handling: the caller stops it
/// with the main server), running `gauges` before each render, and folds unscraped histogram
/// samples every few seconds so they do not pile up in memory.
pub fn serve(
    listener: TcpListener,
    metrics: Data<Metrics>,
    gauges: ScrapeGauges,
) -> std::io::Result<Server> {
    // Ends with the servers: they hold the only strong references.
    let upkeep = std::sync::Arc::downgrade(&metrics.clone().into_inner());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            tick.tick().await;
            let Some(metrics) = upkeep.upgrade() else {
                break;
            };
            metrics.handle.run_upkeep();
        }
    });
    Ok(HttpServer::new(move || {
        App::new()
            .app_data(metrics.clone())
            .app_data(Data::new(gauges.clone()))
            .route("/metrics", crate::get().to(scrape))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run())
}

async fn scrape(metrics: Data<Metrics>, gauges: Data<ScrapeGauges>) -> HttpResponse {
    gauges.as_ref()(metrics.clone()).await;
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(metrics.render())
}
