//! [`Store`]: the one storage API, whichever database is underneath.

use shortlink_domain::{
    ApiKey, ApiKeyHash, ApiKeyId, AttemptRecord, BaseUrl, ClaimedDelivery, ClickInfo, Delivery,
    DeliveryQueue, Destination, EventKind, Link, LinkId, LinkRef, MessageId, Slug, Timestamp,
    Webhook, WebhookId, Workspace, WorkspaceId,
};

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::click_journal::ClickJournal;
use crate::pool::{self, PgPool, SqlitePool};
use crate::recent_codes::RecentCodes;
use crate::redirect_index::RedirectIndex;
use crate::{StorageError, migrate};

/// Which database a [`Store`] speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseKind {
    /// An embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// Pool sizing.
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions {
    /// PostgreSQL connections, or SQLite reader connections (SQLite always has one writer).
    pub max_connections: usize,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
        }
    }
}

/// A link to create. Without a slug, one is generated (and regenerated on collision).
#[derive(Debug, Clone)]
pub struct NewLink {
    /// Its id.
    pub id: LinkId,
    /// Its owner.
    pub workspace_id: WorkspaceId,
    /// Its domain (`host[:port]`).
    pub domain: String,
    /// The client's custom slug, if any.
    pub slug: Option<Slug>,
    /// Where it points.
    pub destination: Destination,
    /// When it was created.
    pub created_at: Timestamp,
}

/// What became of one link to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    /// Stored.
    Created(Link),
    /// The custom slug is taken on that domain (possibly earlier in the same batch).
    SlugConflict,
}

/// The key a request presented, and its workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedKey {
    /// The key.
    pub key_id: ApiKeyId,
    /// Its workspace.
    pub workspace: Workspace,
}

/// Clicks to add to the counters, as gathered by the click batcher.
#[derive(Debug, Clone, Default)]
pub struct ClickBatch {
    /// One entry per clicked link.
    pub links: Vec<LinkClicks>,
}

/// The key of a link's click counter: the link's row number in this database. A link's counter
/// is found through this key, not through the link's id, because the counters are written
/// often and their table is kept narrow (see `docs/PERFORMANCE.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterKey(pub i64);

/// What a redirect needs of a link: where to send the client, and where its click is counted.
/// Narrower than [`Link`] on purpose: it is looked up on every redirect the cache misses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectTarget {
    /// The link's click counter, which also finds the link for its `link.clicked` events.
    pub counter: CounterKey,
    /// Its workspace, whose webhooks hear of the click.
    pub workspace_id: WorkspaceId,
    /// Where to send the client.
    pub destination: Destination,
}

/// The clicks one link received.
#[derive(Debug, Clone)]
pub struct LinkClicks {
    /// The link's click counter (from [`RedirectTarget::counter`]).
    pub counter: CounterKey,
    /// Its workspace (whose webhooks hear of the clicks).
    pub workspace_id: WorkspaceId,
    /// How many clicks to add.
    pub count: u64,
    /// Details of up to `count` of them, for `link.clicked` events.
    pub clicks: Vec<ClickInfo>,
}

#[derive(Clone)]
enum Backend {
    Postgres(PgPool),
    Sqlite(SqlitePools),
}

#[derive(Clone)]
struct SqlitePools {
    readers: SqlitePool,
    writer: SqlitePool,
    /// Every link's redirect target, once [`Store::load_redirect_index`] ran.
    index: Arc<RedirectIndex>,
    /// Clicks journaled and not yet folded, once [`Store::start_click_journal`] ran.
    journal: Arc<ClickJournal>,
    /// The codes of links created since the last fold of the code index.
    codes: RecentCodes,
    _checkpointer: crate::checkpoint::Checkpointer,
}

/// The storage API. Cheap to clone (it holds pools).
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    url: String,
    /// The runtime SQLite queries run on; see [`Store::detached`].
    runtime: Option<tokio::runtime::Handle>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

/// After a creation on SQLite, before the writer is released: its codes stop being tentative
/// (or are dropped, when it failed), and the redirect index learns the new links.
fn created(
    pools: &SqlitePools,
    result: &Result<Vec<(CreateOutcome, Option<CounterKey>)>, StorageError>,
) {
    pools.codes.finished(result.is_ok());
    let Ok(created) = result else { return };
    pools
        .index
        .insert(created.iter().filter_map(|outcome| match outcome {
            (CreateOutcome::Created(link), Some(counter)) => Some((
                link.domain.as_str(),
                link.short_code.as_str(),
                RedirectTarget {
                    counter: *counter,
                    workspace_id: link.workspace_id,
                    destination: link.destination.clone(),
                },
            )),
            _ => None,
        }));
}

fn changed(pools: &SqlitePools, result: &Result<Option<Link>, StorageError>) {
    if let Ok(Some(link)) = result {
        (pools.index).set_destination(&link.domain, link.short_code.as_str(), &link.destination);
    }
}

fn deleted(pools: &SqlitePools, result: &Result<Option<Link>, StorageError>) {
    if let Ok(Some(link)) = result {
        pools.index.remove(&link.domain, link.short_code.as_str());
        pools.codes.deleted(&link.domain, link.short_code.as_str());
    }
}

/// Runs one query function from `crate::queries` on a connection of the right pool.
/// `read` queries go to SQLite's readers, `write` ones to its single writer; PostgreSQL has one
/// pool for both.
macro_rules! dispatch {
    ($self:ident, $access:ident, $func:ident($($arg:expr),* $(,)?)) => {
        match &$self.backend {
            Backend::Postgres(pool) => {
                let mut conn = pool.get().await?;
                crate::pg::queries::$func(&mut conn, $($arg),*).await
            }
            Backend::Sqlite(pools) => {
                let pool = dispatch!(@pool $access, pools);
                let mut conn = pool.get().await?;
                crate::sqlite::queries::$func(&mut conn, $($arg),*).await
            }
        }
    };
    // A write that changes links: on SQLite, its effect on the redirect index and the recent
    // codes is applied after it ends and before the single writer connection is released, so in
    // commit order.
    ($self:ident, write, $func:ident($($arg:expr),* $(,)?), then: $apply:expr) => {
        match &$self.backend {
            Backend::Postgres(pool) => {
                let mut conn = pool.get().await?;
                crate::pg::queries::$func(&mut conn, $($arg),*).await
            }
            Backend::Sqlite(pools) => {
                let mut conn = pools.writer.get().await?;
                let result = crate::sqlite::queries::$func(&mut conn, $($arg),*).await;
                $apply(pools, &result);
                drop(conn);
                result
            }
        }
    };
    (@pool read, $pools:ident) => { &$pools.readers };
    (@pool write, $pools:ident) => { &$pools.writer };
}

fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .filter(|p| !p.is_empty())
}

impl Store {
    /// The click journal, on SQLite (inactive until [`Store::start_click_journal`]).
    fn journal(&self) -> Option<&ClickJournal> {
        match &self.backend {
            Backend::Sqlite(pools) => Some(&pools.journal),
            Backend::Postgres(_) => None,
        }
    }

    /// The codes of recent links, on SQLite.
    fn codes(&self) -> Option<&RecentCodes> {
        match &self.backend {
            Backend::Sqlite(pools) => Some(&pools.codes),
            Backend::Postgres(_) => None,
        }
    }

    /// Runs a query to completion even if the caller stops waiting. diesel-async's SQLite
    /// wrapper, when a query's future is dropped half-way (a client disconnected), blocks in
    /// place until the blocking task ends, and that panics on a single-threaded runtime such as
    /// an actix worker's. So SQLite queries run as tasks of the runtime that opened the store,
    /// and a caller that goes away merely stops waiting for the task. PostgreSQL queries are
    /// cancel-safe and run in place.
    async fn detached<T, F>(&self, query: impl FnOnce(Store) -> F) -> Result<T, StorageError>
    where
        F: std::future::Future<Output = Result<T, StorageError>> + Send + 'static,
        T: Send + 'static,
    {
        match (&self.backend, &self.runtime) {
            (Backend::Sqlite(_), Some(runtime)) => runtime
                .spawn(query(self.clone()))
                .await
                .map_err(|e| StorageError::Unavailable(format!("storage task failed: {e}")))?,
            _ => query(self.clone()).await,
        }
    }

    /// Opens pools for `url`: `sqlite://PATH` (the file is created if missing) or
    /// `postgres://…`. Connections are made lazily; call [`Store::migrate`] next.
    pub fn connect(url: &str, options: PoolOptions) -> Result<Self, StorageError> {
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres(pool::postgres(url, options.max_connections.max(2))?)
        } else if let Some(path) = sqlite_path(url) {
            let (readers, writer) = pool::sqlite(path, options.max_connections.clamp(1, 8))?;
            let checkpointer = crate::checkpoint::Checkpointer::spawn(path)
                .map_err(|e| StorageError::Unavailable(e.to_string()))?;
            Backend::Sqlite(SqlitePools {
                readers,
                writer,
                index: Arc::new(RedirectIndex::empty()),
                journal: Arc::default(),
                codes: RecentCodes::default(),
                _checkpointer: checkpointer,
            })
        } else {
            return Err(StorageError::UnsupportedUrl(url.to_owned()));
        };
        let runtime = tokio::runtime::Handle::try_current().ok();
        Ok(Self {
            backend,
            url: url.to_owned(),
            runtime,
        })
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
            Backend::Sqlite(_) => {
                let path = sqlite_path(&self.url).unwrap_or_default().to_owned();
                migrate::sqlite(path).await
            }
        }
    }

    /// Succeeds when the database answers a trivial query.
    pub async fn ping(&self) -> Result<(), StorageError> {
        self.detached(|s| async move { dispatch!(s, read, ping()) })
            .await
    }

    /// Creates a workspace; a taken name is [`StorageError::AlreadyExists`].
    pub async fn create_workspace(&self, workspace: &Workspace) -> Result<(), StorageError> {
        let workspace = workspace.clone();
        self.detached(|s| async move { dispatch!(s, write, insert_workspace(&workspace)) })
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

    /// Stores a key's record and the hash of its secret.
    pub async fn create_api_key(
        &self,
        key: &ApiKey,
        hash: &ApiKeyHash,
    ) -> Result<(), StorageError> {
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
        let base = base.clone();
        let outcomes = self
            .detached(|s| async move {
                let outcomes =
                    dispatch!(s, write, create_links(links, &base, s.codes()), then: created)?;
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
        self.detached(|s| async move {
            dispatch!(
                s,
                read,
                get_link(workspace, &link, &domain, s.journal(), s.codes())
            )
        })
        .await
    }

    /// The link a redirect for `code` on `domain` follows, whoever owns it.
    pub async fn resolve(
        &self,
        domain: &str,
        code: &str,
    ) -> Result<Option<RedirectTarget>, StorageError> {
        let (domain, code) = (domain.to_owned(), code.to_owned());
        self.detached(|s| async move { dispatch!(s, read, resolve(&domain, &code, s.codes())) })
            .await
    }

    /// On SQLite, the redirect's lookup done synchronously on the calling thread (microseconds,
    /// no thread handoff); `None` on PostgreSQL, where callers use [`Store::resolve`].
    pub fn resolve_now(
        &self,
        domain: &str,
        code: &str,
    ) -> Option<Result<Option<RedirectTarget>, StorageError>> {
        match &self.backend {
            Backend::Sqlite(pools) => Some(crate::sqlite::resolve_now(
                sqlite_path(&self.url)?,
                domain,
                code,
                &pools.codes,
            )),
            Backend::Postgres(_) => None,
        }
    }

    /// On SQLite, loads every link's redirect target into memory, where [`Store::resolve_in_memory`]
    /// finds it without a database read, and keeps it in step with every change this store
    /// makes. Returns whether the links fit in `budget_bytes` (about 30 bytes a link plus its code
    /// and destination); when they do not, or later outgrow it, there is no index. PostgreSQL:
    /// false (other instances change the same links).
    ///
    /// Only for a store that is its file's one writer of links: a link another process or
    /// another `Store` creates, changes or deletes would not be seen by redirects. Creations
    /// check new codes against the index instead of the code index until another connection
    /// writes to the file (`recent_codes.rs`).
    pub async fn load_redirect_index(&self, budget_bytes: usize) -> Result<bool, StorageError> {
        let Backend::Sqlite(pools) = &self.backend else {
            return Ok(false);
        };
        let pools = pools.clone();
        let path = sqlite_path(&self.url).unwrap_or_default().to_owned();
        self.detached(|_| async move {
            // Holding the writer, no change of this store's can slip between the pages read and
            // the install; one of another connection's shows in `data_version`, which the recent
            // codes look at first.
            let mut writer = pools.writer.get().await?;
            crate::sqlite::look_at_file(&mut writer, &pools.codes).await?;
            let tables = tokio::task::spawn_blocking(move || {
                crate::sqlite::load_redirect_index(&path, budget_bytes)
            })
            .await
            .map_err(|e| StorageError::Unavailable(format!("loading task failed: {e}")))??;
            let loaded = tables.is_some();
            pools.index.install(tables);
            if loaded {
                pools.codes.index_loaded(pools.index.clone());
            }
            Ok(loaded)
        })
        .await
    }

    /// The link a redirect for `code` on `domain` follows, from the redirect index: `None` when
    /// there is no index (see [`Store::load_redirect_index`]), `Some(None)` when no link has the
    /// code.
    pub fn resolve_in_memory(&self, domain: &str, code: &str) -> Option<Option<RedirectTarget>> {
        match &self.backend {
            Backend::Sqlite(pools) => pools.index.get(domain, code),
            Backend::Postgres(_) => None,
        }
    }

    /// Up to `limit` of the workspace's links, newest first, older than `before` when given.
    pub async fn list_links(
        &self,
        workspace: WorkspaceId,
        limit: i64,
        before: Option<LinkId>,
    ) -> Result<Vec<Link>, StorageError> {
        self.detached(|s| async move {
            dispatch!(s, read, list_links(workspace, limit, before, s.journal()))
        })
        .await
    }

    /// Points a link elsewhere; `None` when it is not the workspace's.
    pub async fn update_destination(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
        domain: &str,
        destination: &Destination,
    ) -> Result<Option<Link>, StorageError> {
        let now = Timestamp::now().unix_millis();
        let (link, domain, destination) = (link.clone(), domain.to_owned(), destination.clone());
        self.detached(|s| async move {
            dispatch!(
                s,
                write,
                update_destination(
                    workspace,
                    &link,
                    &domain,
                    &destination,
                    now,
                    s.journal(),
                    s.codes()
                ),
                then: changed
            )
        })
        .await
    }

    /// Deletes a link and returns it; `None` when it is not the workspace's.
    pub async fn delete_link(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
        domain: &str,
    ) -> Result<Option<Link>, StorageError> {
        let (link, domain) = (link.clone(), domain.to_owned());
        self.detached(|s| async move {
            dispatch!(
                s,
                write,
                delete_link(workspace, &link, &domain, s.journal(), s.codes()),
                then: deleted
            )
        })
        .await
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
        self.detached(
            |s| async move { dispatch!(s, write, record_clicks(&batch, &base, s.journal())) },
        )
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
    /// Only for a store that is its file's one server, as with [`Store::load_redirect_index`]:
    /// another process reading the file sees counters that lag by up to a fold. A second store
    /// starting the journal of the same file, while the first is open, is refused
    /// ([`StorageError::Unavailable`]): it would count the first one's journaled clicks twice.
    pub async fn start_click_journal(&self, fold_interval: Duration) -> Result<bool, StorageError> {
        let Backend::Sqlite(pools) = &self.backend else {
            return Ok(false);
        };
        let pools = pools.clone();
        let path = sqlite_path(&self.url).unwrap_or_default().to_owned();
        self.detached(|_| async move {
            let mut conn = pools.writer.get().await?;
            if pools.journal.is_active() {
                // Its rows are in the sum already: loading them again would count them twice.
                return Ok(true);
            }
            let server_lock = crate::click_journal::lock_server(&path)?;
            crate::sqlite::complete_recent_codes(&mut conn, &pools.codes).await?;
            crate::sqlite::load_journal(&mut conn, &pools.journal).await?;
            crate::sqlite::fold_journal(&mut conn, &pools.journal).await?;
            pools.journal.activate(server_lock, fold_interval);
            Ok(true)
        })
        .await
    }

    /// Folds the click journal into the counters when it is due: it has clicks, and the last fold
    /// was at least the fold interval given to [`Store::start_click_journal`] ago.
    /// The server's click flusher calls this after every flush, with or without clicks. A fold
    /// that fails loses nothing (the journal still holds the clicks) and is tried again.
    pub async fn fold_clicks_when_due(&self) -> Result<(), StorageError> {
        match self.journal() {
            Some(journal) if journal.fold_due() => self.fold_clicks().await,
            _ => Ok(()),
        }
    }

    /// Folds the click journal into the counters now (a server does on stopping, so the file
    /// alone holds every count). Nothing to do without a journal.
    pub async fn fold_clicks(&self) -> Result<(), StorageError> {
        let Backend::Sqlite(pools) = &self.backend else {
            return Ok(());
        };
        let pools = pools.clone();
        self.detached(|_| async move {
            let mut conn = pools.writer.get().await?;
            crate::sqlite::fold_journal(&mut conn, &pools.journal).await
        })
        .await
    }

    /// On SQLite, writes the codes of the links created since the last fold to the code index
    /// now (`recent_codes.rs`; creations do once enough wait, and a server does on stopping, so
    /// that the file alone finds every link by its code quickly). Nothing to do on PostgreSQL.
    pub async fn fold_codes(&self) -> Result<(), StorageError> {
        let Backend::Sqlite(pools) = &self.backend else {
            return Ok(());
        };
        let pools = pools.clone();
        self.detached(|_| async move {
            let mut conn = pools.writer.get().await?;
            crate::sqlite::fold_recent_codes(&mut conn, &pools.codes).await
        })
        .await
    }

    /// Folds the recent codes once enough wait, in a task of its own: the creation that made it
    /// due has committed and its caller need not wait. A fold that fails is logged and tried
    /// again after a later creation.
    fn fold_codes_when_due(&self) {
        let Backend::Sqlite(pools) = &self.backend else {
            return;
        };
        if !pools.codes.start_fold() {
            return;
        }
        let (store, codes) = (self.clone(), pools.codes.clone());
        let fold = async move {
            if let Err(e) = store.fold_codes().await {
                tracing::warn!(error = %e, "folding recent short codes into the code index failed");
            }
            codes.fold_ended();
        };
        match &self.runtime {
            Some(runtime) => drop(runtime.spawn(fold)),
            None => drop(tokio::spawn(fold)),
        }
    }

    /// Registers a webhook endpoint.
    pub async fn create_webhook(&self, hook: &Webhook) -> Result<(), StorageError> {
        let hook = hook.clone();
        self.detached(|s| async move { dispatch!(s, write, insert_webhook(&hook)) })
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

    /// The endpoint's latest `limit` deliveries; `None` when it is not the workspace's.
    pub async fn list_deliveries(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
        limit: i64,
    ) -> Result<Option<Vec<Delivery>>, StorageError> {
        self.detached(|s| async move { dispatch!(s, read, list_deliveries(workspace, id, limit)) })
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

impl DeliveryQueue for Store {
    type Error = StorageError;

    async fn claim_due(
        &self,
        now: Timestamp,
        limit: i64,
        lease_until: Timestamp,
    ) -> Result<Vec<ClaimedDelivery>, StorageError> {
        self.detached(|s| async move { dispatch!(s, write, claim_due(now, limit, lease_until)) })
            .await
    }

    async fn record_attempt(&self, attempt: &AttemptRecord) -> Result<(), StorageError> {
        let attempt = attempt.clone();
        self.detached(|s| async move { dispatch!(s, write, record_attempt(&attempt)) })
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
