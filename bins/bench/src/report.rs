//! The summary: every figure of a run, the ratios the targets are stated in, and whether each
//! target is met; printed as tables and written as JSON.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::analytics_queries::{Format, QueriesFigure, Query};
use crate::burst::BurstFigure;
use crate::click_history::DAYS;
use crate::deliveries::DeliveryFigure;
use crate::ingestion::IngestionFigure;
use crate::propagation::PropagationFigure;
use crate::shared_limits::SharedLimitFigure;

use crate::clicks::ClickCheck;
use crate::create::{CreationFigure, Mode};
use crate::load::LoadResult;

/// Bytes in a MiB.
const MIB: f64 = 1024.0 * 1024.0;

/// The machine the figures were measured on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// From `/proc/cpuinfo`.
    pub cpu_model: String,
    /// 1, 5 and 15 minute load averages when the run started: other work on the machine
    /// takes CPU from both the servers and the load generator.
    pub load_average_at_start: [f64; 3],
    /// Which CPUs the load generator and the servers under redirect load ran on.
    pub placement: String,
}

/// How a shortlink database got its links.
#[derive(Debug, Clone, Serialize)]
pub struct SeedFigure {
    /// Links created.
    pub links: usize,
    /// `bulk API` or `Store::create_links`.
    pub via: &'static str,
    /// Wall time.
    pub seconds: f64,
    /// Links per second.
    pub links_per_second: f64,
}

/// How the redirect load was run.
#[derive(Debug, Clone, Serialize)]
pub struct LoadConfig {
    /// Concurrent connections.
    pub connections: usize,
    /// Unmeasured warm-up, seconds.
    pub warmup_seconds: f64,
    /// Measured period, seconds.
    pub duration_seconds: f64,
    /// The exponent of the Zipf draw of codes; `None`: uniform.
    pub zipf: Option<f64>,
}

/// One server under the redirect load.
#[derive(Debug, Clone, Serialize)]
pub struct RedirectFigure {
    /// What was driven.
    pub server: String,
    /// Links in its database (0 for the baseline).
    pub links: usize,
    /// Measured requests per second.
    pub requests_per_second: f64,
    /// Median latency, microseconds.
    pub p50_micros: f64,
    /// 99th percentile latency, microseconds.
    pub p99_micros: f64,
    /// Requests answered in the measured period.
    pub measured_requests: u64,
    /// Failed requests (connection errors, timeouts).
    pub errors: u64,
    /// Answers other than 302.
    pub not_redirected: u64,
    /// The server's peak resident memory, MiB.
    pub peak_rss_mib: f64,
    /// Server CPU time per request (warm-up included), microseconds.
    pub server_cpu_micros_per_request: f64,
    /// Load generator CPU time per request, microseconds.
    pub generator_cpu_micros_per_request: f64,
}

impl RedirectFigure {
    /// Gathers the figures of one load run.
    pub fn new(
        server: &str,
        links: usize,
        load: &LoadResult,
        peak_rss_bytes: u64,
        server_cpu: std::time::Duration,
        generator_cpu: std::time::Duration,
    ) -> Self {
        let per_request =
            |cpu: std::time::Duration| cpu.as_secs_f64() * 1e6 / (load.total.max(1) as f64);
        Self {
            server: server.to_owned(),
            links,
            requests_per_second: load.requests_per_second(),
            p50_micros: load.latency_micros(0.50),
            p99_micros: load.latency_micros(0.99),
            measured_requests: load.measured,
            errors: load.errors,
            not_redirected: load.not_redirected,
            peak_rss_mib: peak_rss_bytes as f64 / MIB,
            server_cpu_micros_per_request: per_request(server_cpu),
            generator_cpu_micros_per_request: per_request(generator_cpu),
        }
    }
}

/// The click check of one shortlink run.
#[derive(Debug, Clone, Serialize)]
pub struct ClickReport {
    /// Which run.
    pub run: String,
    /// How long the API took to show the sampled counters (`None`: not within the deadline).
    pub api_visible_after_ms: Option<f64>,
    /// Every link, read through storage after a graceful stop.
    pub stored: ClickCheck,
}

/// Every redirect load's figures, as [`Summary`] holds them.
pub struct RedirectRuns {
    /// Baseline first, then shortlink with few, then (unless skipped) many links.
    pub redirect: Vec<RedirectFigure>,
    /// One hot link, generator and servers sharing the CPUs: the baseline, shortlink, and
    /// shortlink recording metrics.
    pub hot_link: Vec<RedirectFigure>,
    /// shortlink driven with HEAD (`--diagnose`).
    pub diagnostics: Vec<RedirectFigure>,
}

/// The ratios the targets are stated in.
#[derive(Debug, Clone, Serialize)]
pub struct Ratios {
    /// shortlink (10,000 links) requests/s ÷ baseline requests/s.
    pub throughput_vs_baseline: f64,
    /// shortlink (10,000 links) p99 ÷ baseline p99.
    pub p99_vs_baseline: f64,
    /// shortlink (large) requests/s ÷ shortlink (10,000 links) requests/s.
    pub large_vs_small_throughput: Option<f64>,
    /// shortlink (large) requests/s ÷ baseline requests/s.
    pub large_vs_baseline_throughput: Option<f64>,
    /// shortlink on one hot link ÷ the baseline on one path, both sharing the CPUs with the
    /// generator.
    pub hot_link_vs_baseline: f64,
    /// The same runs' p99s.
    pub hot_link_p99_vs_baseline: f64,
    /// shortlink on the hot link with metrics recorded ÷ without.
    pub metrics_vs_without: f64,
    /// shortlink on the hot link recording every click's analytics event (the default) ÷ with
    /// `--analytics off`.
    pub analytics_vs_without: f64,
    /// shortlink on a hot link with expiry and targeting ÷ on a plain one.
    pub options_vs_plain: f64,
}

/// One target of the performance issue.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is measured.
    pub name: String,
    /// The bound.
    pub wanted: String,
    /// The figure reached.
    pub reached: String,
    /// Whether the bound holds.
    pub met: bool,
}

/// The runs beside the redirect and creation: webhook deliveries, the API with Redis, a burst
/// of clicks, analytics ingestion and queries, and a change between two instances.
#[derive(Debug, Clone, Serialize)]
pub struct BesideRuns {
    /// Webhook deliveries to a receiver on this machine.
    pub deliveries: DeliveryFigure,
    /// The API with rate limits shared through Redis; `None` without `redis-server`.
    pub shared_limits: Option<SharedLimitFigure>,
    /// A burst of clicks with a `link.clicked` subscriber, per backend.
    pub bursts: Vec<BurstFigure>,
    /// Analytics events written through storage, per backend.
    pub ingestion: Vec<IngestionFigure>,
    /// Analytics queries and exports on a large history, per backend; empty when skipped
    /// (`--skip-queries`, `--skip-large`).
    pub analytics_queries: Vec<QueriesFigure>,
    /// A change seen by another instance; `None` without PostgreSQL.
    pub propagation: Option<PropagationFigure>,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Where.
    pub machine: Machine,
    /// How the redirect load was run.
    pub load: LoadConfig,
    /// Baseline first, then shortlink with few, then (unless skipped) many links.
    pub redirect: Vec<RedirectFigure>,
    /// One hot link, generator and servers sharing the CPUs: the baseline, shortlink, and
    /// shortlink recording metrics.
    pub hot_link: Vec<RedirectFigure>,
    /// With `--diagnose`: shortlink driven with HEAD, which takes the redirect's path without
    /// counting a click, so the difference to GET is what counting costs.
    pub diagnostics: Vec<RedirectFigure>,
    /// Ratios against the baseline and between the shortlink runs.
    pub ratios: Ratios,
    /// Click checks.
    pub clicks: Vec<ClickReport>,
    /// Creation throughput.
    pub creation: Vec<CreationFigure>,
    /// How the shortlink databases were filled (a second view of creation cost at scale).
    pub seeding: Vec<SeedFigure>,
    /// The runs beside the redirect and creation, their fields at the top level of the JSON.
    #[serde(flatten)]
    pub beside: BesideRuns,
    /// The targets, met or not.
    pub targets: Vec<Target>,
}

impl Summary {
    /// Computes ratios and targets from the figures. `redirect` holds the baseline, shortlink
    /// with few links and optionally shortlink with many; `hot_link` the baseline and shortlink
    /// on one hot link.
    pub fn new(
        machine: Machine,
        load: LoadConfig,
        RedirectRuns {
            redirect,
            hot_link,
            diagnostics,
        }: RedirectRuns,
        clicks: Vec<ClickReport>,
        creation: Vec<CreationFigure>,
        seeding: Vec<SeedFigure>,
        beside: BesideRuns,
    ) -> anyhow::Result<Self> {
        let BesideRuns {
            deliveries,
            shared_limits,
            bursts,
            ingestion,
            analytics_queries,
            propagation,
        } = &beside;
        let (base, small) = match redirect.as_slice() {
            [base, small, ..] => (base, small),
            _ => anyhow::bail!("the summary needs the baseline and a shortlink run"),
        };
        let (hot_base, hot, metered, unrecorded, optioned) = match hot_link.as_slice() {
            [base, hot, metered, unrecorded, optioned] => {
                (base, hot, metered, unrecorded, optioned)
            }
            _ => anyhow::bail!("the summary needs the hot-link baseline and shortlink runs"),
        };
        let large = redirect.get(2);
        let ratios = Ratios {
            throughput_vs_baseline: small.requests_per_second / base.requests_per_second,
            p99_vs_baseline: small.p99_micros / base.p99_micros,
            large_vs_small_throughput: large
                .map(|l| l.requests_per_second / small.requests_per_second),
            large_vs_baseline_throughput: large
                .map(|l| l.requests_per_second / base.requests_per_second),
            hot_link_vs_baseline: hot.requests_per_second / hot_base.requests_per_second,
            hot_link_p99_vs_baseline: hot.p99_micros / hot_base.p99_micros,
            metrics_vs_without: metered.requests_per_second / hot.requests_per_second,
            analytics_vs_without: hot.requests_per_second / unrecorded.requests_per_second,
            options_vs_plain: optioned.requests_per_second / hot.requests_per_second,
        };
        let mut targets = vec![
            Target {
                name: "redirect throughput vs baseline".into(),
                wanted: ">= 0.95".into(),
                reached: format!("{:.2}", ratios.throughput_vs_baseline),
                met: ratios.throughput_vs_baseline >= 0.95,
            },
            Target {
                name: "redirect p99 vs baseline p99".into(),
                wanted: "<= 1.50".into(),
                reached: format!("{:.2}", ratios.p99_vs_baseline),
                met: ratios.p99_vs_baseline <= 1.5,
            },
            Target {
                name: "hot link (shared CPUs) vs baseline".into(),
                wanted: ">= 0.85".into(),
                reached: format!("{:.2}", ratios.hot_link_vs_baseline),
                met: ratios.hot_link_vs_baseline >= 0.85,
            },
            Target {
                name: "hot link p99 vs baseline p99".into(),
                wanted: "<= 1.50".into(),
                reached: format!("{:.2}", ratios.hot_link_p99_vs_baseline),
                met: ratios.hot_link_p99_vs_baseline <= 1.5,
            },
            Target {
                name: "hot link with metrics vs without".into(),
                wanted: ">= 0.97".into(),
                reached: format!("{:.2}", ratios.metrics_vs_without),
                met: ratios.metrics_vs_without >= 0.97,
            },
            Target {
                name: "hot link with analytics (default) vs --analytics off".into(),
                wanted: ">= 0.90".into(),
                reached: format!("{:.2}", ratios.analytics_vs_without),
                met: ratios.analytics_vs_without >= 0.90,
            },
            Target {
                name: "hot link with expiry and targeting vs a plain one".into(),
                wanted: ">= 0.95".into(),
                reached: format!("{:.2}", ratios.options_vs_plain),
                met: ratios.options_vs_plain >= 0.95,
            },
        ];
        if let (Some(large), Some(ratio)) = (large, ratios.large_vs_small_throughput) {
            targets.push(Target {
                name: format!("{} links: throughput vs {} links", large.links, small.links),
                wanted: ">= 0.90".into(),
                reached: format!("{ratio:.2}"),
                met: ratio >= 0.90,
            });
            targets.push(Target {
                name: format!("{} links: server peak RSS", large.links),
                wanted: "<= 150 MiB".into(),
                reached: format!("{:.1} MiB", large.peak_rss_mib),
                met: large.peak_rss_mib <= 150.0,
            });
        }
        let mismatched: usize = clicks.iter().map(|c| c.stored.mismatch_count).sum();
        let checked: usize = clicks.iter().map(|c| c.stored.links).sum();
        targets.push(Target {
            name: "clicks exact after the load".into(),
            wanted: "0 mismatches".into(),
            reached: format!("{mismatched} of {checked} links"),
            met: mismatched == 0 && checked > 0,
        });
        for (mode, bound) in [(Mode::Single, 5_000.0), (Mode::Bulk, 50_000.0)] {
            if let Some(figure) = creation
                .iter()
                .find(|f| f.database == "sqlite" && f.mode == mode)
            {
                // A request that failed (a 503 from a busy database, say) misses the target
                // whatever the rate of the others.
                let failed = match figure.failed_requests {
                    0 => String::new(),
                    n => format!(", {n} failed"),
                };
                targets.push(Target {
                    name: format!("creation, {}, SQLite", mode_name(mode)),
                    wanted: format!(">= {} links/s", thousands(bound)),
                    reached: format!("{} links/s{failed}", thousands(figure.links_per_second)),
                    met: figure.links_per_second >= bound && figure.failed_requests == 0,
                });
            }
        }
        targets.push(Target {
            name: "webhook deliveries to a local receiver".into(),
            wanted: ">= 3,000/s".into(),
            reached: format!("{}/s", thousands(deliveries.per_second)),
            met: deliveries.per_second >= 3_000.0,
        });
        targets.push(Target {
            name: format!(
                "another workspace's first delivery behind {} events",
                thousands(deliveries.events as f64)
            ),
            wanted: "<= 1,000 ms".into(),
            reached: format!("{:.0} ms", deliveries.other_first_delivery_ms),
            met: deliveries.other_first_delivery_ms <= 1_000.0,
        });
        if let Some(shared) = shared_limits {
            let added = shared.shared_p50_micros - shared.local_p50_micros;
            targets.push(Target {
                name: "API median latency added by Redis".into(),
                wanted: "<= 150 µs".into(),
                reached: format!("{added:.0} µs"),
                met: added <= 150.0,
            });
            let ratio = shared.shared_per_second / shared.local_per_second;
            targets.push(Target {
                name: "API throughput with Redis vs without".into(),
                wanted: ">= 0.80".into(),
                reached: format!("{ratio:.2}"),
                met: ratio >= 0.80,
            });
        }
        for b in bursts {
            targets.push(Target {
                name: format!("a 100,000-click burst visible, {}", b.backend),
                wanted: "<= 2,000 ms".into(),
                reached: format!("{:.0} ms", b.visible_after_ms),
                met: b.visible_after_ms <= 2_000.0,
            });
            targets.push(Target {
                name: format!("server memory growth in the burst, {}", b.backend),
                wanted: "<= 50 MiB".into(),
                reached: format!("{:.1} MiB", b.rss_growth_mib),
                met: b.rss_growth_mib <= 50.0,
            });
        }
        for i in ingestion {
            let bound = if i.backend == "sqlite" {
                100_000.0
            } else {
                50_000.0
            };
            targets.push(Target {
                name: format!("analytics ingestion, {}", i.backend),
                wanted: format!(">= {} events/s", thousands(bound)),
                reached: format!("{} events/s", thousands(i.per_second)),
                met: i.per_second >= bound,
            });
        }
        for q in analytics_queries {
            targets.extend(query_targets(q));
        }
        if let Some(p) = propagation {
            targets.push(Target {
                name: "a change seen by another instance, p99".into(),
                wanted: "<= 250 ms".into(),
                reached: format!("{:.1} ms", p.p99_ms),
                met: p.p99_ms <= 250.0,
            });
        }
        Ok(Self {
            machine,
            load,
            redirect,
            hot_link,
            diagnostics,
            ratios,
            clicks,
            creation,
            seeding,
            beside,
            targets,
        })
    }

    /// Whether every link's clicks matched.
    pub fn clicks_exact(&self) -> bool {
        self.clicks.iter().all(|c| c.stored.ok())
    }

    /// The tables, as printed at the end of a run.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\nshortlink bench on {} CPUs ({}, load average {:.2} at start; {}); {} connections, \
             {:.0} s warm-up, {:.0} s measured, codes drawn {}\n",
            self.machine.cpus,
            self.machine.cpu_model,
            self.machine.load_average_at_start[0],
            self.machine.placement,
            self.load.connections,
            self.load.warmup_seconds,
            self.load.duration_seconds,
            self.load
                .zipf
                .map_or("uniformly".to_owned(), |s| format!("by Zipf (s = {s})"))
        );
        let _ = writeln!(
            out,
            "{:<28} {:>12} {:>9} {:>9} {:>8} {:>10} {:>10} {:>9}",
            "redirect",
            "req/s",
            "p50 ms",
            "p99 ms",
            "errors",
            "srv µs/req",
            "gen µs/req",
            "RSS MiB"
        );
        for r in self
            .redirect
            .iter()
            .chain(&self.diagnostics)
            .chain(&self.hot_link)
        {
            let _ = writeln!(
                out,
                "{:<28} {:>12} {:>9.3} {:>9.3} {:>8} {:>10.1} {:>10.1} {:>9.1}",
                r.server,
                thousands(r.requests_per_second),
                r.p50_micros / 1000.0,
                r.p99_micros / 1000.0,
                r.errors + r.not_redirected,
                r.server_cpu_micros_per_request,
                r.generator_cpu_micros_per_request,
                r.peak_rss_mib
            );
        }
        let _ = writeln!(
            out,
            "\nratios: throughput {:.2} × baseline, p99 {:.2} × baseline",
            self.ratios.throughput_vs_baseline, self.ratios.p99_vs_baseline
        );
        if let (Some(large), Some(vs_base)) = (
            self.ratios.large_vs_small_throughput,
            self.ratios.large_vs_baseline_throughput,
        ) {
            let _ = writeln!(
                out,
                "        many links: throughput {large:.2} × the few-links run ({vs_base:.2} × baseline)"
            );
        }
        let _ = writeln!(
            out,
            "        hot link, shared CPUs: throughput {:.2} × baseline, p99 {:.2} × baseline",
            self.ratios.hot_link_vs_baseline, self.ratios.hot_link_p99_vs_baseline
        );
        let _ = writeln!(
            out,
            "        hot link with metrics: throughput {:.2} × without",
            self.ratios.metrics_vs_without
        );
        let _ = writeln!(
            out,
            "        hot link with analytics (default): throughput {:.2} × --analytics off",
            self.ratios.analytics_vs_without
        );
        let _ = writeln!(out, "\nclicks");
        for c in &self.clicks {
            let visible = c
                .api_visible_after_ms
                .map_or_else(|| "not within 5 s".to_owned(), |ms| format!("{ms:.0} ms"));
            let _ = writeln!(
                out,
                "  {:<26} {} links, {} redirects, {} counted: {} (API showed the sample after {visible})",
                c.run,
                thousands(c.stored.links as f64),
                thousands(c.stored.expected_total as f64),
                thousands(c.stored.counted_total as f64),
                if c.stored.ok() {
                    "OK".to_owned()
                } else {
                    format!("{} MISMATCHED", c.stored.mismatch_count)
                },
            );
            for m in &c.stored.mismatches {
                let counted = m
                    .counted
                    .map_or_else(|| "missing".to_owned(), |n| n.to_string());
                let _ = writeln!(
                    out,
                    "    {}: {} redirects, {counted} counted",
                    m.code, m.expected
                );
            }
        }
        let _ = writeln!(
            out,
            "\n{:<28} {:>6} {:>12} {:>10} {:>8} {:>11}",
            "creation", "conns", "links/s", "links", "failed", "srv µs/link"
        );
        for c in &self.creation {
            let _ = writeln!(
                out,
                "{:<28} {:>6} {:>12} {:>10} {:>8} {:>11.1}",
                format!("{}, {}", mode_name(c.mode), c.database),
                c.connections,
                thousands(c.links_per_second),
                c.links,
                c.failed_requests,
                c.server_cpu_micros_per_link
            );
        }
        let d = &self.beside.deliveries;
        let _ = writeln!(
            out,
            "\nwebhook deliveries: {} events in {:.2} s, {}/s; another workspace's first after {:.0} ms",
            thousands(d.events as f64),
            d.seconds,
            thousands(d.per_second),
            d.other_first_delivery_ms
        );
        if let Some(shared) = &self.beside.shared_limits {
            let _ = writeln!(
                out,
                "API requests: {}/s, median {:.0} µs; with Redis {}/s, median {:.0} µs",
                thousands(shared.local_per_second),
                shared.local_p50_micros,
                thousands(shared.shared_per_second),
                shared.shared_p50_micros
            );
        }
        for b in &self.beside.bursts {
            let _ = writeln!(
                out,
                "a burst of {} clicks with a link.clicked subscriber, {}: {:.2} s; all visible {:.0} ms after; memory +{:.1} MiB",
                thousands(crate::burst::CLICKS as f64),
                b.backend,
                b.burst_seconds,
                b.visible_after_ms,
                b.rss_growth_mib
            );
        }
        for i in &self.beside.ingestion {
            let _ = writeln!(
                out,
                "analytics ingestion, {}: {} events in {:.2} s, {} events/s",
                i.backend,
                thousands(i.events as f64),
                i.seconds,
                thousands(i.per_second)
            );
        }
        for q in &self.beside.analytics_queries {
            write_queries(&mut out, q);
        }
        if let Some(p) = &self.beside.propagation {
            let _ = writeln!(
                out,
                "a change through one instance seen by another ({} changes): median {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                p.changes, p.p50_ms, p.p99_ms, p.max_ms
            );
        }
        for s in &self.seeding {
            let _ = writeln!(
                out,
                "seeding {:>9} links via {:<20} {:>12} links/s",
                thousands(s.links as f64),
                s.via,
                thousands(s.links_per_second)
            );
        }
        let _ = writeln!(
            out,
            "\n{:<40} {:>16} {:>20}  met",
            "target", "wanted", "reached"
        );
        for t in &self.targets {
            let _ = writeln!(
                out,
                "{:<40} {:>16} {:>20}  {}",
                t.name,
                t.wanted,
                t.reached,
                if t.met { "yes" } else { "NO" }
            );
        }
        out
    }

    /// Writes the summary as JSON to `path`, creating its directory.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
        }
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("could not write {}", path.display()))
    }
}

/// The analytics query targets of one backend: each query's median, each export's rate and
/// memory growth. A query or export that failed misses its targets. The targets are stated for
/// 10,000,000 events, so each name says how large the history was: a smaller one meets them
/// more easily.
fn query_targets(q: &QueriesFigure) -> Vec<Target> {
    let history = format!("{} events, {}", compact(q.events), q.backend);
    let mut targets = Vec::new();
    for timing in &q.queries {
        let bound = match timing.query {
            Query::DailySeries30 => 50.0,
            Query::DailySeries400 => 200.0,
            Query::Countries30 => 100.0,
        };
        let reached = match (timing.median_ms, &timing.failure) {
            (Some(median), None) => format!("{median:.0} ms"),
            (Some(median), Some(_)) => format!("{median:.0} ms, then failed"),
            (None, _) => "failed".to_owned(),
        };
        targets.push(Target {
            name: format!("{} median, {history}", timing.query.label()),
            wanted: format!("<= {bound:.0} ms"),
            reached,
            met: timing.failure.is_none() && timing.median_ms.is_some_and(|m| m <= bound),
        });
    }
    for e in &q.exports {
        let failed = e.failure.is_some();
        let format = format_name(e.format);
        targets.push(Target {
            name: format!("export {format} rows/s, {history}"),
            wanted: ">= 200,000/s".into(),
            reached: if failed {
                "failed".to_owned()
            } else {
                format!("{}/s", thousands(e.rows_per_second))
            },
            met: !failed && e.rows_per_second >= 200_000.0,
        });
        targets.push(Target {
            name: format!("export {format} RSS growth, {history}"),
            wanted: "< 20 MiB".into(),
            reached: format!("{:.1} MiB", e.rss_growth_mib),
            met: !failed && e.rss_growth_mib < 20.0,
        });
    }
    targets
}

/// The analytics query lines of one backend, as the printed summary shows them.
fn write_queries(out: &mut String, q: &QueriesFigure) {
    let _ = writeln!(
        out,
        "analytics queries, {}: {} events over {DAYS} days and {} links, written in {:.1} s ({} events/s), rolled up in {:.1} s",
        q.backend,
        thousands(q.events as f64),
        thousands(q.links as f64),
        q.generation_seconds,
        thousands(q.generated_per_second),
        q.rollup_seconds
    );
    for t in &q.queries {
        let answered = match (t.median_ms, t.max_ms) {
            (Some(median), Some(max)) => {
                format!("median {median:.0} ms, max {max:.0} ms ({} runs)", t.runs)
            }
            _ => "no answer".to_owned(),
        };
        let failed = t
            .failure
            .as_ref()
            .map_or_else(String::new, |f| format!("; failed: {f}"));
        let _ = writeln!(out, "  {:<22} {answered}{failed}", t.query.label());
    }
    for e in &q.exports {
        let _ = match &e.failure {
            None => writeln!(
                out,
                "  export {:<15} {} rows ({} days) in {:.1} s, {} rows/s, memory +{:.1} MiB",
                format_name(e.format),
                thousands(e.rows as f64),
                e.days,
                e.seconds,
                thousands(e.rows_per_second),
                e.rss_growth_mib
            ),
            Some(f) => writeln!(
                out,
                "  export {:<15} failed after {:.1} s: {f}",
                format_name(e.format),
                e.seconds
            ),
        };
    }
}

fn format_name(format: Format) -> &'static str {
    match format {
        Format::Ndjson => "NDJSON",
        Format::Csv => "CSV",
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Single => "single",
        Mode::Bulk => "bulk ×100",
    }
}

/// A count in a few characters: `10_000_000` → `"10M"`, `200_000` → `"200k"`, `1_500_000` →
/// `"1.5M"`.
fn compact(n: usize) -> String {
    let (value, unit) = match n {
        1_000_000.. => (n as f64 / 1e6, "M"),
        1_000.. => (n as f64 / 1e3, "k"),
        _ => (n as f64, ""),
    };
    let digits = format!("{value:.1}");
    let digits = digits.strip_suffix(".0").unwrap_or(&digits);
    format!("{digits}{unit}")
}

/// `12345.6` → `"12,346"`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_targets_judge_medians_rates_memory_and_failures() {
        use crate::analytics_queries::{ExportFigure, QueryTiming};
        let timing = |query, median_ms: Option<f64>, failure: Option<&str>| QueryTiming {
            query,
            runs: usize::from(median_ms.is_some()),
            median_ms,
            max_ms: median_ms,
            failure: failure.map(str::to_owned),
        };
        let export =
            |format, rows_per_second, rss_growth_mib, failure: Option<&str>| ExportFigure {
                format,
                days: 40,
                rows: 1_000_000,
                seconds: 1.0,
                rows_per_second,
                rss_growth_mib,
                failure: failure.map(str::to_owned),
            };
        let figure = QueriesFigure {
            backend: "sqlite".into(),
            events: 10_000_000,
            links: 100_000,
            generation_seconds: 100.0,
            generated_per_second: 100_000.0,
            rollup_seconds: 10.0,
            queries: vec![
                timing(Query::DailySeries30, Some(40.0), None),
                timing(Query::DailySeries400, Some(150.0), Some("503")),
                timing(Query::Countries30, None, Some("timed out")),
            ],
            exports: vec![
                export(Format::Ndjson, 250_000.0, 5.0, None),
                export(Format::Csv, 150_000.0, 25.0, None),
            ],
        };
        let met: Vec<(String, bool)> = query_targets(&figure)
            .into_iter()
            .map(|t| (t.name, t.met))
            .collect();
        let want = [
            ("30-day series median, 10M events, sqlite", true),
            // Answered in time, then failed: not met.
            ("400-day series median, 10M events, sqlite", false),
            ("30-day countries median, 10M events, sqlite", false),
            ("export NDJSON rows/s, 10M events, sqlite", true),
            ("export NDJSON RSS growth, 10M events, sqlite", true),
            ("export CSV rows/s, 10M events, sqlite", false),
            ("export CSV RSS growth, 10M events, sqlite", false),
        ];
        let want: Vec<(String, bool)> = want.iter().map(|(n, m)| ((*n).to_owned(), *m)).collect();
        assert_eq!(met, want);
        let mut printed = String::new();
        write_queries(&mut printed, &figure);
        assert!(printed.contains("30-day series          median 40 ms, max 40 ms (1 runs)"));
        assert!(printed.contains("30-day countries       no answer; failed: timed out"));
    }

    #[test]
    fn compacts_counts() {
        assert_eq!(compact(999), "999");
        assert_eq!(compact(200_000), "200k");
        assert_eq!(compact(1_500_000), "1.5M");
        assert_eq!(compact(10_000_000), "10M");
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.8), "1,234,568");
    }
}
