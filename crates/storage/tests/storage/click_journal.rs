//! SQLite's click journal: journaled clicks count at once for the store that journals them, reach
//! the counters in the file by a fold, and survive a stop without one.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use shortlink_domain::{LinkRef, Workspace};
use shortlink_storage::{CLICK_FOLD_INTERVAL, ClickBatch, CounterKey, LinkClicks, Store};

use crate::{LinkFilter, TestDatabase, base, create, new_link, workspace};

/// A store that counts in place on the same file: what another process (the CLI) would read.
async fn plain(db: &TestDatabase) -> Store {
    db.store().await
}

/// A store that journals, as a server does, folding at the default interval.
async fn journaled(db: &TestDatabase) -> Store {
    journaled_every(db, CLICK_FOLD_INTERVAL).await
}

async fn journaled_every(db: &TestDatabase, fold_interval: Duration) -> Store {
    let store = db.store().await;
    assert!(store.start_click_journal(fold_interval).await.unwrap());
    store
}

/// The workspace `acme` with one link, `a`, and that link's counter.
async fn acme_with_a_link(store: &Store) -> (Workspace, CounterKey) {
    let acme = workspace(store, "acme").await;
    create(store, new_link(&acme, Some("a"), "https://example.com/")).await;
    let target = store.resolve(base().domain(), "a").await.unwrap().unwrap();
    (acme, target.counter)
}

async fn record(store: &Store, ws: &Workspace, counter: CounterKey, count: u64) {
    let links = vec![LinkClicks {
        counter,
        workspace_id: ws.id,
        count,
        clicks: vec![],
    }];
    store
        .record_clicks(
            ClickBatch {
                links,
                events: false,
            }
            .into(),
            &base(),
        )
        .await
        .unwrap();
}

async fn clicks(store: &Store, ws: &Workspace, code: &str) -> i64 {
    store
        .get_link(ws.id, &LinkRef::Code(code.into()), base().domain())
        .await
        .unwrap()
        .unwrap()
        .clicks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journaled_clicks_count_at_once_and_reach_the_file_by_a_fold() {
    let db = TestDatabase::sqlite();
    let server = journaled(&db).await;
    let other = plain(&db).await;
    let (acme, a) = acme_with_a_link(&server).await;

    record(&server, &acme, a, 3).await;
    record(&server, &acme, a, 2).await;
    assert!(
        server
            .start_click_journal(CLICK_FOLD_INTERVAL)
            .await
            .unwrap(),
        "started once only"
    );
    assert_eq!(clicks(&server, &acme, "a").await, 5);
    assert_eq!(
        server
            .list_links(acme.id, 10, None, &LinkFilter::default())
            .await
            .unwrap()[0]
            .clicks,
        5
    );
    assert_eq!(clicks(&other, &acme, "a").await, 0, "not folded yet");

    server.fold_clicks().await.unwrap();
    assert_eq!(clicks(&other, &acme, "a").await, 5);
    assert_eq!(clicks(&server, &acme, "a").await, 5, "not counted twice");
    record(&server, &acme, a, 1).await;
    assert_eq!(clicks(&server, &acme, "a").await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_without_a_fold_leaves_the_journal_to_the_next_start() {
    let db = TestDatabase::sqlite();
    let first = journaled(&db).await;
    let (acme, a) = acme_with_a_link(&first).await;
    record(&first, &acme, a, 4).await;
    drop(first);

    let next = plain(&db).await;
    assert_eq!(clicks(&next, &acme, "a").await, 0, "journaled, not folded");
    assert!(next.start_click_journal(CLICK_FOLD_INTERVAL).await.unwrap());
    assert_eq!(clicks(&next, &acme, "a").await, 4);
    assert_eq!(
        clicks(&plain(&db).await, &acme, "a").await,
        4,
        "folded at the start"
    );
    record(&next, &acme, a, 2).await;
    next.fold_clicks().await.unwrap();
    assert_eq!(clicks(&plain(&db).await, &acme, "a").await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fold_is_due_once_the_oldest_click_waited_its_interval() {
    const INTERVAL: Duration = Duration::from_secs(2);
    let db = TestDatabase::sqlite();
    let server = journaled_every(&db, INTERVAL).await;
    let other = plain(&db).await;
    let (acme, a) = acme_with_a_link(&server).await;

    let started = Instant::now();
    let mut recorded = 0;
    while clicks(&other, &acme, "a").await == 0 {
        assert!(
            started.elapsed() < INTERVAL * 3,
            "no fold within three intervals"
        );
        record(&server, &acme, a, 1).await;
        recorded += 1;
        server.fold_clicks_when_due().await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(started.elapsed() >= INTERVAL, "folded early");
    assert_eq!(clicks(&other, &acme, "a").await, recorded);
    assert_eq!(clicks(&server, &acme, "a").await, recorded);
}

// Reads racing folds never count a fold's clicks twice, nor lose them for a moment: every read
// lies between the clicks whose recording finished before it and those whose recording started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_during_folds_see_each_click_once() {
    let db = TestDatabase::sqlite();
    let server = journaled(&db).await;
    let (acme, a) = acme_with_a_link(&server).await;
    let (started, finished) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));

    let writer = {
        let (server, acme) = (server.clone(), acme.clone());
        let (started, finished) = (started.clone(), finished.clone());
        tokio::spawn(async move {
            for i in 0..300 {
                started.fetch_add(1, Ordering::SeqCst);
                record(&server, &acme, a, 1).await;
                finished.fetch_add(1, Ordering::SeqCst);
                if i % 3 == 0 {
                    server.fold_clicks().await.unwrap();
                }
            }
        })
    };
    let mut reads = 0;
    while !writer.is_finished() {
        let low = finished.load(Ordering::SeqCst);
        let seen = clicks(&server, &acme, "a").await;
        let high = started.load(Ordering::SeqCst);
        assert!(
            (low..=high).contains(&seen),
            "read {seen} clicks with {low} recorded and {high} begun"
        );
        reads += 1;
    }
    writer.await.unwrap();
    assert!(reads > 10, "the reads raced too few folds ({reads})");
    assert_eq!(clicks(&server, &acme, "a").await, 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_file_is_refused_while_the_first_is_open() {
    let db = TestDatabase::sqlite();
    let first = journaled(&db).await;
    let second = plain(&db).await;
    assert!(matches!(
        second.start_click_journal(CLICK_FOLD_INTERVAL).await,
        Err(shortlink_storage::StorageError::Unavailable(_))
    ));
    drop(first);
    assert!(
        second
            .start_click_journal(CLICK_FOLD_INTERVAL)
            .await
            .unwrap()
    );
}
