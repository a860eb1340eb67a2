//! Exact click counting without a database write per click.
//!
//! The redirect records a click in memory (a short critical section: no I/O, no await). A
//! flusher writes everything recorded so far in one transaction every [`FLUSH_INTERVAL`], and
//! once more on graceful stop. A failed write puts the batch back, so the next flush retries it:
//! nothing counted is lost while the process lives, and a batch is either written whole or not
//! at all, so nothing is counted twice.
//!
//! A click's details (time, referrer, user agent) are kept only when its workspace has an endpoint
//! subscribed to `link.clicked`: they exist for those events alone, and under load they were most
//! of the memory the server gained and a sixth of its CPU per redirect. Each flush that has clicks to write
//! re-reads which workspaces listen (an idle server reads nothing), so an endpoint created or
//! disabled anywhere counts within a [`FLUSH_INTERVAL`] of clicks; one created through this
//! server counts at once.
//!
//! Pending clicks are sharded by recording thread: each server worker keeps to a shard of its own,
//! so workers never wait for each other's lock (a contended lock puts a worker to sleep, and its
//! connections wait for it to be woken: that showed in the redirect's tail latency). Only the
//! flusher visits every shard.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use shortlink_domain::{BaseUrl, ClickInfo, EventKind, WorkspaceId};
use shortlink_storage::{ClickBatch, CounterKey, LinkClicks, RedirectTarget, Store};
use shortlink_webhooks::WakeHandle;

/// How often recorded clicks are written; the API shows a click within this much (plus the
/// write itself).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(250);

/// Clicks kept with their details (time, referrer, user agent) between two flushes. Past this,
/// clicks are still counted exactly, but their `link.clicked` events carry only the flush time:
/// memory stays bounded under any load.
pub const MAX_DETAILED_CLICKS: usize = 50_000;

/// More shards than a server has workers, so each worker has one to itself.
const SHARDS: usize = 16;

type Pending = HashMap<CounterKey, LinkClicks>;

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

fn add(pending: &mut Pending, link: LinkClicks) {
    match pending.get_mut(&link.counter) {
        Some(entry) => {
            entry.count += link.count;
            entry.clicks.extend(link.clicks);
        }
        None => {
            pending.insert(link.counter, link);
        }
    }
}

/// Clicks recorded and not yet written.
#[derive(Default)]
pub(crate) struct ClickCounter {
    shards: [Shard; SHARDS],
    /// Detailed clicks recorded since the last flush took them (plus details put back): past
    /// [`MAX_DETAILED_CLICKS`], clicks keep no details.
    recorded: AtomicUsize,
    /// Workspaces with an endpoint subscribed to `link.clicked`; `None` until first read, when
    /// every click keeps its details.
    listening: RwLock<Option<HashSet<WorkspaceId>>>,
    /// Told the clicks written and the time taken by every flush that wrote some (metrics).
    flush_observer: std::sync::OnceLock<FlushObserver>,
}

/// See [`ClickCounter::observe_flushes`].
pub type FlushObserver = Arc<dyn Fn(u64, Duration) + Send + Sync>;

impl ClickCounter {
    /// Records one click on `link`. `details` runs only when the link's workspace listens to
    /// clicks, and while the detail budget lasts.
    pub fn record(&self, link: &RedirectTarget, details: impl FnOnce() -> ClickInfo) {
        let keep_details = self.is_listened_to(link.workspace_id)
            && self.recorded.fetch_add(1, Ordering::Relaxed) < MAX_DETAILED_CLICKS;
        let mut pending = self.shards[own_shard()].lock();
        let entry = pending.entry(link.counter).or_insert_with(|| LinkClicks {
            counter: link.counter,
            workspace_id: link.workspace_id,
            count: 0,
            clicks: Vec::new(),
        });
        entry.count += 1;
        if keep_details {
            entry.clicks.push(details());
        }
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
    fn take(&self) -> ClickBatch {
        self.recorded.store(0, Ordering::Relaxed);
        let mut links = Vec::new();
        for shard in &self.shards {
            links.extend(shard.lock().drain().map(|(_, link)| link));
        }
        links.sort_unstable_by_key(|link| link.counter);
        links.dedup_by(|later, kept| {
            let same = later.counter == kept.counter;
            if same {
                kept.count += later.count;
                kept.clicks.append(&mut later.clicks);
            }
            same
        });
        ClickBatch { links }
    }

    fn put_back(&self, batch: ClickBatch) {
        let detailed: usize = batch.links.iter().map(|l| l.clicks.len()).sum();
        self.recorded.fetch_add(detailed, Ordering::Relaxed);
        let mut pending = self.shards[own_shard()].lock();
        batch
            .links
            .into_iter()
            .for_each(|link| add(&mut pending, link));
    }

    /// Clicks recorded and not yet taken by a flush (takes every shard's lock: for a scrape,
    /// not for a request).
    pub fn pending(&self) -> u64 {
        let shard_total = |shard: &Shard| shard.lock().values().map(|l| l.count).sum::<u64>();
        self.shards.iter().map(shard_total).sum()
    }

    /// Tells `observer` the clicks written and the time taken by every flush that writes some;
    /// the first observer set stays.
    pub fn observe_flushes(&self, observer: FlushObserver) {
        let _ = self.flush_observer.set(observer);
    }

    /// Writes everything recorded so far, then wakes the webhook worker for the `link.clicked`
    /// events written with it. On failure the clicks stay pending.
    pub async fn flush(
        &self,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
    ) -> Result<(), shortlink_storage::StorageError> {
        let started = std::time::Instant::now();
        let batch = Arc::new(self.take());
        if !batch.links.is_empty() {
            self.refresh_listening(store).await;
            if let Err(e) = store.record_clicks(batch.clone(), base).await {
                self.put_back(Arc::unwrap_or_clone(batch));
                return Err(e);
            }
            webhooks.wake();
            if let Some(observe) = self.flush_observer.get() {
                observe(batch.links.iter().map(|l| l.count).sum(), started.elapsed());
            }
        }
        // Written: a fold that fails must not fail the flush (its clicks would be put back and
        // written twice); the journal keeps them, and the next flush tries again.
        if let Err(e) = store.fold_clicks_when_due().await {
            tracing::warn!(error = %e, "could not fold the click journal; will retry");
        }
        Ok(())
    }

    /// Flushes every [`FLUSH_INTERVAL`] until `stop` completes, then flushes what is left
    /// ([`ClickCounter::drain`]). Returns whether everything was written.
    pub async fn run(
        &self,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
        stop: impl std::future::Future<Output = ()>,
        drain_timeout: Duration,
    ) -> bool {
        let mut stop = std::pin::pin!(stop);
        let mut tick = tokio::time::interval(FLUSH_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Err(e) = self.flush(store, base, webhooks).await {
                        tracing::warn!(error = %e, "click flush failed; will retry");
                    }
                }
                () = &mut stop => break,
            }
        }
        self.drain(store, base, webhooks, drain_timeout).await
    }

    /// Flushes what is left, retrying for up to `drain_timeout` if the database is briefly
    /// unavailable. Returns whether everything was written.
    pub async fn drain(
        &self,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
        drain_timeout: Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + drain_timeout;
        loop {
            match self.flush(store, base, webhooks).await {
                Ok(()) => return true,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(error = %e, "final click flush failed; retrying");
                    tokio::time::sleep(FLUSH_INTERVAL).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, "clicks could not be written before stopping");
                    return false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_domain::{Destination, Timestamp};

    fn click() -> ClickInfo {
        ClickInfo {
            timestamp: Timestamp::now(),
            referrer: None,
            user_agent: None,
        }
    }

    fn target(key: i64) -> RedirectTarget {
        RedirectTarget {
            counter: CounterKey(key),
            workspace_id: WorkspaceId::generate(),
            destination: Destination::from_trusted("https://example.com/".into()),
        }
    }

    #[test]
    fn counts_merge_per_link_and_survive_a_put_back() {
        let counter = ClickCounter::default();
        let (a, b) = (target(1), target(2));
        for _ in 0..3 {
            counter.record(&a, click);
        }
        counter.record(&b, click);
        let batch = counter.take();
        let count = |batch: &ClickBatch, id| {
            batch
                .links
                .iter()
                .find(|l| l.counter == id)
                .map(|l| l.count)
        };
        assert_eq!(
            (count(&batch, a.counter), count(&batch, b.counter)),
            (Some(3), Some(1))
        );

        counter.record(&a, click);
        counter.put_back(batch);
        let again = counter.take();
        assert_eq!(
            (count(&again, a.counter), count(&again, b.counter)),
            (Some(4), Some(1))
        );
        assert_eq!(again.links.iter().map(|l| l.clicks.len()).sum::<usize>(), 5);
        assert!(counter.take().links.is_empty());
    }

    #[test]
    fn clicks_from_many_threads_make_one_entry_per_link() {
        let counter = ClickCounter::default();
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
        let mut batch = counter.take();
        batch.links.sort_by_key(|l| l.counter);
        let counts: Vec<_> = batch.links.iter().map(|l| (l.counter, l.count)).collect();
        let threads = SHARDS as u64 + 3;
        assert_eq!(
            counts,
            vec![(a.counter, 100 * threads), (b.counter, threads)]
        );
    }

    #[test]
    fn details_are_kept_only_where_an_endpoint_listens() {
        let counter = ClickCounter::default();
        let (a, b) = (target(1), target(2));
        *counter.listening.write().unwrap_or_else(|e| e.into_inner()) =
            Some(HashSet::from([a.workspace_id]));
        counter.record(&a, click);
        counter.record(&b, click);
        counter.listen(b.workspace_id);
        counter.record(&b, click);
        let mut batch = counter.take();
        batch.links.sort_by_key(|l| l.counter);
        let seen: Vec<_> = batch
            .links
            .iter()
            .map(|l| (l.count, l.clicks.len()))
            .collect();
        assert_eq!(seen, vec![(1, 1), (2, 1)]);
    }

    #[test]
    fn details_are_kept_for_a_bounded_number_of_clicks() {
        let counter = ClickCounter::default();
        let a = target(1);
        for _ in 0..MAX_DETAILED_CLICKS + 10 {
            counter.record(&a, click);
        }
        let batch = counter.take();
        assert_eq!(batch.links[0].count, MAX_DETAILED_CLICKS as u64 + 10);
        assert_eq!(batch.links[0].clicks.len(), MAX_DETAILED_CLICKS);
        // The budget starts again once a flush took the clicks.
        counter.record(&a, click);
        assert_eq!(counter.take().links[0].clicks.len(), 1);
    }
}
