//! The queries, compiled for PostgreSQL, and the few statements whose SQL differs by backend.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};

use tokio::sync::RwLock;

use crate::StorageError;
use crate::hooks::{Hooks, Lookup};
use crate::rows::{AttemptRow, DeliveryRow, LinkRow, NewLinkRow, RollupRow};
use crate::schema::links;
use crate::transaction::TransactionBody;

/// The connection type the queries are compiled for here.
pub(crate) type Conn = diesel_async::AsyncPgConnection;

#[path = "queries/mod.rs"]
#[expect(
    clippy::duplicate_mod,
    reason = "compiled once per backend on purpose: each query is written once"
)]
pub(crate) mod queries;

pub(crate) mod changes;
pub(crate) mod partitions;

/// Selects an endpoint's due deliveries of one kind and locks their rows for the caller's
/// transaction, skipping rows another process has locked: several servers claim side by side
/// without taking the same one.
pub(crate) async fn lock_due(
    c: &mut Conn,
    due: queries::Due,
    webhook: &str,
    now: i64,
    limit: usize,
) -> QueryResult<Vec<String>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    match due {
        queries::Due::Retries => {
            queries::due_retries(webhook, now, limit)
                .for_update()
                .skip_locked()
                .load(c)
                .await
        }
        queries::Due::FirstTries => {
            queries::due_first_tries(webhook, now, limit)
                .for_update()
                .skip_locked()
                .load(c)
                .await
        }
    }
}

/// Runs `f` in a transaction that writes: a plain one, since PostgreSQL's row locks order the
/// writes of a transaction that reads first (SQLite's takes the file's write lock first).
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
    c.transaction(f)
}

/// `row`'s link as it is now, its row locked for the caller's transaction (`None`: it is gone), so
/// that a change computed from it is not written over one committed since it was read: two
/// PATCHes of one link otherwise each wrote back the other's fields as they found them. The lock
/// leaves the counter's row alone (the click flush updates it) and takes no key (events' and
/// tags' foreign keys still share it).
pub(crate) async fn lock_link(c: &mut Conn, row: LinkRow) -> QueryResult<Option<LinkRow>> {
    let locked: Option<i64> = links::table
        .find(row.seq)
        .select(links::seq)
        .for_no_key_update()
        .get_result(c)
        .await
        .optional()?;
    if locked.is_none() {
        return Ok(None);
    }
    crate::rows::with_clicks()
        .select(LinkRow::as_select())
        .filter(links::seq.eq(row.seq))
        .get_result(c)
        .await
        .optional()
}

/// Reads an endpoint's count of consecutive failures and when it was disabled (`None`: it is
/// gone), and locks its row before its deliveries are touched: one lock order, endpoint then
/// deliveries, for everything that writes both. A deletion locks the endpoint and then deletes
/// its deliveries; an attempt's record used to lock a delivery and then its endpoint (to count a
/// failure), and the two deadlocked.
///
/// `to_write`: the caller may write the row (count a failure, reset the count, disable the
/// endpoint, which fails every pending delivery), and takes the lock that needs now. Taken
/// later, two instances recording failures of one endpoint deadlocked: one held a delivery and
/// waited for the endpoint's row, the other held that row and, disabling the endpoint, waited
/// for the delivery. Otherwise a key-share lock: it does not block other attempts, new
/// deliveries (they take the same) or failure counts; it only waits for a deletion, and makes a
/// deletion wait for it. Writing deliveries takes the same ([`lock_subscribed`]).
pub(crate) async fn lock_endpoint(
    c: &mut Conn,
    webhook_id: &str,
    to_write: bool,
) -> QueryResult<Option<(i32, Option<i64>)>> {
    use crate::schema::webhooks;
    let endpoint = webhooks::table
        .find(webhook_id)
        .select((webhooks::consecutive_failures, webhooks::disabled_at));
    if to_write {
        endpoint.for_no_key_update().get_result(c).await.optional()
    } else {
        endpoint.for_key_share().get_result(c).await.optional()
    }
}

/// Locks the workspace's row until the caller's transaction ends, so that what it counts of the
/// workspace's rows holds until it writes. `NO KEY UPDATE`: the key-share locks of rows written
/// under the workspace (a link's foreign key) do not wait for it.
pub(crate) async fn lock_workspace(c: &mut Conn, workspace_id: &str) -> QueryResult<()> {
    use crate::schema::workspaces;
    workspaces::table
        .find(workspace_id)
        .select(workspaces::id)
        .for_no_key_update()
        .get_result::<String>(c)
        .await
        .optional()?;
    Ok(())
}

/// Waits until no transaction that may still write deliveries for the endpoint is open, and keeps
/// new ones out until the caller's ends: they hold a key-share lock on it from reading it as
/// subscribed (`lock_subscribed`) to their commit, which this lock waits for and excludes. A
/// transaction let in afterwards reads the endpoint as it is then (disabled, say). Without it,
/// disabling an endpoint failed its pending deliveries while a click flush that had read it
/// active was still writing more, which then waited for ever.
pub(crate) async fn exclude_delivery_writers(c: &mut Conn, webhook_id: &str) -> QueryResult<()> {
    use crate::schema::webhooks;
    webhooks::table
        .find(webhook_id)
        .select(webhooks::id)
        .for_update()
        .get_result::<String>(c)
        .await
        .optional()?;
    Ok(())
}

/// The active endpoints of `workspaces`, each with a key-share lock for the caller's
/// transaction, which writes their deliveries: a deletion of one of them waits for the
/// transaction, or the transaction for the deletion, and then reads it no more. The lock the
/// deliveries' foreign key took for every row, once per endpoint (it was a third of a burst's
/// outbox inserts); the lock order stays endpoint, then deliveries.
pub(crate) async fn lock_subscribed(
    c: &mut Conn,
    workspaces: Vec<String>,
) -> QueryResult<Vec<(String, String, String)>> {
    // In one order (by id), as every transaction that locks several endpoints does.
    queries::subscribed(workspaces)
        .order(crate::schema::webhooks::id)
        .for_key_share()
        .load(c)
        .await
}

/// Tells the other instances, at commit, what the transaction changed.
pub(crate) async fn announce(
    c: &mut Conn,
    changes: &[crate::model::Change],
) -> Result<(), StorageError> {
    changes::announce(c, changes).await
}

/// PostgreSQL keeps nothing in memory beside the database: several servers share its rows, so
/// every row is current, and every code is in the code index (a view of `links`).
pub(crate) struct Postgres;

impl Hooks for Postgres {
    fn lookup(&self, _domain: &str, _code: &str) -> Lookup {
        Lookup::Indexed
    }

    fn unfolded_clicks(&self, _key: i64) -> i64 {
        0
    }

    fn clicks_gate(&self) -> Option<&RwLock<()>> {
        None
    }

    fn journals_clicks(&self) -> bool {
        false
    }

    fn journaled(&self, _counts: &[(i64, i64)]) {}
}

/// What a creation works with beside its connection: nothing (SQLite's are its recent codes).
pub(crate) type Creation<'a> = Postgres;

/// Nothing to prepare: the unique constraint on codes keeps them apart (SQLite's creations read
/// its recent codes here).
pub(crate) async fn begin_creation(_c: &mut Conn, _creation: &Creation<'_>) -> QueryResult<()> {
    Ok(())
}

/// One multi-row `INSERT … ON CONFLICT DO NOTHING RETURNING id, seq`: the ids and row numbers
/// of the links that were inserted; a link whose code is taken is left out.
pub(crate) async fn insert_new_links(
    c: &mut Conn,
    rows: Vec<NewLinkRow>,
    _creation: &Creation<'_>,
) -> QueryResult<Vec<(String, i64)>> {
    diesel::insert_into(links::table)
        .values(rows)
        .on_conflict_do_nothing()
        .returning((links::id, links::seq))
        .get_results(c)
        .await
}

/// The redirect's lookup: the code index (a view of `links`) has every link.
pub(crate) async fn resolve(
    c: &mut Conn,
    domain: &str,
    code: &str,
) -> Result<Option<crate::model::RedirectTarget>, StorageError> {
    crate::rows::found(
        queries::by_code(domain, code, None).get_result(c).await,
        crate::rows::RedirectRow::into_target,
    )
}

/// Links per counter update: 2 bound values each, well under PostgreSQL's limit.
const UPDATE_CHUNK: usize = 1000;

/// Adds `(counter key, clicks)` pairs to the counters, a statement per thousand:
/// `WITH v(k, n) AS (VALUES …) UPDATE link_clicks SET clicks = link_clicks.clicks + v.n FROM v
/// …`. A statement per link would cost a round trip per clicked link.
pub(crate) async fn add_clicks(c: &mut Conn, counts: &[(i64, i64)]) -> QueryResult<()> {
    use diesel::sql_types::BigInt;

    for chunk in counts.chunks(UPDATE_CHUNK) {
        let values: Vec<String> = (1..=chunk.len())
            .map(|i| format!("(${}, ${})", 2 * i - 1, 2 * i))
            .collect();
        let sql = format!(
            "WITH v (k, n) AS (VALUES {}) UPDATE link_clicks \
             SET clicks = link_clicks.clicks + v.n FROM v WHERE link_clicks.link_seq = v.k",
            values.join(", ")
        );
        let mut query = diesel::sql_query(sql).into_boxed::<diesel::pg::Pg>();
        for &(key, count) in chunk {
            query = query.bind::<BigInt, _>(key).bind::<BigInt, _>(count);
        }
        query.execute(c).await?;
    }
    Ok(())
}

/// Counts a flush's `(counter key, clicks)` pairs in place: several servers may share these
/// counters, so there is no journal on PostgreSQL.
pub(crate) async fn count_clicks(
    c: &mut Conn,
    counts: &[(i64, i64)],
    _hooks: &impl Hooks,
) -> Result<(), StorageError> {
    Ok(add_clicks(c, counts).await?)
}

/// Every click of `batch` as an event ([`queries::InsertEvents`]).
pub(crate) async fn insert_event_rows(
    c: &mut Conn,
    batch: std::sync::Arc<crate::model::ClickBatch>,
) -> QueryResult<()> {
    let rows: Vec<_> = crate::rows::event_rows(&batch).collect();
    for run in crate::rows::fixed_size_runs(&rows, &queries::InsertEvents::SIZES) {
        queries::InsertEvents(run).execute(c).await?;
    }
    Ok(())
}

/// One insert into the outbox: the rows as one array per column, unnested by the server, so the
/// statement has twelve parameters whatever the rows, not twelve per row.
pub(crate) async fn insert_deliveries(c: &mut Conn, rows: Vec<DeliveryRow>) -> QueryResult<usize> {
    use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text};
    let mut cols = DeliveryColumns::default();
    for row in rows {
        cols.push(row);
    }
    diesel::sql_query(
        "INSERT INTO webhook_deliveries (event_id, webhook_id, event_type, payload, state, \
         attempts, next_attempt_at, locked_until, last_status_code, last_error, created_at, \
         updated_at) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], \
         $5::text[], $6::int4[], $7::int8[], $8::int8[], $9::int4[], $10::text[], $11::int8[], \
         $12::int8[])",
    )
    .bind::<Array<Text>, _>(cols.event_id)
    .bind::<Array<Text>, _>(cols.webhook_id)
    .bind::<Array<Text>, _>(cols.event_type)
    .bind::<Array<Text>, _>(cols.payload)
    .bind::<Array<Text>, _>(cols.state)
    .bind::<Array<Integer>, _>(cols.attempts)
    .bind::<Array<BigInt>, _>(cols.next_attempt_at)
    .bind::<Array<Nullable<BigInt>>, _>(cols.locked_until)
    .bind::<Array<Nullable<Integer>>, _>(cols.last_status_code)
    .bind::<Array<Nullable<Text>>, _>(cols.last_error)
    .bind::<Array<BigInt>, _>(cols.created_at)
    .bind::<Array<BigInt>, _>(cols.updated_at)
    .execute(c)
    .await
}

/// [`DeliveryRow`]s as one vector per column.
#[derive(Default)]
struct DeliveryColumns {
    event_id: Vec<String>,
    webhook_id: Vec<String>,
    event_type: Vec<String>,
    payload: Vec<String>,
    state: Vec<String>,
    attempts: Vec<i32>,
    next_attempt_at: Vec<i64>,
    locked_until: Vec<Option<i64>>,
    last_status_code: Vec<Option<i32>>,
    last_error: Vec<Option<String>>,
    created_at: Vec<i64>,
    updated_at: Vec<i64>,
}

impl DeliveryColumns {
    fn push(&mut self, row: DeliveryRow) {
        self.event_id.push(row.event_id);
        self.webhook_id.push(row.webhook_id);
        self.event_type.push(row.event_type);
        self.payload.push(row.payload);
        self.state.push(row.state);
        self.attempts.push(row.attempts);
        self.next_attempt_at.push(row.next_attempt_at);
        self.locked_until.push(row.locked_until);
        self.last_status_code.push(row.last_status_code);
        self.last_error.push(row.last_error);
        self.created_at.push(row.created_at);
        self.updated_at.push(row.updated_at);
    }
}

/// Whether the export reads its events joined with their links (PostgreSQL's planner walks the
/// events' time index and looks each link up) rather than looking each link up in a subquery
/// (SQLite's planner would read every event of the workspace's links and sort them, for each
/// page). See `queries/analytics.rs`, `export_events`.
pub(crate) const EXPORT_JOINS_LINKS: bool = true;

/// How the flush's event insert begins (see the SQLite one, which has a reason to differ).
pub(crate) const INSERT_EVENTS: &str = "INSERT INTO";

/// Whether the migrations' bookkeeping table exists (a database no migration ran on has none).
pub(crate) const HAS_MIGRATIONS_TABLE: &str = "SELECT count(*) AS n FROM pg_catalog.pg_tables \
     WHERE schemaname = current_schema() AND tablename = '__diesel_schema_migrations'";

/// What makes an ordering of text compare bytes, whatever collation the database was created
/// with (en_US and ICU ones order punctuation and case otherwise).
pub(crate) const IN_BYTE_ORDER: &str = " COLLATE \"C\"";

/// Loads a query's rows (see the SQLite one, which has a reason to differ).
pub(crate) fn load_rows<'a, Q, U>(
    c: &'a mut Conn,
    query: Q,
) -> impl Future<Output = QueryResult<Vec<U>>> + Send + 'a
where
    Q: diesel_async::methods::LoadQuery<'a, Conn, U> + Send + 'a,
    U: Send + 'a,
{
    query.load(c)
}

/// One multi-row insert of analytics rollup rows.
pub(crate) async fn insert_rollup_rows(c: &mut Conn, rows: Vec<RollupRow>) -> QueryResult<usize> {
    diesel::insert_into(crate::schema::click_rollups::table)
        .values(rows)
        .execute(c)
        .await
}

/// One multi-row insert of attempt records.
pub(crate) async fn insert_attempts(c: &mut Conn, rows: Vec<AttemptRow>) -> QueryResult<usize> {
    diesel::insert_into(crate::schema::webhook_attempts::table)
        .values(rows)
        .execute(c)
        .await
}
