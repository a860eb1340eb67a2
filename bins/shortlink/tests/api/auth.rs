//! Authentication: `Authorization: Bearer <key>` or 401 with `WWW-Authenticate: Bearer`; revoked
//! keys stop working; guessing keys from one address is cut off.

use reqwest::{Method, Response};
use shortlink_storage::testing::TestDatabase;

use crate::helpers::{DEADLINE, Setup, TestApp, assert_error, assert_ok, header, poll, send};

async fn assert_unauthorized(res: Response) {
    let challenge = header(res.headers(), "www-authenticate").map(str::to_owned);
    assert_eq!(challenge.as_deref(), Some("Bearer"));
    let error = assert_error(res, 401, "UNAUTHORIZED").await;
    assert!(error.get("details").is_none());
}

#[tokio::test]
async fn requests_without_a_valid_key_are_401() {
    let app = TestApp::spawn().await;
    let url = app.url("/api/v1/links");
    let unknown = format!("sk_{}", "A".repeat(40));
    let requests = [
        app.client.get(&url),
        app.client.get(&url).header("authorization", ""),
        app.client
            .get(&url)
            .header("authorization", format!("Basic {}", app.key)),
        app.client.get(&url).header("authorization", "Basic x"),
        app.client.get(&url).header("authorization", "Bearer"),
        app.client.get(&url).header("authorization", "Bearer "),
        app.client
            .get(&url)
            .header("authorization", app.key.as_str()),
        app.client.get(&url).bearer_auth(&unknown),
        app.client.get(&url).bearer_auth(format!("{}x", app.key)),
        // Two fields, whichever comes first.
        app.client
            .get(&url)
            .bearer_auth(&app.key)
            .header("authorization", format!("Bearer {unknown}")),
        app.client
            .get(&url)
            .bearer_auth(&app.key)
            .header("authorization", format!("Bearer {}", app.key)),
        app.client
            .post(&url)
            .json(&serde_json::json!({ "destination": "https://example.com/" })),
        // Authentication comes before the body is looked at.
        app.client.post(&url).body("{not json"),
        app.client
            .post(&url)
            .header("authorization", "Basic x")
            .header("content-type", "application/json")
            .body("{not json"),
    ];
    for request in requests {
        assert_unauthorized(send(request).await).await;
    }

    // The same key works, and the scheme is case-insensitive.
    assert_ok(send(app.client.get(&url).bearer_auth(&app.key)).await).await;
    let lower = app
        .client
        .get(&url)
        .header("authorization", format!("bearer {}", app.key));
    assert_ok(send(lower).await).await;
}

/// 401 when the key is unknown, whatever the body: the key lookup must finish (and the failure
/// be counted against the address) before the body is judged. Each case gets a server whose
/// connections are not opened yet, so the lookup surely takes longer than rejecting the body.
#[tokio::test]
async fn an_unknown_key_with_a_bad_body_is_401() {
    let test = concat!(module_path!(), "::an_unknown_key_with_a_bad_body_is_401");
    for (content_type, body) in [("text/plain", "x"), ("application/json", "{not json")] {
        for db in TestDatabase::all(test).await {
            let setup = Setup {
                check_key: false,
                ..Setup::default()
            };
            let app = TestApp::spawn_with(db, setup).await;
            let res = send(
                app.client
                    .post(app.url("/api/v1/links"))
                    .bearer_auth(format!("sk_{}", "B".repeat(40)))
                    .header("content-type", content_type)
                    .body(body),
            )
            .await;
            assert_unauthorized(res).await;
        }
    }
}

#[tokio::test]
async fn a_revoked_key_stops_working_within_the_key_cache_lifetime() {
    let app = TestApp::spawn().await;
    let second = app.new_tenant("second", 100).await;
    assert_ok(send(app.api_as(&second.key, Method::GET, "/links")).await).await;

    let revoked = app
        .store
        .revoke_api_key(second.key_id)
        .await
        .expect("the database answers");
    assert!(revoked);

    // Keys are cached for up to 5 s; allow a little more for the request itself.
    let refused = poll(DEADLINE + std::time::Duration::from_secs(2), || async {
        let res = send(app.api_as(&second.key, Method::GET, "/links")).await;
        (res.status() == 401).then_some(res)
    })
    .await
    .expect("the revoked key is refused within the key cache lifetime");
    assert_unauthorized(refused).await;

    // Other keys are unaffected.
    assert_ok(app.get("/links").await).await;
}

#[tokio::test]
async fn too_many_failed_authentications_from_one_address_are_429_even_with_a_valid_key() {
    let app = TestApp::spawn().await;
    let code = app.create_code("https://example.com/").await;
    let url = app.url("/api/v1/links");
    for i in 0..20 {
        let guess = format!("sk_guess{i:040}");
        let res = send(app.client.get(&url).bearer_auth(guess)).await;
        assert_unauthorized(res).await;
    }
    // Twenty failures spend the budget: the next request is refused, whatever key it sends (a
    // 21st guess would be answered, and so tried, otherwise).
    let res = app.get("/links").await;
    let retry_after: u64 = header(res.headers(), "retry-after")
        .expect("a 429 carries Retry-After")
        .parse()
        .expect("Retry-After is whole seconds");
    assert!(retry_after >= 1);
    assert_error(res, 429, "RATE_LIMIT_EXCEEDED").await;
    let res = send(app.client.get(&url).bearer_auth("sk_the21stguess")).await;
    assert_eq!(res.status(), 429, "a 21st guess is not tried");

    // The redirect needs no key and keeps working for that address.
    assert_eq!(app.visit(&code).await.status(), 302);
}

/// An IPv6 client's failures count against its /64: rotating through the addresses one
/// subscriber is given gains no guesses. Another /64 is not affected.
#[tokio::test]
async fn failed_authentications_from_one_ipv6_64_share_a_budget() {
    let app = crate::helpers::spawn_behind_a_proxy(None)
        .await
        .expect("a SQLite server");
    let url = app.url("/api/v1/links");
    let from = |client: String| {
        app.client
            .get(&url)
            .header("X-Forwarded-For", client)
            .bearer_auth("sk_guess")
    };
    for i in 1..=20 {
        assert_unauthorized(send(from(format!("2001:db8:1:2::{i:x}"))).await).await;
    }
    let res = send(from("2001:db8:1:2:ffff::1".to_owned())).await;
    assert_eq!(res.status(), 429, "the 21st failure from the same /64");
    assert_unauthorized(send(from("2001:db8:1:3::1".to_owned())).await).await;
}
