//! The redirect's cache: short code → where to send the client, plus a bounded negative cache of
//! unknown codes so a scanner probing random paths does not reach the database for each.
//!
//! This process invalidates at once on PATCH and DELETE (and clears the negative entry when a
//! code is created). Other instances on the same database see changes within the entries' time to
//! live; a shared invalidation channel can shorten that later without changing callers.

use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;
use shortlink_domain::{Destination, Link, LinkId, WorkspaceId};

/// What the redirect needs of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectTarget {
    /// The link, for counting.
    pub link_id: LinkId,
    /// Its workspace, whose webhooks hear of the click.
    pub workspace_id: WorkspaceId,
    /// Where to send the client.
    pub destination: Destination,
}

impl From<&Link> for RedirectTarget {
    fn from(link: &Link) -> Self {
        Self {
            link_id: link.id,
            workspace_id: link.workspace_id,
            destination: link.destination.clone(),
        }
    }
}

/// What the cache knows of a code.
#[derive(Debug, Clone)]
pub enum Cached {
    /// A link.
    Found(Arc<RedirectTarget>),
    /// Known not to exist (recently).
    Absent,
    /// Not in the cache.
    Unknown,
}

/// Bounded positive and negative caches.
pub struct LinkCache {
    found: Cache<String, Arc<RedirectTarget>>,
    absent: Cache<String, ()>,
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
    pub fn new(found: u64, absent: u64, found_ttl: Duration, absent_ttl: Duration) -> Self {
        Self {
            found: Cache::builder()
                .max_capacity(found)
                .time_to_live(found_ttl)
                .build(),
            absent: Cache::builder()
                .max_capacity(absent)
                .time_to_live(absent_ttl)
                .build(),
        }
    }

    /// Looks a code up.
    pub fn get(&self, code: &str) -> Cached {
        if let Some(target) = self.found.get(code) {
            Cached::Found(target)
        } else if self.absent.contains_key(code) {
            Cached::Absent
        } else {
            Cached::Unknown
        }
    }

    /// Remembers a code's link.
    pub fn insert(&self, code: &str, target: Arc<RedirectTarget>) {
        self.found.insert(code.to_owned(), target);
    }

    /// Remembers that a code has no link.
    pub fn insert_absent(&self, code: &str) {
        self.absent.insert(code.to_owned(), ());
    }

    /// Forgets whatever is known of a code (it was created, changed or deleted).
    pub fn invalidate(&self, code: &str) {
        self.found.invalidate(code);
        self.absent.invalidate(code);
    }
}
