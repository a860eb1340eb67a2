//! Click counts: the flush's writes, and on SQLite the click journal and its folds.

use super::*;

impl Store {
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
    pub(super) async fn start_journal(
        &self,
        fold_interval: Duration,
    ) -> Result<bool, StorageError> {
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
    pub(super) async fn fold_journal(&self) -> Result<(), StorageError> {
        let Some(sqlite) = self.sqlite().cloned() else {
            return Ok(());
        };
        self.detached(|_| async move { sqlite.fold_clicks().await })
            .await
    }

    /// On SQLite, writes the codes of the links created since the last fold to the code index
    /// now (`recent_codes.rs`; creations do once enough wait, and a server does on stopping, so
    /// that the file alone finds every link by its code quickly). Nothing to do on PostgreSQL.
    pub(super) async fn fold_recent_codes(&self) -> Result<(), StorageError> {
        let Some(sqlite) = self.sqlite().cloned() else {
            return Ok(());
        };
        self.detached(|_| async move { sqlite.fold_codes().await })
            .await
    }

    /// Folds the recent codes once enough wait, in a task of its own: the creation that made it
    /// due has committed and its caller need not wait. A fold that fails is logged and tried
    /// again after a later creation.
    pub(super) fn fold_codes_when_due(&self) {
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
}
