//! [`Store`]: the one storage API, whichever database is underneath.

use shortlink_domain::{
    ApiKey, ApiKeyHash, ApiKeyId, AttemptRecord, BaseUrl, ClaimedDelivery, Delivery, DeliveryQueue,
    EventKind, InFlight, Link, LinkId, LinkPatch, LinkRef, MessageId, RateLimit, Timestamp,
    Webhook, WebhookId, Workspace, WorkspaceId,
};

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::idempotency::{ClaimOutcome, IdempotencyClaim, PlacedCompletion, StoredResponse};
use crate::model::{
    AuthenticatedKey, ClickBatch, CounterKey, CreateOutcome, DAY, DatabaseKind, Dimension,
    EventFilter, ExportedEvent, LinkFilter, LinkUpdate, NewLink, PoolOptions, PoolUsage,
    RedirectTarget, StoreOptions, Tally,
};
use crate::pg::Postgres;
use crate::pg::changes::ChangeListener;
use crate::pool::{self, ANSWER_WITHIN, PgPool};
use crate::sqlite::Sqlite;
use crate::{StorageError, migrate};

/// How long after its end a day's analytics are rolled up: clicks reach the database within
/// seconds of their redirect, and the few that come later (a flush retried after an outage, a
/// journal replayed after a crash) mark the day stale again.
pub const ROLL_UP_AFTER: i64 = 3_600_000;

/// How long reading one day's rollup may take on PostgreSQL (seven aggregates over the day's
/// events, each also bound by the connection's statement timeout).
const ROLL_UP_WITHIN: Duration = Duration::from_secs(120);

/// `call`, or [`StorageError::Unavailable`] once `bound` has passed.
async fn within<T>(
    bound: Duration,
    call: impl std::future::Future<Output = Result<T, StorageError>>,
) -> Result<T, StorageError> {
    tokio::time::timeout(bound, call).await.map_err(|_| {
        StorageError::Unavailable(format!(
            "the database did not answer within {} s",
            bound.as_secs_f32()
        ))
    })?
}

/// The same bound for a flush of clicks, which may write many rows: long enough for the largest
/// batch, short enough that a flush stuck on a dead connection gives its batch back and retries.
const WRITE_CLICKS_WITHIN: Duration = Duration::from_secs(30);

#[derive(Clone)]
enum Backend {
    Postgres(PgPool),
    Sqlite(Arc<Sqlite>),
}

/// The storage API. Cheap to clone (it holds pools).
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    url: String,
    /// The runtime SQLite queries run on (see [`Store::detached`]) and PostgreSQL connections are
    /// made on (see `pool::postgres`).
    runtime: Option<tokio::runtime::Handle>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

/// Runs one query function from `queries/` on a connection of the right pool: `read`
/// queries go to SQLite's readers, `write` ones to its single writer; PostgreSQL has one pool
/// for both. `hooks` hands the query the backend's side of it ([`crate::hooks::Hooks`]).
macro_rules! dispatch {
    ($self:ident, $access:ident, $func:ident($($arg:expr),* $(,)?)) => {
        match &$self.backend {
            Backend::Postgres(pool) => {
                let mut conn = pool.get().await?;
                crate::pg::queries::$func(&mut conn, $($arg),*).await
            }
            Backend::Sqlite(sqlite) => dispatch!(@sqlite $access, sqlite, |c| {
                crate::sqlite::queries::$func(c, $($arg),*).await
            }),
        }
    };
    ($self:ident, $access:ident, $func:ident($($arg:expr),* $(,)?), hooks) => {
        match &$self.backend {
            Backend::Postgres(pool) => {
                let mut conn = pool.get().await?;
                crate::pg::queries::$func(&mut conn, $($arg,)* &Postgres).await
            }
            Backend::Sqlite(sqlite) => dispatch!(@sqlite $access, sqlite, |c| {
                crate::sqlite::queries::$func(c, $($arg,)* &**sqlite).await
            }),
        }
    };
    // A write that changes links: on SQLite, its effect on the redirect index and the recent
    // codes (`Sqlite::$apply`) is applied after it ends and before the single writer connection
    // is released, so in commit order.
    ($self:ident, write, $func:ident($($arg:expr),* $(,)?), hooks, then: $apply:ident) => {
        match &$self.backend {
            Backend::Postgres(pool) => {
                let mut conn = pool.get().await?;
                crate::pg::queries::$func(&mut conn, $($arg,)* &Postgres).await
            }
            Backend::Sqlite(sqlite) => {
                let mut writer = sqlite.writer().await?;
                let (conn, held) = writer.split();
                let result = crate::sqlite::queries::$func(conn, $($arg,)* &**sqlite).await;
                sqlite.$apply(held, &result);
                result
            }
        }
    };
    (@sqlite read, $sqlite:ident, |$c:ident| $body:expr) => {{
        let mut conn = $sqlite.readers().get().await?;
        let $c = &mut *conn;
        $body
    }};
    (@sqlite write, $sqlite:ident, |$c:ident| $body:expr) => {{
        let mut writer = $sqlite.writer().await?;
        let $c = writer.conn();
        $body
    }};
}

// After `dispatch!`, which they use (a macro is seen by what follows it).
mod accounts;
mod analytics;
mod clicks;
mod idempotency;
mod links;
mod webhooks;

/// The database a URL names.
#[derive(Debug, PartialEq, Eq)]
enum Location<'a> {
    /// `postgres://…` or `postgresql://…`.
    Postgres,
    /// `sqlite://PATH` or `sqlite:PATH`: the path (or a SQLite `file:` URI) after the prefix.
    Sqlite(&'a str),
}

/// Where `url` points, or why this crate cannot use it. Every URL a store is made for passes
/// here, so an in-memory SQLite database is refused in one place, in each of its spellings: with
/// the connections a store makes (the migrations', the writer, the readers), each would open a
/// database of its own, empty but for what it wrote, and nothing would outlive the process.
fn locate(url: &str) -> Result<Location<'_>, StorageError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Location::Postgres);
    }
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"));
    if is_in_memory(path.unwrap_or(url)) {
        return Err(StorageError::InMemory(url.to_owned()));
    }
    match path {
        Some(path) if !path.is_empty() => Ok(Location::Sqlite(path)),
        _ => Err(StorageError::UnsupportedUrl(url.to_owned())),
    }
}

/// Whether SQLite opens `path` as a database in memory: `:memory:`, or a `file:` URI whose path
/// is `:memory:` (`file::memory:`) or whose parameters ask for one (`mode=memory`, or the
/// `memdb` VFS). A `file:` URI with no path counts too: SQLite opens it as a temporary file that
/// is, like a database in memory, one connection's own and gone when it closes.
fn is_in_memory(path: &str) -> bool {
    if path == ":memory:" {
        return true;
    }
    let Some(uri) = path.strip_prefix("file:") else {
        return false;
    };
    let uri = uri.split('#').next().unwrap_or_default();
    let (file, query) = uri.split_once('?').unwrap_or((uri, ""));
    file == ":memory:"
        || file.is_empty()
        || query
            .split('&')
            .any(|param| matches!(param, "mode=memory" | "vfs=memdb"))
}

/// Where a database's schema stands against the migrations this build embeds (migration
/// versions are their directories' dates and numbers, so they order as text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    /// No migration has run: a new database.
    New {
        /// The newest migration this build embeds.
        expected: String,
    },
    /// The newest migration this build embeds is the newest applied.
    Current,
    /// An older build's schema: [`Store::migrate`] brings it up to date.
    Older {
        /// The newest migration applied.
        found: String,
        /// The newest migration this build embeds.
        expected: String,
    },
    /// A newer build's schema, which this build does not serve.
    Newer {
        /// The newest migration applied.
        found: String,
        /// The newest migration this build embeds.
        expected: String,
    },
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Schema::New { expected } => {
                write!(
                    f,
                    "the database has no schema yet; this build expects migration {expected}"
                )
            }
            Schema::Current => write!(f, "the database schema is this build's"),
            Schema::Older { found, expected } | Schema::Newer { found, expected } => write!(
                f,
                "the database schema is at migration {found}, this build expects {expected}"
            ),
        }
    }
}

impl Store {
    /// The SQLite state, if this is SQLite.
    fn sqlite(&self) -> Option<&Arc<Sqlite>> {
        match &self.backend {
            Backend::Sqlite(sqlite) => Some(sqlite),
            Backend::Postgres(_) => None,
        }
    }

    /// Runs a query to completion even if the caller stops waiting. diesel-async's SQLite
    /// wrapper, when a query's future is dropped half-way (a client disconnected), blocks in
    /// place until the blocking task ends, and that panics on a single-threaded runtime such as
    /// an actix worker's. So SQLite queries run as tasks of the runtime that opened the store,
    /// and a caller that goes away merely stops waiting for the task. PostgreSQL queries are
    /// cancel-safe and run in place, within [`ANSWER_WITHIN`].
    async fn detached<T, F>(&self, query: impl FnOnce(Store) -> F) -> Result<T, StorageError>
    where
        F: std::future::Future<Output = Result<T, StorageError>> + Send + 'static,
        T: Send + 'static,
    {
        self.detached_within(ANSWER_WITHIN, query).await
    }

    /// [`Store::detached`], with PostgreSQL given `bound` in all (pool wait, connect, the
    /// statements): a database that stops answering (a frozen network drops no connection, and
    /// the server's `statement_timeout` cannot reach a client it cannot talk to) fails the call
    /// as [`StorageError::Unavailable`] instead of hanging it. A connection abandoned half-way is
    /// discarded by the pool, which checks it on return.
    async fn detached_within<T, F>(
        &self,
        bound: Duration,
        query: impl FnOnce(Store) -> F,
    ) -> Result<T, StorageError>
    where
        F: std::future::Future<Output = Result<T, StorageError>> + Send + 'static,
        T: Send + 'static,
    {
        match (&self.backend, &self.runtime) {
            (Backend::Sqlite(_), Some(runtime)) => runtime
                .spawn(query(self.clone()))
                .await
                .map_err(|e| StorageError::Unavailable(format!("storage task failed: {e}")))?,
            (Backend::Sqlite(_), None) => query(self.clone()).await,
            (Backend::Postgres(_), _) => within(bound, query(self.clone())).await,
        }
    }

    /// Opens pools for `url`: `sqlite://PATH` (the file is created if missing) or
    /// `postgres://…`; an in-memory SQLite database is refused ([`StorageError::InMemory`]).
    /// Connections are made lazily. Nothing else: [`Store::open`] is this and
    /// every step a store needs before use; this alone is for a tool that migrates on its own
    /// command ([`Store::migrate`]).
    ///
    /// Call it within a tokio runtime, which the store then uses for its connections and its
    /// database work for good: once that runtime is shut down, every call fails
    /// ([`StorageError::Unavailable`], "task … was cancelled"), whichever runtime makes it.
    pub fn connect(url: &str, options: PoolOptions) -> Result<Self, StorageError> {
        Self::connect_to(url, options, true)
    }

    /// [`Store::connect`] for a tool that works on what a database holds (lists, changes): a
    /// SQLite file that does not exist is [`StorageError::Unavailable`] rather than made, so a
    /// mistyped path is said to be one, not shown as an empty database (and left behind).
    pub fn connect_existing(url: &str, options: PoolOptions) -> Result<Self, StorageError> {
        Self::connect_to(url, options, false)
    }

    fn connect_to(url: &str, options: PoolOptions, create: bool) -> Result<Self, StorageError> {
        let location = locate(url)?;
        if let Location::Sqlite(path) = location
            && !create
            && !std::path::Path::new(path).exists()
        {
            return Err(StorageError::Unavailable(format!(
                "no SQLite database at {path}"
            )));
        }
        let runtime = tokio::runtime::Handle::try_current().ok();
        let backend = match location {
            Location::Postgres => {
                let size = options.max_connections.max(2);
                Backend::Postgres(pool::postgres(url, size, runtime.clone())?)
            }
            Location::Sqlite(path) => {
                let readers = options.max_connections.clamp(1, 8);
                Backend::Sqlite(Arc::new(Sqlite::open(path, readers)?))
            }
        };
        Ok(Self {
            backend,
            url: url.to_owned(),
            runtime,
        })
    }

    /// Opens the database at `url` ready for use, in the order it needs: connects, applies
    /// pending migrations, makes the click events' partitions of this month and the
    /// `MONTHS_AHEAD` (three) after it (PostgreSQL, `pg/partitions.rs`), and, for a server
    /// ([`StoreOptions::server`]) on SQLite, starts the click journal (it folds what an earlier
    /// process left, under the file's server lock, taken before the migrations: a second server
    /// on the file is refused before it changes anything), loads the redirect index and makes
    /// the webhook deliveries an earlier process leased due again (no other server uses the
    /// file). Its counterpart is [`Store::shutdown`].
    pub async fn open(url: &str, options: StoreOptions) -> Result<Self, StorageError> {
        let store = Self::connect(url, options.pool)?;
        if let (Some(_), Some(sqlite)) = (&options.server, store.sqlite()) {
            sqlite.lock_for_server()?;
        }
        store.migrate().await?;
        // The click events' partitions for this month and the `MONTHS_AHEAD` after it exist
        // before any is written. (Nothing is deleted without `keep_after`, so the batch size is
        // never used.)
        store.maintain_events(Timestamp::now(), None, 1).await?;
        if let Some(server) = options.server
            && store.kind() == DatabaseKind::Sqlite
        {
            store.start_journal(server.click_fold_interval).await?;
            store.load_index_within(server.redirect_index_mib).await?;
            // The journal's start took the file's lock: no other server uses it now.
            let ended = dispatch!(store, write, end_leases())?;
            if ended > 0 {
                tracing::info!(
                    deliveries = ended,
                    "webhook deliveries leased by a previous run that did not stop are due again"
                );
            }
        }
        Ok(store)
    }

    /// [`Store::load_index`] with a budget in MiB (0: none), saying how it went in the
    /// log.
    async fn load_index_within(&self, mib: usize) -> Result<(), StorageError> {
        if mib == 0 {
            return Ok(());
        }
        let started = std::time::Instant::now();
        if self.load_index(mib << 20).await? {
            tracing::info!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "redirect index loaded"
            );
        } else {
            tracing::warn!(
                budget_mib = mib,
                "the links do not fit the redirect index: redirects read the database (raise \
                 --redirect-index-mib)"
            );
        }
        Ok(())
    }

    /// Ends a server's use of the store, the counterpart of [`Store::open`]: on SQLite, folds
    /// the click journal and the recent codes into the file, so that the file alone holds every
    /// count and finds every link by its code quickly. Nothing to do on PostgreSQL. Call it once
    /// nothing records clicks or creates links any more. A fold that fails loses nothing (the
    /// next start folds), so both are tried; the first failure is returned.
    pub async fn shutdown(&self) -> Result<(), StorageError> {
        let clicks = self.fold_journal().await;
        let codes = self.fold_recent_codes().await;
        clicks.and(codes)
    }

    /// Which database this is.
    pub fn kind(&self) -> DatabaseKind {
        match self.backend {
            Backend::Postgres(_) => DatabaseKind::Postgres,
            Backend::Sqlite(_) => DatabaseKind::Sqlite,
        }
    }

    /// Applies pending migrations; returns how many ran.
    pub async fn migrate(&self) -> Result<usize, StorageError> {
        match &self.backend {
            Backend::Postgres(_) => migrate::postgres(self.url.clone()).await,
            Backend::Sqlite(sqlite) => {
                let applied = migrate::sqlite(sqlite.path().to_owned()).await?;
                sqlite.remember_file();
                Ok(applied)
            }
        }
    }

    /// Succeeds when the database answers a trivial query.
    pub async fn ping(&self) -> Result<(), StorageError> {
        self.detached(|s| async move { dispatch!(s, read, ping()) })
            .await
    }

    /// Succeeds when the database answers and its newest applied migration is the newest this
    /// build embeds (a readiness probe: a database recreated empty, or one migrated by a newer
    /// build, is not one this server can serve), and, on SQLite, when its path still names the
    /// file migrated (not deleted or replaced under the server).
    pub async fn check_ready(&self) -> Result<(), StorageError> {
        if let Backend::Sqlite(sqlite) = &self.backend {
            sqlite.check_file()?;
        }
        match self.schema().await? {
            Schema::Current => Ok(()),
            other => Err(StorageError::Unavailable(other.to_string())),
        }
    }

    /// Where the database's schema stands against the migrations this build embeds.
    pub async fn schema(&self) -> Result<Schema, StorageError> {
        let found = self
            .detached(|s| async move { dispatch!(s, read, schema_version()) })
            .await?;
        let expected = crate::migrate::latest_version(self.kind()).unwrap_or_default();
        Ok(match found {
            None => Schema::New { expected },
            Some(found) if found == expected => Schema::Current,
            Some(found) if found < expected => Schema::Older { found, expected },
            Some(found) => Schema::Newer { found, expected },
        })
    }

    /// Runs `delete`, a short transaction deleting up to `batch` rows (of each kind it deletes),
    /// until a round deletes fewer; returns how many rows it deleted in all.
    async fn delete_in_batches<F>(
        &self,
        batch: i64,
        delete: impl Fn(Store) -> F,
    ) -> Result<usize, StorageError>
    where
        F: std::future::Future<Output = Result<usize, StorageError>> + Send + 'static,
    {
        let full = usize::try_from(batch).unwrap_or(usize::MAX);
        let mut deleted = 0;
        loop {
            let n = self.detached(&delete).await?;
            deleted += n;
            if n < full {
                return Ok(deleted);
            }
        }
    }

    /// On PostgreSQL, a connection of its own that hears every change other instances (and this
    /// one) make to links and keys, for caches to follow; `None` on SQLite, whose one server
    /// makes every change itself.
    pub async fn listen_for_changes(&self) -> Result<Option<ChangeListener>, StorageError> {
        match &self.backend {
            Backend::Postgres(_) => within(ANSWER_WITHIN, ChangeListener::connect(&self.url))
                .await
                .map(Some),
            Backend::Sqlite(_) => Ok(None),
        }
    }

    /// How busy the connection pools are.
    pub fn pool_usage(&self) -> Vec<PoolUsage> {
        match &self.backend {
            Backend::Postgres(pool) => vec![PoolUsage::of("postgres", pool)],
            Backend::Sqlite(sqlite) => vec![
                PoolUsage::of("reader", sqlite.readers()),
                PoolUsage::of("writer", sqlite.writer_pool()),
            ],
        }
    }
}

/// The steps of [`Store::open`] and [`Store::shutdown`] one at a time, for tests that set a
/// store up by hand; an embedder has the one lifecycle and need not know a backend's steps.
#[cfg(feature = "testing")]
impl Store {
    /// On SQLite, starts the click journal (as [`Store::open`] does for a server); whether it is
    /// on. A second store on the same file is refused ([`StorageError::Unavailable`]).
    pub async fn start_click_journal(&self, fold_interval: Duration) -> Result<bool, StorageError> {
        self.start_journal(fold_interval).await
    }

    /// On SQLite, loads the redirect index (as [`Store::open`] does for a server); whether the
    /// links fit in `budget_bytes`.
    pub async fn load_redirect_index(&self, budget_bytes: usize) -> Result<bool, StorageError> {
        self.load_index(budget_bytes).await
    }

    /// On SQLite, folds the click journal into the counters now (as [`Store::shutdown`] does).
    pub async fn fold_clicks(&self) -> Result<(), StorageError> {
        self.fold_journal().await
    }

    /// On SQLite, folds the recent codes into the code index now (as [`Store::shutdown`] does).
    pub async fn fold_codes(&self) -> Result<(), StorageError> {
        self.fold_recent_codes().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_an_in_memory_sqlite_database_is_refused() {
        for url in [
            ":memory:",
            "sqlite::memory:",
            "sqlite://:memory:",
            "file::memory:",
            "sqlite:file::memory:",
            "sqlite://file::memory:?cache=shared",
            "sqlite://file:links.db?mode=memory",
            "sqlite://file:links?cache=shared&mode=memory#part",
            "sqlite://file:/links.db?vfs=memdb",
            "sqlite://file:",
            "sqlite:file:?mode=rwc",
        ] {
            assert!(
                matches!(locate(url), Err(StorageError::InMemory(ref u)) if u == url),
                "{url}: {:?}",
                locate(url)
            );
        }
    }

    #[test]
    fn files_and_postgres_are_located_and_other_urls_refused() {
        for (url, path) in [
            ("sqlite://shortlink.db", "shortlink.db"),
            ("sqlite:shortlink.db", "shortlink.db"),
            ("sqlite:///var/lib/memory.db", "/var/lib/memory.db"),
            ("sqlite://file:links.db?mode=rwc", "file:links.db?mode=rwc"),
            ("sqlite://memory", "memory"),
        ] {
            assert_eq!(locate(url).ok(), Some(Location::Sqlite(path)), "{url}");
        }
        for url in ["postgres://u@h/db", "postgresql://u@h/db"] {
            assert_eq!(locate(url).ok(), Some(Location::Postgres), "{url}");
        }
        for url in [
            "mysql://x",
            "sqlite://",
            "sqlite:",
            "shortlink.db",
            "file:links.db",
        ] {
            assert!(
                matches!(locate(url), Err(StorageError::UnsupportedUrl(_))),
                "{url}"
            );
        }
    }

    /// The refusal comes before anything is opened, and says what to do instead.
    #[test]
    fn a_store_on_an_in_memory_database_is_refused_with_the_reason() {
        let error = Store::connect("sqlite::memory:", PoolOptions::default())
            .expect_err("an in-memory database is refused");
        let message = error.to_string();
        assert!(message.contains("in-memory"), "{message}");
        assert!(message.contains("sqlite://PATH"), "{message}");
        assert!(
            Store::connect_existing("sqlite://:memory:", PoolOptions::default()).is_err(),
            "connect_existing too"
        );
    }
}
