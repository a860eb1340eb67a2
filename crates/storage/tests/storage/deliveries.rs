use std::time::Duration;

use shortlink_domain::{
    AttemptRecord, ClaimedDelivery, ClickInfo, DeliveryCursor, DeliveryQueue, DeliveryState,
    EventKind, InFlight, NextStep, Timestamp, Webhook, WebhookId, WebhookSecret, WebhookTarget,
    Workspace,
};
use shortlink_storage::{ClickBatch, ClickEvent, LinkClicks, Store};

use crate::{TestDatabase, base, create, each_backend, new_link, workspace, write_elsewhere};

async fn webhook(store: &Store, ws: &Workspace, events: &[EventKind]) -> Webhook {
    let hook = Webhook {
        id: WebhookId::generate(),
        workspace_id: ws.id,
        target: WebhookTarget::parse("https://hooks.example.com/in", false).unwrap(),
        events: events.to_vec(),
        secret: WebhookSecret::generate(),
        created_at: Timestamp::now(),
        disabled_at: None,
        consecutive_failures: 0,
    };
    store.create_webhook(&hook).await.unwrap();
    hook
}

/// Records a successful attempt of a claimed delivery.
async fn delivered(store: &Store, c: &ClaimedDelivery) {
    store
        .record_attempts(&[AttemptRecord {
            event_id: c.delivery.event_id,
            webhook_id: c.delivery.webhook_id,
            started_at: Timestamp::now(),
            duration_ms: 1,
            status_code: Some(204),
            error: None,
            next: NextStep::Delivered,
        }])
        .await
        .unwrap();
}

/// Creates `n` links in `ws`: a `link.created` delivery each to every endpoint subscribed.
async fn create_many(store: &Store, ws: &Workspace, n: usize) {
    let links = (0..n).map(|_| new_link(ws, None, "https://example.com/"));
    store.create_links(links.collect(), &base()).await.unwrap();
}

/// No endpoint busy, and no bound on any.
fn anyone() -> InFlight {
    InFlight::new(usize::MAX)
}

fn later() -> Timestamp {
    Timestamp::now().plus(Duration::from_secs(60))
}

/// `count` clicks on the link `code` of `ws`, the first of them with `clicks`' details, without
/// analytics events, as the flush hands them to the store.
async fn clicks_on(
    store: &Store,
    ws: &Workspace,
    code: &str,
    count: u64,
    clicks: Vec<ClickEvent>,
) -> ClickBatch {
    let counter = (store.resolve(base().domain(), code).await)
        .unwrap()
        .unwrap()
        .counter;
    ClickBatch {
        links: vec![LinkClicks {
            counter,
            workspace_id: ws.id,
            count,
            clicks,
        }],
        events: false,
    }
}

each_backend!(
    events_reach_subscribed_endpoints_of_their_workspace_only,
    as_server,
    |store| {
        let acme = workspace(&store, "acme").await;
        let globex = workspace(&store, "globex").await;
        let created = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
        let clicked = webhook(&store, &acme, &[EventKind::LinkClicked]).await;
        let other = webhook(
            &store,
            &globex,
            &[EventKind::LinkCreated, EventKind::LinkClicked],
        )
        .await;

        let link = create(&store, new_link(&acme, Some("x"), "https://example.com/")).await;
        let click = ClickEvent {
            click: ClickInfo {
                referrer: "ref.example".into(),
                referrer_url: Some("https://ref.example/".into()),
                ..ClickInfo::bare(Timestamp::now())
            },
            visitor: 1,
        };
        let batch = clicks_on(&store, &acme, "x", 2, vec![click]).await;
        store.record_clicks(batch.into(), &base()).await.unwrap();

        let on_created = store
            .list_deliveries(acme.id, created.id, 10)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(on_created.len(), 1);
        assert_eq!(on_created[0].event_type, EventKind::LinkCreated);
        assert_eq!(on_created[0].state, DeliveryState::Pending);
        let body: serde_json::Value = serde_json::from_str(&on_created[0].payload).unwrap();
        assert_eq!(body["type"], "link.created");
        assert_eq!(body["data"]["id"], link.id.to_string());
        assert_eq!(body["data"]["shortUrl"], "https://sho.rt/x");

        let on_clicked = store
            .list_deliveries(acme.id, clicked.id, 10)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            on_clicked.len(),
            2,
            "one event per counted click, even without details"
        );
        let referrers: Vec<serde_json::Value> = on_clicked
            .iter()
            .map(|d| {
                serde_json::from_str::<serde_json::Value>(&d.payload).unwrap()["data"]["click"]
                        ["referrerUrl"]
                        .clone()
            })
            .collect();
        assert!(referrers.contains(&serde_json::json!("https://ref.example/")));
        for delivery in &on_clicked {
            let body: serde_json::Value = serde_json::from_str(&delivery.payload).unwrap();
            assert_eq!(
                body["data"]["link"]["clicks"], 2,
                "the link as the batch left it"
            );
        }
        assert!(referrers.contains(&serde_json::Value::Null));

        assert_eq!(
            store
                .list_deliveries(globex.id, other.id, 10)
                .await
                .unwrap()
                .unwrap()
                .len(),
            0
        );
        assert_eq!(
            store
                .list_deliveries(globex.id, created.id, 10)
                .await
                .unwrap(),
            None,
            "not globex's endpoint"
        );
    }
);

each_backend!(claims_lease_and_attempts_move_deliveries_on, |store| {
    let acme = workspace(&store, "acme").await;
    let hook = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    create(&store, new_link(&acme, Some("a"), "https://example.com/")).await;
    create(&store, new_link(&acme, Some("b"), "https://example.com/")).await;

    let now = Timestamp::now();
    let claimed = store.claim_due(now, 10, later(), &anyone()).await.unwrap();
    assert_eq!(claimed.len(), 2);
    assert_eq!(claimed[0].target.as_str(), "https://hooks.example.com/in");
    assert_eq!(claimed[0].secret, hook.secret);
    assert!(
        store
            .claim_due(now, 10, later(), &anyone())
            .await
            .unwrap()
            .is_empty(),
        "leased deliveries are not claimed twice"
    );

    let (first, second) = (&claimed[0].delivery, &claimed[1].delivery);
    let retry_at = Timestamp::now().plus(Duration::from_secs(5));
    store
        .record_attempts(&[AttemptRecord {
            event_id: first.event_id,
            webhook_id: hook.id,
            started_at: now,
            duration_ms: 12,
            status_code: Some(500),
            error: None,
            next: NextStep::RetryAt(retry_at),
        }])
        .await
        .unwrap();
    store
        .record_attempts(&[AttemptRecord {
            event_id: second.event_id,
            webhook_id: hook.id,
            started_at: now,
            duration_ms: 3,
            status_code: Some(204),
            error: None,
            next: NextStep::Delivered,
        }])
        .await
        .unwrap();

    let listed = store
        .list_deliveries(acme.id, hook.id, 10)
        .await
        .unwrap()
        .unwrap();
    let first_now = listed
        .iter()
        .find(|d| d.event_id == first.event_id)
        .unwrap();
    assert_eq!(
        (
            first_now.state,
            first_now.attempts,
            first_now.last_status_code
        ),
        (DeliveryState::Pending, 1, Some(500))
    );
    assert_eq!(first_now.next_attempt_at, retry_at);
    let second_now = listed
        .iter()
        .find(|d| d.event_id == second.event_id)
        .unwrap();
    assert_eq!(
        (second_now.state, second_now.attempts),
        (DeliveryState::Delivered, 1)
    );

    assert!(
        store
            .claim_due(Timestamp::now(), 10, later(), &anyone())
            .await
            .unwrap()
            .is_empty(),
        "retry not yet due"
    );
    let due_again = store
        .claim_due(retry_at, 10, later(), &anyone())
        .await
        .unwrap();
    assert_eq!(due_again.len(), 1);
    assert_eq!(due_again[0].delivery.event_id, first.event_id);

    store.release(first.event_id, hook.id).await.unwrap();
    assert_eq!(
        store
            .claim_due(retry_at, 10, later(), &anyone())
            .await
            .unwrap()
            .len(),
        1,
        "a released delivery is claimable at once"
    );
});

each_backend!(
    a_due_retry_goes_before_first_tries_that_came_due_earlier,
    |store| {
        let acme = workspace(&store, "acme").await;
        let hook = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
        create(&store, new_link(&acme, Some("a"), "https://example.com/")).await;
        let tried = store
            .claim_due(Timestamp::now(), 1, later(), &anyone())
            .await
            .unwrap();
        let retry_at = Timestamp::now().plus(Duration::from_secs(5));
        store
            .record_attempts(&[AttemptRecord {
                event_id: tried[0].delivery.event_id,
                webhook_id: hook.id,
                started_at: Timestamp::now(),
                duration_ms: 10_000,
                status_code: None,
                error: Some("timed out".into()),
                next: NextStep::RetryAt(retry_at),
            }])
            .await
            .unwrap();
        // The endpoint's backlog: deliveries never tried, all due before the retry.
        create_many(&store, &acme, 30).await;

        let claimed = store
            .claim_due(retry_at, 1, later(), &anyone())
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].delivery.event_id, tried[0].delivery.event_id);
        assert_eq!(claimed[0].delivery.attempts, 1);
        let rest = store
            .claim_due(retry_at, 100, later(), &anyone())
            .await
            .unwrap();
        assert_eq!(rest.len(), 30, "then the first tries");
        assert!(rest.iter().all(|c| c.delivery.attempts == 0));
    }
);

/// A failed attempt of a delivery claimed by the test.
fn failed(c: &ClaimedDelivery) -> AttemptRecord {
    AttemptRecord {
        event_id: c.delivery.event_id,
        webhook_id: c.delivery.webhook_id,
        started_at: Timestamp::now(),
        duration_ms: 1,
        status_code: Some(500),
        error: None,
        next: NextStep::Failed,
    }
}

/// PostgreSQL: an endpoint disabled while a transaction that read it as subscribed (a click
/// flush, say) still writes its deliveries fails those too. Before, they were written after the
/// disabling failed what it saw, and stayed pending for ever.
#[tokio::test]
async fn disabling_an_endpoint_fails_the_deliveries_being_written_for_it() {
    use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
    let test = "disabling_an_endpoint_fails_the_deliveries_being_written_for_it";
    let Some(db) = TestDatabase::postgres(test).await else {
        return;
    };
    let store = db.store().await;
    let acme = workspace(&store, "acme").await;
    let hook = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    let n = shortlink_domain::MAX_CONSECUTIVE_FAILURES as usize;
    create_many(&store, &acme, n).await;
    let claimed = store
        .claim_due(Timestamp::now(), n as i64, later(), &anyone())
        .await
        .unwrap();
    let (first, last) = claimed.split_at(n - 1);
    let records: Vec<AttemptRecord> = first.iter().map(failed).collect();
    store.record_attempts(&records).await.unwrap();

    // The writer holds the endpoint as the outbox does, from reading it to its commit.
    let mut writer = AsyncPgConnection::establish(&db.url).await.unwrap();
    writer
        .batch_execute(&format!(
            "BEGIN; SELECT id FROM webhooks WHERE id = '{}' FOR KEY SHARE",
            hook.id
        ))
        .await
        .unwrap();
    let disabling = tokio::spawn({
        let (store, record) = (store.clone(), failed(&last[0]));
        async move { store.record_attempts(&[record]).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    writer
        .batch_execute(&format!(
            "INSERT INTO webhook_deliveries (event_id, webhook_id, event_type, payload, state, \
             attempts, next_attempt_at, created_at, updated_at) \
             VALUES ('{}', '{}', 'link.created', '{{}}', 'pending', 0, 0, 0, 0); COMMIT",
            shortlink_domain::MessageId::generate(),
            hook.id
        ))
        .await
        .unwrap();
    disabling.await.unwrap().unwrap();

    let listed = store
        .list_deliveries(acme.id, hook.id, 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(listed.len(), n + 1);
    let pending: Vec<_> = listed
        .iter()
        .filter(|d| d.state != DeliveryState::Failed)
        .collect();
    assert!(pending.is_empty(), "{pending:?}");
}

each_backend!(
    a_delivered_delivery_stays_delivered_whatever_a_late_record_says,
    |store| {
        let acme = workspace(&store, "acme").await;
        webhook(&store, &acme, &[EventKind::LinkCreated]).await;
        create_many(&store, &acme, 1).await;
        let claimed = store
            .claim_due(Timestamp::now(), 1, later(), &anyone())
            .await
            .unwrap();
        delivered(&store, &claimed[0]).await;
        // A worker whose lease ran out records its attempt of the same delivery afterwards.
        store.record_attempts(&[failed(&claimed[0])]).await.unwrap();
        let listed = store
            .list_deliveries(acme.id, claimed[0].delivery.webhook_id, 10)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (listed[0].state, listed[0].attempts),
            (DeliveryState::Delivered, 1)
        );
    }
);

each_backend!(
    endpoints_are_disabled_after_consecutive_failed_deliveries,
    |store| {
        let acme = workspace(&store, "acme").await;
        let hook = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
        let n = shortlink_domain::MAX_CONSECUTIVE_FAILURES as usize;
        // n to fail, two more in flight when the endpoint is disabled, one answered 500 and
        // waiting for its retry, one never claimed.
        create_many(&store, &acme, n + 4).await;
        let claimed = store
            .claim_due(Timestamp::now(), n as i64 + 3, later(), &anyone())
            .await
            .unwrap();
        assert_eq!(claimed.len(), n + 3);
        let (failing, in_flight) = claimed.split_at(n);
        let (in_flight, retrying) = in_flight.split_at(2);
        store
            .record_attempts(&[AttemptRecord {
                event_id: retrying[0].delivery.event_id,
                webhook_id: hook.id,
                started_at: Timestamp::now(),
                duration_ms: 1,
                status_code: Some(500),
                error: None,
                next: NextStep::RetryAt(later()),
            }])
            .await
            .unwrap();
        for (i, c) in failing.iter().enumerate() {
            store.record_attempts(&[failed(c)]).await.unwrap();
            let now = store.get_webhook(acme.id, hook.id).await.unwrap().unwrap();
            assert_eq!(now.consecutive_failures, i as i32 + 1);
            assert_eq!(now.disabled_at.is_some(), i + 1 == n);
        }
        // What was still pending has failed: nothing will try it again.
        let list = |state| {
            let store = store.clone();
            async move {
                let all = store.list_deliveries(acme.id, hook.id, 100).await.unwrap();
                all.unwrap()
                    .into_iter()
                    .filter(|d| d.state == state)
                    .collect::<Vec<_>>()
            }
        };
        assert!(list(DeliveryState::Pending).await.is_empty());
        let failed = list(DeliveryState::Failed).await;
        assert_eq!(failed.len(), n + 4);
        let not_sent = failed.iter().filter(|d| d.attempts == 0).count();
        assert_eq!(not_sent, 3);
        assert!(failed.iter().filter(|d| d.attempts == 0).all(|d| {
            d.last_error.as_deref()
                == Some("not sent: the endpoint was disabled after consecutive failures")
        }));
        // The one that was sent keeps what its attempt got: it was sent.
        let answered = failed
            .iter()
            .find(|d| d.event_id == retrying[0].delivery.event_id)
            .unwrap();
        assert_eq!(
            (
                answered.attempts,
                answered.last_status_code,
                answered.last_error.as_deref()
            ),
            (1, Some(500), None)
        );
        // An attempt in flight records its outcome, and one to be retried has failed instead.
        let retried = AttemptRecord {
            event_id: in_flight[0].delivery.event_id,
            webhook_id: hook.id,
            started_at: Timestamp::now(),
            duration_ms: 1,
            status_code: Some(500),
            error: None,
            next: NextStep::RetryAt(Timestamp::now()),
        };
        store.record_attempts(&[retried]).await.unwrap();
        assert!(list(DeliveryState::Pending).await.is_empty());
        let recorded = list(DeliveryState::Failed).await;
        let recorded = recorded
            .iter()
            .find(|d| d.event_id == in_flight[0].delivery.event_id)
            .unwrap();
        assert_eq!(
            (recorded.attempts, recorded.last_status_code),
            (1, Some(500))
        );
        // A disabled endpoint gets no new events.
        create(&store, new_link(&acme, None, "https://example.com/after")).await;
        assert!(
            store
                .claim_due(Timestamp::now(), 100, later(), &anyone())
                .await
                .unwrap()
                .is_empty()
        );
    }
);

each_backend!(concurrent_claims_never_share_a_delivery, |store| {
    let acme = workspace(&store, "acme").await;
    webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    create_many(&store, &acme, 60).await;
    let claims = (0..6).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .claim_due(Timestamp::now(), 7, later(), &anyone())
                .await
                .unwrap()
        })
    });
    let mut ids = Vec::new();
    for claim in claims {
        ids.extend(
            claim
                .await
                .unwrap()
                .into_iter()
                .map(|c| c.delivery.event_id),
        );
    }
    let total = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), total, "no delivery was claimed twice");
    assert_eq!(total, 42);
});

/// On SQLite, a claim (which reads the due deliveries, then leases them) waits for another
/// connection's write and then goes through, instead of failing its lease at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_waits_for_another_connections_write_instead_of_failing() {
    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let acme = workspace(&store, "acme").await;
    webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    create(&store, new_link(&acme, Some("a"), "https://example.com/")).await;

    let other = write_elsewhere(&db, Duration::from_millis(300));
    let claimed = store
        .claim_due(Timestamp::now(), 10, later(), &anyone())
        .await;
    other.join().unwrap();
    assert_eq!(claimed.unwrap().len(), 1);
}

/// On SQLite, recording attempts (which reads each endpoint's count of failures, then writes)
/// waits for another connection's write and then goes through. Had it read first, a write in
/// between (the checkpointer restarting the log does one under a burst of deliveries) would fail
/// the record at once ("database is locked"), and its deliveries would be sent again when their
/// leases ran out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_attempts_waits_for_another_connections_write_instead_of_failing() {
    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let acme = workspace(&store, "acme").await;
    let hook = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    create(&store, new_link(&acme, Some("a"), "https://example.com/")).await;
    let claimed = store
        .claim_due(Timestamp::now(), 10, later(), &anyone())
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);

    let other = write_elsewhere(&db, Duration::from_millis(300));
    delivered(&store, &claimed[0]).await;
    other.join().unwrap();
    let deliveries = store.list_deliveries(acme.id, hook.id, 10).await.unwrap();
    let states: Vec<_> = deliveries.unwrap().iter().map(|d| d.state).collect();
    assert_eq!(states, [DeliveryState::Delivered]);
}

/// On SQLite, a batch of clicks without analytics events (whose transaction reads the
/// subscriptions before it writes anything) waits for another connection's write and then
/// counts, instead of failing at once and leaving its clicks to the next flush.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_without_events_wait_for_another_connections_write_instead_of_failing() {
    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let acme = workspace(&store, "acme").await;
    let hook = webhook(&store, &acme, &[EventKind::LinkClicked]).await;
    create(&store, new_link(&acme, Some("a"), "https://example.com/")).await;
    let batch = clicks_on(&store, &acme, "a", 2, Vec::new()).await;

    let other = write_elsewhere(&db, Duration::from_millis(300));
    let recorded = store.record_clicks(batch.into(), &base()).await;
    other.join().unwrap();
    recorded.unwrap();
    let deliveries = store.list_deliveries(acme.id, hook.id, 10).await.unwrap();
    assert_eq!(deliveries.unwrap().len(), 2, "a link.clicked per click");
}

each_backend!(
    delivery_pages_cover_every_delivery_once_newest_first,
    |store| {
        let acme = workspace(&store, "acme").await;
        let globex = workspace(&store, "globex").await;
        let hook = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
        for slug in ["a", "b", "c", "d", "e"] {
            create(&store, new_link(&acme, Some(slug), "https://example.com/")).await;
        }
        // Two of them delivered, in a known order of event ids.
        let claimed = store
            .claim_due(Timestamp::now(), 2, later(), &anyone())
            .await
            .unwrap();
        assert_eq!(claimed.len(), 2);
        for c in &claimed {
            delivered(&store, c).await;
        }
        let page = |state, after, limit| {
            let store = store.clone();
            async move {
                store
                    .list_deliveries_page(acme.id, hook.id, state, after, limit)
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        let all = page(None, None, 100).await;
        assert_eq!(all.len(), 5);
        let mut expected: Vec<_> = all.iter().map(|d| (d.created_at, d.event_id)).collect();
        expected.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(
            all.iter()
                .map(|d| (d.created_at, d.event_id))
                .collect::<Vec<_>>(),
            expected,
            "newest first"
        );

        // Pages of two: every delivery exactly once, in the same order.
        let mut paged = Vec::new();
        let mut after = None;
        loop {
            let items = page(None, after, 2).await;
            assert!(items.len() <= 2);
            paged.extend(items.iter().map(|d| d.event_id));
            match items.last() {
                Some(last) if items.len() == 2 => after = Some(DeliveryCursor::after(last)),
                _ => break,
            }
        }
        assert_eq!(paged, all.iter().map(|d| d.event_id).collect::<Vec<_>>());

        // By state, also across pages.
        let delivered = page(Some(DeliveryState::Delivered), None, 1).await;
        assert_eq!(delivered.len(), 1);
        let rest = page(
            Some(DeliveryState::Delivered),
            Some(DeliveryCursor::after(&delivered[0])),
            100,
        )
        .await;
        let mut delivered_ids: Vec<_> = delivered.iter().chain(&rest).map(|d| d.event_id).collect();
        delivered_ids.sort_unstable();
        let mut claimed_ids: Vec<_> = claimed.iter().map(|c| c.delivery.event_id).collect();
        claimed_ids.sort_unstable();
        assert_eq!(delivered_ids, claimed_ids);
        let pending = page(Some(DeliveryState::Pending), None, 100).await;
        assert_eq!(pending.len(), 3);
        assert!(pending.iter().all(|d| d.state == DeliveryState::Pending));
        assert!(
            page(Some(DeliveryState::Failed), None, 100)
                .await
                .is_empty()
        );

        assert_eq!(
            store
                .list_deliveries_page(globex.id, hook.id, None, None, 10)
                .await
                .unwrap(),
            None,
            "not globex's endpoint"
        );
    }
);

/// The endpoint's row version on PostgreSQL (`xmin` changes with every write of the row).
async fn webhook_row_version(url: &str, hook: WebhookId) -> String {
    use diesel::QueryableByName;
    use diesel_async::{AsyncConnection, RunQueryDsl};

    #[derive(QueryableByName)]
    struct Version {
        #[diesel(sql_type = diesel::sql_types::Text)]
        version: String,
    }
    let mut conn = diesel_async::AsyncPgConnection::establish(url)
        .await
        .unwrap();
    let row: Version =
        diesel::sql_query("SELECT xmin::text AS version FROM webhooks WHERE id = $1")
            .bind::<diesel::sql_types::Text, _>(hook.to_string())
            .get_result(&mut conn)
            .await
            .unwrap();
    row.version
}

/// Every delivery used to rewrite its endpoint's row (`consecutive_failures = 0`), so a busy
/// endpoint's one row piled up dead versions and every attempt queued on its lock.
#[tokio::test]
async fn a_delivered_attempt_leaves_a_healthy_endpoint_row_alone() {
    let Some(db) =
        TestDatabase::postgres("a_delivered_attempt_leaves_a_healthy_endpoint_row_alone").await
    else {
        return;
    };
    let store = db.store().await;
    let acme = workspace(&store, "acme").await;
    let hook = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    create_many(&store, &acme, 3).await;
    let claimed = store
        .claim_due(Timestamp::now(), 100, later(), &anyone())
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    let before = webhook_row_version(&db.url, hook.id).await;
    for c in &claimed {
        delivered(&store, c).await;
    }
    assert_eq!(webhook_row_version(&db.url, hook.id).await, before);
    let now = store.get_webhook(acme.id, hook.id).await.unwrap().unwrap();
    assert_eq!(now.consecutive_failures, 0);
}

each_backend!(
    a_backlog_of_one_endpoint_does_not_hold_back_another,
    as_server,
    |store| {
        let acme = workspace(&store, "acme").await;
        let globex = workspace(&store, "globex").await;
        let busy = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
        create_many(&store, &acme, 40).await;
        // Created after the whole backlog, so the oldest due delivery of all is never its.
        let other = webhook(&store, &globex, &[EventKind::LinkCreated]).await;
        create(&store, new_link(&globex, None, "https://example.com/g")).await;

        let now = Timestamp::now();
        let first = store.claim_due(now, 8, later(), &anyone()).await.unwrap();
        let to = |hook: &Webhook| {
            first
                .iter()
                .filter(|c| c.delivery.webhook_id == hook.id)
                .count()
        };
        assert_eq!(
            (to(&busy), to(&other)),
            (7, 1),
            "the other's share, the rest to the busy"
        );
        // Every claim leases what it returns: the next ones take the rest of the backlog, once.
        let mut seen: std::collections::HashSet<_> =
            first.iter().map(|c| c.delivery.event_id).collect();
        loop {
            let more = store.claim_due(now, 8, later(), &anyone()).await.unwrap();
            if more.is_empty() {
                break;
            }
            assert!(more.iter().all(|c| seen.insert(c.delivery.event_id)));
        }
        assert_eq!(seen.len(), 41);
    }
);

each_backend!(
    a_large_batch_of_clicks_becomes_one_event_per_click_for_each_endpoint,
    as_server,
    |store| {
        let acme = workspace(&store, "acme").await;
        let first = webhook(&store, &acme, &[EventKind::LinkClicked]).await;
        let second = webhook(&store, &acme, &[EventKind::LinkClicked]).await;
        create(
            &store,
            new_link(&acme, Some("busy"), "https://example.com/"),
        )
        .await;
        // More events than are made at once, more rows than one insert takes.
        let clicks = 1_201;
        let click = ClickEvent {
            click: ClickInfo::bare(Timestamp::now()),
            visitor: 1,
        };
        let batch = clicks_on(&store, &acme, "busy", clicks, vec![click; 1_000]).await;
        store.record_clicks(batch.into(), &base()).await.unwrap();
        assert_eq!(store.pending_deliveries().await.unwrap(), 2 * clicks);
        // An endpoint's deletion takes its deliveries with it, and only its own.
        assert!(store.delete_webhook(acme.id, first.id).await.unwrap());
        assert_eq!(store.pending_deliveries().await.unwrap(), clicks);
        assert!(store.delete_webhook(acme.id, second.id).await.unwrap());
        assert_eq!(store.pending_deliveries().await.unwrap(), 0);
    }
);

/// Two instances recording failed attempts of one endpoint at once, the second batch taking the
/// endpoint past its limit: the disabling batch failed every pending delivery while the other
/// held one of them and waited for the endpoint's row, which the first held (PostgreSQL found
/// the deadlock and aborted a batch, whose deliveries then went out again a minute later).
#[tokio::test]
async fn two_instances_recording_failures_of_one_endpoint_do_not_deadlock() {
    let Some(db) =
        TestDatabase::postgres("two_instances_recording_failures_of_one_endpoint_do_not_deadlock")
            .await
    else {
        return;
    };
    let (one, two) = (db.store().await, db.store().await);
    let acme = workspace(&one, "acme").await;
    let n = shortlink_domain::MAX_CONSECUTIVE_FAILURES as usize;
    for round in 0..5 {
        let hook = webhook(&one, &acme, &[EventKind::LinkCreated]).await;
        create_many(&one, &acme, 2 * n + 4).await;
        let all_failed =
            |claimed: Vec<ClaimedDelivery>| claimed.iter().map(failed).collect::<Vec<_>>();
        let first = all_failed(
            one.claim_due(Timestamp::now(), n as i64, later(), &anyone())
                .await
                .unwrap(),
        );
        let second = all_failed(
            two.claim_due(Timestamp::now(), n as i64, later(), &anyone())
                .await
                .unwrap(),
        );
        assert_eq!((first.len(), second.len()), (n, n));
        let (a, b) = tokio::join!(one.record_attempts(&first), two.record_attempts(&second));
        a.unwrap();
        b.unwrap();
        let now = one.get_webhook(acme.id, hook.id).await.unwrap().unwrap();
        assert!(now.disabled_at.is_some(), "round {round}");
        assert_eq!(now.consecutive_failures, 2 * n as i32, "round {round}");
        one.delete_webhook(acme.id, hook.id).await.unwrap();
    }
}

each_backend!(ended_deliveries_past_retention_are_forgotten, |store| {
    let acme = workspace(&store, "acme").await;
    let hook = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    create_many(&store, &acme, 7).await;
    let claimed = store
        .claim_due(Timestamp::now(), 6, later(), &anyone())
        .await
        .unwrap();
    assert_eq!(claimed.len(), 6);
    let week = Duration::from_secs(7 * 24 * 60 * 60);
    let (long_ago, lately) = (
        Timestamp::now().minus(week * 2),
        Timestamp::now().minus(week / 2),
    );
    // Delivered and failed, long ago and lately; one retried; one never claimed.
    let outcomes = [
        (long_ago, NextStep::Delivered),
        (long_ago, NextStep::Delivered),
        (long_ago, NextStep::Failed),
        (lately, NextStep::Delivered),
        (lately, NextStep::Failed),
        (long_ago, NextStep::RetryAt(Timestamp::now())),
    ];
    let records: Vec<AttemptRecord> = claimed
        .iter()
        .zip(outcomes)
        .map(|(c, (started_at, next))| AttemptRecord {
            event_id: c.delivery.event_id,
            webhook_id: hook.id,
            started_at,
            duration_ms: 1,
            status_code: Some(if next == NextStep::Delivered {
                204
            } else {
                500
            }),
            error: None,
            next,
        })
        .collect();
    store.record_attempts(&records).await.unwrap();

    let forgotten = store
        .forget_deliveries(Timestamp::now().minus(week), 1)
        .await
        .unwrap();
    assert_eq!(forgotten, 3, "the three that ended a fortnight ago");
    let left = store
        .list_deliveries(acme.id, hook.id, 100)
        .await
        .unwrap()
        .unwrap();
    let state_of = |c: &ClaimedDelivery| {
        left.iter()
            .find(|d| d.event_id == c.delivery.event_id)
            .map(|d| d.state)
    };
    let expected = [
        None,
        None,
        None,
        Some(DeliveryState::Delivered),
        Some(DeliveryState::Failed),
        Some(DeliveryState::Pending),
    ];
    for (c, expected) in claimed.iter().zip(expected) {
        assert_eq!(state_of(c), expected);
    }
    assert_eq!(left.len(), 4, "and the one never claimed");
    assert_eq!(
        store
            .forget_deliveries(Timestamp::now().minus(week), 1)
            .await
            .unwrap(),
        0
    );
});

each_backend!(a_claim_gives_no_endpoint_more_than_its_room, |store| {
    let acme = workspace(&store, "acme").await;
    let slow = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    let slower = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    let fast = webhook(&store, &acme, &[EventKind::LinkCreated]).await;
    create_many(&store, &acme, 10).await;
    let to = |claimed: &[ClaimedDelivery], hook: &Webhook| {
        claimed
            .iter()
            .filter(|c| c.delivery.webhook_id == hook.id)
            .count()
    };
    // Of 12 slots, two endpoints hold 4 each: neither may start more (its 4 and the worker's 8
    // fill the 12), the third may start 2 (its 2 and the worker's 10 do), in whatever order
    // the claim takes them.
    let mut in_flight = InFlight::new(12);
    in_flight.busy.insert(slow.id, 4);
    in_flight.busy.insert(slower.id, 4);
    let claimed = store
        .claim_due(Timestamp::now(), 4, later(), &in_flight)
        .await
        .unwrap();
    assert_eq!(
        (
            to(&claimed, &slow),
            to(&claimed, &slower),
            to(&claimed, &fast)
        ),
        (0, 0, 2)
    );
});
