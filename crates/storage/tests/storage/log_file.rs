//! SQLite's log file (`-wal`) after a large transaction.

use std::time::{Duration, Instant};

use shortlink_domain::{RateLimit, Timestamp, Workspace, WorkspaceId};

use crate::TestDatabase;

/// The size the writer cuts the log back to (`journal_size_limit` in `sqlite/pool.rs`).
const LOG_LIMIT: u64 = 32 * 1024 * 1024;

/// A log file keeps its size when it starts over: one that a large transaction grew to 150 MB
/// stayed that size for good, through restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_grown_by_a_large_transaction_is_cut_back() {
    use diesel::{Connection, SqliteConnection, connection::SimpleConnection};

    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let path = db.url.trim_start_matches("sqlite://").to_owned();
    let log = format!("{path}-wal");
    // Another connection (the command line's, say) writes 48 MiB in one transaction.
    let mut other = SqliteConnection::establish(&path).unwrap();
    other
        .batch_execute(
            "PRAGMA busy_timeout = 5000; BEGIN IMMEDIATE; CREATE TABLE bulk (b BLOB); \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 48) \
             INSERT INTO bulk SELECT zeroblob(1048576) FROM n; DROP TABLE bulk; COMMIT;",
        )
        .unwrap();
    drop(other);
    let grown = std::fs::metadata(&log).unwrap().len();
    assert!(grown > LOG_LIMIT, "the log grew to {grown} bytes");

    // The checkpoint thread copies the log back and lets the next write start it over.
    let deadline = Instant::now() + Duration::from_secs(10);
    for n in 0.. {
        let workspace = Workspace {
            id: WorkspaceId::generate(),
            name: format!("w{n}"),
            rate_limit: RateLimit::new(1).unwrap(),
            created_at: Timestamp::now(),
        };
        store.create_workspace(&workspace).await.unwrap();
        let size = std::fs::metadata(&log).unwrap().len();
        if size <= LOG_LIMIT {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the log is still {size} bytes after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
