//! Connection pools with explicit timeouts, and PostgreSQL's connections: how one is made (every
//! PostgreSQL connection of the crate, pooled or not, through [`establish`]) and set up (SQLite's
//! set-up is in `sqlite/pool.rs`).

use std::time::Duration;

use deadpool::Runtime;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
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
    let mut conn = establish(&url).await?;
    conn.batch_execute(PG_SETUP)
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}

/// A connection to `url`, not set up. diesel-async's own `establish` reports a connection that
/// could not be made by the driver's summary alone ("error connecting to server"), without its
/// cause; made through the driver, the error keeps the cause and says where it was tried (hosts
/// and ports, never the password): "error connecting to server at 127.0.0.1:5999: Connection
/// refused (os error 111)". The same connection as diesel-async's, made the same way.
pub(crate) async fn establish(url: &str) -> diesel::ConnectionResult<AsyncPgConnection> {
    let config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| diesel::ConnectionError::InvalidConnectionUrl(explained(&e, None)))?;
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| diesel::ConnectionError::BadConnection(explained(&e, Some(&config))))?;
    AsyncPgConnection::try_from_client_and_connection(client, connection).await
}

/// `error` with where it happened and its causes, on one line: "error connecting to server at
/// 127.0.0.1:5999: Connection refused (os error 111)".
fn explained(error: &tokio_postgres::Error, config: Option<&tokio_postgres::Config>) -> String {
    let mut text = error.to_string();
    if let Some(places) = config.map(places).filter(|p| !p.is_empty()) {
        text.push_str(" at ");
        text.push_str(&places);
    }
    let mut cause = std::error::Error::source(error);
    while let Some(e) = cause {
        text.push_str(": ");
        // A server's error may add lines (DETAIL, HINT).
        text.push_str(&e.to_string().replace('\n', "; "));
        cause = e.source();
    }
    text
}

/// Where the driver tries to connect, in its order: each host (or `hostaddr`) with its port, as
/// `tokio_postgres::connect` pairs them.
fn places(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let (hosts, addrs, ports) = (
        config.get_hosts(),
        config.get_hostaddrs(),
        config.get_ports(),
    );
    let place = |i: usize| {
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        match (addrs.get(i), hosts.get(i)) {
            (Some(addr), _) => std::net::SocketAddr::new(*addr, port).to_string(),
            (None, Some(Host::Tcp(host))) if host.contains(':') => format!("[{host}]:{port}"),
            (None, Some(Host::Tcp(host))) => format!("{host}:{port}"),
            #[cfg(unix)]
            (None, Some(Host::Unix(dir))) => format!("{}/.s.PGSQL.{port}", dir.display()),
            (None, None) => String::new(),
        }
    };
    let all: Vec<String> = (0..hosts.len().max(addrs.len())).map(place).collect();
    all.join(", ")
}
