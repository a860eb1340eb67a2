//! Three real server processes on one PostgreSQL database and one Redis, spoken to in turn as a
//! load balancer would: they behave as one service. Changes show everywhere within a second
//! (also after the change channel was cut), one workspace's rate holds for all three together,
//! clicks are exact, each webhook event is delivered once, and Redis going away costs nothing
//! but the sharing of limits.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use reqwest::Method;
use serde_json::{Value, json};
use shortlink_storage::testing::TestDatabase;

use crate::helpers::{Api, Receiver, Server, cli, eventually, webhook_args};
use crate::redis::Redis;

const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
/// How soon a change made through one instance must show on the others.
const WITHIN: Duration = Duration::from_secs(1);

/// Three servers on `db` sharing `redis`, and a client of each with the first-run key.
async fn three(db: &TestDatabase, redis: &Redis) -> ([Server; 3], [Api; 3]) {
    let mut args = webhook_args("1s,1s");
    args.extend(["--redis-url", redis.url(), "--base-url", "https://sho.rt"].map(String::from));
    let first = Server::start(&db.url, &args).await;
    let key = first.first_run_key().await;
    let servers = [
        first,
        Server::start(&db.url, &args).await,
        Server::start(&db.url, &args).await,
    ];
    let apis = [0, 1, 2].map(|i| Api::new(&servers[i], &key));
    (servers, apis)
}

async fn send(api: &Api, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = api.request(method, path);
    if let Some(body) = body {
        request = request.json(&body);
    }
    Api::send(request).await
}

/// `GET /readyz`'s `data`.
async fn ready(api: &Api) -> Value {
    let res = api.http.get(format!("{}/readyz", api.base)).send().await;
    let body: Value = res
        .expect("the server answers")
        .json()
        .await
        .expect("a JSON body");
    body["data"].clone()
}

/// Waits until every one of `apis` answers `code` with `status` (and `location`).
async fn everywhere(apis: &[Api], code: &str, status: u16, location: Option<&str>) {
    for api in apis {
        let what = format!("{} answering {code} with {status} {location:?}", api.base);
        eventually(&what, WITHIN, async || {
            let res = api.visit(code, Some(BROWSER), None).await;
            let at = res.headers().get("location").and_then(|l| l.to_str().ok());
            (res.status().as_u16() == status && at == location).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn three_instances_on_postgresql_and_redis_behave_as_one() {
    let test = concat!(module_path!(), "::three_instances");
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    let mut redis = Redis::start();
    let (servers, apis) = three(&db, &redis).await;
    let receiver = Receiver::healthy();
    apis[0]
        .create_webhook(&receiver.url, &["link.created"])
        .await;

    // A code the others cached as unknown, created through the first: found everywhere.
    for api in &apis[1..] {
        assert_eq!(api.visit("promo", Some(BROWSER), None).await.status(), 404);
    }
    let promo = json!({"destination": "https://a.example/promo", "customSlug": "promo"});
    let (status, created) = send(&apis[0], Method::POST, "/links", Some(promo)).await;
    assert_eq!(status, 200, "{created}");
    everywhere(&apis, "promo", 302, Some("https://a.example/promo")).await;
    // Changed through the second, deleted through the third.
    let change = json!({"destination": "https://a.example/changed"});
    let (status, _) = send(&apis[1], Method::PATCH, "/links/promo", Some(change)).await;
    assert_eq!(status, 200);
    everywhere(&apis, "promo", 302, Some("https://a.example/changed")).await;
    let (status, _) = send(&apis[2], Method::DELETE, "/links/promo", None).await;
    assert_eq!(status, 200);
    everywhere(&apis, "promo", 404, None).await;

    // Clicks spread over the three are counted exactly; each creation's event arrives once.
    let mut codes = Vec::new();
    for (i, api) in apis.iter().enumerate() {
        let link = api
            .create_link(&format!("https://example.com/spread/{i}"))
            .await;
        codes.push(link["shortCode"].as_str().expect("a code").to_owned());
    }
    for round in 0..30 {
        for (i, code) in codes.iter().enumerate() {
            let api = &apis[(round + i) % 3];
            assert_eq!(api.visit(code, Some(BROWSER), None).await.status(), 302);
        }
    }
    for code in &codes {
        eventually("30 clicks counted", Duration::from_secs(5), async || {
            let (_, link) = send(&apis[0], Method::GET, &format!("/links/{code}"), None).await;
            (link["data"]["clicks"] == 30).then_some(())
        })
        .await;
    }
    let events = receiver
        .wait_for(4, Duration::from_secs(15), |r| {
            r.event_type() == "link.created"
        })
        .await;
    let ids: HashSet<&str> = events.iter().map(|r| r.id()).collect();
    assert_eq!((events.len(), ids.len()), (4, 4), "each event once");

    // A revoked key stops working everywhere.
    let second_key = cli(&db.url, &["key", "create", "--workspace", "default"])
        .success()
        .trim()
        .to_owned();
    let with_second = [0, 1, 2].map(|i| Api::new(&servers[i], &second_key));
    for api in &with_second {
        assert_eq!(send(api, Method::GET, "/links?limit=1", None).await.0, 200);
    }
    let listed = cli(&db.url, &["key", "list", "--workspace", "default"]);
    let key_id = (listed.success().lines())
        .filter_map(|line| line.split_whitespace().find(|w| w.starts_with("key_")))
        .next_back()
        .expect("the second key is listed")
        .to_owned();
    cli(&db.url, &["key", "revoke", &key_id]).success();
    for api in &with_second {
        eventually("the revoked key refused", WITHIN, async || {
            (send(api, Method::GET, "/links?limit=1", None).await.0 == 401).then_some(())
        })
        .await;
    }

    // One workspace's rate holds for the three together: 30 a second, a burst of 30.
    let id = cli(
        &db.url,
        &["workspace", "create", "limited", "--rate-limit", "30"],
    );
    let id = id.success().trim().to_owned();
    let limited_key = cli(&db.url, &["key", "create", "--workspace", &id]);
    let limited = [0, 1, 2].map(|i| Api::new(&servers[i], limited_key.success().trim()));
    let started = Instant::now();
    let mut admitted = 0;
    for i in 0..90 {
        if send(&limited[i % 3], Method::GET, "/links?limit=1", None)
            .await
            .0
            == 200
        {
            admitted += 1;
        }
    }
    let earned = (started.elapsed().as_secs_f64() * 30.0).ceil() as usize;
    assert!(
        (30..=30 + earned).contains(&admitted),
        "{admitted} of 90 admitted, the burst of 30 and {earned} earned while they ran"
    );

    // The change channel cut (as a database restart or a network cut would): changes still show
    // within about a second, through short cache lifetimes and the listeners' reconnection.
    let mut admin = AsyncPgConnection::establish(&db.url)
        .await
        .expect("the test reaches PostgreSQL");
    admin
        .batch_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
        .await
        .expect("the listeners' connections are cut");
    for server in &servers {
        eventually("the cut noticed", Duration::from_secs(5), async || {
            server.stderr().contains("lost the channel").then_some(())
        })
        .await;
    }
    let code = &codes[0];
    let change = json!({"destination": "https://example.com/after-the-cut"});
    let (status, _) = send(
        &apis[0],
        Method::PATCH,
        &format!("/links/{code}"),
        Some(change),
    )
    .await;
    assert_eq!(status, 200);
    let moved = Some("https://example.com/after-the-cut");
    for api in &apis[1..] {
        eventually("the change after the cut", WITHIN * 2, async || {
            let res = api.visit(code, Some(BROWSER), None).await;
            let at = res.headers().get("location").and_then(|l| l.to_str().ok());
            (at == moved).then_some(())
        })
        .await;
    }

    // Redis goes away: every instance still serves, limiting on its own, and says so.
    redis.stop();
    for api in &apis {
        eventually("a per-instance limit", Duration::from_secs(3), async || {
            let (status, _) = send(api, Method::GET, "/links?limit=1", None).await;
            let ready = ready(api).await;
            (status == 200 && ready["rateLimits"] == "per instance (Redis does not answer)")
                .then_some(())
        })
        .await;
    }
    redis.run();
    for api in &apis {
        eventually("sharing resumed", Duration::from_secs(10), async || {
            let _ = send(api, Method::GET, "/links?limit=1", None).await;
            (ready(api).await["rateLimits"] == "shared").then_some(())
        })
        .await;
    }
}
