//! Profiles and identifier entries kept in memory, in front of SQLite.
//!
//! Applying queued track jobs reads every profile it touches and the identifier
//! entry that names it. In SQLite each of those reads is two B-tree descents on a
//! connection whose page cache is dropped whenever another connection commits, so
//! they cost more than the writes. Here they are one hash lookup.
//!
//! The cache is coherent because every write of these tables goes through this
//! process's commits (it is used only by the process that owns the queue, and the
//! other commands of `engage` never write profiles): a commit updates the cache
//! after SQLite commits and before it returns. A read that misses fills the cache
//! while holding the fill lock (shared) from before its database read until its
//! insert, and a commit takes the same lock exclusively for its update, so an update
//! always lands after any fill that might have read older data. Fills share the
//! lock: fills running at once read the same committed state, so none of them can
//! insert anything older than another's (one at a time, every acknowledgement's
//! misses waited in a single line). Should it ever hold a stale version
//! anyway, the commit's version check in SQLite refuses the write (a retry), it
//! never corrupts data.
//!
//! Each profile also remembers the row it came from in SQLite, so a commit updates
//! it by rowid: one B-tree descent instead of two (the key's index, then the
//! table). The rowid is only a hint: the update also checks table, key and
//! version, and falls back to the key when it finds no such row. Identifier entries
//! have no rowid: their table is found by key in one descent (see
//! [`super::statements`]).

use foldhash::HashMap;
use std::num::NonZeroI64;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard};

use engage_core::store::{next_version, Entry, Expect, Op, Table};

use super::statements::by_key;

/// Bytes counted per entry beyond its key and value (map slot, allocations).
const OVERHEAD: usize = 64;

/// The cache.
pub struct DocCache {
    fill: RwLock<()>,
    map: Mutex<Map>,
    capacity: usize,
}

#[derive(Default)]
struct Map {
    /// By table, then key: a lookup by `&str` allocates nothing. Hashed with
    /// foldhash, seeded at random per map (SipHash was 4% of an export's
    /// instructions, with the batch read's map below).
    entries: HashMap<Table, HashMap<String, Cached>>,
    bytes: usize,
}

/// A document and the SQLite row that holds it (in a table without rowids, none;
/// for an identifier entry, the row of the profile it names, where known).
/// SQLite's rowids here start at 1, and the niche keeps an entry as small as with a
/// plain integer.
struct Cached {
    entry: Entry,
    rowid: Option<NonZeroI64>,
}

fn size(key: &str, e: &Entry) -> usize {
    key.len() + e.value.len() + OVERHEAD
}

/// True for the tables the cache holds: the ones applying queued jobs reads.
pub fn cached(table: Table) -> bool {
    matches!(table, Table::Profile | Table::Ident)
}

/// Which documents a commit puts in the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Every document it wrote: the queue applier's commits, whose new profiles
    /// the next jobs are likely to touch.
    New,
    /// Only documents that existed before it (updated in place); documents it
    /// created enter when first read. Requests' commits, warehouse syncs among
    /// them: a sync of a million new users would otherwise fill the cache with
    /// them (evicting the applier's working set), and inserting and evicting them
    /// took about a third of the sync's commit thread (perf).
    Known,
}

/// Held while a fill reads the database and inserts what it read.
pub struct FillGuard<'a>(#[allow(dead_code)] RwLockReadGuard<'a, ()>);

impl DocCache {
    /// A cache of at most about `capacity` bytes.
    pub fn new(capacity: usize) -> DocCache {
        DocCache { fill: RwLock::new(()), map: Mutex::new(Map::default()), capacity }
    }

    fn map(&self) -> MutexGuard<'_, Map> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached entry of `key`, if any (`None` says nothing about the database).
    #[cfg(test)]
    pub fn get(&self, table: Table, key: &str) -> Option<Entry> {
        self.get_many(table, &[key.to_string()]).pop().flatten()
    }

    /// The cached entries of `keys`, in order (`None` says nothing about the database).
    #[cfg(test)]
    pub fn get_many(&self, table: Table, keys: &[String]) -> Vec<Option<Entry>> {
        self.get_many_at(table, keys).into_iter().map(|e| e.map(|(entry, _)| entry)).collect()
    }

    /// [`DocCache::get_many`], each entry with its row where known (for an
    /// identifier entry, the row of the profile it names).
    pub fn get_many_at(&self, table: Table, keys: &[String]) -> Vec<Option<(Entry, Option<i64>)>> {
        let map = self.map();
        keys.iter().map(|k| map.get(table, k).map(|c| (c.entry.clone(), c.rowid.map(NonZeroI64::get)))).collect()
    }

    /// The rows that held the documents `ops` write, where known.
    pub fn rowids(&self, ops: &[Op]) -> Vec<Option<i64>> {
        let map = self.map();
        ops.iter()
            .map(|op| match op {
                // A document expected absent has no row yet: nothing to look up (a
                // warehouse sync's batches are mostly new profiles).
                Op::Put { expect: Expect::Absent, .. } | Op::Delete { .. } => None,
                Op::Put { table, key, .. } => map.get(*table, key).and_then(|c| c.rowid).map(NonZeroI64::get),
            })
            .collect()
    }

    /// Takes the fill lock (shared with other fills): read the database only after this.
    pub fn begin_fill(&self) -> FillGuard<'_> {
        FillGuard(self.fill.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Inserts what a fill read (under its guard).
    pub fn fill(
        &self,
        _guard: &FillGuard<'_>,
        table: Table,
        found: impl IntoIterator<Item = (String, Entry, Option<i64>)>,
    ) {
        let mut map = self.map();
        for (key, entry, rowid) in found {
            map.insert(table, key, Cached { entry, rowid: rowid.and_then(NonZeroI64::new) });
        }
        map.shrink_to(self.capacity);
    }

    /// Brings the cache up to date with a change set SQLite has just committed,
    /// each operation with the row it wrote when known; `admit` says whether the
    /// documents it created enter the cache.
    pub fn committed(&self, ops: impl IntoIterator<Item = (Op, Option<i64>)>, admit: Admit) {
        let _fills = self.fill.write().unwrap_or_else(|e| e.into_inner());
        let mut map = self.map();
        for (op, rowid) in ops {
            match (op, rowid) {
                // It was absent, so the cache cannot hold it: leaving it out keeps the
                // cache coherent.
                (Op::Put { expect: Expect::Absent, .. }, _) if admit == Admit::Known => {}
                // Known: where it was written, or a table found by key alone.
                (Op::Put { table, key, value, expect }, rowid)
                    if cached(table) && (rowid.is_some() || by_key(table)) =>
                {
                    let before = match expect {
                        Expect::Version(v) => Some(v),
                        Expect::Absent => None,
                        // The version a blind write produced is not known here: read it again.
                        Expect::Any => {
                            map.remove(table, &key);
                            continue;
                        }
                    };
                    let (entry, rowid) =
                        (Entry { version: next_version(before), value }, rowid.and_then(NonZeroI64::new));
                    map.insert(table, key, Cached { entry, rowid });
                }
                // Where the row is not known, neither is the document: read it again.
                (Op::Put { table, key, .. }, None) if cached(table) => map.remove(table, &key),
                (Op::Delete { table, key, .. }, _) if cached(table) => map.remove(table, &key),
                _ => {}
            }
        }
        map.shrink_to(self.capacity);
    }
}

impl Map {
    fn get(&self, table: Table, key: &str) -> Option<&Cached> {
        self.entries.get(&table)?.get(key)
    }

    fn insert(&mut self, table: Table, key: String, cached: Cached) {
        let key_len = key.len();
        self.bytes += size(&key, &cached.entry);
        if let Some(old) = self.entries.entry(table).or_default().insert(key, cached) {
            self.bytes -= key_len + old.entry.value.len() + OVERHEAD;
        }
    }

    fn remove(&mut self, table: Table, key: &str) {
        if let Some(old) = self.entries.get_mut(&table).and_then(|m| m.remove(key)) {
            self.bytes -= size(key, &old.entry);
        }
    }

    /// Evicts entries (in no particular order: the workload reads profiles at random)
    /// until the cache is a tenth under its capacity, so evicting is rare.
    fn shrink_to(&mut self, capacity: usize) {
        if self.bytes <= capacity {
            return;
        }
        let mut excess = self.bytes - capacity * 9 / 10;
        let mut freed = 0;
        for entries in self.entries.values_mut() {
            entries.retain(|key, c| {
                if excess == 0 {
                    return true;
                }
                let s = size(key, &c.entry);
                excess = excess.saturating_sub(s);
                freed += s;
                false
            });
        }
        self.bytes -= freed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str, expect: Expect) -> Op {
        Op::Put { table: Table::Profile, key: key.into(), value: value.as_bytes().to_vec(), expect }
    }

    #[test]
    fn commits_keep_versions_and_rows_and_forget_what_they_cannot_know() {
        let c = DocCache::new(1 << 20);
        c.committed(
            vec![
                (put("a", "1", Expect::Absent), Some(10)),
                (put("b", "2", Expect::Version(4)), Some(11)),
                (put("c", "3", Expect::Any), None),
                (put("d", "4", Expect::Version(1)), None),
            ],
            Admit::New,
        );
        assert_eq!(c.get(Table::Profile, "a"), Some(Entry { version: 1, value: b"1".to_vec() }));
        assert_eq!(c.get(Table::Profile, "b"), Some(Entry { version: 5, value: b"2".to_vec() }));
        assert_eq!(c.get(Table::Profile, "c"), None);
        assert_eq!(c.get(Table::Profile, "d"), None, "a write whose row is unknown is read again");
        let next = [put("a", "x", Expect::Version(1)), put("b", "y", Expect::Version(5)), put("c", "z", Expect::Any)];
        assert_eq!(c.rowids(&next), vec![Some(10), Some(11), None]);
        c.committed(
            vec![(Op::Delete { table: Table::Profile, key: "a".into(), expect: Expect::Any }, None)],
            Admit::New,
        );
        assert_eq!(c.get(Table::Profile, "a"), None);
        assert_eq!(c.rowids(&next)[0], None);
        // Tables applying does not read are never held.
        c.committed(
            vec![(Op::Put { table: Table::ApiKey, key: "k".into(), value: vec![1], expect: Expect::Absent }, Some(1))],
            Admit::New,
        );
        assert_eq!(c.get(Table::ApiKey, "k"), None);
    }

    #[test]
    fn requests_commits_admit_only_documents_that_existed() {
        let c = DocCache::new(1 << 20);
        c.committed(vec![(put("a", "1", Expect::Absent), Some(10))], Admit::New);
        c.committed(
            vec![
                (put("a", "2", Expect::Version(1)), Some(10)),
                (put("b", "3", Expect::Absent), Some(11)),
                (put("c", "4", Expect::Version(7)), Some(12)),
            ],
            Admit::Known,
        );
        assert_eq!(c.get(Table::Profile, "a"), Some(Entry { version: 2, value: b"2".to_vec() }));
        assert_eq!(c.get(Table::Profile, "b"), None, "a document the commit created waits for its first read");
        assert_eq!(c.get(Table::Profile, "c"), Some(Entry { version: 8, value: b"4".to_vec() }));
    }

    #[test]
    fn stays_within_its_capacity() {
        let c = DocCache::new(10_000);
        let guard = c.begin_fill();
        let entries = (0..1000).map(|i| (format!("k{i}"), Entry { version: 1, value: vec![0; 100] }, Some(i)));
        c.fill(&guard, Table::Profile, entries);
        drop(guard);
        let map = c.map();
        assert!(map.bytes <= 10_000, "{} bytes held", map.bytes);
        assert!(!map.entries[&Table::Profile].is_empty());
        let held = map.entries.values().flat_map(|m| m.iter()).map(|(k, c)| size(k, &c.entry)).sum::<usize>();
        assert_eq!(map.bytes, held);
    }

    #[test]
    fn identifier_entries_are_kept_without_a_row() {
        let c = DocCache::new(1 << 20);
        let ident = |value: &str, expect| Op::Put { table: Table::Ident, key: "i".into(), value: value.into(), expect };
        c.committed(vec![(ident("s1", Expect::Absent), None)], Admit::New);
        assert_eq!(c.get(Table::Ident, "i"), Some(Entry { version: 1, value: b"s1".to_vec() }));
        assert_eq!(c.rowids(&[ident("s2", Expect::Version(1))]), vec![None]);
        c.committed(vec![(ident("s2", Expect::Version(1)), None)], Admit::Known);
        assert_eq!(c.get(Table::Ident, "i"), Some(Entry { version: 2, value: b"s2".to_vec() }));
        // A blind write's version is not known here, with or without rows.
        c.committed(vec![(ident("s3", Expect::Any), None)], Admit::New);
        assert_eq!(c.get(Table::Ident, "i"), None);
    }
}
