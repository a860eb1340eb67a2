//! The servers under test, each a child process: the bare actix-web baseline (this binary's
//! `baseline-server` mode) and shortlink itself. A [`ServerProcess`] stops its process on every
//! exit path (SIGTERM, then SIGKILL), so a failed run leaves nothing listening.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hyper::Method;
use rustix::process::{Pid, Signal, kill_process};

use crate::cpus::CpuPlan;
use crate::http::Connection;
use crate::procfs;

/// How long a server may take to answer its first request.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a graceful stop may take before the process is killed. shortlink's own graceful
/// stop waits up to 10 s for requests in flight; the bench closes its connections first, so a
/// healthy server stops well within this.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// Between two looks at a process that is starting or stopping.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A free port on 127.0.0.1, for a server started next.
pub fn free_loopback_addr() -> anyhow::Result<SocketAddr> {
    // The port is released before the server binds it; on a quiet machine nothing else takes it
    // in between, and a server that cannot bind fails loudly in `wait_ready`.
    let listener = TcpListener::bind("127.0.0.1:0").context("could not bind 127.0.0.1")?;
    Ok(listener.local_addr()?)
}

/// The release `shortlink` binary next to this one (both live in `target/release`).
pub fn shortlink_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match explicit {
        Some(path) => path.to_owned(),
        None => std::env::current_exe()?
            .parent()
            .context("this binary has no directory")?
            .join("shortlink"),
    };
    if !path.is_file() {
        bail!(
            "the shortlink server binary is missing at {}; build both first: \
             cargo build --release -p shortlink-server -p shortlink-bench",
            path.display()
        );
    }
    Ok(path)
}

/// `sqlite://PATH`.
pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// Starts `bin serve` on `database_url`, listening on `addr`, with short URLs under `base_url`:
/// the default configuration, plus `extra` (the one flag a case is about, if any). Its log goes
/// to `log`; with `cpus`, it runs on the servers' CPUs.
pub fn start_shortlink(
    bin: &Path,
    database_url: &str,
    addr: SocketAddr,
    base_url: &str,
    extra: &[&str],
    log: PathBuf,
    cpus: Option<&CpuPlan>,
) -> anyhow::Result<ServerProcess> {
    let mut command = Command::new(bin);
    command
        .args(["serve", "--database-url", database_url])
        .args(["--listen", &addr.to_string(), "--base-url", base_url])
        .args(extra);
    ServerProcess::spawn("shortlink", command, addr, log, cpus)
}

/// A running server process, stopped when dropped.
pub struct ServerProcess {
    name: String,
    child: Option<Child>,
    addr: SocketAddr,
    log: PathBuf,
}

impl ServerProcess {
    /// Starts `command` (which must make the server listen on `addr`), with its stderr in `log`,
    /// on the servers' CPUs of `cpus` when given.
    pub fn spawn(
        name: &str,
        mut command: Command,
        addr: SocketAddr,
        log: PathBuf,
        cpus: Option<&CpuPlan>,
    ) -> anyhow::Result<Self> {
        let stderr = File::create(&log)
            .with_context(|| format!("could not create the log file {}", log.display()))?;
        // As a user runs it: default logging, whatever the environment of the bench says.
        command
            .env_remove("RUST_LOG")
            .env_remove("SHORTLINK_LOG_FORMAT")
            .env_remove("SHORTLINK_LOG_REDIRECTS")
            .env_remove("SHORTLINK_METRICS_LISTEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = match cpus {
            Some(plan) => plan.spawn_server(&mut command),
            None => command.spawn(),
        }
        .with_context(|| format!("could not start the {name} server"))?;
        Ok(Self {
            name: name.to_owned(),
            child: Some(child),
            addr,
            log,
        })
    }

    /// Polls `GET path` until the server answers with any status, within a deadline.
    pub async fn wait_ready(&mut self, path: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child_mut()?.try_wait()? {
                bail!(
                    "the {} server exited ({status}) before answering:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            if let Ok(mut conn) = Connection::open(self.addr).await
                && conn.send(Method::GET, path, None, None).await.is_ok()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "the {} server did not answer on {} within {READY_TIMEOUT:?}:\n{}",
                    self.name,
                    self.addr,
                    self.log_tail()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its process id.
    pub fn pid(&self) -> anyhow::Result<u32> {
        Ok(self
            .child
            .as_ref()
            .context("the server was already stopped")?
            .id())
    }

    /// Its peak resident memory so far, in bytes.
    pub fn peak_rss_bytes(&self) -> anyhow::Result<u64> {
        procfs::peak_rss_bytes(self.pid()?)
    }

    /// CPU time it has used so far.
    pub fn cpu_time(&self) -> anyhow::Result<Duration> {
        procfs::cpu_time(self.pid()?)
    }

    /// Stops it gracefully (SIGTERM: shortlink writes its pending clicks) and checks that it
    /// exited cleanly.
    pub fn stop(mut self) -> anyhow::Result<()> {
        let status = self.terminate()?;
        if !status.success() {
            bail!(
                "the {} server exited with {status} on SIGTERM:\n{}",
                self.name,
                self.log_tail()
            );
        }
        Ok(())
    }

    /// SIGTERM, wait up to [`STOP_TIMEOUT`], then SIGKILL.
    fn terminate(&mut self) -> anyhow::Result<ExitStatus> {
        let mut child = self
            .child
            .take()
            .context("the server was already stopped")?;
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        let pid = Pid::from_child(&child);
        // Fails only when the process is already gone, which `try_wait` reports next.
        let _ = kill_process(pid, Signal::TERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        let _ = child.kill();
        let status = child.wait()?;
        bail!(
            "the {} server did not stop within {STOP_TIMEOUT:?} of SIGTERM and was killed ({status})",
            self.name
        )
    }

    fn child_mut(&mut self) -> anyhow::Result<&mut Child> {
        self.child
            .as_mut()
            .context("the server was already stopped")
    }

    /// The last lines the server wrote on stderr.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.child.is_some()
            && let Err(e) = self.terminate()
        {
            eprintln!("warning: {e:#}");
        }
    }
}
