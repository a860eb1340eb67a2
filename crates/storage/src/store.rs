//! [`Store`]: the one storage API, whichever database is underneath.

use shortlink_domain::{
    ApiKey, ApiKeyHash, ApiKeyId, AttemptRecord, BaseUrl, ClaimedDelivery, ClickInfo, Delivery,
    DeliveryQueue, Destination, Link, LinkId, LinkRef, MessageId, Slug, Timestamp, Webhook,
    WebhookId, Workspace, WorkspaceId,
};

use crate::pool::{self, PgPool, SqlitePool};
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

/// The clicks one link received.
#[derive(Debug, Clone)]
pub struct LinkClicks {
    /// The link.
    pub link_id: LinkId,
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
}

/// The storage API. Cheap to clone (it holds pools).
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    url: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
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
    (@pool read, $pools:ident) => { &$pools.readers };
    (@pool write, $pools:ident) => { &$pools.writer };
}

fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .filter(|p| !p.is_empty())
}

impl Store {
    /// Opens pools for `url`: `sqlite://PATH` (the file is created if missing) or
    /// `postgres://…`. Connections are made lazily; call [`Store::migrate`] next.
    pub fn connect(url: &str, options: PoolOptions) -> Result<Self, StorageError> {
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres(pool::postgres(url, options.max_connections.max(2))?)
        } else if let Some(path) = sqlite_path(url) {
            let (readers, writer) = pool::sqlite(path, options.max_connections.clamp(1, 8))?;
            Backend::Sqlite(SqlitePools { readers, writer })
        } else {
            return Err(StorageError::UnsupportedUrl(url.to_owned()));
        };
        Ok(Self {
            backend,
            url: url.to_owned(),
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
        dispatch!(self, read, ping())
    }

    /// Creates a workspace; a taken name is [`StorageError::AlreadyExists`].
    pub async fn create_workspace(&self, workspace: &Workspace) -> Result<(), StorageError> {
        dispatch!(self, write, insert_workspace(workspace))
    }

    /// Every workspace, oldest first.
    pub async fn list_workspaces(&self) -> Result<Vec<Workspace>, StorageError> {
        dispatch!(self, read, list_workspaces())
    }

    /// A workspace by name or `ws_…` id.
    pub async fn find_workspace(
        &self,
        name_or_id: &str,
    ) -> Result<Option<Workspace>, StorageError> {
        dispatch!(self, read, find_workspace(name_or_id))
    }

    /// Stores a key's record and the hash of its secret.
    pub async fn create_api_key(
        &self,
        key: &ApiKey,
        hash: &ApiKeyHash,
    ) -> Result<(), StorageError> {
        dispatch!(self, write, insert_api_key(key, hash))
    }

    /// The workspace's keys, oldest first (revoked ones included, marked).
    pub async fn list_api_keys(&self, workspace: WorkspaceId) -> Result<Vec<ApiKey>, StorageError> {
        dispatch!(self, read, list_api_keys(workspace))
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
        dispatch!(self, read, authenticate(hash))
    }

    /// Creates links, each succeeding or failing on its own, with their `link.created` events, in
    /// one transaction. Outcomes are in input order.
    pub async fn create_links(
        &self,
        links: Vec<NewLink>,
        base: &BaseUrl,
    ) -> Result<Vec<CreateOutcome>, StorageError> {
        dispatch!(self, write, create_links(links, base))
    }

    /// One of the workspace's links, by id or by short code on `domain`.
    pub async fn get_link(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
        domain: &str,
    ) -> Result<Option<Link>, StorageError> {
        dispatch!(self, read, get_link(workspace, link, domain))
    }

    /// The link a redirect for `code` on `domain` follows, whoever owns it.
    pub async fn resolve(&self, domain: &str, code: &str) -> Result<Option<Link>, StorageError> {
        dispatch!(self, read, resolve(domain, code))
    }

    /// Up to `limit` of the workspace's links, newest first, older than `before` when given.
    pub async fn list_links(
        &self,
        workspace: WorkspaceId,
        limit: i64,
        before: Option<LinkId>,
    ) -> Result<Vec<Link>, StorageError> {
        dispatch!(self, read, list_links(workspace, limit, before))
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
        dispatch!(
            self,
            write,
            update_destination(workspace, link, domain, destination, now)
        )
    }

    /// Deletes a link and returns it; `None` when it is not the workspace's.
    pub async fn delete_link(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
        domain: &str,
    ) -> Result<Option<Link>, StorageError> {
        dispatch!(self, write, delete_link(workspace, link, domain))
    }

    /// Adds a batch of clicks to the counters, with their `link.clicked` events, atomically.
    pub async fn record_clicks(
        &self,
        batch: &ClickBatch,
        base: &BaseUrl,
    ) -> Result<(), StorageError> {
        if batch.links.is_empty() {
            return Ok(());
        }
        dispatch!(self, write, record_clicks(batch, base))
    }

    /// Registers a webhook endpoint.
    pub async fn create_webhook(&self, hook: &Webhook) -> Result<(), StorageError> {
        dispatch!(self, write, insert_webhook(hook))
    }

    /// The workspace's endpoints, newest first.
    pub async fn list_webhooks(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Vec<Webhook>, StorageError> {
        dispatch!(self, read, list_webhooks(workspace))
    }

    /// One of the workspace's endpoints.
    pub async fn get_webhook(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
    ) -> Result<Option<Webhook>, StorageError> {
        dispatch!(self, read, get_webhook(workspace, id))
    }

    /// Deletes an endpoint with its deliveries; false when it is not the workspace's.
    pub async fn delete_webhook(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
    ) -> Result<bool, StorageError> {
        dispatch!(self, write, delete_webhook(workspace, id))
    }

    /// The endpoint's latest `limit` deliveries; `None` when it is not the workspace's.
    pub async fn list_deliveries(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
        limit: i64,
    ) -> Result<Option<Vec<Delivery>>, StorageError> {
        dispatch!(self, read, list_deliveries(workspace, id, limit))
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
        dispatch!(self, write, claim_due(now, limit, lease_until))
    }

    async fn record_attempt(&self, attempt: &AttemptRecord) -> Result<(), StorageError> {
        dispatch!(self, write, record_attempt(attempt))
    }

    async fn release(
        &self,
        event_id: MessageId,
        webhook_id: WebhookId,
    ) -> Result<(), StorageError> {
        dispatch!(self, write, release(event_id, webhook_id))
    }
}
