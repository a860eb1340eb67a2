//! Link options (docs/API.md, "Link options"): accepted, returned and refused by the API, and
//! followed by the redirect: expiry by time (on the server's clock, moved on by the test) and
//! by clicks, passwords and their budget, targeting by system and by country (the GeoIP test
//! database), previews for crawlers, redirect types, tags, search, archive and slug changes.

use std::time::Duration;

use reqwest::{Method, Response};
use serde_json::{Value, json};

use crate::helpers::{
    TestApp, assert_error, assert_invalid, assert_ok, detail_fields, header, send, text,
};

crate::helpers::on_both_backends_behind_a_proxy!(
    every_option_is_returned_and_null_clears_it,
    bad_options_are_refused_naming_the_field_and_change_nothing,
    an_expired_link_answers_410_or_its_expired_url,
    max_clicks_lets_exactly_that_many_through,
    max_clicks_holds_for_a_burst_of_first_clicks,
    passwords_unlock_count_the_click_and_have_a_budget,
    a_password_form_keeps_the_referrer_of_the_visit,
    targeting_follows_the_system_then_the_country,
    crawlers_get_an_escaped_preview_and_browsers_the_redirect,
    each_redirect_type_answers_its_status,
    tags_search_and_archive_filter_the_list_page_by_page,
    a_new_slug_frees_the_old_one_at_once,
);

crate::helpers::on_both_backends!(a_country_key_given_twice_is_refused_on_every_write);

const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";
const DESKTOP: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
const SLACK: &str = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)";
const LONDON: &str = "81.2.69.142";
const LINKOPING: &str = "89.160.20.112";

/// `geo` with one country key twice is 400 naming `geo` (which destination was meant cannot be
/// told), as `gb` beside `GB` is, on a creation, a bulk item and a change; nothing is written.
async fn a_country_key_given_twice_is_refused_on_every_write(app: TestApp) {
    const TWICE: &str = r#"{"GB": "https://a.example/", "GB": "https://b.example/"}"#;
    const CASES: &str = r#"{"gb": "https://a.example/", "GB": "https://b.example/"}"#;
    let json = |method: Method, path: &str, body: String| {
        send(
            app.api(method, path)
                .header("content-type", "application/json")
                .body(body),
        )
    };
    let link = app
        .create_link(&json!({"destination": "https://example.com/kept", "customSlug": "kept"}))
        .await;
    for geo in [TWICE, CASES] {
        let created = format!(r#"{{"destination": "https://example.com/", "geo": {geo}}}"#);
        let res = json(Method::POST, "/links", created.clone()).await;
        let error = assert_invalid(res, &["geo"]).await;
        assert!(text(&error["message"]).contains("GB"), "{error}");

        let res = json(Method::POST, "/links/bulk", format!("[{created}]")).await;
        let results = assert_ok(res).await;
        assert_eq!(
            results[0]["error"]["code"], "VALIDATION_FAILED",
            "{results}"
        );
        assert_eq!(
            results[0]["error"]["details"][0]["field"], "geo",
            "{results}"
        );

        let res = json(Method::PATCH, "/links/kept", format!(r#"{{"geo": {geo}}}"#)).await;
        assert_invalid(res, &["geo"]).await;
    }
    let page = assert_ok(app.get("/links").await).await;
    assert_eq!(page["items"], json!([link]), "nothing created or changed");
}

/// A browser's GET of `/{code}` from `client` (through the trusted proxy).
async fn browse(app: &TestApp, code: &str, client: &str, agent: &str) -> Response {
    let request = app
        .client
        .get(app.url(&format!("/{code}")))
        .header("X-Forwarded-For", client)
        .header("User-Agent", agent);
    send(request).await
}

/// The password form's POST to `/{code}` from `client`.
async fn unlock(app: &TestApp, code: &str, client: &str, password: &str) -> Response {
    let request = app
        .client
        .post(app.url(&format!("/{code}")))
        .header("X-Forwarded-For", client)
        .header("User-Agent", DESKTOP)
        .form(&[("password", password)]);
    send(request).await
}

fn location(res: &Response) -> &str {
    header(res.headers(), "location").unwrap_or_default()
}

async fn every_option_is_returned_and_null_clears_it(app: TestApp) {
    let plain = app
        .create_link(&json!({"destination": "https://example.com/plain"}))
        .await;
    let defaults = json!({
        "expiresAt": null, "maxClicks": null, "expiredUrl": null, "passwordProtected": false,
        "redirectType": 302, "ios": null, "android": null, "geo": null, "tags": [],
        "archived": false, "title": null, "description": null, "image": null,
    });
    for (field, value) in defaults.as_object().expect("an object") {
        assert_eq!(&plain[field], value, "{field} of a plain link: {plain}");
    }

    let all = json!({
        "destination": "https://example.com/all",
        "customSlug": "all",
        "expiresAt": "2099-01-01T01:00:00+01:00",
        "maxClicks": 100.0,
        "expiredUrl": "https://example.com/over",
        "password": "open sesame",
        "redirectType": 307,
        "ios": "https://apps.apple.com/app",
        "android": "https://play.google.com/app",
        "geo": {"gb": "https://example.co.uk/", "SE": "https://example.se/"},
        "tags": ["launch", "spring", "launch"],
        "archived": true,
        "title": "All of it",
        "description": "Every option",
        "image": "https://example.com/card.png",
    });
    let link = app.create_link(&all).await;
    let expected = json!({
        "expiresAt": "2099-01-01T00:00:00.000Z", "maxClicks": 100,
        "expiredUrl": "https://example.com/over", "passwordProtected": true,
        "redirectType": 307, "ios": "https://apps.apple.com/app",
        "android": "https://play.google.com/app",
        "geo": {"GB": "https://example.co.uk/", "SE": "https://example.se/"},
        "tags": ["launch", "spring"], "archived": true, "title": "All of it",
        "description": "Every option", "image": "https://example.com/card.png",
    });
    for (field, value) in expected.as_object().expect("an object") {
        assert_eq!(&link[field], value, "{field}: {link}");
    }
    assert!(link.get("password").is_none(), "never returned: {link}");
    let read = assert_ok(app.get("/links/all").await).await;
    assert_eq!(read, link, "GET shows what POST returned");

    // null clears each option; an absent one stays.
    let cleared = json!({
        "expiresAt": null, "maxClicks": null, "expiredUrl": null, "password": null,
        "redirectType": null, "ios": null, "android": null, "geo": null, "tags": null,
        "archived": null, "title": null, "description": null, "image": null,
    });
    let link = assert_ok(app.patch_json("/links/all", &cleared).await).await;
    for (field, value) in defaults.as_object().expect("an object") {
        assert_eq!(&link[field], value, "{field} after clearing: {link}");
    }
    assert_eq!(link["destination"], "https://example.com/all");
    let res = browse(&app, "all", LONDON, DESKTOP).await;
    assert_eq!(res.status(), 302, "a plain link again");
    assert_eq!(location(&res), "https://example.com/all");

    let link = assert_ok(
        app.patch_json("/links/all", &json!({"title": "Only this"}))
            .await,
    )
    .await;
    assert_eq!(
        (link["title"].as_str(), link["tags"].clone()),
        (Some("Only this"), json!([]))
    );

    // Bulk items take options too.
    let items = json!([
        {"destination": "https://example.com/b1", "tags": ["bulk"], "maxClicks": 2},
        {"destination": "https://example.com/b2", "redirectType": 999},
    ]);
    let results = assert_ok(app.post_json("/links/bulk", &items).await).await;
    assert_eq!(results[0]["link"]["tags"], json!(["bulk"]), "{results}");
    assert_eq!(results[0]["link"]["maxClicks"], 2, "{results}");
    assert_eq!(
        results[1]["error"]["details"][0]["field"], "redirectType",
        "{results}"
    );
}

async fn bad_options_are_refused_naming_the_field_and_change_nothing(app: TestApp) {
    let bad = [
        (json!({"expiresAt": "next tuesday"}), "expiresAt"),
        (json!({"expiresAt": 5}), "expiresAt"),
        // In UTC, the year 10000.
        (
            json!({"expiresAt": "9999-12-31T23:59:59-01:00"}),
            "expiresAt",
        ),
        (json!({"maxClicks": 0}), "maxClicks"),
        (json!({"maxClicks": 1.5}), "maxClicks"),
        (json!({"maxClicks": "3"}), "maxClicks"),
        (json!({"expiredUrl": "javascript:alert(1)"}), "expiredUrl"),
        (json!({"password": ""}), "password"),
        (json!({"password": "p".repeat(129)}), "password"),
        (json!({"redirectType": 303}), "redirectType"),
        (json!({"ios": "not a url"}), "ios"),
        (
            json!({"android": "https://user:pw@example.com/"}),
            "android",
        ),
        (json!({"geo": {"GBR": "https://example.co.uk/"}}), "geo"),
        (json!({"geo": {"GB": "nope"}}), "geo"),
        (json!({"geo": ["GB"]}), "geo"),
        (
            json!({"tags": (0..11).map(|i| i.to_string()).collect::<Vec<_>>()}),
            "tags",
        ),
        (json!({"tags": ["x".repeat(51)]}), "tags"),
        (json!({"tags": [""]}), "tags"),
        (json!({"tags": "a"}), "tags"),
        (json!({"archived": "yes"}), "archived"),
        (json!({"title": "t".repeat(201)}), "title"),
        (json!({"title": "   "}), "title"),
        (json!({"description": "\n \n"}), "description"),
        (json!({"description": "d".repeat(1001)}), "description"),
        (json!({"image": "ftp://example.com/i.png"}), "image"),
        (json!({"customSlug": "api"}), "customSlug"),
    ];
    let link = app
        .create_link(&json!({"destination": "https://example.com/kept", "customSlug": "kept"}))
        .await;
    for (option, field) in &bad {
        let mut body = option.clone();
        body["destination"] = json!("https://example.com/new");
        let error = assert_invalid(app.post_json("/links", &body).await, &[field]).await;
        assert!(text(&error["message"]).len() > 5, "{error}");
        let error = assert_invalid(app.patch_json("/links/kept", option).await, &[field]).await;
        assert_eq!(detail_fields(&error), [*field], "{error}");
    }
    // Several at once are all named.
    let body = json!({"destination": "https://example.com/x", "maxClicks": -1, "redirectType": 1});
    assert_invalid(
        app.post_json("/links", &body).await,
        &["maxClicks", "redirectType"],
    )
    .await;

    let page = assert_ok(app.get("/links?archived=true").await).await;
    assert_eq!(
        page["items"].as_array().map(Vec::len),
        Some(1),
        "nothing created: {page}"
    );
    assert_eq!(page["items"][0], link, "nothing changed");

    for query in ["tag=", "search=", "archived=maybe", "tag=%01"] {
        let error = assert_error(
            app.get(&format!("/links?{query}")).await,
            400,
            "VALIDATION_FAILED",
        )
        .await;
        let field = query.split('=').next().unwrap_or_default();
        assert_eq!(detail_fields(&error), [field], "{query}: {error}");
    }
}

async fn an_expired_link_answers_410_or_its_expired_url(app: TestApp) {
    let link = json!({
        "destination": "https://example.com/sale",
        "customSlug": "sale",
        "expiresAt": (chrono_in(3600)),
    });
    app.create_link(&link).await;
    let res = browse(&app, "sale", LONDON, DESKTOP).await;
    assert_eq!(
        (res.status().as_u16(), location(&res)),
        (302, "https://example.com/sale")
    );

    app.advance_clock(Duration::from_secs(2 * 3600));
    let res = browse(&app, "sale", LONDON, DESKTOP).await;
    assert_eq!(res.status(), 410);
    assert_strict_page(&res);
    // One of two answers by `Accept`, neither to be cached (a 410 may be by default).
    assert_eq!(header(res.headers(), "vary"), Some("accept"));
    assert!(res.text().await.unwrap_or_default().contains("expired"));
    let res = send(
        app.client
            .get(app.url("/sale"))
            .header("Accept", "application/json"),
    )
    .await;
    assert_eq!(header(res.headers(), "vary"), Some("accept"));
    assert_eq!(header(res.headers(), "cache-control"), Some("no-store"));
    assert_error(res, 410, "LINK_EXPIRED").await;
    // `Accept` as RFC 9110 reads it: a type in any case, q=0 for "not acceptable".
    let json = send(
        app.client
            .get(app.url("/sale"))
            .header("Accept", "APPLICATION/JSON"),
    )
    .await;
    assert_error(json, 410, "LINK_EXPIRED").await;
    for accept in ["application/json;q=0", "text/html, application/json"] {
        let res = send(app.client.get(app.url("/sale")).header("Accept", accept)).await;
        assert_eq!(res.status(), 410, "{accept}");
        assert_strict_page(&res);
    }

    let with_fallback = json!({"expiredUrl": "https://example.com/next-sale"});
    assert_ok(app.patch_json("/links/sale", &with_fallback).await).await;
    let res = browse(&app, "sale", LONDON, DESKTOP).await;
    assert_eq!(
        (res.status().as_u16(), location(&res)),
        (302, "https://example.com/next-sale")
    );

    // Lifting the expiry revives it; expired visits were not clicks.
    assert_ok(
        app.patch_json("/links/sale", &json!({"expiresAt": null}))
            .await,
    )
    .await;
    let res = browse(&app, "sale", LONDON, DESKTOP).await;
    assert_eq!(location(&res), "https://example.com/sale");
    assert_eq!(app.wait_for_clicks("sale", 2).await, 2);
}

/// RFC 3339 for `seconds` from now.
fn chrono_in(seconds: i64) -> String {
    let now = shortlink_domain::Timestamp::now().unix_millis();
    shortlink_domain::Timestamp::from_unix_millis(now + seconds * 1000).to_string()
}

#[track_caller]
fn assert_strict_page(res: &Response) {
    let headers = res.headers();
    let csp = header(headers, "content-security-policy").unwrap_or_default();
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("script-src"),
        "{csp}"
    );
    assert_eq!(header(headers, "cache-control"), Some("no-store"));
    assert!(header(headers, "content-type").is_some_and(|t| t.starts_with("text/html")));
}

/// The statuses of `n` browser visits of `code` made at once.
async fn visits_at_once(app: &TestApp, code: &str, n: usize) -> Vec<u16> {
    let visits = (0..n).map(|_| browse(app, code, LONDON, DESKTOP));
    (futures_util::future::join_all(visits).await.iter())
        .map(|res| res.status().as_u16())
        .collect()
}

/// A capped link's very first clicks, all at once (no lookup before them has cached it): the
/// limit holds exactly. On PostgreSQL each click read the link itself, each with rules of its
/// own, and each restarted the count.
async fn max_clicks_holds_for_a_burst_of_first_clicks(app: TestApp) {
    for round in 0..8 {
        let code = format!("burst-{round}");
        app.create_link(&json!({
            "destination": "https://example.com/burst", "customSlug": code, "maxClicks": 3,
        }))
        .await;
        let statuses = visits_at_once(&app, &code, 10).await;
        let through = statuses.iter().filter(|&&s| s == 302).count();
        assert_eq!(through, 3, "round {round}: {statuses:?}");
        assert_eq!(app.wait_for_clicks(&code, 3).await, 3);
    }
}

async fn max_clicks_lets_exactly_that_many_through(app: TestApp) {
    app.create_link(&json!({
        "destination": "https://example.com/limited", "customSlug": "limited", "maxClicks": 5,
    }))
    .await;
    // Bots and HEAD do not count.
    assert_eq!(browse(&app, "limited", LONDON, SLACK).await.status(), 302);
    let head = send(
        app.client
            .head(app.url("/limited"))
            .header("User-Agent", DESKTOP),
    )
    .await;
    assert_eq!(head.status(), 302);

    let statuses = visits_at_once(&app, "limited", 20).await;
    let through = statuses.iter().filter(|&&s| s == 302).count();
    let refused = statuses.iter().filter(|&&s| s == 410).count();
    assert_eq!((through, refused), (5, 15), "{statuses:?}");
    assert_eq!(app.wait_for_clicks("limited", 5).await, 5);
    // Once spent, bots see it expired too.
    assert_eq!(browse(&app, "limited", LONDON, SLACK).await.status(), 410);

    // Raising the limit lets more through, exactly.
    assert_ok(
        app.patch_json("/links/limited", &json!({"maxClicks": 6}))
            .await,
    )
    .await;
    assert_eq!(browse(&app, "limited", LONDON, DESKTOP).await.status(), 302);
    assert_eq!(browse(&app, "limited", LONDON, DESKTOP).await.status(), 410);
    assert_eq!(app.wait_for_clicks("limited", 6).await, 6);

    // A limit removed and set again counts the clicks made while there was none.
    assert_ok(
        app.patch_json("/links/limited", &json!({"maxClicks": null}))
            .await,
    )
    .await;
    for _ in 0..10 {
        assert_eq!(browse(&app, "limited", LONDON, DESKTOP).await.status(), 302);
    }
    assert_ok(
        app.patch_json("/links/limited", &json!({"maxClicks": 18}))
            .await,
    )
    .await;
    let statuses: Vec<u16> =
        futures_util::future::join_all((0..5).map(|_| browse(&app, "limited", LONDON, DESKTOP)))
            .await
            .iter()
            .map(|res| res.status().as_u16())
            .collect();
    let through = statuses.iter().filter(|&&s| s == 302).count();
    assert_eq!(through, 2, "{statuses:?}");
    assert_eq!(app.wait_for_clicks("limited", 18).await, 18);

    // A limit set on a link that already had clicks counts them.
    let code = app.create_code("https://example.com/busy").await;
    for _ in 0..3 {
        assert_eq!(browse(&app, &code, LONDON, DESKTOP).await.status(), 302);
    }
    assert_ok(
        app.patch_json(&format!("/links/{code}"), &json!({"maxClicks": 4}))
            .await,
    )
    .await;
    assert_eq!(browse(&app, &code, LONDON, DESKTOP).await.status(), 302);
    assert_eq!(browse(&app, &code, LONDON, DESKTOP).await.status(), 410);
}

async fn a_password_form_keeps_the_referrer_of_the_visit(app: TestApp) {
    app.create_link(&json!({
        "destination": "https://example.com/kept", "customSlug": "shared",
        "password": "open sesame",
    }))
    .await;
    let from = "https://news.example/story?id=1&ref=\"home\"";
    let request = (app.client.get(app.url("/shared")))
        .header("X-Forwarded-For", LONDON)
        .header("User-Agent", DESKTOP)
        .header("Referer", from);
    let form = send(request).await.text().await.unwrap_or_default();
    let field = "<input type=\"hidden\" name=\"referrer\" \
                 value=\"https://news.example/story?id=1&amp;ref=&quot;home&quot;\">";
    assert!(form.contains(field), "{form}");

    // The form's POST carries it back; its own Referer (the form, where a browser sends one at
    // all) is not the visit's.
    let post = |password: &'static str| {
        let request = (app.client.post(app.url("/shared")))
            .header("X-Forwarded-For", LONDON)
            .header("User-Agent", DESKTOP)
            .header("Referer", app.url("/shared"))
            .form(&[("password", password), ("referrer", from)]);
        send(request)
    };
    let again = post("guess").await;
    assert_eq!(again.status(), 403);
    assert!(again.text().await.unwrap_or_default().contains(field));
    assert_eq!(post("open sesame").await.status(), 302);
    assert_eq!(app.wait_for_clicks("shared", 1).await, 1);
    let res = app
        .get("/analytics/export?format=ndjson&linkId=shared")
        .await;
    let event: Value =
        serde_json::from_str(&res.text().await.unwrap_or_default()).expect("one exported event");
    assert_eq!(
        (&event["referrer"], &event["referrerUrl"]),
        (&json!("news.example"), &json!(from))
    );
}

async fn passwords_unlock_count_the_click_and_have_a_budget(app: TestApp) {
    for code in ["locked", "also-locked"] {
        app.create_link(&json!({
            "destination": "https://example.com/secret?a=1", "customSlug": code,
            "password": "open sesame", "redirectType": 308,
        }))
        .await;
    }
    let res = browse(&app, "locked", LONDON, DESKTOP).await;
    assert_eq!(res.status(), 200);
    assert_strict_page(&res);
    let form = res.text().await.unwrap_or_default();
    assert!(
        form.contains("<form method=\"post\">") && form.contains("name=\"password\""),
        "{form}"
    );

    let res = unlock(&app, "locked", LONDON, "open sesame").await;
    assert_eq!(
        res.status(),
        302,
        "a 302 after the form, whatever the link's type"
    );
    assert_eq!(location(&res), "https://example.com/secret?a=1");
    assert_eq!(
        app.wait_for_clicks("locked", 1).await,
        1,
        "the unlock is the click"
    );

    let res = unlock(&app, "locked", LONDON, "open sesam").await;
    assert_eq!(res.status(), 403);
    assert!(res.text().await.unwrap_or_default().contains("not right"));

    // A post without a password is no attempt: answered, nothing spent (the ten below show it).
    for body in ["", "password=", "name=x"] {
        let request = app
            .client
            .post(app.url("/also-locked"))
            .header("X-Forwarded-For", LONDON)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body);
        let res = send(request).await;
        assert_eq!(res.status(), 400, "{body:?}");
        assert_strict_page(&res);
    }
    // A body declared past the form's bound is refused before it is read, not waited for.
    let huge = "POST /also-locked HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\
                Content-Length: 1000000000000";
    let res = app.raw(huge, b"password=").await;
    assert_eq!(res.status, 413, "{res:?}");
    // A browser posted it: it gets the form's page, saying why, not the API's envelope.
    assert!(
        res.body.contains("That form is too large to be read.") && res.body.contains("<form"),
        "{res:?}"
    );
    assert!(
        res.headers
            .contains(&"content-type: text/html; charset=utf-8".to_owned()),
        "{res:?}"
    );
    // So does one that grows past it without saying so beforehand.
    let chunked = "POST /also-locked HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\
                   Transfer-Encoding: chunked";
    let mut body = format!("{:x}\r\npassword=", 9 + 9000).into_bytes();
    body.extend(std::iter::repeat_n(b'x', 9000));
    body.extend(b"\r\n0\r\n\r\n");
    let res = app.raw(chunked, &body).await;
    assert_eq!(res.status, 413, "{res:?}");
    assert!(
        res.body.contains("That form is too large to be read."),
        "{res:?}"
    );
    // And one that stops arriving, after the body's timeout.
    let stalled = "POST /also-locked HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\
                   Content-Length: 100";
    let res = app.raw(stalled, b"password=").await;
    assert_eq!(res.status, 408, "{res:?}");
    assert!(
        res.body.contains("That form did not arrive in time."),
        "{res:?}"
    );

    // One address's budget: ten wrong passwords (one spent above), then 429 even for the
    // right one, on any link; another address is not affected.
    for _ in 1..10 {
        assert_eq!(
            unlock(&app, "also-locked", LONDON, "guess").await.status(),
            403
        );
    }
    let res = unlock(&app, "locked", LONDON, "open sesame").await;
    assert_eq!(res.status(), 429);
    // What is left of the ten minutes since the address's first wrong password.
    let retry: u64 = header(res.headers(), "retry-after")
        .and_then(|s| s.parse().ok())
        .expect("Retry-After in seconds");
    assert!((540..=600).contains(&retry), "{retry}");
    assert_eq!(
        unlock(&app, "also-locked", LONDON, "open sesame")
            .await
            .status(),
        429
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        app.clicks("locked").await,
        1,
        "wrong and refused attempts are not clicks"
    );
    assert_eq!(
        unlock(&app, "locked", LINKOPING, "open sesame")
            .await
            .status(),
        302
    );
    assert_eq!(app.wait_for_clicks("locked", 2).await, 2);

    // Guesses sent at once each take their place in the budget before they are checked: one
    // address gets ten checked, however many it sends together.
    let guesses = (0..30).map(|_| unlock(&app, "also-locked", "192.0.2.7", "guess"));
    let mut statuses: Vec<u16> = futures_util::future::join_all(guesses)
        .await
        .iter()
        .map(|res| res.status().as_u16())
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [[403; 10].as_slice(), &[429; 20]].concat());
    // Right passwords sent at once from one address (an office behind one NAT): those past its
    // budget wait for the checks under way, which give their places back, and all get in.
    let right = (0..15).map(|_| unlock(&app, "locked", "192.0.2.9", "open sesame"));
    let statuses: Vec<u16> = futures_util::future::join_all(right)
        .await
        .iter()
        .map(|res| res.status().as_u16())
        .collect();
    assert_eq!(statuses, [302; 15]);
    assert_eq!(app.wait_for_clicks("locked", 17).await, 17);

    // The form's POST is a method of a password-protected link only; to an unknown code it is
    // the missing link's page, as any method.
    let res = send(app.client.post(app.url("/no-such-code"))).await;
    assert_eq!(res.status(), 404);
    // Other methods get a 405 page naming the ones it takes (a short link is no API route).
    let res = send(app.client.put(app.url("/locked"))).await;
    assert_eq!(res.status(), 405);
    assert_eq!(header(res.headers(), "allow"), Some("GET, HEAD, POST"));
    assert_eq!(
        header(res.headers(), "content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(
        res.text()
            .await
            .unwrap_or_default()
            .contains("Method not allowed")
    );
    let code = app.create_code("https://example.com/open").await;
    let res = unlock(&app, &code, LONDON, "x").await;
    assert_eq!(res.status(), 405);
    assert_eq!(header(res.headers(), "allow"), Some("GET, HEAD"));

    // An expired link checks no password, right or wrong: it answers its expiry.
    let expired = json!({"expiresAt": "2020-01-01T00:00:00Z"});
    assert_ok(app.patch_json("/links/locked", &expired).await).await;
    for password in ["open sesame", "guess", ""] {
        let res = unlock(&app, "locked", "192.0.2.8", password).await;
        assert_eq!(res.status(), 410, "{password:?}");
    }
}

async fn targeting_follows_the_system_then_the_country(app: TestApp) {
    app.create_link(&json!({
        "destination": "https://example.com/", "customSlug": "get-app",
        "ios": "https://apps.apple.com/x", "android": "https://play.google.com/x",
        "geo": {"GB": "https://example.co.uk/"},
    }))
    .await;
    let cases = [
        (IPHONE, LONDON, "https://apps.apple.com/x"),
        (ANDROID, LINKOPING, "https://play.google.com/x"),
        (DESKTOP, LONDON, "https://example.co.uk/"),
        (DESKTOP, LINKOPING, "https://example.com/"),
        (DESKTOP, "10.1.2.3", "https://example.com/"),
    ];
    for (agent, client, expected) in cases {
        let res = browse(&app, "get-app?ref=mail", client, agent).await;
        assert_eq!(res.status(), 302);
        let query = if expected.contains('?') { "&" } else { "?" };
        assert_eq!(
            location(&res),
            format!("{expected}{query}ref=mail"),
            "{agent} from {client}"
        );
    }
    assert_eq!(app.wait_for_clicks("get-app", 5).await, 5);
}

async fn crawlers_get_an_escaped_preview_and_browsers_the_redirect(app: TestApp) {
    let hostile = "\"><script>alert(1)</script>";
    app.create_link(&json!({
        "destination": "https://example.com/story?a=1&b=2", "customSlug": "story",
        "title": format!("Title {hostile}"), "description": format!("Desc {hostile} & more"),
        "image": "https://example.com/card.png?x=\"y\"",
    }))
    .await;
    let res = browse(&app, "story", LONDON, SLACK).await;
    assert_eq!(res.status(), 200);
    assert_strict_page(&res);
    let page = res.text().await.unwrap_or_default();
    assert!(!page.contains("<script"), "escaped: {page}");
    assert!(
        page.contains("<meta property=\"og:title\" content=\"Title &quot;&gt;&lt;script&gt;"),
        "{page}"
    );
    assert!(page.contains("property=\"og:description\""), "{page}");
    assert!(
        page.contains("name=\"twitter:card\" content=\"summary_large_image\""),
        "{page}"
    );
    assert!(
        page.contains("content=\"https://example.com/card.png?x=%22y%22\""),
        "{page}"
    );
    assert!(
        page.contains("https://example.com/story?a=1&amp;b=2"),
        "{page}"
    );

    let res = browse(&app, "story", LONDON, DESKTOP).await;
    assert_eq!(
        (res.status().as_u16(), location(&res)),
        (302, "https://example.com/story?a=1&b=2")
    );
    // The crawler's fetch was not a click.
    assert_eq!(app.wait_for_clicks("story", 1).await, 1);
}

async fn each_redirect_type_answers_its_status(app: TestApp) {
    for status in [301, 302, 307, 308] {
        let link = app
            .create_link(&json!({"destination": "https://example.com/t", "redirectType": status}))
            .await;
        let res = browse(&app, text(&link["shortCode"]), LONDON, DESKTOP).await;
        assert_eq!(res.status().as_u16(), status);
        assert_eq!(location(&res), "https://example.com/t");
    }
}

async fn tags_search_and_archive_filter_the_list_page_by_page(app: TestApp) {
    for (i, tags) in [
        json!(["a"]),
        json!(["a", "b"]),
        json!(["b"]),
        json!(["a"]),
        json!([]),
    ]
    .iter()
    .enumerate()
    {
        let body = json!({
            "destination": format!("https://example.com/Item-{i}"), "customSlug": format!("item{i}"),
            "tags": tags,
        });
        app.create_link(&body).await;
    }
    let codes = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|l| text(&l["shortCode"]).to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let first = assert_ok(app.get("/links?tag=a&limit=2").await).await;
    assert_eq!(codes(&first), ["item3", "item1"]);
    let cursor = text(&first["nextCursor"]).to_owned();
    let second = assert_ok(
        app.get(&format!("/links?tag=a&limit=2&cursor={cursor}"))
            .await,
    )
    .await;
    assert_eq!(codes(&second), ["item0"]);
    assert!(second["nextCursor"].is_null());
    let page = assert_ok(app.get("/links?tag=nobody").await).await;
    assert_eq!(codes(&page), Vec::<String>::new());

    // Search: code or destination, any case; wildcards are literal.
    let page = assert_ok(app.get("/links?search=ITEM-2").await).await;
    assert_eq!(codes(&page), ["item2"]);
    let page = assert_ok(app.get("/links?search=item4").await).await;
    assert_eq!(codes(&page), ["item4"]);
    let page = assert_ok(app.get("/links?search=%25").await).await;
    assert_eq!(codes(&page), Vec::<String>::new());
    let page = assert_ok(app.get("/links?search=item&tag=b").await).await;
    assert_eq!(codes(&page), ["item2", "item1"]);

    // Archived: left out unless asked for; a tag change moves a link between filters.
    assert_ok(
        app.patch_json("/links/item3", &json!({"archived": true, "tags": ["b"]}))
            .await,
    )
    .await;
    let page = assert_ok(app.get("/links?tag=a").await).await;
    assert_eq!(codes(&page), ["item1", "item0"]);
    let page = assert_ok(app.get("/links?tag=b").await).await;
    assert_eq!(codes(&page), ["item2", "item1"]);
    let page = assert_ok(app.get("/links?tag=b&archived=true").await).await;
    assert_eq!(codes(&page), ["item3", "item2", "item1"]);
    assert_eq!(
        browse(&app, "item3", LONDON, DESKTOP).await.status(),
        302,
        "still redirects"
    );
    let page = assert_ok(app.get("/links").await).await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(4));

    // A deleted link leaves its tags' index.
    assert_ok(app.delete("/links/item2").await).await;
    let page = assert_ok(app.get("/links?tag=b").await).await;
    assert_eq!(codes(&page), ["item1"]);
}

async fn a_new_slug_frees_the_old_one_at_once(app: TestApp) {
    app.create_link(&json!({"destination": "https://example.com/1", "customSlug": "first"}))
        .await;
    app.create_link(&json!({"destination": "https://example.com/2", "customSlug": "taken"}))
        .await;
    // Seen by the redirect (and cached, where there is a cache) before the change.
    assert_eq!(browse(&app, "first", LONDON, DESKTOP).await.status(), 302);
    assert_eq!(browse(&app, "renamed", LONDON, DESKTOP).await.status(), 404);

    let link = assert_ok(
        app.patch_json("/links/first", &json!({"customSlug": "renamed"}))
            .await,
    )
    .await;
    assert_eq!(link["shortCode"], "renamed");
    assert!(text(&link["shortUrl"]).ends_with("/renamed"));
    assert_eq!(browse(&app, "first", LONDON, DESKTOP).await.status(), 404);
    let res = browse(&app, "renamed", LONDON, DESKTOP).await;
    assert_eq!(
        (res.status().as_u16(), location(&res)),
        (302, "https://example.com/1")
    );
    assert_error(app.get("/links/first").await, 404, "NOT_FOUND").await;
    assert_eq!(
        app.wait_for_clicks("renamed", 2).await,
        2,
        "the clicks stay with the link"
    );

    // The old code is free at once; a taken one is a conflict that changes nothing.
    app.create_link(&json!({"destination": "https://example.com/3", "customSlug": "first"}))
        .await;
    let res = app
        .patch_json(
            "/links/renamed",
            &json!({"customSlug": "taken", "title": "x"}),
        )
        .await;
    assert_error(res, 409, "SLUG_CONFLICT").await;
    let link = assert_ok(app.get("/links/renamed").await).await;
    assert!(link["title"].is_null(), "nothing changed: {link}");
    let res = browse(&app, "taken", LONDON, DESKTOP).await;
    assert_eq!(location(&res), "https://example.com/2");
    // The same slug again is no change at all.
    let res = app
        .patch_json("/links/renamed", &json!({"customSlug": "renamed"}))
        .await;
    assert_eq!(assert_ok(res).await["shortCode"], "renamed");
    let res = send(
        app.api(Method::PATCH, "/links/renamed")
            .json(&json!({"customSlug": "a/b"})),
    )
    .await;
    assert_invalid(res, &["customSlug"]).await;
}
