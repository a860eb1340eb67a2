//! Logging that never blocks a request: lines are formatted on the thread that logs them and
//! handed to a writer thread through a bounded queue. When stderr does not keep up and the queue
//! is full, lines are dropped and counted rather than making a request wait; the count is
//! reported when the process exits.

use std::io::IsTerminal;

use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Lines queued for stderr before new ones are dropped (the writer's default).
const QUEUED_LINES: usize = 128_000;

/// actix's HTTP/1 dispatcher logs a client's malformed or oversized request head at ERROR,
/// though nothing failed in the service; the application logs the refusals it makes at warn.
/// Silenced unless `RUST_LOG` names `actix_http` itself.
const QUIET_DISPATCHER: &str = "actix_http::h1::dispatcher=off";

/// Keeps the writer thread alive; dropping it writes every queued line.
pub struct Logging {
    writer: WorkerGuard,
    dropped: ErrorCounter,
    format: LogFormat,
}

impl Logging {
    /// Starts logging to stderr in `format`, filtered by `RUST_LOG` (default `info`).
    pub fn init(format: LogFormat) -> Self {
        let (writer, guard) = NonBlockingBuilder::default()
            .buffered_lines_limit(QUEUED_LINES)
            .lossy(true)
            .thread_name("shortlink-log")
            .finish(std::io::stderr());
        let dropped = writer.error_counter();
        let wanted = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
        let directives = if wanted.contains("actix_http") {
            wanted
        } else {
            format!("{wanted},{QUIET_DISPATCHER}")
        };
        let filter = EnvFilter::try_new(&directives).unwrap_or_else(|e| {
            eprintln!("warning: RUST_LOG is not a filter ({e}); logging at info");
            EnvFilter::new(format!("info,{QUIET_DISPATCHER}"))
        });
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer);
        match format {
            LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
            LogFormat::Json => builder.json().init(),
        }
        Self {
            writer: guard,
            dropped,
            format,
        }
    }

    /// Writes every queued line, then the error that ends the process, last: `error: …` on one
    /// line in text (the whole chain of causes, joined; no backtrace), an ERROR object in JSON,
    /// so that a log pipeline reading JSON gets the reason too (in text after all when
    /// `RUST_LOG` filters errors out: the reason is never lost).
    pub fn fail(self, error: &anyhow::Error) {
        if self.format == LogFormat::Json && tracing::enabled!(tracing::Level::ERROR) {
            tracing::error!(error = format!("{error:#}"), "exiting on an error");
            self.finish();
        } else {
            self.finish();
            eprintln!("error: {error:#}");
        }
    }

    /// Writes every queued line, then says on stderr how many lines were dropped, if any.
    pub fn finish(self) {
        let dropped = self.dropped.dropped_lines();
        drop(self.writer);
        if dropped > 0 {
            eprintln!("warning: {dropped} log lines were dropped: stderr did not keep up");
        }
    }
}
