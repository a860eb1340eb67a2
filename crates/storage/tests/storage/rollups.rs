//! Analytics rollups: every query answers the same before and after the days of its range are
//! rolled up, and then reads the rollups for those days; a late click, a deleted link and
//! retention make a day stale, read from its events until it is rolled up again.

use shortlink_domain::{ClickInfo, Link, LinkRef, Timestamp, Workspace};
use shortlink_storage::{ClickBatch, ClickEvent, Dimension, EventFilter, LinkClicks, Store};

use crate::{TestDatabase, base, create, new_link, workspace};

const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

/// One planned click: its link, time, visitor, country, device and referrer.
struct Click<'a> {
    link: &'a Link,
    at: i64,
    visitor: i64,
    country: Option<&'a str>,
    device: &'a str,
    referrer: &'a str,
}

/// Writes `clicks` through the flush's call, one batch per click.
async fn record(store: &Store, clicks: &[Click<'_>]) {
    for click in clicks {
        let target = (store.resolve(base().domain(), click.link.short_code.as_str()))
            .await
            .unwrap()
            .unwrap();
        let info = ClickInfo {
            country: click.country.map(str::to_owned),
            device: click.device.to_owned(),
            referrer: click.referrer.to_owned(),
            ..ClickInfo::bare(Timestamp::from_unix_millis(click.at))
        };
        let batch = ClickBatch {
            links: vec![LinkClicks {
                counter: target.counter,
                workspace_id: click.link.workspace_id,
                count: 1,
                clicks: vec![ClickEvent {
                    click: info,
                    visitor: click.visitor,
                }],
            }],
            events: true,
        };
        store.record_clicks(batch.into(), &base()).await.unwrap();
    }
}

/// `(clicks, visitors)` of `filter`.
async fn totals(store: &Store, filter: &EventFilter) -> (u64, u64) {
    let tally = store.analytics_totals(filter).await.unwrap();
    (tally.clicks, tally.visitors)
}

/// `(key, clicks, visitors)` of a breakdown.
async fn breakdown(
    store: &Store,
    filter: &EventFilter,
    dimension: Dimension,
) -> Vec<(Option<String>, u64, u64)> {
    (store
        .analytics_breakdown(filter, dimension, 10)
        .await
        .unwrap())
    .into_iter()
    .map(|t| (t.key, t.clicks, t.visitors))
    .collect()
}

/// `(bucket, clicks, visitors)` of a series, in bucket order, its buckets counted from the
/// range's start.
async fn series(store: &Store, filter: &EventFilter, width: i64) -> Vec<(i64, u64, u64)> {
    series_from(store, filter, filter.start.unix_millis(), width).await
}

/// Likewise, the buckets counted from `origin` (before the range's start: a first bucket the
/// range cuts).
async fn series_from(
    store: &Store,
    filter: &EventFilter,
    origin: i64,
    width: i64,
) -> Vec<(i64, u64, u64)> {
    let mut buckets: Vec<_> = (store.analytics_series(filter, origin, width).await.unwrap())
        .into_iter()
        .map(|t| (t.key, t.clicks, t.visitors))
        .collect();
    buckets.sort_unstable();
    buckets
}

fn between(ws: &Workspace, start: i64, end: i64) -> EventFilter {
    EventFilter::between(
        ws.id,
        None,
        Timestamp::from_unix_millis(start),
        Timestamp::from_unix_millis(end),
    )
}

fn key(s: &str) -> Option<String> {
    Some(s.to_owned())
}

/// Ties in a breakdown fall in byte order, and a `limit` keeps the same of them, whether or not
/// their days are rolled up: on a PostgreSQL database created with a locale's collation too,
/// which orders punctuation and case otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ties_fall_in_byte_order_whatever_the_collation() {
    let test = concat!(
        module_path!(),
        "::ties_fall_in_byte_order_whatever_the_collation"
    );
    let icu = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'";
    let mut dbs = vec![TestDatabase::sqlite()];
    dbs.extend(TestDatabase::postgres_with(test, icu).await);
    for db in dbs {
        let store = db.store().await;
        let today = Timestamp::now().unix_millis().div_euclid(DAY) * DAY;
        let ws = workspace(&store, "tied").await;
        let link = create(&store, new_link(&ws, None, "https://example.com/t")).await;
        let referrers = [
            "alpha.example",
            "[2001:db8::1]",
            "Zeta.example",
            "192.168.0.1",
        ];
        let plan: Vec<Click> = (0..)
            .zip(referrers)
            .map(|(n, referrer)| Click {
                link: &link,
                at: today - DAY + n * HOUR,
                visitor: n,
                country: None,
                device: "desktop",
                referrer,
            })
            .collect();
        record(&store, &plan).await;
        let yesterday = between(&ws, today - DAY, today);
        let in_byte_order = [
            "192.168.0.1",
            "Zeta.example",
            "[2001:db8::1]",
            "alpha.example",
        ];
        for rolled_up in [false, true] {
            if rolled_up {
                let upkeep_now = Timestamp::from_unix_millis(today + 2 * HOUR);
                assert_eq!(store.roll_up_analytics(upkeep_now, None).await.unwrap(), 1);
            }
            for limit in 1..=4 {
                let tallies = (store.analytics_breakdown(&yesterday, Dimension::Referrer, limit))
                    .await
                    .unwrap();
                let keys: Vec<_> = tallies.into_iter().filter_map(|t| t.key).collect();
                let wanted = &in_byte_order[..usize::try_from(limit).unwrap()];
                assert_eq!(keys, wanted, "{:?}, rolled up: {rolled_up}", db.kind);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollups_answer_as_the_events_do() {
    let test = concat!(module_path!(), "::rollups_answer_as_the_events_do");
    for db in TestDatabase::all(test).await {
        on(&db).await;
    }
}

async fn on(db: &TestDatabase) {
    let store = db.store().await;
    let today = Timestamp::now().unix_millis().div_euclid(DAY) * DAY;
    // The upkeep's clock: today's first hours are over, so the days before today roll up.
    let upkeep_now = Timestamp::from_unix_millis(today + 2 * HOUR);
    let ws = workspace(&store, "rolled").await;
    let other = workspace(&store, "other").await;
    let a = create(&store, new_link(&ws, None, "https://example.com/a")).await;
    let b = create(&store, new_link(&ws, None, "https://example.com/b")).await;
    let c = create(&store, new_link(&other, None, "https://example.com/c")).await;

    // Five past days alike: visitor 1 clicks a then b, visitor 2 clicks a; in the other
    // workspace, c once. Visitor numbers differ from day to day, as the daily keyed hash does.
    let mut plan = Vec::new();
    for n in 1..=5 {
        let day = today - n * DAY;
        let visitor = |k: i64| day / DAY * 10 + k;
        plan.extend([
            Click {
                link: &a,
                at: day + 10 * HOUR,
                visitor: visitor(1),
                country: Some("GB"),
                device: "desktop",
                referrer: "news.example",
            },
            Click {
                link: &b,
                at: day + 13 * HOUR,
                visitor: visitor(1),
                country: Some("GB"),
                device: "desktop",
                referrer: "(direct)",
            },
            Click {
                link: &a,
                at: day + 20 * HOUR,
                visitor: visitor(2),
                country: Some("FR"),
                device: "mobile",
                referrer: "(direct)",
            },
            Click {
                link: &c,
                at: day + 20 * HOUR,
                visitor: visitor(1),
                country: Some("GB"),
                device: "desktop",
                referrer: "(direct)",
            },
        ]);
    }
    // Today, at its first instant: never rolled up.
    plan.push(Click {
        link: &a,
        at: today,
        visitor: today / DAY * 10 + 3,
        country: None,
        device: "desktop",
        referrer: "(direct)",
    });
    record(&store, &plan).await;

    let range = between(&ws, today - 5 * DAY, today + DAY);
    // From noon to noon: parts of two days at the edges.
    let edges = between(&ws, today - 4 * DAY + 12 * HOUR, today - DAY + 12 * HOUR);
    let gb = EventFilter {
        country: key("GB"),
        ..range.clone()
    };
    let gb_direct = EventFilter {
        referrer: key("(direct)"),
        ..gb.clone()
    };
    let first_day = between(&ws, today - 5 * DAY, today - 4 * DAY);
    let answers = async |store: &Store| {
        (
            totals(store, &range).await,
            totals(store, &edges).await,
            totals(store, &gb).await,
            totals(store, &gb_direct).await,
            totals(store, &between(&other, today - 5 * DAY, today + DAY)).await,
            breakdown(store, &range, Dimension::Country).await,
            breakdown(store, &range, Dimension::Device).await,
            breakdown(store, &range, Dimension::Link).await,
            series(store, &range, DAY).await,
            series(store, &first_day, 6 * HOUR).await,
            series_from(store, &edges, today - 4 * DAY, DAY).await,
        )
    };
    let (a_id, b_id) = (Some(a.id.to_string()), Some(b.id.to_string()));
    let planned = (
        (16, 11),
        (9, 7),
        (10, 5),
        (5, 5),
        (5, 5),
        vec![(key("GB"), 10, 5), (key("FR"), 5, 5), (None, 1, 1)],
        vec![(key("desktop"), 11, 6), (key("mobile"), 5, 5)],
        vec![(a_id.clone(), 11, 11), (b_id, 5, 5)],
        vec![
            (0, 3, 2),
            (1, 3, 2),
            (2, 3, 2),
            (3, 3, 2),
            (4, 3, 2),
            (5, 1, 1),
        ],
        vec![(1, 1, 1), (2, 1, 1), (3, 1, 1)],
        // The noon-to-noon range by days: the edge days count their part only.
        vec![(0, 2, 2), (1, 3, 2), (2, 3, 2), (3, 1, 1)],
    );
    assert_eq!(answers(&store).await, planned, "{:?}, from events", db.kind);
    assert_eq!(store.roll_up_analytics(upkeep_now, None).await.unwrap(), 5);
    assert_eq!(store.roll_up_analytics(upkeep_now, None).await.unwrap(), 0);
    assert_eq!(answers(&store).await, planned, "{:?}, rolled up", db.kind);

    // A click of a rolled-up day, written late: counted at once, and after the day is rolled
    // up again.
    let late_day = today - 2 * DAY;
    let late = Click {
        link: &a,
        at: late_day + 15 * HOUR,
        visitor: late_day / DAY * 10 + 5,
        country: Some("GB"),
        device: "desktop",
        referrer: "(direct)",
    };
    record(&store, &[late]).await;
    assert_eq!(totals(&store, &range).await, (17, 12));
    assert_eq!(store.roll_up_analytics(upkeep_now, None).await.unwrap(), 1);
    assert_eq!(totals(&store, &range).await, (17, 12));
    assert_eq!(
        breakdown(&store, &range, Dimension::Country).await[0],
        (key("GB"), 11, 6)
    );

    // A deleted link's clicks leave the workspace's analytics, at once and once rolled up.
    let deleted = store
        .delete_link(ws.id, &LinkRef::Id(b.id), base().domain(), &base())
        .await
        .unwrap();
    assert!(deleted.is_some());
    assert_eq!(totals(&store, &range).await, (12, 12));
    assert_eq!(store.roll_up_analytics(upkeep_now, None).await.unwrap(), 5);
    assert_eq!(totals(&store, &range).await, (12, 12));
    assert_eq!(
        breakdown(&store, &range, Dimension::Link).await,
        vec![(a_id, 12, 12)]
    );

    // The rolled-up days are read from the rollups: with one day's events gone behind the
    // store's back, the totals still count them, and a series of 6-hour buckets (events only)
    // does not.
    let third = today - 3 * DAY;
    db.execute(&format!(
        "DELETE FROM click_events WHERE occurred_at >= {third} AND occurred_at < {}",
        third + DAY
    ))
    .await;
    assert_eq!(totals(&store, &range).await, (12, 12));
    assert_eq!(
        series(&store, &between(&ws, third, third + DAY), 6 * HOUR).await,
        vec![]
    );

    // Retention from noon four days ago: the days before it are no longer rolled up (their
    // events are gone), and its own day is rolled up again from what is left (a's click at
    // 20:00). Left: that one, the third day's two (rolled up), the late day's three, the last
    // day's two and today's one.
    let keep_after = Timestamp::from_unix_millis(today - 4 * DAY + 12 * HOUR);
    store
        .maintain_events(upkeep_now, Some(keep_after), 1000)
        .await
        .unwrap();
    assert_eq!(totals(&store, &range).await, (9, 9));
    assert_eq!(
        store
            .roll_up_analytics(upkeep_now, Some(keep_after))
            .await
            .unwrap(),
        1
    );
    assert_eq!(totals(&store, &range).await, (9, 9));
}

/// A click of today (by this clock) on a day another instance, whose clock is ahead, has rolled
/// up already: the day is read from its events again, so the click counts. Before, only days
/// before this clock's today were marked, and the rolled-up day missed the click until
/// retention removed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_rolled_up_by_a_clock_ahead_still_counts_clicks_written_after() {
    let test = concat!(
        module_path!(),
        "::a_day_rolled_up_by_a_clock_ahead_still_counts_clicks_written_after"
    );
    for db in TestDatabase::all(test).await {
        let store = db.store().await;
        let today = Timestamp::now().unix_millis().div_euclid(DAY) * DAY;
        let ws = workspace(&store, "skewed").await;
        let link = create(&store, new_link(&ws, None, "https://example.com/skew")).await;
        let click = |visitor| Click {
            link: &link,
            at: today,
            visitor,
            country: Some("GB"),
            device: "desktop",
            referrer: "(direct)",
        };
        record(&store, &[click(1)]).await;
        // The other instance's clock is two days ahead: today is over there.
        let ahead = Timestamp::from_unix_millis(today + 2 * DAY);
        assert_eq!(store.roll_up_analytics(ahead, None).await.unwrap(), 1);
        record(&store, &[click(2)]).await;

        let range = between(&ws, today, today + DAY);
        assert_eq!(totals(&store, &range).await, (2, 2), "{:?}", db.kind);
        assert_eq!(store.roll_up_analytics(ahead, None).await.unwrap(), 1);
        assert_eq!(
            totals(&store, &range).await,
            (2, 2),
            "{:?}, rolled up again",
            db.kind
        );
    }
}
