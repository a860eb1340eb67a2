//! The queries, compiled for PostgreSQL, and the few statements whose SQL differs by backend.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::{DeliveryRow, NewLinkRow};
use crate::schema::{links, webhook_deliveries as d};

pub(crate) type Conn = diesel_async::AsyncPgConnection;

#[path = "queries/mod.rs"]
#[expect(
    clippy::duplicate_mod,
    reason = "compiled once per backend on purpose: each query is written once"
)]
pub(crate) mod queries;

/// Selects due deliveries and locks their rows for the caller's transaction, skipping rows
/// another process has locked: several servers claim side by side without taking the same one.
pub(crate) async fn lock_due(
    c: &mut Conn,
    now: i64,
    limit: i64,
) -> QueryResult<Vec<(String, String)>> {
    queries::due(now, limit)
        .for_update()
        .skip_locked()
        .load(c)
        .await
}

/// One multi-row `INSERT … ON CONFLICT DO NOTHING RETURNING id`: the ids that were inserted.
pub(crate) async fn insert_new_links(
    c: &mut Conn,
    rows: Vec<NewLinkRow>,
) -> QueryResult<Vec<String>> {
    diesel::insert_into(links::table)
        .values(rows)
        .on_conflict_do_nothing()
        .returning(links::id)
        .get_results(c)
        .await
}

/// One multi-row insert into the outbox.
pub(crate) async fn insert_deliveries(c: &mut Conn, rows: Vec<DeliveryRow>) -> QueryResult<usize> {
    diesel::insert_into(d::table).values(rows).execute(c).await
}

/// Bind placeholders are numbered: `$1`, `$2`, ….
pub(crate) fn placeholder(n: usize) -> String {
    format!("${n}")
}
