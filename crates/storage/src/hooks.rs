//! What the queries written once (`queries/`) ask of the backend they run on, beside its
//! connection: the state a SQLite server keeps in memory in front of the file (clicks journaled
//! and not yet in their counters, the codes of the newest links). PostgreSQL keeps none, and
//! answers as a database whose every row is current.

use tokio::sync::{RwLock, RwLockReadGuard};

/// Where the link with a code is, as far as the backend's memory knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A recent link, by its row number.
    Recent(i64),
    /// Not a recent link: in the code index, if anywhere.
    Indexed,
    /// Among the recent rows of `links` (past the code index's fold mark), or in the code index.
    SearchRecent,
}

/// The backend's side of the shared queries.
pub(crate) trait Hooks: Sync {
    /// How to find the link with `code` on `domain`.
    fn lookup(&self, domain: &str, code: &str) -> Lookup;

    /// Clicks of counter `key` that are counted in memory and not yet in its row.
    fn unfolded_clicks(&self, key: i64) -> i64;

    /// The gate a read of links on a reader connection holds from before its query until its
    /// clicks are summed, so that it never counts a click twice nor misses one while clicks move
    /// from memory to their rows (`sqlite/click_journal.rs`); `None` where clicks never wait in
    /// memory.
    fn clicks_gate(&self) -> Option<&RwLock<()>>;

    /// Whether a flush of clicks is journaled rather than added to the counters in place.
    fn journals_clicks(&self) -> bool;

    /// A flush's clicks were journaled and committed: memory counts them from now on.
    fn journaled(&self, counts: &[(i64, i64)]);
}

/// Takes the clicks gate for a read of links, where the backend has one.
pub(crate) async fn reading(hooks: &impl Hooks) -> Option<RwLockReadGuard<'_, ()>> {
    match hooks.clicks_gate() {
        Some(gate) => Some(gate.read().await),
        None => None,
    }
}
