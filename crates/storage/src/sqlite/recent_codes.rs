//! SQLite's short codes of the newest links: held in memory, and written to the code index
//! (`link_codes`) in one sorted batch, a fold, every [`FOLD_AT`] links.
//!
//! Why: codes are random, so indexing each link's code as it is created puts it on a random page
//! of the index. With a transaction per group of creations, nearly every link dirtied a page of
//! its own, written to the log at commit and again at the next checkpoint: half of what creating
//! a link cost (docs/PERFORMANCE-ROUNDS.md, "Bulk creation: the code index"). A fold inserts
//! thousands of codes in index order, so each page of the index is written once for all the
//! codes it receives.
//!
//! How it stays exact:
//! - `link_codes` holds the code of every link up to its fold mark (`link_codes_folded`); the
//!   links after it are the recent ones, and they are exactly the rows of `links` past the mark.
//! - Only the single writer connection changes this state, and only while it holds it (every
//!   change takes the proof, `writer::Held`): a
//!   creation's codes are tentative until its transaction commits, then committed; a deletion
//!   forgets its code after it commits; a fold writes every recent link's code, moves the mark
//!   and then forgets them.
//! - A creation checks each code against the recent ones (and its own tentative ones) and
//!   against `link_codes`, so a code is never given twice. Before it does, the writer compares
//!   SQLite's `data_version` with the one it last saw: if another connection wrote to the file in
//!   between (the CLI, another process), it reads the recent links again from the table.
//! - While the store's redirect index holds every link's code, the check asks the index instead
//!   of searching `link_codes` (a B-tree search per code was the largest single cost of bulk
//!   creation). The index holds every code from its load, which follows a look at
//!   `data_version`, until another connection writes to the file: from the first creation that
//!   sees such a write on, `link_codes` is searched again (the other connection may have created
//!   links the index never saw).
//! - A lookup by code asks the recent codes first, then `link_codes`. A fold commits before it
//!   forgets, so a lookup finds a folded link in one place or the other.
//!
//! A store that is not its file's one server (the CLI, a test, another process) may not know of
//! links another store created since it last looked: its lookups by code that the recent codes
//! do not answer also search the rows of `links` past the fold mark ([`Lookup::SearchRecent`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use diesel::SqliteConnection;
use diesel::prelude::*;

use super::redirect_index::RedirectIndex;
use super::writer::{Held, Writer};
use crate::StorageError;
use crate::hooks::Lookup;
use crate::schema::{link_codes_folded, links};

/// Recent links past which the next creation folds their codes into `link_codes`. A fold writes
/// each page of the index it touches once, so larger folds cost less per link; they take longer
/// (tens of milliseconds for this many) and hold more codes in memory (~100 bytes a link).
pub(crate) const FOLD_AT: usize = 20_000;

/// The codes of links created since the last fold, by domain. Clones share them.
#[derive(Debug, Default, Clone)]
pub(crate) struct RecentCodes {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// Committed recent links.
    committed: Codes,
    /// Links the writer's transaction in progress inserted, committed when it commits.
    tentative: Codes,
    /// The writer connection's `PRAGMA data_version` when `committed` was last known to match
    /// the file; `None` before the first creation.
    data_version: Option<i64>,
    /// Whether this store is its file's one server, whose recent codes are every recent link's.
    complete: bool,
    /// The store's redirect index while it holds the code of every link in the file
    /// ([`RecentCodes::index_loaded`]).
    every_code: Option<Arc<RedirectIndex>>,
}

/// Row numbers by domain and code.
#[derive(Debug, Default)]
struct Codes {
    by_domain: HashMap<String, HashMap<String, i64>>,
    len: usize,
}

impl Codes {
    fn get(&self, domain: &str, code: &str) -> Option<i64> {
        self.by_domain.get(domain)?.get(code).copied()
    }

    fn insert(&mut self, domain: String, code: String, seq: i64) {
        if self
            .by_domain
            .entry(domain)
            .or_default()
            .insert(code, seq)
            .is_none()
        {
            self.len += 1;
        }
    }

    fn remove(&mut self, domain: &str, code: &str) {
        if let Some(codes) = self.by_domain.get_mut(domain)
            && codes.remove(code).is_some()
        {
            self.len -= 1;
        }
    }

    fn drain(&mut self) -> impl Iterator<Item = (String, String, i64)> {
        self.len = 0;
        std::mem::take(&mut self.by_domain)
            .into_iter()
            .flat_map(|(domain, codes)| {
                codes
                    .into_iter()
                    .map(move |(code, seq)| (domain.clone(), code, seq))
            })
    }

    fn retain_after(&mut self, through: i64) {
        for codes in self.by_domain.values_mut() {
            codes.retain(|_, seq| *seq > through);
        }
        self.by_domain.retain(|_, codes| !codes.is_empty());
        self.len = self.by_domain.values().map(HashMap::len).sum();
    }
}

impl RecentCodes {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How to find the link with `code` on `domain`: a committed recent link's row number when
    /// this store has it; else through `link_codes`, and, unless this store is its file's one
    /// server (which knows every recent link), among the recent rows of `links` first: another
    /// store may have created links since this one last looked.
    pub(crate) fn lookup(&self, domain: &str, code: &str) -> Lookup {
        let state = self.state();
        match state.committed.get(domain, code) {
            Some(seq) => Lookup::Recent(seq),
            None if state.complete => Lookup::Indexed,
            None => Lookup::SearchRecent,
        }
    }

    /// The store became its file's one server (after [`RecentCodes::reload`] under the writer):
    /// these are the codes of every recent link from now on.
    pub(crate) fn set_complete(&self, _: &Held) {
        self.state().complete = true;
    }

    /// Whether a link may be given `code` on `domain`: `Some(false)` when a recent link,
    /// committed or inserted by the transaction in progress, has it; `Some(true)` when the
    /// redirect index holds every link's code and none has it; `None` when only a search of
    /// `link_codes` can tell.
    pub(crate) fn is_free(&self, domain: &str, code: &str) -> Option<bool> {
        let state = self.state();
        if state.committed.get(domain, code).is_some()
            || state.tentative.get(domain, code).is_some()
        {
            return Some(false);
        }
        let index = state.every_code.as_ref()?;
        index.contains(domain, code).map(|taken| !taken)
    }

    /// The store's redirect index was loaded after the writer last looked at `data_version` (in
    /// [`RecentCodes::begin`]), holding the writer since: it holds every link's code until
    /// another connection writes to the file.
    pub(crate) fn index_loaded(&self, _: &Held, index: Arc<RedirectIndex>) {
        self.state().every_code = Some(index);
    }

    /// Starts a creation's transaction: drops what a transaction that never finished left
    /// tentative, and tells whether the recent links must be read again from the file (another
    /// connection wrote to it since `data_version` was last seen, or none was seen yet). After
    /// such a write the redirect index no longer answers for codes.
    pub(crate) fn begin(&self, _: &Held, data_version: i64) -> bool {
        let mut state = self.state();
        state.tentative = Codes::default();
        let changed = state.data_version.replace(data_version) != Some(data_version);
        if changed && state.every_code.take().is_some() {
            tracing::info!(
                "another connection wrote to the database file: new short codes are checked \
                 against the code index from now on"
            );
        }
        changed
    }

    /// Replaces the committed recent links with those read from the file.
    pub(crate) fn reload(&self, _: &Held, rows: Vec<(String, String, i64)>) {
        let mut state = self.state();
        state.committed = Codes::default();
        for (domain, code, seq) in rows {
            state.committed.insert(domain, code, seq);
        }
    }

    /// A link the transaction in progress inserted.
    pub(crate) fn inserted(&self, _: &Held, domain: String, code: String, seq: i64) {
        self.state().tentative.insert(domain, code, seq);
    }

    /// The transaction in progress committed (`true`) or not.
    pub(crate) fn finished(&self, _: &Held, committed: bool) {
        let state = &mut *self.state();
        let tentative = state.tentative.drain();
        if committed {
            for (domain, code, seq) in tentative {
                state.committed.insert(domain, code, seq);
            }
        }
    }

    /// The link with `code` on `domain` was deleted (its transaction committed; no other link
    /// can have taken the code since, as the writer is still held).
    pub(crate) fn deleted(&self, _: &Held, domain: &str, code: &str) {
        self.state().committed.remove(domain, code);
    }

    /// A recent link's code changed from `old` to `new` (its transaction committed, the writer
    /// still held); a folded link's changed in `link_codes` by a trigger.
    pub(crate) fn renamed(&self, _: &Held, domain: &str, old: &str, new: &str) {
        let committed = &mut self.state().committed;
        if let Some(seq) = committed.get(domain, old) {
            committed.remove(domain, old);
            committed.insert(domain.to_owned(), new.to_owned(), seq);
        }
    }

    /// Whether enough recent links wait for a fold ([`FOLD_AT`]).
    pub(crate) fn fold_due(&self) -> bool {
        self.state().committed.len >= FOLD_AT
    }

    /// Whether the file changed since the writer last looked (`data_version` differs from the
    /// one it saw, or it never looked): [`RecentCodes::begin`] will tell the same, and the recent
    /// links must be read again.
    fn is_stale(&self, data_version: i64) -> bool {
        self.state().data_version != Some(data_version)
    }

    /// A fold committed: every link up to `through` has its code in `link_codes`.
    pub(crate) fn folded(&self, _: &Held, through: i64) {
        self.state().committed.retain_after(through);
    }
}

/// What the writer read of the file for the recent codes ([`read_file`]).
pub(crate) struct Seen {
    data_version: i64,
    /// The recent links, when they had to be read again.
    recent: Option<Vec<(String, String, i64)>>,
}

/// Reads what the recent codes need of the file, on the writer's own thread: its
/// `data_version`, and the recent links too if another connection wrote to the file since the
/// writer last looked, or if it never looked. Inside a transaction, so that what the pragma
/// reports and the rows read after it are one snapshot. [`RecentCodes::caught_up`] applies it.
pub(crate) fn read_file(c: &mut SqliteConnection, codes: &RecentCodes) -> QueryResult<Seen> {
    #[derive(QueryableByName)]
    struct DataVersion {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        data_version: i64,
    }

    let version: DataVersion =
        diesel::RunQueryDsl::get_result(diesel::sql_query("PRAGMA data_version"), c)?;
    let recent = if codes.is_stale(version.data_version) {
        let through: i64 = diesel::RunQueryDsl::get_result(
            link_codes_folded::table.select(link_codes_folded::through_seq),
            c,
        )?;
        Some(diesel::RunQueryDsl::load(
            links::table.filter(links::seq.gt(through)).select((
                links::domain,
                links::short_code,
                links::seq,
            )),
            c,
        )?)
    } else {
        None
    };
    Ok(Seen {
        data_version: version.data_version,
        recent,
    })
}

impl RecentCodes {
    /// Starts a creation's transaction, or a look at the file, with what [`read_file`] saw.
    pub(crate) fn caught_up(&self, held: &Held, seen: Seen) {
        self.begin(held, seen.data_version);
        if let Some(recent) = seen.recent {
            self.reload(held, recent);
        }
    }
}

/// Brings the recent codes up to date with the file now, outside a creation.
pub(crate) async fn look_at_file(writer: &mut Writer, codes: &RecentCodes) -> QueryResult<()> {
    let shared = codes.clone();
    let seen = writer
        .conn()
        .spawn_blocking(move |c| c.transaction(|c| read_file(c, &shared)))
        .await?;
    codes.caught_up(writer.held(), seen);
    Ok(())
}

/// Makes the recent codes every recent link's, for the store that became its file's one server:
/// whatever was created before it took the server lock is read from the file.
pub(crate) async fn complete(writer: &mut Writer, codes: &RecentCodes) -> QueryResult<()> {
    look_at_file(writer, codes).await?;
    codes.set_complete(writer.held());
    Ok(())
}

pub(crate) fn fold_codes(c: &mut SqliteConnection) -> QueryResult<i64> {
    c.immediate_transaction(|c| {
        diesel::RunQueryDsl::execute(
            diesel::sql_query(
                "INSERT INTO link_codes (domain, short_code, link_seq) \
                 SELECT domain, short_code, seq FROM links \
                 WHERE seq > (SELECT through_seq FROM link_codes_folded) \
                 ORDER BY domain, short_code",
            ),
            c,
        )?;
        diesel::RunQueryDsl::execute(
            diesel::sql_query(
                "UPDATE link_codes_folded \
                 SET through_seq = max(through_seq, coalesce((SELECT max(seq) FROM links), 0))",
            ),
            c,
        )?;
        diesel::RunQueryDsl::get_result(
            link_codes_folded::table.select(link_codes_folded::through_seq),
            c,
        )
    })
}

/// Folds the recent codes ([`fold_codes`] on the writer connection, which stays held until the
/// recent codes have forgotten what was folded).
pub(crate) async fn fold(writer: &mut Writer, codes: &RecentCodes) -> Result<(), StorageError> {
    let through = writer.conn().spawn_blocking(fold_codes).await?;
    codes.folded(writer.held(), through);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tentative_codes_count_once_committed() {
        let (codes, held) = (RecentCodes::default(), Held::for_test());
        assert!(codes.begin(&held, 1));
        codes.inserted(&held, "sho.rt".into(), "abc".into(), 7);
        assert_eq!(codes.is_free("sho.rt", "abc"), Some(false));
        assert_eq!(codes.lookup("sho.rt", "abc"), Lookup::SearchRecent);
        codes.finished(&held, true);
        assert_eq!(codes.lookup("sho.rt", "abc"), Lookup::Recent(7));
        assert_eq!(
            codes.is_free("other.rt", "abc"),
            None,
            "only link_codes can tell"
        );
    }

    #[test]
    fn a_rolled_back_or_abandoned_transaction_leaves_nothing() {
        let (codes, held) = (RecentCodes::default(), Held::for_test());
        codes.begin(&held, 1);
        codes.inserted(&held, "sho.rt".into(), "gone".into(), 1);
        codes.finished(&held, false);
        assert_eq!(codes.is_free("sho.rt", "gone"), None);

        codes.inserted(&held, "sho.rt".into(), "stale".into(), 2);
        // The next transaction starts without it.
        assert!(!codes.begin(&held, 1));
        assert_eq!(codes.is_free("sho.rt", "stale"), None);
    }

    #[test]
    fn another_writer_asks_for_a_reload() {
        let (codes, held) = (RecentCodes::default(), Held::for_test());
        assert!(codes.begin(&held, 3), "nothing seen yet");
        assert!(!codes.begin(&held, 3));
        assert!(codes.begin(&held, 4));
        codes.reload(&held, vec![("sho.rt".into(), "x".into(), 9)]);
        assert_eq!(codes.lookup("sho.rt", "x"), Lookup::Recent(9));
        assert_eq!(codes.lookup("sho.rt", "y"), Lookup::SearchRecent);
        codes.set_complete(&held);
        assert_eq!(codes.lookup("sho.rt", "y"), Lookup::Indexed);
    }

    #[test]
    fn deletion_and_fold_forget_codes() {
        let (codes, held) = (RecentCodes::default(), Held::for_test());
        codes.begin(&held, 1);
        for (code, seq) in [("a", 1), ("b", 2), ("c", 3)] {
            codes.inserted(&held, "sho.rt".into(), code.into(), seq);
        }
        codes.finished(&held, true);
        codes.deleted(&held, "sho.rt", "a");
        codes.deleted(&held, "sho.rt", "not-recent");
        assert_eq!(codes.lookup("sho.rt", "a"), Lookup::SearchRecent);
        codes.folded(&held, 2);
        assert_eq!(
            (codes.lookup("sho.rt", "b"), codes.lookup("sho.rt", "c")),
            (Lookup::SearchRecent, Lookup::Recent(3))
        );
        assert_eq!(codes.state().committed.len, 1);
    }
}
