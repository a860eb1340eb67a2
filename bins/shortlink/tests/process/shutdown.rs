//! A graceful stop (SIGTERM, SIGINT) writes every counted click before the process exits.

use std::time::Duration;

use shortlink_storage::testing::TestDatabase;
use tokio::task::JoinSet;

use crate::helpers::{Api, Server, stored_clicks};

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
