//! Reads outside the pools, on the calling thread: the redirect's lookup, and the redirect
//! index's load.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use diesel::prelude::*;
use diesel::{Connection, SqliteConnection};
use hashbrown::HashMap;
use hashbrown::hash_map::Entry;

use super::pool::SQLITE_READER_PRAGMAS;
use super::queries;
use super::recent_codes::RecentCodes;
use super::redirect_index::Tables;
use crate::StorageError;
use crate::hooks::Lookup;
use crate::model::RedirectTarget;
use crate::rows::RedirectRow;
use crate::schema::links;

/// A read-only connection of the caller's own, outside the pools.
pub(crate) fn reader(path: &str) -> Result<SqliteConnection, StorageError> {
    use diesel::connection::SimpleConnection;

    let mut conn =
        SqliteConnection::establish(path).map_err(|e| StorageError::Unavailable(e.to_string()))?;
    conn.batch_execute(SQLITE_READER_PRAGMAS)?;
    Ok(conn)
}

/// Who a thread's reader connection is for: one store's [`Sqlite`](super::Sqlite), by a number
/// no other store gets, and whether that store is still open.
pub(crate) struct ReaderKey {
    id: u64,
    open: Arc<()>,
}

impl ReaderKey {
    /// A key of its own, for a store opened now.
    pub(crate) fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            open: Arc::new(()),
        }
    }
}

thread_local! {
    /// Each thread's reader connection per store, with a token that says whether the store is
    /// still open: a thread outlives the stores it served (tests open many), and their
    /// connections are closed when the thread next opens one for another store.
    static READERS: RefCell<HashMap<u64, (Weak<()>, SqliteConnection)>> =
        RefCell::new(HashMap::new());
}

/// The redirect's lookup, run synchronously on the calling thread with a read-only connection of
/// that thread's own. An indexed lookup in SQLite takes microseconds, far less than the thread
/// handoffs of the async path (task, blocking pool, and back), which dominated the redirect when
/// most codes miss the cache. With WAL, readers never wait for the writer.
pub(crate) fn resolve(
    key: &ReaderKey,
    path: &str,
    domain: &str,
    code: &str,
    codes: &RecentCodes,
) -> Result<Option<RedirectTarget>, StorageError> {
    READERS.with_borrow_mut(|readers| {
        let conn = match readers.entry(key.id) {
            Entry::Occupied(entry) => &mut entry.into_mut().1,
            Entry::Vacant(_) => {
                forget_closed(readers);
                let conn = reader(path)?;
                &mut readers
                    .entry(key.id)
                    .or_insert((Arc::downgrade(&key.open), conn))
                    .1
            }
        };
        let recent = match codes.lookup(domain, code) {
            Lookup::Recent(seq) => Ok(Some(seq)),
            Lookup::Indexed => Ok(None),
            Lookup::SearchRecent => {
                diesel::RunQueryDsl::get_result(queries::unfolded(domain, code), conn).optional()
            }
        };
        let found = recent.map_err(StorageError::from).and_then(|recent| {
            crate::rows::found(
                diesel::RunQueryDsl::get_result(queries::by_code(domain, code, recent), conn),
                RedirectRow::into_target,
            )
        });
        if found.is_err() {
            // A broken connection is not kept.
            readers.remove(&key.id);
        }
        found
    })
}

/// Closes this thread's connections of stores that are closed; called when the thread opens a
/// connection for a new store, so that a thread holds at most one per open store and one more.
fn forget_closed(readers: &mut HashMap<u64, (Weak<()>, SqliteConnection)>) {
    readers.retain(|_, (open, _)| open.strong_count() > 0);
}

/// Every link's redirect target, read a page at a time on a connection of its own (whose page
/// cache goes with it) on the calling thread, which loading blocks; `None` when they do not fit
/// in `budget` bytes.
pub(crate) fn load_redirect_index(
    path: &str,
    budget: usize,
) -> Result<Option<Tables>, StorageError> {
    const PAGE: i64 = 2_000;
    let mut conn = reader(path)?;
    let mut tables = Tables::new(budget);
    let mut after = 0;
    loop {
        let page: Vec<(String, String, RedirectRow)> = diesel::RunQueryDsl::load(
            links::table
                .filter(links::seq.gt(after))
                .order(links::seq)
                .limit(PAGE)
                .select((links::domain, links::short_code, RedirectRow::as_select())),
            &mut conn,
        )?;
        let Some((_, _, last)) = page.last() else {
            return Ok(Some(tables));
        };
        after = last.seq;
        for (domain, code, row) in page {
            if !tables.insert(&domain, &code, &row.into_target()?) {
                return Ok(None);
            }
        }
    }
}
