//! PostgreSQL's monthly partitions of the click events: every month from the retention horizon
//! to the coming ones gets its partition, so an event of any retained month lands in its month's
//! table; a month whose events already sit in the default partition stays there, and later
//! upkeeps leave it without locking the table.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use shortlink_domain::{ClickInfo, Timestamp};
use shortlink_storage::{ClickBatch, ClickEvent, EventFilter, LinkClicks, Store};

use crate::{TestDatabase, base, create, new_link, workspace};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);
/// The server's default retention.
const RETENTION: Duration = Duration::from_secs(400 * 24 * 60 * 60);

fn at(rfc3339: &str) -> Timestamp {
    Timestamp::parse_rfc3339(rfc3339).unwrap()
}

#[derive(QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The partitions of `click_events` without their common prefix (`2026_11`, `default`), sorted.
async fn partitions(db: &TestDatabase) -> Vec<String> {
    let mut conn = AsyncPgConnection::establish(&db.url).await.unwrap();
    let mut names: Vec<String> = diesel::sql_query(
        "SELECT c.relname AS name FROM pg_inherits i \
         JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent \
         WHERE p.relname = 'click_events'",
    )
    .load::<Name>(&mut conn)
    .await
    .unwrap()
    .into_iter()
    .map(|p| p.name.trim_start_matches("click_events_").to_owned())
    .collect();
    names.sort();
    names
}

/// Rows in one partition, by its suffix.
async fn rows_in(db: &TestDatabase, partition: &str) -> i64 {
    let mut conn = AsyncPgConnection::establish(&db.url).await.unwrap();
    let sql = format!("SELECT count(*) AS n FROM click_events_{partition}");
    diesel::sql_query(sql)
        .get_result::<Count>(&mut conn)
        .await
        .unwrap()
        .n
}

/// `YYYY_MM` of every month from `first` to `last` (`(year, month)`), in order.
fn months(first: (i32, u32), last: (i32, u32)) -> Vec<String> {
    let mut out = Vec::new();
    let (mut year, mut month) = first;
    while (year, month) <= last {
        out.push(format!("{year:04}_{month:02}"));
        (year, month) = if month == 12 {
            (year + 1, 1)
        } else {
            (year, month + 1)
        };
    }
    out
}

/// Writes one click event at `when`, of a new link in a new workspace `name`, through the
/// flush's call; returns the events the workspace has then.
async fn click_at(store: &Store, name: &str, when: Timestamp) -> u64 {
    let ws = workspace(store, name).await;
    let link = create(store, new_link(&ws, None, "https://example.com/p")).await;
    let target = (store.resolve(base().domain(), link.short_code.as_str()))
        .await
        .unwrap()
        .unwrap();
    let batch = ClickBatch {
        links: vec![LinkClicks {
            counter: target.counter,
            workspace_id: ws.id,
            count: 1,
            clicks: vec![ClickEvent {
                click: ClickInfo::bare(when),
                visitor: 1,
            }],
        }],
        events: true,
    };
    store.record_clicks(batch.into(), &base()).await.unwrap();
    let everything = EventFilter::between(
        ws.id,
        None,
        Timestamp::from_unix_millis(0),
        at("2100-01-01T00:00:00Z"),
    );
    store.analytics_totals(&everything).await.unwrap().clicks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_reach_back_to_the_retention_horizon() {
    let test = concat!(
        module_path!(),
        "::partitions_reach_back_to_the_retention_horizon"
    );
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    let store = db.store().await;
    let now = at("2026-11-24T12:00:00Z");

    // Without a horizon (as at the start, before retention is known): this month and 3 ahead.
    store.maintain_events(now, None, 100).await.unwrap();
    let mut want = months((2026, 11), (2027, 2));
    want.push("default".into());
    assert_eq!(partitions(&db).await, want);

    // With the default retention's horizon, 2025-10-20: back to its month.
    store
        .maintain_events(now, Some(now.minus(RETENTION)), 100)
        .await
        .unwrap();
    let mut want = months((2025, 10), (2027, 2));
    want.push("default".into());
    assert_eq!(partitions(&db).await, want);

    // An event of a past month lands in that month's partition, not the default one.
    assert_eq!(
        click_at(&store, "past", at("2025-11-15T08:00:00Z")).await,
        1
    );
    assert_eq!(rows_in(&db, "2025_11").await, 1);
    assert_eq!(rows_in(&db, "default").await, 0);

    // Two months on, the months that ended before the new horizon (2025-12-20) are dropped,
    // with their events, and two more months are made ahead.
    let later = now.plus(61 * DAY);
    store
        .maintain_events(later, Some(later.minus(RETENTION)), 100)
        .await
        .unwrap();
    let mut want = months((2025, 12), (2027, 4));
    want.push("default".into());
    assert_eq!(partitions(&db).await, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_whose_events_sit_in_the_default_partition_stays_there() {
    let test = concat!(
        module_path!(),
        "::a_month_whose_events_sit_in_the_default_partition_stays_there"
    );
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    // No partition but the default one yet: the event lands there.
    let store = db.store().await;
    assert_eq!(
        click_at(&store, "early", at("2026-03-10T09:00:00Z")).await,
        1
    );
    assert_eq!(rows_in(&db, "default").await, 1);

    // Its month cannot be made (its row would be in the wrong table); every other month is.
    let now = at("2026-11-24T12:00:00Z");
    store
        .maintain_events(now, Some(now.minus(RETENTION)), 100)
        .await
        .unwrap();
    let mut want = months((2025, 10), (2026, 2));
    want.extend(months((2026, 4), (2027, 2)));
    want.push("default".into());
    assert_eq!(partitions(&db).await, want);
    assert_eq!(rows_in(&db, "default").await, 1);

    // Later upkeeps see the month's events there and leave it, without the table lock trying
    // would take: with a reader holding the default partition, the upkeep still ends at once.
    let mut reader = AsyncPgConnection::establish(&db.url).await.unwrap();
    diesel_async::SimpleAsyncConnection::batch_execute(
        &mut reader,
        "BEGIN; LOCK TABLE click_events_default IN ACCESS SHARE MODE",
    )
    .await
    .unwrap();
    let upkeep = store.maintain_events(now, Some(now.minus(RETENTION)), 100);
    tokio::time::timeout(Duration::from_secs(5), upkeep)
        .await
        .expect("the upkeep waited for the default partition's lock")
        .unwrap();
    assert_eq!(partitions(&db).await, want);
}
