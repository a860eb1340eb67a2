//! `--metrics-listen`: Prometheus text on a listener of its own, and series that move by exactly
//! the traffic the test drives.

use std::collections::HashMap;

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use serde_json::json;
use shortlink_storage::testing::TestDatabase;

use crate::helpers::{Api, Receiver, Reply, Server, client, eventually, webhook_args};

/// One scrape: every sample by its series, written `name{a="x",b="y"}` with labels sorted.
struct Scrape(HashMap<String, f64>);

impl Scrape {
    async fn take(url: &str) -> Self {
        let res = client().get(url).send().await.expect("the metrics answer");
        assert_eq!(res.status(), 200);
        let content_type = res.headers()["content-type"]
            .to_str()
            .unwrap_or_default()
            .to_owned();
        assert!(content_type.starts_with("text/plain"), "{content_type}");
        let text = res.text().await.expect("a text body");
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|line| {
                let (series, value) = line.rsplit_once(' ').expect("`series value`");
                let value: f64 = value.parse().unwrap_or_else(|_| panic!("a number: {line}"));
                (normalise(series), value)
            })
            .collect();
        Self(samples)
    }

    /// [`Scrape::take`] of an owned address, for a task of its own.
    async fn take_from(url: String) -> Self {
        Self::take(&url).await
    }

    /// The sample of `name` with `labels`; 0 when the series does not exist yet.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let mut labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        labels.sort();
        let series = if labels.is_empty() {
            name.to_owned()
        } else {
            format!("{name}{{{}}}", labels.join(","))
        };
        self.0.get(&series).copied().unwrap_or(0.0)
    }
}

fn normalise(series: &str) -> String {
    match series.split_once('{') {
        None => series.to_owned(),
        Some((name, labels)) => {
            let mut labels: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
            labels.sort_unstable();
            format!("{name}{{{}}}", labels.join(","))
        }
    }
}

/// A server on `db` with its metrics on a listener of their own, and that listener's address.
async fn with_metrics(db: &str) -> (Server, std::net::SocketAddr) {
    let addr = metrics_addr();
    let server = Server::start(db, &["--metrics-listen".into(), addr.to_string()]).await;
    (server, addr)
}

/// An address that was free a moment ago, for `--metrics-listen`.
fn metrics_addr() -> std::net::SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
    probe.local_addr().expect("probe address")
}

#[tokio::test]
async fn the_series_move_by_exactly_the_traffic_driven() {
    let db = TestDatabase::sqlite();
    let metrics_addr = metrics_addr();
    let server = Server::start(
        &db.url,
        &[
            "--metrics-listen".into(),
            metrics_addr.to_string(),
            "--auth-failures-per-minute".into(),
            "2".into(),
        ],
    )
    .await;
    let key = server.first_run_key().await;
    let api = Api::new(&server, &key);
    let scrape_url = format!("http://{metrics_addr}/metrics");
    let code = api.create_link("https://example.com/metered").await["shortCode"]
        .as_str()
        .expect("a shortCode")
        .to_owned();

    // Not on the API's listener.
    assert_eq!(
        client()
            .get(server.url("/metrics"))
            .send()
            .await
            .expect("an answer")
            .status(),
        404
    );

    let before = Scrape::take(&scrape_url).await;
    for _ in 0..5 {
        assert_eq!(api.visit(&code, None, None).await.status(), 302);
    }
    assert_eq!(api.visit("NoSuchCode1", None, None).await.status(), 404);
    let (status, _) = Api::send(
        api.request(reqwest::Method::POST, "/links")
            .json(&json!({ "destination": "https://example.com/second" })),
    )
    .await;
    assert_eq!(status, 200);
    // Wrong keys from this address until it is refused: 401s, then 429s.
    let (mut unauthorized, mut limited) = (0.0, 0.0);
    while limited < 2.0 {
        let res = client()
            .get(server.url("/api/v1/links"))
            .bearer_auth("sk_wrong")
            .send()
            .await
            .expect("an answer");
        match res.status().as_u16() {
            401 => unauthorized += 1.0,
            429 => limited += 1.0,
            other => panic!("a wrong key got {other}"),
        }
    }
    let after = Scrape::take(&scrape_url).await;

    let moved = |name: &str, labels: &[(&str, &str)]| {
        after.value(name, labels) - before.value(name, labels)
    };
    let requests = "shortlink_http_requests_total";
    assert_eq!(
        moved(requests, &[("route", "redirect"), ("status", "302")]),
        5.0
    );
    assert_eq!(
        moved(requests, &[("route", "redirect"), ("status", "404")]),
        1.0
    );
    assert_eq!(moved("shortlink_redirects_total", &[]), 5.0);
    assert_eq!(
        moved(
            "shortlink_http_request_duration_seconds_count",
            &[("route", "redirect")]
        ),
        6.0
    );
    assert!(
        moved(
            "shortlink_http_request_duration_seconds_sum",
            &[("route", "redirect")]
        ) > 0.0
    );
    assert_eq!(
        moved(
            "shortlink_http_request_duration_seconds_bucket",
            &[("route", "redirect"), ("le", "+Inf")]
        ),
        6.0
    );
    assert_eq!(
        moved(requests, &[("route", "/api/v1/links"), ("status", "200")]),
        1.0
    );
    assert_eq!(
        moved(requests, &[("route", "/api/v1/links"), ("status", "401")]),
        unauthorized
    );
    assert_eq!(
        moved(requests, &[("route", "/api/v1/links"), ("status", "429")]),
        limited
    );
    assert_eq!(
        moved(
            "shortlink_rate_limited_requests_total",
            &[("route", "/api/v1/links")]
        ),
        limited
    );
}

#[tokio::test]
async fn webhook_attempts_are_counted_by_outcome() {
    let db = TestDatabase::sqlite();
    let metrics_addr = metrics_addr();
    let mut args = webhook_args("1h");
    args.extend(["--metrics-listen".into(), metrics_addr.to_string()]);
    let server = Server::start(&db.url, &args).await;
    let api = Api::new(&server, &server.first_run_key().await);
    let healthy = Receiver::healthy();
    let failing = Receiver::start(&[], Reply::Status(500));
    api.create_webhook(&healthy.url, &["link.created"]).await;
    api.create_webhook(&failing.url, &["link.created"]).await;
    api.create_link("https://example.com/announced").await;

    // One event, two endpoints: one attempt delivered, one failed and due again in an hour.
    let scrape_url = format!("http://{metrics_addr}/metrics");
    let deliveries = "shortlink_webhook_deliveries_total";
    let scrape = eventually(
        "both attempts counted",
        std::time::Duration::from_secs(20),
        async || {
            let scrape = Scrape::take(&scrape_url).await;
            let counted = scrape.value(deliveries, &[("outcome", "delivered")])
                + scrape.value(deliveries, &[("outcome", "retry")]);
            (counted >= 2.0).then_some(scrape)
        },
    )
    .await;
    assert_eq!(scrape.value(deliveries, &[("outcome", "delivered")]), 1.0);
    assert_eq!(scrape.value(deliveries, &[("outcome", "retry")]), 1.0);
    assert_eq!(scrape.value(deliveries, &[("outcome", "failed")]), 0.0);
    assert_eq!(healthy.received().len(), 1);
    assert_eq!(failing.received().len(), 1);
    // The failed delivery waits for its next attempt: the queue holds it alone.
    eventually(
        "the queue's depth is the one delivery due again",
        std::time::Duration::from_secs(20),
        async || {
            let scrape = Scrape::take(&scrape_url).await;
            (scrape.value("shortlink_webhook_queue_depth", &[]) == 1.0).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn clicks_go_from_pending_to_flushed() {
    let db = TestDatabase::sqlite();
    let (server, metrics_addr) = with_metrics(&db.url).await;
    let api = Api::new(&server, &server.first_run_key().await);
    let code = api.create_link("https://example.com/clicked").await["shortCode"]
        .as_str()
        .expect("a shortCode")
        .to_owned();
    let scrape_url = format!("http://{metrics_addr}/metrics");
    let before = Scrape::take(&scrape_url).await;
    for _ in 0..7 {
        assert_eq!(api.visit(&code, None, None).await.status(), 302);
    }

    let flushed = "shortlink_clicks_flushed_total";
    let after = eventually(
        "the 7 clicks flushed",
        std::time::Duration::from_secs(20),
        async || {
            let scrape = Scrape::take(&scrape_url).await;
            (scrape.value(flushed, &[]) - before.value(flushed, &[]) >= 7.0).then_some(scrape)
        },
    )
    .await;
    assert_eq!(after.value(flushed, &[]) - before.value(flushed, &[]), 7.0);
    assert_eq!(after.value("shortlink_clicks_pending", &[]), 0.0);
    // SQLite's pools: one writer connection, and readers beside it.
    let pool = |name, pool| after.value(name, &[("pool", pool)]);
    assert_eq!(pool("shortlink_db_connections_max", "writer"), 1.0);
    assert!(pool("shortlink_db_connections_max", "reader") >= 1.0);
    for pool in ["reader", "writer"] {
        let series = format!("shortlink_db_connections_in_use{{pool=\"{pool}\"}}");
        assert!(after.0.contains_key(&series), "{series} is reported");
    }
    let flushes = "shortlink_clicks_flush_duration_seconds_count";
    assert!(
        after.value(flushes, &[]) > before.value(flushes, &[]),
        "a flush was timed"
    );
}

/// Scrapes are unauthenticated and may come at once; each counts the webhook queue with a
/// connection of the pool the API uses. While the queue's table answers slowly, many scrapes at
/// once took every connection and the API answered 503; one count at a time leaves it the rest.
#[tokio::test]
async fn scrapes_at_once_leave_the_api_its_connections() {
    let Some(db) = TestDatabase::postgres(concat!(
        module_path!(),
        "::scrapes_at_once_leave_the_api_its_connections"
    ))
    .await
    else {
        return;
    };
    let (server, metrics_addr) = with_metrics(&db.url).await;
    let api = Api::new(&server, &server.first_run_key().await);
    let scrape_url = format!("http://{metrics_addr}/metrics");
    let (status, _) = Api::send(api.request(reqwest::Method::GET, "/links")).await;
    assert_eq!(status, 200);

    // The queue's table held by another transaction: every count of it waits.
    let mut holder = AsyncPgConnection::establish(&db.url)
        .await
        .expect("the test reaches PostgreSQL");
    holder
        .batch_execute("BEGIN; LOCK TABLE webhook_deliveries IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("the table is locked");
    let scrapes: Vec<_> = (0..24)
        .map(|_| tokio::spawn(Scrape::take_from(scrape_url.clone())))
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (status, body) = Api::send(api.request(reqwest::Method::GET, "/links")).await;
    assert_eq!(status, 200, "{body}");
    holder
        .batch_execute("ROLLBACK")
        .await
        .expect("the lock is let go");
    for scrape in scrapes {
        scrape.await.expect("the scrape answered");
    }
}
