//! Exact click counting without a database write per click.
//!
//! The redirect records a click in memory (a short, uncontended critical section: no I/O, no
//! await). A flusher writes everything recorded so far in one transaction every
//! [`FLUSH_INTERVAL`], and once more on graceful stop. A failed write puts the batch back, so the
//! next flush retries it: nothing counted is lost while the process lives, and a batch is either
//! written whole or not at all, so nothing is counted twice.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use shortlink_domain::{BaseUrl, ClickInfo};
use shortlink_storage::{ClickBatch, CounterKey, LinkClicks, Store};
use shortlink_webhooks::WakeHandle;

use crate::cache::RedirectTarget;

/// How often recorded clicks are written; the API shows a click within this much (plus the
/// write itself).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(250);

/// Clicks kept with their details (time, referrer, user agent) between two flushes. Past this,
/// clicks are still counted exactly, but their `link.clicked` events carry only the flush time:
/// memory stays bounded under any load.
pub const MAX_DETAILED_CLICKS: usize = 50_000;

#[derive(Default)]
struct Pending {
    links: HashMap<CounterKey, LinkClicks>,
    detailed: usize,
}

/// Clicks recorded and not yet written.
#[derive(Default)]
pub struct ClickCounter {
    pending: Mutex<Pending>,
}

impl ClickCounter {
    /// Records one click on `link`. `details` runs only while the detail budget lasts.
    pub fn record(&self, link: &RedirectTarget, details: impl FnOnce() -> ClickInfo) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let keep_details = pending.detailed < MAX_DETAILED_CLICKS;
        pending.detailed += usize::from(keep_details);
        let entry = pending
            .links
            .entry(link.counter)
            .or_insert_with(|| LinkClicks {
                counter: link.counter,
                link_id: link.link_id,
                workspace_id: link.workspace_id,
                count: 0,
                clicks: Vec::new(),
            });
        entry.count += 1;
        if keep_details {
            entry.clicks.push(details());
        }
    }

    fn take(&self) -> ClickBatch {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let taken = std::mem::take(&mut *pending);
        ClickBatch {
            links: taken.links.into_values().collect(),
        }
    }

    fn put_back(&self, batch: ClickBatch) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for link in batch.links {
            pending.detailed += link.clicks.len();
            match pending.links.get_mut(&link.counter) {
                Some(entry) => {
                    entry.count += link.count;
                    entry.clicks.extend(link.clicks);
                }
                None => {
                    pending.links.insert(link.counter, link);
                }
            }
        }
    }

    /// Writes everything recorded so far, then wakes the webhook worker for the `link.clicked`
    /// events written with it. On failure the clicks stay pending.
    pub async fn flush(
        &self,
        store: &Store,
        base: &BaseUrl,
        webhooks: &WakeHandle,
    ) -> Result<(), shortlink_storage::StorageError> {
        let batch = self.take();
        if batch.links.is_empty() {
            return Ok(());
        }
        match store.record_clicks(&batch, base).await {
            Ok(()) => {
                webhooks.wake();
                Ok(())
            }
            Err(e) => {
                self.put_back(batch);
                Err(e)
            }
        }
    }

    /// Flushes every [`FLUSH_INTERVAL`] until `stop` completes, then flushes what is left,
    /// retrying for up to `drain_timeout` if the database is briefly unavailable. Returns
    /// whether everything was written.
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
    use shortlink_domain::{Destination, LinkId, Timestamp, WorkspaceId};

    fn click() -> ClickInfo {
        ClickInfo {
            timestamp: Timestamp::now(),
            referrer: None,
            user_agent: None,
        }
    }

    #[test]
    fn counts_merge_per_link_and_survive_a_put_back() {
        let counter = ClickCounter::default();
        let workspace_id = WorkspaceId::generate();
        let target = |key| RedirectTarget {
            counter: CounterKey(key),
            link_id: LinkId::generate(),
            workspace_id,
            destination: Destination::from_trusted("https://example.com/".into()),
        };
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
}
