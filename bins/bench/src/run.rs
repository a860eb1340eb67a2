//! One whole bench run, step by step: the baseline, shortlink with few and with many links, the
//! click checks, the cases beside the redirect, creation on SQLite (and PostgreSQL when
//! `TEST_POSTGRES_URL` is set), and the summary. Every server is a child process guarded by
//! [`ServerProcess`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hyper::Method;
use rand::Rng;
use rand::distr::Alphanumeric;
use shortlink_domain::BaseUrl;

use crate::analytics_queries::QuerySettings;
use crate::clicks::{self, ClickCheck};
use crate::cpus::CpuPlan;
use crate::create::{self, CreationFigure, Mode};
use crate::load::{self, LoadResult, LoadSettings};
use crate::postgres::TempDatabase;
use crate::report::{
    BesideRuns, ClickReport, LoadConfig, Machine, RedirectFigure, RedirectRuns, SeedFigure, Summary,
};
use crate::servers::{self, ServerProcess, sqlite_url};
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
    /// Also drive each shortlink database with HEAD, which is not counted.
    pub diagnose: bool,
    /// The analytics queries' history; `None` skips the case (minutes per backend).
    pub queries: Option<QuerySettings>,
    /// The generator's CPUs and the servers'; `None` when they share every CPU.
    pub cpus: Option<CpuPlan>,
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

/// What every step shares.
struct Bench<'a> {
    options: &'a RunOptions,
    bin: PathBuf,
    scratch: Scratch,
    base: BaseUrl,
}

/// Runs every step and returns the summary.
pub async fn run(options: &RunOptions) -> anyhow::Result<Summary> {
    let bench = Bench {
        options,
        bin: servers::shortlink_binary(options.shortlink.as_deref())?,
        scratch: Scratch::new()?,
        base: BaseUrl::parse(BASE_URL)?,
    };
    let load_average_at_start = procfs::load_average();

    let mut redirect = vec![bench.baseline(Draw::ManyLinks).await?];
    let (mut diagnostics, mut click_reports, mut seeding) = (Vec::new(), Vec::new(), Vec::new());
    let runs = [
        Some((options.links, Seeding::Api)),
        options.large_links.map(|links| (links, Seeding::Store)),
    ];
    for (links, seeding_via) in runs.into_iter().flatten() {
        let run = bench
            .shortlink_redirect(links, seeding_via, Draw::ManyLinks)
            .await?;
        redirect.push(run.figure);
        diagnostics.extend(run.head);
        click_reports.push(run.clicks);
        seeding.push(run.seed);
    }

    if let Some(plan) = &options.cpus {
        plan.leave_generator()
            .context("could not give the load generator every CPU again")?;
    }
    // From here on the generator and the servers share every CPU.
    let hot_baseline = bench.baseline(Draw::HotLink).await?;
    let hot = bench
        .shortlink_redirect(1, Seeding::Api, Draw::HotLink)
        .await?;
    click_reports.push(hot.clicks);
    let metered = bench
        .shortlink_redirect(1, Seeding::Api, Draw::HotLinkMetrics)
        .await?;
    click_reports.push(metered.clicks);
    let unrecorded = bench
        .shortlink_redirect(1, Seeding::Api, Draw::HotLinkNoAnalytics)
        .await?;
    click_reports.push(unrecorded.clicks);
    let optioned = bench
        .shortlink_redirect(1, Seeding::Api, Draw::HotLinkWithOptions)
        .await?;
    click_reports.push(optioned.clicks);
    let hot_link = vec![
        hot_baseline,
        hot.figure,
        metered.figure,
        unrecorded.figure,
        optioned.figure,
    ];
    let deliveries =
        crate::deliveries::measure(&bench.bin, &bench.scratch.path(""), BASE_URL).await?;
    let shared_limits =
        crate::shared_limits::measure(&bench.bin, &bench.scratch.path(""), BASE_URL).await?;
    let bursts = crate::burst::measure(
        &bench.bin,
        &bench.scratch.path(""),
        BASE_URL,
        options.postgres_url.as_deref(),
    )
    .await?;
    let ingestion = crate::ingestion::measure(
        &bench.bin,
        &bench.scratch.path(""),
        &bench.base,
        options.postgres_url.as_deref(),
    )
    .await?;
    let analytics_queries = match options.queries {
        Some(settings) => {
            crate::analytics_queries::measure(
                &bench.bin,
                &bench.scratch.path(""),
                BASE_URL,
                &bench.base,
                options.postgres_url.as_deref(),
                settings,
            )
            .await?
        }
        None => {
            eprintln!("analytics queries: skipped (--skip-queries or --skip-large)");
            Vec::new()
        }
    };
    let propagation = match &options.postgres_url {
        Some(admin_url) => Some(
            crate::propagation::measure(&bench.bin, &bench.scratch.path(""), BASE_URL, admin_url)
                .await?,
        ),
        None => {
            eprintln!("propagation between instances: skipped (TEST_POSTGRES_URL is not set)");
            None
        }
    };
    let sqlite = sqlite_url(&bench.scratch.path("create.db"));
    let mut created = bench.creation("sqlite", &sqlite).await?;
    if let Some(admin_url) = &options.postgres_url {
        let postgres = async |url: &str| bench.creation("postgres", url).await;
        created.extend(TempDatabase::around(admin_url, postgres).await?);
    } else {
        eprintln!("creation on PostgreSQL: skipped (TEST_POSTGRES_URL is not set)");
    }

    Summary::new(
        Machine {
            cpus: options.cpus.map_or_else(
                || std::thread::available_parallelism().map_or(1, usize::from),
                |plan| plan.count(),
            ),
            placement: options.cpus.map_or_else(
                || "generator and servers share every CPU".to_owned(),
                |plan| plan.describe(),
            ),
            cpu_model: procfs::cpu_model(),
            load_average_at_start,
        },
        LoadConfig {
            connections: options.load.connections,
            warmup_seconds: options.load.warmup.as_secs_f64(),
            duration_seconds: options.load.duration.as_secs_f64(),
            zipf: options.load.zipf,
        },
        RedirectRuns {
            redirect,
            hot_link,
            diagnostics,
        },
        click_reports,
        created,
        seeding,
        BesideRuns {
            deliveries,
            shared_limits,
            bursts,
            ingestion,
            analytics_queries,
            propagation,
        },
    )
}

/// How a shortlink database gets its links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seeding {
    /// Bulk API of the running server.
    Api,
    /// `Store::create_links` before the server starts.
    Store,
}

/// Which redirect load a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Draw {
    /// Codes drawn from many links (uniformly, or by Zipf), generator and server each on CPUs of
    /// their own when there are two or more.
    ManyLinks,
    /// Every request for one code (a link gone viral), generator and server sharing every CPU,
    /// as a user's load test on one machine runs.
    HotLink,
    /// [`Draw::HotLink`] with `--metrics-listen`: what recording the metrics costs.
    HotLinkMetrics,
    /// [`Draw::HotLink`] with `--analytics off`: what recording every click's event costs.
    HotLinkNoAnalytics,
    /// [`Draw::HotLink`] on a link with an expiry time and iOS and country destinations: what
    /// following a link's rules costs.
    HotLinkWithOptions,
}

/// What one shortlink redirect run produced.
struct ShortlinkRun {
    figure: RedirectFigure,
    head: Option<RedirectFigure>,
    clicks: ClickReport,
    seed: SeedFigure,
}

impl Bench<'_> {
    /// The bare actix-web server under the same load: random codes, or one for the hot link.
    async fn baseline(&self, draw: Draw) -> anyhow::Result<RedirectFigure> {
        let (label, codes, cpus) = match draw {
            Draw::ManyLinks => (
                "baseline (bare actix-web)",
                BASELINE_CODES,
                self.options.cpus.as_ref(),
            ),
            Draw::HotLink
            | Draw::HotLinkMetrics
            | Draw::HotLinkNoAnalytics
            | Draw::HotLinkWithOptions => ("baseline, hot path (shared)", 1, None),
        };
        eprintln!("{label}: bare actix-web 302");
        let addr = servers::free_loopback_addr()?;
        let mut command = Command::new(std::env::current_exe()?);
        command
            .arg("baseline-server")
            .arg("--listen")
            .arg(addr.to_string());
        let log = self.scratch.path("baseline.log");
        let mut server = ServerProcess::spawn("baseline", command, addr, log, cpus)?;
        server.wait_ready("/healthz").await?;
        let mut rng = rand::rng();
        let paths: Vec<String> = (0..codes)
            .map(|_| {
                let code: String = (&mut rng)
                    .sample_iter(Alphanumeric)
                    .take(7)
                    .map(char::from)
                    .collect();
                format!("/{code}")
            })
            .collect();
        let (_, figure) = self
            .drive(&server, label, 0, Arc::new(paths), Method::GET)
            .await?;
        server.stop()?;
        Ok(figure)
    }

    /// shortlink on a fresh SQLite database with `links` links: load, then the click checks.
    async fn shortlink_redirect(
        &self,
        links: usize,
        seeding: Seeding,
        draw: Draw,
    ) -> anyhow::Result<ShortlinkRun> {
        let (label, cpus) = match draw {
            Draw::ManyLinks => (
                format!("shortlink, {links} links"),
                self.options.cpus.as_ref(),
            ),
            Draw::HotLink => ("shortlink, hot link (shared)".to_owned(), None),
            Draw::HotLinkMetrics => ("shortlink, hot link, metrics".to_owned(), None),
            Draw::HotLinkNoAnalytics => ("shortlink, hot link, analytics off".to_owned(), None),
            Draw::HotLinkWithOptions => ("shortlink, hot link with options".to_owned(), None),
        };
        eprintln!("{label}: preparing the database");
        let url = sqlite_url(&self.scratch.path(&format!("links-{links}-{draw:?}.db")));
        let key = seed::workspace_and_key(&self.bin, &url)?;
        // Only the seeding itself is timed, not the server's start.
        let mut seed_time = Duration::ZERO;
        let seeded = match seeding {
            Seeding::Store => {
                let started = Instant::now();
                let codes = seed::through_store(&url, &self.base, links).await?;
                seed_time += started.elapsed();
                Some(codes)
            }
            Seeding::Api => None,
        };

        let addr = servers::free_loopback_addr()?;
        let mut server =
            self.start_shortlink(&url, addr, &format!("links-{links}-{draw:?}"), cpus, draw)?;
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
        if draw == Draw::HotLinkWithOptions {
            seed::add_options(addr, &key, &codes).await?;
        }
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
        eprintln!("  {links} links through {} in {seconds:.1} s", seed.via);

        eprintln!("{label}: load");
        let paths: Arc<Vec<String>> = Arc::new(codes.iter().map(|c| format!("/{c}")).collect());
        let (result, figure) = self
            .drive(&server, &label, links, paths.clone(), Method::GET)
            .await?;
        let visible =
            clicks::visible_through_api(addr, &key, &codes, &result.redirects, API_SAMPLE).await?;
        // HEAD takes the same path without counting: the difference to GET is the cost of
        // counting clicks. The stored check below also proves HEAD was not counted.
        let head = if self.options.diagnose {
            eprintln!("{label}: load with HEAD (not counted)");
            let label = format!("{label}, HEAD");
            let (_, figure) = self
                .drive(&server, &label, links, paths, Method::HEAD)
                .await?;
            Some(figure)
        } else {
            None
        };
        server.stop()?;
        let stored: ClickCheck = clicks::check_stored(&url, &codes, &result.redirects).await?;
        Ok(ShortlinkRun {
            figure,
            head,
            clicks: ClickReport {
                run: label,
                api_visible_after_ms: visible.map(|d| d.as_secs_f64() * 1000.0),
                stored,
            },
            seed,
        })
    }

    fn start_shortlink(
        &self,
        database_url: &str,
        addr: SocketAddr,
        log: &str,
        cpus: Option<&CpuPlan>,
        // Which run it serves: the hot-link variants add their one flag; every other run is
        // the default configuration.
        draw: Draw,
    ) -> anyhow::Result<ServerProcess> {
        let metrics;
        let extra: &[&str] = match draw {
            Draw::HotLinkNoAnalytics => &["--analytics", "off"],
            Draw::HotLinkMetrics => {
                metrics = servers::free_loopback_addr()?.to_string();
                &["--metrics-listen", &metrics]
            }
            Draw::ManyLinks | Draw::HotLink | Draw::HotLinkWithOptions => &[],
        };
        let log = self.scratch.path(&format!("{log}.log"));
        servers::start_shortlink(&self.bin, database_url, addr, BASE_URL, extra, log, cpus)
    }

    /// Runs the load against `server` and gathers its figures, CPU time and peak memory.
    async fn drive(
        &self,
        server: &ServerProcess,
        label: &str,
        links: usize,
        paths: Arc<Vec<String>>,
        method: Method,
    ) -> anyhow::Result<(LoadResult, RedirectFigure)> {
        let me = std::process::id();
        let (server_cpu, own_cpu) = (server.cpu_time()?, procfs::cpu_time(me)?);
        let result = load::run(server.addr(), paths, self.options.load, method).await?;
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
            "  {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms, {:.1} µs server CPU per request",
            figure.requests_per_second,
            figure.p50_micros / 1000.0,
            figure.p99_micros / 1000.0,
            figure.server_cpu_micros_per_request
        );
        Ok((result, figure))
    }

    /// Single and bulk creation on a fresh database at `database_url`.
    async fn creation(
        &self,
        database: &'static str,
        database_url: &str,
    ) -> anyhow::Result<Vec<CreationFigure>> {
        eprintln!("creation on {database}");
        let key = seed::workspace_and_key(&self.bin, database_url)?;
        let addr = servers::free_loopback_addr()?;
        let mut server = self.start_shortlink(
            database_url,
            addr,
            &format!("create-{database}"),
            None,
            Draw::ManyLinks,
        )?;
        server.wait_ready("/healthz").await?;
        let options = self.options;
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
}
