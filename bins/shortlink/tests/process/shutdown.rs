//! A graceful stop (SIGTERM, SIGINT) finishes the requests in flight and writes every counted click
//! before the process exits.

use std::time::Duration;

use shortlink_storage::testing::TestDatabase;
use tokio::task::JoinSet;

use crate::helpers::{Api, Server, eventually, stored_clicks};

const CLICKS: usize = 300;
const CONCURRENCY: usize = 6;
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

/// Makes `CLICKS` counted redirects, sends `signal` right after the last answer, and checks the
/// process exits 0 with every click in the database.
async fn no_click_is_lost_on(signal: &str) {
    let db = TestDatabase::sqlite();
    let mut server = Server::start(&db.url, &[]).await;
    let key = server.first_run_key().await;
    let api = Api::new(&server, &key);
    let link = api.create_link("https://example.com/landing?a=1").await;
    let code = link["shortCode"].as_str().expect("shortCode").to_owned();
    let id = link["id"].as_str().expect("id").to_owned();

    let mut visitors = JoinSet::new();
    for v in 0..CONCURRENCY {
        let (http, base, code) = (api.http.clone(), api.base.clone(), code.clone());
        visitors.spawn(async move {
            for i in (v..CLICKS).step_by(CONCURRENCY) {
                let mut req = http.get(format!("{base}/{code}?visit={i}"));
                // Half with a browser's User-Agent, half with none: both are people.
                if i % 2 == 0 {
                    req = req.header("user-agent", BROWSER);
                }
                let res = req.send().await.expect("the redirect answers");
                assert_eq!(res.status(), 302);
            }
        });
    }
    while let Some(done) = visitors.join_next().await {
        done.expect("a visitor task");
    }
    server.signal(signal);
    let (status, stderr) = server.wait_exit(Duration::from_secs(20)).await;
    assert_eq!(
        status.code(),
        Some(0),
        "a graceful stop exits 0; stderr:\n{stderr}"
    );

    let stored = stored_clicks(&db.store().await, &id).await;
    assert_eq!(
        stored, CLICKS as i64,
        "every click counted before SIG{signal} is written"
    );
}

#[tokio::test]
async fn sigterm_writes_every_pending_click_before_exiting() {
    no_click_is_lost_on("TERM").await;
}

#[tokio::test]
async fn sigint_writes_every_pending_click_before_exiting() {
    no_click_is_lost_on("INT").await;
}

/// A SIGHUP reloads the GeoIP database; without one, it reloads nothing and ends nothing (its
/// default action would end the process at once, losing the clicks still in memory).
#[tokio::test]
async fn sighup_without_a_geoip_database_ends_nothing() {
    let db = TestDatabase::sqlite();
    let mut server = Server::start(&db.url, &[]).await;
    let key = server.first_run_key().await;
    let api = Api::new(&server, &key);
    let link = api.create_link("https://example.com/landing").await;
    let code = link["shortCode"].as_str().expect("shortCode");
    let id = link["id"].as_str().expect("id").to_owned();
    let visit = || {
        let req = api.http.get(format!("{}/{code}", api.base));
        req.header("user-agent", BROWSER).send()
    };
    assert_eq!(visit().await.expect("a redirect").status(), 302);
    server.signal("HUP");
    eventually(
        "the SIGHUP's log line",
        Duration::from_secs(10),
        async || server.stderr().contains("nothing to reload").then_some(()),
    )
    .await;
    assert_eq!(visit().await.expect("still serving").status(), 302);
    server.signal("TERM");
    let (status, stderr) = server.wait_exit(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(stored_clicks(&db.store().await, &id).await, 2);
}

/// A connection to `server` that it has answered once, so that it holds it (one still in the
/// listen queue at a stop is refused, as by any server).
async fn held_connection(server: &Server) -> (tokio::net::TcpStream, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let address = server.url("").trim_start_matches("http://").to_owned();
    let mut conn = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    conn.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut answer = Vec::new();
    while !String::from_utf8_lossy(&answer).contains("\"ok\"") {
        let mut chunk = [0; 1024];
        let n = conn.read(&mut chunk).await.expect("read");
        assert!(n > 0, "answered: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&chunk[..n]);
    }
    (conn, address)
}

/// A creation whose body is still arriving when `signal` comes finishes: the stop waits for it,
/// and the link exists afterwards.
async fn a_request_in_flight_finishes_on(signal: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let db = TestDatabase::sqlite();
    let mut server = Server::start(&db.url, &[]).await;
    let key = server.first_run_key().await;
    let (mut conn, address) = held_connection(&server).await;
    let body = r#"{"destination":"https://example.com/in-flight","customSlug":"in-flight"}"#;
    let (first, rest) = body.split_at(20);
    let head = format!(
        "POST /api/v1/links HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{first}",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.expect("write");
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.signal(signal);
    tokio::time::sleep(Duration::from_millis(300)).await;
    conn.write_all(rest.as_bytes())
        .await
        .expect("write the rest");
    // The answer closes the connection: the server is stopping.
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await.expect("read");
    let (status, stderr) = server.wait_exit(Duration::from_secs(20)).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{answer}\nstderr:\n{stderr}"
    );
    assert!(answer.contains("connection: close"), "{answer}");
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    let (_, json) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let created: serde_json::Value = serde_json::from_str(json).expect("a JSON body");
    let id = created["data"]["id"].as_str().expect("the link's id");
    assert_eq!(
        stored_clicks(&db.store().await, id).await,
        0,
        "and it is stored"
    );
}

#[tokio::test]
async fn sigterm_lets_a_request_in_flight_finish() {
    a_request_in_flight_finishes_on("TERM").await;
}

#[tokio::test]
async fn sigint_lets_a_request_in_flight_finish() {
    a_request_in_flight_finishes_on("INT").await;
}

/// A stopping server closes its idle keep-alive connections at once, so that a load balancer's
/// pooled connection takes its next request to another instance rather than here (a request in
/// flight is answered with `Connection: close`, above).
#[tokio::test]
async fn a_stopping_server_closes_its_idle_keep_alive_connections() {
    use tokio::io::AsyncReadExt;

    let db = TestDatabase::sqlite();
    let mut server = Server::start(&db.url, &[]).await;
    let (mut conn, _) = held_connection(&server).await;
    server.signal("TERM");
    let mut rest = Vec::new();
    // Sooner than its keep-alive timeout (5 s) would close it.
    let closed = tokio::time::timeout(Duration::from_secs(3), conn.read_to_end(&mut rest)).await;
    assert!(matches!(closed, Ok(Ok(0))), "closed: {closed:?}");

    let (status, stderr) = server.wait_exit(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
}
