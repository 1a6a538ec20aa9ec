//! The partitioned queue of a store several servers share, with two engines over
//! one memory store of eight partitions standing for two servers: a request is
//! queued as one job per partition, each job is applied once and in order whichever
//! engine applies it, and a read applies ahead of the queue only its user's jobs,
//! which the other engine's applier then skips, also when it was preparing them.

use std::cell::RefCell;

use serde_json::{json, Value};

use super::backlog::Backlog;
use super::queue::apply_batch;
use crate::store::memory::MemoryStore;
use crate::store::{ChangeSet, CommitError, Entry, QueuedJob, Store, StoreError, Table};
use crate::testkit::Kit;

fn server(store: &MemoryStore) -> Kit {
    Kit::configured(store.sharing(), |c| {
        c.applies_in_background = true;
        c.shared_store = true;
    })
}

fn inc(users: &[String]) -> Value {
    let objects: Vec<Value> = users.iter().map(|u| json!({"external_id": u, "n": {"inc": 1}, "last": u})).collect();
    json!({ "attributes": objects })
}

fn pending(store: &MemoryStore) -> Vec<QueuedJob> {
    pollster::block_on(store.queued(0, 100_000)).unwrap()
}

/// Turns of both servers' appliers, one after the other, until the queue is empty.
fn drain(servers: &[&Kit]) {
    for _ in 0..10_000 {
        let mut idle = true;
        for s in servers {
            idle &= pollster::block_on(s.engine().apply_queued_pipelined(s.ctx(), 1, &|| false)).unwrap().is_empty();
        }
        if idle {
            return;
        }
    }
    panic!("the queue did not drain");
}

/// Records of operations applied early (beside them: each partition's turn).
fn records(store: &MemoryStore) -> usize {
    let all = pollster::block_on(store.scan(Table::QueueEarly, "", 1000)).unwrap();
    all.iter().filter(|(k, _)| !k.starts_with("turn/")).count()
}

fn n(kit: &Kit, user: &str) -> Value {
    kit.user(user)["custom_attributes"]["n"].clone()
}

#[test]
fn a_request_is_queued_as_one_job_per_partition_and_two_servers_apply_each_once() {
    let store = MemoryStore::with_partitions(8);
    let (a, b) = (server(&store), server(&store));
    let users: Vec<String> = (0..40).map(|i| format!("u{i}")).collect();
    for round in 0..6 {
        (if round % 2 == 0 { &a } else { &b }).track(inc(&users));
    }
    let jobs = pending(&store);
    let parts: std::collections::BTreeSet<u16> = jobs.iter().map(|j| j.part).collect();
    assert_eq!(parts.len(), 8, "forty users reach every partition");
    assert_eq!(jobs.len(), 6 * 8, "each request as one job per partition");
    drain(&[&a, &b]);
    assert!(pending(&store).is_empty());
    for u in &users {
        assert_eq!(n(&a, u), json!(6), "{u}: every request once");
        assert_eq!(n(&b, u), json!(6));
    }
}

#[test]
fn a_read_applies_only_its_user_s_jobs_and_the_other_server_skips_them() {
    let store = MemoryStore::with_partitions(8);
    let (a, b) = (server(&store), server(&store));
    for _ in 0..5 {
        a.track(inc(&["x".into(), "y".into()]));
    }
    b.track(inc(&["z".into()]));
    assert_eq!(n(&b, "x"), json!(5), "server b reads what a acknowledged");
    assert_eq!(records(&store), 5, "x's five operations, applied ahead of the queue");
    assert_eq!(pending(&store).len(), 11, "the queue itself has not moved");
    drain(&[&a, &b]);
    for (user, want) in [("x", 5), ("y", 5), ("z", 1)] {
        assert_eq!(n(&a, user), json!(want), "{user}");
    }
    assert_eq!(records(&store), 0, "records go when the cursor passes them");
}

/// A shared store that runs `hook` before the first acknowledging commit, and
/// notes the partitions an applier looks into.
struct BeforeAck<'k> {
    inner: MemoryStore,
    hook: RefCell<Option<Box<dyn FnOnce() + 'k>>>,
    looked: RefCell<Vec<u16>>,
}

impl Store for BeforeAck<'_> {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        self.inner.get(table, key).await
    }
    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
        self.inner.scan(table, prefix, limit).await
    }
    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        if changes.ack.is_some() {
            let hook = self.hook.borrow_mut().take();
            if let Some(hook) = hook {
                hook();
            }
        }
        self.inner.commit(changes).await
    }
    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
        self.inner.enqueue(job).await
    }
    fn partitions(&self) -> u16 {
        self.inner.partitions()
    }
    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        self.inner.queued(after, limit).await
    }
    async fn queued_in(&self, part: u16, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        self.looked.borrow_mut().push(part);
        self.inner.queued_in(part, after, limit).await
    }
    async fn busy_partitions(&self, among: &[u16]) -> Result<Vec<u16>, StoreError> {
        self.inner.busy_partitions(among).await
    }
    fn finds_by_name(&self) -> bool {
        self.inner.finds_by_name()
    }
    async fn queued_naming(&self, names: &[i64]) -> Result<Vec<QueuedJob>, StoreError> {
        self.inner.queued_naming(names).await
    }
    async fn queue_tail(&self) -> Result<u64, StoreError> {
        self.inner.queue_tail().await
    }
}

#[test]
fn jobs_another_server_applied_early_while_a_batch_was_prepared_are_not_applied_twice() {
    let store = MemoryStore::with_partitions(8);
    let (a, b) = (server(&store), server(&store));
    for _ in 0..3 {
        a.track(inc(&["x".into()]));
    }
    let part = pending(&store)[0].part;
    // Server a's applier has read x's jobs and what they touch; before it commits,
    // a read on server b applies them early.
    let racing = BeforeAck {
        inner: store.sharing(),
        hook: RefCell::new(Some(Box::new(|| assert_eq!(n(&b, "x"), json!(3))))),
        looked: RefCell::default(),
    };
    let mut backlog = Backlog::with(Default::default(), Default::default(), true);
    let run = pollster::block_on(apply_batch(&racing, &mut backlog, [3; 16], part, 64)).unwrap();
    assert_eq!(run.applied, 0, "every job was applied early: the retry applies none again");
    assert!(pending(&store).is_empty(), "and acknowledges them");
    assert_eq!(n(&a, "x"), json!(3));
}

#[test]
fn an_applier_looks_only_into_the_partitions_that_have_jobs() {
    let store = MemoryStore::with_partitions(8);
    let a = server(&store);
    a.track(inc(&["x".into()]));
    let part = pending(&store)[0].part;
    let watched = BeforeAck { inner: store.sharing(), hook: RefCell::new(None), looked: RefCell::default() };
    let applier = crate::testkit::shared_engine(watched);
    let run = pollster::block_on(applier.apply_queued_pipelined(a.ctx(), 1, &|| false)).unwrap();
    assert_eq!(run.applied, 1);
    assert_eq!(*applier.store().looked.borrow(), vec![part], "not the seven empty partitions");
    applier.store().looked.borrow_mut().clear();
    assert!(pollster::block_on(applier.apply_queued_pipelined(a.ctx(), 1, &|| false)).unwrap().is_empty());
    assert!(applier.store().looked.borrow().is_empty(), "an idle applier looks into none");
    assert_eq!(n(&a, "x"), json!(1));
}

#[test]
fn an_operation_giving_a_user_an_address_holds_the_address_s_partition_until_applied() {
    use super::partition::of;
    use crate::ids::{Email, ExternalId, Identifier, WorkspaceName};
    let store = MemoryStore::with_partitions(8);
    let (a, b) = (server(&store), server(&store));
    let ws = WorkspaceName::parse("test").unwrap();
    let part = |i: Identifier| of(&ws, &i, 8);
    // A user and an address in partitions of their own, the address's above the user's.
    let (user, email) = (0..)
        .map(|n| (format!("user{n}"), format!("family{n}@example.com")))
        .find(|(u, e)| {
            let (pu, pe) = (
                part(Identifier::External(ExternalId::parse(u).unwrap())),
                part(Identifier::Email(Email::parse(e).unwrap())),
            );
            pu < pe
        })
        .unwrap();
    let email_part = part(Identifier::Email(Email::parse(&email).unwrap()));
    // The user gets the address; then a write by the address alone names it.
    a.track(json!({"attributes": [{"external_id": user, "email": email}]}));
    b.track(json!({"attributes": [{"email": email, "tier": "gold"}]}));
    let jobs = pending(&store);
    assert_eq!(jobs.len(), 3, "the first request as a main job and a stub, the second its own: {jobs:?}");
    // The address's partition goes first: it is held at the stub, and applies nothing.
    let mut backlog = Backlog::with(Default::default(), Default::default(), true);
    let run = pollster::block_on(apply_batch(&store, &mut backlog, [5; 16], email_part, 64)).unwrap();
    assert_eq!(run.applied, 0, "held until the user has the address");
    assert_eq!(pending(&store).len(), 3);
    drain(&[&b, &a]);
    assert!(pending(&store).is_empty());
    let profile = a.user(&user);
    assert_eq!(profile["custom_attributes"]["tier"], json!("gold"), "the later write reached the user: {profile}");
    let (status, body) = a.post("/users/export/ids", json!({"email_address": email}));
    assert_eq!(status, 201);
    assert_eq!(body["users"].as_array().unwrap().len(), 1, "one profile has the address: {body}");
}

#[test]
fn a_server_forgets_the_operations_it_applied_early_once_their_jobs_are_gone() {
    let store = MemoryStore::with_partitions(8);
    let a = server(&store);
    let batch = |from: usize, requests: usize| {
        for r in from..from + requests {
            a.track(inc(&(0..40).map(|i| format!("u{r}-{i}")).collect::<Vec<_>>()));
        }
        let jobs = pending(&store);
        let keys: Vec<(u64, u32)> = jobs
            .iter()
            .flat_map(|j| {
                let ops = super::record::decode(&j.job).unwrap().ops.len() as u32;
                (0..ops).map(move |op| (j.seq, op))
            })
            .collect();
        (jobs, keys)
    };
    // This server's reads applied every operation early; then another server's
    // applier passed the first jobs, deleting their records, and more were queued.
    let (gone, mut early) = batch(0, 20);
    drain(&[&a]);
    let (queued, later) = batch(20, 10);
    early.extend(&later);
    assert!(early.len() > 1024, "enough to look: {}", early.len());
    let mut backlog = Backlog::with(Default::default(), Default::default(), true);
    backlog.applied_early(&early);
    pollster::block_on(backlog.prune_early(&store)).unwrap();
    for j in &gone {
        assert!(backlog.early_ops(j.seq).is_empty(), "job {} is gone: its operations are forgotten", j.seq);
    }
    for j in &queued {
        let ops = super::record::decode(&j.job).unwrap().ops.len();
        assert_eq!(backlog.early_ops(j.seq).len(), ops, "job {} is queued: the applier must still skip them", j.seq);
    }
    // Once every job is applied, all go (when the set has doubled since the last look).
    drain(&[&a]);
    let (_, more) = batch(30, 30);
    backlog.applied_early(&more);
    let queued_now = pending(&store);
    pollster::block_on(backlog.prune_early(&store)).unwrap();
    for j in &queued {
        assert!(backlog.early_ops(j.seq).is_empty(), "job {} was applied since", j.seq);
    }
    assert!(queued_now.iter().all(|j| !backlog.early_ops(j.seq).is_empty()));
}

#[test]
fn the_queue_s_backlog_counts_the_jobs_queued_not_the_span_of_their_numbers() {
    let store = MemoryStore::with_partitions(8);
    let a = server(&store);
    for r in 0..3 {
        a.track(inc(&(0..20).map(|i| format!("v{r}-{i}")).collect::<Vec<_>>()));
    }
    // The oldest job's partition passes its jobs; the others keep theirs, on both sides.
    let jobs = pending(&store);
    let mut backlog = Backlog::with(Default::default(), Default::default(), true);
    pollster::block_on(apply_batch(&store, &mut backlog, [7; 16], jobs[0].part, 64)).unwrap();
    let left = pending(&store);
    assert!(left.len() + 1 < jobs.len(), "{} of {} left", left.len(), jobs.len());
    let (status, body) = a.operator(crate::http::Method::Get, "/_engage/queue");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["pending"], json!(left.len()), "{body}");
    assert_eq!(body["oldest_seq"], json!(left[0].seq));
    assert_eq!(body["tail"], json!(jobs[jobs.len() - 1].seq));
}
