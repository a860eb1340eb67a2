//! Running the real `shortlink` binary, speaking HTTP to it, and a real webhook receiver.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::web::{self, Bytes, Data};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use serde_json::{Value, json};
use shortlink_domain::WebhookSecret;
use shortlink_storage::Store;
use shortlink_webhooks::{DEFAULT_TOLERANCE, SignatureHeaders, VerifyError};
use tokio::time::{Instant, sleep};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_shortlink");

/// How long a server may take to answer `/healthz` after being spawned. Generous: the tests run
/// in parallel on small machines, and a debug build migrates a fresh database first.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a one-shot command (`migrate`, `workspace …`, `key …`) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the helpers look again while waiting for something with a deadline.
const POLL: Duration = Duration::from_millis(25);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Polls `check` until it returns `Some`, or panics with `what` after `timeout`.
pub async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        sleep(POLL).await;
    }
}

/// The clicks `store` holds for the first-run workspace's link `id`: read from the database, as
/// a process other than the server sees them.
pub async fn stored_clicks(store: &Store, id: &str) -> i64 {
    let ws = store
        .find_workspace("default")
        .await
        .expect("read the workspace")
        .expect("the first-run workspace");
    let links = store
        .list_links(ws.id, 100, None, &Default::default())
        .await
        .expect("read the links");
    links
        .iter()
        .find(|l| l.id.to_string() == id)
        .expect("the link is stored")
        .clicks
}

// ----------------------------------------------------------------------------------------------
// One-shot commands

/// What a finished command printed.
#[derive(Debug)]
pub struct Output {
    /// How it ended.
    pub status: ExitStatus,
    /// Everything on stdout.
    pub stdout: String,
    /// Everything on stderr.
    pub stderr: String,
}

impl Output {
    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn success(&self) -> &str {
        assert!(
            self.status.success(),
            "expected success, got {}\nstdout: {}\nstderr: {}",
            self.status,
            self.stdout,
            self.stderr
        );
        &self.stdout
    }

    /// Asserts a failure told in one human line on stderr (nothing on stdout, no panic, no
    /// backtrace) and returns that line.
    #[track_caller]
    pub fn one_line_error(&self) -> &str {
        assert!(
            !self.status.success(),
            "expected a failure, got success\nstdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        assert_eq!(
            self.status.code(),
            Some(1),
            "expected exit code 1 (an error, not a crash or a usage error); stderr: {}",
            self.stderr
        );
        let message = self.stderr.trim_end();
        assert!(
            !message.is_empty() && !message.contains('\n'),
            "expected exactly one line on stderr, got:\n{}",
            self.stderr
        );
        assert!(
            message.starts_with("error: "),
            "expected `error: …`, got {message:?}"
        );
        for internal in ["panicked", "backtrace", "RUST_BACKTRACE", "src/", ".rs:"] {
            assert!(
                !message.contains(internal),
                "error line shows internals ({internal}): {message}"
            );
        }
        assert!(
            self.stdout.is_empty(),
            "a failed command printed on stdout: {}",
            self.stdout
        );
        message
    }
}

/// Runs `shortlink ARGS…` to completion with `RUST_LOG=warn` and no `DATABASE_URL` inherited.
pub fn run(args: &[&str]) -> Output {
    run_with_env(args, &[])
}

/// Runs `shortlink ARGS… --database-url DB` (the global flag after the subcommand).
pub fn cli(db: &str, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--database-url", db]);
    run(&all)
}

/// Runs `shortlink ARGS…` with extra environment variables.
pub fn run_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = command()
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the shortlink binary starts");
    let stdout = drain(child.stdout.take().expect("piped"));
    let stderr = drain(child.stderr.take().expect("piped"));
    let deadline = std::time::Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for shortlink") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`shortlink {}` still running after {COMMAND_TIMEOUT:?}",
                args.join(" ")
            );
        }
        std::thread::sleep(POLL);
    };
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

fn command() -> Command {
    let mut cmd = Command::new(BIN);
    // Only what a test sets: a developer's own settings must not leak into the runs.
    for var in [
        "DATABASE_URL",
        "SHORTLINK_LISTEN",
        "SHORTLINK_BASE_URL",
        "SHORTLINK_WEBHOOK_ALLOW_PRIVATE_TARGETS",
        "SHORTLINK_WEBHOOK_RETRY_SCHEDULE",
        "SHORTLINK_AUTH_FAILURES_PER_MINUTE",
        "RUST_BACKTRACE",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("RUST_LOG", "warn");
    cmd
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

// ----------------------------------------------------------------------------------------------
// A running server

/// A `shortlink` server process, killed (SIGKILL) when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    stdout: Collected,
    stderr: Collected,
}

/// What a child process writes on one pipe, collected by a thread as it comes.
struct Collected {
    text: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Collected {
    fn start(pipe: impl Read + Send + 'static) -> Self {
        let text = Arc::new(Mutex::new(String::new()));
        let sink = text.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut s = lock(&sink);
                s.push_str(&line);
                s.push('\n');
            }
        });
        Self {
            text,
            reader: Some(reader),
        }
    }

    fn so_far(&self) -> String {
        lock(&self.text).clone()
    }

    /// Everything, once the process has exited (the pipe is then at its end).
    fn all(&mut self) -> String {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.so_far()
    }
}

/// Arguments that let webhooks reach a receiver on 127.0.0.1 and retry after `schedule`.
pub fn webhook_args(schedule: &str) -> Vec<String> {
    vec![
        "--webhook-allow-private-targets".into(),
        "--webhook-retry-schedule".into(),
        schedule.into(),
    ]
}

impl Server {
    /// `shortlink serve --database-url DB --listen 127.0.0.1:PORT EXTRA…`, ready.
    pub async fn start(db: &str, extra: &[String]) -> Self {
        Self::start_command(Some("serve"), db, extra).await
    }

    /// Like [`Server::start`], with `subcommand` (`None`: the default command, no subcommand).
    pub async fn start_command(subcommand: Option<&str>, db: &str, extra: &[String]) -> Self {
        Self::start_with_env(subcommand, db, extra, &[]).await
    }

    /// Like [`Server::start_command`], with `env` set (over the `RUST_LOG=warn` it sets).
    pub async fn start_with_env(
        subcommand: Option<&str>,
        db: &str,
        extra: &[String],
        env: &[(&str, &str)],
    ) -> Self {
        for _ in 0..5 {
            if let Some(server) = Self::try_start(subcommand, db, extra, env).await {
                return server;
            }
        }
        panic!("could not find a free port for the server in five tries");
    }

    /// `None` when another process took the port between our probe and the server's bind.
    async fn try_start(
        subcommand: Option<&str>,
        db: &str,
        extra: &[String],
        env: &[(&str, &str)],
    ) -> Option<Self> {
        let port = free_port();
        let mut cmd = command();
        cmd.envs(env.iter().copied())
            .args(subcommand)
            .args([
                "--database-url",
                db,
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("the shortlink binary starts");
        let stdout = Collected::start(child.stdout.take().expect("piped"));
        let stderr = Collected::start(child.stderr.take().expect("piped"));
        let mut server = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            stdout,
            stderr,
        };
        let client = client();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(r) = client.get(server.url("/healthz")).send().await {
                // Alive too: a server that lost the (rare) port race exits, and must not take
                // the winner's answer for its own. Not airtight while it is still migrating.
                if r.status().is_success()
                    && server
                        .child
                        .try_wait()
                        .expect("wait for the server")
                        .is_none()
                {
                    return Some(server);
                }
            }
            if let Some(status) = server.child.try_wait().expect("wait for the server") {
                let stderr = server.finished_stderr();
                if stderr.contains("could not listen") {
                    return None;
                }
                panic!("the server exited ({status}) before it was ready; stderr:\n{stderr}");
            }
            assert!(
                Instant::now() < deadline,
                "the server did not answer /healthz within {READY_TIMEOUT:?}; stderr:\n{}",
                server.stderr()
            );
            sleep(POLL).await;
        }
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.so_far()
    }

    /// What the server wrote on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.so_far()
    }

    /// Everything the server wrote on stderr, once it has exited.
    fn finished_stderr(&mut self) -> String {
        self.stdout.all();
        self.stderr.all()
    }

    /// The API key of the first-run banner, waiting for the banner to be printed.
    pub async fn first_run_key(&self) -> String {
        eventually(
            "the first-run banner on stderr",
            Duration::from_secs(5),
            async || api_key_in(&self.stderr()),
        )
        .await
    }

    /// Sends a signal by name (`TERM`, `INT`, `KILL`) with the `kill` command.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args(["-s", signal, &self.pid().to_string()])
            .status()
            .expect("the kill command runs");
        assert!(status.success(), "kill -s {signal} failed: {status}");
    }

    /// Waits for the process to exit and returns its status and everything it wrote on stderr.
    pub async fn wait_exit(&mut self, timeout: Duration) -> (ExitStatus, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the server") {
                return (status, self.finished_stderr());
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {timeout:?}; stderr:\n{}",
                self.stderr()
            );
            sleep(POLL).await;
        }
    }

    /// SIGKILL: no graceful anything.
    pub async fn kill9(&mut self) {
        self.signal("KILL");
        let (status, _) = self.wait_exit(Duration::from_secs(10)).await;
        assert!(!status.success(), "a killed server reported success");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that was free a moment ago (the server binds it; see [`Server::start`] for the race).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
    listener.local_addr().expect("probe address").port()
}

/// The first API key (`sk_…`) in `text`.
pub fn api_key_in(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| w.starts_with("sk_"))
        .map(str::to_owned)
}

/// Whether `s` is `sk_` followed by 40 characters of base62.
pub fn is_api_key(s: &str) -> bool {
    s.strip_prefix("sk_")
        .is_some_and(|rest| rest.len() == 40 && rest.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// Whether `s` is `PREFIX` followed by a 26-character ULID.
pub fn is_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() == 26
            && rest
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
    })
}

// ----------------------------------------------------------------------------------------------
// Speaking to the API

/// An HTTP client that does not follow redirects (a redirect is what the tests look at).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(15))
        .build()
        .expect("reqwest client")
}

/// The API of one server, with one key.
pub struct Api {
    /// The client.
    pub http: reqwest::Client,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// `sk_…`.
    pub key: String,
}

impl Api {
    /// The API of `server` with `key`.
    pub fn new(server: &Server, key: &str) -> Self {
        Self {
            http: client(),
            base: server.base.clone(),
            key: key.to_owned(),
        }
    }

    /// A request to `/api/v1{path}` with the key.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(&self.key)
    }

    /// Sends `req` and returns the status and the JSON body.
    pub async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
        let res = req.send().await.expect("the server answers");
        let status = res.status().as_u16();
        let body = res.json().await.expect("a JSON body");
        (status, body)
    }

    /// `data` of a 200 envelope.
    #[track_caller]
    fn data(status: u16, body: Value) -> Value {
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["success"], true, "{body}");
        body["data"].clone()
    }

    /// POST `/links` with `destination`; the link.
    pub async fn create_link(&self, destination: &str) -> Value {
        let (status, body) = Self::send(
            self.request(reqwest::Method::POST, "/links")
                .json(&json!({ "destination": destination })),
        )
        .await;
        Self::data(status, body)
    }

    /// POST `/links/bulk` with one item per destination; the links, in order.
    pub async fn create_links_bulk(&self, destinations: &[String]) -> Vec<Value> {
        let items: Vec<Value> = destinations
            .iter()
            .map(|d| json!({ "destination": d }))
            .collect();
        let (status, body) = Self::send(
            self.request(reqwest::Method::POST, "/links/bulk")
                .json(&items),
        )
        .await;
        let data = Self::data(status, body);
        data.as_array()
            .expect("bulk data is an array")
            .iter()
            .map(|entry| {
                assert!(entry.get("link").is_some(), "a bulk item failed: {entry}");
                entry["link"].clone()
            })
            .collect()
    }

    /// POST `/webhooks`; returns `(id, secret)`.
    pub async fn create_webhook(&self, target: &str, events: &[&str]) -> (String, String) {
        let (status, body) = Self::send(
            self.request(reqwest::Method::POST, "/webhooks")
                .json(&json!({ "targetUrl": target, "events": events })),
        )
        .await;
        let hook = Self::data(status, body);
        let id = hook["id"].as_str().expect("webhook id").to_owned();
        let secret = hook["secret"].as_str().expect("webhook secret").to_owned();
        assert!(is_id(&id, "wh_"), "{id}");
        assert!(secret.starts_with("whsec_"), "{secret}");
        (id, secret)
    }

    /// GET `/webhooks/{id}/deliveries`, every page.
    pub async fn deliveries(&self, webhook: &str) -> Vec<Value> {
        let mut all = Vec::new();
        let mut path = format!("/webhooks/{webhook}/deliveries?limit=100");
        loop {
            let (status, body) = Self::send(self.request(reqwest::Method::GET, &path)).await;
            let page = Self::data(status, body);
            all.extend_from_slice(page["items"].as_array().expect("items are an array"));
            match page["nextCursor"].as_str() {
                Some(cursor) => {
                    path = format!("/webhooks/{webhook}/deliveries?limit=100&cursor={cursor}");
                }
                None => return all,
            }
        }
    }

    /// Waits until the webhook has a delivery for `event_id` satisfying `done`, and returns it.
    pub async fn delivery_when(
        &self,
        webhook: &str,
        event_id: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let mut last = Value::Null;
        let found = tokio::time::timeout(timeout, async {
            loop {
                let list = self.deliveries(webhook).await;
                if let Some(d) = list.iter().find(|d| d["eventId"] == event_id) {
                    last = d.clone();
                    if done(d) {
                        return d.clone();
                    }
                }
                sleep(POLL * 2).await;
            }
        })
        .await;
        found.unwrap_or_else(|_| {
            panic!("delivery {event_id} not in the expected state after {timeout:?}; last: {last}")
        })
    }

    /// GET `/{code}` with an optional User-Agent and Referer; the response.
    pub async fn visit(
        &self,
        code: &str,
        user_agent: Option<&str>,
        referrer: Option<&str>,
    ) -> reqwest::Response {
        let mut req = self.http.get(format!("{}/{code}", self.base));
        if let Some(ua) = user_agent {
            req = req.header("user-agent", ua);
        }
        if let Some(r) = referrer {
            req = req.header("referer", r);
        }
        req.send().await.expect("the server answers the redirect")
    }
}

// ----------------------------------------------------------------------------------------------
// A webhook receiver

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub enum Reply {
    /// This status, at once.
    Status(u16),
    /// A redirect to another path of the receiver.
    Redirect,
    /// Never (within any test): sleeps far longer than the sender's timeout.
    Hang,
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request method.
    pub method: String,
    /// The request path.
    pub path: String,
    /// Headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Bytes,
    /// When it arrived.
    pub at: std::time::Instant,
}

impl Received {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// `webhook-id`.
    pub fn id(&self) -> &str {
        self.header("webhook-id").unwrap_or_default()
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the webhook body is JSON")
    }

    /// `type` of the body.
    pub fn event_type(&self) -> String {
        self.json()["type"].as_str().unwrap_or_default().to_owned()
    }

    /// Checks the Standard Webhooks signature of `body` with `secret`.
    pub fn verify_body(&self, secret: &str, body: &[u8]) -> Result<(), VerifyError> {
        let headers = SignatureHeaders {
            id: self.header("webhook-id").unwrap_or_default(),
            timestamp: self.header("webhook-timestamp").unwrap_or_default(),
            signature: self.header("webhook-signature").unwrap_or_default(),
        };
        shortlink_webhooks::verify(
            &WebhookSecret::from_stored(secret.to_owned()),
            &headers,
            body,
            DEFAULT_TOLERANCE,
        )
    }

    /// Checks the Standard Webhooks signature of this request with `secret`.
    pub fn verify(&self, secret: &str) -> Result<(), VerifyError> {
        self.verify_body(secret, &self.body)
    }
}

#[derive(Default)]
struct ReceiverState {
    received: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Reply>>,
    otherwise: Mutex<Option<Reply>>,
}

/// An HTTP server on 127.0.0.1 that records every request and answers as scripted.
pub struct Receiver {
    /// Where to send webhooks: `http://127.0.0.1:PORT/hook`.
    pub url: String,
    state: Data<ReceiverState>,
    handle: ServerHandle,
}

impl Receiver {
    /// A receiver answering `script` in order, then `otherwise` to every later request.
    pub fn start(script: &[Reply], otherwise: Reply) -> Self {
        let state = Data::new(ReceiverState::default());
        lock(&state.script).extend(script.iter().copied());
        *lock(&state.otherwise) = Some(otherwise);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        let port = listener.local_addr().expect("receiver address").port();
        let app_state = state.clone();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(app_state.clone())
                .default_service(web::to(receive))
        })
        .workers(1)
        .disable_signals()
        .listen(listener)
        .expect("the receiver listens")
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Self {
            url: format!("http://127.0.0.1:{port}/hook"),
            state,
            handle,
        }
    }

    /// A receiver that answers 204 to everything.
    pub fn healthy() -> Self {
        Self::start(&[], Reply::Status(204))
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        lock(&self.state.received).clone()
    }

    /// Waits until at least `n` requests satisfying `filter` arrived; returns them all.
    pub async fn wait_for(
        &self,
        n: usize,
        timeout: Duration,
        filter: impl Fn(&Received) -> bool,
    ) -> Vec<Received> {
        eventually(
            &format!("{n} webhook request(s) at the receiver"),
            timeout,
            async || {
                let got: Vec<Received> = self.received().into_iter().filter(&filter).collect();
                (got.len() >= n).then_some(got)
            },
        )
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { handle.stop(false).await });
        }
    }
}

async fn receive(req: HttpRequest, body: Bytes, state: Data<ReceiverState>) -> HttpResponse {
    let mut headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    headers.sort();
    lock(&state.received).push(Received {
        method: req.method().as_str().to_owned(),
        path: req.path().to_owned(),
        headers,
        body,
        at: std::time::Instant::now(),
    });
    let reply = lock(&state.script)
        .pop_front()
        .or(*lock(&state.otherwise))
        .unwrap_or(Reply::Status(204));
    match reply {
        Reply::Status(code) => HttpResponse::build(
            actix_web::http::StatusCode::from_u16(code).expect("a valid status code"),
        )
        .finish(),
        Reply::Redirect => HttpResponse::Found()
            .insert_header(("location", "/elsewhere"))
            .finish(),
        Reply::Hang => {
            sleep(Duration::from_secs(60)).await;
            HttpResponse::NoContent().finish()
        }
    }
}
