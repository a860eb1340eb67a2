//! Links: creation (with group commit's completions), reads, the redirect's lookups (the
//! SQLite redirect index in memory, else the database), changes and deletion.

use super::*;

impl Store {
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
    /// makes. Returns whether the links fit in `budget_bytes` (about 20 bytes a link plus its code
    /// and destination); when they do not, or later outgrow it, there is no index. PostgreSQL:
    /// false (other instances change the same links).
    ///
    /// Only for a store that is its file's one writer of links: a link another process or
    /// another `Store` creates, changes or deletes would not be seen by redirects. Creations
    /// check new codes against the index instead of the code index until another connection
    /// writes to the file (`recent_codes.rs`).
    ///
    /// A step of [`Store::open`] for a server, after [`Store::start_journal`].
    pub(super) async fn load_index(&self, budget_bytes: usize) -> Result<bool, StorageError> {
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
}
