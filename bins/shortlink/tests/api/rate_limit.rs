//! The per-workspace rate limit: GCRA with a burst of one second's rate, `RateLimit-*` headers on
//! every authenticated answer, 429 with `Retry-After` past it, other workspaces unaffected, the
//! redirect never limited.

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::json;

use crate::helpers::{TestApp, assert_error, assert_ok, header, send};

fn number(res: &reqwest::Response, name: &str) -> u64 {
    header(res.headers(), name)
        .unwrap_or_else(|| panic!("{} has no {name}", res.status()))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a whole number"))
}

#[tokio::test]
async fn authenticated_answers_carry_the_rate_limit_headers() {
    let app = TestApp::spawn().await;
    // A slow plan, so that no cell comes back between two requests (one every 1/3 s).
    let slow = app.new_tenant("slow", 3).await;
    let res = send(app.api_as(&slow.key, Method::GET, "/links")).await;
    assert_eq!(number(&res, "ratelimit-limit"), 3);
    assert_eq!(number(&res, "ratelimit-remaining"), 2);
    assert!(number(&res, "ratelimit-reset") <= 1);
    assert!(header(res.headers(), "retry-after").is_none());
    assert_ok(res).await;

    // A request that fails validation is still counted, and reported.
    let res = send(
        app.api_as(&slow.key, Method::POST, "/links")
            .json(&json!({ "destination": "nope" })),
    )
    .await;
    assert_eq!(number(&res, "ratelimit-limit"), 3);
    assert_eq!(number(&res, "ratelimit-remaining"), 1);
    assert_error(res, 400, "VALIDATION_FAILED").await;

    // The harness's workspace has the default plan.
    let res = app.get("/links").await;
    assert_eq!(number(&res, "ratelimit-limit"), 100);
    assert!(number(&res, "ratelimit-remaining") < 100);

    // Unauthenticated answers have no workspace, so no workspace headers.
    let res = send(app.client.get(app.url("/api/v1/links"))).await;
    assert!(header(res.headers(), "ratelimit-limit").is_none());
}

#[tokio::test]
async fn past_its_rate_a_workspace_gets_429_and_others_do_not() {
    let app = TestApp::spawn().await;
    let limited = app.new_tenant("limited", 5).await;
    let other = app.new_tenant("other", 100).await;
    // A link of the limited workspace. Creating it costs one request of the burst; the bucket
    // refills one request per 200 ms and holds no more than the burst, so after a second it is
    // full again whatever the timing.
    app.create_link_as(
        &limited.key,
        &json!({ "destination": "https://example.com/", "customSlug": "limited" }),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;

    // Six requests at once: the burst is five.
    let answers =
        join_all((0..6).map(|_| send(app.api_as(&limited.key, Method::GET, "/links")))).await;
    let (mut admitted, mut refused) = (Vec::new(), Vec::new());
    for res in answers {
        assert_eq!(number(&res, "ratelimit-limit"), 5);
        if res.status() == 429 {
            refused.push(res);
        } else {
            admitted.push(number(&res, "ratelimit-remaining"));
            assert_ok(res).await;
        }
    }
    admitted.sort_unstable();
    assert_eq!(admitted, [0, 1, 2, 3, 4]);
    assert_eq!(refused.len(), 1, "exactly the sixth request is refused");
    let res = refused.pop().expect("one refusal");
    let retry_after = number(&res, "retry-after");
    assert!(retry_after >= 1, "Retry-After {retry_after}");
    assert_eq!(number(&res, "ratelimit-remaining"), 0);
    assert!(number(&res, "ratelimit-reset") >= 1);
    let error = assert_error(res, 429, "RATE_LIMIT_EXCEEDED").await;
    assert!(error.get("details").is_none());

    // Other workspaces on the same server are unaffected.
    for key in [&other.key, &app.key] {
        let res = send(app.api_as(key, Method::GET, "/links")).await;
        assert_eq!(number(&res, "ratelimit-limit"), 100);
        assert_ok(res).await;
    }

    // The redirect is not rate limited.
    for _ in 0..20 {
        assert_eq!(app.visit("limited").await.status(), 302);
    }
}
