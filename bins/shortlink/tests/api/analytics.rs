//! `/api/v1/analytics` and its export over a planned set of clicks: the server believes
//! `X-Forwarded-For` from the tests' own address and locates clients with the GeoIP test
//! database, whose answers are known.

use reqwest::Method;
use serde_json::{Value, json};
use shortlink_domain::{ClickInfo, Timestamp};
use shortlink_storage::{ClickBatch, ClickEvent, LinkClicks};

use crate::helpers::{DEADLINE, TestApp, assert_error, assert_invalid, assert_ok, poll, text};

crate::helpers::on_both_backends_behind_a_proxy!(
    breakdowns_count_a_planned_set_of_clicks,
    filters_combine_and_links_are_isolated,
    days_follow_the_time_zone_across_a_daylight_saving_change,
    a_series_counts_only_the_range_in_its_first_bucket,
    bad_queries_are_refused_naming_the_parameter,
    the_export_streams_every_event_escaped,
    a_long_referrer_is_kept_to_2048_characters,
    a_referrer_in_utf8_is_kept_and_grouped_by_its_host,
    every_referrer_listed_can_be_a_filter,
    clicks_and_events_agree_after_a_concurrent_load_and_a_stop,
);

const CHROME_WINDOWS: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
const SAFARI_IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const FIREFOX_MAC: &str =
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.5; rv:127.0) Gecko/20100101 Firefox/127.0";
const CHROME_ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";

/// A browser's visit to `code` from `client` (through the trusted proxy), with a User-Agent and
/// maybe a Referer.
async fn visit(app: &TestApp, code: &str, client: &str, agent: &str, referer: Option<&str>) {
    let mut request = app
        .client
        .get(app.url(&format!("/{code}")))
        .header("X-Forwarded-For", client)
        .header("User-Agent", agent);
    if let Some(referer) = referer {
        request = request.header("Referer", referer);
    }
    let res = request.send().await.expect("the server answers");
    assert_eq!(res.status(), 302);
}

/// `/analytics` with `query`, once `clicks` events have been recorded for it.
async fn analytics(app: &TestApp, query: &str) -> Value {
    assert_ok(app.get(&format!("/analytics?{query}")).await).await
}

/// The NDJSON export's rows, `query` appended to its URL.
async fn exported(app: &TestApp, query: &str) -> Vec<Value> {
    let res = app
        .get(&format!("/analytics/export?format=ndjson{query}"))
        .await;
    assert_eq!(res.status(), 200);
    (res.text().await.expect("the body is text").lines())
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

async fn wait_for_events(app: &TestApp, query: &str, clicks: u64) {
    let found = poll(DEADLINE, async || {
        let totals = analytics(app, &format!("groupBy=count&{query}")).await;
        (totals["clicks"] == clicks).then_some(())
    })
    .await;
    assert!(
        found.is_some(),
        "{clicks} events for {query} within {DEADLINE:?}"
    );
}

/// Six clicks on two links: the planned set the breakdown tests read.
async fn planned_clicks(app: &TestApp) {
    app.create_link(&json!({ "destination": "https://example.com/a", "customSlug": "a" }))
        .await;
    app.create_link(&json!({ "destination": "https://example.com/b", "customSlug": "b" }))
        .await;
    let story = Some("https://news.example/story?id=1");
    visit(app, "a", "81.2.69.142", CHROME_WINDOWS, story).await;
    visit(
        app,
        "a",
        "81.2.69.142",
        CHROME_WINDOWS,
        Some("https://news.example/other"),
    )
    .await;
    visit(app, "a", "89.160.20.112", SAFARI_IPHONE, None).await;
    visit(
        app,
        "a",
        "216.160.83.56",
        FIREFOX_MAC,
        Some("https://t.co/xyz"),
    )
    .await;
    // Not in the GeoIP database: no country, no city.
    visit(app, "a", "198.51.100.7", FIREFOX_MAC, None).await;
    visit(app, "b", "2.125.160.216", CHROME_ANDROID, story).await;
    wait_for_events(app, "", 6).await;
}

fn groups(data: &Value) -> Vec<(Value, u64, u64)> {
    data.as_array()
        .expect("a breakdown is an array")
        .iter()
        .map(|g| {
            (
                g["key"].clone(),
                g["clicks"].as_u64().expect("clicks"),
                g["uniqueVisitors"].as_u64().expect("uniqueVisitors"),
            )
        })
        .collect()
}

async fn breakdowns_count_a_planned_set_of_clicks(app: TestApp) {
    planned_clicks(&app).await;
    // The first two clicks are one visitor (same address and agent, same day).
    assert_eq!(
        analytics(&app, "groupBy=count").await,
        json!({ "clicks": 6, "uniqueVisitors": 5 })
    );
    assert_eq!(
        groups(&analytics(&app, "groupBy=countries").await),
        [
            (json!("GB"), 3, 2),
            (json!("SE"), 1, 1),
            (json!("US"), 1, 1),
            (Value::Null, 1, 1),
        ]
    );
    assert_eq!(
        groups(&analytics(&app, "groupBy=cities").await),
        [
            (json!("London"), 2, 1),
            (json!("Boxford"), 1, 1),
            (json!("Linköping"), 1, 1),
            (json!("Milton"), 1, 1),
            (Value::Null, 1, 1),
        ]
    );
    assert_eq!(
        groups(&analytics(&app, "groupBy=devices").await),
        [(json!("desktop"), 4, 3), (json!("mobile"), 2, 2)]
    );
    assert_eq!(
        groups(&analytics(&app, "groupBy=browsers").await),
        [
            (json!("Chrome"), 3, 2),
            (json!("Firefox"), 2, 2),
            (json!("Safari"), 1, 1),
        ]
    );
    assert_eq!(
        groups(&analytics(&app, "groupBy=os").await),
        [
            (json!("Windows"), 2, 1),
            (json!("macOS"), 2, 2),
            (json!("Android"), 1, 1),
            (json!("iOS"), 1, 1),
        ]
    );
    assert_eq!(
        groups(&analytics(&app, "groupBy=referrers").await),
        [
            (json!("news.example"), 3, 2),
            (json!("(direct)"), 2, 2),
            (json!("t.co"), 1, 1),
        ]
    );
    let a = text(&assert_ok(app.get("/links/a").await).await["id"]).to_owned();
    let b = text(&assert_ok(app.get("/links/b").await).await["id"]).to_owned();
    let by_link = groups(&analytics(&app, "groupBy=links").await);
    assert_eq!(by_link, [(json!(a), 5, 4), (json!(b), 1, 1)]);
    assert_eq!(
        groups(&analytics(&app, "groupBy=referrers&limit=1").await).len(),
        1
    );

    // Today's daily series: one bucket, every click.
    let today = Timestamp::now().to_string()[..10].to_owned();
    let series = analytics(&app, &format!("groupBy=timeseries&start={today}")).await;
    assert_eq!(
        series,
        json!([{ "start": format!("{today}T00:00:00+00:00"), "clicks": 6, "uniqueVisitors": 5 }])
    );
}

async fn filters_combine_and_links_are_isolated(app: TestApp) {
    planned_clicks(&app).await;
    let count = async |query: &str| analytics(&app, &format!("groupBy=count&{query}")).await;
    assert_eq!(
        count("linkId=a").await,
        json!({ "clicks": 5, "uniqueVisitors": 4 })
    );
    assert_eq!(
        count("country=GB").await,
        json!({ "clicks": 3, "uniqueVisitors": 2 })
    );
    assert_eq!(count("country=gb").await, count("country=GB").await);
    assert_eq!(
        count("country=GB&linkId=a").await,
        json!({ "clicks": 2, "uniqueVisitors": 1 })
    );
    assert_eq!(count("device=mobile&browser=Chrome").await["clicks"], 1);
    assert_eq!(count("os=macOS&referrer=(direct)").await["clicks"], 1);
    // A host, as the referrers' breakdown shows it, in any case and with a trailing dot.
    assert_eq!(count("referrer=News.Example.").await["clicks"], 3);
    assert_eq!(count("city=Linköping").await["clicks"], 1);
    assert_eq!(
        count("country=FR").await,
        json!({ "clicks": 0, "uniqueVisitors": 0 })
    );
    let a = text(&assert_ok(app.get("/links/a").await).await["id"]).to_owned();
    assert_eq!(count(&format!("linkId={a}")).await["clicks"], 5);

    // Another workspace sees none of it, and not the link.
    let other = app.new_tenant("other", 100).await;
    let theirs = app
        .api_as(&other.key, Method::GET, "/analytics?groupBy=count")
        .send()
        .await
        .expect("the server answers");
    assert_eq!(
        assert_ok(theirs).await,
        json!({ "clicks": 0, "uniqueVisitors": 0 })
    );
    for link in ["a", a.as_str()] {
        let res = app
            .api_as(
                &other.key,
                Method::GET,
                &format!("/analytics?linkId={link}"),
            )
            .send()
            .await
            .expect("the server answers");
        assert_error(res, 404, "NOT_FOUND").await;
    }
}

/// Events written straight through storage at chosen instants (a redirect's time is now).
async fn events_at(app: &TestApp, code: &str, instants: &[&str]) {
    let target = app
        .store
        .resolve(app.url("").trim_start_matches("http://"), code)
        .await
        .expect("the database answers")
        .expect("the link exists");
    let clicks = instants
        .iter()
        .enumerate()
        .map(|(i, at)| ClickEvent {
            click: ClickInfo::bare(Timestamp::parse_rfc3339(at).expect("an instant")),
            visitor: i as i64,
        })
        .collect::<Vec<_>>();
    let batch = ClickBatch {
        links: vec![LinkClicks {
            counter: target.counter,
            workspace_id: target.workspace_id,
            count: clicks.len() as u64,
            clicks,
        }],
        events: true,
    };
    app.store
        .record_clicks(
            batch.into(),
            &shortlink_domain::BaseUrl::parse(&app.url("")).expect("a base"),
        )
        .await
        .expect("the clicks are written");
}

async fn days_follow_the_time_zone_across_a_daylight_saving_change(app: TestApp) {
    app.create_link(&json!({ "destination": "https://example.com/dst", "customSlug": "dst" }))
        .await;
    // London moves from GMT to BST at 01:00 UTC on 29 March 2026.
    events_at(
        &app,
        "dst",
        &[
            "2026-03-28T23:30:00Z", // the 28th in London and in UTC
            "2026-03-29T00:30:00Z", // the 29th in both
            "2026-03-29T23:30:00Z", // the 30th in London (00:30 BST), the 29th in UTC
        ],
    )
    .await;
    let series = |zone: &str| {
        let app = &app;
        let zone = zone.to_owned();
        async move {
            let data = analytics(
                app,
                &format!(
                    "groupBy=timeseries&linkId=dst&start=2026-03-28&end=2026-03-31&timezone={zone}"
                ),
            )
            .await;
            data.as_array()
                .expect("a series")
                .iter()
                .map(|b| {
                    (
                        text(&b["start"]).to_owned(),
                        b["clicks"].as_u64().expect("clicks"),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        series("Europe/London").await,
        [
            ("2026-03-28T00:00:00+00:00".to_owned(), 1),
            ("2026-03-29T00:00:00+00:00".to_owned(), 1),
            ("2026-03-30T00:00:00+01:00".to_owned(), 1),
        ]
    );
    assert_eq!(
        series("UTC").await,
        [
            ("2026-03-28T00:00:00+00:00".to_owned(), 1),
            ("2026-03-29T00:00:00+00:00".to_owned(), 2),
            ("2026-03-30T00:00:00+00:00".to_owned(), 0),
        ]
    );
    // The 29th in London lasted 23 hours; its hourly series has 23 buckets.
    let hours = analytics(
        &app,
        "groupBy=timeseries&interval=hour&start=2026-03-29&end=2026-03-30&timezone=Europe/London&linkId=dst",
    )
    .await;
    assert_eq!(hours.as_array().expect("a series").len(), 23);
    let months = analytics(
        &app,
        "groupBy=timeseries&interval=month&start=2026-03-01&end=2026-04-01&linkId=dst",
    )
    .await;
    assert_eq!(
        months,
        json!([{ "start": "2026-03-01T00:00:00+00:00", "clicks": 3, "uniqueVisitors": 3 }])
    );
}

async fn a_series_counts_only_the_range_in_its_first_bucket(app: TestApp) {
    app.create_link(&json!({ "destination": "https://example.com/w", "customSlug": "w" }))
        .await;
    events_at(
        &app,
        "w",
        &[
            "2026-11-23T10:00:00Z", // the week's Monday, before the range
            "2026-11-25T09:00:00Z", // the range's first day, before its start
            "2026-11-25T13:00:00Z",
            "2026-11-26T10:00:00Z",
            "2026-11-27T00:00:00Z", // the range's end, which is exclusive
        ],
    )
    .await;
    let range = "start=2026-11-25T12:00:00Z&end=2026-11-27";
    let bucket = |start: &str, clicks: u64| json!({ "start": start, "clicks": clicks, "uniqueVisitors": clicks });
    // One link's events, and the workspace's (which rollups may answer).
    for scope in ["linkId=w&", ""] {
        let series = |interval: &str| {
            let query = format!("groupBy=timeseries&interval={interval}&{scope}{range}");
            let app = &app;
            async move { analytics(app, &query).await }
        };
        assert_eq!(
            series("week").await,
            json!([bucket("2026-11-23T00:00:00+00:00", 2)]),
            "{scope}"
        );
        assert_eq!(
            series("day").await,
            json!([
                bucket("2026-11-25T00:00:00+00:00", 1),
                bucket("2026-11-26T00:00:00+00:00", 1)
            ]),
            "{scope}"
        );
        let count = analytics(&app, &format!("groupBy=count&{scope}{range}")).await;
        assert_eq!(
            count,
            json!({ "clicks": 2, "uniqueVisitors": 2 }),
            "{scope}"
        );
    }
}

async fn bad_queries_are_refused_naming_the_parameter(app: TestApp) {
    for (query, field) in [
        ("groupBy=everything", "groupBy"),
        ("groupBy=timeseries&interval=fortnight", "interval"),
        ("timezone=Mars/Olympus", "timezone"),
        ("start=yesterday", "start"),
        ("end=2026-13-01", "end"),
        ("start=2026-02-01&end=2026-01-01", "end"),
        // Without `end` (now), a future `start` is the parameter at fault.
        ("start=2999-01-01", "start"),
        (
            "groupBy=timeseries&interval=hour&start=2026-01-01&end=2026-03-01",
            "interval",
        ),
        ("groupBy=countries&limit=0", "limit"),
        ("groupBy=countries&limit=101", "limit"),
        ("groupBy=countries&limit=ten", "limit"),
        ("device=phone", "device"),
        ("country=Germany", "country"),
        ("color=blue", "color"),
        ("start=99999-01-01", "start"),
        // A time needs its offset, within RFC 3339's; a date is only a date.
        ("start=2026-01-01T10:50:00", "start"),
        ("start=2026-01-01T10:00:00%2B25:00", "start"),
        ("end=2026-01-01T10:00:00Z%20", "end"),
        ("start=1969-12-31", "start"),
        // Which of two values was meant is not ours to guess.
        ("groupBy=countries&groupBy=cities", "groupBy"),
    ] {
        assert_invalid(app.get(&format!("/analytics?{query}")).await, &[field]).await;
    }
    // A date the calendar has, past the last instant it handles: out of range, not malformed.
    let error = assert_invalid(app.get("/analytics?end=9999-12-31").await, &["end"]).await;
    assert!(
        text(&error["message"])
            .starts_with("end must lie between 1970-01-01T00:00:00Z and 9999-12-30T"),
        "{error}"
    );
    assert_invalid(app.get("/analytics/export?format=xlsx").await, &["format"]).await;
    assert_invalid(
        app.get("/analytics/export?groupBy=count").await,
        &["groupBy"],
    )
    .await;
    assert_error(app.get("/analytics?linkId=nope").await, 404, "NOT_FOUND").await;
}

async fn the_export_streams_every_event_escaped(app: TestApp) {
    planned_clicks(&app).await;
    visit(
        &app,
        "b",
        "81.2.69.142",
        CHROME_WINDOWS,
        Some("=HYPERLINK(\"http://evil.example\")"),
    )
    .await;
    wait_for_events(&app, "", 7).await;

    let res = app.get("/analytics/export?format=csv").await;
    assert_eq!(res.status(), 200);
    let disposition = res.headers()["content-disposition"]
        .to_str()
        .expect("ASCII")
        .to_owned();
    assert_eq!(disposition, "attachment; filename=\"clicks.csv\"");
    let body = res.text().await.expect("the body is text");
    let lines: Vec<&str> = body.split("\r\n").collect();
    assert_eq!(
        lines[0],
        "timestamp,linkId,shortCode,country,city,device,browser,os,referrer,referrerUrl"
    );
    assert_eq!(
        lines.len(),
        1 + 7 + 1,
        "a header, seven rows, the final line break"
    );
    assert_eq!(lines[8], "");
    let last = lines[7];
    assert!(
        last.ends_with(",b,GB,London,desktop,Chrome,Windows,(direct),\"'=HYPERLINK(\"\"http://evil.example\"\")\""),
        "{last}"
    );
    let first_rows: Vec<&str> = lines[1..7]
        .iter()
        .map(|l| l.split(',').nth(2).unwrap_or_default())
        .collect();
    assert_eq!(first_rows, ["a", "a", "a", "a", "a", "b"]);

    let rows = exported(&app, "&linkId=b").await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["shortCode"], "b");
    assert_eq!(rows[0]["country"], "GB");
    assert_eq!(rows[0]["city"], "Boxford");
    assert_eq!(rows[0]["device"], "mobile");
    assert_eq!(rows[0]["referrerUrl"], "https://news.example/story?id=1");
    assert_eq!(
        rows[1]["referrerUrl"],
        "=HYPERLINK(\"http://evil.example\")"
    );
}

async fn a_long_referrer_is_kept_to_2048_characters(app: TestApp) {
    app.create_link(&json!({ "destination": "https://example.com/a", "customSlug": "a" }))
        .await;
    let long = |len: usize| format!("https://news.example/{}", "p".repeat(len - 21));
    for len in [1_500, 2_048, 2_500] {
        visit(&app, "a", "81.2.69.142", CHROME_WINDOWS, Some(&long(len))).await;
    }
    wait_for_events(&app, "", 3).await;

    let kept: Vec<Value> = (exported(&app, "").await.into_iter())
        .map(|row| row["referrerUrl"].clone())
        .collect();
    assert_eq!(kept, [long(1_500), long(2_048), long(2_048)]);
}

/// Browsers percent-encode the `Referer`; an app may send the IRI itself. Its click keeps it, and
/// its host groups with the encoded form's (the punycode a browser would have sent).
async fn a_referrer_in_utf8_is_kept_and_grouped_by_its_host(app: TestApp) {
    app.create_link(&json!({ "destination": "https://example.com/a", "customSlug": "a" }))
        .await;
    let iri = "https://bücher.example/straße";
    visit(&app, "a", "81.2.69.142", CHROME_WINDOWS, Some(iri)).await;
    let encoded = "https://xn--bcher-kva.example/stra%C3%9Fe";
    visit(&app, "a", "81.2.69.142", CHROME_WINDOWS, Some(encoded)).await;
    wait_for_events(&app, "", 2).await;

    let kept: Vec<Value> = (exported(&app, "").await.into_iter())
        .map(|row| row["referrerUrl"].clone())
        .collect();
    assert_eq!(kept, [iri, encoded]);
    assert_eq!(
        groups(&analytics(&app, "groupBy=referrers").await),
        [(json!("xn--bcher-kva.example"), 2, 1)]
    );
}

/// A breakdown's entries are filters (the dashboard offers each as one): the longest host a
/// click records, a DNS name's 253 characters, is a filter too; a longer one is no host, and its
/// click counts as direct.
async fn every_referrer_listed_can_be_a_filter(app: TestApp) {
    app.create_link(&json!({ "destination": "https://example.com/a", "customSlug": "a" }))
        .await;
    let longest = format!("{0}.{0}.{0}.{1}.example", "a".repeat(63), "b".repeat(53));
    assert_eq!(longest.len(), 253);
    visit(
        &app,
        "a",
        "81.2.69.142",
        CHROME_WINDOWS,
        Some(&format!("https://{longest}/")),
    )
    .await;
    visit(
        &app,
        "a",
        "81.2.69.142",
        CHROME_WINDOWS,
        Some(&format!("https://b{longest}/")),
    )
    .await;
    wait_for_events(&app, "", 2).await;

    let mut listed = groups(&analytics(&app, "groupBy=referrers").await);
    listed.sort_by_key(|(key, _, _)| key.to_string());
    assert_eq!(listed, [(json!("(direct)"), 1, 1), (json!(longest), 1, 1)]);
    let picked = analytics(&app, &format!("referrer={longest}")).await;
    assert_eq!(picked["clicks"], 1);
    let res = app.get(&format!("/analytics?referrer=b{longest}")).await;
    assert_invalid(res, &["referrer"]).await;
}

async fn clicks_and_events_agree_after_a_concurrent_load_and_a_stop(mut app: TestApp) {
    let codes = ["c1", "c2", "c3"];
    for code in codes {
        app.create_link(&json!({ "destination": "https://example.com/", "customSlug": code }))
            .await;
    }
    let visits = (0..150).map(|i| {
        let app = &app;
        async move {
            let code = codes[i % codes.len()];
            let client = format!("81.2.69.{}", i % 7 + 1);
            visit(app, code, &client, CHROME_WINDOWS, None).await;
        }
    });
    futures_util::future::join_all(visits).await;
    for code in codes {
        let clicks = app.wait_for_clicks(code, 50).await;
        wait_for_events(&app, &format!("linkId={code}"), 50).await;
        assert_eq!(clicks, 50);
    }
    // Clicks recorded just before a graceful stop are written with their events.
    for _ in 0..20 {
        visit(&app, "c1", "81.2.69.142", CHROME_WINDOWS, None).await;
    }
    app.stop().await.expect("the server stops cleanly");
    let c1 = app
        .store
        .resolve(app.url("").trim_start_matches("http://"), "c1")
        .await
        .expect("the database answers")
        .expect("the link exists");
    let filter = shortlink_storage::EventFilter::between(
        c1.workspace_id,
        Some(c1.counter),
        Timestamp::from_unix_millis(0),
        Timestamp::now().plus(std::time::Duration::from_secs(60)),
    );
    let events = app
        .store
        .analytics_totals(&filter)
        .await
        .expect("the database answers");
    assert_eq!(events.clicks, 70);
    assert_eq!(app.stored_clicks("c1").await, 70);
}
