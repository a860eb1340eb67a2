//! Reads outside the pools, on the calling thread: the redirect's lookup, and the redirect
//! index's load.

use std::cell::RefCell;

use diesel::prelude::*;
use diesel::{Connection, SqliteConnection};
use hashbrown::HashMap;
use hashbrown::hash_map::EntryRef;

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

thread_local! {
    /// Each thread's reader connection per file.
    static READERS: RefCell<HashMap<String, SqliteConnection>> = RefCell::new(HashMap::new());
}

/// The redirect's lookup, run synchronously on the calling thread with a read-only connection of
/// that thread's own. An indexed lookup in SQLite takes microseconds, far less than the thread
/// handoffs of the async path (task, blocking pool, and back), which dominated the redirect when
/// most codes miss the cache. With WAL, readers never wait for the writer.
pub(crate) fn resolve(
    path: &str,
    domain: &str,
    code: &str,
    codes: &RecentCodes,
) -> Result<Option<RedirectTarget>, StorageError> {
    READERS.with_borrow_mut(|readers| {
        // By reference: the path is copied only when the thread's first connection is made.
        let conn = match readers.entry_ref(path) {
            EntryRef::Occupied(entry) => entry.into_mut(),
            EntryRef::Vacant(entry) => entry.insert(reader(path)?),
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
            readers.remove(path);
        }
        found
    })
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
