//! One whole bench run, step by step: the baseline, shortlink with few and with many links, the
//! click checks, creation on SQLite (and PostgreSQL when `TEST_POSTGRES_URL` is set), and the
//! summary. Every server is a child process guarded by [`ServerProcess`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::Rng;
use rand::distr::Alphanumeric;
use shortlink_domain::BaseUrl;

use crate::clicks::{self, ClickCheck};
use crate::create::{self, CreationFigure, Mode};
use crate::load::{self, LoadResult, LoadSettings};
use crate::postgres::TempDatabase;
use crate::report::{ClickReport, LoadConfig, Machine, RedirectFigure, SeedFigure, Summary};
use crate::servers::{self, ServerProcess};
use crate::{procfs, seed};

/// The base URL of every shortlink started here; links' `domain` is its host. Fixed, so links
/// seeded through storage before the server starts match the server's domain whatever its port.
const BASE_URL: &str = "http://sho.rt";
/// Bulk requests in flight while seeding through the API.
const SEED_CONNECTIONS: usize = 4;
/// Random codes the baseline is driven with (it answers every path the same).
const BASELINE_CODES: usize = 10_000;
/// Sampled links whose counters are polled through the API after a load.
const API_SAMPLE: usize = 100;

/// What to run, from the command line.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The redirect load.
    pub load: LoadSettings,
    /// Links in the first shortlink run.
    pub links: usize,
    /// Links in the second run; `None` skips it.
    pub large_links: Option<usize>,
    /// Each creation measurement's length.
    pub create_duration: Duration,
    /// Connections for single creation.
    pub create_connections: usize,
    /// Connections for bulk creation.
    pub bulk_connections: usize,
    /// The `shortlink` binary; next to this one when not given.
    pub shortlink: Option<PathBuf>,
    /// PostgreSQL server for the creation measurement (`TEST_POSTGRES_URL`).
    pub postgres_url: Option<String>,
}

/// A directory for this run's databases and logs, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("shortlink-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
        Ok(Self(dir))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs every step and returns the summary.
pub async fn run(options: &RunOptions) -> anyhow::Result<Summary> {
    let bin = servers::shortlink_binary(options.shortlink.as_deref())?;
    let scratch = Scratch::new()?;
    let base = BaseUrl::parse(BASE_URL)?;

    let load_average_at_start = procfs::load_average();
    let mut redirect = vec![baseline(&scratch, options.load).await?];
    let mut click_reports = Vec::new();
    let mut seeding = Vec::new();
    let runs = [
        Some((options.links, Seeding::Api)),
        options.large_links.map(|links| (links, Seeding::Store)),
    ];
    for (links, how) in runs.into_iter().flatten() {
        let label = format!("shortlink, {links} links");
        let run =
            shortlink_redirect(&bin, &scratch, &base, &label, links, how, options.load).await?;
        redirect.push(run.figure);
        click_reports.push(run.clicks);
        seeding.push(run.seed);
    }

    let sqlite = sqlite_url(&scratch.path("create.db"));
    let mut created = creation("sqlite", &bin, &scratch, &sqlite, options).await?;
    if let Some(admin_url) = &options.postgres_url {
        let db = TempDatabase::create(admin_url).await?;
        let measured = creation("postgres", &bin, &scratch, db.url(), options).await;
        db.drop_database().await?;
        created.extend(measured?);
    } else {
        eprintln!("creation on PostgreSQL: skipped (TEST_POSTGRES_URL is not set)");
    }

    Summary::new(
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            cpu_model: procfs::cpu_model(),
            load_average_at_start,
        },
        LoadConfig {
            connections: options.load.connections,
            warmup_seconds: options.load.warmup.as_secs_f64(),
            duration_seconds: options.load.duration.as_secs_f64(),
        },
        redirect,
        click_reports,
        created,
        seeding,
    )
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// The bare actix-web server under the same load, with random codes.
async fn baseline(scratch: &Scratch, load: LoadSettings) -> anyhow::Result<RedirectFigure> {
    eprintln!("baseline: bare actix-web 302");
    let addr = servers::free_loopback_addr()?;
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg("baseline-server")
        .arg("--listen")
        .arg(addr.to_string());
    let mut server = ServerProcess::spawn("baseline", command, addr, scratch.path("baseline.log"))?;
    server.wait_ready("/healthz").await?;
    let mut rng = rand::rng();
    let paths: Vec<String> = (0..BASELINE_CODES)
        .map(|_| {
            let code: String = (&mut rng)
                .sample_iter(Alphanumeric)
                .take(7)
                .map(char::from)
                .collect();
            format!("/{code}")
        })
        .collect();
    let (_, figure) = drive(&server, "baseline (bare actix-web)", 0, paths, load).await?;
    server.stop()?;
    Ok(figure)
}

/// How a shortlink database gets its links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seeding {
    /// Bulk API of the running server.
    Api,
    /// `Store::create_links` before the server starts.
    Store,
}

/// What one shortlink redirect run produced.
struct ShortlinkRun {
    figure: RedirectFigure,
    clicks: ClickReport,
    seed: SeedFigure,
}

/// shortlink on a fresh SQLite database with `links` links: load, then the click checks.
async fn shortlink_redirect(
    bin: &Path,
    scratch: &Scratch,
    base: &BaseUrl,
    label: &str,
    links: usize,
    seeding: Seeding,
    load: LoadSettings,
) -> anyhow::Result<ShortlinkRun> {
    eprintln!("{label}: preparing the database");
    let url = sqlite_url(&scratch.path(&format!("links-{links}.db")));
    let key = seed::workspace_and_key(bin, &url)?;
    // Only the seeding itself is timed, not the server's start.
    let mut seed_time = Duration::ZERO;
    let seeded = match seeding {
        Seeding::Store => {
            let started = Instant::now();
            let codes = seed::through_store(&url, base, links).await?;
            seed_time += started.elapsed();
            Some(codes)
        }
        Seeding::Api => None,
    };

    let addr = servers::free_loopback_addr()?;
    let mut server = start_shortlink(bin, scratch, &url, addr, &format!("links-{links}"))?;
    server.wait_ready("/healthz").await?;
    let codes = match seeded {
        Some(codes) => codes,
        None => {
            let started = Instant::now();
            let codes = seed::through_api(addr, &key, links, SEED_CONNECTIONS).await?;
            seed_time += started.elapsed();
            codes
        }
    };
    let seconds = seed_time.as_secs_f64();
    let seed = SeedFigure {
        links,
        via: match seeding {
            Seeding::Api => "bulk API",
            Seeding::Store => "Store::create_links",
        },
        seconds,
        links_per_second: links as f64 / seconds,
    };
    eprintln!("  {links} links through the {} in {seconds:.1} s", seed.via);

    eprintln!("{label}: load");
    let paths: Vec<String> = codes.iter().map(|c| format!("/{c}")).collect();
    let (result, figure) = drive(&server, label, links, paths, load).await?;
    let visible =
        clicks::visible_through_api(addr, &key, &codes, &result.redirects, API_SAMPLE).await?;
    server.stop()?;
    let stored: ClickCheck = clicks::check_stored(&url, &codes, &result.redirects).await?;
    Ok(ShortlinkRun {
        figure,
        clicks: ClickReport {
            run: label.to_owned(),
            api_visible_after_ms: visible.map(|d| d.as_secs_f64() * 1000.0),
            stored,
        },
        seed,
    })
}

fn start_shortlink(
    bin: &Path,
    scratch: &Scratch,
    database_url: &str,
    addr: SocketAddr,
    log: &str,
) -> anyhow::Result<ServerProcess> {
    let mut command = Command::new(bin);
    command
        .arg("serve")
        .arg("--database-url")
        .arg(database_url)
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--base-url")
        .arg(BASE_URL);
    ServerProcess::spawn(
        "shortlink",
        command,
        addr,
        scratch.path(&format!("{log}.log")),
    )
}

/// Runs the load against `server` and gathers its figures, CPU time and peak memory.
async fn drive(
    server: &ServerProcess,
    label: &str,
    links: usize,
    paths: Vec<String>,
    settings: LoadSettings,
) -> anyhow::Result<(LoadResult, RedirectFigure)> {
    let me = std::process::id();
    let (server_cpu, own_cpu) = (server.cpu_time()?, procfs::cpu_time(me)?);
    let result = load::run(server.addr(), Arc::new(paths), settings).await?;
    let server_cpu = server.cpu_time()?.saturating_sub(server_cpu);
    let own_cpu = procfs::cpu_time(me)?.saturating_sub(own_cpu);
    let figure = RedirectFigure::new(
        label,
        links,
        &result,
        server.peak_rss_bytes()?,
        server_cpu,
        own_cpu,
    );
    eprintln!(
        "  {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms",
        figure.requests_per_second,
        figure.p50_micros / 1000.0,
        figure.p99_micros / 1000.0
    );
    Ok((result, figure))
}

/// Single and bulk creation on a fresh database at `database_url`.
async fn creation(
    database: &'static str,
    bin: &Path,
    scratch: &Scratch,
    database_url: &str,
    options: &RunOptions,
) -> anyhow::Result<Vec<CreationFigure>> {
    eprintln!("creation on {database}");
    let key = seed::workspace_and_key(bin, database_url)?;
    let addr = servers::free_loopback_addr()?;
    let mut server = start_shortlink(
        bin,
        scratch,
        database_url,
        addr,
        &format!("create-{database}"),
    )?;
    server.wait_ready("/healthz").await?;
    let mut figures = Vec::new();
    for (mode, connections) in [
        (Mode::Single, options.create_connections),
        (Mode::Bulk, options.bulk_connections),
    ] {
        let figure = create::measure(
            database,
            mode,
            &server,
            &key,
            connections,
            options.create_duration,
        )
        .await?;
        eprintln!(
            "  {mode:?}: {:.0} links/s, {:.0} µs server CPU per link ({} failed requests)",
            figure.links_per_second, figure.server_cpu_micros_per_link, figure.failed_requests
        );
        figures.push(figure);
    }
    server.stop()?;
    Ok(figures)
}
