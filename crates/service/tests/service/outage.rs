//! A database that stops answering, through a proxy the test controls (PostgreSQL: the network
//! between instances and their database is what fails in practice).

use std::time::{Duration, Instant};

use shortlink_domain::Workspace;
use shortlink_service::{PROBE_EVERY, Service, ServiceError, ServiceSettings};
use shortlink_storage::testing::TestDatabase;
use shortlink_storage::testing::fault_proxy::{Fault, FaultProxy};
use shortlink_storage::{ANSWER_WITHIN, Store, StoreOptions};

use crate::{
    base, click_past_the_memory_bound, destination, every_click_kept_its_details, new_link,
    workspace,
};

/// How long past the database's bound a caller may wait in all (scheduling, a slow machine).
const SLACK: Duration = Duration::from_secs(1);

/// A plain use of the database fails as unavailable within its bound rather than hanging.
async fn fails_within_its_bound(store: &Store, workspace: &Workspace) {
    let started = Instant::now();
    let listed = store
        .list_links(workspace.id, 10, None, &Default::default())
        .await;
    assert!(
        matches!(listed, Err(ref e) if e.is_unavailable()),
        "{listed:?}"
    );
    assert!(
        started.elapsed() < ANSWER_WITHIN + SLACK,
        "{:?}",
        started.elapsed()
    );
}

fn is_unavailable<T: std::fmt::Debug>(result: Result<T, ServiceError>) -> bool {
    matches!(result, Err(ServiceError::Storage(ref e)) if e.is_unavailable())
}

/// `attempt` again every 100 ms until it succeeds, 100 times at most; the last result.
async fn until_ok<T, E, F: Future<Output = Result<T, E>>>(attempt: impl Fn() -> F) -> Result<T, E> {
    let mut result = attempt().await;
    for _ in 0..100 {
        if result.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        result = attempt().await;
    }
    result
}

/// A service on a fresh PostgreSQL database reached through a proxy the test controls, and a
/// workspace in it; `None` without `TEST_POSTGRES_URL`.
struct BehindAProxy {
    _db: TestDatabase,
    proxy: FaultProxy,
    store: Store,
    service: Service,
    acme: Workspace,
}

impl BehindAProxy {
    async fn start(test: &str, settings: ServiceSettings) -> Option<Self> {
        let db = TestDatabase::postgres(test).await?;
        db.store().await;
        let (proxy, url) = FaultProxy::for_postgres(&db.url).await;
        let store = Store::open(&url, StoreOptions::default()).await.unwrap();
        let service = Service::new(store.clone(), settings).unwrap();
        let acme = workspace(&store).await;
        Some(Self {
            _db: db,
            proxy,
            store,
            service,
            acme,
        })
    }

    /// Every open connection is cut, and new ones are refused.
    async fn cut(&self) {
        self.proxy.set(Fault::Reset);
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.proxy.set(Fault::Refuse);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_database_fails_fast_and_links_seen_keep_redirecting() {
    let mut settings = ServiceSettings::new(base());
    settings.redirect_cache_ttl = Duration::from_millis(100);
    let Some(outage) = BehindAProxy::start("service::outage::frozen", settings).await else {
        return;
    };
    let (proxy, store, service, acme) =
        (&outage.proxy, &outage.store, &outage.service, &outage.acme);
    let links = vec![
        new_link(acme, "seen", "https://example.com/seen"),
        new_link(acme, "unseen", "https://example.com/unseen"),
    ];
    service.create_links(links).await.unwrap();
    let seen = Some("https://example.com/seen".to_owned());
    assert_eq!(destination(service, "seen").await, seen);

    proxy.set(Fault::Freeze);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Past its cache lifetime, the link asks the database, which does not answer within its
    // bound: the link redirects from memory all the same.
    let started = Instant::now();
    assert_eq!(destination(service, "seen").await, seen);
    assert!(
        started.elapsed() < ANSWER_WITHIN + SLACK,
        "{:?}",
        started.elapsed()
    );
    // The next lookups do not wait for the database again: the seen link answers, a link never
    // looked up is unavailable, both at once.
    let started = Instant::now();
    assert_eq!(destination(service, "seen").await, seen);
    assert!(is_unavailable(service.resolve("unseen").await));
    assert!(started.elapsed() < ANSWER_WITHIN, "{:?}", started.elapsed());
    // Any other use of the database fails within its bound rather than hanging.
    fails_within_its_bound(store, acme).await;
    // Past the probe interval, lookups still answer at once, many at a time: one of them sends
    // a probe to the database, in the background, and none waits for it.
    tokio::time::sleep(PROBE_EVERY).await;
    let started = Instant::now();
    let lookups = (0..8).map(|_| destination(service, "seen"));
    for answer in futures_util::future::join_all(lookups).await {
        assert_eq!(answer, seen);
    }
    assert!(is_unavailable(service.resolve("unseen").await));
    assert!(started.elapsed() < ANSWER_WITHIN, "{:?}", started.elapsed());

    // The network comes back: within a probe interval, lookups reach the database again.
    proxy.set(Fault::None);
    tokio::time::sleep(PROBE_EVERY).await;
    let answered = until_ok(|| service.resolve("unseen")).await.unwrap();
    assert_eq!(
        answered.map(|t| t.destination.as_str().to_owned()),
        Some("https://example.com/unseen".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_or_reset_database_is_unavailable_not_an_error() {
    let settings = ServiceSettings::new(base());
    let Some(outage) = BehindAProxy::start("service::outage::reset", settings).await else {
        return;
    };
    let (store, acme) = (&outage.store, &outage.acme);
    (outage.service)
        .create_links(vec![new_link(acme, "a", "https://example.com/a")])
        .await
        .unwrap();

    outage.cut().await;
    fails_within_its_bound(store, acme).await;

    outage.proxy.set(Fault::None);
    let filter = Default::default();
    let listed = until_ok(|| store.list_links(acme.id, 10, None, &filter)).await;
    assert_eq!(listed.unwrap().len(), 1, "the pool reconnects by itself");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_during_a_long_outage_keep_their_details() {
    let settings = ServiceSettings::new(base());
    let Some(outage) = BehindAProxy::start("service::outage::details", settings).await else {
        return;
    };
    let (service, acme) = (&outage.service, &outage.acme);
    let created = service.create_links(vec![new_link(acme, "busy", "https://example.com/")]);
    created.await.unwrap();
    let busy = service.resolve("busy").await.unwrap().unwrap();

    outage.cut().await;
    let clicks = click_past_the_memory_bound(service, &busy);
    assert!(is_unavailable(service.flush_clicks().await));
    assert_eq!(
        service.clicks_pending(),
        clicks,
        "nothing written, nothing lost"
    );

    outage.proxy.set(Fault::None);
    until_ok(|| service.flush_clicks()).await.unwrap();
    assert_eq!(service.clicks_pending(), 0);
    every_click_kept_its_details(&outage.store, acme.id, &busy, clicks).await;
    service.shutdown().await.unwrap();
}
