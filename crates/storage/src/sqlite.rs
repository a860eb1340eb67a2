//! The queries, compiled for SQLite, and the few statements whose SQL differs by backend.
//!
//! diesel implements SQLite's batch insert for its synchronous connection only, so the outbox
//! insert runs on it through the wrapper's `spawn_blocking` (inside the caller's transaction: it is
//! the same connection).

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};

use crate::StorageError;
use crate::click_journal::ClickJournal;
use crate::rows::{DeliveryRow, NewLinkRow, RedirectRow};
use crate::schema::webhook_deliveries as d;

pub(crate) type Conn =
    diesel_async::sync_connection_wrapper::SyncConnectionWrapper<diesel::SqliteConnection>;

#[path = "queries/mod.rs"]
#[expect(
    clippy::duplicate_mod,
    reason = "compiled once per backend on purpose: each query is written once"
)]
pub(crate) mod queries;

/// Selects due deliveries. This runs in a write transaction on SQLite's single writer
/// connection, so no other claim can interleave and no row lock is needed.
pub(crate) async fn lock_due(
    c: &mut Conn,
    now: i64,
    limit: i64,
) -> QueryResult<Vec<(String, String)>> {
    queries::due(now, limit).load(c).await
}

/// One multi-row `INSERT … ON CONFLICT DO NOTHING RETURNING id, seq`: the ids and row numbers
/// of the links that were inserted.
///
/// Written as SQL because diesel runs a batch insert of structs on SQLite row by row, and
/// there a row skipped by `DO NOTHING` fails the whole statement with `NotFound`.
pub(crate) async fn insert_new_links(
    c: &mut Conn,
    rows: Vec<NewLinkRow>,
) -> QueryResult<Vec<(String, i64)>> {
    use diesel::sql_types::{BigInt, Text};

    #[derive(QueryableByName)]
    struct Inserted {
        #[diesel(sql_type = Text)]
        id: String,
        #[diesel(sql_type = BigInt)]
        seq: i64,
    }

    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders = vec!["(?, ?, ?, ?, ?, ?, ?)"; rows.len()].join(", ");
    let sql = format!(
        "INSERT INTO links (id, workspace_id, domain, short_code, destination, created_at, \
         updated_at) VALUES {placeholders} ON CONFLICT DO NOTHING RETURNING id, seq"
    );
    let mut query = diesel::sql_query(sql).into_boxed::<diesel::sqlite::Sqlite>();
    for row in rows {
        query = query
            .bind::<Text, _>(row.id)
            .bind::<Text, _>(row.workspace_id)
            .bind::<Text, _>(row.domain)
            .bind::<Text, _>(row.short_code)
            .bind::<Text, _>(row.destination)
            .bind::<BigInt, _>(row.created_at)
            .bind::<BigInt, _>(row.updated_at);
    }
    let inserted: Vec<Inserted> = query.load(c).await?;
    Ok(inserted.into_iter().map(|r| (r.id, r.seq)).collect())
}

/// Adds the counts of a JSON object (`{"<counter key>": clicks, …}`, keys ascending) to the
/// counters: SQLite walks the object and finds each counter by its row key, in key order.
///
/// JSON because diesel prepares every `UPDATE` and `sql_query` anew: an update per link, or one
/// with a thousand rows of `VALUES`, spent most of a flush in SQLite's parser, and a scratch table
/// filled row by row cost a bound insert per link and a second B-tree search per counter.
const ADD_CLICKS: &str = "UPDATE link_clicks SET clicks = link_clicks.clicks + v.n \
    FROM (SELECT CAST(key AS INTEGER) AS k, value AS n FROM json_each(?)) AS v \
    WHERE link_clicks.link_seq = v.k";

/// Counters added per statement (about a millisecond of work; preparing it is a few per cent).
const CLICKS_PER_STATEMENT: usize = 1000;

/// Adds `(counter key, clicks)` pairs, in key order, to the counters, inside the caller's
/// transaction, in statements of [`CLICKS_PER_STATEMENT`] handed to the connection's thread one
/// after the other.
///
/// Slices, because a fold of a million links' clicks is a few hundred milliseconds of CPU: in
/// one piece it would hold a CPU that long against the redirect workers, whose requests would
/// wait behind it (the redirect p99 with the bench's server on one CPU, docs/PERFORMANCE.md).
/// Between two statements the thread waits for the next handoff, and a worker that has requests
/// runs first.
pub(crate) async fn add_clicks(c: &mut Conn, counts: &[(i64, i64)]) -> QueryResult<()> {
    use std::fmt::Write;

    for slice in counts.chunks(CLICKS_PER_STATEMENT) {
        let mut object = String::with_capacity(slice.len() * 12 + 2);
        object.push('{');
        for (i, (key, count)) in slice.iter().enumerate() {
            let comma = if i == 0 { "" } else { "," };
            let _ = write!(object, "{comma}\"{key}\":{count}");
        }
        object.push('}');
        diesel::sql_query(ADD_CLICKS)
            .bind::<diesel::sql_types::Text, _>(object)
            .execute(c)
            .await?;
    }
    Ok(())
}

diesel::table! {
    /// The click journal (`crate::click_journal`): one row per journaled flush.
    click_journal (id) {
        id -> BigInt,
        counts -> Binary,
    }
}

/// Counts a flush's `(counter key, clicks)` pairs, in key order, inside the caller's
/// transaction: as one journal row when the journal is active, else in place.
pub(crate) async fn count_clicks(
    c: &mut Conn,
    counts: &[(i64, i64)],
    journal: Option<&ClickJournal>,
) -> QueryResult<()> {
    if journal.is_some() {
        diesel::insert_into(click_journal::table)
            .values(click_journal::counts.eq(crate::click_journal::encode(counts)))
            .execute(c)
            .await?;
        Ok(())
    } else {
        add_clicks(c, counts).await
    }
}

/// Folds the journal into the counters: adds the in-memory sum (which equals its rows, as the
/// caller holds the writer connection) and deletes the rows, in one transaction committed with
/// the readers held off, then clears the sum before they go on.
pub(crate) async fn fold_journal(c: &mut Conn, journal: &ClickJournal) -> Result<(), StorageError> {
    let counts = journal.to_fold();
    let gate = c
        .transaction(async |c| -> Result<_, StorageError> {
            add_clicks(c, &counts).await?;
            diesel::delete(click_journal::table).execute(c).await?;
            Ok(journal.folding().await)
        })
        .await?;
    journal.folded();
    drop(gate);
    Ok(())
}

/// Adds the rows an earlier process journaled and did not fold to the in-memory sum.
pub(crate) async fn load_journal(c: &mut Conn, journal: &ClickJournal) -> Result<(), StorageError> {
    let rows: Vec<Vec<u8>> = click_journal::table
        .select(click_journal::counts)
        .order(click_journal::id)
        .load(c)
        .await?;
    for row in rows {
        journal.journaled(&crate::click_journal::decode(&row)?);
    }
    Ok(())
}

/// One multi-row insert into the outbox.
pub(crate) async fn insert_deliveries(c: &mut Conn, rows: Vec<DeliveryRow>) -> QueryResult<usize> {
    c.spawn_blocking(move |c| {
        diesel::RunQueryDsl::execute(diesel::insert_into(d::table).values(rows), c)
    })
    .await
}

/// A read-only connection of the caller's own, outside the pools.
fn reader(path: &str) -> Result<diesel::SqliteConnection, crate::StorageError> {
    use diesel::Connection;
    use diesel::connection::SimpleConnection;

    let mut conn = diesel::SqliteConnection::establish(path)
        .map_err(|e| crate::StorageError::Unavailable(e.to_string()))?;
    conn.batch_execute(crate::pool::SQLITE_READER_PRAGMAS)?;
    Ok(conn)
}

/// The redirect's lookup, run synchronously on the calling thread with a read-only connection of
/// that thread's own. An indexed lookup in SQLite takes microseconds, far less than the thread
/// handoffs of the async path (task, blocking pool, and back), which dominated the redirect when
/// most codes miss the cache. With WAL, readers never wait for the writer.
pub(crate) fn resolve_now(
    path: &str,
    domain: &str,
    code: &str,
) -> Result<Option<crate::RedirectTarget>, crate::StorageError> {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use diesel::SqliteConnection;

    thread_local! {
        static READERS: RefCell<HashMap<String, SqliteConnection>> = RefCell::new(HashMap::new());
    }
    READERS.with_borrow_mut(|readers| {
        if !readers.contains_key(path) {
            readers.insert(path.to_owned(), reader(path)?);
        }
        let conn = readers
            .get_mut(path)
            .ok_or(crate::StorageError::Corrupt("reader"))?;
        let found = crate::rows::found(
            diesel::RunQueryDsl::get_result(queries::by_code(domain, code), conn),
            RedirectRow::into_target,
        );
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
) -> Result<Option<crate::redirect_index::Tables>, crate::StorageError> {
    use crate::schema::links;

    const PAGE: i64 = 2_000;
    let mut conn = reader(path)?;
    let mut tables = crate::redirect_index::Tables::new(budget);
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
