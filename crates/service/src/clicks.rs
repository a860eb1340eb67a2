//! Exact click counting without a database write per click.
//!
//! The redirect records a click in memory (a short critical section: no I/O, no await). A
//! flusher writes everything recorded so far every [`FLUSH_INTERVAL`] (at once when
//! [`FLUSH_EARLY_AT`] clicks wait), and once more on graceful stop, in transactions of at most
//! [`FLUSH_PART`] clicks (three at a time on PostgreSQL). A failed write puts its part and those
//! after it back, so the next flush retries them: nothing counted is lost while the process
//! lives, and a part is either written whole or not at all, so nothing is counted twice. A flush
//! runs in a task of its own, whoever asked for it: a caller that stops waiting (a timeout, a
//! request whose client went away) does not cut it short between taking the clicks and writing
//! them.
//!
//! With analytics on (the default), every click keeps what the redirect saw of it (a [`Visit`]:
//! time, client address, referrer, user agent), and the flush turns each into its analytics
//! event (GeoIP, User-Agent families, visitor hash; `enrich.rs`), written in the same transaction
//! as the counters: a link's `clicks` and its number of events always agree. Memory stays
//! bounded: past [`MAX_PENDING_DETAILS`] waiting clicks (the database is slow or down), a click
//! is kept whole in a file instead (`spill.rs`), written after those in memory. With analytics
//! off, a click's details are kept only when its workspace has an endpoint subscribed to
//! `link.clicked`; each part of a flush re-reads which workspaces listen before it is written.
//!
//! Pending clicks are sharded by recording thread: each server worker keeps to a shard of its own,
//! so workers never wait for each other's lock (a contended lock puts a worker to sleep, and its
//! connections wait for it to be woken: that showed in the redirect's tail latency). Only the
//! flusher visits every shard.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::future::join_all;
use shortlink_domain::{BaseUrl, ClickInfo, EventKind, Timestamp, Visit, WorkspaceId};
use shortlink_storage::{
    ClickBatch, ClickEvent, CounterKey, LinkClicks, RedirectTarget, StorageError, Store,
};
use shortlink_webhooks::WakeHandle;
use tokio::sync::Notify;

use crate::click_limits::ClickLimits;
use crate::enrich::Enricher;
use crate::spill::{Spill, SpilledClick};
use shortlink_domain::{OUTAGE_LOGGED_EVERY, ThrottledLog};

/// How often recorded clicks are written; the API shows a click within this much (plus the
/// write itself).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(250);

/// Clicks waiting at which a flush starts at once, not at the next tick: a burst becomes several
/// short transactions, each visible at once.
pub const FLUSH_EARLY_AT: usize = 20_000;

/// Most clicks written in one transaction: a flush of more writes them in parts, each visible
/// when it commits, so a burst's clicks show part by part, and its enriched events and webhook
/// payloads are built for one part at a time, not for the whole burst at once.
pub const FLUSH_PART: usize = 2_000;

/// Clicks waiting in memory (a few hundred bytes each) past which a click is kept in a file
/// until the database takes it (`spill.rs`).
pub const MAX_PENDING_DETAILS: usize = 200_000;

/// More shards than a server has workers, so each worker has one to itself.
const SHARDS: usize = 16;

/// Most visits in one run of [`Visits`].
const RUN: usize = 512;

/// Clicks' details, in runs of at most [`RUN`]: merging two shards' entries of a link moves
/// runs, and a part of a flush takes whole runs, splitting at most one. A burst's details are
/// neither copied into one ever-growing buffer nor copied again into the flush's parts (both
/// showed as a third of the server's growth in a burst).
#[derive(Debug, Default)]
struct Visits(VecDeque<Vec<Visit>>);

impl Visits {
    fn push(&mut self, visit: Visit) {
        match self.0.back_mut() {
            Some(run) if run.len() < RUN => run.push(visit),
            _ => self.0.push_back(vec![visit]),
        }
    }

    fn len(&self) -> usize {
        self.0.iter().map(Vec::len).sum()
    }

    fn append(&mut self, other: Visits) {
        self.0.extend(other.0);
    }

    fn iter(&self) -> impl Iterator<Item = &Visit> {
        self.0.iter().flatten()
    }

    /// The first `n` visits (all of them if there are fewer), in order.
    fn split_front(&mut self, n: usize) -> Visits {
        let (mut front, mut left) = (VecDeque::new(), n);
        while left > 0 {
            let Some(run) = self.0.front_mut() else { break };
            if run.len() <= left {
                left -= run.len();
                front.extend(self.0.pop_front());
            } else {
                front.push_back(run.drain(..left).collect());
                left = 0;
            }
        }
        Visits(front)
    }
}

/// The clicks one link received since the last flush.
#[derive(Debug)]
struct PendingClicks {
    counter: CounterKey,
    workspace_id: WorkspaceId,
    count: u64,
    /// What the redirect saw of each click that kept its details.
    visits: Visits,
    /// The times of the clicks that kept only their time (the spill file could not take them).
    bare: Vec<Timestamp>,
}

impl PendingClicks {
    fn merge(&mut self, other: PendingClicks) {
        self.count += other.count;
        self.visits.append(other.visits);
        self.bare.extend(other.bare);
    }

    fn details(&self) -> usize {
        self.visits.len() + self.bare.len()
    }
}

type Pending = HashMap<CounterKey, PendingClicks>;

/// One shard, on a cache line of its own so that two workers' shards do not share one.
#[derive(Default)]
#[repr(align(128))]
struct Shard(Mutex<Pending>);

impl Shard {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The shard of the calling thread: threads are dealt shards in turn on their first click.
fn own_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

fn add(pending: &mut Pending, link: PendingClicks) {
    match pending.get_mut(&link.counter) {
        Some(entry) => entry.merge(link),
        None => {
            pending.insert(link.counter, link);
        }
    }
}

/// Clicks recorded and not yet written.
pub(crate) struct ClickCounter {
    shards: [Shard; SHARDS],
    /// Clicks with details recorded since the last flush took them (plus those put back).
    recorded: AtomicUsize,
    /// Clicks recorded past [`MAX_PENDING_DETAILS`].
    spill: Arc<Spill>,
    /// Whether every click becomes an analytics event.
    analytics: bool,
    enricher: Arc<Enricher>,
    /// Told when [`FLUSH_EARLY_AT`] clicks wait.
    flush_soon: Notify,
    /// With analytics off: workspaces with an endpoint subscribed to `link.clicked`; `None`
    /// until first read, when every click keeps its details.
    listening: RwLock<Option<HashSet<WorkspaceId>>>,
    /// Told the clicks written and the time taken by every flush that wrote some (metrics).
    flush_observer: std::sync::OnceLock<FlushObserver>,
    /// Capped links' clicks (`maxClicks`).
    limits: ClickLimits,
    /// Held by the flush in progress: flushes take turns, so a capped link's count is read
    /// between two of them.
    turn: tokio::sync::Mutex<()>,
    /// Where flushes run (the runtime that made the counter; without one, the caller's).
    runtime: Option<tokio::runtime::Handle>,
}

/// Told the clicks written and the time taken by every flush that writes some; see
/// [`crate::Service::observe_flushes`].
pub type FlushObserver = Arc<dyn Fn(u64, Duration) + Send + Sync>;

impl ClickCounter {
    /// A counter; with `analytics`, every click is written as an event, enriched by `enricher`.
    pub fn new(analytics: bool, enricher: Arc<Enricher>) -> Self {
        Self {
            shards: Default::default(),
            recorded: AtomicUsize::new(0),
            spill: Spill::new(),
            analytics,
            enricher,
            flush_soon: Notify::new(),
            listening: RwLock::new(None),
            flush_observer: std::sync::OnceLock::new(),
            limits: ClickLimits::default(),
            turn: tokio::sync::Mutex::new(()),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Runs `work` in a task of its own, in the flushes' turn, and waits for it: dropping the
    /// wait leaves the task to finish. A flush cut short after taking the clicks would lose
    /// them: they are put back only when a write fails.
    async fn in_turn<T, Work>(
        self: &Arc<Self>,
        work: impl FnOnce(Arc<ClickCounter>) -> Work,
    ) -> Result<T, StorageError>
    where
        T: Send + 'static,
        Work: Future<Output = Result<T, StorageError>> + Send + 'static,
    {
        let counter = self.clone();
        let work = work(self.clone());
        let task = async move {
            let _turn = counter.turn.lock().await;
            work.await
        };
        let handle = match &self.runtime {
            Some(runtime) => runtime.spawn(task),
            None => tokio::spawn(task),
        };
        handle.await.map_err(|e| {
            tracing::error!(error = %e, "a click flush stopped");
            StorageError::Unavailable("the click flush stopped".into())
        })?
    }

    /// Whether `link` has a click left under its `maxClicks` of `max`; with `take`, takes it
    /// (for the click recorded next). The first time, flushes and reads the link's count.
    pub async fn clicks_left(
        self: &Arc<Self>,
        (store, base, webhooks): (&Store, &BaseUrl, &WakeHandle),
        link: &RedirectTarget,
        max: i64,
        take: bool,
    ) -> Result<bool, StorageError> {
        // A link without rules has no cap.
        let Some(rules) = &link.rules else {
            return Ok(true);
        };
        let read = || self.count_now(store, base, webhooks, link.counter);
        self.limits.left(link.counter, rules, max, take, read).await
    }

    /// Every click of `key` so far: what is pending is written first, in this flush's turn.
    async fn count_now(
        self: &Arc<Self>,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
        key: CounterKey,
    ) -> Result<i64, StorageError> {
        let (store, base, webhooks) = (store.clone(), base.clone(), webhooks.clone());
        self.in_turn(|counter| async move {
            counter.flush_in_turn(&store, &base, &webhooks).await?;
            let counts = store.clicks_of(&[key]).await?;
            Ok(counts.get(&key).copied().unwrap_or(0))
        })
        .await
    }

    /// Records one click on `link`. `details` runs when the click keeps them (see the module).
    pub fn record(&self, link: &RedirectTarget, details: impl FnOnce() -> Visit) {
        let keep = self.analytics || self.is_listened_to(link.workspace_id);
        let waiting = if keep {
            self.recorded.fetch_add(1, Ordering::Relaxed)
        } else {
            0
        };
        if keep && waiting == FLUSH_EARLY_AT {
            self.flush_soon.notify_one();
        }
        let mut visit = keep.then(details);
        let mut bare = None;
        if waiting >= MAX_PENDING_DETAILS
            && let Some(visit) = visit.take()
        {
            // Counted in the file with its details, not here.
            match self.spill.push(link.counter, link.workspace_id, visit) {
                Ok(()) => return,
                Err(at) => bare = Some(at),
            }
        }
        let mut pending = self.shards[own_shard()].lock();
        let entry = pending
            .entry(link.counter)
            .or_insert_with(|| PendingClicks {
                counter: link.counter,
                workspace_id: link.workspace_id,
                count: 0,
                visits: Visits::default(),
                bare: Vec::new(),
            });
        entry.count += 1;
        if let Some(visit) = visit {
            entry.visits.push(visit);
        }
        entry.bare.extend(bare);
    }

    fn is_listened_to(&self, workspace: WorkspaceId) -> bool {
        let listening = self.listening.read().unwrap_or_else(|e| e.into_inner());
        listening
            .as_ref()
            .is_none_or(|set| set.contains(&workspace))
    }

    /// From now on, clicks in `workspace` keep their details (an endpoint subscribed to them).
    pub fn listen(&self, workspace: WorkspaceId) {
        let mut listening = self.listening.write().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = listening.as_mut() {
            set.insert(workspace);
        }
    }

    /// Re-reads which workspaces listen to clicks; on failure the last answer stands.
    async fn refresh_listening(&self, store: &Store) {
        match store.workspaces_subscribed(EventKind::LinkClicked).await {
            Ok(set) => *self.listening.write().unwrap_or_else(|e| e.into_inner()) = Some(set),
            Err(e) => tracing::warn!(error = %e, "could not read click subscriptions"),
        }
    }

    /// Everything recorded so far, one entry per link however many shards counted it (a batch
    /// must not name a counter twice), in counter order. The shards keep their capacity: a
    /// shard's map is not grown from nothing after every flush.
    fn take(&self) -> Vec<PendingClicks> {
        self.recorded.store(0, Ordering::Relaxed);
        let mut links = Vec::new();
        for shard in &self.shards {
            links.extend(shard.lock().drain().map(|(_, link)| link));
        }
        links.sort_unstable_by_key(|link| link.counter);
        links.dedup_by(|later, kept| {
            let same = later.counter == kept.counter;
            if same {
                kept.merge(std::mem::replace(
                    later,
                    empty(later.counter, later.workspace_id),
                ));
            }
            same
        });
        links
    }

    fn put_back(&self, links: Vec<PendingClicks>) {
        let details: usize = links.iter().map(PendingClicks::details).sum();
        self.recorded.fetch_add(details, Ordering::Relaxed);
        let mut pending = self.shards[own_shard()].lock();
        links.into_iter().for_each(|link| add(&mut pending, link));
    }

    /// Clicks recorded and not yet taken by a flush (takes every shard's lock: for a scrape,
    /// not for a request), and those in the spill file.
    pub fn pending(&self) -> u64 {
        let shard_total = |shard: &Shard| shard.lock().values().map(|l| l.count).sum::<u64>();
        self.shards.iter().map(shard_total).sum::<u64>() + self.spill.waiting()
    }

    /// Tells `observer` the clicks written and the time taken by every flush that writes some;
    /// the first observer set stays.
    pub fn observe_flushes(&self, observer: FlushObserver) {
        let _ = self.flush_observer.set(observer);
    }

    /// Writes everything recorded so far, then wakes the webhook worker for the `link.clicked`
    /// events written with it. On failure the clicks stay pending.
    pub async fn flush(
        self: &Arc<Self>,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
    ) -> Result<(), StorageError> {
        let (store, base, webhooks) = (store.clone(), base.clone(), webhooks.clone());
        self.in_turn(|counter| async move { counter.flush_in_turn(&store, &base, &webhooks).await })
            .await
    }

    /// [`ClickCounter::flush`], in the turn the caller holds.
    async fn flush_in_turn(
        &self,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
    ) -> Result<(), StorageError> {
        // Other instances count clicks on capped links too (PostgreSQL): what this one wrote is
        // told apart from theirs after every flush (see `click_limits.rs`).
        let shared_limits =
            self.limits.is_tracking() && store.kind() == shortlink_storage::DatabaseKind::Postgres;
        // PostgreSQL writes three parts at once, each on a connection of its own: while one
        // part's rows are being written, the next ones are being made or waiting on a commit.
        // (Back to back, a burst of 100,000 clicks showed about 30 % sooner than with two,
        // and two about twice as soon as one.) SQLite has one writer.
        let at_once = match store.kind() {
            shortlink_storage::DatabaseKind::Postgres => 3,
            shortlink_storage::DatabaseKind::Sqlite => 1,
        };
        let mut parts = in_parts(self.take(), FLUSH_PART).into_iter();
        loop {
            let these: Vec<_> = parts.by_ref().take(at_once).collect();
            if these.is_empty() {
                break;
            }
            let written = these
                .into_iter()
                .map(|part| self.write_part(store, base, webhooks, shared_limits, part));
            let mut failed = None;
            for result in join_all(written).await {
                if let Err((pending, e)) = result {
                    let (back, _) = failed.get_or_insert((Vec::new(), e));
                    back.extend(pending);
                }
            }
            if let Some((mut back, e)) = failed {
                back.extend(parts.flatten());
                self.put_back(back);
                return Err(e);
            }
        }
        self.write_spilled(store, base, webhooks, shared_limits)
            .await?;
        if shared_limits {
            self.refresh_limits(store).await;
        }
        // Written: a fold that fails must not fail the flush (its clicks would be put back and
        // written twice); the journal keeps them, and the next flush tries again.
        if let Err(e) = store.fold_clicks_when_due().await {
            tracing::warn!(error = %e, "could not fold the click journal; will retry");
        }
        Ok(())
    }

    /// Writes the clicks kept in the spill file, [`FLUSH_PART`] at a time, after those in memory;
    /// a part that fails is read again by the next flush.
    async fn write_spilled(
        &self,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
        shared_limits: bool,
    ) -> Result<(), StorageError> {
        let unreadable = |e: &dyn std::fmt::Display| {
            tracing::warn!(error = %e, "could not read the spill file; will retry");
            StorageError::Unavailable("the spill file could not be read".into())
        };
        loop {
            let spill = self.spill.clone();
            let part = tokio::task::spawn_blocking(move || spill.read_part(FLUSH_PART))
                .await
                .map_err(|e| unreadable(&e))?
                .map_err(|e| unreadable(&e))?;
            if part.is_empty() {
                return Ok(());
            }
            self.write_part(store, base, webhooks, shared_limits, by_link(part))
                .await
                .map_err(|(_, e)| e)?;
            self.spill.written();
        }
    }

    /// Reads the capped links' counts again, right after a flush (every flush, written or not):
    /// other instances' clicks arrive. On failure the last counts stand.
    async fn refresh_limits(&self, store: &Store) {
        let keys = self.limits.keys();
        match store.clicks_of(&keys).await {
            Ok(stored) => self.limits.refreshed(&keys, &stored),
            Err(e) => tracing::warn!(error = %e, "could not read the counts of capped links"),
        }
    }

    /// Writes one part of a flush, then tells whoever waits for its clicks; `pending` back with
    /// the error on failure.
    async fn write_part(
        &self,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
        shared_limits: bool,
        pending: Vec<PendingClicks>,
    ) -> Result<(), (Vec<PendingClicks>, StorageError)> {
        let started = std::time::Instant::now();
        let counts: Option<Vec<(CounterKey, u64)>> =
            shared_limits.then(|| pending.iter().map(|p| (p.counter, p.count)).collect());
        let clicks = self.write(store, base, pending).await?;
        if let Some(counts) = counts {
            self.limits.written(counts);
        }
        webhooks.wake();
        if let Some(observe) = self.flush_observer.get() {
            observe(clicks, started.elapsed());
        }
        Ok(())
    }

    /// Enriches and writes `pending` in one transaction; the clicks written, or `pending` back
    /// with the error.
    async fn write(
        &self,
        store: &Store,
        base: &BaseUrl,
        pending: Vec<PendingClicks>,
    ) -> Result<u64, (Vec<PendingClicks>, StorageError)> {
        if !self.analytics {
            self.refresh_listening(store).await;
        } else if let Err(e) = self.enricher.ready(store).await {
            return Err((pending, e));
        }
        // Parsing and lookups take a few microseconds a click: off the async workers.
        let (enricher, events) = (self.enricher.clone(), self.analytics);
        let (pending, batch) = tokio::task::spawn_blocking(move || {
            let batch = batch(&enricher, &pending, events);
            (pending, batch)
        })
        .await
        // Enrichment catches its own panics (`enriched`): this is the runtime shutting down.
        .map_err(|e| {
            tracing::error!(error = %e, "enriching clicks failed");
            (
                Vec::new(),
                StorageError::Unavailable("enriching clicks failed".into()),
            )
        })?;
        let clicks = batch.links.iter().map(|l| l.count).sum();
        match store.record_clicks(Arc::new(batch), base).await {
            Ok(()) => Ok(clicks),
            Err(e) => Err((pending, e)),
        }
    }

    /// Flushes every [`FLUSH_INTERVAL`] until `stop` completes, then flushes what is left
    /// ([`ClickCounter::drain`]). Returns whether everything was written.
    pub async fn run(
        self: &Arc<Self>,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
        stop: impl std::future::Future<Output = ()>,
        drain_deadline: impl FnOnce() -> tokio::time::Instant,
    ) -> bool {
        let mut stop = std::pin::pin!(stop);
        // While the database is down, a line every 10 s rather than at every flush.
        let failures = ThrottledLog::new(OUTAGE_LOGGED_EVERY);
        let mut tick = tokio::time::interval(FLUSH_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = self.flush_soon.notified() => {}
                () = &mut stop => break,
            }
            if let Err(e) = self.flush(store, base, webhooks).await
                && let Some(repeated) = failures.occurred(std::time::Instant::now())
            {
                tracing::warn!(error = %e, retries = repeated.times, "click flush failed; will retry");
            }
        }
        self.drain(store, base, webhooks, drain_deadline()).await
    }

    /// Flushes what is left, retrying until `deadline` if the database is briefly unavailable.
    /// Returns whether everything was written.
    pub async fn drain(
        self: &Arc<Self>,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
        deadline: tokio::time::Instant,
    ) -> bool {
        loop {
            match self.flush(store, base, webhooks).await {
                Ok(()) => return true,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(error = %e, "final click flush failed; retrying");
                    tokio::time::sleep(FLUSH_INTERVAL).await;
                }
                Err(e) => {
                    let lost = self.pending();
                    tracing::error!(error = %e, lost, "clicks could not be written before stopping");
                    return false;
                }
            }
        }
    }
}

/// `links` in parts of at most `most` clicks with details each (a link's clicks without details
/// weigh one in all: they are one counter row), in order; a link with more is split, so the same
/// link may appear in consecutive parts, never twice in one.
fn in_parts(links: Vec<PendingClicks>, most: usize) -> Vec<Vec<PendingClicks>> {
    let most = most.max(1);
    let (mut parts, mut part, mut room) = (Vec::new(), Vec::new(), most);
    for mut link in links {
        // `room` is at least one here: a part is closed as soon as it is full.
        while link.details() > room {
            let mut head = empty(link.counter, link.workspace_id);
            let visits = room.min(link.visits.len());
            head.visits = link.visits.split_front(visits);
            head.bare = link.bare.drain(..room - visits).collect();
            head.count = room as u64;
            link.count -= head.count;
            part.push(head);
            parts.push(std::mem::take(&mut part));
            room = most;
        }
        room = room.saturating_sub(link.details().max(1));
        part.push(link);
        if room == 0 {
            parts.push(std::mem::take(&mut part));
            room = most;
        }
    }
    if !part.is_empty() {
        parts.push(part);
    }
    parts
}

/// Spilled clicks as entries per link, in counter order (as [`ClickCounter::take`] gives them).
fn by_link(clicks: Vec<SpilledClick>) -> Vec<PendingClicks> {
    let mut links = BTreeMap::new();
    for click in clicks {
        let link = (links.entry(click.counter))
            .or_insert_with(|| empty(click.counter, click.workspace_id));
        link.count += 1;
        link.visits.push(click.visit);
    }
    links.into_values().collect()
}

/// An entry with no clicks.
fn empty(counter: CounterKey, workspace_id: WorkspaceId) -> PendingClicks {
    PendingClicks {
        counter,
        workspace_id,
        count: 0,
        visits: Visits::default(),
        bare: Vec::new(),
    }
}

/// The batch to write for `pending`: each click's events, enriched.
fn batch(enricher: &Enricher, pending: &[PendingClicks], events: bool) -> ClickBatch {
    let links = pending
        .iter()
        .map(|link| LinkClicks {
            counter: link.counter,
            workspace_id: link.workspace_id,
            count: link.count,
            clicks: link
                .visits
                .iter()
                .map(|visit| enriched(visit.timestamp, || enricher.event(visit)))
                .chain(link.bare.iter().map(|&at| ClickEvent {
                    click: ClickInfo::bare(at),
                    visitor: 0,
                }))
                .collect(),
        })
        .collect();
    ClickBatch { links, events }
}

/// A visit's event, made by `event`; a visit whose enrichment panics (a parser's bug, met on
/// some odd header) is still a click, recorded as a bare event of its time: were its part lost
/// instead, counts would go missing, and were it kept for a retry, it would fail every flush.
fn enriched(at: Timestamp, event: impl FnOnce() -> ClickEvent) -> ClickEvent {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(event)).unwrap_or_else(|_| {
        tracing::error!("enriching a click failed; it is recorded without its details");
        ClickEvent {
            click: ClickInfo::bare(at),
            visitor: 0,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_domain::Destination;

    #[test]
    fn a_click_whose_enrichment_panics_is_recorded_bare() {
        let at = Timestamp::from_unix_millis(1_700_000_000_000);
        let event = enriched(at, || panic!("a parser's bug"));
        assert_eq!(event.click, ClickInfo::bare(at));
        assert_eq!(event.visitor, 0);
    }

    fn click() -> Visit {
        Visit {
            timestamp: Timestamp::now(),
            address: None,
            referrer: None,
            user_agent: None,
        }
    }

    fn target(key: i64) -> RedirectTarget {
        RedirectTarget {
            counter: CounterKey(key),
            workspace_id: WorkspaceId::generate(),
            destination: Destination::from_trusted("https://example.com/".into()),
            rules: None,
        }
    }

    fn counter(analytics: bool) -> ClickCounter {
        ClickCounter::new(analytics, Arc::new(Enricher::new(None)))
    }

    fn count(links: &[PendingClicks], id: CounterKey) -> Option<u64> {
        links.iter().find(|l| l.counter == id).map(|l| l.count)
    }

    #[test]
    fn counts_merge_per_link_and_survive_a_put_back() {
        let counter = counter(true);
        let (a, b) = (target(1), target(2));
        for _ in 0..3 {
            counter.record(&a, click);
        }
        counter.record(&b, click);
        let taken = counter.take();
        assert_eq!(
            (count(&taken, a.counter), count(&taken, b.counter)),
            (Some(3), Some(1))
        );

        counter.record(&a, click);
        counter.put_back(taken);
        let again = counter.take();
        assert_eq!(
            (count(&again, a.counter), count(&again, b.counter)),
            (Some(4), Some(1))
        );
        assert_eq!(again.iter().map(PendingClicks::details).sum::<usize>(), 5);
        assert!(counter.take().is_empty());
    }

    #[test]
    fn clicks_from_many_threads_make_one_entry_per_link() {
        let counter = counter(true);
        let (a, b) = (target(1), target(2));
        std::thread::scope(|s| {
            for _ in 0..SHARDS + 3 {
                s.spawn(|| {
                    for _ in 0..100 {
                        counter.record(&a, click);
                    }
                    counter.record(&b, click);
                });
            }
        });
        let taken = counter.take();
        let counts: Vec<_> = taken.iter().map(|l| (l.counter, l.count)).collect();
        let threads = SHARDS as u64 + 3;
        assert_eq!(
            counts,
            vec![(a.counter, 100 * threads), (b.counter, threads)]
        );
        // Every click keeps its details with analytics on.
        assert!(taken.iter().all(|l| l.details() as u64 == l.count));
    }

    #[test]
    fn without_analytics_details_are_kept_only_where_an_endpoint_listens() {
        let counter = counter(false);
        let (a, b) = (target(1), target(2));
        *counter.listening.write().unwrap_or_else(|e| e.into_inner()) =
            Some(HashSet::from([a.workspace_id]));
        counter.record(&a, click);
        counter.record(&b, click);
        counter.listen(b.workspace_id);
        counter.record(&b, click);
        let taken = counter.take();
        let seen: Vec<_> = taken.iter().map(|l| (l.count, l.details())).collect();
        assert_eq!(seen, vec![(1, 1), (2, 1)]);
    }

    #[test]
    fn a_flush_is_written_in_parts_that_split_a_busy_link_and_lose_no_click() {
        let links = |details: &[(i64, usize, usize, u64)]| -> Vec<PendingClicks> {
            (details.iter())
                .map(|&(key, visits, bare, count)| PendingClicks {
                    counter: CounterKey(key),
                    workspace_id: WorkspaceId::generate(),
                    count,
                    visits: Visits((0..visits).map(|_| vec![click()]).collect()),
                    bare: vec![Timestamp::now(); bare],
                })
                .collect()
        };
        // (counter, visits, bare times, count): link 3 counts 4 clicks without details.
        let pending = links(&[(1, 3, 0, 3), (2, 6, 2, 8), (3, 1, 0, 5), (4, 0, 0, 2)]);
        let parts = in_parts(pending, 4);
        let shape: Vec<Vec<(i64, usize, usize, u64)>> = (parts.iter())
            .map(|part| {
                (part.iter())
                    .map(|l| (l.counter.0, l.visits.len(), l.bare.len(), l.count))
                    .collect()
            })
            .collect();
        assert_eq!(
            shape,
            [
                vec![(1, 3, 0, 3), (2, 1, 0, 1)],
                vec![(2, 4, 0, 4)],
                vec![(2, 1, 2, 3), (3, 1, 0, 5)],
                vec![(4, 0, 0, 2)],
            ]
        );
        for part in &parts {
            let counters: HashSet<CounterKey> = part.iter().map(|l| l.counter).collect();
            assert_eq!(counters.len(), part.len(), "a counter once per part");
        }
    }

    #[test]
    fn visits_split_at_any_point_keep_their_order_and_copy_at_most_one_run() {
        let at = |i: usize| Timestamp::from_unix_millis(i as i64);
        let mut visits = Visits::default();
        for i in 0..RUN * 2 + 100 {
            visits.push(Visit {
                timestamp: at(i),
                ..click()
            });
        }
        assert_eq!(
            visits.0.iter().map(Vec::len).collect::<Vec<_>>(),
            [RUN, RUN, 100]
        );
        let front = visits.split_front(RUN + 10);
        assert_eq!(front.0.iter().map(Vec::len).collect::<Vec<_>>(), [RUN, 10]);
        assert_eq!(
            visits.0.iter().map(Vec::len).collect::<Vec<_>>(),
            [RUN - 10, 100]
        );
        let times = |v: &Visits| v.iter().map(|v| v.timestamp).collect::<Vec<_>>();
        assert_eq!(times(&front), (0..RUN + 10).map(at).collect::<Vec<_>>());
        assert_eq!(
            times(&visits),
            (RUN + 10..RUN * 2 + 100).map(at).collect::<Vec<_>>()
        );
        assert_eq!(visits.split_front(10_000).len(), RUN + 90);
        assert_eq!(visits.len(), 0);
    }

    #[test]
    fn a_click_that_kept_only_its_time_is_still_an_event() {
        let mut link = empty(CounterKey(1), WorkspaceId::generate());
        link.visits.push(click());
        link.bare = vec![Timestamp::from_unix_millis(7); 2];
        link.count = 3;
        let batch = batch(&Enricher::new(None), &[link], true);
        let times: Vec<_> = (batch.links[0].clicks.iter())
            .map(|c| c.click.timestamp.unix_millis())
            .collect();
        assert_eq!((times.len(), &times[1..]), (3, &[7, 7][..]));
    }

    #[test]
    fn past_the_bound_a_click_goes_to_the_spill_file_whole() {
        let counter = counter(true);
        let (a, b) = (target(1), target(2));
        let agent = |i: usize| Visit {
            user_agent: Some(format!("agent {i}").into()),
            ..click()
        };
        for i in 0..MAX_PENDING_DETAILS {
            counter.record(&a, || agent(i));
        }
        for (i, link) in [&a, &b, &a].into_iter().enumerate() {
            counter.record(link, || agent(MAX_PENDING_DETAILS + i));
        }
        assert_eq!(counter.pending(), MAX_PENDING_DETAILS as u64 + 3);
        let taken = counter.take();
        assert_eq!(
            (taken.len(), taken[0].count, taken[0].visits.len()),
            (1, MAX_PENDING_DETAILS as u64, MAX_PENDING_DETAILS)
        );
        assert_eq!(counter.pending(), 3, "the spilled clicks still wait");

        let spilled = by_link(counter.spill.read_part(FLUSH_PART).unwrap());
        let seen: Vec<_> = (spilled.iter())
            .map(|l| {
                let agents = l.visits.iter().map(|v| v.user_agent.clone().unwrap());
                (l.counter, l.count, agents.collect::<Vec<_>>())
            })
            .collect();
        let after = |i: usize| Arc::<str>::from(format!("agent {}", MAX_PENDING_DETAILS + i));
        assert_eq!(
            seen,
            [
                (a.counter, 2, vec![after(0), after(2)]),
                (b.counter, 1, vec![after(1)])
            ]
        );
        counter.spill.written();
        assert_eq!(counter.pending(), 0);
        // The budget starts again once a flush took the clicks.
        counter.record(&a, click);
        assert_eq!(counter.take()[0].visits.len(), 1);
    }
}
