//! The in-memory store: used by unit tests, the playground and as the reference
//! behaviour for the other backends. One lock makes every commit atomic.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use super::{
    expectation_holds, next_version, ChangeSet, CommitError, Entry, Op, PartJob, QueuedJob, Store, StoreError, Table,
};

#[derive(Default, Clone)]
struct Inner {
    docs: BTreeMap<(Table, String), Entry>,
    queue: VecDeque<QueuedJob>,
    next_seq: u64,
    /// Per partition, the highest sequence number acknowledged.
    cursors: BTreeMap<u16, u64>,
    /// The names each queued job was queued with (a store of partitions finds jobs by them).
    names: BTreeMap<u64, Vec<i64>>,
}

/// A store held entirely in memory.
#[derive(Default)]
pub struct MemoryStore {
    inner: std::sync::Arc<Mutex<Inner>>,
    /// Partitions of the queue less one (0: one queue), as in a store several servers
    /// share: for testing the core's partitioned queue without one.
    more_partitions: u16,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// The same store, for a second engine (as two servers share one database).
    pub fn sharing(&self) -> MemoryStore {
        MemoryStore { inner: self.inner.clone(), more_partitions: self.more_partitions }
    }

    /// An empty store whose queue has `n` partitions (at least one).
    pub fn with_partitions(n: u16) -> MemoryStore {
        MemoryStore { more_partitions: n.max(1) - 1, ..MemoryStore::default() }
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
            let acked = |j: &QueuedJob| j.part == ack.part && j.seq <= ack.through;
            if inner.queue.iter().filter(|j| acked(j)).count() as u64 != ack.count {
                return Err(CommitError::Conflict);
            }
            let gone: Vec<u64> = inner.queue.iter().filter(|j| acked(j)).map(|j| j.seq).collect();
            inner.queue.retain(|j| !acked(j));
            for seq in gone {
                inner.names.remove(&seq);
            }
            let cursor = inner.cursors.entry(ack.part).or_default();
            *cursor = (*cursor).max(ack.through);
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
        Ok(self.enqueue_parts(vec![PartJob { part: 0, job, names: vec![] }]).await?[0])
    }

    fn partitions(&self) -> u16 {
        self.more_partitions + 1
    }

    async fn enqueue_parts(&self, jobs: Vec<PartJob>) -> Result<Vec<u64>, StoreError> {
        if jobs.iter().any(|j| j.part > self.more_partitions) {
            return Err(StoreError("no such partition of the queue".into()));
        }
        let mut inner = self.lock();
        let mut seqs = Vec::with_capacity(jobs.len());
        for PartJob { part, job, names } in jobs {
            inner.next_seq += 1;
            let seq = inner.next_seq;
            inner.queue.push_back(QueuedJob { seq, part, job });
            if self.more_partitions > 0 {
                inner.names.insert(seq, names);
            }
            seqs.push(seq);
        }
        Ok(seqs)
    }

    /// A store with partitions stands for one several servers share.
    fn finds_by_name(&self) -> bool {
        self.more_partitions > 0
    }

    async fn queued_naming(&self, names: &[i64]) -> Result<Vec<QueuedJob>, StoreError> {
        let inner = self.lock();
        let named = |seq| inner.names.get(&seq).is_some_and(|ns| ns.iter().any(|n| names.contains(n)));
        Ok(inner.queue.iter().filter(|j| named(j.seq)).cloned().collect())
    }

    /// A store with partitions stands for one several servers share.
    async fn applied_cursors(&self) -> Result<Option<Vec<u64>>, StoreError> {
        if self.more_partitions == 0 {
            return Ok(None);
        }
        let inner = self.lock();
        Ok(Some((0..=self.more_partitions).map(|p| inner.cursors.get(&p).copied().unwrap_or(0)).collect()))
    }

    async fn queued_at(&self, seqs: &[u64]) -> Result<Vec<QueuedJob>, StoreError> {
        Ok(self.lock().queue.iter().filter(|j| seqs.binary_search(&j.seq).is_ok()).cloned().collect())
    }

    async fn queued_count(&self) -> Result<Option<u64>, StoreError> {
        Ok((self.more_partitions > 0).then(|| self.lock().queue.len() as u64))
    }

    async fn busy_partitions(&self, among: &[u16]) -> Result<Vec<u16>, StoreError> {
        let inner = self.lock();
        Ok(among.iter().copied().filter(|p| inner.queue.iter().any(|j| j.part == *p)).collect())
    }

    async fn queued_in(&self, part: u16, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        Ok(self.lock().queue.iter().filter(|j| j.part == part && j.seq > after).take(limit).cloned().collect())
    }

    async fn queue_tail(&self) -> Result<u64, StoreError> {
        Ok(self.lock().next_seq)
    }

    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        Ok(self.lock().queue.iter().filter(|j| j.seq > after).take(limit).cloned().collect())
    }

    async fn nothing_queued(&self) -> Result<bool, StoreError> {
        Ok(self.lock().queue.is_empty())
    }
}
