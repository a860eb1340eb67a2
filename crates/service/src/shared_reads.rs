//! Concurrent reads of one code's link share one database read, and so one target: a link's
//! first clicks, all at once on a cold cache, would each read it, and each hold rules of their
//! own, while a capped link's count holds for the rules it was read under (`click_limits.rs`):
//! every read would have started the count again, and let clicks past the limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use shortlink_storage::{RedirectTarget, StorageError};
use tokio::sync::OnceCell;

/// A read's answer, shared by every lookup that waited for it.
pub(crate) type Read = Result<Option<Arc<RedirectTarget>>, Arc<StorageError>>;

/// The reads under way, by code.
#[derive(Default)]
pub(crate) struct SharedReads {
    under_way: Mutex<HashMap<Box<str>, Arc<OnceCell<Read>>>>,
}

impl SharedReads {
    /// What `read` answers for `code`, or what the read of `code` already under way answers.
    /// A lookup that goes away during its read hands it to one of those waiting.
    pub(crate) async fn read<F: Future<Output = Read>>(
        &self,
        code: &str,
        read: impl FnOnce() -> F,
    ) -> Read {
        let shared = self.lock().entry(code.into()).or_default().clone();
        let answer = shared.get_or_init(read).await.clone();
        let mut under_way = self.lock();
        if under_way.get(code).is_some_and(|s| Arc::ptr_eq(s, &shared)) {
            under_way.remove(code);
        }
        answer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Arc<OnceCell<Read>>>> {
        self.under_way.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_under_way_together_are_one() {
        let reads = Arc::new(SharedReads::default());
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let lookups: Vec<_> = (0..10)
            .map(|_| {
                let (reads, started, mut released) =
                    (reads.clone(), started.clone(), released.clone());
                tokio::spawn(async move {
                    reads
                        .read("code", || async move {
                            started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            let _ = released.wait_for(|r| *r).await;
                            Ok(None)
                        })
                        .await
                })
            })
            .collect();
        tokio::task::yield_now().await;
        release.send(true).unwrap();
        for lookup in lookups {
            assert!(matches!(lookup.await.unwrap(), Ok(None)));
        }
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(reads.lock().is_empty(), "nothing is left under way");
    }
}
