//! SQLite's pools: one writer connection and read-only connections beside it, each set up by the
//! pool as it is made.

use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::{AsyncConnection, SimpleAsyncConnection};
use futures_util::FutureExt;

use super::Conn;
use crate::StorageError;
use crate::pool::build;

/// The writer connection: wait for a lock instead of failing at once, enforce foreign keys (off
/// by default in SQLite), and fsync at checkpoints only. With WAL,
/// `synchronous=NORMAL` loses nothing when the process crashes; only an OS crash or power cut can
/// drop the last transactions, which is the trade every SQLite-backed service makes for speed.
///
/// A 16 MiB page cache holds the click counters of a million links (~10 bytes a link), so a
/// flush neither reads their pages back nor spills them mid-transaction; the statement journal
/// of a many-row `UPDATE` is kept in memory rather than in a temporary file. Checkpoints are
/// another thread's work (`checkpoint.rs`); the writer's own threshold is a backstop. All
/// measured with `just bench` (docs/PERFORMANCE-ROUNDS.md, "What the second round changed, and
/// why"). The log file keeps its size when it starts over; one a large transaction grew (a
/// deleted endpoint's deliveries: 150 MB) is cut back to 32 MiB then, twice the size at which
/// the checkpoint thread starts it over, so the usual log is never cut and grown again.
const SQLITE_PRAGMAS: &str = concat!(
    "PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; ",
    "PRAGMA cache_size = -16384; PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = 10000; ",
    "PRAGMA journal_size_limit = 33554432;"
);

/// Reader connections: they cannot write, so a write sent to the wrong pool fails loudly.
pub(crate) const SQLITE_READER_PRAGMAS: &str =
    "PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON; PRAGMA query_only = ON;";

pub(crate) type SqlitePool = Pool<Conn>;

/// SQLite allows one writer at a time. Writes go through a pool of exactly one connection, so
/// they queue in the pool instead of contending for the file lock, and reads use their own
/// connections beside it (WAL lets them run while the writer writes).
pub(crate) fn pools(path: &str, readers: usize) -> Result<(SqlitePool, SqlitePool), StorageError> {
    let pool = |pragmas: &'static str, size| {
        let mut config = ManagerConfig::<Conn>::default();
        // A local file cannot drop a connection: skip the `SELECT 1` on every checkout.
        config.recycling_method = RecyclingMethod::Fast;
        config.custom_setup = Box::new(move |url| {
            async move {
                let mut conn = Conn::establish(url).await?;
                conn.batch_execute(pragmas)
                    .await
                    .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
                Ok(conn)
            }
            .boxed()
        });
        build(
            AsyncDieselConnectionManager::new_with_config(path, config),
            size,
        )
    };
    let writer = pool(SQLITE_PRAGMAS, 1)?;
    let readers = pool(SQLITE_READER_PRAGMAS, readers)?;
    Ok((readers, writer))
}
