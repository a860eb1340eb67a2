//! SQLite: the queries compiled for it, and the machinery that makes one embedded file fast,
//! all held by one value, [`Sqlite`], that a store keeps for its lifetime.
//!
//! - `pool`: one writer connection and read-only connections beside it; `writer`: the writer
//!   held, and [`Held`], the proof every in-memory change below requires.
//! - `statements`: the few statements whose SQL differs from PostgreSQL's, which the queries
//!   written once call by name.
//! - `recent_codes`: the codes of the newest links, in memory, folded into the code index in
//!   sorted batches.
//! - `click_journal`: a flush of clicks is one appended row, folded into the counters once a
//!   minute; reads add the sum still in memory.
//! - `redirect_index`: every link's redirect target in memory, for the file's one server.
//! - `reader`: the redirect's lookup on the calling thread, on a connection of that thread's own.
//! - `checkpoint`: WAL checkpoints on a thread of their own.
//! - `file_identity`: whether the path still names the file the store migrated.
//!
//! Nothing here is seen outside the crate: `Store` calls [`Sqlite`], and the queries written once
//! reach it through [`Hooks`](crate::hooks::Hooks) and [`Creation`].

mod checkpoint;
mod click_journal;
mod file_identity;
mod pool;
mod reader;
mod recent_codes;
mod redirect_index;
mod statements;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use shortlink_domain::Link;
use tokio::sync::RwLock;

use self::click_journal::ClickJournal;
pub(crate) use self::click_journal::count_clicks;
use self::pool::SqlitePool;
#[cfg(feature = "testing")]
pub(crate) use self::recent_codes::FOLD_AT as CODE_FOLD_AT;
use self::recent_codes::RecentCodes;
pub(crate) use self::recent_codes::fold_codes;
use self::redirect_index::RedirectIndex;
pub(crate) use self::statements::{
    Creation, EXPORT_JOINS_LINKS, HAS_MIGRATIONS_TABLE, IN_BYTE_ORDER, INSERT_EVENTS, announce,
    begin_creation, exclude_delivery_writers, insert_attempts, insert_deliveries,
    insert_event_rows, insert_new_links, insert_rollup_rows, load_rows, lock_due, lock_endpoint,
    lock_link, lock_subscribed, lock_workspace, write_transaction,
};
pub(crate) use self::writer::{Held, Writer};
use crate::StorageError;
use crate::hooks::{Hooks, Lookup};
use crate::model::{CounterKey, CreateOutcome, LinkUpdate, RedirectTarget};

/// The connection type the queries are compiled for here.
pub(crate) type Conn =
    diesel_async::sync_connection_wrapper::SyncConnectionWrapper<diesel::SqliteConnection>;

#[path = "../queries/mod.rs"]
#[expect(
    clippy::duplicate_mod,
    reason = "compiled once per backend on purpose: each query is written once"
)]
pub(crate) mod queries;

/// Everything a store on a SQLite file holds.
pub(crate) struct Sqlite {
    /// The file.
    path: Arc<str>,
    /// The file the path named once migrated.
    opened: file_identity::OpenedFile,
    readers: SqlitePool,
    /// A pool of exactly one: taken only as a [`Writer`].
    writer: SqlitePool,
    /// Every link's redirect target, once [`Sqlite::load_redirect_index`] ran.
    index: Arc<RedirectIndex>,
    /// Clicks journaled and not yet folded, once [`Sqlite::start_click_journal`] ran.
    journal: ClickJournal,
    /// The file's server lock, taken before the migrations ([`Sqlite::lock_for_server`]) and
    /// handed to the journal when it starts.
    server_lock: std::sync::Mutex<Option<std::fs::File>>,
    /// The codes of links created since the last fold of the code index.
    codes: RecentCodes,
    /// Whether a fold of the recent codes is on its way ([`Sqlite::start_code_fold`]).
    folding_codes: AtomicBool,
    /// This store's reader connection on each thread that resolved a code through it.
    readers_key: reader::ReaderKey,
    _checkpointer: checkpoint::Checkpointer,
}

impl Sqlite {
    /// Pools on the file at `path` (created if missing), with up to `readers` reader
    /// connections, and its checkpointer. Connections are made lazily.
    pub(crate) fn open(path: &str, readers: usize) -> Result<Self, StorageError> {
        let (readers, writer) = pool::pools(path, readers)?;
        let checkpointer = checkpoint::Checkpointer::spawn(path)
            .map_err(|e| StorageError::Unavailable(e.to_string()))?;
        Ok(Self {
            path: path.into(),
            opened: file_identity::OpenedFile::default(),
            readers,
            writer,
            index: Arc::new(RedirectIndex::empty()),
            journal: ClickJournal::default(),
            server_lock: std::sync::Mutex::default(),
            codes: RecentCodes::default(),
            folding_codes: AtomicBool::new(false),
            readers_key: reader::ReaderKey::new(),
            _checkpointer: checkpointer,
        })
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Remembers the file the path names, once migrated: [`Sqlite::check_file`] compares.
    pub(crate) fn remember_file(&self) {
        self.opened.remember(&self.path);
    }

    /// Fails when the path no longer names the file remembered: deleted or replaced under the
    /// server.
    pub(crate) fn check_file(&self) -> Result<(), StorageError> {
        self.opened.check(&self.path)
    }

    /// The reader connections.
    /// The writer's pool, for its usage only: writes take [`Sqlite::writer`].
    pub(crate) fn writer_pool(&self) -> &SqlitePool {
        &self.writer
    }

    pub(crate) fn readers(&self) -> &SqlitePool {
        &self.readers
    }

    /// Waits for the writer connection.
    pub(crate) async fn writer(&self) -> Result<Writer, StorageError> {
        Writer::take(&self.writer).await
    }

    /// What a creation needs besides the connection, with the writer held.
    pub(crate) fn creation<'a>(&'a self, held: &'a Held) -> Creation<'a> {
        Creation {
            codes: &self.codes,
            held,
        }
    }

    /// The redirect's lookup: the index when there is one, else a read on the calling thread.
    pub(crate) fn resolve(
        &self,
        domain: &str,
        code: &str,
    ) -> Result<Option<RedirectTarget>, StorageError> {
        match self.index.get(domain, code) {
            Some(found) => Ok(found),
            None => self.resolve_in_file(domain, code),
        }
    }

    /// The redirect's lookup in the file alone.
    pub(crate) fn resolve_in_file(
        &self,
        domain: &str,
        code: &str,
    ) -> Result<Option<RedirectTarget>, StorageError> {
        reader::resolve(&self.readers_key, &self.path, domain, code, &self.codes)
    }

    /// The index's answer alone: `None` without an index.
    #[cfg(feature = "testing")]
    pub(crate) fn resolve_in_memory(
        &self,
        domain: &str,
        code: &str,
    ) -> Option<Option<RedirectTarget>> {
        self.index.get(domain, code)
    }

    /// Whether the redirect index holds every link.
    pub(crate) fn resolves_in_memory(&self) -> bool {
        self.index.is_loaded()
    }

    /// Loads every link's redirect target into memory within `budget_bytes`; whether they fit.
    pub(crate) async fn load_redirect_index(
        &self,
        budget_bytes: usize,
    ) -> Result<bool, StorageError> {
        // Holding the writer, no change of this store's can slip between the pages read and the
        // install; one of another connection's shows in `data_version`, which the recent codes
        // look at first.
        let mut writer = self.writer().await?;
        recent_codes::look_at_file(&mut writer, &self.codes).await?;
        let path = self.path.clone();
        let tables =
            tokio::task::spawn_blocking(move || reader::load_redirect_index(&path, budget_bytes))
                .await
                .map_err(|e| StorageError::Unavailable(format!("loading task failed: {e}")))??;
        let loaded = tables.is_some();
        self.index.install(writer.held(), tables);
        if loaded {
            self.codes.index_loaded(writer.held(), self.index.clone());
        }
        Ok(loaded)
    }

    /// Takes the file's server lock ahead of [`Sqlite::start_click_journal`], which keeps it:
    /// a server takes it before migrating, so that a second server (an older build's, say) is
    /// refused before it changes the schema under the first.
    pub(crate) fn lock_for_server(&self) -> Result<(), StorageError> {
        let lock = click_journal::lock_server(&self.path)?;
        *self.server_lock.lock().unwrap_or_else(|e| e.into_inner()) = Some(lock);
        Ok(())
    }

    /// Journals every later flush of clicks, folding them every `fold_interval`, after folding
    /// what an earlier process left; refused while another server holds the file.
    pub(crate) async fn start_click_journal(
        &self,
        fold_interval: Duration,
    ) -> Result<(), StorageError> {
        let mut writer = self.writer().await?;
        if self.journal.is_active() {
            // Its rows are in the sum already: loading them again would count them twice.
            return Ok(());
        }
        let taken = (self.server_lock.lock().unwrap_or_else(|e| e.into_inner())).take();
        let server_lock = taken.map_or_else(|| click_journal::lock_server(&self.path), Ok)?;
        recent_codes::complete(&mut writer, &self.codes).await?;
        click_journal::load_journal(writer.conn(), &self.journal).await?;
        click_journal::fold_journal(writer.conn(), &self.journal).await?;
        self.journal.activate(server_lock, fold_interval);
        Ok(())
    }

    /// Whether the click journal has clicks and its last fold was a fold interval ago.
    pub(crate) fn clicks_fold_due(&self) -> bool {
        self.journal.fold_due()
    }

    /// Folds the click journal into the counters now.
    pub(crate) async fn fold_clicks(&self) -> Result<(), StorageError> {
        let mut writer = self.writer().await?;
        click_journal::fold_journal(writer.conn(), &self.journal).await
    }

    /// Folds the recent codes into the code index now.
    pub(crate) async fn fold_codes(&self) -> Result<(), StorageError> {
        let mut writer = self.writer().await?;
        recent_codes::fold(&mut writer, &self.codes).await
    }

    /// Whether a fold of the recent codes should start now: enough wait and none is on its way.
    /// When true, the caller folds and then calls [`Sqlite::code_fold_ended`].
    pub(crate) fn start_code_fold(&self) -> bool {
        self.codes.fold_due() && !self.folding_codes.swap(true, Ordering::AcqRel)
    }

    /// The fold [`Sqlite::start_code_fold`] asked for ended, folded or not.
    pub(crate) fn code_fold_ended(&self) {
        self.folding_codes.store(false, Ordering::Release);
    }

    /// After a creation, before the writer is released: its codes stop being tentative (or are
    /// dropped, when it failed), and the redirect index learns the new links.
    pub(crate) fn created(
        &self,
        held: &Held,
        result: &Result<Vec<(CreateOutcome, Option<CounterKey>)>, StorageError>,
    ) {
        self.codes.finished(held, result.is_ok());
        let Ok(created) = result else { return };
        self.index.insert(
            held,
            created.iter().filter_map(|outcome| match outcome {
                (CreateOutcome::Created(link), Some(counter)) => Some((
                    link.domain.as_str(),
                    link.short_code.as_str(),
                    RedirectTarget::of(link, *counter),
                )),
                _ => None,
            }),
        );
    }

    /// After a change of a link, before the writer is released: the index holds its new target
    /// (under its new code, the old one forgotten), and the recent codes its new code.
    pub(crate) fn changed(&self, held: &Held, result: &Result<Option<LinkUpdate>, StorageError>) {
        let Ok(Some(LinkUpdate::Changed {
            before,
            after,
            counter,
        })) = result
        else {
            return;
        };
        let (old, new) = (before.short_code.as_str(), after.short_code.as_str());
        if old != new {
            self.index.remove(held, &before.domain, old);
            self.codes.renamed(held, &after.domain, old, new);
        }
        let target = RedirectTarget::of(after, *counter);
        self.index
            .insert(held, [(after.domain.as_str(), new, target)]);
    }

    /// After a deletion, before the writer is released.
    pub(crate) fn deleted(&self, held: &Held, result: &Result<Option<Link>, StorageError>) {
        if let Ok(Some(link)) = result {
            self.index
                .remove(held, &link.domain, link.short_code.as_str());
            self.codes
                .deleted(held, &link.domain, link.short_code.as_str());
        }
    }
}

impl Hooks for Sqlite {
    fn lookup(&self, domain: &str, code: &str) -> Lookup {
        self.codes.lookup(domain, code)
    }

    fn unfolded_clicks(&self, key: i64) -> i64 {
        self.journal.unfolded(key)
    }

    fn clicks_gate(&self) -> Option<&RwLock<()>> {
        Some(self.journal.gate())
    }

    fn journals_clicks(&self) -> bool {
        self.journal.is_active()
    }

    fn journaled(&self, counts: &[(i64, i64)]) {
        self.journal.journaled(counts);
    }
}
