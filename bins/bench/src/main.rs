//! `shortlink-bench`: measures shortlink's redirect against a bare actix-web server on this
//! machine, its click counting, and its link creation, and writes the summary to
//! `target/bench/summary.json`. See `bins/bench/README.md` and `docs/PERFORMANCE.md`.

mod analytics_queries;
mod api;
mod baseline;
mod burst;
mod click_history;
mod clicks;
mod cpus;
mod create;
mod deliveries;
mod http;
mod ingestion;
mod load;
mod postgres;
mod procfs;
mod propagation;
mod report;
mod run;
mod seed;
mod servers;
mod shared_limits;
mod tasks;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::analytics_queries::QuerySettings;
use crate::load::LoadSettings;
use crate::run::RunOptions;

#[derive(Debug, Parser)]
#[command(
    name = "shortlink-bench",
    about = "Benchmarks shortlink against a bare actix-web baseline on this machine",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the bare baseline: every GET answers the same 302 (started by the bench itself).
    #[command(hide = true)]
    BaselineServer {
        /// Address to listen on.
        #[arg(long)]
        listen: String,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Measured seconds of each redirect load.
    #[arg(long, default_value_t = 10.0, value_parser = positive_seconds)]
    duration: f64,
    /// Unmeasured warm-up seconds before each redirect load.
    #[arg(long, default_value_t = 2.0, value_parser = seconds)]
    warmup: f64,
    /// Concurrent connections of the redirect load.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    connections: u16,
    /// Links in the first shortlink run.
    #[arg(long, default_value_t = 10_000, value_parser = link_count)]
    links: usize,
    /// Links in the second shortlink run.
    #[arg(long, default_value_t = 1_000_000, value_parser = link_count)]
    large_links: usize,
    /// Skip the second (large) shortlink run and the analytics queries, for a quick run.
    #[arg(long)]
    skip_large: bool,
    /// Skip the analytics queries on a large history (minutes per backend).
    #[arg(long)]
    skip_queries: bool,
    /// Click events in the analytics queries' history (spread over the last 400 days).
    #[arg(long, default_value_t = 10_000_000, value_parser = event_count)]
    query_events: usize,
    /// Links the analytics queries' history is spread over (all in one workspace).
    #[arg(long, default_value_t = 100_000, value_parser = link_count)]
    query_links: usize,
    /// Seconds of each creation measurement (single, then bulk).
    #[arg(long, default_value_t = 5.0, value_parser = positive_seconds)]
    create_duration: f64,
    /// Draw codes from a Zipf distribution of this exponent (e.g. 1.0) instead of uniformly.
    /// Real traffic is skewed like this; the targets are judged on the uniform draw.
    #[arg(long, value_parser = positive_exponent)]
    zipf: Option<f64>,
    /// Connections creating single links.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    create_connections: u16,
    /// Connections creating bulk batches of 100.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    bulk_connections: u16,
    /// The release `shortlink` binary [default: next to this binary].
    #[arg(long)]
    shortlink: Option<PathBuf>,
    /// PostgreSQL server for the creation measurement; a fresh database is made and dropped.
    #[arg(long, env = "TEST_POSTGRES_URL")]
    postgres_url: Option<String>,
    /// Also drive each shortlink database with HEAD (not counted as a click), to tell the cost
    /// of finding a link from the cost of counting its clicks.
    #[arg(long)]
    diagnose: bool,
    /// Let the load generator and the servers under redirect load share every CPU, instead of
    /// each running on half of them (see `docs/PERFORMANCE.md`, "How the CPUs are shared").
    #[arg(long)]
    share_cpus: bool,
    /// Where to write the summary [default: target/bench/summary.json in the workspace].
    #[arg(long)]
    output: Option<PathBuf>,
}

fn positive_exponent(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 10.0 => Ok(v),
        _ => Err("expected an exponent above 0 and at most 10".into()),
    }
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err("expected seconds between 0 and 3600".into()),
    }
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    seconds(s).and_then(|v| {
        if v > 0.0 {
            Ok(v)
        } else {
            Err("must be more than 0".into())
        }
    })
}

fn link_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=10_000_000).contains(&n) => Ok(n),
        _ => Err("expected a number of links between 1 and 10,000,000".into()),
    }
}

/// At least enough for every 30-day range of the history to hold events (the answers are
/// checked to have some).
fn event_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (10_000..=1_000_000_000).contains(&n) => Ok(n),
        _ => Err("expected a number of events between 10,000 and 1,000,000,000".into()),
    }
}

/// `target/bench/summary.json` at the workspace root (this crate is `bins/bench`).
fn default_output() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .parent()
        .and_then(|bins| bins.parent())
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    root.join("target").join("bench").join("summary.json")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::BaselineServer { listen }) => baseline::serve(&listen),
        None => bench(cli.run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn bench(args: RunArgs) -> anyhow::Result<()> {
    let cpus = if args.share_cpus {
        None
    } else {
        cpus::CpuPlan::split().context("could not read this process's CPUs")?
    };
    if let Some(plan) = &cpus {
        // Before the runtime exists, so that its threads inherit the generator's CPUs and it
        // starts one worker per CPU it has.
        plan.enter_generator()
            .context("could not restrict the load generator to its CPUs")?;
    }
    let options = RunOptions {
        load: LoadSettings {
            connections: usize::from(args.connections),
            warmup: Duration::from_secs_f64(args.warmup),
            duration: Duration::from_secs_f64(args.duration),
            zipf: args.zipf,
        },
        links: args.links,
        large_links: (!args.skip_large).then_some(args.large_links),
        create_duration: Duration::from_secs_f64(args.create_duration),
        create_connections: usize::from(args.create_connections),
        bulk_connections: usize::from(args.bulk_connections),
        shortlink: args.shortlink,
        postgres_url: args.postgres_url.filter(|url| !url.is_empty()),
        diagnose: args.diagnose,
        queries: (!args.skip_large && !args.skip_queries).then_some(QuerySettings {
            events: args.query_events,
            links: args.query_links,
        }),
        cpus,
    };
    let output = args.output.unwrap_or_else(default_output);
    let runtime = tokio::runtime::Runtime::new()?;
    let summary = runtime.block_on(async {
        // On Ctrl-C or SIGTERM the run is dropped, and with it every server guard, which stops
        // its process: nothing is left listening.
        tokio::select! {
            summary = run::run(&options) => summary,
            signal = interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
        }
    })?;
    print!("{}", summary.to_table());
    summary.write_json(&output)?;
    println!("\nsummary written to {}", output.display());
    anyhow::ensure!(
        summary.clicks_exact(),
        "click counters do not match the redirects received"
    );
    Ok(())
}

/// Completes on SIGINT or SIGTERM, naming it.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without signal handlers the run simply cannot be interrupted early.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}
