//! Several servers on one PostgreSQL database behave as one: a change made through any of them
//! reaches every other's caches within a second, and a server that cannot hear changes keeps its
//! cached links for a second at most.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use shortlink_domain::RateLimit;
use shortlink_storage::testing::TestDatabase;

use crate::helpers::{Setup, TestApp, assert_error, assert_ok, header, poll, send, text};
use crate::redis::Redis;

/// Two servers on one fresh PostgreSQL database, or `None` (reported) without one.
async fn two_servers(test: &str) -> Option<(TestApp, TestApp)> {
    let db = TestDatabase::postgres(test).await?;
    Some(two_on(db, None).await)
}

/// [`two_servers`], sharing a Redis of the test's own (started once PostgreSQL is there: without
/// it the test is skipped, and needs no Redis either).
async fn two_servers_with_redis(test: &str) -> Option<(Redis, TestApp, TestApp)> {
    let db = TestDatabase::postgres(test).await?;
    let redis = Redis::start();
    let (first, second) = two_on(db, Some(redis.url())).await;
    Some((redis, first, second))
}

/// Two servers on `db`, sharing the Redis at `redis_url` when there is one.
async fn two_on(db: TestDatabase, redis_url: Option<&'static str>) -> (TestApp, TestApp) {
    let second = db.shared();
    // Both serve one short domain, as instances behind a load balancer do.
    let setup = Setup {
        base_url: Some("https://sho.rt"),
        redis_url,
        ..Setup::default()
    };
    let first = TestApp::spawn_with(db, setup).await;
    let url = second.url.clone();
    let other = TestApp::spawn_reaching(second, &url, setup).await;
    (first, other)
}

/// Visits `code` on `app` until it answers `status` (and `location`), within a second.
async fn follows(app: &TestApp, code: &str, status: u16, location: Option<&str>) {
    let found = poll(Duration::from_secs(1), async || {
        let res = app.visit(code).await;
        let at = res
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .map(str::to_owned);
        (res.status().as_u16() == status && at.as_deref() == location).then_some(())
    })
    .await;
    assert!(
        found.is_some(),
        "{code} answers {status} {location:?} within a second"
    );
}

#[tokio::test]
async fn a_deleted_code_taken_by_another_workspace_redirects_to_the_new_link_everywhere() {
    let Some((first, second)) = two_servers(concat!(module_path!(), "::deleted_code")).await else {
        return;
    };
    // Workspace A's promo, cached by the second server.
    let a = first
        .create_link(&json!({ "destination": "https://a.example/promo", "customSlug": "promo" }))
        .await;
    assert_eq!(second.visit("promo").await.status(), 302);
    assert_eq!(
        first
            .delete(&format!("/links/{}", text(&a["id"])))
            .await
            .status(),
        200
    );
    follows(&second, "promo", 404, None).await;
    // Workspace B takes the code: the second server sends B's visitors to B's destination, and
    // counts their clicks on B's link.
    let b = first.new_tenant("b", 100).await;
    let res = first
        .api_as(&b.key, Method::POST, "/links")
        .json(&json!({ "destination": "https://b.example/promo", "customSlug": "promo" }))
        .send()
        .await
        .expect("the server answers");
    assert_ok(res).await;
    follows(&second, "promo", 302, Some("https://b.example/promo")).await;
    let counted = poll(Duration::from_secs(5), async || {
        let res = send(first.api_as(&b.key, Method::GET, "/links/promo")).await;
        let link = assert_ok(res).await;
        (link["clicks"].as_i64() >= Some(1)).then_some(())
    })
    .await;
    assert!(counted.is_some(), "the click counts on B's link");
}

#[tokio::test]
async fn changes_and_revoked_keys_reach_the_other_server_within_a_second() {
    let Some((first, second)) = two_servers(concat!(module_path!(), "::changes")).await else {
        return;
    };
    // A code the second server has cached as unknown, then created on the first.
    assert_eq!(second.visit("later").await.status(), 404);
    first
        .create_link(&json!({ "destination": "https://example.com/one", "customSlug": "later" }))
        .await;
    follows(&second, "later", 302, Some("https://example.com/one")).await;
    // A changed destination.
    let changed = first
        .patch_json(
            "/links/later",
            &json!({ "destination": "https://example.com/two" }),
        )
        .await;
    assert_ok(changed).await;
    follows(&second, "later", 302, Some("https://example.com/two")).await;

    // A key revoked through the first stops working on the second at once, though cached there.
    let tenant = first.new_tenant("revoked", 100).await;
    let ask = || send(second.api_as(&tenant.key, Method::GET, "/links"));
    assert_ok(ask().await).await;
    assert!(
        first
            .store
            .revoke_api_key(tenant.key_id)
            .await
            .expect("revoked")
    );
    let refused = poll(Duration::from_secs(1), async || {
        (ask().await.status() == 401).then_some(())
    })
    .await;
    assert!(
        refused.is_some(),
        "the revoked key is refused within a second"
    );
    assert_error(ask().await, 401, "UNAUTHORIZED").await;

    // A workspace's new rate applies on the second at once, though its key is cached there.
    let tenant = first.new_tenant("slowed", 100).await;
    let limit = async || {
        let res = send(second.api_as(&tenant.key, Method::GET, "/links")).await;
        header(res.headers(), "ratelimit-limit").map(str::to_owned)
    };
    assert_eq!(limit().await.as_deref(), Some("100"));
    let rate = RateLimit::new(7).expect("a rate");
    assert!((first.store.set_rate_limit(tenant.workspace.id, rate).await).expect("changed"));
    let applied = poll(Duration::from_secs(1), async || {
        (limit().await.as_deref() == Some("7")).then_some(())
    })
    .await;
    assert!(applied.is_some(), "the new rate applies within a second");
}

#[tokio::test]
async fn a_server_that_loses_the_channel_keeps_links_for_a_second_and_resynchronises() {
    let Some((first, second)) = two_servers(concat!(module_path!(), "::lost_channel")).await else {
        return;
    };
    first
        .create_link(&json!({ "destination": "https://example.com/one", "customSlug": "cut" }))
        .await;
    follows(&second, "cut", 302, Some("https://example.com/one")).await;
    // Cut every listener's connection (the channel), then change the link while it is down.
    first
        .db
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()",
        )
        .await;
    assert_ok(
        first
            .patch_json(
                "/links/cut",
                &json!({ "destination": "https://example.com/two" }),
            )
            .await,
    )
    .await;
    // Heard or not, the change shows within a second (the short lifetime, or the listener back).
    follows(&second, "cut", 302, Some("https://example.com/two")).await;
    // Once the listener is back, changes are heard again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_ok(
        first
            .patch_json(
                "/links/cut",
                &json!({ "destination": "https://example.com/three" }),
            )
            .await,
    )
    .await;
    follows(&second, "cut", 302, Some("https://example.com/three")).await;
}

async fn rate_limits(app: &TestApp) -> String {
    let ready = assert_ok(send(app.client.get(app.url("/readyz"))).await).await;
    text(&ready["rateLimits"]).to_owned()
}

#[tokio::test]
async fn with_redis_a_workspace_rate_holds_across_instances_and_survives_redis_going_away() {
    let test = concat!(module_path!(), "::redis");
    let Some((mut redis, first, second)) = two_servers_with_redis(test).await else {
        return;
    };
    let tenant = first.new_tenant("limited", 10).await;
    let ask = |app: &TestApp| send(app.api_as(&tenant.key, Method::GET, "/links?limit=1"));

    // Twenty requests, alternating between the servers: the burst of ten holds for both
    // together (one more may be earned while they run, one every 100 ms).
    let mut admitted = 0;
    for i in 0..20 {
        let app = if i % 2 == 0 { &first } else { &second };
        if ask(app).await.status() == 200 {
            admitted += 1;
        }
    }
    assert!((10..=11).contains(&admitted), "{admitted} of 20 admitted");
    assert_eq!(rate_limits(&first).await, "shared");

    // Redis goes away: requests are still served, each server limiting on its own, and /readyz
    // (still 200) says so.
    redis.stop();
    // `/readyz` asks Redis itself: the second server, asked nothing since, knows it too.
    assert_eq!(
        rate_limits(&second).await,
        "per instance (Redis does not answer)"
    );
    // The first server keeps serving requests through three seconds of it: its connection's
    // attempts to reconnect must not be spaced out beyond a second or so (they once waited a
    // minute and more after the first few).
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(ask(&first).await.status(), 200);
    }
    assert_eq!(
        rate_limits(&first).await,
        "per instance (Redis does not answer)"
    );

    // It comes back: sharing resumes by itself, on the busy server and on the one asked nothing,
    // and `/readyz` finds it without a request.
    redis.run();
    for app in [&first, &second] {
        let resumed = poll(Duration::from_secs(5), async || {
            (rate_limits(app).await == "shared").then_some(())
        })
        .await;
        assert!(resumed.is_some(), "sharing resumed once Redis was back");
    }
}

#[tokio::test]
async fn max_clicks_counts_every_instance_clicks() {
    let Some((first, second)) = two_servers(concat!(module_path!(), "::max_clicks")).await else {
        return;
    };
    first
        .create_link(
            &json!({"destination": "https://a.example/", "customSlug": "four", "maxClicks": 4}),
        )
        .await;
    for _ in 0..2 {
        assert_eq!(first.visit("four").await.status(), 302);
    }
    // Written by the first server's flush, and so counted by the second when it reads the count.
    assert_eq!(first.wait_for_clicks("four", 2).await, 2);
    for _ in 0..2 {
        assert_eq!(second.visit("four").await.status(), 302);
    }
    assert_eq!(second.visit("four").await.status(), 410);
    // The first learns the second's clicks with its next flush: HEAD asks without taking one.
    let caught_up = poll(Duration::from_secs(2), async || {
        let res = send(first.client.head(first.url("/four"))).await;
        (res.status().as_u16() == 410).then_some(())
    })
    .await;
    assert!(caught_up.is_some(), "the first server sees the link spent");
    assert_eq!(first.visit("four").await.status(), 410);
    assert_eq!(first.wait_for_clicks("four", 4).await, 4);
}

#[tokio::test]
async fn with_redis_the_failed_authentication_budget_holds_across_instances() {
    let test = concat!(module_path!(), "::auth_budget");
    let Some((_redis, first, second)) = two_servers_with_redis(test).await else {
        return;
    };
    let budget = shortlink_http::ratelimit::AUTH_FAILURES_PER_MINUTE;
    let guess = |app: &TestApp| send(app.api_as("sk_wrong", Method::GET, "/links"));

    // Half the budget spent on the first server, the rest on the second: the second, which
    // counted the last failure, refuses the address from then on, even with a valid key; the
    // first refuses the next wrong one, over the budget of both together.
    for i in 0..budget {
        let app = if i < budget / 2 { &first } else { &second };
        assert_error(guess(app).await, 401, "UNAUTHORIZED").await;
    }
    assert_error(second.get("/links").await, 429, "RATE_LIMIT_EXCEEDED").await;
    assert_error(guess(&second).await, 429, "RATE_LIMIT_EXCEEDED").await;
    assert_error(guess(&first).await, 429, "RATE_LIMIT_EXCEEDED").await;
    assert_error(first.get("/links").await, 429, "RATE_LIMIT_EXCEEDED").await;
}
