//! Webhooks end to end: the real server delivering to a real receiver on 127.0.0.1.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde_json::{Value, json};
use shortlink_storage::testing::TestDatabase;
use shortlink_webhooks::VerifyError;

use crate::helpers::{Api, Received, Receiver, Reply, Server, is_id, webhook_args};

const BOTH: &[&str] = &["link.created", "link.clicked"];
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
/// Long enough for several attempts with a `1s,1s` schedule on a busy machine.
const ARRIVAL: Duration = Duration::from_secs(15);

fn of_type(kind: &'static str) -> impl Fn(&Received) -> bool {
    move |r| r.event_type() == kind
}

/// A server with the first-run key, allowed to deliver to 127.0.0.1 with `schedule`.
async fn server(db: &TestDatabase, schedule: &str) -> (Server, Api) {
    let server = Server::start(&db.url, &webhook_args(schedule)).await;
    let key = server.first_run_key().await;
    let api = Api::new(&server, &key);
    (server, api)
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Checks what every delivery must be: a signed JSON POST with the documented headers.
#[track_caller]
fn assert_standard_webhook(r: &Received, secret: &str) {
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/hook");
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{:?}",
        r.headers
    );
    assert!(
        r.header("user-agent")
            .is_some_and(|ua| ua.starts_with("shortlink-webhooks/")),
        "{:?}",
        r.headers
    );
    assert!(is_id(r.id(), "msg_"), "webhook-id: {:?}", r.id());
    let timestamp: i64 = r
        .header("webhook-timestamp")
        .and_then(|t| t.parse().ok())
        .expect("webhook-timestamp is unix seconds");
    assert!((timestamp - unix_now()).abs() < 60, "{timestamp}");
    assert!(
        r.header("webhook-signature")
            .is_some_and(|s| s.starts_with("v1,")),
        "{:?}",
        r.headers
    );
    assert_eq!(r.verify(secret), Ok(()), "the signature verifies");
}

/// An RFC 3339 UTC timestamp with milliseconds, as the contract writes them.
#[track_caller]
fn assert_timestamp(v: &Value) {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    let b = s.as_bytes();
    assert!(
        s.len() == 24 && b[4] == b'-' && b[10] == b'T' && b[19] == b'.' && s.ends_with('Z'),
        "not RFC 3339 UTC with milliseconds: {s}"
    );
}

#[tokio::test]
async fn link_created_arrives_signed_with_the_link_as_the_api_returns_it() {
    let db = TestDatabase::sqlite();
    let (_server, api) = server(&db, "1s,1s").await;
    let receiver = Receiver::healthy();
    let (hook, secret) = api.create_webhook(&receiver.url, BOTH).await;

    let link = api.create_link("https://example.com/created?a=1").await;
    let got = receiver.wait_for(1, ARRIVAL, of_type("link.created")).await;
    let r = &got[0];
    assert_standard_webhook(r, &secret);

    let body = r.json();
    assert_eq!(body["type"], "link.created", "{body}");
    assert_timestamp(&body["timestamp"]);
    assert_eq!(body["data"]["shortCode"], link["shortCode"], "{body}");
    assert_eq!(
        body["data"], link,
        "data is the link as the API returned it"
    );

    // The signature covers the exact bytes, and only the right secret makes it.
    let mut tampered = r.body.to_vec();
    let last = tampered.len() - 2;
    tampered[last] ^= 1;
    assert_eq!(
        r.verify_body(&secret, &tampered),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        r.verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        Err(VerifyError::NoMatchingSignature)
    );

    let delivery = api
        .delivery_when(&hook, r.id(), ARRIVAL, |d| d["state"] == "delivered")
        .await;
    assert_eq!(delivery["type"], "link.created", "{delivery}");
    assert_eq!(delivery["attempts"], 1, "{delivery}");
    assert_eq!(delivery["lastStatusCode"], 204, "{delivery}");
    assert_eq!(
        receiver.received().len(),
        1,
        "a healthy receiver gets the event once"
    );
}

#[tokio::test]
async fn link_updated_and_link_deleted_arrive_signed_with_the_link_after_and_before() {
    let db = TestDatabase::sqlite();
    let (_server, api) = server(&db, "1s,1s").await;
    let receiver = Receiver::healthy();
    let (_, secret) = api
        .create_webhook(&receiver.url, &["link.updated", "link.deleted"])
        .await;

    let link = api.create_link("https://example.com/before").await;
    let path = format!("/links/{}", link["id"].as_str().expect("an id"));
    let change = json!({"destination": "https://example.com/after", "tags": ["spring"]});
    let (status, changed) = Api::send(api.request(Method::PATCH, &path).json(&change)).await;
    assert_eq!(status, 200, "{changed}");
    let (status, deleted) = Api::send(api.request(Method::DELETE, &path)).await;
    assert_eq!(status, 200, "{deleted}");

    let updated = receiver.wait_for(1, ARRIVAL, of_type("link.updated")).await;
    assert_standard_webhook(&updated[0], &secret);
    let body = updated[0].json();
    assert_timestamp(&body["timestamp"]);
    assert_eq!(
        body["data"], changed["data"],
        "data is the link after the change"
    );
    assert_eq!(body["data"]["tags"], json!(["spring"]));

    let gone = receiver.wait_for(1, ARRIVAL, of_type("link.deleted")).await;
    assert_standard_webhook(&gone[0], &secret);
    assert_eq!(
        gone[0].json()["data"],
        deleted["data"],
        "data is the link before"
    );
    assert!(
        receiver
            .received()
            .iter()
            .all(|r| r.event_type() != "link.created"),
        "not subscribed to link.created"
    );
}

#[tokio::test]
async fn link_clicked_arrives_with_the_link_and_the_click_and_bots_send_none() {
    let db = TestDatabase::sqlite();
    let (_server, api) = server(&db, "1s,1s").await;
    let receiver = Receiver::healthy();
    let (_hook, secret) = api.create_webhook(&receiver.url, BOTH).await;
    let link = api.create_link("https://example.com/clicked").await;
    let code = link["shortCode"].as_str().expect("shortCode");
    let created = receiver.wait_for(1, ARRIVAL, of_type("link.created")).await;

    // Neither a link-preview crawler nor a HEAD is a click.
    let bot = api
        .visit(
            code,
            Some("Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"),
            None,
        )
        .await;
    assert_eq!(bot.status(), 302);
    let head = api
        .http
        .head(format!("{}/{code}", api.base))
        .send()
        .await
        .expect("HEAD answers");
    assert_eq!(head.status(), 302);
    let person = api
        .visit(code, Some(BROWSER), Some("https://news.example/"))
        .await;
    assert_eq!(person.status(), 302);

    let clicked = receiver.wait_for(1, ARRIVAL, of_type("link.clicked")).await;
    let r = &clicked[0];
    assert_standard_webhook(r, &secret);
    assert_ne!(r.id(), created[0].id(), "each event has its own id");
    let body = r.json();
    assert_eq!(body["type"], "link.clicked", "{body}");
    assert_timestamp(&body["timestamp"]);
    let data = &body["data"];
    assert_eq!(data["link"]["id"], link["id"], "{body}");
    assert_eq!(data["link"]["shortCode"], link["shortCode"], "{body}");
    assert_eq!(data["link"]["shortUrl"], link["shortUrl"], "{body}");
    assert_eq!(data["link"]["destination"], link["destination"], "{body}");
    assert_timestamp(&data["click"]["timestamp"]);
    assert_eq!(data["click"]["userAgent"], BROWSER, "{body}");
    assert_eq!(data["click"]["referrer"], "news.example", "{body}");
    assert_eq!(
        data["click"]["referrerUrl"], "https://news.example/",
        "{body}"
    );
    assert_eq!(data["click"]["device"], "desktop", "{body}");
    assert_eq!(data["click"]["browser"], "Firefox", "{body}");
    assert_eq!(data["click"]["os"], "Linux", "{body}");
    // No GeoIP database: no country, no city.
    assert!(
        data["click"]["country"].is_null() && data["click"]["city"].is_null(),
        "{body}"
    );

    // The bot's and the HEAD's visits came first; had either counted, its event would be in the
    // same flush or an earlier one. Give stragglers a moment anyway.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let clicks: Vec<Received> = receiver
        .received()
        .into_iter()
        .filter(of_type("link.clicked"))
        .collect();
    assert_eq!(clicks.len(), 1, "only the person's visit is a click");
    let (status, body) = Api::send(api.request(Method::GET, &format!("/links/{code}"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["clicks"], 1, "{body}");
}

#[tokio::test]
async fn a_receiver_failing_twice_gets_one_id_three_times_and_the_delivery_ends_delivered() {
    let db = TestDatabase::sqlite();
    let (_server, api) = server(&db, "1s,1s").await;
    let receiver = Receiver::start(
        &[Reply::Status(500), Reply::Status(500)],
        Reply::Status(200),
    );
    let (hook, secret) = api.create_webhook(&receiver.url, &["link.created"]).await;
    api.create_link("https://example.com/flaky").await;

    let got = receiver.wait_for(3, ARRIVAL, |_| true).await;
    let id = got[0].id();
    for r in &got {
        assert_standard_webhook(r, &secret);
        assert_eq!(r.id(), id, "every try of one event has the same webhook-id");
        assert_eq!(r.body, got[0].body, "every try sends the same body");
    }
    for pair in got.windows(2) {
        let gap = pair[1].at.duration_since(pair[0].at);
        assert!(
            gap >= Duration::from_millis(900),
            "retried after {gap:?}, before the schedule's 1s"
        );
    }
    let delivery = api
        .delivery_when(&hook, id, ARRIVAL, |d| d["state"] == "delivered")
        .await;
    assert_eq!(delivery["attempts"], 3, "{delivery}");
    assert_eq!(delivery["lastStatusCode"], 200, "{delivery}");
    assert_eq!(receiver.received().len(), 3, "nothing after the success");
}

#[tokio::test]
async fn a_receiver_that_always_fails_gets_every_try_and_the_delivery_ends_failed() {
    let db = TestDatabase::sqlite();
    let (_server, api) = server(&db, "1s,1s").await;
    let receiver = Receiver::start(&[], Reply::Status(500));
    let (hook, secret) = api.create_webhook(&receiver.url, &["link.created"]).await;
    api.create_link("https://example.com/down").await;

    let first = receiver.wait_for(1, ARRIVAL, |_| true).await;
    let id = first[0].id().to_owned();
    let delivery = api
        .delivery_when(&hook, &id, ARRIVAL, |d| d["state"] != "pending")
        .await;
    assert_eq!(delivery["state"], "failed", "{delivery}");
    assert_eq!(delivery["attempts"], 3, "1 try + 2 retries: {delivery}");
    assert_eq!(delivery["lastStatusCode"], 500, "{delivery}");
    assert!(delivery["nextAttemptAt"].is_null(), "{delivery}");

    // A failed delivery is not tried again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let got = receiver.received();
    assert_eq!(got.len(), 3, "exactly the scheduled tries");
    for r in &got {
        assert_standard_webhook(r, &secret);
        assert_eq!(r.id(), id);
    }
}

/// One attempt only: a full `1s,1s` schedule against a silent receiver would take over 30 s.
#[tokio::test]
async fn a_receiver_that_never_answers_times_out_after_ten_seconds_and_is_retried_later() {
    let db = TestDatabase::sqlite();
    let (_server, api) = server(&db, "1h").await;
    let receiver = Receiver::start(&[], Reply::Hang);
    let (hook, _secret) = api.create_webhook(&receiver.url, &["link.created"]).await;
    api.create_link("https://example.com/silent").await;

    let first = receiver.wait_for(1, ARRIVAL, |_| true).await;
    let sent_at = first[0].at;
    let id = first[0].id().to_owned();
    let delivery = api
        .delivery_when(&hook, &id, Duration::from_secs(14), |d| d["attempts"] == 1)
        .await;
    let waited = sent_at.elapsed();
    assert!(
        waited >= Duration::from_millis(9500),
        "the attempt was given up after {waited:?}, before the 10 s timeout"
    );
    assert_eq!(delivery["state"], "pending", "{delivery}");
    assert!(delivery["lastStatusCode"].is_null(), "{delivery}");
    let error = delivery["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("timed out"), "{delivery}");
    assert!(
        delivery["nextAttemptAt"].is_string(),
        "retried by the schedule: {delivery}"
    );
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn redirects_from_the_receiver_are_not_followed() {
    let db = TestDatabase::sqlite();
    let (_server, api) = server(&db, "1h").await;
    let receiver = Receiver::start(&[], Reply::Redirect);
    let (hook, _secret) = api.create_webhook(&receiver.url, &["link.created"]).await;
    api.create_link("https://example.com/moved").await;

    let first = receiver.wait_for(1, ARRIVAL, |_| true).await;
    let delivery = api
        .delivery_when(&hook, first[0].id(), ARRIVAL, |d| d["attempts"] == 1)
        .await;
    assert_eq!(
        delivery["state"], "pending",
        "a 302 is a failed try: {delivery}"
    );
    assert_eq!(delivery["lastStatusCode"], 302, "{delivery}");
    let paths: Vec<String> = receiver.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/hook"], "the redirect was not followed");
}

#[tokio::test]
async fn private_targets_are_refused_unless_the_flag_allows_them() {
    let db = TestDatabase::sqlite();
    let server = Server::start(&db.url, &[]).await;
    let key = server.first_run_key().await;
    let api = Api::new(&server, &key);
    for target in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://10.1.2.3/hook",
    ] {
        let (status, body) = Api::send(
            api.request(Method::POST, "/webhooks")
                .json(&json!({ "targetUrl": target, "events": ["link.created"] })),
        )
        .await;
        assert_eq!(status, 400, "{target}: {body}");
        assert_eq!(body["error"]["code"], "VALIDATION_FAILED", "{body}");
        assert_eq!(body["error"]["details"][0]["field"], "targetUrl", "{body}");
    }
}

#[tokio::test]
async fn a_delivery_pending_when_the_server_is_killed_arrives_after_a_restart() {
    let db = TestDatabase::sqlite();
    let (mut first, api) = server(&db, "2s").await;
    // Down at first (500), healthy from then on.
    let receiver = Receiver::start(&[Reply::Status(500)], Reply::Status(204));
    let (hook, secret) = api.create_webhook(&receiver.url, &["link.created"]).await;
    let link = api.create_link("https://example.com/crash").await;

    let failed = receiver.wait_for(1, ARRIVAL, |_| true).await;
    let id = failed[0].id().to_owned();
    // Recorded as failed once and waiting for its retry, not leased to the process.
    api.delivery_when(&hook, &id, ARRIVAL, |d| {
        d["attempts"] == 1 && d["state"] == "pending"
    })
    .await;
    first.kill9().await;
    assert_eq!(
        receiver.received().len(),
        1,
        "not delivered before the crash"
    );

    let second = Server::start(&db.url, &webhook_args("2s")).await;
    let api = Api::new(&second, &api.key);
    let got = receiver.wait_for(2, ARRIVAL, |_| true).await;
    assert_eq!(got[1].id(), id, "the same event, retried after the restart");
    assert_standard_webhook(&got[1], &secret);
    assert_eq!(got[1].json()["data"]["shortCode"], link["shortCode"]);
    let delivery = api
        .delivery_when(&hook, &id, ARRIVAL, |d| d["state"] == "delivered")
        .await;
    assert_eq!(delivery["attempts"], 2, "{delivery}");
}

/// A delivery whose attempt was running when the server was killed is leased to the dead
/// process; on SQLite, where one server uses the file, the next start ends that lease, so the
/// delivery goes out at once rather than when the lease (a minute) runs out.
#[tokio::test]
async fn a_delivery_in_flight_when_the_server_is_killed_goes_out_at_once_after_a_restart() {
    let db = TestDatabase::sqlite();
    let (mut first, api) = server(&db, "1h").await;
    // The first try never answers (the server dies during it); the next succeeds.
    let receiver = Receiver::start(&[Reply::Hang], Reply::Status(204));
    let (hook, _secret) = api.create_webhook(&receiver.url, &["link.created"]).await;
    api.create_link("https://example.com/in-flight").await;
    let id = receiver.wait_for(1, ARRIVAL, |_| true).await[0]
        .id()
        .to_owned();
    first.kill9().await;

    let second = Server::start(&db.url, &webhook_args("1h")).await;
    let api = Api::new(&second, &api.key);
    let got = receiver.wait_for(2, ARRIVAL, |_| true).await;
    assert_eq!(
        got[1].id(),
        id,
        "the same event, sent again after the restart"
    );
    let delivery = api
        .delivery_when(&hook, &id, ARRIVAL, |d| d["state"] == "delivered")
        .await;
    assert_eq!(
        delivery["attempts"], 1,
        "the killed try was never recorded: {delivery}"
    );
}

/// Two processes share one PostgreSQL database, and so one outbox: each event is sent once.
#[tokio::test]
async fn two_servers_on_postgresql_deliver_each_event_exactly_once() {
    const LINKS: usize = 50;
    let Some(db) = TestDatabase::postgres(concat!(
        module_path!(),
        "::two_servers_on_postgresql_deliver_each_event_exactly_once"
    ))
    .await
    else {
        return;
    };
    let (a, api_a) = server(&db, "1s,1s").await;
    // Started after the first, which created the workspace: no banner here, the same key.
    let b = Server::start(&db.url, &webhook_args("1s,1s")).await;
    let api_b = Api::new(&b, &api_a.key);
    let receiver = Receiver::healthy();
    let (hook, secret) = api_a.create_webhook(&receiver.url, &["link.created"]).await;

    // Half in one bulk request on A, half one by one on B, at the same time, so both
    // processes' workers find due deliveries together.
    let half = LINKS / 2;
    let bulk: Vec<String> = (0..half)
        .map(|i| format!("https://example.com/pg/a/{i}"))
        .collect();
    let (from_a, from_b) = tokio::join!(api_a.create_links_bulk(&bulk), async {
        let mut links = Vec::new();
        for i in 0..LINKS - half {
            links.push(
                api_b
                    .create_link(&format!("https://example.com/pg/b/{i}"))
                    .await,
            );
        }
        links
    });
    let codes: HashSet<String> = from_a
        .iter()
        .chain(&from_b)
        .map(|l| l["shortCode"].as_str().expect("shortCode").to_owned())
        .collect();
    assert_eq!(codes.len(), LINKS);

    receiver.wait_for(LINKS, ARRIVAL, |_| true).await;
    let deliveries = crate::helpers::eventually(
        "every delivery recorded as delivered",
        ARRIVAL,
        async || {
            let list = api_b.deliveries(&hook).await;
            (list.len() == LINKS && list.iter().all(|d| d["state"] == "delivered")).then_some(list)
        },
    )
    .await;
    // Past two poll intervals of both workers: a duplicate would have been sent by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let got = receiver.received();
    let ids: HashSet<&str> = got.iter().map(Received::id).collect();
    assert_eq!(ids.len(), LINKS, "{LINKS} distinct webhook-ids");
    assert_eq!(got.len(), LINKS, "no event sent twice");
    let delivered: HashSet<String> = got
        .iter()
        .map(|r| {
            assert_standard_webhook(r, &secret);
            r.json()["data"]["shortCode"]
                .as_str()
                .expect("shortCode")
                .to_owned()
        })
        .collect();
    assert_eq!(delivered, codes, "one event per link created");
    for d in &deliveries {
        assert_eq!(d["attempts"], 1, "{d}");
    }
    drop((a, b));
}

/// Deleting an endpoint while its deliveries are being attempted and their failures counted
/// (PostgreSQL): the deletion answers 200, the endpoint is gone, and nothing deadlocked. (The
/// deletion and an attempt's record take their locks in one order, endpoint then delivery; this
/// load did not make the old order deadlock here, so it guards the behaviour, not the cause.)
#[tokio::test]
async fn deleting_an_endpoint_while_its_deliveries_run_never_deadlocks() {
    let Some(db) = TestDatabase::postgres(concat!(
        module_path!(),
        "::deleting_an_endpoint_while_its_deliveries_run_never_deadlocks"
    ))
    .await
    else {
        return;
    };
    // Two attempts each, both refused: the second ends the delivery failed and counts a failure
    // on the endpoint's row, which is what the deletion also locks.
    let (server, api) = server(&db, "1ms").await;
    let failing = Receiver::start(&[], Reply::Status(500));
    for round in 0..4 {
        let (hook, _) = api.create_webhook(&failing.url, &["link.created"]).await;
        let batch = |part: usize| -> Vec<String> {
            (0..100)
                .map(|i| format!("https://example.com/dl/{round}/{part}/{i}"))
                .collect()
        };
        let (first, second, third) = (batch(0), batch(1), batch(2));
        tokio::join!(
            api.create_links_bulk(&first),
            api.create_links_bulk(&second),
            api.create_links_bulk(&third),
        );
        failing.wait_for(20, ARRIVAL, |_| true).await;
        let (status, body) =
            Api::send(api.request(reqwest::Method::DELETE, &format!("/webhooks/{hook}"))).await;
        assert_eq!(status, 200, "round {round}: {body}");
        let (status, _) =
            Api::send(api.request(reqwest::Method::GET, &format!("/webhooks/{hook}"))).await;
        assert_eq!(status, 404, "round {round}: the endpoint is gone");
    }
    assert!(!server.stderr().contains("deadlock"), "{}", server.stderr());
}
