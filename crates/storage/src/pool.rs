//! Connection pools with explicit timeouts, and PostgreSQL's per-connection set-up (SQLite's is
//! in `sqlite/pool.rs`).

use std::time::Duration;

use deadpool::Runtime;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::FutureExt;

use crate::StorageError;

/// How long a caller waits for a pooled connection, a new connection, or a health check before
/// the database counts as unavailable (503) rather than the request hanging.
const POOL_TIMEOUT: Duration = Duration::from_secs(5);

/// A statement that runs longer than this is cancelled, so one runaway query cannot hold a
/// pooled connection forever.
const PG_SETUP: &str = "SET statement_timeout = '15s'";

pub(crate) type PgPool = Pool<AsyncPgConnection>;

/// A pool of at most `size` connections with the timeouts above.
pub(crate) fn build<C>(
    manager: AsyncDieselConnectionManager<C>,
    size: usize,
) -> Result<Pool<C>, StorageError>
where
    C: diesel_async::pooled_connection::PoolableConnection + Send + 'static,
    AsyncDieselConnectionManager<C>: deadpool::managed::Manager<Type = C>,
{
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(POOL_TIMEOUT))
        .create_timeout(Some(POOL_TIMEOUT))
        .recycle_timeout(Some(POOL_TIMEOUT))
        .build()
        .map_err(|e| StorageError::Unavailable(e.to_string()))
}

/// PostgreSQL's one pool, for reads and writes.
pub(crate) fn postgres(url: &str, size: usize) -> Result<PgPool, StorageError> {
    let mut config = ManagerConfig::default();
    config.custom_setup = Box::new(|url| {
        async move {
            let mut conn = AsyncPgConnection::establish(url).await?;
            conn.batch_execute(PG_SETUP)
                .await
                .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        }
        .boxed()
    });
    build(
        AsyncDieselConnectionManager::new_with_config(url, config),
        size,
    )
}
