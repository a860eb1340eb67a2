//! Every link's redirect target in memory, for a SQLite store that is the only writer of its file.
//!
//! The redirect of a code the in-process cache has not seen costs a SQLite read (two B-tree
//! searches, pages copied from the OS, a read transaction): with a million links drawn at
//! random that is most requests, and twice the server's CPU per redirect. Link services keep the
//! code → destination map in memory for that reason (in Redis, typically); with the embedded
//! database the process itself can, because every change of a link passes through its one
//! writer connection: the store applies each change here after it commits, while it still holds
//! that connection (every change takes the proof, `writer::Held`), so the index changes in
//! commit order and is never stale.
//!
//! Memory is the price: about 20 bytes per link plus its code and destination, packed into
//! 2 MiB chunks (no allocation per link; each chunk a huge page where the kernel allows), with a
//! hash table of 4-byte offsets per domain. The index has a budget; a store whose links do not
//! fit (at load, or later as links are created) drops the index and redirects read SQLite again,
//! behind the bounded cache. Records replaced or removed are garbage until the index is rebuilt,
//! which happens once garbage outweighs what is live (a pause of the writer and of lookups for a
//! few tens of milliseconds per million links).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use hashbrown::{DefaultHashBuilder, HashTable};
use memmap2::{MmapMut, MmapOptions};
use shortlink_domain::{Destination, RedirectRules, WorkspaceId};

use super::writer::Held;
use crate::StorageError;
use crate::model::{CounterKey, RedirectTarget};

/// Arena chunk size: one huge page ([`new_chunk`]). A record never spans two chunks, so this
/// bounds a record's size: a code of at most 64 bytes and a destination of at most 8,192
/// characters fit many times over.
const CHUNK: usize = 2 << 20;
const CHUNK_BITS: u32 = CHUNK.trailing_zeros();

/// Rebuilding is not worth it for less garbage than this.
const MIN_GARBAGE_TO_COMPACT: usize = 4 << 20;

/// The index, when there is one. `None` until it is loaded, and after it outgrew its budget.
#[derive(Debug)]
pub(crate) struct RedirectIndex {
    tables: RwLock<Option<Tables>>,
    /// Whether `tables` is `Some`, readable without the lock (a plain load on the redirect's
    /// path, where every worker reading the lock's state would share its cache line). Written
    /// under the write lock.
    loaded: AtomicBool,
}

impl RedirectIndex {
    pub(crate) fn empty() -> Self {
        Self {
            tables: RwLock::new(None),
            loaded: AtomicBool::new(false),
        }
    }

    /// Installs a freshly loaded index (or none, when the links did not fit).
    pub(crate) fn install(&self, _: &Held, tables: Option<Tables>) {
        let mut guard = self.write();
        self.loaded.store(tables.is_some(), Ordering::Relaxed);
        *guard = tables;
    }

    /// Whether there is an index (it may be given up a moment later, after which
    /// [`RedirectIndex::get`] answers `None`).
    pub(crate) fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Relaxed)
    }

    /// `None` when there is no index (or its record of the code is damaged: the database
    /// answers instead); otherwise the link with `code` on `domain`, if any.
    pub(crate) fn get(&self, domain: &str, code: &str) -> Option<Option<RedirectTarget>> {
        match self.read().as_ref()?.get(domain, code) {
            Ok(found) => Some(found),
            Err(damaged) => {
                tracing::error!(domain, code, "{damaged}: the database answers instead");
                None
            }
        }
    }

    /// `None` when there is no index; otherwise whether a link has `code` on `domain`.
    pub(crate) fn contains(&self, domain: &str, code: &str) -> Option<bool> {
        Some(self.read().as_ref()?.find(domain, code).is_some())
    }

    /// Records links that were just committed (or changed: a code's earlier record is replaced).
    pub(crate) fn insert<'a>(
        &self,
        _: &Held,
        links: impl IntoIterator<Item = (&'a str, &'a str, RedirectTarget)>,
    ) {
        let mut guard = self.write();
        let Some(tables) = guard.as_mut() else { return };
        let fits = links
            .into_iter()
            .all(|(domain, code, target)| tables.insert(domain, code, &target));
        if !fits || !tables.compact_if_worthwhile() {
            self.give_up(&mut guard);
        }
    }

    /// Forgets a deleted code.
    pub(crate) fn remove(&self, _: &Held, domain: &str, code: &str) {
        let mut guard = self.write();
        if let Some(tables) = guard.as_mut() {
            tables.remove(domain, code);
            if !tables.compact_if_worthwhile() {
                self.give_up(&mut guard);
            }
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<Tables>> {
        // See `write`: a poisoned lock still guards complete records.
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Option<Tables>> {
        // A panic while holding the lock cannot leave a half-written record reachable: offsets
        // enter a table only after their record is complete.
        self.tables.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives the index up after its links stopped fitting: redirects read the database from now
    /// on. The caller holds the write lock (`index`).
    fn give_up(&self, index: &mut Option<Tables>) {
        self.loaded.store(false, Ordering::Relaxed);
        if let Some(tables) = index.take() {
            tracing::warn!(
                budget_bytes = tables.budget,
                "the links no longer fit the redirect index's budget (or no memory could be \
                 mapped for it): redirects read the database from now on (raise \
                 --redirect-index-mib)"
            );
        }
    }
}

/// The index proper: one hash table per domain, records in an arena.
#[derive(Debug)]
pub(crate) struct Tables {
    domains: HashMap<Box<str>, HashTable<u32>>,
    arena: Arena,
    workspaces: Workspaces,
    /// The redirect rules of the links that have some, by counter: a record only says whether
    /// its link has rules (one bit), so a plain link's record is as small as ever.
    rules: HashMap<i64, Arc<RedirectRules>>,
    hasher: DefaultHashBuilder,
    budget: usize,
}

impl Tables {
    /// An empty index that may grow to about `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            domains: HashMap::new(),
            arena: Arena::default(),
            workspaces: Workspaces::default(),
            rules: HashMap::new(),
            hasher: DefaultHashBuilder::default(),
            budget,
        }
    }

    /// Adds or replaces a code's record; false when the index would exceed its budget or no
    /// memory could be mapped, after which these tables are not to be used.
    pub(crate) fn insert(&mut self, domain: &str, code: &str, target: &RedirectTarget) -> bool {
        let workspace = self.workspaces.intern(target.workspace_id);
        let Some(record) = Record::encode(code, target, workspace) else {
            return false;
        };
        let needed = record.len() + target.rules.as_ref().map_or(0, |_| RULES_ENTRY_BYTES);
        if self.bytes() + needed > self.budget
            && (!self.compact() || self.bytes() + needed > self.budget)
        {
            return false;
        }
        let Some(at) = self.arena.push(&record) else {
            return false;
        };
        let hash = self.hasher.hash_one(code.as_bytes());
        let (arena, hasher) = (&self.arena, &self.hasher);
        let table = match self.domains.get_mut(domain) {
            Some(table) => table,
            None => self.domains.entry(domain.into()).or_default(),
        };
        let entry = table.entry(
            hash,
            |&other| arena.code(other) == code.as_bytes(),
            |&other| hasher.hash_one(arena.code(other)),
        );
        if let hashbrown::hash_table::Entry::Occupied(mut slot) = entry {
            let old = std::mem::replace(slot.get_mut(), at);
            let seq = self.arena.record(old).seq;
            self.rules.remove(&seq);
            self.arena.forget(old);
        } else {
            entry.insert(at);
        }
        if let Some(rules) = &target.rules {
            self.rules.insert(target.counter.0, rules.clone());
        }
        true
    }

    /// Where the record of `code` on `domain` is in the arena.
    fn find(&self, domain: &str, code: &str) -> Option<u32> {
        let table = self.domains.get(domain)?;
        table
            .find(self.hasher.hash_one(code.as_bytes()), |&at| {
                self.arena.code(at) == code.as_bytes()
            })
            .copied()
    }

    fn get(&self, domain: &str, code: &str) -> Result<Option<RedirectTarget>, StorageError> {
        let Some(at) = self.find(domain, code) else {
            return Ok(None);
        };
        let record = self.arena.record(at);
        let destination = String::from_utf8(record.destination.to_vec())
            .map_err(|_| StorageError::Corrupt("redirect index record"))?;
        let rules = match record.has_rules {
            false => None,
            true => Some(
                (self.rules.get(&record.seq).cloned())
                    .ok_or(StorageError::Corrupt("redirect index rules"))?,
            ),
        };
        Ok(Some(RedirectTarget {
            counter: CounterKey(record.seq),
            workspace_id: self.workspaces.get(record.workspace),
            destination: Destination::from_trusted(destination),
            rules,
        }))
    }

    fn remove(&mut self, domain: &str, code: &str) {
        let Some(table) = self.domains.get_mut(domain) else {
            return;
        };
        let arena = &self.arena;
        let hash = self.hasher.hash_one(code.as_bytes());
        let found = table.find_entry(hash, |&at| arena.code(at) == code.as_bytes());
        if let Ok(slot) = found {
            let (at, _) = slot.remove();
            let seq = self.arena.record(at).seq;
            self.rules.remove(&seq);
            self.arena.forget(at);
        }
    }

    /// Bytes held: records (live and garbage), table slots (4-byte offset, 1 control byte) and
    /// rules (estimated per entry).
    fn bytes(&self) -> usize {
        let slots: usize = self.domains.values().map(|t| t.capacity() * 5).sum();
        self.arena.bytes() + slots + self.rules.len() * RULES_ENTRY_BYTES
    }

    /// Compacts once garbage outweighs live records; false as [`Tables::compact`].
    fn compact_if_worthwhile(&mut self) -> bool {
        self.arena.garbage < MIN_GARBAGE_TO_COMPACT
            || self.arena.garbage < self.arena.live
            || self.compact()
    }

    /// Rebuilds the arena without garbage, copying each live record once. False when no memory
    /// could be mapped for the copy, which leaves these tables half moved: not to be used.
    fn compact(&mut self) -> bool {
        if self.arena.garbage == 0 {
            return true;
        }
        let mut arena = Arena::default();
        for table in self.domains.values_mut() {
            for at in table.iter_mut() {
                let Some(moved) = arena.push(self.arena.bytes_of(*at)) else {
                    return false;
                };
                *at = moved;
            }
        }
        self.arena = arena;
        true
    }
}

/// Links' records, packed into chunks; a record is addressed by `chunk << CHUNK_BITS | offset`.
#[derive(Debug, Default)]
struct Arena {
    chunks: Vec<MmapMut>,
    /// Bytes used in the last chunk.
    used: usize,
    live: usize,
    garbage: usize,
}

/// A chunk of the arena: anonymous memory the kernel is asked to back with one huge page.
///
/// Why: a lookup reads one record at a random place in the arena, about 90 MB for a million
/// links. In 4 KiB pages that is a TLB miss and a page walk per redirect, which measured as
/// 2 to 3 µs of a redirect's 10 with a million links and nothing with 10,000
/// (docs/PERFORMANCE-ROUNDS.md, "The redirect index in huge pages"); in 2 MiB pages the whole
/// arena's translations stay cached. Where the kernel offers no transparent huge pages the
/// advice is ignored and the chunk is ordinary memory.
fn new_chunk() -> std::io::Result<MmapMut> {
    let chunk = MmapOptions::new().len(CHUNK).map_anon()?;
    #[cfg(target_os = "linux")]
    let _ = chunk.advise(memmap2::Advice::HugePage);
    Ok(chunk)
}

impl Arena {
    /// Appends a record and returns its address; `None` when no memory could be mapped.
    fn push(&mut self, record: &[u8]) -> Option<u32> {
        if self.chunks.is_empty() || self.used + record.len() > CHUNK {
            self.chunks.push(new_chunk().ok()?);
            self.used = 0;
        }
        let chunk = self.chunks.len() - 1;
        let offset = self.used;
        self.chunks[chunk][offset..offset + record.len()].copy_from_slice(record);
        self.used += record.len();
        self.live += record.len();
        u32::try_from(chunk << CHUNK_BITS | offset).ok()
    }

    fn forget(&mut self, at: u32) {
        let len = self.bytes_of(at).len();
        self.live -= len;
        self.garbage += len;
    }

    fn bytes(&self) -> usize {
        self.live + self.garbage
    }

    /// The chunk from the record at `at` to the chunk's end.
    fn from(&self, at: u32) -> &[u8] {
        let (chunk, offset) = ((at >> CHUNK_BITS) as usize, at as usize & (CHUNK - 1));
        &self.chunks[chunk][offset..]
    }

    fn bytes_of(&self, at: u32) -> &[u8] {
        let rest = self.from(at);
        &rest[..Record::decode(rest).len]
    }

    fn record(&self, at: u32) -> Record<'_> {
        Record::decode(self.from(at))
    }

    /// A record's code alone, as bytes: what a lookup compares (and hashes), without reading the
    /// rest of the record or checking that it is text.
    fn code(&self, at: u32) -> &[u8] {
        let ([code_len, ..], rest) = Record::numbers(self.from(at));
        &rest[..code_len as usize]
    }
}

/// What a link's redirect rules take in the index, about: its entry in [`Tables::rules`] and the
/// rules themselves (a few URLs). An estimate, for the budget only.
const RULES_ENTRY_BYTES: usize = 512;

/// One link's record: four numbers as varints (a million links' fit in 6 bytes), then the code
/// (read on its own by [`Arena::code`]) and the destination. The fourth number is the
/// workspace's, shifted left by one, its low bit set when the link has redirect rules.
struct Record<'a> {
    seq: i64,
    workspace: u32,
    has_rules: bool,
    /// Text, as [`Record::encode`] wrote it; [`Tables::get`] checks.
    destination: &'a [u8],
    /// Bytes the record takes.
    len: usize,
}

impl<'a> Record<'a> {
    /// The record's bytes; `None` when the record would not fit a chunk (no validated link
    /// comes near).
    fn encode(code: &str, target: &RedirectTarget, workspace: u32) -> Option<Vec<u8>> {
        use unsigned_varint::encode;

        let destination = target.destination.as_str();
        let mut record = Vec::with_capacity(24 + code.len() + destination.len());
        for number in [
            code.len() as u64,
            destination.len() as u64,
            target.counter.0 as u64,
            u64::from(workspace) << 1 | u64::from(target.rules.is_some()),
        ] {
            record.extend_from_slice(encode::u64(number, &mut encode::u64_buffer()));
        }
        record.extend_from_slice(code.as_bytes());
        record.extend_from_slice(destination.as_bytes());
        (record.len() <= CHUNK).then_some(record)
    }

    /// The four numbers at the start of a record (code length, destination length, seq,
    /// workspace), and what follows them.
    fn numbers(bytes: &[u8]) -> ([u64; 4], &[u8]) {
        let mut rest = bytes;
        let numbers = [(); 4].map(|()| {
            let (n, after) = unsigned_varint::decode::u64(rest).unwrap_or((0, rest));
            rest = after;
            n
        });
        (numbers, rest)
    }

    /// Reads the record at the start of `bytes`, which [`Record::encode`] wrote.
    fn decode(bytes: &'a [u8]) -> Self {
        let ([code_len, destination_len, seq, workspace], rest) = Self::numbers(bytes);
        let (code_len, destination_len) = (code_len as usize, destination_len as usize);
        let (seq, has_rules, workspace) = (seq as i64, workspace & 1 == 1, (workspace >> 1) as u32);
        let header = bytes.len() - rest.len();
        let destination = &rest[code_len..code_len + destination_len];
        Record {
            seq,
            workspace,
            has_rules,
            destination,
            len: header + code_len + destination_len,
        }
    }
}

/// Workspace ids, each stored once; records hold their 4-byte number.
#[derive(Debug, Default)]
struct Workspaces {
    ids: Vec<WorkspaceId>,
    numbers: HashMap<WorkspaceId, u32>,
}

impl Workspaces {
    fn intern(&mut self, id: WorkspaceId) -> u32 {
        *self.numbers.entry(id).or_insert_with(|| {
            self.ids.push(id);
            u32::try_from(self.ids.len() - 1).expect("fewer than 4 billion workspaces")
        })
    }

    fn get(&self, number: u32) -> WorkspaceId {
        self.ids[number as usize]
    }
}

#[cfg(test)]
mod tests {
    use shortlink_domain::BaseUrl;

    use super::*;

    fn target(seq: i64, destination: &str) -> RedirectTarget {
        let base = BaseUrl::parse("http://sho.rt").expect("a base URL");
        RedirectTarget {
            counter: CounterKey(seq),
            workspace_id: WorkspaceId::generate(),
            destination: Destination::parse(destination, &base).expect("a destination"),
            rules: None,
        }
    }

    fn loaded(budget: usize) -> RedirectIndex {
        let index = RedirectIndex::empty();
        index.install(&Held::for_test(), Some(Tables::new(budget)));
        index
    }

    #[test]
    fn without_an_index_nothing_is_answered() {
        let index = RedirectIndex::empty();
        index.insert(
            &Held::for_test(),
            [("sho.rt", "a", target(1, "https://example.com/"))],
        );
        assert_eq!(index.get("sho.rt", "a"), None);
    }

    #[test]
    fn codes_are_found_per_domain_changed_and_removed() {
        let index = loaded(1 << 30);
        let (a, b) = (
            target(1, "https://a.example/"),
            target(2, "https://b.example/x?y=1"),
        );
        index.insert(
            &Held::for_test(),
            [
                ("sho.rt", "a", a.clone()),
                ("sho.rt", "b", b.clone()),
                ("other.rt", "a", b.clone()),
            ],
        );
        assert_eq!(index.get("sho.rt", "a"), Some(Some(a.clone())));
        assert_eq!(index.get("sho.rt", "b"), Some(Some(b.clone())));
        assert_eq!(index.get("other.rt", "a"), Some(Some(b.clone())));
        assert_eq!(index.get("sho.rt", "c"), Some(None));
        assert_eq!(index.get("elsewhere", "a"), Some(None));

        let changed = RedirectTarget {
            destination: Destination::from_trusted("https://moved.example/".into()),
            rules: Some(Arc::new(RedirectRules {
                redirect_type: shortlink_domain::RedirectType::Permanent,
                ..RedirectRules::default()
            })),
            ..a.clone()
        };
        index.insert(&Held::for_test(), [("sho.rt", "a", changed.clone())]);
        assert_eq!(index.get("sho.rt", "a"), Some(Some(changed)));
        // Back to a plain link: its rules are forgotten with its old record.
        index.insert(&Held::for_test(), [("sho.rt", "a", a.clone())]);
        assert_eq!(index.get("sho.rt", "a"), Some(Some(a)));

        index.remove(&Held::for_test(), "sho.rt", "a");
        assert_eq!(index.get("sho.rt", "a"), Some(None));
        assert_eq!(index.get("other.rt", "a"), Some(Some(b)));
    }

    #[test]
    fn an_index_over_its_budget_is_dropped() {
        let index = loaded(4096);
        let long = format!("https://example.com/{}", "a".repeat(5000));
        index.insert(
            &Held::for_test(),
            [("sho.rt", "a", target(1, "https://example.com/"))],
        );
        assert_eq!(
            index.get("sho.rt", "a").map(|found| found.is_some()),
            Some(true)
        );
        index.insert(&Held::for_test(), [("sho.rt", "b", target(2, &long))]);
        assert_eq!(index.get("sho.rt", "a"), None, "no index at all");
    }

    #[test]
    fn garbage_is_compacted_away_and_every_live_code_survives() {
        let mut tables = Tables::new(1 << 30);
        let targets: Vec<RedirectTarget> = (0..20_000)
            .map(|i| target(i, &format!("https://example.com/{i:0>200}")))
            .collect();
        for (i, t) in targets.iter().enumerate() {
            assert!(tables.insert("sho.rt", &i.to_string(), t));
        }
        // Every record replaced once: as much garbage as live data, over the threshold.
        for (i, t) in targets.iter().enumerate() {
            assert!(tables.insert("sho.rt", &i.to_string(), t));
        }
        let before = tables.arena.bytes();
        assert!(tables.compact_if_worthwhile());
        assert_eq!(tables.arena.garbage, 0);
        assert_eq!(tables.arena.bytes() * 2, before);
        for (i, t) in targets.iter().enumerate() {
            assert_eq!(
                tables.get("sho.rt", &i.to_string()).unwrap().as_ref(),
                Some(t)
            );
        }
    }
}
