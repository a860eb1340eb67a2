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
use crate::pool::{self, PgPool};
use crate::sqlite::Sqlite;
use crate::{StorageError, migrate};

/// How long a PostgreSQL call may take in all before it fails as unavailable: an API request
/// answers 503 within this (plus its own work) whatever the network does.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

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

fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .filter(|p| !p.is_empty())
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
    /// `postgres://…`. Connections are made lazily. Nothing else: [`Store::open`] is this and
    /// every step a store needs before use; this alone is for a tool that migrates on its own
    /// command ([`Store::migrate`]).
    ///
    /// Call it within a tokio runtime, which the store then uses for its connections and its
    /// database work for good: once that runtime is shut down, every call fails
    /// ([`StorageError::Unavailable`], "task … was cancelled"), whichever runtime makes it.
    pub fn connect(url: &str, options: PoolOptions) -> Result<Self, StorageError> {
        let runtime = tokio::runtime::Handle::try_current().ok();
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let size = options.max_connections.max(2);
            Backend::Postgres(pool::postgres(url, size, runtime.clone())?)
        } else if let Some(path) = sqlite_path(url) {
            let readers = options.max_connections.clamp(1, 8);
            Backend::Sqlite(Arc::new(Sqlite::open(path, readers)?))
        } else {
            return Err(StorageError::UnsupportedUrl(url.to_owned()));
        };
        Ok(Self {
            backend,
            url: url.to_owned(),
            runtime,
        })
    }

    /// Opens the database at `url` ready for use, in the order it needs: connects, applies
    /// pending migrations, makes the click events' partitions of this month and the next
    /// (PostgreSQL), and, for a server ([`StoreOptions::server`]) on SQLite, starts the click
    /// journal (first: it takes the file's server lock, so a second server on the file is
    /// refused before anything is loaded, and it folds what an earlier process left), loads the
    /// redirect index and makes the webhook deliveries an earlier process leased due again (no
    /// other server uses the file). Its counterpart is [`Store::shutdown`].
    pub async fn open(url: &str, options: StoreOptions) -> Result<Self, StorageError> {
        let store = Self::connect(url, options.pool)?;
        store.migrate().await?;
        // The click events' partitions for this month and the next exist before any is written.
        // (Nothing is deleted without `keep_after`, so the batch size is never used.)
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
        let found = self
            .detached(|s| async move { dispatch!(s, read, schema_version()) })
            .await?;
        let expected = crate::migrate::latest_version(self.kind());
        if found == expected {
            Ok(())
        } else {
            Err(StorageError::Unavailable(format!(
                "the database schema is at migration {}, this build expects {}",
                found.as_deref().unwrap_or("none"),
                expected.as_deref().unwrap_or("none")
            )))
        }
    }

    /// Creates a workspace; a taken name is [`StorageError::AlreadyExists`], one the domain
    /// refuses ([`Workspace::validate_name`]) [`StorageError::Invalid`].
    pub async fn create_workspace(&self, workspace: &Workspace) -> Result<(), StorageError> {
        Workspace::validate_name(&workspace.name).map_err(StorageError::Invalid)?;
        let workspace = workspace.clone();
        self.detached(|s| async move { dispatch!(s, write, insert_workspace(&workspace)) })
            .await
    }

    /// Sets a workspace's rate limit; `false` when there is no such workspace. Every instance
    /// applies it within its key cache's lifetime, and on PostgreSQL at once.
    pub async fn set_rate_limit(
        &self,
        workspace: WorkspaceId,
        rate: RateLimit,
    ) -> Result<bool, StorageError> {
        self.detached(|s| async move { dispatch!(s, write, set_rate_limit(workspace, rate)) })
            .await
    }

    /// Every workspace, oldest first.
    pub async fn list_workspaces(&self) -> Result<Vec<Workspace>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, list_workspaces()) })
            .await
    }

    /// A workspace by name or `ws_…` id.
    pub async fn find_workspace(
        &self,
        name_or_id: &str,
    ) -> Result<Option<Workspace>, StorageError> {
        let name_or_id = name_or_id.to_owned();
        self.detached(|s| async move { dispatch!(s, read, find_workspace(&name_or_id)) })
            .await
    }

    /// Stores a key's record and the hash of its secret; a name the domain refuses
    /// ([`ApiKey::validate_name`]) is [`StorageError::Invalid`].
    pub async fn create_api_key(
        &self,
        key: &ApiKey,
        hash: &ApiKeyHash,
    ) -> Result<(), StorageError> {
        ApiKey::validate_name(&key.name).map_err(StorageError::Invalid)?;
        let (key, hash) = (key.clone(), hash.clone());
        self.detached(|s| async move { dispatch!(s, write, insert_api_key(&key, &hash)) })
            .await
    }

    /// The workspace's keys, oldest first (revoked ones included, marked).
    pub async fn list_api_keys(&self, workspace: WorkspaceId) -> Result<Vec<ApiKey>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, list_api_keys(workspace)) })
            .await
    }

    /// Revokes a key; false when there is no such active key.
    pub async fn revoke_api_key(&self, key: ApiKeyId) -> Result<bool, StorageError> {
        dispatch!(
            self,
            write,
            revoke_api_key(key, Timestamp::now().unix_millis())
        )
    }

    /// The active key with this hash, and its workspace.
    pub async fn authenticate(
        &self,
        hash: &ApiKeyHash,
    ) -> Result<Option<AuthenticatedKey>, StorageError> {
        let hash = hash.clone();
        self.detached(|s| async move { dispatch!(s, read, authenticate(&hash)) })
            .await
    }

    /// Creates links, each succeeding or failing on its own, with their `link.created` events, in
    /// one transaction. Outcomes are in input order.
    pub async fn create_links(
        &self,
        links: Vec<NewLink>,
        base: &BaseUrl,
    ) -> Result<Vec<CreateOutcome>, StorageError> {
        self.create_links_completing(links, base, Vec::new()).await
    }

    /// [`Store::create_links`], whose transaction also completes the idempotency claims of the
    /// requests the links came from.
    pub async fn create_links_completing(
        &self,
        links: Vec<NewLink>,
        base: &BaseUrl,
        completions: Vec<PlacedCompletion>,
    ) -> Result<Vec<CreateOutcome>, StorageError> {
        let base = base.clone();
        let outcomes = self
            .detached(|s| async move {
                let outcomes = match &s.backend {
                    Backend::Postgres(pool) => {
                        let mut conn = pool.get().await?;
                        crate::pg::queries::create_links(
                            &mut conn,
                            links,
                            &base,
                            &completions,
                            &Postgres,
                        )
                        .await
                    }
                    Backend::Sqlite(sqlite) => {
                        // As `dispatch!`'s `then:`, with the recent codes for the creation.
                        let mut writer = sqlite.writer().await?;
                        let (conn, held) = writer.split();
                        let creation = sqlite.creation(held);
                        let result = crate::sqlite::queries::create_links(
                            conn,
                            links,
                            &base,
                            &completions,
                            &creation,
                        )
                        .await;
                        sqlite.created(held, &result);
                        result
                    }
                }?;
                s.fold_codes_when_due();
                Ok(outcomes)
            })
            .await?;
        Ok(outcomes.into_iter().map(|(outcome, _)| outcome).collect())
    }

    /// One of the workspace's links, by id or by short code on `domain`.
    pub async fn get_link(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
        domain: &str,
    ) -> Result<Option<Link>, StorageError> {
        let (link, domain) = (link.clone(), domain.to_owned());
        self.detached(
            |s| async move { dispatch!(s, read, get_link(workspace, &link, &domain), hooks) },
        )
        .await
    }

    /// The click counter of one of the workspace's links (what its analytics events are filed
    /// under); `None` when it is not the workspace's.
    pub async fn link_counter(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
        domain: &str,
    ) -> Result<Option<CounterKey>, StorageError> {
        let (link, domain) = (link.clone(), domain.to_owned());
        self.detached(|s| async move {
            dispatch!(s, read, link_counter(workspace, &link, &domain), hooks)
        })
        .await
    }

    /// The link a redirect for `code` on `domain` follows, whoever owns it: the one lookup, its
    /// order the store's business. On SQLite with a redirect index (a server's, see
    /// [`StoreOptions::server`]), from memory, exactly; otherwise, on SQLite, read on the
    /// calling thread with a read-only connection of that thread's own (microseconds, which beats
    /// handing the query to another thread; with WAL, readers never wait for the writer); on
    /// PostgreSQL, through the pool.
    ///
    /// A caller that keeps a cache in front of this asks [`Store::resolves_in_memory`] first:
    /// the index is exact and needs none.
    pub async fn resolve(
        &self,
        domain: &str,
        code: &str,
    ) -> Result<Option<RedirectTarget>, StorageError> {
        match &self.backend {
            Backend::Sqlite(sqlite) => sqlite.resolve(domain, code),
            Backend::Postgres(pool) => {
                within(ANSWER_WITHIN, async {
                    crate::pg::resolve(&mut *pool.get().await?, domain, code).await
                })
                .await
            }
        }
    }

    /// The redirect index's answer alone, for tests that hold it against the database's: `None`
    /// when there is no index, `Some(None)` when no link has the code.
    #[cfg(feature = "testing")]
    pub fn resolve_in_memory(&self, domain: &str, code: &str) -> Option<Option<RedirectTarget>> {
        self.sqlite()?.resolve_in_memory(domain, code)
    }

    /// The database's answer alone (past the redirect index, if any), for tests that hold the
    /// index against it.
    #[cfg(feature = "testing")]
    pub async fn resolve_in_database(
        &self,
        domain: &str,
        code: &str,
    ) -> Result<Option<RedirectTarget>, StorageError> {
        match &self.backend {
            Backend::Sqlite(sqlite) => sqlite.resolve_in_file(domain, code),
            Backend::Postgres(_) => self.resolve(domain, code).await,
        }
    }

    /// Whether [`Store::resolve`] answers from memory (a SQLite store with its redirect index
    /// loaded and within budget), exactly: a cache in front of it would only cost.
    pub fn resolves_in_memory(&self) -> bool {
        self.sqlite()
            .is_some_and(|sqlite| sqlite.resolves_in_memory())
    }

    /// On SQLite, loads every link's redirect target into memory, where [`Store::resolve`]
    /// finds it without a database read, and keeps it in step with every change this store
    /// makes. Returns whether the links fit in `budget_bytes` (about 30 bytes a link plus its code
    /// and destination); when they do not, or later outgrow it, there is no index. PostgreSQL:
    /// false (other instances change the same links).
    ///
    /// Only for a store that is its file's one writer of links: a link another process or
    /// another `Store` creates, changes or deletes would not be seen by redirects. Creations
    /// check new codes against the index instead of the code index until another connection
    /// writes to the file (`recent_codes.rs`).
    ///
    /// A step of [`Store::open`] for a server, after [`Store::start_journal`].
    async fn load_index(&self, budget_bytes: usize) -> Result<bool, StorageError> {
        let Some(sqlite) = self.sqlite().cloned() else {
            return Ok(false);
        };
        self.detached(|_| async move { sqlite.load_redirect_index(budget_bytes).await })
            .await
    }

    /// Up to `limit` of the workspace's links, newest first, older than `before` when given.
    pub async fn list_links(
        &self,
        workspace: WorkspaceId,
        limit: i64,
        before: Option<LinkId>,
        filter: &LinkFilter,
    ) -> Result<Vec<Link>, StorageError> {
        let filter = filter.clone();
        self.detached(|s| async move {
            dispatch!(
                s,
                read,
                list_links(workspace, limit, before, &filter),
                hooks
            )
        })
        .await
    }

    /// Changes a link as `patch` says, and writes its `link.updated` event (short URLs under
    /// `base`); `None` when it is not the workspace's.
    pub async fn update_link(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
        domain: &str,
        patch: &LinkPatch,
        base: &BaseUrl,
    ) -> Result<Option<LinkUpdate>, StorageError> {
        let now = Timestamp::now();
        let (link, domain) = (link.clone(), domain.to_owned());
        let (patch, base) = (patch.clone(), base.clone());
        self.detached(|s| async move {
            dispatch!(
                s,
                write,
                update_link(workspace, &link, &domain, &patch, &base, now),
                hooks,
                then: changed
            )
        })
        .await
    }

    /// Deletes a link and returns it, writing its `link.deleted` event (short URLs under
    /// `base`); `None` when it is not the workspace's.
    pub async fn delete_link(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
        domain: &str,
        base: &BaseUrl,
    ) -> Result<Option<Link>, StorageError> {
        let (link, domain, base) = (link.clone(), domain.to_owned(), base.clone());
        self.detached(|s| async move {
            dispatch!(
                s,
                write,
                delete_link(workspace, &link, &domain, &base),
                hooks,
                then: deleted
            )
        })
        .await
    }

    /// The clicks counted so far on each of `keys` (their links' `clicks`); links that are gone
    /// are left out.
    pub async fn clicks_of(
        &self,
        keys: &[CounterKey],
    ) -> Result<std::collections::HashMap<CounterKey, i64>, StorageError> {
        let keys: Vec<i64> = keys.iter().map(|k| k.0).collect();
        let counts = self
            .detached(|s| async move { dispatch!(s, read, clicks_of(&keys), hooks) })
            .await?;
        Ok(counts
            .into_iter()
            .map(|(k, n)| (CounterKey(k), n))
            .collect())
    }

    /// Adds a batch of clicks to the counters, with their `link.clicked` events, atomically.
    /// Shared, not copied: the caller keeps it to retry a failed write.
    pub async fn record_clicks(
        &self,
        batch: Arc<ClickBatch>,
        base: &BaseUrl,
    ) -> Result<(), StorageError> {
        if batch.links.is_empty() {
            return Ok(());
        }
        let base = base.clone();
        self.detached_within(WRITE_CLICKS_WITHIN, |s| async move {
            dispatch!(s, write, record_clicks(&batch, &base), hooks)
        })
        .await
    }

    /// On SQLite, journals every later batch of clicks instead of adding it to the counters in
    /// place, and folds the journal into the counters every `fold_interval` while it has clicks
    /// ([`CLICK_FOLD_INTERVAL`](crate::CLICK_FOLD_INTERVAL) unless there is a reason; much less
    /// work per click with many links, see `click_journal.rs`). Reads through this store count
    /// journaled clicks at once. First folds whatever an earlier process journaled and did not
    /// fold (it stopped abruptly). Returns whether the journal is on: false on PostgreSQL, whose
    /// counters several servers share.
    ///
    /// Only for a store that is its file's one server, as with [`Store::load_index`]:
    /// another process reading the file sees counters that lag by up to a fold. A second store
    /// starting the journal of the same file, while the first is open, is refused
    /// ([`StorageError::Unavailable`]): it would count the first one's journaled clicks twice.
    ///
    /// A step of [`Store::open`] for a server, the first after migrations.
    async fn start_journal(&self, fold_interval: Duration) -> Result<bool, StorageError> {
        let Some(sqlite) = self.sqlite().cloned() else {
            return Ok(false);
        };
        self.detached(|_| async move { sqlite.start_click_journal(fold_interval).await })
            .await?;
        Ok(true)
    }

    /// Folds the click journal into the counters when it is due: it has clicks, and the last fold
    /// was at least the fold interval ago ([`ServerOptions`](crate::ServerOptions)).
    /// The server's click flusher calls this after every flush, with or without clicks. A fold
    /// that fails loses nothing (the journal still holds the clicks) and is tried again.
    pub async fn fold_clicks_when_due(&self) -> Result<(), StorageError> {
        match self.sqlite() {
            Some(sqlite) if sqlite.clicks_fold_due() => self.fold_journal().await,
            _ => Ok(()),
        }
    }

    /// Folds the click journal into the counters now (a server does on stopping, so the file
    /// alone holds every count). Nothing to do without a journal.
    async fn fold_journal(&self) -> Result<(), StorageError> {
        let Some(sqlite) = self.sqlite().cloned() else {
            return Ok(());
        };
        self.detached(|_| async move { sqlite.fold_clicks().await })
            .await
    }

    /// On SQLite, writes the codes of the links created since the last fold to the code index
    /// now (`recent_codes.rs`; creations do once enough wait, and a server does on stopping, so
    /// that the file alone finds every link by its code quickly). Nothing to do on PostgreSQL.
    async fn fold_recent_codes(&self) -> Result<(), StorageError> {
        let Some(sqlite) = self.sqlite().cloned() else {
            return Ok(());
        };
        self.detached(|_| async move { sqlite.fold_codes().await })
            .await
    }

    /// Folds the recent codes once enough wait, in a task of its own: the creation that made it
    /// due has committed and its caller need not wait. A fold that fails is logged and tried
    /// again after a later creation.
    fn fold_codes_when_due(&self) {
        let Some(sqlite) = self.sqlite().cloned() else {
            return;
        };
        if !sqlite.start_code_fold() {
            return;
        }
        let store = self.clone();
        let fold = async move {
            if let Err(e) = store.fold_recent_codes().await {
                tracing::warn!(error = %e, "folding recent short codes into the code index failed");
            }
            sqlite.code_fold_ended();
        };
        match &self.runtime {
            Some(runtime) => drop(runtime.spawn(fold)),
            None => drop(tokio::spawn(fold)),
        }
    }

    /// Registers a webhook endpoint.
    pub async fn create_webhook(&self, hook: &Webhook) -> Result<(), StorageError> {
        self.create_webhook_completing(hook, None).await
    }

    /// [`Store::create_webhook`], whose transaction also completes an idempotency claim with its
    /// request's answer.
    pub async fn create_webhook_completing(
        &self,
        hook: &Webhook,
        completion: Option<(IdempotencyClaim, StoredResponse)>,
    ) -> Result<(), StorageError> {
        let hook = hook.clone();
        self.detached(
            |s| async move { dispatch!(s, write, insert_webhook(&hook, completion.as_ref())) },
        )
        .await
    }

    /// The secret the daily visitor keys derive from, the same for every instance on this
    /// database.
    pub async fn analytics_secret(&self) -> Result<String, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, read_analytics_secret()) })
            .await
    }

    /// Clicks and unique visitors of the events `filter` selects.
    pub async fn analytics_totals(&self, filter: &EventFilter) -> Result<Tally, StorageError> {
        let filter = filter.clone();
        self.detached(|s| async move { dispatch!(s, read, analytics_totals(&filter)) })
            .await
    }

    /// Clicks and unique visitors by `dimension`, most clicks first, at most `limit` groups (at
    /// least one: otherwise [`StorageError::Invalid`]).
    pub async fn analytics_breakdown(
        &self,
        filter: &EventFilter,
        dimension: Dimension,
        limit: i64,
    ) -> Result<Vec<Tally>, StorageError> {
        if limit < 1 {
            return Err(StorageError::Invalid(
                "a breakdown's limit must be at least 1",
            ));
        }
        let filter = filter.clone();
        self.detached(|s| async move {
            dispatch!(s, read, analytics_breakdown(&filter, dimension, limit))
        })
        .await
    }

    /// Clicks and unique visitors of the events `filter` selects in buckets of `width` ms from
    /// `origin` (at or before `filter.start`: a first bucket may begin before the range, and
    /// counts only the range's part of it), keyed by bucket number (0 for the first); buckets
    /// without events are left out. A `width` under 1 ms is [`StorageError::Invalid`].
    pub async fn analytics_series(
        &self,
        filter: &EventFilter,
        origin: i64,
        width: i64,
    ) -> Result<Vec<Tally<i64>>, StorageError> {
        if width < 1 {
            return Err(StorageError::Invalid(
                "a series' buckets must be at least 1 ms wide",
            ));
        }
        let filter = filter.clone();
        self.detached(
            |s| async move { dispatch!(s, read, analytics_series(&filter, origin, width)) },
        )
        .await
    }

    /// Up to `limit` events `filter` selects after `after` (an [`ExportedEvent::position`]), in
    /// time order.
    pub async fn export_events(
        &self,
        filter: &EventFilter,
        after: Option<(i64, i64)>,
        limit: i64,
    ) -> Result<Vec<ExportedEvent>, StorageError> {
        let filter = filter.clone();
        self.detached(|s| async move { dispatch!(s, read, export_events(&filter, after, limit)) })
            .await
    }

    /// Keeps the events table in shape: on PostgreSQL, creates the monthly partitions missing
    /// from the month of `keep_after` (this month without it) to the coming months, and drops
    /// those wholly before `keep_after`; on both, deletes older events left elsewhere in batches
    /// of `batch` (each a short transaction of its own). Returns how many events were deleted
    /// row by row.
    pub async fn maintain_events(
        &self,
        now: Timestamp,
        keep_after: Option<Timestamp>,
        batch: i64,
    ) -> Result<usize, StorageError> {
        if let Backend::Postgres(pool) = &self.backend {
            let mut conn = within(ANSWER_WITHIN, async { Ok(pool.get().await?) }).await?;
            crate::pg::partitions::maintain(&mut conn, now, keep_after).await?;
        }
        let Some(keep_after) = keep_after else {
            return Ok(0);
        };
        let horizon = keep_after.unix_millis().div_euclid(DAY);
        self.detached(|s| async move { dispatch!(s, write, forget_rollups_before(horizon)) })
            .await?;
        let before = keep_after.unix_millis();
        self.delete_in_batches(batch, |s| async move {
            dispatch!(s, write, delete_events_before(before, batch))
        })
        .await
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

    /// Rolls up the analytics of every day from `keep_after`'s (or the oldest event's) to the
    /// last that ended [`ROLL_UP_AFTER`] before `now`, where it is not rolled up yet or has gone
    /// stale; oldest first, each day read from its events and then written in a short
    /// transaction of its own. Returns how many days it rolled up.
    pub async fn roll_up_analytics(
        &self,
        now: Timestamp,
        keep_after: Option<Timestamp>,
    ) -> Result<usize, StorageError> {
        let Some(oldest) = self
            .detached(|s| async move { dispatch!(s, read, first_event_day()) })
            .await?
        else {
            return Ok(0);
        };
        let first = keep_after.map_or(oldest, |at| at.unix_millis().div_euclid(DAY).max(oldest));
        let end = (now.unix_millis() - ROLL_UP_AFTER).div_euclid(DAY);
        let days = self
            .detached(|s| async move { dispatch!(s, read, days_to_roll_up(first, end)) })
            .await?;
        for &day in &days {
            let (seen, rows) = self
                .detached_within(ROLL_UP_WITHIN, |s| async move {
                    // The mark first: a change after it leaves the mark for the next roll-up.
                    let seen = dispatch!(s, read, stale_version(day))?;
                    Ok((seen, dispatch!(s, read, day_rollup(day))?))
                })
                .await?;
            self.detached(|s| async move { dispatch!(s, write, replace_day(day, &rows, seen)) })
                .await?;
        }
        Ok(days.len())
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

    /// Webhook deliveries waiting for their next attempt: the delivery queue's depth.
    pub async fn pending_deliveries(&self) -> Result<u64, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, count_pending_deliveries()) })
            .await
    }

    /// Claims an idempotency key for a creating request (see [`ClaimOutcome`]). A claimed key is
    /// completed by the creation's transaction ([`Store::create_links_completing`],
    /// [`Store::create_webhook_completing`]), or given back with [`Store::release_idempotency_key`].
    pub async fn claim_idempotency_key(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<ClaimOutcome, StorageError> {
        let claim = claim.clone();
        self.detached(|s| async move {
            dispatch!(s, write, claim_idempotency_key(&claim, Timestamp::now()))
        })
        .await
    }

    /// Gives back a key whose creation failed, so that a retry runs instead of waiting.
    pub async fn release_idempotency_key(
        &self,
        claim: &IdempotencyClaim,
    ) -> Result<(), StorageError> {
        let claim = claim.clone();
        self.detached(|s| async move { dispatch!(s, write, release_idempotency_key(&claim)) })
            .await
    }

    /// Deletes the deliveries that ended (delivered or failed) before `before`, with their
    /// attempts, in transactions of about `batch` deliveries of each state. Returns how many.
    pub async fn forget_deliveries(
        &self,
        before: Timestamp,
        batch: i64,
    ) -> Result<usize, StorageError> {
        let before = before.unix_millis();
        self.delete_in_batches(batch, |s| async move {
            dispatch!(s, write, delete_deliveries_before(before, batch))
        })
        .await
    }

    /// Deletes idempotency keys past their lifetime; returns how many.
    pub async fn forget_idempotency_keys(&self) -> Result<usize, StorageError> {
        self.detached(
            |s| async move { dispatch!(s, write, forget_idempotency_keys(Timestamp::now())) },
        )
        .await
    }

    /// The workspaces with an active endpoint subscribed to `kind`.
    pub async fn workspaces_subscribed(
        &self,
        kind: EventKind,
    ) -> Result<HashSet<WorkspaceId>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, workspaces_subscribed(kind)) })
            .await
    }

    /// The workspace's endpoints, newest first.
    pub async fn list_webhooks(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Vec<Webhook>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, list_webhooks(workspace)) })
            .await
    }

    /// One of the workspace's endpoints.
    pub async fn get_webhook(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
    ) -> Result<Option<Webhook>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, get_webhook(workspace, id)) })
            .await
    }

    /// Deletes an endpoint with its deliveries; false when it is not the workspace's.
    pub async fn delete_webhook(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
    ) -> Result<bool, StorageError> {
        self.detached(|s| async move { dispatch!(s, write, delete_webhook(workspace, id)) })
            .await
    }

    /// The endpoint's latest `limit` deliveries, in any state: the first page of
    /// [`Store::list_deliveries_page`]; `None` when it is not the workspace's.
    pub async fn list_deliveries(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
        limit: i64,
    ) -> Result<Option<Vec<Delivery>>, StorageError> {
        self.list_deliveries_page(workspace, id, None, None, limit)
            .await
    }

    /// A page of the endpoint's deliveries, newest first, in `state` if given, after the cursor
    /// `after` if given; `None` when it is not the workspace's.
    pub async fn list_deliveries_page(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
        state: Option<shortlink_domain::DeliveryState>,
        after: Option<shortlink_domain::DeliveryCursor>,
        limit: i64,
    ) -> Result<Option<Vec<Delivery>>, StorageError> {
        self.detached(|s| async move {
            dispatch!(
                s,
                read,
                list_deliveries_page(workspace, id, state, after, limit)
            )
        })
        .await
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

impl DeliveryQueue for Store {
    type Error = StorageError;

    async fn claim_due(
        &self,
        now: Timestamp,
        limit: i64,
        lease_until: Timestamp,
        in_flight: &InFlight,
    ) -> Result<Vec<ClaimedDelivery>, StorageError> {
        let in_flight = in_flight.clone();
        self.detached(|s| async move {
            dispatch!(s, write, claim_due(now, limit, lease_until, &in_flight))
        })
        .await
    }

    async fn record_attempts(&self, attempts: &[AttemptRecord]) -> Result<(), StorageError> {
        let attempts = attempts.to_vec();
        self.detached(|s| async move { dispatch!(s, write, record_attempts(&attempts)) })
            .await
    }

    async fn release(
        &self,
        event_id: MessageId,
        webhook_id: WebhookId,
    ) -> Result<(), StorageError> {
        self.detached(|s| async move { dispatch!(s, write, release(event_id, webhook_id)) })
            .await
    }
}
