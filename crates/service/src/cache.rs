//! The redirect's cache: short code → where to send the client, plus a bounded negative cache of
//! unknown codes so a scanner probing random paths does not reach the database for each.
//!
//! This process invalidates at once when the service changes or deletes a link (and clears the
//! negative entry when a code is created). Other instances on the same database see changes
//! within the entries' time to live; a shared invalidation channel can shorten that later
//! without changing callers.
//!
//! The caches are `quick_cache` (CLOCK-Pro eviction) rather than `moka`, which the HTTP crate
//! uses for its key cache: on the redirect, moka's bookkeeping (access-order deques,
//! pending-task draining) was about a tenth of the server's CPU, and a lookup here is most of
//! the route's own work.
//! The time to live is checked on read, against the time an entry was stored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quick_cache::sync::Cache;
use shortlink_storage::RedirectTarget;

/// What the cache knows of a code.
#[derive(Debug, Clone)]
pub(crate) enum Cached {
    /// A link.
    Found(Arc<RedirectTarget>),
    /// Known not to exist (recently).
    Absent,
    /// Not in the cache.
    Unknown,
}

/// A cache whose entries expire `ttl` after they were stored.
struct Expiring<V: Clone> {
    entries: Cache<Box<str>, (Instant, V)>,
    ttl: Duration,
}

impl<V: Clone> Expiring<V> {
    fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            entries: Cache::new(capacity),
            ttl,
        }
    }

    fn get(&self, code: &str) -> Option<V> {
        let (stored, value) = self.entries.get(code)?;
        if stored.elapsed() < self.ttl {
            Some(value)
        } else {
            self.entries.remove(code);
            None
        }
    }

    fn insert(&self, code: &str, value: V) {
        self.entries.insert(code.into(), (Instant::now(), value));
    }

    fn remove(&self, code: &str) {
        self.entries.remove(code);
    }
}

/// Bounded positive and negative caches.
pub(crate) struct LinkCache {
    found: Expiring<Arc<RedirectTarget>>,
    absent: Expiring<()>,
}

impl Default for LinkCache {
    fn default() -> Self {
        Self::new(
            100_000,
            100_000,
            Duration::from_secs(60),
            Duration::from_secs(5),
        )
    }
}

impl LinkCache {
    /// Caches of the given capacities (entries) and lifetimes.
    fn new(found: usize, absent: usize, found_ttl: Duration, absent_ttl: Duration) -> Self {
        Self {
            found: Expiring::new(found, found_ttl),
            absent: Expiring::new(absent, absent_ttl),
        }
    }

    /// Looks a code up.
    pub fn get(&self, code: &str) -> Cached {
        if let Some(target) = self.found.get(code) {
            Cached::Found(target)
        } else if self.absent.get(code).is_some() {
            Cached::Absent
        } else {
            Cached::Unknown
        }
    }

    /// Remembers a code's link.
    pub fn insert(&self, code: &str, target: Arc<RedirectTarget>) {
        self.found.insert(code, target);
    }

    /// Remembers that a code has no link.
    pub fn insert_absent(&self, code: &str) {
        self.absent.insert(code, ());
    }

    /// Forgets whatever is known of a code (it was created, changed or deleted).
    pub fn invalidate(&self, code: &str) {
        self.found.remove(code);
        self.absent.remove(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_last_their_time_to_live_and_no_longer() {
        let live = Expiring::new(10, Duration::from_secs(60));
        live.insert("a", 1);
        assert_eq!(live.get("a"), Some(1));
        live.remove("a");
        assert_eq!(live.get("a"), None);

        let expired = Expiring::new(10, Duration::ZERO);
        expired.insert("a", 1);
        assert_eq!(expired.get("a"), None);
    }
}
