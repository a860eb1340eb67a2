//! `shortlink`: the server and its administration commands.

mod cli;
mod logging;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let logging = logging::Logging::init(cli.log_format());
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            logging.finish();
            eprintln!("error: could not start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(cli::run(cli));
    // Every log line out before the last words, so they stay last.
    logging.finish();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, no backtrace: the whole chain of causes, joined.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
