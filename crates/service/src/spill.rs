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

use crate::throttled_log::ThrottledLog;

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
    user_agent: Option<String>,
}

/// A click read back from the file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SpilledClick {
    pub counter: CounterKey,
    pub workspace_id: WorkspaceId,
    pub visit: Visit,
}

/// The file the flusher reads, at the start of the first click not yet written.
struct Reading {
    file: BufReader<File>,
    /// Where the part handed out last starts, until it is written.
    part_start: Option<u64>,
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
                // Large enough that the redirect writes to the page cache rarely.
                let file = appending.insert(BufWriter::with_capacity(256 * 1024, file));
                file.write_all(&line)
            }),
        };
        drop(appending);
        match appended {
            Ok(()) => {
                self.waiting.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                // A buffered writer keeps what it could not write, and this line was not
                // buffered: the file stays whole.
                if let Some(r) = self.failures.occurred(Instant::now()) {
                    tracing::warn!(error = %e, earlier = r.times,
                        "could not keep a click's details in the spill file; it keeps its time");
                }
                Err(at)
            }
        }
    }

    /// Clicks appended and not yet written to the database.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The next clicks to write, at most `most`, in the order they came; empty when none wait.
    /// Until [`Spill::written`] or [`Spill::not_written`] is called, the part counts as waiting.
    /// Blocking file I/O: call off the async workers.
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
            // The file read is used up (its space goes back now); take the one being appended.
            *reading = None;
            let Some(appended) = locked(&self.appending).take() else {
                return Ok(part);
            };
            let mut file = appended.into_inner().map_err(|e| {
                let error = io::Error::new(e.error().kind(), e.error().to_string());
                // Nothing lost: the unwritten buffer goes back, to be tried again.
                locked(&self.appending).get_or_insert(e.into_inner());
                error
            })?;
            file.rewind()?;
            *reading = Some(Reading {
                file: BufReader::new(file),
                part_start: None,
            });
        }
    }

    /// The part read last is in the database.
    pub fn written(&self, part: usize) {
        self.waiting.fetch_sub(part as u64, Ordering::Relaxed);
        if let Some(r) = locked(&self.reading).as_mut() {
            r.part_start = None;
        }
    }

    /// The part read last could not be written: the next read starts with it again.
    pub fn not_written(&self) -> io::Result<()> {
        if let Some(reading) = locked(&self.reading).as_mut()
            && let Some(start) = reading.part_start.take()
        {
            reading.file.seek(SeekFrom::Start(start))?;
        }
        Ok(())
    }
}

impl Reading {
    fn read(&mut self, most: usize) -> io::Result<Vec<SpilledClick>> {
        self.part_start = Some(self.file.stream_position()?);
        let mut part = Vec::new();
        let mut line = String::new();
        while part.len() < most {
            line.clear();
            if self.file.read_line(&mut line)? == 0 {
                break;
            }
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
            user_agent: (i % 3 == 0).then(|| "Mozilla/5.0 (X11; Linux x86_64)".to_owned()),
        }
    }

    fn read_all(spill: &Spill, most: usize) -> Vec<Vec<i64>> {
        let mut parts = Vec::new();
        loop {
            let part = spill.read_part(most).unwrap();
            if part.is_empty() {
                return parts;
            }
            spill.written(part.len());
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
        spill.written(3);
        // Clicks appended while the flusher reads go to a new file, read after the first.
        spill.push(CounterKey(5), workspace, visit(5)).unwrap();
        assert_eq!(read_all(&spill, 3), [vec![3, 4], vec![5]]);
        assert_eq!(spill.waiting(), 0);
        assert!(spill.read_part(3).unwrap().is_empty());
    }

    #[test]
    fn a_part_not_written_is_read_again() {
        let spill = Spill::new();
        let workspace = WorkspaceId::generate();
        for i in 0..4 {
            spill.push(CounterKey(i), workspace, visit(i)).unwrap();
        }
        spill.written(spill.read_part(2).unwrap().len());
        assert_eq!(spill.read_part(1).unwrap()[0].counter, CounterKey(2));
        spill.not_written().unwrap();
        assert_eq!(spill.waiting(), 2);
        assert_eq!(read_all(&spill, 10), [vec![2, 3]]);
        assert_eq!(spill.waiting(), 0);
    }
}
