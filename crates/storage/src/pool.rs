//! Connection pools with explicit timeouts, and PostgreSQL's per-connection set-up (SQLite's is
//! in `sqlite/pool.rs`).

use std::time::Duration;

use deadpool::Runtime;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::FutureExt;

use crate::StorageError;

/// How long a PostgreSQL call may take in all before it fails as unavailable: an API request
/// answers 503 within this (plus its own work) whatever the network does.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

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

/// PostgreSQL's one pool, for reads and writes. Its connections are made on `runtime` (the
/// store's) when there is one, whichever runtime asks for them: a connection is driven by a task
/// of the runtime that makes it, and an HTTP worker's runtime ends when the server stops, while
/// the stop's last writes still use the pool (a call in flight on such a connection failed with
/// "connection closed").
pub(crate) fn postgres(
    url: &str,
    size: usize,
    runtime: Option<tokio::runtime::Handle>,
) -> Result<PgPool, StorageError> {
    let mut config = ManagerConfig::default();
    config.custom_setup = Box::new(move |url| {
        let connect = connect_postgres(url.to_owned());
        match &runtime {
            Some(runtime) => {
                let made = runtime.spawn(connect);
                async move {
                    made.await
                        .map_err(|e| diesel::ConnectionError::BadConnection(e.to_string()))?
                }
                .boxed()
            }
            None => connect.boxed(),
        }
    });
    build(
        AsyncDieselConnectionManager::new_with_config(url, config),
        size,
    )
}

/// A connection to `url`, set up.
async fn connect_postgres(url: String) -> diesel::ConnectionResult<AsyncPgConnection> {
    let mut conn = AsyncPgConnection::establish(&url).await?;
    conn.batch_execute(PG_SETUP)
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}
