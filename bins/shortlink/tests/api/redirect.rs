//! `GET /{shortCode}`: 302 with the query merged, not cached by shared caches, HEAD and bots not
//! counted, every other GET counted exactly once, even under concurrency and across a graceful
//! stop.

use crate::helpers::{TestApp, header, on_both_backends};
use futures_util::future::join_all;
use shortlink_server::{Application, Config};

on_both_backends!(
    redirects_with_the_request_query_after_the_destinations,
    head_and_bots_are_not_counted,
    concurrent_clicks_are_counted_exactly,
    a_graceful_stop_loses_no_click,
);

async fn redirects_with_the_request_query_after_the_destinations(app: TestApp) {
    let code = app.create_code("https://example.com/p?a=1").await;
    for (query, location) in [
        ("", "https://example.com/p?a=1"),
        ("?b=2", "https://example.com/p?a=1&b=2"),
        ("?b=2&c=%20x", "https://example.com/p?a=1&b=2&c=%20x"),
        ("?a=3", "https://example.com/p?a=1&a=3"),
    ] {
        let res = app.visit(&format!("{code}{query}")).await;
        assert_eq!(res.status(), 302, "{query}");
        assert_eq!(header(res.headers(), "location"), Some(location));
        assert_eq!(
            header(res.headers(), "cache-control"),
            Some("private, no-cache")
        );
        assert!(header(res.headers(), "x-request-id").is_some());
    }

    let plain = app.create_code("https://example.com/p").await;
    let res = app.visit(&format!("{plain}?utm_source=x")).await;
    assert_eq!(
        header(res.headers(), "location"),
        Some("https://example.com/p?utm_source=x")
    );

    let fragment = app.create_code("https://example.com/p?a=1#top").await;
    let res = app.visit(&format!("{fragment}?b=2")).await;
    assert_eq!(
        header(res.headers(), "location"),
        Some("https://example.com/p?a=1&b=2#top")
    );

    // A query that would take the target past the destination's bound is left off: the visitor
    // still arrives, and `Location` stays within 8,192 characters.
    let long = format!("https://example.com/{}", "p".repeat(8_000));
    let code = app.create_code(&long).await;
    let res = app.visit(&format!("{code}?q={}", "v".repeat(1_000))).await;
    assert_eq!(res.status(), 302);
    assert_eq!(header(res.headers(), "location"), Some(long.as_str()));
}

async fn head_and_bots_are_not_counted(app: TestApp) {
    let code = app.create_code("https://example.com/").await;
    for _ in 0..3 {
        let res = crate::helpers::send(app.client.head(app.url(&format!("/{code}")))).await;
        assert_eq!(res.status(), 302, "HEAD answers like GET");
        assert_eq!(
            header(res.headers(), "location"),
            Some("https://example.com/")
        );
        assert_eq!(
            header(res.headers(), "cache-control"),
            Some("private, no-cache")
        );
    }
    for bot in [
        "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
        "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
        "facebookexternalhit/1.1",
        "Twitterbot/1.0",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    ] {
        let res = crate::helpers::send(
            app.client
                .get(app.url(&format!("/{code}")))
                .header("user-agent", bot),
        )
        .await;
        assert_eq!(res.status(), 302, "{bot}");
    }
    // One real click, after all of the above: when it shows, anything counted before it would
    // show too (the batch holds everything recorded so far).
    let browser = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
    let res = crate::helpers::send(
        app.client
            .get(app.url(&format!("/{code}")))
            .header("user-agent", browser),
    )
    .await;
    assert_eq!(res.status(), 302);
    assert_eq!(app.wait_for_clicks(&code, 1).await, 1);
    assert_eq!(app.wait_for_stored_clicks(&code, 1).await, 1);
}

async fn concurrent_clicks_are_counted_exactly(app: TestApp) {
    let code = app.create_code("https://example.com/").await;
    let other = app.create_code("https://example.org/").await;
    let tasks = (0..20).map(|t| {
        let (client, url, other_url) = (
            app.client.clone(),
            app.url(&format!("/{code}?t={t}")),
            app.url(&format!("/{other}")),
        );
        tokio::spawn(async move {
            for i in 0..25 {
                let res = client.get(&url).send().await.expect("the server answers");
                assert_eq!(res.status(), 302);
                if i % 5 == 0 {
                    let res = client.get(&other_url).send().await.expect("answers");
                    assert_eq!(res.status(), 302);
                }
            }
        })
    });
    for task in join_all(tasks).await {
        task.expect("a client task does not panic");
    }
    assert_eq!(app.wait_for_clicks(&code, 500).await, 500);
    assert_eq!(app.wait_for_clicks(&other, 100).await, 100);
    assert_eq!(app.wait_for_stored_clicks(&code, 500).await, 500);
}

async fn a_graceful_stop_loses_no_click(mut app: TestApp) {
    let code = app.create_code("https://example.com/").await;
    let n = 137;
    for _ in 0..n {
        assert_eq!(app.visit(&code).await.status(), 302);
    }
    app.stop().await.expect("the server stops cleanly");
    assert_eq!(app.stored_clicks(&code).await, n);
    let refused = app.client.get(app.url("/healthz")).send().await;
    assert!(refused.is_err(), "the server no longer answers");
}

// Each SQLite server counts clicks in memory ahead of its file (the click journal): a second
// one on the same file would count the first one's clicks twice, so it does not start.
#[tokio::test]
async fn a_second_server_on_the_same_sqlite_file_does_not_start() {
    let app = TestApp::spawn().await;
    let config = Config {
        listen: "127.0.0.1:0".into(),
        first_run_banner: false,
        stop_on_signals: false,
        ..Config::new(app.db.url.clone())
    };
    let refused = Application::build(config)
        .await
        .err()
        .expect("a second server is refused");
    assert!(
        format!("{refused:#}").contains("another server is using this SQLite file"),
        "{refused:#}"
    );
    let code = app.create_code("https://example.com/").await;
    assert_eq!(
        app.visit(&code).await.status(),
        302,
        "the first one serves on"
    );
}

#[tokio::test]
async fn unknown_codes_get_a_small_plain_404() {
    let app = TestApp::spawn().await;
    let code = app.create_code("https://example.com/").await;
    crate::helpers::assert_ok(app.delete(&format!("/links/{code}")).await).await;
    for path in ["nope", "no-such-code", "a.b", "x/y", "%00", code.as_str()] {
        let res = app.visit(path).await;
        assert_eq!(res.status(), 404, "{path}");
        let content_type = header(res.headers(), "content-type").unwrap_or_default();
        assert!(
            content_type.starts_with("text/html"),
            "{path}: {content_type}"
        );
        assert!(header(res.headers(), "location").is_none());
        assert!(header(res.headers(), "x-request-id").is_some());
        // The headers every page carries.
        let csp = header(res.headers(), "content-security-policy").unwrap_or_default();
        assert!(
            csp.starts_with("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
            "{path}: {csp}"
        );
        assert_eq!(
            header(res.headers(), "x-content-type-options"),
            Some("nosniff")
        );
        assert_eq!(
            header(res.headers(), "referrer-policy"),
            Some("no-referrer")
        );
        let body = res.text().await.expect("a body");
        assert!(body.len() < 1024, "small: {} bytes", body.len());
        assert!(
            serde_json::from_str::<serde_json::Value>(&body).is_err(),
            "not the JSON envelope: {body}"
        );
    }
    let head = crate::helpers::send(app.client.head(app.url("/nope"))).await;
    assert_eq!(head.status(), 404);
}

#[tokio::test]
async fn a_code_is_the_one_segment_of_the_path_percent_decoded_or_not() {
    let app = TestApp::spawn().await;
    let link = app
        .create_link(
            &serde_json::json!({ "destination": "https://example.com/s", "customSlug": "spring" }),
        )
        .await;
    let code = crate::helpers::text(&link["shortCode"]).to_owned();
    // `%73` is `s`: the same path, written differently.
    let res = app.visit("%73pring").await;
    assert_eq!(res.status(), 302);
    assert_eq!(
        header(res.headers(), "location"),
        Some("https://example.com/s")
    );
    for path in [format!("{code}/"), format!("{code}/x"), "%FF".to_owned()] {
        assert_eq!(app.visit(&path).await.status(), 404, "{path}");
    }

    // Other methods on a code are a 405 page (a code is no API route), with what is allowed;
    // deeper paths 404.
    let res = crate::helpers::send(app.client.post(app.url(&format!("/{code}")))).await;
    assert_eq!(res.status(), 405);
    assert_eq!(header(res.headers(), "allow"), Some("GET, HEAD"));
    assert_eq!(
        header(res.headers(), "content-type"),
        Some("text/html; charset=utf-8")
    );
    let res = crate::helpers::send(app.client.post(app.url(&format!("/{code}/x")))).await;
    assert_eq!(res.status(), 404);
}
