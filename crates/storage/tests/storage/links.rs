use std::time::Duration;

use shortlink_domain::{Destination, LinkPatch, LinkRef};
use shortlink_storage::{ClickBatch, CreateOutcome, LinkClicks};

use crate::{
    LinkFilter, TestDatabase, base, create, each_backend, new_link, update_destination, workspace,
    write_elsewhere,
};

each_backend!(created_links_are_read_back_by_id_and_code, |store| {
    let acme = workspace(&store, "acme").await;
    let link = create(
        &store,
        new_link(&acme, Some("spring"), "https://example.com/a?b=1"),
    )
    .await;
    assert_eq!(link.short_code.as_str(), "spring");
    assert_eq!(link.clicks, 0);
    assert_eq!(link.domain, "sho.rt");

    let d = base().domain().to_owned();
    assert_eq!(
        store
            .get_link(acme.id, &LinkRef::Id(link.id), &d)
            .await
            .unwrap(),
        Some(link.clone())
    );
    assert_eq!(
        store
            .get_link(acme.id, &LinkRef::Code("spring".into()), &d)
            .await
            .unwrap(),
        Some(link.clone())
    );
    let resolved = store.resolve(&d, "spring").await.unwrap().unwrap();
    assert_eq!(
        (resolved.workspace_id, &resolved.destination),
        (acme.id, &link.destination)
    );
    assert_eq!(
        store.resolve(&d, "Spring").await.unwrap(),
        None,
        "codes are case-sensitive"
    );
    assert_eq!(store.resolve("other.domain", "spring").await.unwrap(), None);
    // The database's own answer is the same (a server's store answers `resolve` from memory).
    assert_eq!(
        store.resolve_in_database(&d, "spring").await.unwrap(),
        Some(resolved)
    );
    assert_eq!(store.resolve_in_database(&d, "Spring").await.unwrap(), None);

    let generated = create(&store, new_link(&acme, None, "https://example.com/")).await;
    assert_eq!(generated.short_code.as_str().len(), 7);
});

each_backend!(another_workspace_sees_nothing, |store| {
    let acme = workspace(&store, "acme").await;
    let globex = workspace(&store, "globex").await;
    let link = create(
        &store,
        new_link(&acme, Some("mine"), "https://example.com/"),
    )
    .await;
    let d = base().domain().to_owned();
    let by_id = LinkRef::Id(link.id);
    assert_eq!(store.get_link(globex.id, &by_id, &d).await.unwrap(), None);
    let dest = Destination::parse("https://evil.example/", &base()).unwrap();
    assert_eq!(
        update_destination(&store, globex.id, &by_id, &d, &dest)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .delete_link(globex.id, &by_id, &d, &base())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .list_links(globex.id, 10, None, &LinkFilter::default())
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        store.get_link(acme.id, &by_id, &d).await.unwrap(),
        Some(link)
    );
});

each_backend!(bulk_outcomes_are_in_order_and_independent, |store| {
    let acme = workspace(&store, "acme").await;
    let globex = workspace(&store, "globex").await;
    create(
        &store,
        new_link(&globex, Some("taken"), "https://example.com/"),
    )
    .await;

    let batch = vec![
        new_link(&acme, Some("first"), "https://example.com/1"),
        new_link(&acme, Some("taken"), "https://example.com/2"),
        new_link(&acme, None, "https://example.com/3"),
        new_link(&acme, Some("first"), "https://example.com/4"),
        new_link(&acme, Some("last"), "https://example.com/5"),
    ];
    let outcomes = store.create_links(batch, &base()).await.unwrap();
    let summary: Vec<Option<String>> = outcomes
        .iter()
        .map(|o| match o {
            CreateOutcome::Created(l) => Some(l.destination.to_string()),
            CreateOutcome::SlugConflict => None,
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            Some("https://example.com/1".into()),
            None,
            Some("https://example.com/3".into()),
            None,
            Some("https://example.com/5".into()),
        ]
    );
    assert_eq!(
        store
            .list_links(acme.id, 100, None, &LinkFilter::default())
            .await
            .unwrap()
            .len(),
        3
    );
});

each_backend!(listing_pages_newest_first_without_gaps, |store| {
    let acme = workspace(&store, "acme").await;
    let mut made = Vec::new();
    for i in 0..7 {
        made.push(
            create(
                &store,
                new_link(&acme, None, &format!("https://example.com/{i}")),
            )
            .await
            .id,
        );
    }
    made.reverse();
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .list_links(acme.id, 3, before, &LinkFilter::default())
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        before = page.last().map(|l| l.id);
        seen.extend(page.into_iter().map(|l| l.id));
    }
    assert_eq!(seen, made);
});

each_backend!(update_and_delete_change_what_resolve_finds, |store| {
    let acme = workspace(&store, "acme").await;
    let link = create(
        &store,
        new_link(&acme, Some("go"), "https://example.com/old"),
    )
    .await;
    let d = base().domain().to_owned();
    let code = LinkRef::Code("go".into());
    let dest = Destination::parse("https://example.com/new", &base()).unwrap();
    let updated = update_destination(&store, acme.id, &code, &d, &dest)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updated.destination, dest);
    assert_eq!(
        store.resolve(&d, "go").await.unwrap().unwrap().destination,
        dest
    );

    let deleted = store
        .delete_link(acme.id, &LinkRef::Id(link.id), &d, &base())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(deleted.id, link.id);
    assert_eq!(store.resolve(&d, "go").await.unwrap(), None);
    // The slug is free again.
    create(
        &store,
        new_link(&acme, Some("go"), "https://example.com/again"),
    )
    .await;
});

each_backend!(
    concurrent_changes_of_one_link_keep_each_others_fields,
    |store| {
        let acme = workspace(&store, "acme").await;
        let d = base().domain().to_owned();
        // Each round, two changes of different fields at once: each is computed from the link as
        // its transaction reads it, and neither may write the other's field back as it was.
        for round in 0..20 {
            let link = create(&store, new_link(&acme, None, "https://example.com/old")).await;
            let by_id = LinkRef::Id(link.id);
            let destination = LinkPatch {
                destination: Some(
                    Destination::parse(&format!("https://example.com/{round}"), &base()).unwrap(),
                ),
                ..LinkPatch::default()
            };
            let archive = LinkPatch {
                archived: Some(true),
                ..LinkPatch::default()
            };
            let base = base();
            let (a, b) = tokio::join!(
                store.update_link(acme.id, &by_id, &d, &destination, &base),
                store.update_link(acme.id, &by_id, &d, &archive, &base),
            );
            assert!(a.unwrap().is_some() && b.unwrap().is_some());
            let now = store.get_link(acme.id, &by_id, &d).await.unwrap().unwrap();
            assert_eq!(
                (now.destination.as_str(), now.options.archived),
                (format!("https://example.com/{round}").as_str(), true),
                "round {round}"
            );
        }
    }
);

each_backend!(click_batches_add_exactly, as_server, |store| {
    let acme = workspace(&store, "acme").await;
    create(&store, new_link(&acme, Some("a"), "https://example.com/a")).await;
    create(&store, new_link(&acme, Some("b"), "https://example.com/b")).await;
    let d = base().domain().to_owned();
    let a = store.resolve(&d, "a").await.unwrap().unwrap();
    let b = store.resolve(&d, "b").await.unwrap().unwrap();
    assert_ne!(a.counter, b.counter);
    let batch = |link: &shortlink_storage::RedirectTarget, count| LinkClicks {
        counter: link.counter,
        workspace_id: acme.id,
        count,
        clicks: vec![],
    };
    let record = async |links| {
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
            .unwrap()
    };
    let clicks = async |code: &str| {
        store
            .get_link(acme.id, &LinkRef::Code(code.into()), &d)
            .await
            .unwrap()
            .map(|link| link.clicks)
    };
    record(vec![batch(&a, 3), batch(&b, 1)]).await;
    record(vec![batch(&a, 2)]).await;
    assert_eq!((clicks("a").await, clicks("b").await), (Some(5), Some(1)));
    assert_eq!(
        store
            .list_links(acme.id, 10, None, &LinkFilter::default())
            .await
            .unwrap()[1]
            .clicks,
        5,
        "listing shows the counters too"
    );

    // A link deleted before its clicks are flushed does not break the batch, and its clicks
    // never land on a link created after it (row numbers are not reused, even for the last row).
    store
        .delete_link(acme.id, &LinkRef::Code("b".into()), &d, &base())
        .await
        .unwrap();
    create(&store, new_link(&acme, Some("c"), "https://example.com/c")).await;
    record(vec![batch(&b, 4), batch(&a, 1)]).await;
    assert_eq!(
        (clicks("a").await, clicks("b").await, clicks("c").await),
        (Some(6), None, Some(0))
    );
});

// A flush larger than one statement's share (1,000 counters) is applied in
// slices of one transaction: every counter still gets exactly its own clicks.
each_backend!(a_large_click_batch_adds_exactly, as_server, |store| {
    let acme = workspace(&store, "acme").await;
    let d = base().domain().to_owned();
    let links: Vec<_> = (0..2_500)
        .map(|i| new_link(&acme, None, &format!("https://example.com/{i}")))
        .collect();
    let mut codes = Vec::new();
    for outcome in store.create_links(links, &base()).await.unwrap() {
        match outcome {
            CreateOutcome::Created(link) => codes.push(link.short_code.to_string()),
            other => panic!("expected a created link, got {other:?}"),
        }
    }
    let mut batch = Vec::new();
    for (i, code) in codes.iter().enumerate() {
        let target = store.resolve(&d, code).await.unwrap().unwrap();
        batch.push(LinkClicks {
            counter: target.counter,
            workspace_id: acme.id,
            count: i as u64 + 1,
            clicks: vec![],
        });
    }
    store
        .record_clicks(
            ClickBatch {
                links: batch,
                events: false,
            }
            .into(),
            &base(),
        )
        .await
        .unwrap();
    // With the journal, counted in memory and then, folded, in the file (across several of the
    // journal's blocks of counters); without it, in the file at once.
    for stage in ["recorded", "folded"] {
        for (i, code) in codes.iter().enumerate() {
            let link = store
                .get_link(acme.id, &LinkRef::Code(code.clone()), &d)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(link.clicks, i as i64 + 1, "{stage}: link {i} ({code})");
        }
        store.fold_clicks().await.unwrap();
    }
});

/// On SQLite the events are inserted `OR FAIL` (no statement journal): a statement stopped part
/// way keeps its earlier rows in the transaction, and the flush's transaction takes them back with
/// everything else. A trigger stops the insert at the second link's first event, after the first
/// link's two events, in the same statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_batch_whose_events_fail_part_way_leaves_nothing() {
    use diesel::connection::SimpleConnection;
    use diesel::{Connection, SqliteConnection};
    use shortlink_domain::{ClickInfo, Timestamp};
    use shortlink_storage::{ClickEvent, EventFilter, RedirectTarget};

    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let acme = workspace(&store, "acme").await;
    let d = base().domain().to_owned();
    create(&store, new_link(&acme, Some("a"), "https://example.com/a")).await;
    create(&store, new_link(&acme, Some("b"), "https://example.com/b")).await;
    let a = store.resolve(&d, "a").await.unwrap().unwrap();
    let b = store.resolve(&d, "b").await.unwrap().unwrap();
    assert!(a.counter.0 < b.counter.0, "a's events are written first");
    let two_clicks = |target: &RedirectTarget| LinkClicks {
        counter: target.counter,
        workspace_id: acme.id,
        count: 2,
        clicks: (0..2)
            .map(|i| ClickEvent {
                click: ClickInfo::bare(Timestamp::from_unix_millis(1_000 + i)),
                visitor: i,
            })
            .collect(),
    };
    let batch = || ClickBatch {
        links: vec![two_clicks(&b), two_clicks(&a)],
        events: true,
    };
    let state = async || {
        let all = EventFilter::between(
            acme.id,
            None,
            Timestamp::from_unix_millis(0),
            Timestamp::from_unix_millis(10_000),
        );
        let mut clicks = Vec::new();
        for code in ["a", "b"] {
            let link = store
                .get_link(acme.id, &LinkRef::Code(code.into()), &d)
                .await;
            clicks.push(link.unwrap().unwrap().clicks);
        }
        (clicks, store.analytics_totals(&all).await.unwrap().clicks)
    };

    let mut other = SqliteConnection::establish(db.url.trim_start_matches("sqlite://")).unwrap();
    other
        .batch_execute(&format!(
            "PRAGMA busy_timeout = 5000; \
             CREATE TRIGGER refuse_b BEFORE INSERT ON click_events WHEN NEW.link_seq = {} \
             BEGIN SELECT RAISE(FAIL, 'refused'); END",
            b.counter.0
        ))
        .unwrap();
    store
        .record_clicks(batch().into(), &base())
        .await
        .unwrap_err();
    assert_eq!(
        state().await,
        (vec![0, 0], 0),
        "nothing of the failed batch"
    );

    other.batch_execute("DROP TRIGGER refuse_b").unwrap();
    store.record_clicks(batch().into(), &base()).await.unwrap();
    assert_eq!(state().await, (vec![2, 2], 4), "the batch again, whole");
}

/// On SQLite, committed pages reach the database file through the store's checkpoint thread,
/// long before the writer's own backstop threshold (10,000 pages) would copy them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_checkpoints_run_beside_the_writer() {
    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let path = std::path::PathBuf::from(db.url.trim_start_matches("sqlite://"));
    let acme = workspace(&store, "acme").await;
    let before = std::fs::metadata(&path).unwrap().len();
    let links = (0..2000)
        .map(|i| new_link(&acme, None, &format!("https://example.com/{i}")))
        .collect();
    store.create_links(links, &base()).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::fs::metadata(&path).unwrap().len() <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "the database file did not grow: nothing was checkpointed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// On SQLite, a change that reads its link before writing it waits for another connection's
/// write and then goes through: had it read first, that connection's commit in between would
/// have failed its write at once ("database is locked", a 503 for the client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_wait_for_another_connections_write_instead_of_failing() {
    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let acme = workspace(&store, "acme").await;
    create(
        &store,
        new_link(&acme, Some("go"), "https://example.com/old"),
    )
    .await;
    create(
        &store,
        new_link(&acme, Some("gone"), "https://example.com/old"),
    )
    .await;
    let d = base().domain().to_owned();
    let dest = Destination::parse("https://example.com/new", &base()).unwrap();

    let other = write_elsewhere(&db, Duration::from_millis(300));
    let updated = update_destination(&store, acme.id, &LinkRef::Code("go".into()), &d, &dest).await;
    other.join().unwrap();
    assert_eq!(updated.unwrap().map(|l| l.destination), Some(dest));

    let other = write_elsewhere(&db, Duration::from_millis(300));
    let deleted = store
        .delete_link(acme.id, &LinkRef::Code("gone".into()), &d, &base())
        .await;
    other.join().unwrap();
    assert_eq!(
        deleted.unwrap().map(|l| l.short_code.to_string()),
        Some("gone".into())
    );
}
