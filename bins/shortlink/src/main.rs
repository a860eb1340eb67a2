//! `shortlink`: the server and its administration commands.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, no backtrace: the whole chain of causes, joined.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// actix's HTTP/1 dispatcher logs a client's malformed or oversized request head at ERROR,
/// though nothing failed in the service; the application logs the refusals it makes at warn.
/// Silenced unless `RUST_LOG` names `actix_http` itself.
const QUIET_DISPATCHER: &str = "actix_http::h1::dispatcher=off";

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let wanted = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    let directives = if wanted.contains("actix_http") {
        wanted
    } else {
        format!("{wanted},{QUIET_DISPATCHER}")
    };
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
