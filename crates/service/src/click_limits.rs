//! `maxClicks`: how many clicks each capped link has had, so that the click past its limit is
//! refused at once, exactly, on one instance.
//!
//! A capped link's count is read once per process, when it is first clicked: pending clicks are
//! flushed first (flushes take turns), so the count read is every click so far. From then on
//! each click this instance counts is added here before it is recorded, atomically with the
//! check, so two concurrent clicks cannot both take the last one. On PostgreSQL, where other
//! instances count clicks too, theirs arrive with the database: after each flush (every
//! `FLUSH_INTERVAL`, with clicks to write or not), the counts of capped links are read again, and
//! what this instance has written is told apart from what others have. A link may so be passed,
//! across instances, by at most the clicks the others counted in one flush interval.
//!
//! A count holds for the rules it was read under. Clicks on a link without a cap take no place
//! here, so a cap removed and set again would start from a count that missed them: every change
//! of a link brings it new rules (a new `Arc`, on every instance, as its cached target is read
//! again), and the first capped click under new rules reads the count again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use shortlink_domain::RedirectRules;
use shortlink_storage::{CounterKey, StorageError};
use tokio::sync::OnceCell;

/// One capped link's clicks.
struct Count {
    /// The rules the count was read under (held, so that no other rules share their address).
    rules: Arc<RedirectRules>,
    /// Set once the link's count was read.
    loaded: OnceCell<()>,
    /// Clicks counted elsewhere: before this process read the count, and by other instances
    /// since (as of the last read).
    elsewhere: AtomicI64,
    /// Clicks this instance counted since it read the count.
    here: AtomicI64,
    /// Of `here`, those written to the database (changed by flushes, which take turns).
    written: AtomicI64,
}

impl Count {
    fn new(rules: &Arc<RedirectRules>) -> Self {
        Self {
            rules: rules.clone(),
            loaded: OnceCell::new(),
            elsewhere: AtomicI64::new(0),
            here: AtomicI64::new(0),
            written: AtomicI64::new(0),
        }
    }

    fn total(&self) -> i64 {
        self.elsewhere.load(Ordering::Acquire) + self.here.load(Ordering::Acquire)
    }
}

/// The counts of the capped links clicked since start.
#[derive(Default)]
pub(crate) struct ClickLimits {
    counts: Mutex<HashMap<CounterKey, Arc<Count>>>,
}

impl ClickLimits {
    /// The count of `key` under `rules`: a new one, not yet read, when the link's rules changed.
    fn count(&self, key: CounterKey, rules: &Arc<RedirectRules>) -> Arc<Count> {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        match counts.get(&key) {
            Some(count) if Arc::ptr_eq(&count.rules, rules) => count.clone(),
            _ => {
                let count = Arc::new(Count::new(rules));
                counts.insert(key, count.clone());
                count
            }
        }
    }

    /// The count of `key` under `rules`, read with `read` (which flushes first) the first time.
    async fn loaded<F, Fut>(
        &self,
        key: CounterKey,
        rules: &Arc<RedirectRules>,
        read: F,
    ) -> Result<Arc<Count>, StorageError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<i64, StorageError>>,
    {
        let count = self.count(key, rules);
        count
            .loaded
            .get_or_try_init(|| async {
                let total = read().await?;
                // Clicks a flush wrote for the key before the read are in it; `written` tells
                // apart only those counted here since.
                count.written.store(0, Ordering::Release);
                count.elsewhere.store(total, Ordering::Release);
                Ok::<_, StorageError>(())
            })
            .await?;
        Ok(count)
    }

    /// Whether `key`, whose rules are `rules`, has a click left under `max`; with `take`, takes
    /// it (atomically with the check: two concurrent clicks cannot both take the last one).
    pub(crate) async fn left<F, Fut>(
        &self,
        key: CounterKey,
        rules: &Arc<RedirectRules>,
        max: i64,
        take: bool,
        read: F,
    ) -> Result<bool, StorageError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<i64, StorageError>>,
    {
        let count = self.loaded(key, rules, read).await?;
        if !take {
            return Ok(count.total() < max);
        }
        let taken = count
            .here
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |here| {
                (count.elsewhere.load(Ordering::Acquire) + here < max).then_some(here + 1)
            });
        Ok(taken.is_ok())
    }

    /// A flush wrote `clicks` on each key: those of capped links were this instance's.
    pub(crate) fn written(&self, clicks: impl IntoIterator<Item = (CounterKey, u64)>) {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if counts.is_empty() {
            return;
        }
        for (key, n) in clicks {
            if let Some(count) = counts.get(&key) {
                count
                    .written
                    .fetch_add(i64::try_from(n).unwrap_or(i64::MAX), Ordering::AcqRel);
            }
        }
    }

    /// Whether any capped link was clicked (flushes then tell what they wrote).
    pub(crate) fn is_tracking(&self) -> bool {
        !self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The capped links whose counts were read.
    pub(crate) fn keys(&self) -> Vec<CounterKey> {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        (counts.iter())
            .filter(|(_, count)| count.loaded.initialized())
            .map(|(key, _)| *key)
            .collect()
    }

    /// The database's counts of capped links, read right after a flush: what is not this
    /// instance's written clicks was counted elsewhere. A link that is gone is forgotten.
    pub(crate) fn refreshed(&self, keys: &[CounterKey], stored: &HashMap<CounterKey, i64>) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys {
            match stored.get(key) {
                Some(total) => {
                    if let Some(count) = counts.get(key) {
                        let elsewhere = total - count.written.load(Ordering::Acquire);
                        count.elsewhere.store(elsewhere, Ordering::Release);
                    }
                }
                None => {
                    counts.remove(key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAKE: bool = true;

    async fn read(n: i64) -> Result<i64, StorageError> {
        Ok(n)
    }

    /// Whether `key` has a click left under `max`, taking it with `take`; a first read of its
    /// count finds `total`.
    async fn left(
        limits: &ClickLimits,
        key: CounterKey,
        rules: &Arc<RedirectRules>,
        max: i64,
        take: bool,
        total: i64,
    ) -> bool {
        limits
            .left(key, rules, max, take, || read(total))
            .await
            .unwrap()
    }

    /// A link's rules as a read of it brings them.
    fn rules() -> Arc<RedirectRules> {
        Arc::new(RedirectRules::default())
    }

    #[tokio::test]
    async fn the_click_past_the_limit_is_refused() {
        let limits = ClickLimits::default();
        let (key, rules) = (CounterKey(7), rules());
        // One click before the count was read, then two of the three are left.
        assert!(left(&limits, key, &rules, 3, false, 1).await);
        assert!(left(&limits, key, &rules, 3, TAKE, 99).await, "read once");
        assert!(left(&limits, key, &rules, 3, false, 99).await);
        assert!(left(&limits, key, &rules, 3, TAKE, 99).await);
        assert!(!left(&limits, key, &rules, 3, false, 99).await);
        assert!(!left(&limits, key, &rules, 3, TAKE, 99).await);
    }

    #[tokio::test]
    async fn clicks_counted_elsewhere_arrive_with_a_refresh() {
        let limits = ClickLimits::default();
        let (key, rules) = (CounterKey(1), rules());
        assert!(left(&limits, key, &rules, 10, TAKE, 0).await);
        assert!(left(&limits, key, &rules, 10, TAKE, 0).await);
        limits.written([(key, 2), (CounterKey(2), 5)]);
        // The database has our 2 and another instance's 7.
        limits.refreshed(&limits.keys(), &HashMap::from([(key, 9)]));
        assert!(left(&limits, key, &rules, 10, false, 0).await);
        assert!(left(&limits, key, &rules, 10, TAKE, 0).await);
        assert!(!left(&limits, key, &rules, 10, TAKE, 0).await);
        // Deleted: forgotten.
        limits.refreshed(&[key], &HashMap::new());
        assert!(limits.keys().is_empty());
    }

    #[tokio::test]
    async fn a_change_of_the_link_reads_its_count_again() {
        let limits = ClickLimits::default();
        let (key, capped) = (CounterKey(5), rules());
        assert!(left(&limits, key, &capped, 3, TAKE, 0).await);
        // The cap was removed (clicks then take no place here: 10 more were counted) and set
        // again: the link was read again, with new rules.
        let capped_again = rules();
        assert!(!left(&limits, key, &capped_again, 3, TAKE, 11).await);
        assert!(
            !left(&limits, key, &capped_again, 3, false, 0).await,
            "read once under the new rules"
        );
    }

    #[tokio::test]
    async fn clicks_written_before_the_count_was_read_are_not_told_apart_again() {
        let limits = ClickLimits::default();
        let (key, capped) = (CounterKey(6), rules());
        assert!(left(&limits, key, &capped, 4, TAKE, 0).await);
        // The link is read again (new rules) while a flush writes this instance's 2 clicks:
        // the count read has them.
        let again = rules();
        let read_during_a_flush = || async {
            limits.written([(key, 2)]);
            Ok(2)
        };
        let left_then = limits.left(key, &again, 4, false, read_during_a_flush);
        assert!(left_then.await.unwrap());
        // Another instance's 2 arrive with the database.
        limits.refreshed(&limits.keys(), &HashMap::from([(key, 4)]));
        assert!(!left(&limits, key, &again, 4, false, 0).await);
    }

    #[tokio::test]
    async fn concurrent_clicks_take_exactly_what_is_left() {
        let limits = Arc::new(ClickLimits::default());
        let rules = rules();
        let tasks: Vec<_> = (0..200)
            .map(|_| {
                let (limits, rules) = (limits.clone(), rules.clone());
                tokio::spawn(async move {
                    limits
                        .left(CounterKey(3), &rules, 50, TAKE, || read(0))
                        .await
                })
            })
            .collect();
        let mut taken = 0;
        for task in tasks {
            taken += usize::from(task.await.unwrap().unwrap());
        }
        assert_eq!(taken, 50);
    }
}
