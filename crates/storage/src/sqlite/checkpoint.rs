//! SQLite checkpoints off the writer's path.
//!
//! In WAL mode a commit that takes the log past SQLite's auto-checkpoint threshold (1000 pages)
//! copies the log back into the database file and syncs it before the commit returns. With a
//! single writer connection that stalls every write queued behind it: in bulk creation it was a
//! fifth of the writer's CPU, plus the wait for `fsync` (docs/PERFORMANCE-ROUNDS.md, "What the
//! second round changed, and why"). A thread of its
//! own checkpoints instead, in `PASSIVE` mode (it never blocks the writer or a reader).
//!
//! A passive checkpoint copies the log but cannot start it over: the log restarts from its
//! beginning only when a write begins after everything in it was copied, which under a steady
//! stream of writes may never happen, and then the log grows until the writer's own threshold
//! (`wal_autocheckpoint` in `pool.rs`, ten times SQLite's) makes every commit checkpoint
//! again. So once the log is past [`RESTART_PAGES`], this thread checkpoints in `RESTART` mode:
//! it waits for the transaction in progress, copies the little the passive passes left, and
//! lets the next write start the log over.

use std::sync::{Arc, Weak};
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};

/// How often the log is copied back.
const INTERVAL: Duration = Duration::from_millis(100);

/// Log size (pages of 4 KiB) past which a checkpoint also restarts the log.
const RESTART_PAGES: i64 = 4_000;

/// How long a restarting checkpoint waits for the transaction in progress.
const RESTART_WAIT: &str = "PRAGMA busy_timeout = 1000";

/// What `PRAGMA wal_checkpoint` reports.
#[derive(diesel::QueryableByName)]
struct Checkpointed {
    /// Pages in the log.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    log: i64,
}

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
            None => match SqliteConnection::establish(path)
                .map_err(|e| e.to_string())
                .and_then(|mut c| {
                    c.batch_execute(RESTART_WAIT)
                        .map(|()| c)
                        .map_err(|e| e.to_string())
                }) {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    tracing::debug!(error = %e, "no checkpoint connection yet");
                    continue;
                }
            },
        };
        // Busy only while another checkpoint runs; the next tick tries again.
        if let Err(e) = checkpoint(c) {
            tracing::debug!(error = %e, "checkpoint skipped");
        }
    }
}

fn checkpoint(c: &mut SqliteConnection) -> diesel::QueryResult<()> {
    let mut run = |mode| -> diesel::QueryResult<Checkpointed> {
        diesel::RunQueryDsl::get_result(
            diesel::sql_query(format!("PRAGMA wal_checkpoint({mode})")),
            c,
        )
    };
    if run("PASSIVE")?.log > RESTART_PAGES {
        run("RESTART")?;
    }
    Ok(())
}
