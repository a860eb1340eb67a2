//! SQLite's click journal: a flush of clicks is one appended row, and the counters are brought up
//! to date from the journal once a minute (by default).
//!
//! Why: adding a flush's clicks to `link_clicks` in place costs a B-tree search and a dirty page
//! per clicked link. With a million links clicked at random, each flush (four a second) dirtied
//! nearly every page of the counters, and writing and checkpointing those pages was most of the
//! server's CPU per redirect beyond the lookup. The same clicks folded in once every
//! [`CLICK_FOLD_INTERVAL`](crate::CLICK_FOLD_INTERVAL) cost a tenth as much per click
//! (docs/PERFORMANCE-ROUNDS.md, "The click journal").
//!
//! How it stays exact:
//! - A flush appends one row (its `(counter, clicks)` pairs, varint-encoded) in the transaction
//!   that writes its `link.clicked` events; once that commits, the pairs are added to the
//!   in-memory sum of everything journaled and not yet folded ([`ClickJournal::unfolded`]).
//! - Every read of a link adds that sum to the counter it read.
//! - A fold adds the sum to the counters and empties the journal in one transaction. Readers are
//!   kept out (the gate) from just before that commit until the sum is cleared, so no read sees
//!   both the folded counter and the sum, and none sees neither.
//! - Appends and folds run on the single writer connection and each holds it throughout, so the
//!   in-memory sum always equals the journal's rows when a fold starts.
//! - After a crash, the next server to start adds the journal's rows to the counters before it
//!   serves ([`crate::Store::open`]).
//!
//! The sum lives in this process, so the journal is only for the store that is its file's one
//! server (as the redirect index already is). A server holds an exclusive lock on `<file>.lock`
//! while it journals, so a second server on the same file refuses to start instead of folding
//! the first one's journal (which would count those clicks twice). Any other process that opens
//! the file (the CLI) counts in place, and reads counters that may lag the server's by up to a
//! fold.

use std::collections::BTreeMap;
use std::fs::{File, TryLockError};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use tokio::sync::{RwLock, RwLockWriteGuard};

use super::{Conn, write_transaction};
use crate::hooks::Hooks;

use crate::StorageError;

/// Consecutive counter keys per block of [`Unfolded`]: 8 KiB of counts.
const BLOCK: usize = 1024;

/// The journal's in-memory side. Inactive until a server starts it; then flushes are journaled.
#[derive(Debug, Default)]
pub(crate) struct ClickJournal {
    state: Mutex<State>,
    /// Held for reading by every read of links on a reader connection, and for writing by a
    /// fold from just before it commits until the sum is cleared.
    gate: RwLock<()>,
}

#[derive(Debug, Default)]
struct State {
    /// The server's lock on the file, held while flushes are journaled.
    server_lock: Option<File>,
    /// Clicks journaled and not folded.
    unfolded: Unfolded,
    last_fold: Option<Instant>,
    fold_interval: Duration,
}

/// Clicks by counter key (a link's row number), as arrays of [`BLOCK`] consecutive keys: adding
/// and reading a count is an index into an array, a fold reads them in key order without a sort,
/// and memory follows the links clicked (8 bytes a link, in blocks), not the clicks.
#[derive(Debug, Default)]
struct Unfolded {
    blocks: BTreeMap<i64, Box<[i64; BLOCK]>>,
}

impl Unfolded {
    fn split(key: i64) -> (i64, usize) {
        // BLOCK fits any integer type; rem_euclid keeps the slot in 0..BLOCK for any key.
        (
            key.div_euclid(BLOCK as i64),
            key.rem_euclid(BLOCK as i64) as usize,
        )
    }

    fn get(&self, key: i64) -> i64 {
        let (block, slot) = Self::split(key);
        self.blocks.get(&block).map_or(0, |counts| counts[slot])
    }

    fn add(&mut self, key: i64, count: i64) {
        let (block, slot) = Self::split(key);
        let counts = self
            .blocks
            .entry(block)
            .or_insert_with(|| Box::new([0; BLOCK]));
        counts[slot] = counts[slot].saturating_add(count);
    }

    /// Up to `limit` `(key, clicks)` pairs with clicks and a key past `after`, in key order.
    fn pairs_after(&self, after: i64, limit: usize) -> Vec<(i64, i64)> {
        let (first_block, _) = Self::split(after);
        self.blocks
            .range(first_block..)
            .flat_map(|(&block, counts)| {
                (0..)
                    .zip(counts.iter())
                    .map(move |(slot, &n)| (block * BLOCK as i64 + slot, n))
            })
            .filter(|&(key, n)| key > after && n != 0)
            .take(limit)
            .collect()
    }
}

impl ClickJournal {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Flushes are journaled from now on, under the server's lock ([`lock_server`]), and folded
    /// every `fold_interval` while there are any.
    pub fn activate(&self, server_lock: File, fold_interval: Duration) {
        let mut state = self.state();
        state.server_lock = Some(server_lock);
        state.last_fold = Some(Instant::now());
        state.fold_interval = fold_interval;
    }

    /// Whether flushes are journaled (a server started the journal).
    pub fn is_active(&self) -> bool {
        self.state().server_lock.is_some()
    }

    /// Clicks of counter `key` that are journaled and not yet folded.
    pub fn unfolded(&self, key: i64) -> i64 {
        self.state().unfolded.get(key)
    }

    /// Adds pairs whose journal row has committed.
    pub fn journaled(&self, counts: &[(i64, i64)]) {
        let mut state = self.state();
        for &(key, count) in counts {
            state.unfolded.add(key, count);
        }
    }

    /// Whether the next flush should fold: there are unfolded clicks and the last fold was at
    /// least the fold interval ago.
    pub fn fold_due(&self) -> bool {
        let state = self.state();
        !state.unfolded.blocks.is_empty()
            && state
                .last_fold
                .is_none_or(|t| t.elapsed() >= state.fold_interval)
    }

    /// The next `limit` pairs of the sum to fold after key `after` (`i64::MIN` for the first),
    /// in key order: consecutive updates land on the same or the next page of the counters. A
    /// fold takes them a slice at a time, so a million links' sum is never copied whole; the sum
    /// does not change meanwhile, as only a fold and flushes change it, both holding the writer.
    pub fn to_fold_after(&self, after: i64, limit: usize) -> Vec<(i64, i64)> {
        self.state().unfolded.pairs_after(after, limit)
    }

    /// Clears the sum after a fold committed (the caller holds the gate).
    pub fn folded(&self) {
        let mut state = self.state();
        state.unfolded.blocks.clear();
        state.last_fold = Some(Instant::now());
    }

    /// Taken by a fold before it commits.
    pub async fn folding(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write().await
    }

    /// The gate, for reads of links on reader connections to hold (see the module docs).
    pub fn gate(&self) -> &RwLock<()> {
        &self.gate
    }
}

/// The exclusive lock a server holds on `<path>.lock` while it journals the clicks of the SQLite
/// file at `path`; released when the file handle is dropped or the process ends, however it ends.
pub(crate) fn lock_server(path: &str) -> Result<File, StorageError> {
    let lock_path = format!("{path}.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| StorageError::Unavailable(format!("cannot open {lock_path}: {e}")))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(StorageError::Unavailable(format!(
            "another server is using this SQLite file ({lock_path} is locked); one file serves \
             one server, several servers share PostgreSQL"
        ))),
        Err(TryLockError::Error(e)) => Err(StorageError::Unavailable(format!(
            "cannot lock {lock_path}: {e}"
        ))),
    }
}

/// A journal row: `(counter key, clicks)` pairs in key order, each as two unsigned varints, the
/// key as its distance from the previous one (a flush of ten thousand pairs is ~30 KB). Keys
/// must not descend, nor be negative, and counts must not be negative: such a pair is a caller's
/// bug, and the whole row is refused ([`StorageError::Invalid`]) rather than a pair dropped (a
/// lost count) or wrapped around into another link's counter.
pub(crate) fn encode(counts: &[(i64, i64)]) -> Result<Vec<u8>, StorageError> {
    use unsigned_varint::encode;

    let mut out = Vec::with_capacity(counts.len() * 4);
    let mut buf = encode::u64_buffer();
    let mut previous = 0;
    for &(key, count) in counts {
        let (Some(delta), Ok(count)) = (
            key.checked_sub(previous)
                .and_then(|d| u64::try_from(d).ok()),
            u64::try_from(count),
        ) else {
            return Err(StorageError::Invalid(
                "click counts must be non-negative, by counter keys in ascending order",
            ));
        };
        out.extend_from_slice(encode::u64(delta, &mut buf));
        out.extend_from_slice(encode::u64(count, &mut buf));
        previous = key;
    }
    Ok(out)
}

/// The pairs of a journal row.
pub(crate) fn decode(mut row: &[u8]) -> Result<Vec<(i64, i64)>, StorageError> {
    use unsigned_varint::decode;

    const CORRUPT: StorageError = StorageError::Corrupt("click journal row");
    let mut counts = Vec::new();
    let mut key: i64 = 0;
    while !row.is_empty() {
        let (delta, rest) = decode::u64(row).map_err(|_| CORRUPT)?;
        let (count, rest) = decode::u64(rest).map_err(|_| CORRUPT)?;
        let delta = i64::try_from(delta).map_err(|_| CORRUPT)?;
        key = key.checked_add(delta).ok_or(CORRUPT)?;
        counts.push((key, i64::try_from(count).map_err(|_| CORRUPT)?));
        row = rest;
    }
    Ok(counts)
}

/// Adds the counts of a JSON object (`{"<counter key>": clicks, …}`, keys ascending) to the
/// counters: SQLite walks the object and finds each counter by its row key, in key order.
///
/// JSON because diesel prepares every `UPDATE` and `sql_query` anew: an update per link, or one
/// with a thousand rows of `VALUES`, spent most of a flush in SQLite's parser, and a scratch table
/// filled row by row cost a bound insert per link and a second B-tree search per counter.
const ADD_CLICKS: &str = "UPDATE link_clicks SET clicks = link_clicks.clicks + v.n \
    FROM (SELECT CAST(key AS INTEGER) AS k, value AS n FROM json_each(?)) AS v \
    WHERE link_clicks.link_seq = v.k";

/// Counters added per statement (about a millisecond of work; preparing it is a few per cent).
const CLICKS_PER_STATEMENT: usize = 1000;

/// Adds `(counter key, clicks)` pairs, in key order, to the counters, inside the caller's
/// transaction, in statements of [`CLICKS_PER_STATEMENT`] handed to the connection's thread one
/// after the other.
///
/// Slices, because a fold of a million links' clicks is a few hundred milliseconds of CPU: in
/// one piece it would hold a CPU that long against the redirect workers, whose requests would
/// wait behind it (the redirect p99 with the bench's server on one CPU: docs/PERFORMANCE.md, "How
/// the CPUs are shared").
/// Between two statements the thread waits for the next handoff, and a worker that has requests
/// runs first.
pub(crate) async fn add_clicks(c: &mut Conn, counts: &[(i64, i64)]) -> QueryResult<()> {
    use std::fmt::Write;

    for slice in counts.chunks(CLICKS_PER_STATEMENT) {
        let mut object = String::with_capacity(slice.len() * 12 + 2);
        object.push('{');
        for (i, (key, count)) in slice.iter().enumerate() {
            let comma = if i == 0 { "" } else { "," };
            let _ = write!(object, "{comma}\"{key}\":{count}");
        }
        object.push('}');
        diesel::sql_query(ADD_CLICKS)
            .bind::<diesel::sql_types::Text, _>(object)
            .execute(c)
            .await?;
    }
    Ok(())
}

/// Counts a flush's `(counter key, clicks)` pairs, in key order, inside the caller's
/// transaction: as one journal row when the store journals clicks, else in place.
pub(crate) async fn count_clicks(
    c: &mut Conn,
    counts: &[(i64, i64)],
    hooks: &impl Hooks,
) -> Result<(), StorageError> {
    if hooks.journals_clicks() {
        append(c, counts).await
    } else {
        Ok(add_clicks(c, counts).await?)
    }
}

diesel::table! {
    /// The click journal (`click_journal.rs`): one row per journaled flush.
    click_journal (id) {
        id -> BigInt,
        counts -> Binary,
    }
}

/// Journals a flush's `(counter key, clicks)` pairs, in key order, as one row, inside the
/// caller's transaction; [`ClickJournal::journaled`] once it commits.
pub(crate) async fn append(c: &mut Conn, counts: &[(i64, i64)]) -> Result<(), StorageError> {
    diesel::insert_into(click_journal::table)
        .values(click_journal::counts.eq(encode(counts)?))
        .execute(c)
        .await?;
    Ok(())
}

/// Folds the journal into the counters: adds the in-memory sum (which equals its rows, as the
/// caller holds the writer connection) and deletes the rows, in one transaction committed with
/// the readers held off, then clears the sum before they go on.
pub(crate) async fn fold_journal(c: &mut Conn, journal: &ClickJournal) -> Result<(), StorageError> {
    let started = std::time::Instant::now();
    let mut links = 0;
    let gate = write_transaction(c, async |c| -> Result<_, StorageError> {
        let mut after = i64::MIN;
        loop {
            let counts = journal.to_fold_after(after, CLICKS_PER_STATEMENT);
            let Some(&(last, _)) = counts.last() else {
                break;
            };
            add_clicks(c, &counts).await?;
            (after, links) = (last, links + counts.len());
        }
        diesel::delete(click_journal::table).execute(c).await?;
        Ok(journal.folding().await)
    })
    .await?;
    journal.folded();
    drop(gate);
    tracing::debug!(
        links,
        elapsed_ms = started.elapsed().as_millis(),
        "folded the click journal into the counters"
    );
    Ok(())
}

/// Adds the rows an earlier process journaled and did not fold to the in-memory sum.
pub(crate) async fn load_journal(c: &mut Conn, journal: &ClickJournal) -> Result<(), StorageError> {
    let rows: Vec<Vec<u8>> = click_journal::table
        .select(click_journal::counts)
        .order(click_journal::id)
        .load(c)
        .await?;
    for row in rows {
        journal.journaled(&decode(&row)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_decodes_to_the_pairs_encoded() {
        let counts = vec![(1, 1), (2, 300), (1_000_000, 1), (i64::MAX, i64::MAX)];
        assert_eq!(decode(&encode(&counts).unwrap()).unwrap(), counts);
        assert_eq!(decode(&encode(&[]).unwrap()).unwrap(), vec![]);
    }

    #[test]
    fn pairs_out_of_order_are_refused_not_dropped() {
        for counts in [vec![(5, 1), (4, 1)], vec![(-1, 1)], vec![(1, -1)]] {
            assert!(
                matches!(encode(&counts), Err(StorageError::Invalid(_))),
                "{counts:?}"
            );
        }
    }

    #[test]
    fn a_truncated_row_is_corrupt() {
        let row = encode(&[(5, 70_000)]).unwrap();
        assert!(matches!(
            decode(&row[..row.len() - 1]),
            Err(StorageError::Corrupt(_))
        ));
    }

    #[test]
    fn the_sum_is_kept_by_key_across_blocks_and_folds_in_key_order() {
        let journal = ClickJournal::default();
        let far = 7 * BLOCK as i64 + 3;
        journal.journaled(&[(far, 1), (BLOCK as i64, 2), (BLOCK as i64 - 1, 3), (1, 4)]);
        journal.journaled(&[(far, 5)]);
        assert_eq!(journal.unfolded(far), 6);
        assert_eq!(journal.unfolded(BLOCK as i64), 2);
        assert_eq!(journal.unfolded(2), 0, "same block, never clicked");
        assert_eq!(journal.unfolded(far + BLOCK as i64), 0, "no block");
        let all = vec![(1, 4), (BLOCK as i64 - 1, 3), (BLOCK as i64, 2), (far, 6)];
        assert_eq!(journal.to_fold_after(i64::MIN, 10), all);
        assert_eq!(journal.to_fold_after(i64::MIN, 2), all[..2]);
        assert_eq!(journal.to_fold_after(BLOCK as i64 - 1, 2), all[2..]);
        assert_eq!(journal.to_fold_after(far, 2), vec![]);
        journal.journaled(&[(i64::MAX, 1)]);
        assert_eq!(
            journal.to_fold_after(far, 2),
            vec![(i64::MAX, 1)],
            "the last key"
        );
    }

    #[test]
    fn the_sum_adds_up_and_clears_on_fold() {
        let journal = ClickJournal::default();
        journal.journaled(&[(1, 2), (3, 1)]);
        journal.journaled(&[(1, 5)]);
        assert_eq!((journal.unfolded(1), journal.unfolded(3)), (7, 1));
        assert_eq!(journal.to_fold_after(i64::MIN, 10), vec![(1, 7), (3, 1)]);
        journal.folded();
        assert_eq!(
            (journal.unfolded(1), journal.to_fold_after(i64::MIN, 10)),
            (0, vec![])
        );
        assert!(!journal.fold_due());
    }
}
