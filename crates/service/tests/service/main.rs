//! The service over real databases: SQLite as its file's server (the redirect index answers),
//! SQLite as any other store (the cache answers), and PostgreSQL when `TEST_POSTGRES_URL` is set.
#![expect(
    clippy::unwrap_used,
    reason = "a test fails by panicking, and helpers are part of tests"
)]

mod outage;

use shortlink_domain::{
    BaseUrl, Destination, LinkId, LinkPatch, LinkRef, RateLimit, Slug, Timestamp, Visit, Workspace,
    WorkspaceId,
};
use shortlink_service::{FLUSH_PART, MAX_PENDING_DETAILS, Service, ServiceError, ServiceSettings};
use shortlink_storage::testing::TestDatabase;
use shortlink_storage::{
    CreateOutcome, Dimension, EventFilter, LinkUpdate, NewLink, RedirectTarget, ServerOptions,
    Store, StoreOptions, Tally,
};

fn base() -> BaseUrl {
    BaseUrl::parse("https://sho.rt").unwrap()
}

/// Every configuration a service runs on, each with a fresh database, and whether its store
/// answers from memory.
async fn services(test: &str) -> Vec<(TestDatabase, Service, bool)> {
    let mut services = Vec::new();
    let server = TestDatabase::sqlite();
    let options = StoreOptions {
        server: Some(ServerOptions::default()),
        ..StoreOptions::default()
    };
    let store = Store::open(&server.url, options).await.unwrap();
    services.push((server, store, true));
    for db in TestDatabase::all(test).await {
        let store = db.store().await;
        services.push((db, store, false));
    }
    services
        .into_iter()
        .map(|(db, store, in_memory)| {
            assert_eq!(store.resolves_in_memory(), in_memory);
            let service = Service::new(store, ServiceSettings::new(base())).unwrap();
            (db, service, in_memory)
        })
        .collect()
}

async fn workspace(store: &Store) -> Workspace {
    let workspace = Workspace {
        id: WorkspaceId::generate(),
        name: "acme".into(),
        rate_limit: RateLimit::default(),
        created_at: Timestamp::now(),
    };
    store.create_workspace(&workspace).await.unwrap();
    workspace
}

fn new_link(workspace: &Workspace, slug: &str, destination: &str) -> NewLink {
    NewLink {
        id: LinkId::generate(),
        workspace_id: workspace.id,
        domain: base().domain().to_owned(),
        slug: Some(Slug::parse(slug).unwrap()),
        destination: Destination::parse(destination, &base()).unwrap(),
        created_at: Timestamp::now(),
        options: Default::default(),
    }
}

fn click() -> Visit {
    Visit {
        timestamp: Timestamp::now(),
        address: None,
        referrer: None,
        user_agent: None,
    }
}

/// The stored click count of link `id`.
async fn clicks_of(service: &Service, workspace: &Workspace, id: LinkId) -> i64 {
    let link = (service.store())
        .get_link(workspace.id, &LinkRef::Id(id), service.domain())
        .await
        .unwrap();
    link.unwrap().clicks
}

async fn destination(service: &Service, code: &str) -> Option<String> {
    let target = service.resolve(code).await.unwrap();
    target.map(|t| t.destination.as_str().to_owned())
}

#[tokio::test]
async fn a_flush_of_many_clicks_commits_them_in_parts() {
    for (_db, service, _) in services("a_flush_of_many_clicks_commits_them_in_parts").await {
        let acme = workspace(service.store()).await;
        let outcomes =
            (service.create_links(vec![new_link(&acme, "busy", "https://example.com/")]))
                .await
                .unwrap();
        let CreateOutcome::Created(created) = &outcomes[0] else {
            panic!("created")
        };
        let busy = service.resolve("busy").await.unwrap().unwrap();
        let parts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = parts.clone();
        service.observe_flushes(std::sync::Arc::new(move |clicks, _| {
            seen.lock().unwrap().push(clicks);
        }));
        let clicks = 2 * FLUSH_PART + 500;
        for _ in 0..clicks {
            service.record_click(&busy, click);
        }
        service.flush_clicks().await.unwrap();
        // In any order: PostgreSQL writes several parts at once.
        let mut written = parts.lock().unwrap().clone();
        written.sort_unstable();
        let part = FLUSH_PART as u64;
        assert_eq!(written, [500, part, part]);
        assert_eq!(clicks_of(&service, &acme, created.id).await, clicks as i64);
        service.shutdown().await.unwrap();
    }
}

const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0";

/// Records more clicks on `link` than memory keeps the details of, each from Firefox; how many.
fn click_past_the_memory_bound(service: &Service, link: &RedirectTarget) -> u64 {
    let clicks = MAX_PENDING_DETAILS + 1_000;
    for _ in 0..clicks {
        service.record_click(link, || Visit {
            user_agent: Some(FIREFOX.into()),
            ..click()
        });
    }
    clicks as u64
}

/// `link` has `clicks` events, every one of them from Firefox: none lost its details.
async fn every_click_kept_its_details(
    store: &Store,
    workspace: WorkspaceId,
    link: &RedirectTarget,
    clicks: u64,
) {
    let (start, end) = (
        Timestamp::from_unix_millis(0),
        Timestamp::now().plus(std::time::Duration::from_secs(60)),
    );
    let filter = EventFilter::between(workspace, Some(link.counter), start, end);
    let browsers = store
        .analytics_breakdown(&filter, Dimension::Browser, 10)
        .await
        .unwrap();
    assert_eq!(
        browsers,
        [Tally {
            key: Some("Firefox".to_owned()),
            clicks,
            visitors: 1
        }]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_past_the_memory_bound_keep_their_details() {
    for (_db, service, _) in services("clicks_past_the_memory_bound_keep_their_details").await {
        let acme = workspace(service.store()).await;
        let outcomes = service.create_links(vec![new_link(&acme, "busy", "https://example.com/")]);
        let CreateOutcome::Created(created) = &outcomes.await.unwrap()[0] else {
            panic!("created")
        };
        let busy = service.resolve("busy").await.unwrap().unwrap();
        let clicks = click_past_the_memory_bound(&service, &busy);
        assert_eq!(service.clicks_pending(), clicks);
        service.flush_clicks().await.unwrap();
        assert_eq!(service.clicks_pending(), 0);
        assert_eq!(clicks_of(&service, &acme, created.id).await, clicks as i64);
        every_click_kept_its_details(service.store(), acme.id, &busy, clicks).await;
        service.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_follows_every_change_the_service_makes() {
    for (_db, service, _) in services("resolve_follows_every_change_the_service_makes").await {
        let acme = workspace(service.store()).await;
        // Remembered as absent where there is a cache: the creation must make it forget.
        assert_eq!(destination(&service, "spring").await, None);
        let outcomes = service
            .create_links(vec![
                new_link(&acme, "spring", "https://example.com/1"),
                new_link(&acme, "spring", "https://example.com/2"),
            ])
            .await
            .unwrap();
        assert!(matches!(outcomes[0], CreateOutcome::Created(_)));
        assert_eq!(outcomes[1], CreateOutcome::SlugConflict);
        let found = destination(&service, "spring").await;
        assert_eq!(found.as_deref(), Some("https://example.com/1"));

        let code = LinkRef::Code("spring".into());
        let moved = Destination::parse("https://example.com/moved", &base()).unwrap();
        let patch = LinkPatch {
            destination: Some(moved.clone()),
            ..LinkPatch::default()
        };
        let changed = service.update_link(acme.id, &code, &patch).await;
        match changed.unwrap().unwrap() {
            LinkUpdate::Changed { after, .. } => assert_eq!(after.destination, moved),
            other => panic!("expected a change, got {other:?}"),
        }
        let found = destination(&service, "spring").await;
        assert_eq!(found.as_deref(), Some("https://example.com/moved"));

        assert!(service.delete_link(acme.id, &code).await.unwrap().is_some());
        assert_eq!(destination(&service, "spring").await, None);
        assert_eq!(service.delete_link(acme.id, &code).await.unwrap(), None);
        assert_eq!(destination(&service, "not/a/slug").await, None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_click_recorded_is_counted_once_stopped() {
    for (_db, service, _) in services("every_click_recorded_is_counted_once_stopped").await {
        let acme = workspace(service.store()).await;
        let outcomes = service
            .create_links(vec![
                new_link(&acme, "one", "https://example.com/1"),
                new_link(&acme, "two", "https://example.com/2"),
            ])
            .await
            .unwrap();
        let (one, two) = (
            service.resolve("one").await.unwrap().unwrap(),
            service.resolve("two").await.unwrap().unwrap(),
        );

        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn({
            let service = service.clone();
            async move {
                service
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await
            }
        });
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..250 {
                        service.record_click(&one, click);
                    }
                    service.record_click(&two, click);
                });
            }
        });
        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
        assert!(matches!(
            service.run(async {}).await,
            Err(ServiceError::AlreadyRunning)
        ));
        // Clicks recorded after the background tasks stopped are written by the shutdown.
        service.record_click(&two, click);
        service.shutdown().await.unwrap();

        let clicks = |outcome: &CreateOutcome| {
            let CreateOutcome::Created(link) = outcome else {
                panic!("created")
            };
            clicks_of(&service, &acme, link.id)
        };
        assert_eq!(
            (clicks(&outcomes[0]).await, clicks(&outcomes[1]).await),
            (1000, 5)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_or_stop_no_longer_waited_for_still_writes_every_click() {
    let test = "a_flush_or_stop_no_longer_waited_for_still_writes_every_click";
    for (_db, service, _) in services(test).await {
        let acme = workspace(service.store()).await;
        let outcomes = (service.create_links(vec![new_link(&acme, "hot", "https://example.com/")]))
            .await
            .unwrap();
        let CreateOutcome::Created(created) = &outcomes[0] else {
            panic!("created")
        };
        let hot = service.resolve("hot").await.unwrap().unwrap();
        let clicks = 5 * FLUSH_PART;
        for _ in 0..clicks {
            service.record_click(&hot, click);
        }
        // Each wait is given up long before its parts are written.
        let flush = tokio::time::timeout(
            std::time::Duration::from_micros(100),
            service.flush_clicks(),
        )
        .await;
        assert!(flush.is_err(), "given up");
        for _ in 0..clicks {
            service.record_click(&hot, click);
        }
        let stop =
            tokio::time::timeout(std::time::Duration::from_micros(100), service.shutdown()).await;
        assert!(stop.is_err(), "given up");

        service.shutdown().await.unwrap();
        assert_eq!(
            clicks_of(&service, &acme, created.id).await,
            2 * clicks as i64
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_failure_is_a_service_error() {
    let db = TestDatabase::sqlite();
    let store = db.store().await;
    let service = Service::new(store, ServiceSettings::new(base())).unwrap();
    // No such workspace: the foreign key refuses the link.
    let orphan = Workspace {
        id: WorkspaceId::generate(),
        name: "ghost".into(),
        rate_limit: RateLimit::default(),
        created_at: Timestamp::now(),
    };
    let failed = service
        .create_links(vec![new_link(&orphan, "orphan", "https://example.com/")])
        .await;
    let Err(ServiceError::Storage(e)) = failed else {
        panic!("a storage error, not {failed:?}")
    };
    assert!(!e.is_unavailable(), "{e}");
}

/// Built outside a tokio runtime, the service says so instead of panicking.
#[test]
fn a_service_built_outside_a_runtime_says_it_needs_one() {
    let db = TestDatabase::sqlite();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = runtime.block_on(db.store());
    let built = Service::new(store, ServiceSettings::new(base()));
    assert!(matches!(built, Err(ServiceError::NoRuntime)), "{built:?}");
}

/// Creations written together fail each on its own: one of a workspace that does not exist
/// failed every creation of its group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_that_fails_fails_alone() {
    for (_db, service, _) in services("a_creation_that_fails_fails_alone").await {
        let acme = workspace(service.store()).await;
        let orphan = Workspace {
            id: WorkspaceId::generate(),
            name: "ghost".into(),
            rate_limit: RateLimit::default(),
            created_at: Timestamp::now(),
        };
        let creations = (0..40).map(|i| {
            let owner = if i == 20 { &orphan } else { &acme };
            let link = new_link(owner, &format!("s{i}"), "https://example.com/");
            service.create_links(vec![link])
        });
        let results = futures_util::future::join_all(creations).await;
        for (i, result) in results.iter().enumerate() {
            match (i, result) {
                (20, Err(ServiceError::Storage(e))) => assert!(!e.is_unavailable(), "{e}"),
                (20, other) => panic!("the orphan's creation: {other:?}"),
                (_, Ok(outcomes)) => assert!(
                    matches!(outcomes[..], [CreateOutcome::Created(_)]),
                    "{i}: {outcomes:?}"
                ),
                (_, Err(e)) => panic!("{i} failed with the orphan: {e}"),
            }
        }
    }
}
