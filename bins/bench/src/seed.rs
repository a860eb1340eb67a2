//! Preparing a database: a workspace with a plan rate high enough not to throttle the bench and a
//! key for it (through shortlink's own command line), then links, either through the bulk API of
//! a running server or, for a million, through the storage crate's `Store::create_links` on the
//! same file before the server starts (the same code path the API's bulk creation ends in, in
//! batches of 1000 instead of 100).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use shortlink_domain::{BaseUrl, Destination, LinkId, Timestamp};
use shortlink_storage::{CreateOutcome, NewLink, PoolOptions, RedirectTarget, Store};

use crate::api::{ApiClient, BULK_BATCH};
use crate::tasks::Tasks;

/// The bench workspace's name.
pub const WORKSPACE: &str = "bench";
/// Its plan rate (requests per second, also the burst): the highest shortlink allows.
const RATE_LIMIT: u32 = 1_000_000;
/// Links per `Store::create_links` call when seeding through storage.
const STORE_BATCH: usize = 1000;

/// Where link number `i` points: distinct per link, about as long as the baseline's Location.
pub fn destination(i: usize) -> String {
    format!("https://example.com/landing/{i:06}")
}

/// Runs `shortlink ARGS` on `database_url` and returns what it printed on stdout.
fn shortlink_cli(bin: &Path, database_url: &str, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(bin)
        .args(args)
        .env("DATABASE_URL", database_url)
        .env("RUST_LOG", "warn")
        .output()
        .with_context(|| format!("could not run {}", bin.display()))?;
    if !output.status.success() {
        bail!(
            "shortlink {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}

/// Creates the bench workspace and returns a fresh API key for it.
pub fn workspace_and_key(bin: &Path, database_url: &str) -> anyhow::Result<String> {
    named_workspace_and_key(bin, database_url, WORKSPACE)
}

/// Creates a second workspace and returns a fresh API key for it.
pub fn other_workspace_and_key(bin: &Path, database_url: &str) -> anyhow::Result<String> {
    named_workspace_and_key(bin, database_url, "bench-other")
}

fn named_workspace_and_key(bin: &Path, database_url: &str, name: &str) -> anyhow::Result<String> {
    let rate = RATE_LIMIT.to_string();
    shortlink_cli(
        bin,
        database_url,
        &["workspace", "create", name, "--rate-limit", &rate],
    )?;
    let key = shortlink_cli(bin, database_url, &["key", "create", "--workspace", name])?;
    if !key.starts_with("sk_") {
        bail!("`shortlink key create` printed no key");
    }
    Ok(key)
}

/// Gives each of `codes` an expiry time far ahead and iOS and country destinations: every
/// redirect then follows the link's rules (and sends desktop clients, from no country, to the
/// destination as before).
pub async fn add_options(addr: SocketAddr, key: &str, codes: &[String]) -> anyhow::Result<()> {
    let options = serde_json::json!({
        "expiresAt": "2099-01-01T00:00:00Z",
        "ios": "https://apps.apple.com/app/id1",
        "geo": {"GB": "https://example.co.uk/"},
    });
    let mut api = ApiClient::open(addr, key).await?;
    for code in codes {
        api.change(code, &options).await?;
    }
    Ok(())
}

/// Creates `count` links through `POST /api/v1/links/bulk` (batches of 100, `connections` at a
/// time) and returns their short codes.
pub async fn through_api(
    addr: SocketAddr,
    key: &str,
    count: usize,
    connections: usize,
) -> anyhow::Result<Vec<String>> {
    let batches = count.div_ceil(BULK_BATCH);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Tasks::new();
    for _ in 0..connections.clamp(1, batches.max(1)) {
        let mut client = ApiClient::open(addr, key).await?;
        let next = next.clone();
        tasks.spawn(async move {
            let mut made = Vec::new();
            // Each task takes batch numbers until none is left: bounded by `batches`.
            loop {
                let batch = next.fetch_add(1, Ordering::Relaxed);
                if batch >= batches {
                    return anyhow::Ok(made);
                }
                let range = batch * BULK_BATCH..((batch + 1) * BULK_BATCH).min(count);
                let destinations: Vec<String> = range.map(destination).collect();
                made.extend(client.create_bulk(&destinations).await?);
            }
        });
    }
    let mut codes = Vec::with_capacity(count);
    for made in tasks.join().await? {
        codes.extend(made?);
    }
    Ok(codes)
}

/// Creates `count` links in the bench workspace directly through `Store::create_links`, on the
/// database the server will open next, and returns their short codes.
pub async fn through_store(
    database_url: &str,
    base: &BaseUrl,
    count: usize,
) -> anyhow::Result<Vec<String>> {
    let store = Store::connect(database_url, PoolOptions::default())?;
    store.migrate().await?;
    let workspace = store
        .find_workspace(WORKSPACE)
        .await?
        .context("the bench workspace is missing")?;
    let mut codes = Vec::with_capacity(count);
    for start in (0..count).step_by(STORE_BATCH) {
        let links = (start..(start + STORE_BATCH).min(count))
            .map(|i| {
                Ok(NewLink {
                    id: LinkId::generate(),
                    workspace_id: workspace.id,
                    domain: base.domain().to_owned(),
                    slug: None,
                    destination: Destination::parse(&destination(i), base)?,
                    created_at: Timestamp::now(),
                    options: Default::default(),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        for outcome in store.create_links(links, base).await? {
            match outcome {
                CreateOutcome::Created(link) => codes.push(link.short_code.into_string()),
                CreateOutcome::SlugConflict => bail!("a generated slug conflicted"),
            }
        }
    }
    Ok(codes)
}

/// What `store` knows of each of `codes` for counting its clicks (the link's counter and
/// workspace): what the server's click flush writes events with.
pub async fn redirect_targets(
    store: &Store,
    base: &BaseUrl,
    codes: &[String],
) -> anyhow::Result<Vec<RedirectTarget>> {
    let mut targets = Vec::with_capacity(codes.len());
    for code in codes {
        let target = (store.resolve(base.domain(), code).await?)
            .with_context(|| format!("link {code} is missing"))?;
        targets.push(target);
    }
    Ok(targets)
}
