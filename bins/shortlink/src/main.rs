//! `shortlink`: the server and its administration commands.

mod cli;
mod logging;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::from_command_line();
    let logging = logging::Logging::init(cli.log_format());
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            logging.fail(&anyhow::Error::new(e).context("could not start the runtime"));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => {
            logging.finish();
            ExitCode::SUCCESS
        }
        Err(e) => {
            logging.fail(&e);
            ExitCode::FAILURE
        }
    }
}
