//! `docs/nginx.conf`, the configuration DEPLOYMENT.md gives, in front of two real instances on
//! one PostgreSQL database, over TLS: the API and redirects pass through with exact clicks, the
//! visitor's address is taken from `X-Forwarded-For` only as far as the trusted proxies vouch for
//! it, an instance that goes down is skipped, `/readyz` stays private, and an oversized body gets
//! the API's own error. The file is used as it is written; only its addresses and certificate
//! paths are swapped for the test's.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use shortlink_storage::testing::TestDatabase;

use crate::helpers::{Server, eventually, free_port};

const DOCUMENTED: &str = include_str!("../../../../docs/nginx.conf");
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
/// nginx itself connects to the instances from here.
const NGINX_ADDRESS: &str = "127.0.0.1";
/// A proxy in front of nginx (a CDN, say) that the instances also trust.
const TRUSTED_FRONT: &str = "127.0.0.2";
/// A client that is no proxy.
const VISITOR: &str = "127.0.0.3";

/// An nginx of the test's own, on `docs/nginx.conf`, stopped and cleaned up when dropped.
struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Nginx {
    fn start(upstreams: &[&Server]) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "shortlink-nginx-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("a directory for nginx");
        self_signed_certificate(&dir);
        let port = free_port();
        std::fs::write(
            dir.join("shortlink.conf"),
            tested_config(&dir, port, upstreams),
        )
        .expect("write the site configuration");
        std::fs::write(dir.join("nginx.conf"), main_config(&dir)).expect("write nginx.conf");
        let child = Command::new("nginx")
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts (it is installed where the PostgreSQL tests run; .ci/run installs it)");
        let mut nginx = Self { child, dir, port };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return nginx;
            }
            if let Ok(Some(status)) = nginx.child.try_wait() {
                panic!("nginx exited ({status}):\n{}", nginx.error_log());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("nginx did not listen on {port}:\n{}", nginx.error_log());
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `docs/nginx.conf` with the test's instances, port and certificate; each swap must find its
/// text exactly once, so the test breaks when the documented file changes shape.
fn tested_config(dir: &Path, port: u16, upstreams: &[&Server]) -> String {
    let mut text = String::new();
    let mut documented_upstreams = 0;
    for line in DOCUMENTED.lines() {
        if line.trim_start().starts_with("server 10.0.1.") {
            if documented_upstreams == 0 {
                for server in upstreams {
                    let address = server.base.trim_start_matches("http://");
                    text.push_str(&format!("    server {address};\n"));
                }
            }
            documented_upstreams += 1;
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    assert_eq!(
        documented_upstreams, 3,
        "the documented upstream lists three instances"
    );
    let swaps = [
        (
            "listen 443 ssl http2;",
            format!("listen 127.0.0.1:{port} ssl http2;"),
        ),
        ("/etc/ssl/sho.rt/fullchain.pem", path(&dir.join("cert.pem"))),
        ("/etc/ssl/sho.rt/privkey.pem", path(&dir.join("key.pem"))),
    ];
    for (from, to) in swaps {
        assert_eq!(
            text.matches(from).count(),
            1,
            "{from} once in docs/nginx.conf"
        );
        text = text.replace(from, &to);
    }
    text
}

/// The `nginx.conf` around the site configuration: everything in the test's directory.
fn main_config(dir: &Path) -> String {
    let at = |name: &str| path(&dir.join(name));
    format!(
        "daemon off;\nworker_processes 1;\npid {pid};\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {body};\n  proxy_temp_path {proxy};\n  \
         fastcgi_temp_path {fastcgi};\n  uwsgi_temp_path {uwsgi};\n  scgi_temp_path {scgi};\n  \
         include {site};\n}}\n",
        pid = at("nginx.pid"),
        body = at("body"),
        proxy = at("proxy"),
        fastcgi = at("fastcgi"),
        uwsgi = at("uwsgi"),
        scgi = at("scgi"),
        site = at("shortlink.conf"),
    )
}

fn path(p: &Path) -> String {
    p.to_str().expect("a UTF-8 temporary path").to_owned()
}

fn self_signed_certificate(dir: &Path) {
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=sho.rt", "-keyout"])
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl made no certificate");
}

/// A client connecting from `address` that accepts the test's certificate.
fn client_from(address: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .danger_accept_invalid_certs(true)
        .local_address(address.parse::<IpAddr>().expect("an address"))
        .timeout(Duration::from_secs(15))
        .build()
        .expect("reqwest client")
}

struct Through<'a> {
    nginx: &'a Nginx,
    key: String,
}

impl Through<'_> {
    async fn api(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        let res = request
            .bearer_auth(&self.key)
            .send()
            .await
            .expect("nginx answers");
        let status = res.status().as_u16();
        let text = res.text().await.expect("a body");
        let body = serde_json::from_str(&text).unwrap_or_else(|_| {
            let log = self.nginx.error_log();
            panic!("the API's JSON envelope, not {status} {text}\nnginx's log:\n{log}")
        });
        (status, body)
    }

    async fn visit(&self, from: &str, code: &str, forwarded_for: Option<&str>) -> u16 {
        let mut req = client_from(from)
            .get(self.nginx.url(&format!("/{code}")))
            .header("user-agent", BROWSER);
        if let Some(forwarded) = forwarded_for {
            req = req.header("x-forwarded-for", forwarded);
        }
        let res = req.send().await.expect("nginx answers");
        res.status().as_u16()
    }

    async fn clicks(&self, code: &str) -> Value {
        let get = client_from(VISITOR).get(self.nginx.url(&format!("/api/v1/links/{code}")));
        self.api(get).await.1["data"]["clicks"].clone()
    }
}

#[tokio::test]
async fn the_documented_nginx_config_fronts_two_instances() {
    let test = concat!(module_path!(), "::documented_nginx");
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    let geoip =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/geoip/GeoLite2-City-Test.mmdb");
    let args: Vec<String> = [
        "--base-url",
        "https://sho.rt",
        "--trusted-proxies",
        &format!("{NGINX_ADDRESS},{TRUSTED_FRONT}"),
        "--geoip-db",
        &path(&geoip),
    ]
    .map(String::from)
    .into();
    let first = Server::start(&db.url, &args).await;
    let key = first.first_run_key().await;
    let mut instances = [first, Server::start(&db.url, &args).await];
    let nginx = Nginx::start(&[&instances[0], &instances[1]]);
    let through = Through { nginx: &nginx, key };
    let http = client_from(VISITOR);

    // The API and the redirect pass through, clicks exact over both instances.
    let create = http
        .post(nginx.url("/api/v1/links"))
        .json(&json!({"destination": "https://example.com/behind-nginx", "customSlug": "front"}));
    let (status, created) = through.api(create).await;
    assert_eq!(status, 200, "{created}");
    for _ in 0..20 {
        assert_eq!(through.visit(VISITOR, "front", None).await, 302);
    }
    eventually("20 clicks", Duration::from_secs(5), async || {
        (through.clicks("front").await == 20).then_some(())
    })
    .await;

    // The visitor's address: a forged X-Forwarded-For from a client is ignored (nginx appends
    // the client's own address, which is not trusted); one added by a trusted proxy in front
    // of nginx is believed.
    let create = http
        .post(nginx.url("/api/v1/links"))
        .json(&json!({"destination": "https://example.com/where", "customSlug": "where"}));
    assert_eq!(through.api(create).await.0, 200);
    assert_eq!(
        through.visit(VISITOR, "where", Some("81.2.69.142")).await,
        302
    );
    assert_eq!(
        through
            .visit(TRUSTED_FRONT, "where", Some("89.160.20.112"))
            .await,
        302
    );
    let countries = http.get(nginx.url("/api/v1/analytics?groupBy=countries&linkId=where"));
    eventually(
        "both clicks' countries",
        Duration::from_secs(5),
        async || {
            let (_, body) = through
                .api(countries.try_clone().expect("a plain GET"))
                .await;
            let mut keys: Vec<String> = (body["data"].as_array()?.iter())
                .map(|g| format!("{}:{}", g["key"], g["clicks"]))
                .collect();
            keys.sort();
            (keys == ["\"SE\":1", "null:1"]).then_some(())
        },
    )
    .await;

    // Readiness is not for the public; liveness and the API's own errors pass through.
    let res = http
        .get(nginx.url("/readyz"))
        .send()
        .await
        .expect("nginx answers");
    assert_eq!(res.status(), 403);
    let res = http
        .get(nginx.url("/healthz"))
        .send()
        .await
        .expect("nginx answers");
    assert_eq!(res.status(), 200);
    let oversized = http
        .post(nginx.url("/api/v1/links"))
        .header("content-type", "application/json")
        .body(vec![b' '; 1536 * 1024]);
    let (status, body) = through.api(oversized).await;
    // The instance's own answer to a body just over its bound.
    let direct = crate::helpers::client()
        .post(instances[1].url("/api/v1/links"))
        .bearer_auth(&through.key)
        .header("content-type", "application/json")
        .body(vec![b' '; 1024 * 1024 + 1]);
    let direct = direct.send().await.expect("the instance answers");
    assert_eq!(direct.status(), 413);
    let direct: Value = direct.json().await.expect("the API's envelope");
    assert_eq!(
        (status, body),
        (413, direct),
        "nginx answers as the API does"
    );

    // One instance goes down: nginx sends everything to the other, and no click is lost.
    instances[0].kill9().await;
    for _ in 0..10 {
        assert_eq!(through.visit(VISITOR, "front", None).await, 302);
    }
    eventually("30 clicks", Duration::from_secs(5), async || {
        (through.clicks("front").await == 30).then_some(())
    })
    .await;
}
