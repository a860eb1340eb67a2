//! Logging as users run it (no `RUST_LOG`): an access line per API request carrying the request
//! id, redirects at `debug` unless `--log-redirects`, JSON lines from the first to the last, and a
//! stderr nobody reads that never holds up a request.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use shortlink_storage::testing::TestDatabase;

use crate::helpers::{BIN, Server, cli, client, eventually, is_api_key, run_with_env};

/// A server started as a user starts it: no `RUST_LOG`, stderr a pipe the caller decides about.
struct LoggingServer {
    child: Child,
    base: String,
    key: String,
    link_code: String,
}

impl Drop for LoggingServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A workspace and key made beforehand (so no banner), then `serve` with `extra` and `env`;
/// returns the server, ready and holding one link, and its stderr, unread.
async fn start(
    db: &TestDatabase,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (LoggingServer, ChildStderr) {
    cli(&db.url, &["workspace", "create", "logs"]).success();
    let key = cli(&db.url, &["key", "create", "--workspace", "logs"])
        .success()
        .trim()
        .to_owned();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
    let port = listener.local_addr().expect("probe address").port();
    drop(listener);
    let mut child = Command::new(BIN)
        .env_remove("RUST_LOG")
        .env_remove("SHORTLINK_LOG_FORMAT")
        .env_remove("SHORTLINK_LOG_REDIRECTS")
        .envs(env.iter().copied())
        .args(["serve", "--database-url", &db.url])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the shortlink binary starts");
    let stderr = child.stderr.take().expect("piped");
    let base = format!("http://127.0.0.1:{port}");
    let http = client();
    eventually(
        "the server to answer /healthz",
        Duration::from_secs(30),
        async || {
            http.get(format!("{base}/healthz"))
                .send()
                .await
                .ok()
                .filter(|r| r.status().is_success())
        },
    )
    .await;
    let res = http
        .post(format!("{base}/api/v1/links"))
        .bearer_auth(&key)
        .json(&json!({ "destination": "https://example.com/logged" }))
        .send()
        .await
        .expect("create a link");
    assert_eq!(res.status(), 200);
    let link: Value = res.json().await.expect("a JSON body");
    let link_code = link["data"]["shortCode"]
        .as_str()
        .expect("a shortCode")
        .to_owned();
    (
        LoggingServer {
            child,
            base,
            key,
            link_code,
        },
        stderr,
    )
}

/// Collects stderr's lines as they come.
fn collect(stderr: ChildStderr) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(line);
        }
    });
    lines
}

/// Waits for the line mentioning `needle`, and returns it with every line before it.
async fn line_with(lines: &Mutex<Vec<String>>, needle: &str) -> (String, Vec<String>) {
    eventually(
        &format!("a log line with {needle}"),
        Duration::from_secs(10),
        async || {
            let lines = lines.lock().unwrap_or_else(PoisonError::into_inner);
            let at = lines.iter().position(|l| l.contains(needle))?;
            Some((lines[at].clone(), lines[..at].to_vec()))
        },
    )
    .await
}

impl LoggingServer {
    async fn get(&self, path: &str, request_id: &str) -> u16 {
        client()
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .header("x-request-id", request_id)
            .send()
            .await
            .expect("the server answers")
            .status()
            .as_u16()
    }
}

#[tokio::test]
async fn an_api_request_gets_an_access_line_with_its_request_id_and_a_redirect_none_by_default() {
    let db = TestDatabase::sqlite();
    let (server, stderr) = start(&db, &[], &[]).await;
    let lines = collect(stderr);

    assert_eq!(
        server
            .get(&format!("/{}", server.link_code), "redirect-1")
            .await,
        302
    );
    assert_eq!(
        server.get("/api/v1/links?limit=5", "api-listing-1").await,
        200
    );

    let (line, before) = line_with(&lines, "api-listing-1").await;
    for part in [
        "request{id=\"api-listing-1\"}",
        "request handled",
        "method=GET",
        "path=\"/api/v1/links\"",
        "route=\"/api/v1/links\"",
        "status=200",
        "micros=",
    ] {
        assert!(
            line.contains(part),
            "{part:?} is in the access line: {line}"
        );
    }
    assert!(
        line.contains(" INFO "),
        "API requests are logged at info: {line}"
    );
    assert!(
        !before.iter().any(|l| l.contains("redirect-1")),
        "redirects are logged at debug by default: {before:?}"
    );
    let all = lines
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .join("\n");
    assert!(
        !all.contains(&server.key),
        "the key never reaches the log:\n{all}"
    );
}

#[tokio::test]
async fn json_format_writes_one_parseable_object_per_line_and_log_redirects_logs_redirects() {
    let db = TestDatabase::sqlite();
    let (server, stderr) = start(
        &db,
        &[],
        &[
            ("SHORTLINK_LOG_FORMAT", "json"),
            ("SHORTLINK_LOG_REDIRECTS", "true"),
        ],
    )
    .await;
    let lines = collect(stderr);

    assert_eq!(
        server
            .get(&format!("/{}", server.link_code), "redirect-json-1")
            .await,
        302
    );
    let (line, before) = line_with(&lines, "redirect-json-1").await;
    for l in before.iter().chain([&line]) {
        serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
    }
    let access: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(access["level"], "INFO", "{access}");
    assert_eq!(access["fields"]["message"], "request handled", "{access}");
    assert_eq!(access["fields"]["status"], 302, "{access}");
    assert_eq!(access["span"]["id"], "redirect-json-1", "{access}");
    assert_eq!(access["fields"]["method"], "GET", "{access}");
    assert_eq!(
        access["fields"]["path"],
        format!("/{}", server.link_code),
        "{access}"
    );
}

#[tokio::test]
async fn a_stderr_nobody_reads_never_holds_up_redirects() {
    let db = TestDatabase::sqlite();
    // Every redirect logs a line, into a pipe that fills after a few hundred and is never read.
    let (server, _stalled) = start(&db, &["--log-redirects"], &[]).await;
    let http = client();
    let url = format!("{}/{}", server.base, server.link_code);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (http, url) = (http.clone(), url.clone());
            tokio::spawn(async move {
                for _ in 0..500 {
                    let res = http
                        .get(&url)
                        .send()
                        .await
                        .expect("a redirect while stderr is stalled");
                    assert_eq!(res.status(), 302);
                }
            })
        })
        .collect();
    // Generous for a debug build on a busy machine; a blocked writer never finishes at all.
    tokio::time::timeout(
        Duration::from_secs(120),
        futures_util::future::try_join_all(tasks),
    )
    .await
    .expect("4000 redirects with a stalled stderr finish")
    .expect("every task succeeded");
}

/// Every stderr line as JSON, or a panic naming the one that is not.
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// With JSON logs, what a log pipeline reads stays JSON from the first line to the last: the
/// first-run key is one object, and so is the error a server exits on.
#[tokio::test]
async fn json_format_keeps_the_first_run_key_and_a_fatal_error_in_json() {
    let db = TestDatabase::sqlite();
    let json_logs = ["--log-format".to_owned(), "json".to_owned()];
    let mut server = Server::start(&db.url, &json_logs).await;
    let key = server.first_run_key().await;
    assert!(is_api_key(&key), "{key}");
    server.signal("TERM");
    let (status, stderr) = server.wait_exit(Duration::from_secs(15)).await;
    assert!(status.success(), "{status}: {stderr}");
    let lines = json_lines(&stderr);
    let banner = lines
        .iter()
        .find(|l| l["fields"]["api_key"] == key.as_str())
        .unwrap_or_else(|| panic!("no object holds the key:\n{stderr}"));
    assert_eq!(banner["level"], "WARN", "{banner}");

    let failed = run_with_env(
        &[
            "serve",
            "--database-url",
            &db.url,
            "--listen",
            "not-an-address",
        ],
        &[("SHORTLINK_LOG_FORMAT", "json")],
    );
    assert_eq!(failed.status.code(), Some(1), "{}", failed.stderr);
    let lines = json_lines(&failed.stderr);
    let last = lines.last().expect("a line");
    assert_eq!(last["level"], "ERROR", "{last}");
    let error = last["fields"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("not-an-address"), "{last}");
}

/// A `RUST_LOG` that filters warnings out does not hide the first-run key: it comes as the
/// banner, JSON logs or not.
#[tokio::test]
async fn a_strict_rust_log_still_shows_the_first_run_key() {
    let db = TestDatabase::sqlite();
    let json_logs = ["--log-format".to_owned(), "json".to_owned()];
    let env = [("RUST_LOG", "error")];
    let server = Server::start_with_env(Some("serve"), &db.url, &json_logs, &env).await;
    let key = server.first_run_key().await;
    assert!(is_api_key(&key), "{key}");
}
