//! The queries, compiled for SQLite, and the few statements whose SQL differs by backend.
//!
//! diesel implements SQLite's batch insert for its synchronous connection only, so the outbox
//! insert runs on it through the wrapper's `spawn_blocking` (inside the caller's transaction: it is
//! the same connection).

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};

use std::collections::{HashMap, HashSet};

use crate::StorageError;
use crate::click_journal::ClickJournal;
use crate::recent_codes::{Lookup, RecentCodes};
use crate::rows::{DeliveryRow, NewLinkRow, RedirectRow};
use crate::schema::{link_codes_folded, links, webhook_deliveries as d};

pub(crate) type Conn =
    diesel_async::sync_connection_wrapper::SyncConnectionWrapper<diesel::SqliteConnection>;

#[path = "queries/mod.rs"]
#[expect(
    clippy::duplicate_mod,
    reason = "compiled once per backend on purpose: each query is written once"
)]
pub(crate) mod queries;

/// Selects due deliveries. This runs in a write transaction on SQLite's single writer
/// connection, so no other claim can interleave and no row lock is needed; the file's write lock
/// is taken first ([`lock_for_writing`]).
pub(crate) async fn lock_due(
    c: &mut Conn,
    now: i64,
    limit: i64,
) -> QueryResult<Vec<(String, String)>> {
    lock_for_writing(c).await?;
    queries::due(now, limit).load(c).await
}

/// Takes the file's write lock for the transaction in progress, which must come before any read
/// in a transaction that reads and then writes: a transaction that reads first holds a snapshot,
/// and SQLite fails its first write at once ("database is locked", without waiting) when another
/// connection wrote meanwhile, as the checkpointer does while it restarts the log, or the CLI.
/// Taking the lock first, a transaction waits its turn (the busy timeout) and reads what is
/// current.
pub(crate) async fn lock_for_writing(c: &mut Conn) -> QueryResult<()> {
    c.spawn_blocking(take_write_lock).await
}

/// [`lock_for_writing`] on the connection's own thread: a statement that writes nothing.
fn take_write_lock(c: &mut diesel::SqliteConnection) -> QueryResult<()> {
    diesel::RunQueryDsl::execute(diesel::sql_query("DELETE FROM link_codes WHERE 0"), c)?;
    Ok(())
}

/// The store's recent codes, which every creation on SQLite needs.
fn recent(codes: Option<&RecentCodes>) -> QueryResult<RecentCodes> {
    codes
        .cloned()
        .ok_or_else(|| diesel::result::Error::QueryBuilderError("no recent codes".into()))
}

/// Starts a creation's transaction: takes the file's write lock ([`lock_for_writing`]), then
/// brings the recent codes up to date with the file ([`sync_recent_codes`]), in one handoff.
pub(crate) async fn begin_creation(c: &mut Conn, codes: Option<&RecentCodes>) -> QueryResult<()> {
    let codes = recent(codes)?;
    c.spawn_blocking(move |c| {
        take_write_lock(c)?;
        sync_recent_codes(c, &codes)
    })
    .await
}

/// Reads the recent links again from the file if another connection wrote to it since the writer
/// last looked, or if it never looked (`crate::recent_codes`). Inside a transaction, so that what
/// the pragma reports and the rows read after it are one snapshot.
pub(crate) fn sync_recent_codes(
    c: &mut diesel::SqliteConnection,
    codes: &RecentCodes,
) -> QueryResult<()> {
    #[derive(QueryableByName)]
    struct DataVersion {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        data_version: i64,
    }

    let version: DataVersion =
        diesel::RunQueryDsl::get_result(diesel::sql_query("PRAGMA data_version"), c)?;
    if codes.begin(version.data_version) {
        let through: i64 = diesel::RunQueryDsl::get_result(
            link_codes_folded::table.select(link_codes_folded::through_seq),
            c,
        )?;
        codes.reload(diesel::RunQueryDsl::load(
            links::table.filter(links::seq.gt(through)).select((
                links::domain,
                links::short_code,
                links::seq,
            )),
            c,
        )?);
    }
    Ok(())
}

/// Brings the recent codes up to date with the file now, outside a creation.
pub(crate) async fn look_at_file(c: &mut Conn, codes: &RecentCodes) -> QueryResult<()> {
    use diesel::Connection;

    let codes = codes.clone();
    c.spawn_blocking(move |c| c.transaction(|c| sync_recent_codes(c, &codes)))
        .await
}

/// Makes the recent codes every recent link's, for the store that became its file's one server:
/// whatever was created before it took the server lock is read from the file.
pub(crate) async fn complete_recent_codes(c: &mut Conn, codes: &RecentCodes) -> QueryResult<()> {
    look_at_file(c, codes).await?;
    codes.set_complete();
    Ok(())
}

/// Inserts the links whose code is free and returns their ids and row numbers; a link whose code
/// a recent link, a folded one or an earlier row of the batch has is left out, which the caller
/// reads as a conflict (as `ON CONFLICT DO NOTHING` reports it on PostgreSQL). Inside the
/// caller's transaction, begun with [`begin_creation`]; the inserted codes stay tentative until
/// it commits.
///
/// All of it runs in one handoff to the connection's thread: a handoff per statement costs a
/// thread wake-up each.
pub(crate) async fn insert_new_links(
    c: &mut Conn,
    rows: Vec<NewLinkRow>,
    codes: Option<&RecentCodes>,
) -> QueryResult<Vec<(String, i64)>> {
    let codes = recent(codes)?;
    c.spawn_blocking(move |c| {
        let free = free_codes(c, &rows, &codes)?;
        let rows: Vec<NewLinkRow> = rows
            .into_iter()
            .zip(free)
            .filter_map(|(row, free)| free.then_some(row))
            .collect();
        let inserted = insert_links(c, &rows)?;
        let by_id: HashMap<&str, &NewLinkRow> = rows.iter().map(|r| (r.id.as_str(), r)).collect();
        for (id, seq) in &inserted {
            if let Some(row) = by_id.get(id.as_str()) {
                codes.inserted(row.domain.clone(), row.short_code.clone(), *seq);
            }
        }
        Ok(inserted)
    })
    .await
}

/// For each row, whether its code is free: not a recent link's (committed or tentative), not in
/// the code index (as the redirect index tells, when it can: [`RecentCodes::is_free`]), not an
/// earlier row's.
fn free_codes(
    c: &mut diesel::SqliteConnection,
    rows: &[NewLinkRow],
    codes: &RecentCodes,
) -> QueryResult<Vec<bool>> {
    use crate::schema::link_codes;

    let mut seen = HashSet::with_capacity(rows.len());
    rows.iter()
        .map(|row| {
            let (domain, code) = (row.domain.as_str(), row.short_code.as_str());
            if !seen.insert((domain, code)) {
                return Ok(false);
            }
            match codes.is_free(domain, code) {
                Some(free) => Ok(free),
                None => diesel::RunQueryDsl::get_result(
                    diesel::select(diesel::dsl::not(diesel::dsl::exists(
                        link_codes::table.find((domain, code)),
                    ))),
                    c,
                ),
            }
        })
        .collect()
}

/// Inserts `rows`, as statements of a few fixed sizes ([`InsertLinks`]) that diesel prepares once
/// and keeps (a statement sized to each batch was parsed anew every time: 200 rows have 1,400
/// parameters); returns their ids and row numbers.
fn insert_links(
    c: &mut diesel::SqliteConnection,
    rows: &[NewLinkRow],
) -> QueryResult<Vec<(String, i64)>> {
    let mut inserted = Vec::with_capacity(rows.len());
    let mut rest = rows;
    while !rest.is_empty() {
        let size = InsertLinks::SIZES
            .into_iter()
            .find(|&size| size <= rest.len())
            .unwrap_or(1);
        let (chunk, tail) = rest.split_at(size);
        inserted.extend(diesel::RunQueryDsl::load::<(String, i64)>(
            InsertLinks(chunk),
            c,
        )?);
        rest = tail;
    }
    Ok(inserted)
}

/// Writes the code of every link past the fold mark to `link_codes`, in index order, and moves
/// the mark past them, in one transaction; returns the new mark (`crate::recent_codes`).
pub(crate) fn fold_codes(c: &mut diesel::SqliteConnection) -> QueryResult<i64> {
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

/// Folds the recent codes ([`fold_codes`] on the writer connection, which the caller holds until
/// the recent codes have forgotten what was folded).
pub(crate) async fn fold_recent_codes(
    c: &mut Conn,
    codes: &RecentCodes,
) -> Result<(), StorageError> {
    let through = c.spawn_blocking(fold_codes).await?;
    codes.folded(through);
    Ok(())
}

/// `INSERT INTO links … RETURNING id, seq` of some rows, whose SQL depends only on their number:
/// diesel caches its prepared statement by that SQL, so each of [`InsertLinks::SIZES`] is parsed
/// once per connection. (diesel's own batch insert on SQLite runs row by row when it has a
/// `RETURNING` clause, and its `sql_query` is never cached.)
struct InsertLinks<'a>(&'a [NewLinkRow]);

impl InsertLinks<'_> {
    /// Rows per statement, largest first; a batch is split greedily into these.
    const SIZES: [usize; 4] = [64, 16, 4, 1];
}

impl diesel::query_builder::QueryId for InsertLinks<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl diesel::query_builder::Query for InsertLinks<'_> {
    type SqlType = (diesel::sql_types::Text, diesel::sql_types::BigInt);
}

impl diesel::query_builder::QueryFragment<diesel::sqlite::Sqlite> for InsertLinks<'_> {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, diesel::sqlite::Sqlite>,
    ) -> QueryResult<()> {
        use diesel::sql_types::{BigInt, Text};

        out.push_sql(
            "INSERT INTO links (id, workspace_id, domain, short_code, destination, created_at, \
             updated_at) VALUES ",
        );
        for (i, row) in self.0.iter().enumerate() {
            out.push_sql(if i == 0 { "(" } else { ", (" });
            for (j, text) in [
                &row.id,
                &row.workspace_id,
                &row.domain,
                &row.short_code,
                &row.destination,
            ]
            .into_iter()
            .enumerate()
            {
                if j > 0 {
                    out.push_sql(", ");
                }
                out.push_bind_param::<Text, _>(text)?;
            }
            out.push_sql(", ");
            out.push_bind_param::<BigInt, _>(&row.created_at)?;
            out.push_sql(", ");
            out.push_bind_param::<BigInt, _>(&row.updated_at)?;
            out.push_sql(")");
        }
        out.push_sql(" RETURNING id, seq");
        Ok(())
    }
}

impl diesel::query_dsl::RunQueryDsl<diesel::SqliteConnection> for InsertLinks<'_> {}

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
    let started = std::time::Instant::now();
    let mut links = 0;
    let gate = c
        .transaction(async |c| -> Result<_, StorageError> {
            let mut after = i64::MIN;
            loop {
                let counts = journal.to_fold_after(after, CLICKS_PER_STATEMENT);
                let Some(&(last, _)) = counts.last() else {
                    break;
                };
                add_clicks(c, &counts).await?;
                (after, links) = (last, links + counts.len());
            }
            diesel::delete(click_journal::table).execute(c).await?;
            Ok(journal.folding().await)
        })
        .await?;
    journal.folded();
    drop(gate);
    tracing::debug!(
        links,
        elapsed_ms = started.elapsed().as_millis(),
        "folded the click journal into the counters"
    );
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
    codes: &RecentCodes,
) -> Result<Option<crate::model::RedirectTarget>, crate::StorageError> {
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
) -> Result<Option<crate::redirect_index::Tables>, crate::StorageError> {
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
