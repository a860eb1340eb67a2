//! The harness: the real server on port 0 with a database of its own, a workspace with a key,
//! and an HTTP client that does not follow redirects; plus assertions on the envelopes.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use actix_web::dev::ServerHandle;
use reqwest::header::HeaderMap;
use reqwest::{Client, Method, RequestBuilder, Response};
use serde_json::Value;
use shortlink_domain::{ApiKeyId, DEFAULT_RATE_LIMIT, LinkRef, Timestamp, Workspace};
use shortlink_server::{Application, Config, admin};
use shortlink_service::Clock;
use shortlink_storage::testing::TestDatabase;
use shortlink_storage::{PoolOptions, Store};
use tokio::task::JoinHandle;

/// How long a test waits for something that is meant to happen "soon" (clicks flushed, a key
/// cache entry expired, a delivery listed).
pub const DEADLINE: Duration = Duration::from_secs(5);

/// How long the harness's servers wait for a request body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(2);

/// The test servers' fold interval on SQLite: short, so a test sees clicks reach the file.
const CLICK_FOLD_INTERVAL: Duration = Duration::from_secs(1);

/// The GeoIP test database with known answers (its README lists them).
pub fn geoip_test_database() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/geoip/GeoLite2-City-Test.mmdb")
}

/// How to set a test server up.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// `--webhook-allow-private-targets`.
    pub allow_private_targets: bool,
    /// Whether the harness checks its key with one request before handing the server over
    /// (which also opens the server's first database connections and caches the key).
    pub check_key: bool,
    /// Whether the server believes `X-Forwarded-For` from 127.0.0.1 (the tests' own address)
    /// and locates clients with the GeoIP test database (`../shared/geoip`).
    pub behind_proxy_with_geoip: bool,
    /// `--base-url` (default: the server's own address), for several servers serving one domain.
    pub base_url: Option<&'static str>,
    /// `--redis-url`.
    pub redis_url: Option<&'static str>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            allow_private_targets: true,
            check_key: true,
            behind_proxy_with_geoip: false,
            base_url: None,
            redis_url: None,
        }
    }
}

/// A workspace and one key of it.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// The workspace.
    pub workspace: Workspace,
    /// The key's secret, as sent in `Authorization: Bearer`.
    pub key: String,
    /// The key's id (for revoking it).
    pub key_id: ApiKeyId,
}

/// A running server.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`, also the base of short URLs.
    pub address: String,
    /// `127.0.0.1:<port>`: the short domain.
    pub domain: String,
    /// Does not follow redirects.
    pub client: Client,
    /// The harness's workspace and key.
    pub tenant: Tenant,
    /// The key of [`TestApp::tenant`].
    pub key: String,
    /// A storage handle on the server's database, for what the API does not offer.
    pub store: Store,
    /// How far the server's clock is ahead of the system's, in milliseconds
    /// ([`TestApp::advance_clock`]).
    clock_ahead: Arc<AtomicI64>,
    handle: ServerHandle,
    server: Option<JoinHandle<Result<(), String>>>,
    /// Dropped (and deleted) after everything above.
    pub db: TestDatabase,
}

impl TestApp {
    /// A server on a fresh SQLite database.
    pub async fn spawn() -> Self {
        Self::spawn_with(TestDatabase::sqlite(), Setup::default()).await
    }

    /// A server on a fresh PostgreSQL database, or `None` (reported by name) when
    /// `TEST_POSTGRES_URL` is not set.
    pub async fn spawn_on_postgres(test: &str) -> Option<Self> {
        let db = TestDatabase::postgres(test).await?;
        Some(Self::spawn_with(db, Setup::default()).await)
    }

    /// A server on `db`, set up as `setup` says. The listener is bound before this returns, so
    /// requests can be sent at once.
    pub async fn spawn_with(db: TestDatabase, setup: Setup) -> Self {
        let url = db.url.clone();
        Self::spawn_reaching(db, &url, setup).await
    }

    /// A server that reaches `db` at `url` (through a proxy, say), set up as `setup` says; the
    /// harness itself reaches `db` directly.
    pub async fn spawn_reaching(db: TestDatabase, url: &str, setup: Setup) -> Self {
        let clock_ahead = Arc::new(AtomicI64::new(0));
        let ahead = clock_ahead.clone();
        let config = Config {
            clock: Clock::from_fn(move || {
                Timestamp::from_unix_millis(
                    Timestamp::now().unix_millis() + ahead.load(Ordering::Relaxed),
                )
            }),
            listen: "127.0.0.1:0".into(),
            first_run_banner: false,
            // The tests' process is the harness's: its signals are not the server's.
            stop_on_signals: false,
            webhook_allow_private_targets: setup.allow_private_targets,
            workers: Some(1),
            max_connections: 4,
            click_fold_interval: CLICK_FOLD_INTERVAL,
            // Far more than a body needs over loopback, and short enough to test the 408.
            request_body_timeout: BODY_TIMEOUT,
            trusted_proxies: match setup.behind_proxy_with_geoip {
                true => "127.0.0.1".parse().expect("an address"),
                false => Default::default(),
            },
            geoip_db: setup.behind_proxy_with_geoip.then(geoip_test_database),
            redis_url: setup.redis_url.map(str::to_owned),
            base_url: setup
                .base_url
                .map(|url| shortlink_domain::BaseUrl::parse(url).expect("a base URL")),
            ..Config::new(url)
        };
        let app = Application::build(config)
            .await
            .expect("the application builds on a fresh database");
        let address = format!("http://127.0.0.1:{}", app.port());
        let domain = app.base_url().domain().to_owned();
        let handle = app.handle();
        let server =
            tokio::spawn(
                async move { app.run_until_stopped().await.map_err(|e| format!("{e:#}")) },
            );

        let store = Store::connect(&db.url, PoolOptions { max_connections: 2 })
            .expect("the test database URL is valid");
        // A second server on the same database gets a workspace of its own.
        let taken = store.list_workspaces().await.expect("the database answers");
        let name = match taken.iter().any(|w| w.name == "acme") {
            false => "acme".to_owned(),
            true => format!("acme-{}", taken.len() + 1),
        };
        let tenant = new_tenant(&store, &name, DEFAULT_RATE_LIMIT).await;
        let client = Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client builds");
        let app = Self {
            address,
            domain,
            client,
            key: tenant.key.clone(),
            tenant,
            store,
            clock_ahead,
            handle,
            server: Some(server),
            db,
        };
        // A failure to authenticate shows here, not as a puzzling 401 deep in some test.
        if setup.check_key {
            assert_ok(app.get("/links").await).await;
        }
        app
    }

    /// Moves the server's clock (what links' expiry goes by) on by `by`.
    pub fn advance_clock(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).expect("a short time");
        self.clock_ahead.fetch_add(ms, Ordering::Relaxed);
    }

    /// Another workspace on the same server, with a key.
    pub async fn new_tenant(&self, name: &str, rate_limit: u32) -> Tenant {
        new_tenant(&self.store, name, rate_limit).await
    }

    /// Stops the server gracefully, as SIGTERM does, and waits until it has stopped.
    pub async fn stop(&mut self) -> Result<(), String> {
        self.handle.stop(true).await;
        let server = self.server.take().expect("the server runs");
        server.await.expect("the server task does not panic")
    }

    /// `address` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// A request to `/api/v1` + `path` with the harness's key.
    pub fn api(&self, method: Method, path: &str) -> RequestBuilder {
        self.api_as(&self.key, method, path)
    }

    /// A request to `/api/v1` + `path` with `key`.
    pub fn api_as(&self, key: &str, method: Method, path: &str) -> RequestBuilder {
        self.client
            .request(method, self.url(&format!("/api/v1{path}")))
            .bearer_auth(key)
    }

    /// Authenticated GET under `/api/v1`.
    pub async fn get(&self, path: &str) -> Response {
        send(self.api(Method::GET, path)).await
    }

    /// Authenticated POST of a JSON body under `/api/v1`.
    pub async fn post_json(&self, path: &str, body: &Value) -> Response {
        send(self.api(Method::POST, path).json(body)).await
    }

    /// Authenticated PATCH of a JSON body under `/api/v1`.
    pub async fn patch_json(&self, path: &str, body: &Value) -> Response {
        send(self.api(Method::PATCH, path).json(body)).await
    }

    /// Authenticated DELETE under `/api/v1`.
    pub async fn delete(&self, path: &str) -> Response {
        send(self.api(Method::DELETE, path)).await
    }

    /// Creates a link and returns it (the envelope's `data`).
    pub async fn create_link(&self, body: &Value) -> Value {
        self.create_link_as(&self.key, body).await
    }

    /// Creates a link with `key` and returns it.
    pub async fn create_link_as(&self, key: &str, body: &Value) -> Value {
        assert_ok(send(self.api_as(key, Method::POST, "/links").json(body)).await).await
    }

    /// Creates a link to `destination` with a generated slug and returns its short code.
    pub async fn create_code(&self, destination: &str) -> String {
        let link = self
            .create_link(&serde_json::json!({ "destination": destination }))
            .await;
        text(&link["shortCode"]).to_owned()
    }

    /// GET `/{code_and_query}` without authentication: the redirect.
    pub async fn visit(&self, code_and_query: &str) -> Response {
        send(self.client.get(self.url(&format!("/{code_and_query}")))).await
    }

    /// The link's click count as the API shows it.
    pub async fn clicks(&self, code: &str) -> i64 {
        let link = assert_ok(self.get(&format!("/links/{code}")).await).await;
        link["clicks"].as_i64().expect("clicks is an integer")
    }

    /// Polls the API until the link has at least `at_least` clicks (or the deadline passes)
    /// and returns the count seen last.
    pub async fn wait_for_clicks(&self, code: &str, at_least: i64) -> i64 {
        wait_for_count(DEADLINE, at_least, || self.clicks(code)).await
    }

    /// Polls the database, read without the server, until the link has at least `at_least`
    /// clicks there. On SQLite the server journals clicks and folds them into the counters
    /// within `CLICK_FOLD_INTERVAL`.
    pub async fn wait_for_stored_clicks(&self, code: &str, at_least: i64) -> i64 {
        wait_for_count(DEADLINE + CLICK_FOLD_INTERVAL, at_least, || {
            self.stored_clicks(code)
        })
        .await
    }

    /// The link's click count as stored in the database, read without the server.
    pub async fn stored_clicks(&self, code: &str) -> i64 {
        self.store
            .get_link(
                self.tenant.workspace.id,
                &LinkRef::parse(code).expect("a link id or code"),
                &self.domain,
            )
            .await
            .expect("the database answers")
            .expect("the link exists")
            .clicks
    }
}

/// An answer read off a plain TCP connection.
#[derive(Debug)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// The header lines, lower-cased names, as `name: value`.
    pub headers: Vec<String>,
    /// The body.
    pub body: String,
}

impl TestApp {
    /// Sends a request by hand on a fresh connection: `head` is the request line and headers
    /// (without `Host` and `Connection`, which are added, nor the blank line), then `body`.
    /// For requests HTTP clients cannot be trusted with: a server may answer and close before
    /// the body is sent whole, and a client that fails writing reports that failure instead
    /// of the answer.
    pub async fn raw(&self, head: &str, body: &[u8]) -> RawResponse {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let mut stream = tokio::net::TcpStream::connect(&self.domain)
            .await
            .expect("the server accepts connections");
        let head = format!(
            "{head}\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.domain
        );
        stream
            .write_all(head.as_bytes())
            .await
            .expect("the request head is sent");
        // Once the server has answered, it may stop reading: what it answered is what counts.
        let _ = stream.write_all(body).await;
        let mut buf = Vec::new();
        let read = tokio::time::timeout(DEADLINE, stream.read_to_end(&mut buf))
            .await
            .expect("the server answers and closes in time");
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("no complete answer ({read:?}): {text:?}"));
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {head:?}"));
        let headers = lines
            .map(|line| match line.split_once(':') {
                Some((name, value)) => format!("{}: {}", name.to_ascii_lowercase(), value.trim()),
                None => line.to_owned(),
            })
            .collect();
        RawResponse {
            status,
            headers,
            body: body.to_owned(),
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // The stop command is sent when `stop` is called; awaiting its completion is not
        // needed here (and not possible in `drop`).
        let stopping = self.handle.stop(false);
        drop(stopping);
    }
}

async fn new_tenant(store: &Store, name: &str, rate_limit: u32) -> Tenant {
    let workspace = admin::create_workspace(store, name, rate_limit)
        .await
        .expect("the workspace is created");
    let (key, secret) = admin::create_key(store, &workspace, "tests")
        .await
        .expect("the key is created");
    Tenant {
        workspace,
        key: secret.expose().to_owned(),
        key_id: key.id,
    }
}

/// Sends a request; a transport error fails the test.
pub async fn send(request: RequestBuilder) -> Response {
    request.send().await.expect("the server answers")
}

/// Calls `check` until it returns `Some` or `deadline` passes.
pub async fn poll<T, F, Fut>(deadline: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = Instant::now() + deadline;
    loop {
        if let Some(found) = check().await {
            return Some(found);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `count` until it reaches `at_least` and returns it; panics when `deadline` passes.
async fn wait_for_count<F, Fut>(deadline: Duration, at_least: i64, mut count: F) -> i64
where
    F: FnMut() -> Fut,
    Fut: Future<Output = i64>,
{
    poll(deadline, || {
        let counted = count();
        async move { Some(counted.await).filter(|&n| n >= at_least) }
    })
    .await
    .unwrap_or_else(|| panic!("the count did not reach {at_least} within {deadline:?}"))
}

/// A JSON string's text; panics on anything else.
pub fn text(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value}"))
}

/// A header's value as text.
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .map(|v| v.to_str().expect("header is text"))
}

/// The members every Link has. The contract allows more to be added later, so tests require
/// these and tolerate others.
pub const LINK_FIELDS: [&str; 7] = [
    "id",
    "domain",
    "shortCode",
    "shortUrl",
    "destination",
    "clicks",
    "createdAt",
];

/// Asserts that `value` is an object with (at least) these members.
pub fn assert_has_fields(value: &Value, fields: &[&str]) {
    for field in fields {
        assert!(value.get(field).is_some(), "no {field} in {value}");
    }
}

/// The sorted keys of a JSON object.
pub fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("expected an object, got {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

fn assert_json_with_request_id(res: &Response) {
    let content_type = header(res.headers(), "content-type").unwrap_or_default();
    assert!(
        content_type.starts_with("application/json"),
        "{} {}: content type {content_type:?}",
        res.status(),
        res.url()
    );
    assert!(
        header(res.headers(), "x-request-id").is_some_and(|id| !id.is_empty()),
        "{}: no X-Request-Id",
        res.url()
    );
}

/// Asserts a 200 success envelope and returns its `data`.
pub async fn assert_ok(res: Response) -> Value {
    let status = res.status().as_u16();
    assert_json_with_request_id(&res);
    let body: Value = res.json().await.expect("the body is JSON");
    assert_eq!(status, 200, "unexpected answer: {body}");
    assert_eq!(
        keys(&body),
        ["data", "status", "statusCode", "success"],
        "{body}"
    );
    assert_eq!(body["status"], "success", "{body}");
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(body["statusCode"], 200, "{body}");
    body["data"].clone()
}

/// Asserts an error envelope with this status and code, and returns its `error` object. Only
/// validation errors may carry `details`.
pub async fn assert_error(res: Response, status: u16, code: &str) -> Value {
    let actual = res.status().as_u16();
    assert_json_with_request_id(&res);
    let body: Value = res.json().await.expect("the body is JSON");
    assert_eq!(actual, status, "unexpected answer: {body}");
    assert_eq!(
        keys(&body),
        ["error", "status", "statusCode", "success"],
        "{body}"
    );
    assert_eq!(body["status"], "error", "{body}");
    assert_eq!(body["success"], false, "{body}");
    assert_eq!(body["statusCode"], status, "{body}");
    let error = body["error"].clone();
    assert_eq!(error["code"], code, "{body}");
    assert!(!text(&error["message"]).is_empty(), "{body}");
    if code == "VALIDATION_FAILED" && error.get("details").is_some() {
        assert_eq!(keys(&error), ["code", "details", "message"], "{body}");
        for detail in error["details"].as_array().expect("details is an array") {
            assert_eq!(keys(detail), ["field", "message"], "{body}");
            assert!(!text(&detail["message"]).is_empty(), "{body}");
        }
    } else {
        assert_eq!(keys(&error), ["code", "message"], "{body}");
    }
    error
}

/// Asserts a 400 VALIDATION_FAILED whose details name exactly `fields`; returns the error.
pub async fn assert_invalid(res: Response, fields: &[&str]) -> Value {
    let error = assert_error(res, 400, "VALIDATION_FAILED").await;
    assert_eq!(detail_fields(&error), fields, "{error}");
    error
}

/// The `field` of each of an error's details (none when it has no details).
pub fn detail_fields(error: &Value) -> Vec<&str> {
    error
        .get("details")
        .and_then(Value::as_array)
        .map(|details| details.iter().map(|d| text(&d["field"])).collect())
        .unwrap_or_default()
}

/// Asserts `createdAt`-style timestamps: `YYYY-MM-DDTHH:MM:SS.mmmZ`, nothing else.
pub fn assert_timestamp(s: &str) {
    let shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    assert_eq!(s.len(), shape.len(), "timestamp {s:?}");
    for (c, want) in s.chars().zip(shape.chars()) {
        let fits = if want == 'd' {
            c.is_ascii_digit()
        } else {
            c == want
        };
        assert!(fits, "timestamp {s:?} is not of the form {shape}");
    }
}

/// Runs one async test body against a server on SQLite, and on PostgreSQL when
/// `TEST_POSTGRES_URL` is set: `on_both_backends!(name, …)` makes a module `name` with the tests
/// `sqlite` and `postgres`, each calling `async fn name(app: TestApp)`. Attributes before a
/// name (`#[ignore = "…"]`) go on both tests.
macro_rules! on_both_backends {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            $(#[$attr])*
            async fn sqlite() {
                super::$name($crate::helpers::TestApp::spawn().await).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn postgres() {
                let test = concat!(module_path!(), "::postgres");
                if let Some(app) = $crate::helpers::TestApp::spawn_on_postgres(test).await {
                    super::$name(app).await;
                }
            }
        }
    )*};
}
pub(crate) use on_both_backends;

/// A server that believes `X-Forwarded-For` from the tests' own address and locates clients
/// with the GeoIP test database ([`Setup::behind_proxy_with_geoip`]), on SQLite (`None`) or on
/// a PostgreSQL database for `postgres` (`None` without one).
pub async fn spawn_behind_a_proxy(postgres: Option<&str>) -> Option<TestApp> {
    let setup = Setup {
        behind_proxy_with_geoip: true,
        ..Setup::default()
    };
    let db = match postgres {
        None => TestDatabase::sqlite(),
        Some(test) => TestDatabase::postgres(test).await?,
    };
    Some(TestApp::spawn_with(db, setup).await)
}

/// Runs each `async fn NAME(app: TestApp)` of the calling module against a server of
/// [`spawn_behind_a_proxy`], on SQLite and on PostgreSQL, as tests `NAME::sqlite` and
/// `NAME::postgres`.
macro_rules! on_both_backends_behind_a_proxy {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use crate::helpers::spawn_behind_a_proxy;

            #[tokio::test]
            async fn sqlite() {
                let app = spawn_behind_a_proxy(None).await.expect("a SQLite server");
                super::$name(app).await;
            }

            #[tokio::test]
            async fn postgres() {
                let test = concat!(module_path!(), "::postgres");
                if let Some(app) = spawn_behind_a_proxy(Some(test)).await {
                    super::$name(app).await;
                }
            }
        }
    )*};
}
pub(crate) use on_both_backends_behind_a_proxy;
