//! SQLite checkpoints off the writer's path.
//!
//! In WAL mode a commit that takes the log past SQLite's auto-checkpoint threshold (1000 pages)
//! copies the log back into the database file and syncs it before the commit returns. With a
//! single writer connection that stalls every write queued behind it: in bulk creation it was a
//! fifth of the writer's CPU, plus the wait for `fsync` (docs/PERFORMANCE.md). A thread of its
//! own checkpoints instead, in `PASSIVE` mode (it never blocks the writer or a reader); the writer
//! keeps a ten times higher threshold (`wal_autocheckpoint` in `crate::pool`) as a backstop in
//! case this thread falls behind, which also bounds the log's size.

use std::sync::{Arc, Weak};
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};

/// How often the log is copied back.
const INTERVAL: Duration = Duration::from_millis(100);

/// Keeps the checkpoint thread of one database running; it stops within [`INTERVAL`] after the
/// last clone of its store is dropped.
#[derive(Clone)]
pub(crate) struct Checkpointer(#[expect(dead_code, reason = "held for its lifetime")] Arc<()>);

impl Checkpointer {
    /// Starts checkpointing the database at `path`. The connection is opened on the first tick,
    /// like the pools' connections, so a database that does not exist yet is no error here.
    pub(crate) fn spawn(path: &str) -> std::io::Result<Self> {
        let alive = Arc::new(());
        let watch = Arc::downgrade(&alive);
        let path = path.to_owned();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || run(&path, &watch))?;
        Ok(Self(alive))
    }
}

fn run(path: &str, alive: &Weak<()>) {
    let mut conn: Option<SqliteConnection> = None;
    while alive.strong_count() > 0 {
        std::thread::sleep(INTERVAL);
        let c = match &mut conn {
            Some(c) => c,
            None => match SqliteConnection::establish(path) {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    tracing::debug!(error = %e, "no checkpoint connection yet");
                    continue;
                }
            },
        };
        // Busy only while the writer's backstop checkpoint runs; the next tick tries again.
        if let Err(e) = c.batch_execute("PRAGMA wal_checkpoint(PASSIVE)") {
            tracing::debug!(error = %e, "checkpoint skipped");
        }
    }
}
