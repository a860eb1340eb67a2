//! The redirect's cache: short code → where to send the client, plus a bounded negative cache of
//! unknown codes so a scanner probing random paths does not reach the database for each.
//!
//! This process invalidates at once when the service changes or deletes a link (and clears the
//! negative entry when a code is created). Other instances on the same database learn of changes
//! through `propagation.rs` (PostgreSQL `LISTEN/NOTIFY`), and while that channel is lost, within
//! the entries' shorter time to live.
//!
//! The caches are `quick_cache` (CLOCK-Pro eviction) rather than `moka`, which the HTTP crate
//! uses for its key cache: on the redirect, moka's bookkeeping (access-order deques,
//! pending-task draining) was about a tenth of the server's CPU, and a lookup here is most of
//! the route's own work.
//! The time to live is checked on read, against the time an entry was stored. A link's entry
//! outlives its time to live by [`STALE_FOR`]: not to answer from (a lookup past the time to live
//! asks the database), but to answer from when the database does not (stale-if-error, see
//! `outage.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// How long past its time to live a link's entry may still answer while the database does not.
pub const STALE_FOR: Duration = Duration::from_secs(10 * 60);

/// A cache whose entries expire `ttl` after they were stored, and are kept `keep` (at least
/// `ttl`) for [`Expiring::get_stale`].
struct Expiring<V: Clone> {
    entries: Cache<Box<str>, (Instant, V)>,
    ttl: Duration,
    keep: Duration,
    /// While set, entries answer for at most [`SHORT_TTL`] (the change channel is down).
    short: AtomicBool,
}

/// How long an entry answers while changes made elsewhere cannot be heard.
pub const SHORT_TTL: Duration = Duration::from_secs(1);

impl<V: Clone> Expiring<V> {
    fn new(capacity: usize, ttl: Duration, keep: Duration) -> Self {
        Self {
            entries: Cache::new(capacity),
            ttl,
            keep: keep.max(ttl),
            short: AtomicBool::new(false),
        }
    }

    fn get(&self, code: &str) -> Option<V> {
        let (stored, value) = self.entries.get(code)?;
        let age = stored.elapsed();
        let ttl = match self.short.load(Ordering::Relaxed) {
            true => self.ttl.min(SHORT_TTL),
            false => self.ttl,
        };
        if age < ttl {
            return Some(value);
        }
        if age >= self.keep {
            self.entries.remove(code);
        }
        None
    }

    /// The entry, fresh or not, while it is kept.
    fn get_stale(&self, code: &str) -> Option<V> {
        let (stored, value) = self.entries.get(code)?;
        (stored.elapsed() < self.keep).then_some(value)
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
    /// Counts invalidations, in stripes by code: an answer read from the database is remembered
    /// only if none of its stripe came since the read began (it may predate the change that
    /// invalidated). Striped so that a busy stream of creations does not keep every other code
    /// out of the cache; a stripe shared by chance costs a miss.
    invalidations: [AtomicU64; STRIPES],
}

const STRIPES: usize = 64;

/// The stripe of `code`'s invalidations.
fn stripe(code: &str) -> usize {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(code);
    usize::try_from(hash % STRIPES as u64).unwrap_or(0)
}

/// When a read of a code's link began, as [`LinkCache::read_begins`] tells it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadBegan(u64);

/// How long a link's entry answers without asking the database.
pub const FOUND_TTL: Duration = Duration::from_secs(60);

/// How long an unknown code's entry answers "not found".
const ABSENT_TTL: Duration = Duration::from_secs(5);

impl LinkCache {
    /// Caches of 100,000 entries each; a link's entry answers for `found_ttl`.
    pub fn new(found_ttl: Duration) -> Self {
        Self {
            found: Expiring::new(100_000, found_ttl, found_ttl + STALE_FOR),
            absent: Expiring::new(100_000, ABSENT_TTL, ABSENT_TTL),
            invalidations: std::array::from_fn(|_| AtomicU64::new(0)),
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

    /// A code's link as last seen, up to [`STALE_FOR`] past its time to live: for when the
    /// database does not answer.
    pub fn stale(&self, code: &str) -> Option<Arc<RedirectTarget>> {
        self.found.get_stale(code)
    }

    /// Call before reading `code`'s link from the database, to remember what it answers.
    pub fn read_begins(&self, code: &str) -> ReadBegan {
        ReadBegan(self.invalidations[stripe(code)].load(Ordering::SeqCst))
    }

    /// Remembers a code's link, read since `began`.
    pub fn insert(&self, code: &str, target: Arc<RedirectTarget>, began: ReadBegan) {
        self.remember(&self.found, code, target, began);
    }

    /// Remembers that a code has no link, read since `began`.
    pub fn insert_absent(&self, code: &str, began: ReadBegan) {
        self.remember(&self.absent, code, (), began);
    }

    /// Stores an answer unless an invalidation came since its read began. One that comes
    /// between the check and the store is seen by the check after it, which takes the entry
    /// out again; one later than that removes the entry itself.
    fn remember<V: Clone>(&self, cache: &Expiring<V>, code: &str, value: V, began: ReadBegan) {
        let invalidations = &self.invalidations[stripe(code)];
        let unchanged = || invalidations.load(Ordering::SeqCst) == began.0;
        if !unchanged() {
            return;
        }
        cache.insert(code, value);
        if !unchanged() {
            cache.remove(code);
        }
    }

    /// Forgets whatever is known of a code (it was created, changed or deleted).
    pub fn invalidate(&self, code: &str) {
        self.invalidations[stripe(code)].fetch_add(1, Ordering::SeqCst);
        self.found.remove(code);
        self.absent.remove(code);
    }

    /// While `short`, entries answer for at most [`SHORT_TTL`]: changes made on other instances
    /// cannot be heard.
    pub fn set_short(&self, short: bool) {
        self.found.short.store(short, Ordering::Relaxed);
        self.absent.short.store(short, Ordering::Relaxed);
    }

    /// Forgets everything (what was cached while changes could not be heard may be stale).
    pub fn clear(&self) {
        for invalidations in &self.invalidations {
            invalidations.fetch_add(1, Ordering::SeqCst);
        }
        self.found.entries.clear();
        self.absent.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_last_their_time_to_live_and_no_longer() {
        let live = Expiring::new(10, Duration::from_secs(60), Duration::ZERO);
        live.insert("a", 1);
        assert_eq!(live.get("a"), Some(1));
        live.remove("a");
        assert_eq!(live.get("a"), None);

        let expired = Expiring::new(10, Duration::ZERO, Duration::ZERO);
        expired.insert("a", 1);
        assert_eq!(expired.get("a"), None);
        assert_eq!(expired.get_stale("a"), None);
    }

    #[test]
    fn an_expired_entry_is_kept_for_stale_answers_and_invalidation_removes_it() {
        let kept = Expiring::new(10, Duration::ZERO, Duration::from_secs(60));
        kept.insert("a", 1);
        assert_eq!(kept.get("a"), None, "past its time to live");
        assert_eq!(kept.get_stale("a"), Some(1), "still kept");
        kept.remove("a");
        assert_eq!(kept.get_stale("a"), None);
    }

    #[test]
    fn an_answer_read_before_an_invalidation_is_not_remembered() {
        let cache = LinkCache::new(FOUND_TTL);
        let began = cache.read_begins("a");
        // The link was changed (or created) while the read was under way.
        cache.invalidate("a");
        cache.insert_absent("a", began);
        assert!(matches!(cache.get("a"), Cached::Unknown));

        let began = cache.read_begins("a");
        cache.insert_absent("a", began);
        assert!(matches!(cache.get("a"), Cached::Absent), "no change since");

        // Another code's change in another stripe leaves the answer to be remembered.
        let other = (0..)
            .map(|i| format!("b{i}"))
            .find(|b| stripe(b) != stripe("c"));
        let began = cache.read_begins("c");
        cache.invalidate(&other.unwrap());
        cache.insert_absent("c", began);
        assert!(matches!(cache.get("c"), Cached::Absent));
    }
}
