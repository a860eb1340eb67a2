//! Clicks past the memory bound, kept whole in a file until the database takes them.
//!
//! When the database is slow or down for long, clicks wait. Past
//! [`crate::MAX_PENDING_DETAILS`] of them, a click is appended here (its link, its workspace and
//! what the redirect saw) rather than kept in memory: memory stays bounded however long the
//! outage, and every click keeps its details for its event and its `link.clicked` payload.
//!
//! The file is a temporary one, unlinked from the start (`tempfile`), in the system's temporary
//! directory (`TMPDIR`): what it holds lives as long as the process, as the clicks pending in
//! memory do, and the space goes back when the process ends, however it ends. One line per click
//! (JSON: a line is a record, and the `Referer` and `User-Agent` are any text up to 2 KiB).
//!
//! The redirect appends through a buffer under a lock shared by every worker: a copy most of the
//! time and a write to the page cache every few hundred clicks, and only while the bound is
//! passed. The flusher takes the file as a whole (later clicks start a new one) and reads it
//! back a part at a time; a part whose write fails is read again by the next flush.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use shortlink_domain::{Timestamp, Visit, WorkspaceId};
use shortlink_storage::CounterKey;

use shortlink_domain::ThrottledLog;

/// One click as the file holds it.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    counter: i64,
    workspace: WorkspaceId,
    /// Unix milliseconds.
    at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    referrer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_agent: Option<Arc<str>>,
}

/// A click read back from the file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SpilledClick {
    pub counter: CounterKey,
    pub workspace_id: WorkspaceId,
    pub visit: Visit,
}

/// The file the flusher reads.
struct Reading {
    file: BufReader<File>,
    /// Where the first click not yet written starts: every read starts here.
    start: u64,
    /// Where the part read last ends: the next start, once that part is written.
    end: u64,
    /// Clicks in the part read last (a damaged line counts: it is gone once the part is).
    lines: u64,
}

/// Clicks kept in a file; see the module.
pub(crate) struct Spill {
    /// The file clicks are appended to; `None` until the first click after the flusher took it.
    appending: Mutex<Option<BufWriter<File>>>,
    /// The file the flusher is reading (the flusher alone uses it).
    reading: Mutex<Option<Reading>>,
    /// Clicks appended and not yet written to the database.
    waiting: AtomicU64,
    failures: ThrottledLog,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Spill {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            appending: Mutex::new(None),
            reading: Mutex::new(None),
            waiting: AtomicU64::new(0),
            failures: ThrottledLog::new(Duration::from_secs(60)),
        })
    }

    /// Appends a click on `counter`; on failure (no temporary file, a full disk), the click's
    /// time back: the caller keeps it counted, with its time alone.
    pub fn push(
        &self,
        counter: CounterKey,
        workspace: WorkspaceId,
        visit: Visit,
    ) -> Result<(), Timestamp> {
        let at = visit.timestamp;
        let record = Record {
            counter: counter.0,
            workspace,
            at: at.unix_millis(),
            address: visit.address,
            referrer: visit.referrer,
            user_agent: visit.user_agent,
        };
        let mut line = serde_json::to_vec(&record).map_err(|_| at)?;
        line.push(b'\n');
        let mut appending = locked(&self.appending);
        let appended = match appending.as_mut() {
            Some(file) => file.write_all(&line),
            None => tempfile::tempfile().and_then(|file| {
                tracing::warn!(
                    waiting = crate::MAX_PENDING_DETAILS,
                    "clicks wait for the database; further ones are kept in a temporary file \
                     (TMPDIR) until it takes them"
                );
                // Large enough that the redirect writes to the page cache rarely.
                let file = appending.insert(BufWriter::with_capacity(256 * 1024, file));
                file.write_all(&line)
            }),
        };
        // Counted under the lock: the flusher cannot read this click before it is counted.
        let appended = appended.map(|()| {
            self.waiting.fetch_add(1, Ordering::Relaxed);
        });
        drop(appending);
        appended.map_err(|e| {
            // A buffered writer keeps what it could not write, and this line was not buffered:
            // the file stays whole.
            if let Some(r) = self.failures.occurred(Instant::now()) {
                tracing::warn!(error = %e, earlier = r.times,
                    "could not keep a click's details in the spill file; it keeps its time");
            }
            at
        })
    }

    /// Clicks appended and not yet written to the database.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The next clicks to write, at most `most`, in the order they came; empty when none wait.
    /// The same part again until [`Spill::written`] says it is in the database. Blocking file
    /// I/O: call off the async workers.
    pub fn read_part(&self, most: usize) -> io::Result<Vec<SpilledClick>> {
        let mut reading = locked(&self.reading);
        loop {
            let part = match reading.as_mut() {
                Some(r) => r.read(most)?,
                None => Vec::new(),
            };
            if !part.is_empty() {
                return Ok(part);
            }
            // The file read is used up (its space goes back now; damaged lines at its end no
            // longer wait); take the one being appended, holding its lock until its buffer is in
            // the file, so no click starts another.
            if let Some(used_up) = reading.take() {
                self.waiting.fetch_sub(used_up.lines, Ordering::Relaxed);
            }
            let mut appending = locked(&self.appending);
            let Some(appended) = appending.take() else {
                return Ok(part);
            };
            let file = appended.into_inner().map_err(|e| {
                let error = io::Error::new(e.error().kind(), e.error().to_string());
                // Nothing lost: the writer and what it could not write go back, to be tried
                // again.
                *appending = Some(e.into_inner());
                error
            })?;
            *reading = Some(Reading {
                file: BufReader::new(file),
                start: 0,
                end: 0,
                lines: 0,
            });
        }
    }

    /// The part read last is in the database.
    pub fn written(&self) {
        if let Some(r) = locked(&self.reading).as_mut() {
            self.waiting.fetch_sub(r.lines, Ordering::Relaxed);
            (r.start, r.lines) = (r.end, 0);
        }
    }
}

impl Reading {
    fn read(&mut self, most: usize) -> io::Result<Vec<SpilledClick>> {
        self.file.seek(SeekFrom::Start(self.start))?;
        let (mut part, mut line) = (Vec::new(), String::new());
        self.lines = 0;
        while part.len() < most {
            line.clear();
            if self.file.read_line(&mut line)? == 0 {
                break;
            }
            self.lines += 1;
            match serde_json::from_str::<Record>(&line) {
                Ok(r) => part.push(SpilledClick {
                    counter: CounterKey(r.counter),
                    workspace_id: r.workspace,
                    visit: Visit {
                        timestamp: Timestamp::from_unix_millis(r.at),
                        address: r.address,
                        referrer: r.referrer,
                        user_agent: r.user_agent,
                    },
                }),
                // Only a damaged disk makes one: nothing says which link it counted.
                Err(e) => {
                    tracing::error!(error = %e, "a spilled click could not be read back; lost")
                }
            }
        }
        self.end = self.file.stream_position()?;
        Ok(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visit(i: i64) -> Visit {
        Visit {
            timestamp: Timestamp::from_unix_millis(1_800_000_000_000 + i),
            address: (i % 2 == 0).then(|| IpAddr::from([192, 0, 2, (i % 200) as u8])),
            referrer: Some(format!("https://example.com/{i}\n\"quoted\"")),
            user_agent: (i % 3 == 0).then(|| "Mozilla/5.0 (X11; Linux x86_64)".into()),
        }
    }

    fn read_all(spill: &Spill, most: usize) -> Vec<Vec<i64>> {
        let mut parts = Vec::new();
        loop {
            let part = spill.read_part(most).unwrap();
            if part.is_empty() {
                return parts;
            }
            spill.written();
            parts.push(part.iter().map(|c| c.counter.0).collect());
        }
    }

    #[test]
    fn clicks_come_back_whole_in_order_and_in_parts() {
        let spill = Spill::new();
        let workspace = WorkspaceId::generate();
        for i in 0..5 {
            spill.push(CounterKey(i), workspace, visit(i)).unwrap();
        }
        assert_eq!(spill.waiting(), 5);
        let part = spill.read_part(3).unwrap();
        let expected: Vec<_> = (0..3)
            .map(|i| SpilledClick {
                counter: CounterKey(i),
                workspace_id: workspace,
                visit: visit(i),
            })
            .collect();
        assert_eq!(part, expected);
        spill.written();
        // Clicks appended while the flusher reads go to a new file, read after the first.
        spill.push(CounterKey(5), workspace, visit(5)).unwrap();
        assert_eq!(read_all(&spill, 3), [vec![3, 4], vec![5]]);
        assert_eq!(spill.waiting(), 0);
        assert!(spill.read_part(3).unwrap().is_empty());
    }

    #[test]
    fn each_file_started_is_logged_once() {
        let spill = Spill::new();
        let workspace = WorkspaceId::generate();
        let text = crate::test_log::logged(|| {
            for i in 0..3 {
                spill.push(CounterKey(i), workspace, visit(i)).unwrap();
            }
            read_all(&spill, 10);
            spill.push(CounterKey(3), workspace, visit(3)).unwrap();
        });
        let started = "further ones are kept in a temporary file";
        assert_eq!(text.matches(started).count(), 2, "{text}");
        assert!(
            text.contains("WARN") && text.contains("waiting=200000"),
            "{text}"
        );
    }

    #[test]
    fn a_part_not_written_is_read_again() {
        let spill = Spill::new();
        let workspace = WorkspaceId::generate();
        for i in 0..4 {
            spill.push(CounterKey(i), workspace, visit(i)).unwrap();
        }
        spill.read_part(2).unwrap();
        spill.written();
        assert_eq!(spill.read_part(1).unwrap()[0].counter, CounterKey(2));
        // Not written: the next read starts with the same click.
        assert_eq!(spill.waiting(), 2);
        assert_eq!(read_all(&spill, 10), [vec![2, 3]]);
        assert_eq!(spill.waiting(), 0);
    }

    /// Appends a line that is no click, counted as a click is (what a damaged disk leaves).
    fn append_damaged(spill: &Spill, line: &[u8]) {
        let mut appending = locked(&spill.appending);
        appending.as_mut().unwrap().write_all(line).unwrap();
        spill.waiting.fetch_add(1, Ordering::Relaxed);
    }

    #[test]
    fn a_damaged_line_is_skipped_and_no_longer_waits() {
        let spill = Spill::new();
        let workspace = WorkspaceId::generate();
        spill.push(CounterKey(1), workspace, visit(1)).unwrap();
        append_damaged(&spill, b"{\"counter\":\n");
        spill.push(CounterKey(3), workspace, visit(3)).unwrap();
        assert_eq!(read_all(&spill, 10), [vec![1, 3]]);
        assert_eq!(spill.waiting(), 0);
        // A file that ends in one, read after its last click was written.
        spill.push(CounterKey(4), workspace, visit(4)).unwrap();
        append_damaged(&spill, b"}\n");
        assert_eq!(read_all(&spill, 1), [vec![4]]);
        assert_eq!(spill.waiting(), 0);
    }
}
