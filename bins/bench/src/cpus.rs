//! Which CPUs the load generator and the servers run on.
//!
//! The redirect load is two closed loops on one machine: the generator and the server each keep
//! a CPU busy. When both may run on every CPU, a request whose server worker (or whose generator
//! task) is runnable behind the other process's thread waits until that thread sleeps or the
//! scheduler's tick preempts it, 4 ms on this machine's 250 Hz kernel, and the p99 of either
//! server is then mostly that wait (docs/PERFORMANCE.md shows it). So the bench gives each loop
//! CPUs of its own: the generator (this process) the first half of the CPUs it may use, a server
//! under redirect load the rest. The creation measurements that follow give every CPU to both:
//! their generator is light, and the single writer and the HTTP workers together need more than
//! half of two.
//!
//! A child inherits the CPUs of the thread that starts it, so a server is started from a thread
//! that holds the server's CPUs for the moment of the start.

use std::io;
use std::process::{Child, Command};

use rustix::process::Pid;
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// The split of this process's CPUs between the generator and the servers under redirect load.
#[derive(Debug, Clone, Copy)]
pub struct CpuPlan {
    generator: CpuSet,
    servers: CpuSet,
    all: CpuSet,
}

impl CpuPlan {
    /// Splits the CPUs this process may use in two halves; `None` with fewer than two.
    pub fn split() -> io::Result<Option<Self>> {
        let all = sched_getaffinity(None)?;
        let cpus: Vec<usize> = members(&all).collect();
        if cpus.len() < 2 {
            return Ok(None);
        }
        let (first, rest) = cpus.split_at(cpus.len() / 2);
        Ok(Some(Self {
            generator: set_of(first),
            servers: set_of(rest),
            all,
        }))
    }

    /// Restricts the calling thread, and every thread it starts afterwards, to the generator's
    /// CPUs. Called before the runtime is built, so the runtime sizes itself to them.
    pub fn enter_generator(&self) -> io::Result<()> {
        Ok(sched_setaffinity(None, &self.generator)?)
    }

    /// Gives every thread of this process every CPU again, for the creation measurements: the
    /// CPUs are split for the redirect loads only.
    pub fn leave_generator(&self) -> io::Result<()> {
        for task in std::fs::read_dir("/proc/self/task")? {
            let tid = task?.file_name().to_string_lossy().parse::<i32>().ok();
            if let Some(pid) = tid.and_then(Pid::from_raw) {
                // A thread that ended meanwhile has nothing left to move.
                match sched_setaffinity(Some(pid), &self.all) {
                    Ok(()) | Err(rustix::io::Errno::SRCH) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Starts `command` on the servers' CPUs; the calling thread keeps its own.
    pub fn spawn_server(&self, command: &mut Command) -> io::Result<Child> {
        let own = sched_getaffinity(None)?;
        sched_setaffinity(None, &self.servers)?;
        let child = command.spawn();
        sched_setaffinity(None, &own)?;
        child
    }

    /// Every CPU this process may use.
    pub fn count(&self) -> usize {
        self.all.count() as usize
    }

    /// For the report: "generator on CPU 0, servers under load on CPU 1".
    pub fn describe(&self) -> String {
        format!(
            "generator on CPU {}, servers under load on CPU {}",
            list(&self.generator),
            list(&self.servers)
        )
    }
}

fn set_of(cpus: &[usize]) -> CpuSet {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    set
}

/// The CPUs in `set`, in order.
fn members(set: &CpuSet) -> impl Iterator<Item = usize> + '_ {
    (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c))
}

fn list(set: &CpuSet) -> String {
    members(set)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
