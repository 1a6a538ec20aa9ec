//! The in-memory store: used by unit tests, the playground and as the reference
//! behaviour for the other backends. One lock makes every commit atomic.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use super::{expectation_holds, next_version, ChangeSet, CommitError, Entry, Op, QueuedJob, Store, StoreError, Table};

#[derive(Default, Clone)]
struct Inner {
    docs: BTreeMap<(Table, String), Entry>,
    queue: VecDeque<QueuedJob>,
    next_seq: u64,
}

/// A store held entirely in memory.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-applied commit (commits
        // are applied to a copy first), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every document, for persisting the store (the playground keeps it in the browser).
    pub fn export_documents(&self) -> Vec<(Table, String, Entry)> {
        self.lock().docs.iter().map(|((t, k), e)| (*t, k.clone(), e.clone())).collect()
    }

    /// Replaces the whole content with previously exported documents.
    pub fn import_documents(&self, docs: Vec<(Table, String, Entry)>) {
        let mut inner = self.lock();
        inner.docs = docs.into_iter().map(|(t, k, e)| ((t, k), e)).collect();
    }
}

impl Store for MemoryStore {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        Ok(self.lock().docs.get(&(table, key.to_string())).cloned())
    }

    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .docs
            .range((table, prefix.to_string())..)
            .take_while(|((t, k), _)| *t == table && k.starts_with(prefix))
            .take(limit)
            .map(|((_, k), e)| (k.clone(), e.clone()))
            .collect())
    }

    /// Each commit is carried out when first polled.
    fn commits_in_order(&self) -> bool {
        true
    }

    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        let mut inner = self.lock();
        // Check everything against a scratch copy of the touched keys, then apply.
        let mut staged: BTreeMap<(Table, String), Option<Entry>> = BTreeMap::new();
        for op in &changes.ops {
            let (table, key, expect) = match op {
                Op::Put { table, key, expect, .. } | Op::Delete { table, key, expect } => (*table, key, *expect),
            };
            let k = (table, key.clone());
            let current = match staged.get(&k) {
                Some(v) => v.as_ref().map(|e| e.version),
                None => inner.docs.get(&k).map(|e| e.version),
            };
            if !expectation_holds(expect, current) {
                return Err(CommitError::Conflict);
            }
            let new = match op {
                Op::Put { value, .. } => Some(Entry { version: next_version(current), value: value.clone() }),
                Op::Delete { .. } => None,
            };
            staged.insert(k, new);
        }
        if let Some(ack) = changes.ack {
            let applied = inner.queue.iter().take_while(|j| j.seq <= ack.through).count() as u64;
            if applied != ack.count {
                return Err(CommitError::Conflict);
            }
            for _ in 0..applied {
                inner.queue.pop_front();
            }
        }
        for (k, v) in staged {
            match v {
                Some(e) => {
                    inner.docs.insert(k, e);
                }
                None => {
                    inner.docs.remove(&k);
                }
            }
        }
        Ok(())
    }

    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
        let mut inner = self.lock();
        inner.next_seq += 1;
        let seq = inner.next_seq;
        inner.queue.push_back(QueuedJob { seq, job });
        Ok(seq)
    }

    async fn queue_tail(&self) -> Result<u64, StoreError> {
        Ok(self.lock().next_seq)
    }

    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        Ok(self.lock().queue.iter().filter(|j| j.seq > after).take(limit).cloned().collect())
    }
}
