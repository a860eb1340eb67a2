//! The few statements whose SQL or shape differs on SQLite, which the queries written once
//! (`queries/`) call by name: the writer's lock, creation against the recent codes, multi-row
//! inserts (counting clicks is `click_journal.rs`'s).
//!
//! diesel implements SQLite's batch insert for its synchronous connection only, so the outbox
//! insert runs on it through the wrapper's `spawn_blocking` (inside the caller's transaction: it is
//! the same connection).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use std::collections::{HashMap, HashSet};

use super::Conn;
use super::queries::{self, Due};
use super::recent_codes::{RecentCodes, read_file};
use super::writer::Held;
use crate::rows::{AttemptRow, DeliveryRow, LinkRow, NewLinkRow, RollupRow, fixed_size_runs};
use crate::schema::webhook_deliveries as d;
use crate::transaction::TransactionBody;

/// Selects an endpoint's due deliveries of one kind. This runs in a write transaction on
/// SQLite's single writer connection, whose claim took the file's write lock first
/// ([`write_transaction`]), so no other claim can interleave and no row lock is needed.
pub(crate) async fn lock_due(
    c: &mut Conn,
    due: Due,
    webhook: &str,
    now: i64,
    limit: usize,
) -> QueryResult<Vec<String>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    match due {
        Due::Retries => queries::due_retries(webhook, now, limit).load(c).await,
        Due::FirstTries => queries::due_first_tries(webhook, now, limit).load(c).await,
    }
}

/// Runs `f` in a transaction that writes, begun with `BEGIN IMMEDIATE`: it takes the file's write
/// lock before its first read. A transaction that reads first holds a snapshot, and SQLite fails
/// its first write at once ("database is locked", without waiting) when another connection wrote
/// meanwhile, as the checkpointer does while it restarts the log, or the CLI. Taking the lock
/// first, a transaction waits its turn (the busy timeout) and reads what is current.
pub(crate) fn write_transaction<'a, 'conn, R, E, F>(
    c: &'conn mut Conn,
    f: F,
) -> impl Future<Output = Result<R, E>> + Send + 'conn
where
    for<'r> F: TransactionBody<&'r mut Conn, Result<R, E>, Fut: Send> + Send + 'a,
    E: From<diesel::result::Error> + Send + 'a,
    R: Send + 'a,
    'a: 'conn,
{
    c.immediate_transaction(f)
}

/// Reads an endpoint's count of consecutive failures and when it was disabled (`None`: it is
/// gone). SQLite's single writer orders every write: nothing to lock.
pub(crate) async fn lock_endpoint(
    c: &mut Conn,
    webhook_id: &str,
    _to_write: bool,
) -> QueryResult<Option<(i32, Option<i64>)>> {
    use crate::schema::webhooks;
    webhooks::table
        .find(webhook_id)
        .select((webhooks::consecutive_failures, webhooks::disabled_at))
        .get_result(c)
        .await
        .optional()
}

/// `row`'s link, as read: the caller's write transaction holds the file's write lock, so nothing
/// changed it since.
pub(crate) async fn lock_link(_c: &mut Conn, row: LinkRow) -> QueryResult<Option<LinkRow>> {
    Ok(Some(row))
}

/// SQLite's single writer: the caller's write transaction holds the file's write lock, so no
/// other transaction changes the workspace's rows meanwhile.
pub(crate) async fn lock_workspace(_c: &mut Conn, _workspace_id: &str) -> QueryResult<()> {
    Ok(())
}

/// SQLite's single writer: no other transaction is open to write deliveries.
pub(crate) async fn exclude_delivery_writers(_c: &mut Conn, _webhook_id: &str) -> QueryResult<()> {
    Ok(())
}

/// The active endpoints of `workspaces`; SQLite's single writer orders every write, and the
/// deliveries' foreign key stays: nothing to lock.
pub(crate) async fn lock_subscribed(
    c: &mut Conn,
    workspaces: Vec<String>,
) -> QueryResult<Vec<(String, String, String)>> {
    queries::subscribed(workspaces).load(c).await
}

/// A SQLite file has one server, which changes its caches itself: nobody to tell.
pub(crate) async fn announce(
    _c: &mut Conn,
    _changes: &[crate::model::Change],
) -> Result<(), crate::StorageError> {
    Ok(())
}

/// What a creation on SQLite works with beside its connection: the store's recent codes, and
/// the proof that it holds the writer, which changing them takes.
pub(crate) struct Creation<'a> {
    /// The store's recent codes.
    pub(crate) codes: &'a RecentCodes,
    /// The writer is held.
    pub(crate) held: &'a Held,
}

/// Starts a creation's transaction (a [`write_transaction`]): brings the recent codes up to date
/// with the file (`recent_codes::read_file`).
pub(crate) async fn begin_creation(c: &mut Conn, creation: &Creation<'_>) -> QueryResult<()> {
    let codes = creation.codes.clone();
    let seen = c.spawn_blocking(move |c| read_file(c, &codes)).await?;
    creation.codes.caught_up(creation.held, seen);
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
    creation: &Creation<'_>,
) -> QueryResult<Vec<(String, i64)>> {
    let codes = creation.codes.clone();
    let (inserted, tentative) = c
        .spawn_blocking(move |c| {
            let free = free_codes(c, &rows, &codes)?;
            let rows: Vec<NewLinkRow> = rows
                .into_iter()
                .zip(free)
                .filter_map(|(row, free)| free.then_some(row))
                .collect();
            let inserted = insert_links(c, &rows)?;
            let mut by_id: HashMap<String, NewLinkRow> =
                rows.into_iter().map(|r| (r.id.clone(), r)).collect();
            let tentative: Vec<(String, String, i64)> = inserted
                .iter()
                .filter_map(|(id, seq)| {
                    let row = by_id.remove(id)?;
                    Some((row.domain, row.short_code, *seq))
                })
                .collect();
            Ok((inserted, tentative))
        })
        .await?;
    for (domain, code, seq) in tentative {
        creation.codes.inserted(creation.held, domain, code, seq);
    }
    Ok(inserted)
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
    for run in fixed_size_runs(rows, &InsertLinks::SIZES) {
        inserted.extend(diesel::RunQueryDsl::load::<(String, i64)>(
            InsertLinks(run),
            c,
        )?);
    }
    Ok(inserted)
}

/// `INSERT INTO links … RETURNING id, seq` of some rows, whose SQL depends only on their number:
/// diesel caches its prepared statement by that SQL, so each of [`InsertLinks::SIZES`] is parsed
/// once per connection. (diesel's own batch insert on SQLite runs row by row when it has a
/// `RETURNING` clause, and its `sql_query` is never cached.)
struct InsertLinks<'a>(&'a [NewLinkRow]);

impl InsertLinks<'_> {
    /// Rows per statement, largest first; a batch is split greedily into these
    /// ([`fixed_size_runs`]).
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
        use diesel::sql_types::{BigInt, Bool, Nullable, Text};

        out.push_sql(
            "INSERT INTO links (id, workspace_id, domain, short_code, destination, created_at, \
             updated_at, rules, tags, archived) VALUES ",
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
            for text in [&row.rules, &row.tags] {
                out.push_sql(", ");
                out.push_bind_param::<Nullable<Text>, _>(text)?;
            }
            out.push_sql(", ");
            out.push_bind_param::<Bool, _>(&row.archived)?;
            out.push_sql(")");
        }
        out.push_sql(" RETURNING id, seq");
        Ok(())
    }
}

impl diesel::query_dsl::RunQueryDsl<diesel::SqliteConnection> for InsertLinks<'_> {}

/// Every click of `batch` as an event ([`queries::InsertEvents`]), on the connection's thread
/// (the rows borrow from the batch: no copy of a click's text).
pub(crate) async fn insert_event_rows(
    c: &mut Conn,
    batch: std::sync::Arc<crate::model::ClickBatch>,
) -> QueryResult<()> {
    c.spawn_blocking(move |c| {
        let rows: Vec<_> = crate::rows::event_rows(&batch).collect();
        for run in fixed_size_runs(&rows, &queries::InsertEvents::SIZES) {
            diesel::RunQueryDsl::execute(queries::InsertEvents(run), c)?;
        }
        Ok(())
    })
    .await
}

/// One multi-row insert into the outbox.
pub(crate) async fn insert_deliveries(c: &mut Conn, rows: Vec<DeliveryRow>) -> QueryResult<usize> {
    c.spawn_blocking(move |c| {
        diesel::RunQueryDsl::execute(diesel::insert_into(d::table).values(rows), c)
    })
    .await
}

/// See the PostgreSQL one: SQLite's planner, given the join, starts from the workspace's links
/// and sorts all their events for each page.
pub(crate) const EXPORT_JOINS_LINKS: bool = false;

/// How the flush's event insert begins. `OR FAIL` lets an error stop the statement without
/// undoing the rows it already wrote, so SQLite keeps no statement journal (a copy of each page
/// the statement changes first: 7 % of the flush's CPU with events over many links). The
/// flush's transaction is rolled back whole on any error, so no partial statement survives.
pub(crate) const INSERT_EVENTS: &str = "INSERT OR FAIL INTO";

/// See the PostgreSQL one.
pub(crate) const HAS_MIGRATIONS_TABLE: &str = "SELECT count(*) AS n FROM sqlite_master \
     WHERE type = 'table' AND name = '__diesel_schema_migrations'";

/// See the PostgreSQL one: SQLite's default collation (`BINARY`) compares bytes already.
pub(crate) const IN_BYTE_ORDER: &str = "";

/// Loads a query's rows on the synchronous connection, which reads each row straight into its
/// values: diesel-async's wrapper first copies every value of every row (`sqlite3_value_dup`),
/// which was a sixth of an export's CPU.
pub(crate) async fn load_rows<Q, U>(c: &mut Conn, query: Q) -> QueryResult<Vec<U>>
where
    Q: diesel::query_dsl::LoadQuery<'static, diesel::SqliteConnection, U> + Send + 'static,
    U: Send + 'static,
{
    c.spawn_blocking(move |c| diesel::RunQueryDsl::load(query, c))
        .await
}

/// One multi-row insert of analytics rollup rows.
pub(crate) async fn insert_rollup_rows(c: &mut Conn, rows: Vec<RollupRow>) -> QueryResult<usize> {
    c.spawn_blocking(move |c| {
        diesel::RunQueryDsl::execute(
            diesel::insert_into(crate::schema::click_rollups::table).values(rows),
            c,
        )
    })
    .await
}

/// One multi-row insert of attempt records.
pub(crate) async fn insert_attempts(c: &mut Conn, rows: Vec<AttemptRow>) -> QueryResult<usize> {
    c.spawn_blocking(move |c| {
        diesel::RunQueryDsl::execute(
            diesel::insert_into(crate::schema::webhook_attempts::table).values(rows),
            c,
        )
    })
    .await
}
