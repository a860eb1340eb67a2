//! What `/proc` says about a process: its resident memory (now and at its peak) and the CPU time
//! it used.

use std::time::Duration;

use anyhow::Context;

/// Peak resident set size (`VmHWM`) of process `pid`, in bytes.
pub fn peak_rss_bytes(pid: u32) -> anyhow::Result<u64> {
    status_bytes(pid, "VmHWM:")
}

/// Resident set size now (`VmRSS`) of process `pid`, in bytes: what a case samples when it
/// wants the growth during one step of a process that already peaked higher before it.
pub fn rss_bytes(pid: u32) -> anyhow::Result<u64> {
    status_bytes(pid, "VmRSS:")
}

/// The `field` (a size in kB) of `/proc/<pid>/status`, in bytes.
fn status_bytes(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("could not read /proc/{pid}/status"))?;
    parse_kib(&status, field).with_context(|| format!("no {field} in /proc/{pid}/status"))
}

fn parse_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// User plus system CPU time used so far by process `pid` (all its threads).
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("could not read /proc/{pid}/stat"))?;
    let ticks = parse_cpu_ticks(&stat).with_context(|| format!("malformed /proc/{pid}/stat"))?;
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    Ok(Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// `utime + stime` (fields 14 and 15). The command name (field 2) may hold spaces and
/// parentheses, so fields are counted from the last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The 1, 5 and 15 minute load averages: how busy the machine was with other work.
pub fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut fields = text
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(f64::NAN));
    [(); 3].map(|()| fields.next().unwrap_or(f64::NAN))
}

/// CPU model of this machine, from `/proc/cpuinfo`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sizes_in_bytes() {
        let status = "Name:\tshortlink\nVmPeak:\t  900 kB\nVmHWM:\t   51234 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(parse_kib(status, "VmHWM:"), Some(51_234 * 1024));
        assert_eq!(parse_kib(status, "VmRSS:"), Some(1024));
        assert_eq!(parse_kib("Name: x\n", "VmHWM:"), None);
    }

    #[test]
    fn counts_cpu_fields_after_the_command_name() {
        let stat = "42 (a (weird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 3 0";
        assert_eq!(parse_cpu_ticks(stat), Some(280));
    }

    #[test]
    fn reads_this_process() -> anyhow::Result<()> {
        assert!(peak_rss_bytes(std::process::id())? > 0);
        assert!(rss_bytes(std::process::id())? > 0);
        cpu_time(std::process::id())?;
        Ok(())
    }
}
