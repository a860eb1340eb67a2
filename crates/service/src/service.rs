//! [`Service`]: the one entry point of the use cases, and [`ServiceSettings`]. Its methods are
//! here but for the redirect's decisions (`route`, `unlock`: `routing.rs`) and the time series
//! (`time_series`: `series.rs`).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shortlink_analytics::GeoIp;
use shortlink_domain::{
    BaseUrl, EventKind, Link, LinkPatch, LinkRef, Slug, Timestamp, Visit, Webhook, WorkspaceId,
};
use shortlink_storage::{
    CreateOutcome, IdempotencyClaim, LinkCompletion, LinkUpdate, NewLink, RedirectTarget,
    StorageError, Store, StoredResponse,
};
use shortlink_webhooks::{AttemptObserver, DeliveryWorker, WakeHandle, WorkerConfig};
use tokio::sync::watch;

use crate::cache::{Cached, LinkCache};
use crate::clicks::{ClickCounter, FlushObserver};
use crate::create::LinkCreator;
use crate::enrich::Enricher;
use crate::outage::{Ask, Outage};
use crate::passwords::WrongAttempts;
use crate::shared_reads::{Read, SharedReads};
use crate::{Clock, ServiceError};

/// How long a stop keeps retrying to write the last clicks by default.
pub const CLICK_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What a [`Service`] is built with, besides its store.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// The public base of short URLs: its domain is the one codes are resolved on and links
    /// created on, and event payloads carry short URLs under it.
    pub base_url: BaseUrl,
    /// How the webhook delivery worker runs. Its `allow_private` also decides whether
    /// endpoints on loopback and private addresses may be registered (`shortlink-http` reads it
    /// through [`Service::webhook_settings`]).
    pub webhooks: WorkerConfig,
    /// How long a stop keeps retrying to write the last clicks while the database is
    /// unavailable ([`CLICK_DRAIN_TIMEOUT`] by default).
    pub click_drain_timeout: Duration,
    /// How long a cached link answers redirects before the database is asked again, where the
    /// store does not answer from memory ([`crate::FOUND_TTL`] by default).
    pub redirect_cache_ttl: Duration,
    /// Whether every click is recorded as an analytics event (`--analytics`, on by default).
    pub analytics: bool,
    /// Where clicks' countries and cities come from (`--geoip-db`); none by default.
    pub geoip: Option<Arc<GeoIp>>,
    /// How long events are kept (`--analytics-retention-days`, [`ANALYTICS_RETENTION`] by
    /// default); `None` keeps them all.
    pub analytics_retention: Option<Duration>,
    /// How long webhook deliveries are kept once they ended, delivered or failed, with their
    /// attempts (`--webhook-delivery-retention-days`, [`DELIVERY_RETENTION`] by default); `None`
    /// keeps them all. Pending ones are kept until they end.
    pub delivery_retention: Option<Duration>,
    /// What time it is for links' expiry (the system's clock; tests move their own).
    pub clock: Clock,
}

impl ServiceSettings {
    /// The defaults, for short URLs under `base_url`.
    pub fn new(base_url: BaseUrl) -> Self {
        Self {
            base_url,
            webhooks: WorkerConfig::default(),
            click_drain_timeout: CLICK_DRAIN_TIMEOUT,
            redirect_cache_ttl: crate::FOUND_TTL,
            analytics: true,
            geoip: None,
            analytics_retention: Some(ANALYTICS_RETENTION),
            delivery_retention: Some(DELIVERY_RETENTION),
            clock: Clock::system(),
        }
    }
}

/// shortlink's use cases over a [`Store`]: resolve a code (with a cache where the store needs
/// one), count clicks exactly (in memory, written in batches), create links (group commit),
/// deliver webhooks. Cheap to clone: clones share everything.
///
/// Its background tasks (the click flusher, the webhook worker) run in [`Service::run`]; clicks
/// recorded and links created work without them, and [`Service::shutdown`] writes whatever is
/// pending and leaves the database complete. Call it before the last clone is dropped: clicks
/// recorded and not yet written are lost with the service (said in the log at `error` when it
/// happens). Its writes are not cut short by a caller that stops waiting for them
/// ([`Service::flush_clicks`] or [`Service::shutdown`] under a timeout): they finish in tasks
/// of their own.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    settings: ServiceSettings,
    /// Code → redirect target, with negative entries, where the store does not answer from
    /// memory.
    cache: LinkCache,
    /// Whether the redirect found the database down (stale-if-error).
    outage: Outage,
    /// The reads of codes' links under way, which concurrent lookups share.
    reads: SharedReads,
    /// Told when keys changed on any instance (see `propagation.rs`).
    key_observer: std::sync::OnceLock<crate::KeyObserver>,
    clicks: Arc<ClickCounter>,
    /// GeoIP and User-Agent families, for clicks' events and links' targeting.
    enricher: Arc<Enricher>,
    /// Wrong password attempts, per link and per address.
    wrong_attempts: WrongAttempts,
    creator: LinkCreator,
    /// Woken after events were written to the outbox, so delivery starts at once.
    wake: WakeHandle,
    /// Taken by [`Service::run`].
    worker: Mutex<Option<DeliveryWorker<Store>>>,
    /// Until when stopping may retry writing clicks: set when the first drain begins, so the
    /// drains of [`Service::run`] and [`Service::shutdown`] share one timeout.
    drain_deadline: std::sync::OnceLock<tokio::time::Instant>,
}

impl Drop for Inner {
    /// Nothing can be written here (a write awaits): an embedder who forgot
    /// [`Service::shutdown`] is told what was lost.
    fn drop(&mut self) {
        let lost = self.clicks.pending();
        if lost > 0 {
            tracing::error!(
                lost,
                "the service was dropped with clicks not written: call Service::shutdown first"
            );
        }
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("store", &self.inner.store)
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// The service over `store` (opened with [`Store::open`]). Starts the link writer on the
    /// current tokio runtime: called outside one, it fails with [`ServiceError::NoRuntime`].
    pub fn new(store: Store, settings: ServiceSettings) -> Result<Self, ServiceError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| ServiceError::NoRuntime)?;
        let wake = WakeHandle::new();
        let worker = DeliveryWorker::new(store.clone(), settings.webhooks.clone())?
            .with_wake_handle(wake.clone());
        let creator = LinkCreator::spawn(
            &runtime,
            store.clone(),
            settings.base_url.clone(),
            wake.clone(),
        );
        let enricher = Arc::new(Enricher::new(settings.geoip.clone()));
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                cache: LinkCache::new(settings.redirect_cache_ttl),
                clicks: Arc::new(ClickCounter::new(settings.analytics, enricher.clone())),
                enricher,
                wrong_attempts: WrongAttempts::default(),
                settings,
                outage: Outage::default(),
                reads: SharedReads::default(),
                key_observer: std::sync::OnceLock::new(),
                drain_deadline: std::sync::OnceLock::new(),

                creator,
                wake,
                worker: Mutex::new(Some(worker)),
            }),
        })
    }

    /// The store, for what is not a use case of its own here (workspaces, keys, reads).
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The public base of short URLs.
    pub fn base_url(&self) -> &BaseUrl {
        &self.inner.settings.base_url
    }

    /// The short domain (`host[:port]`) codes are resolved and links created on.
    pub fn domain(&self) -> &str {
        self.inner.settings.base_url.domain()
    }

    /// How the webhook delivery worker runs ([`ServiceSettings::webhooks`]). Its
    /// `allow_private` is also whether an endpoint on a loopback or private address may be
    /// registered: one setting, so no endpoint is accepted whose deliveries would be refused.
    pub fn webhook_settings(&self) -> &WorkerConfig {
        &self.inner.settings.webhooks
    }

    /// The link a redirect for `code` follows. A store that holds every link in memory
    /// answers exactly, at once, with no cache in front; otherwise the cache answers (found, or
    /// known absent), and on a miss the store reads once and the cache remembers the answer. A
    /// code that could never be a slug never reaches the database, nor the negative cache.
    /// While the database is unavailable, a link seen before answers from memory (see
    /// `outage.rs`).
    pub async fn resolve(&self, code: &str) -> Result<Option<Arc<RedirectTarget>>, ServiceError> {
        let (store, cache) = (&self.inner.store, &self.inner.cache);
        if store.resolves_in_memory() {
            return Ok(store.resolve(self.domain(), code).await?.map(Arc::new));
        }
        match cache.get(code) {
            Cached::Found(target) => return Ok(Some(target)),
            Cached::Absent => return Ok(None),
            Cached::Unknown => {}
        }
        if !Slug::could_be(code) {
            return Ok(None);
        }
        match self.inner.outage.ask() {
            Ask::Database => match self.look_up(code).await {
                Ok(found) => Ok(found),
                Err(e) if e.is_unavailable() => self.stale(code, ServiceError::Storage(e)),
                Err(e) => Err(ServiceError::Storage(e)),
            },
            Ask::Memory { probe } => {
                if probe {
                    self.probe(code);
                }
                self.stale(code, unavailable().into())
            }
        }
    }

    /// Reads `code`'s link from the database (with any lookup of it already reading it:
    /// `shared_reads.rs`) and caches the answer.
    async fn look_up(&self, code: &str) -> Read {
        let read = async || self.read_link(code).await.map_err(Arc::new);
        self.inner.reads.read(code, read).await
    }

    /// Reads `code`'s link from the database and caches the answer; tells the outage whether
    /// the database answered.
    async fn read_link(&self, code: &str) -> Result<Option<Arc<RedirectTarget>>, StorageError> {
        let (cache, outage) = (&self.inner.cache, &self.inner.outage);
        let began = cache.read_begins(code);
        let found = self
            .inner
            .store
            .resolve(self.domain(), code)
            .await
            .inspect_err(|e| {
                if e.is_unavailable() {
                    outage.went_down();
                }
            })?;
        outage.came_up();
        Ok(match found {
            Some(target) => {
                let target = Arc::new(target);
                cache.insert(code, target.clone(), began);
                Some(target)
            }
            None => {
                cache.insert_absent(code, began);
                None
            }
        })
    }

    /// Looks `code` up in the background during an outage, while lookups answer from memory:
    /// the database's answer ends the outage (and caches the link afresh).
    fn probe(&self, code: &str) {
        let service = self.clone();
        let code = code.to_owned();
        tokio::spawn(async move {
            // The outage has the answer; the code's visitor was answered from memory.
            let _ = service.look_up(&code).await;
        });
    }

    /// The link `code` had when the database last answered, or `error` (stale-if-error).
    fn stale(
        &self,
        code: &str,
        error: ServiceError,
    ) -> Result<Option<Arc<RedirectTarget>>, ServiceError> {
        let target = self.inner.cache.stale(code).ok_or(error)?;
        self.inner.outage.answered_stale();
        Ok(Some(target))
    }

    /// Counts one click on `link` (from [`Service::resolve`]), in memory: no await, and no I/O
    /// but a buffered append once [`crate::MAX_PENDING_DETAILS`] clicks wait (the database is
    /// slow or down; `spill.rs`). `details` runs when the click keeps them: always with
    /// analytics on; with it off, when the link's workspace has an endpoint subscribed to
    /// `link.clicked`.
    /// The click is written within [`crate::FLUSH_INTERVAL`] while [`Service::run`] runs, and
    /// by [`Service::shutdown`] at the latest.
    pub fn record_click(&self, link: &RedirectTarget, details: impl FnOnce() -> Visit) {
        self.inner.clicks.record(link, details);
    }

    /// Clicks recorded and not yet taken by a flush (visits every shard's lock: for a metrics
    /// scrape, not for a request).
    pub fn clicks_pending(&self) -> u64 {
        self.inner.clicks.pending()
    }

    /// Tells `observer` the clicks written and the time taken by every transaction of a flush
    /// that writes some (at most [`crate::FLUSH_PART`] clicks each; metrics); the first observer
    /// set stays.
    pub fn observe_flushes(&self, observer: FlushObserver) {
        self.inner.clicks.observe_flushes(observer);
    }

    /// Tells `observer` how each webhook attempt ended (metrics). Set it before
    /// [`Service::run`], which starts the worker with it: the last observer set before then
    /// stays, and calls after are ignored.
    pub fn observe_deliveries(&self, observer: AttemptObserver) {
        let mut worker = self.inner.worker.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = worker.take() {
            *worker = Some(w.with_observer(observer));
        }
    }

    /// Registers a webhook endpoint, in a transaction that also completes an idempotency claim
    /// with the request's answer when given one; `false`, registering nothing, when its
    /// workspace has [`MAX_WEBHOOKS`](shortlink_domain::MAX_WEBHOOKS) already. An endpoint
    /// subscribed to `link.clicked` makes the workspace's clicks keep their details from now
    /// on, not from the next flush's look at the endpoints.
    pub async fn create_webhook(
        &self,
        hook: &Webhook,
        completion: Option<(IdempotencyClaim, StoredResponse)>,
    ) -> Result<bool, ServiceError> {
        let created = self
            .inner
            .store
            .create_webhook_completing(hook, completion)
            .await?;
        if created && hook.events.contains(&EventKind::LinkClicked) {
            self.inner.clicks.listen(hook.workspace_id);
        }
        Ok(created)
    }

    /// Writes the clicks recorded so far now (the flusher of [`Service::run`] does every
    /// [`crate::FLUSH_INTERVAL`]). On failure they stay pending.
    pub async fn flush_clicks(&self) -> Result<(), ServiceError> {
        let inner = &self.inner;
        let base = &inner.settings.base_url;
        Ok(inner.clicks.flush(&inner.store, base, &inner.wake).await?)
    }

    /// Creates links in one transaction shared with concurrent creations (group commit, see
    /// `create.rs`), each request succeeding or failing on its own; outcomes in input order.
    /// The cache forgets what it knew of the new codes. Each link's `domain` is the caller's to
    /// set: [`Service::resolve`] answers for the service's own domain (its base URL's) only,
    /// and the links of a workspace that does not exist are refused by the store.
    pub async fn create_links(
        &self,
        links: Vec<NewLink>,
    ) -> Result<Vec<CreateOutcome>, ServiceError> {
        self.create_links_completing(links, None).await
    }

    /// [`Service::create_links`], whose transaction also completes an idempotency claim with
    /// the request's answer (see `shortlink_storage::LinkCompletion`).
    pub async fn create_links_completing(
        &self,
        links: Vec<NewLink>,
        completion: Option<LinkCompletion>,
    ) -> Result<Vec<CreateOutcome>, ServiceError> {
        let outcomes = self.inner.creator.create(links, completion).await?;
        for outcome in &outcomes {
            if let CreateOutcome::Created(link) = outcome {
                self.inner.cache.invalidate(link.short_code.as_str());
            }
        }
        Ok(outcomes)
    }

    /// Changes one of the workspace's links as `patch` says; `None` when it is not the
    /// workspace's. Redirects follow at once, and a code given up answers not found at once.
    pub async fn update_link(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
        patch: &LinkPatch,
    ) -> Result<Option<LinkUpdate>, ServiceError> {
        let store = &self.inner.store;
        let changed = store
            .update_link(workspace, link, self.domain(), patch, self.base_url())
            .await?;
        if let Some(LinkUpdate::Changed { before, after, .. }) = &changed {
            self.forget(Some(before));
            self.forget(Some(after));
        }
        Ok(changed)
    }

    /// Deletes one of the workspace's links and returns it, with every click this instance
    /// counted before the deletion; `None` when it is not the workspace's. Redirects answer not
    /// found at once.
    ///
    /// The clicks recorded so far are written first: a deleted link's clicks are dropped by the
    /// flush after it, so without this the clicks of its last moments (up to a flush interval)
    /// were missing from its `clicks`, its analytics and the `link.clicked` events. Clicks still
    /// in another instance's memory (PostgreSQL) are not waited for.
    pub async fn delete_link(
        &self,
        workspace: WorkspaceId,
        link: &LinkRef,
    ) -> Result<Option<Link>, ServiceError> {
        self.flush_clicks().await?;
        let deleted = self
            .inner
            .store
            .delete_link(workspace, link, self.domain(), self.base_url())
            .await?;
        self.forget(deleted.as_ref());
        Ok(deleted)
    }

    /// Tells `observer` whenever keys or workspaces change on any instance (PostgreSQL), so a
    /// server can drop the keys it cached; the first observer set stays.
    pub fn observe_key_changes(&self, observer: crate::KeyObserver) {
        let _ = self.inner.key_observer.set(observer);
    }

    /// The time the service's rules go by.
    pub fn now(&self) -> Timestamp {
        self.inner.settings.clock.now()
    }

    pub(crate) fn click_counter(&self) -> &Arc<ClickCounter> {
        &self.inner.clicks
    }

    /// What writing clicks needs besides them.
    pub(crate) fn click_context(&self) -> (&Store, &BaseUrl, &WakeHandle) {
        let inner = &self.inner;
        (&inner.store, &inner.settings.base_url, &inner.wake)
    }

    pub(crate) fn enricher(&self) -> &Enricher {
        &self.inner.enricher
    }

    pub(crate) fn wrong_attempts(&self) -> &WrongAttempts {
        &self.inner.wrong_attempts
    }

    fn forget(&self, link: Option<&Link>) {
        if let Some(link) = link {
            self.inner.cache.invalidate(link.short_code.as_str());
        }
    }

    /// Runs the background tasks until `stop` completes: the click flusher (a write every
    /// [`crate::FLUSH_INTERVAL`], and the click journal's folds when due), the webhook
    /// delivery worker, the follower of other instances' changes (PostgreSQL) and the upkeep
    /// (`housekeeping`: expired idempotency keys, event partitions, retention of events and
    /// deliveries, analytics rollups). Then writes the clicks still pending (retrying while the database is
    /// briefly unavailable, up to [`ServiceSettings::click_drain_timeout`]) and lets webhook
    /// attempts in flight finish. Runs once per service ([`ServiceError::AlreadyRunning`]).
    /// Follow it with [`Service::shutdown`].
    pub async fn run(
        &self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServiceError> {
        let worker = self
            .inner
            .worker
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or(ServiceError::AlreadyRunning)?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let stopped = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let worker = tokio::spawn(worker.run(stopped(stop_rx.clone())));
        let following = {
            let service = self.clone();
            let stop = stopped(stop_rx.clone());
            tokio::spawn(async move {
                let inner = &service.inner;
                let keys = || {
                    if let Some(observe) = inner.key_observer.get() {
                        observe();
                    }
                };
                crate::propagation::follow_changes(
                    inner.store.clone(),
                    service.domain().to_owned(),
                    &inner.cache,
                    keys,
                    stop,
                )
                .await;
            })
        };
        let housekeeping = tokio::spawn(housekeeping(
            self.inner.store.clone(),
            self.inner.settings.analytics_retention,
            self.inner.settings.delivery_retention,
            stopped(stop_rx.clone()),
        ));
        let flusher = {
            let service = self.clone();
            let stop = stopped(stop_rx);
            tokio::spawn(async move {
                let inner = &service.inner;
                let base = &inner.settings.base_url;
                let deadline = || service.drain_deadline();
                (inner.clicks)
                    .run(&inner.store, base, &inner.wake, stop, deadline)
                    .await
            })
        };
        stop.await;
        let _ = stop_tx.send(true);
        let written = flusher.await.unwrap_or(false);
        let _ = worker.await;
        let _ = housekeeping.await;
        let _ = following.await;
        if written {
            Ok(())
        } else {
            Err(ServiceError::ClicksNotWritten)
        }
    }

    /// Until when stopping retries writing clicks ([`ServiceSettings::click_drain_timeout`] from
    /// the first attempt).
    fn drain_deadline(&self) -> tokio::time::Instant {
        let timeout = self.inner.settings.click_drain_timeout;
        *self
            .inner
            .drain_deadline
            .get_or_init(|| tokio::time::Instant::now() + timeout)
    }

    /// Stops for good, once nothing records clicks or creates links any more (after
    /// [`Service::run`] returned, if it ran): writes the clicks still pending, then ends the
    /// store's use ([`Store::shutdown`]: on SQLite the click journal and the recent codes are
    /// folded into the file). The counts are then exact in the database.
    pub async fn shutdown(&self) -> Result<(), ServiceError> {
        let inner = &self.inner;
        let base = &inner.settings.base_url;
        let written = inner
            .clicks
            .drain(&inner.store, base, &inner.wake, self.drain_deadline())
            .await;
        if let Err(e) = inner.store.shutdown().await {
            // Nothing is lost: the journal and `links` hold everything, and the next start
            // folds them.
            tracing::warn!(error = %e, "could not fold clicks or short codes before stopping");
        }
        if written {
            Ok(())
        } else {
            Err(ServiceError::ClicksNotWritten)
        }
    }
}

/// How long click events are kept by default.
pub const ANALYTICS_RETENTION: Duration = Duration::from_secs(400 * 24 * 60 * 60);

/// How long ended webhook deliveries are kept by default: a week of a busy endpoint's history
/// (every click a delivery, for a `link.clicked` subscriber) to look into, without the table
/// growing with every click for ever.
pub const DELIVERY_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// How often the background upkeep runs: expired idempotency keys, the events' partitions,
/// retention (events and ended deliveries) and the analytics rollups.
const HOUSEKEEPING_EVERY: Duration = Duration::from_secs(10 * 60);

/// Events deleted per transaction by retention (SQLite; PostgreSQL drops whole partitions), and
/// ended deliveries of each state.
const RETENTION_BATCH: i64 = 5_000;

/// Runs the upkeep at once and every [`HOUSEKEEPING_EVERY`] until `stop`: deletes idempotency
/// keys past their lifetime (the claim ignores them already; this keeps their table small),
/// makes the coming months' event partitions, deletes events past `retention` and ended
/// deliveries past `delivery_retention`, and (from the second round on) rolls up the analytics
/// of the days that ended.
async fn housekeeping(
    store: Store,
    retention: Option<Duration>,
    delivery_retention: Option<Duration>,
    stop: impl Future<Output = ()>,
) {
    let upkeep = async {
        let mut every = tokio::time::interval(HOUSEKEEPING_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut starting = true;
        loop {
            every.tick().await;
            match store.forget_idempotency_keys().await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(keys = n, "forgot expired idempotency keys"),
                Err(e) => tracing::warn!(error = %e, "could not delete expired idempotency keys"),
            }
            let now = Timestamp::now();
            let keep_after = retention.map(|r| now.minus(r));
            match store
                .maintain_events(now, keep_after, RETENTION_BATCH)
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::info!(events = n, "deleted click events past retention"),
                Err(e) => tracing::warn!(error = %e, "could not keep the click events in shape"),
            }
            if let Some(kept) = delivery_retention {
                match store
                    .forget_deliveries(now.minus(kept), RETENTION_BATCH)
                    .await
                {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(
                        deliveries = n,
                        "deleted ended webhook deliveries past retention"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not delete ended webhook deliveries")
                    }
                }
            }
            // Not in the round at start: a server just started (or upgraded, with a history to
            // roll up) gives its first minutes to its clients, and queries are exact without
            // rollups, only slower.
            if !starting {
                match store.roll_up_analytics(now, keep_after).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(days = n, "rolled up the analytics of past days"),
                    Err(e) => tracing::warn!(error = %e, "could not roll up the analytics"),
                }
            }
            starting = false;
        }
    };
    tokio::select! {
        () = upkeep => {}
        () = stop => {}
    }
}

/// What a lookup that skipped the database answers for a code it has not seen.
fn unavailable() -> StorageError {
    StorageError::Unavailable("the database was unavailable a moment ago".into())
}

#[cfg(test)]
mod tests {
    use shortlink_domain::{BaseUrl, Destination, Timestamp, Visit, WorkspaceId};
    use shortlink_storage::testing::TestDatabase;
    use shortlink_storage::{CounterKey, RedirectTarget};

    use super::{Service, ServiceSettings};

    #[tokio::test]
    async fn a_service_dropped_with_clicks_not_written_says_how_many() {
        let db = TestDatabase::sqlite();
        let base = BaseUrl::parse("https://sho.rt").expect("a base URL");
        let service = Service::new(db.store().await, ServiceSettings::new(base)).expect("made");
        let link = RedirectTarget {
            counter: CounterKey(1),
            workspace_id: WorkspaceId::generate(),
            destination: Destination::from_trusted("https://example.com/".into()),
            rules: None,
        };
        let visit = || Visit {
            timestamp: Timestamp::now(),
            address: None,
            referrer: None,
            user_agent: None,
        };
        for _ in 0..3 {
            service.record_click(&link, visit);
        }
        let text = crate::test_log::logged(|| drop(service));
        assert!(
            text.contains("ERROR") && text.contains("lost=3") && text.contains("Service::shutdown"),
            "{text}"
        );
    }
}
