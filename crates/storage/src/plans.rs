//! The planners' choices for queries written for an index: a planner passes over an index when
//! the query does not match it exactly (a partial index's predicate given as bound values, say),
//! and nothing else would show that until a table grows large. Each test asks the backend to
//! explain the query as diesel builds it, values bound.

use std::marker::PhantomData;

use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::result::QueryResult;
use diesel::sql_types::{Integer, Text};
use diesel_async::{AsyncConnection, RunQueryDsl};

use crate::testing::TestDatabase;

/// `query` behind the backend's `EXPLAIN` prefix; `ST` is the explanation's row type.
struct Explain<Q, ST> {
    prefix: &'static str,
    query: Q,
    row: PhantomData<ST>,
}

fn explain<Q, ST>(prefix: &'static str, query: Q) -> Explain<Q, ST> {
    Explain {
        prefix,
        query,
        row: PhantomData,
    }
}

impl<Q: QueryFragment<DB>, ST, DB: Backend> QueryFragment<DB> for Explain<Q, ST> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        out.push_sql(self.prefix);
        self.query.walk_ast(out.reborrow())
    }
}

impl<Q, ST: 'static> QueryId for Explain<Q, ST> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q, ST> Query for Explain<Q, ST> {
    type SqlType = ST;
}

const ENDPOINT: &str = "wh_01JDQ0000000000000000000000";
const NOW: i64 = 1_800_000_000_000;

/// SQLite's plan of `query`: rows of (id, parent, unused, detail), `detail` naming the index.
async fn sqlite_plan<Q>(c: &mut crate::sqlite::Conn, query: Q) -> String
where
    Q: QueryFragment<diesel::sqlite::Sqlite> + Send + 'static,
{
    let rows: Vec<(i32, i32, i32, String)> =
        explain::<_, (Integer, Integer, Integer, Text)>("EXPLAIN QUERY PLAN ", query)
            .load(c)
            .await
            .unwrap();
    rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("\n")
}

/// PostgreSQL's plan of `query`, a line a row.
async fn postgres_plan<Q>(c: &mut crate::pg::Conn, query: Q) -> String
where
    Q: QueryFragment<diesel::pg::Pg> + Send,
{
    let rows: Vec<String> = explain::<_, Text>("EXPLAIN ", query).load(c).await.unwrap();
    rows.join("\n")
}

#[tokio::test]
async fn sqlite_finds_an_endpoints_retries_and_first_tries_through_their_indexes() {
    use crate::sqlite::queries;
    let db = TestDatabase::sqlite();
    db.store().await;
    let path = db.url.trim_start_matches("sqlite://");
    let mut c = crate::sqlite::Conn::establish(path).await.unwrap();
    let retries = sqlite_plan(&mut c, queries::due_retries(ENDPOINT, NOW, 10)).await;
    assert!(
        retries.contains("USING INDEX webhook_deliveries_retries"),
        "{retries}"
    );
    let first = sqlite_plan(&mut c, queries::due_first_tries(ENDPOINT, NOW, 10)).await;
    assert!(
        first.contains("USING INDEX webhook_deliveries_pending"),
        "{first}"
    );
}

#[tokio::test]
async fn postgres_finds_an_endpoints_retries_through_their_index_in_a_generic_plan() {
    use diesel::QueryDsl;
    use diesel_async::SimpleAsyncConnection;

    use crate::pg::queries;
    let test = "postgres_finds_an_endpoints_retries_through_their_index_in_a_generic_plan";
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    db.store().await;
    let mut c = crate::pg::Conn::establish(&db.url).await.unwrap();
    // The plan PostgreSQL keeps for a prepared statement after a few runs is made without the
    // bound values: a partial index serves it only if its predicate is in the query's text. An
    // empty table is read whole, whatever its indexes; what matters is which index can be used.
    let query = queries::due_retries(ENDPOINT, NOW, 10)
        .for_update()
        .skip_locked();
    let sql = diesel::debug_query::<diesel::pg::Pg, _>(&query).to_string();
    let (sql, binds) = sql.split_once(" -- binds: ").unwrap();
    // The bound values, as diesel shows them (`["wh_…", 1800000000000, …]`), as SQL literals.
    let values = binds.trim_matches(['[', ']']).replace('"', "'");
    c.batch_execute(&format!(
        "SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan; \
         PREPARE claim AS {sql}"
    ))
    .await
    .unwrap();
    let execute = format!("EXECUTE claim({values})");
    let retries = postgres_plan(&mut c, diesel::sql_query(execute)).await;
    assert!(
        retries.contains("using webhook_deliveries_retries"),
        "{retries}"
    );
}
