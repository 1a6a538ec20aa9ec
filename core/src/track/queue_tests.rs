//! The queue applier's tests: pipelined batches, failed commits, jobs set aside.

use std::cell::Cell;

use serde_json::json;

use super::*;
use crate::store::memory::MemoryStore;
use crate::store::{Entry, Table};
use crate::testkit::Kit;

/// Twelve requests in which each batch depends on the one before: one counter
/// and one event on the same user everywhere, and a user created in each request
/// and updated again in the next.
fn enqueue_chained(kit: &Kit) {
    for i in 0..12 {
        let mut attributes = vec![
            json!({"external_id": "u1", "visits": {"inc": 1}}),
            json!({"external_id": format!("new-{i}"), "first_name": "Ann"}),
        ];
        if i > 0 {
            attributes.push(json!({"external_id": format!("new-{}", i - 1), "last_name": "Lee"}));
        }
        let events = vec![json!({"external_id": "u1", "name": "played", "time": "2026-11-01T10:00:00Z"})];
        kit.track(json!({"attributes": attributes, "events": events}));
    }
}

fn check_chained(kit: &Kit) {
    let u1 = kit.user("u1");
    assert_eq!(u1["custom_attributes"]["visits"], json!(12), "{u1}");
    assert_eq!(u1["custom_events"][0]["count"], json!(12), "{u1}");
    for i in 0..12 {
        let users = kit.users(json!({"external_ids": [format!("new-{i}")]}));
        assert_eq!(users.len(), 1, "new-{i} exists exactly once");
        assert_eq!(users[0]["first_name"], json!("Ann"));
        assert_eq!(users[0]["last_name"], if i < 11 { json!("Lee") } else { serde_json::Value::Null });
    }
}

#[test]
fn pipelined_batches_build_on_the_one_still_committing() {
    for in_order in [false, true] {
        let kit = Kit::new();
        enqueue_chained(&kit);
        // Two jobs a batch: six batches, each reading what the one before wrote. Had a
        // batch missed it (a stale profile or identifier), its commit would conflict and
        // the call would stop early.
        let store = Interfering::new(kit.engine().store(), 0, in_order);
        let applied = pollster::block_on(queue_run(&store, 2, 100));
        assert_eq!(applied, 12, "in order: {in_order}");
        assert!(pollster::block_on(kit.engine().store().queued(0, 10)).unwrap().is_empty());
        check_chained(&kit);
    }
}

async fn queue_run<S: Store>(store: &S, batch: usize, rounds: usize) -> usize {
    apply_pipelined(store, &mut Backlog::default(), [7; 16], 0, batch, rounds, &|| false).await.unwrap().applied
}

/// A store whose applier commits land only after the applier has prepared its
/// next batch (they wait one poll, as a commit on another thread would), and whose
/// every `fail_every`-th applier commit fails as if another writer had committed first.
/// With `in_order`, it says its commits land in the order they start (they do: each
/// lands when awaited, and the applier awaits them in that order), so the applier
/// hands a batch over before the one before it has landed.
struct Interfering<'a> {
    inner: &'a MemoryStore,
    commits: Cell<u32>,
    fail_every: u32,
    in_order: bool,
}

impl<'a> Interfering<'a> {
    fn new(inner: &'a MemoryStore, fail_every: u32, in_order: bool) -> Interfering<'a> {
        Interfering { inner, commits: Cell::new(0), fail_every, in_order }
    }
}

impl Store for Interfering<'_> {
    fn commits_in_order(&self) -> bool {
        self.in_order
    }
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        self.inner.get(table, key).await
    }
    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
        self.inner.scan(table, prefix, limit).await
    }
    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        if changes.ack.is_some() {
            crate::testkit::yield_once().await;
            self.commits.set(self.commits.get() + 1);
            if self.fail_every > 0 && self.commits.get().is_multiple_of(self.fail_every) {
                return Err(CommitError::Conflict);
            }
        }
        self.inner.commit(changes).await
    }
    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
        self.inner.enqueue(job).await
    }
    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        self.inner.queued(after, limit).await
    }
    async fn queue_tail(&self) -> Result<u64, StoreError> {
        self.inner.queue_tail().await
    }
}

#[test]
fn a_shared_email_given_in_the_batch_still_committing_is_found() {
    let kit = Kit::new();
    kit.track(json!({"attributes": [{"external_id": "old", "email": "shared@example.com"}]}));
    kit.track(json!({"attributes": [{"external_id": "new", "email": "shared@example.com"}]}));
    kit.track(json!({"attributes": [{"email": "shared@example.com", "picked": true}]}));
    // One job a batch: the third is prepared while the second (which gave "new" the
    // address) is still committing, so only the unit of work knows "new" has it.
    let store = Interfering::new(kit.engine().store(), 0, false);
    assert_eq!(pollster::block_on(queue_run(&store, 1, 100)), 3);
    assert_eq!(kit.user("new")["custom_attributes"]["picked"], json!(true));
    assert!(kit.user("old").get("custom_attributes").is_none());
}

#[test]
fn a_failed_commit_voids_what_was_built_on_it_and_nothing_is_lost_or_doubled() {
    for in_order in [false, true] {
        let kit = Kit::new();
        enqueue_chained(&kit);
        let store = Interfering::new(kit.engine().store(), 3, in_order);
        let mut calls = 0;
        while !pollster::block_on(store.queued(0, 1)).unwrap().is_empty() {
            calls += 1;
            assert!(calls < 50, "the queue does not drain");
            pollster::block_on(queue_run(&store, 2, 100));
        }
        assert!(calls > 1, "commits failed, so the pipeline was restarted");
        check_chained(&kit);
    }
}

#[test]
fn a_job_that_cannot_be_decoded_is_kept_aside_not_dropped_and_the_queue_goes_on() {
    let kit = Kit::new();
    let store = kit.engine().store();
    kit.track(json!({"attributes": [{"external_id": "before", "n": 1}]}));
    let bad_text = pollster::block_on(store.enqueue(b"{\"not\": \"a job\"}".to_vec())).unwrap();
    let bad_bytes = pollster::block_on(store.enqueue(vec![0xff, 0x00, 0x41])).unwrap();
    kit.track(json!({"attributes": [{"external_id": "after", "n": 2}]}));
    let run = pollster::block_on(apply_batch(store, &mut Backlog::default(), [1; 16], 0, 64)).unwrap();
    assert_eq!(run, QueueRun { applied: 2, set_aside: 2 });
    assert!(pollster::block_on(store.queued(0, 10)).unwrap().is_empty(), "the queue is not blocked");
    assert_eq!(kit.user("before")["custom_attributes"]["n"], json!(1));
    assert_eq!(kit.user("after")["custom_attributes"]["n"], json!(2));
    let (status, body) = kit.operator(crate::http::Method::Get, "/_engage/queue/set-aside");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["count"], json!(2));
    assert_eq!(body["jobs"][0]["seq"], json!(bad_text));
    assert_eq!(body["jobs"][0]["job"], json!("{\"not\": \"a job\"}"));
    assert!(body["jobs"][0]["error"].as_str().unwrap().contains("corrupt document"), "{body}");
    assert_eq!(body["jobs"][1]["seq"], json!(bad_bytes));
    assert_eq!((body["jobs"][1]["job"].as_str(), body["jobs"][1]["hex"].as_bool()), (Some("ff0041"), Some(true)));
}

#[test]
fn a_read_that_catches_up_over_a_job_it_cannot_decode_still_answers() {
    let kit = Kit::new();
    pollster::block_on(kit.engine().store().enqueue(b"garbage".to_vec())).unwrap();
    let resp = kit.send(crate::http::Method::Post, "/users/export/ids", json!({"external_ids": ["x"]}));
    assert_eq!(resp.status, 201);
    assert!(
        resp.internal.as_deref().is_some_and(|n| n.contains("1 queued job(s) could not be decoded: kept aside")),
        "{:?}",
        resp.internal
    );
}

#[test]
fn a_host_can_apply_fewer_jobs_per_commit_than_its_batch_and_always_at_least_one() {
    let kit = Kit::over(MemoryStore::new(), true);
    enqueue_chained(&kit);
    let engine = kit.engine();
    let applied = |max| pollster::block_on(engine.apply_queued_up_to(kit.ctx(), max)).unwrap().applied;
    assert_eq!(applied(3), 3);
    assert_eq!(applied(1), 1);
    assert_eq!(applied(0), 1, "asked for none, it still moves the queue on");
    assert_eq!(pollster::block_on(engine.store().queued(0, 100)).unwrap().len(), 7);
    assert_eq!(applied(100), 7);
    assert_eq!(applied(100), 0);
    check_chained(&kit);
}

#[test]
fn turns_stay_short_until_the_appliers_rate_is_measured_and_then_the_bound_refuses() {
    let kit = Kit::configured(MemoryStore::new(), |c| {
        c.max_backlog_secs = Some(1);
        c.apply_batch = 1;
        c.applies_in_background = true;
    });
    let jobs = crate::track::pressure::MIN_PENDING as usize + 200;
    for i in 0..jobs {
        kit.track(json!({"attributes": [{"external_id": format!("u{i}"), "n": i}]}));
    }
    let at = |ms: i64| crate::ctx::Ctx::new(crate::time::Timestamp(ms), [3; 16]);
    let turn =
        |ms: i64| pollster::block_on(kit.engine().apply_queued_pipelined(at(ms), 64, &|| false)).unwrap().applied;
    // No rate yet: the applier does not hold off for requests (it applies, to measure
    // one), and a short turn, measured when the next one starts.
    assert!(!kit.engine().defers_applying(true, at(0).now));
    assert_eq!(turn(0), crate::track::pressure::UNMEASURED_ROUNDS);
    // Measured (4 jobs in 2 s): a full turn, and the backlog is far past 1 s of applying.
    assert_eq!(turn(2000), 64);
    assert!(!kit.engine().defers_applying(true, at(2000).now), "past half the bound it applies");
    let (status, body) = kit.post("/users/track", json!({"attributes": [{"external_id": "late", "n": 1}]}));
    assert_eq!(status, 503, "{body}");
    assert!(body["message"].as_str().unwrap().contains("too many writes are waiting"), "{body}");
    let pending = pollster::block_on(kit.engine().store().queued(0, jobs * 2)).unwrap().len();
    assert_eq!(pending, jobs - 4 - 64, "the refused request queued nothing");
}

/// A kit whose engine has a background applier, one job a batch and no backlog bound.
fn background_kit() -> Kit {
    Kit::configured(MemoryStore::new(), |c| {
        c.max_backlog_secs = None;
        c.apply_batch = 1;
        c.applies_in_background = true;
    })
}

#[test]
fn the_applier_holds_off_while_requests_saturate_the_server_and_applies_once_they_let_up_or_past_the_limit() {
    use crate::track::pressure::{DEFER_LIMIT_MS, SATURATED_MEMORY_MS};
    let kit = background_kit();
    for i in 0..10 {
        kit.track(json!({"attributes": [{"external_id": format!("u{i}"), "n": i}]}));
    }
    let (engine, at) = (kit.engine(), |ms: i64| crate::ctx::Ctx::new(crate::time::Timestamp(ms), [3; 16]));
    let pending = || pollster::block_on(engine.store().queued(0, 100)).unwrap().len();
    let turn = |ms: i64, saturated: bool| {
        pollster::block_on(engine.apply_queued_pipelined(at(ms), 64, &move || saturated)).unwrap().applied
    };
    // A turn the burst finds under way stops after its batch.
    assert_eq!(turn(0, true), 1);
    assert!(engine.defers_applying(true, at(0).now));
    assert!(engine.defers_applying(true, at(DEFER_LIMIT_MS - 1).now));
    assert_eq!(pending(), 9, "nothing applied while it holds off");
    // A load that goes on past the limit is applied, whole turns.
    assert!(!engine.defers_applying(true, at(DEFER_LIMIT_MS).now));
    assert_eq!(turn(DEFER_LIMIT_MS, true), 9);
    // Requests letting up start no new stretch while jobs wait: one queued now is
    // applied, saturated or not.
    kit.track(json!({"attributes": [{"external_id": "late", "n": 1}]}));
    let quiet = DEFER_LIMIT_MS + SATURATED_MEMORY_MS;
    assert!(!engine.defers_applying(false, at(quiet).now));
    assert!(!engine.defers_applying(true, at(quiet + 1).now));
    assert_eq!(turn(quiet + 1, true), 1);
    // Once a turn finds nothing to apply, the next burst is held off again.
    assert_eq!(turn(quiet + 2, true), 0);
    kit.track(json!({"attributes": [{"external_id": "later", "n": 1}]}));
    assert!(engine.defers_applying(true, at(quiet + 3).now));
    assert!(!engine.defers_applying(false, at(quiet + 3 + SATURATED_MEMORY_MS).now));
    assert_eq!(turn(quiet + 3 + SATURATED_MEMORY_MS, false), 1, "a turn of a quiet server runs whole");
    assert_eq!(pending(), 0);
}

#[test]
fn the_applier_repays_what_reads_catching_up_applied_before_it_yields_to_them() {
    let kit = background_kit();
    for i in 0..40 {
        kit.track(json!({"attributes": [
            {"external_id": "read", "n": {"inc": 1}},
            {"external_id": format!("other{i}"), "n": i}
        ]}));
    }
    let (engine, at) = (kit.engine(), |ms: i64| crate::ctx::Ctx::new(crate::time::Timestamp(ms), [3; 16]));
    let pending = || pollster::block_on(engine.store().queued(0, 100)).unwrap().len();
    let turn = |rounds: usize| pollster::block_on(engine.apply_queued_pipelined(at(0), rounds, &|| false)).unwrap();
    // A read applies its user's part of all 40 jobs, in its turn at the gate.
    let (status, body) = kit.post("/users/export/ids", json!({"external_ids": ["read"]}));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["users"][0]["custom_attributes"]["n"], 40);
    assert_eq!(pending(), 40, "the jobs stay queued for the others' parts");
    // The applier's next turn applies as many whole jobs, whatever it was asked for.
    assert_eq!(turn(1).applied, 40);
    kit.track(json!({"attributes": [{"external_id": "late", "n": 1}]}));
    kit.track(json!({"attributes": [{"external_id": "later", "n": 1}]}));
    assert_eq!(turn(1).applied, 1, "repaid: a turn of one batch again");
    let (status, body) = kit.post("/users/export/ids", json!({"external_ids": ["other39", "later"]}));
    assert_eq!(status, 201, "{body}");
    let n: Vec<_> = body["users"].as_array().unwrap().iter().map(|u| u["custom_attributes"]["n"].clone()).collect();
    assert!(n.contains(&json!(39)) && n.contains(&json!(1)), "{body}");
}

#[test]
fn jobs_queued_as_json_before_an_upgrade_are_counted_and_applied_after_it() {
    // A queue left by a version that wrote JSON records (version 0): the records of
    // these requests, as it encoded them.
    let earlier = Kit::new();
    let first = json!({"external_id": "kept", "tier": "gold", "visits": {"inc": 2}});
    let events = json!([{"external_id": "kept", "name": "played", "time": "2026-11-01T10:00:00Z"}]);
    earlier.track(json!({"attributes": [first], "events": events}));
    let mut many = serde_json::Map::new();
    many.insert("external_id".into(), json!("full"));
    for i in 0..999 {
        many.insert(format!("a{i}"), json!(i));
    }
    earlier.track(json!({"attributes": [many]}));
    let legacy: Vec<Vec<u8>> = pollster::block_on(earlier.engine().store().queued(0, 10))
        .unwrap()
        .iter()
        .map(|q| serde_json::to_vec(&record::decode(&q.job).unwrap()).unwrap())
        .collect();
    assert_eq!(legacy.len(), 2);
    // This version starts on that queue (same workspace name, a fresh ledger).
    let store = Kit::new().into_store();
    for r in legacy {
        assert_eq!(r[0], b'{');
        pollster::block_on(store.enqueue(r)).unwrap();
    }
    let kit = Kit::over(store, false);
    // Its ledger counted the JSON jobs: 999 custom attributes are pending for "full",
    // so two more are refused at once. Had it skipped them, this would be a 201 and
    // the job set aside later.
    let (status, body) = kit.post("/users/track", json!({"attributes": [{"external_id": "full", "b1": 1, "b2": 2}]}));
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("1000"), "{body}");
    // A new job, queued as MessagePack after the JSON ones, applies in order with them.
    kit.track(json!({"attributes": [{"external_id": "kept", "visits": {"inc": 1}}]}));
    let queued = pollster::block_on(kit.engine().store().queued(0, 10)).unwrap();
    assert_eq!(queued.last().unwrap().job[0], record::MSGPACK);
    let run = pollster::block_on(apply_batch(kit.engine().store(), &mut Backlog::default(), [1; 16], 0, 64)).unwrap();
    assert_eq!(run.set_aside, 0);
    assert!(pollster::block_on(kit.engine().store().queued(0, 10)).unwrap().is_empty());
    let kept = kit.user("kept");
    assert_eq!(kept["custom_attributes"]["visits"], json!(3), "{kept}");
    assert_eq!(kept["custom_attributes"]["tier"], json!("gold"), "{kept}");
    assert_eq!(kept["custom_events"][0]["count"], json!(1), "{kept}");
    let full = kit.user("full");
    assert_eq!(full["custom_attributes"].as_object().unwrap().len(), 999);
}

#[test]
fn the_backlog_bound_reads_the_queue_s_tail_once_a_second_and_then_sees_another_server_s_jobs() {
    let store = MemoryStore::new();
    let server = || {
        Kit::configured(store.sharing(), |c| {
            c.max_backlog_secs = Some(30);
            c.applies_in_background = true;
            c.shared_store = true;
        })
    };
    let at = |ms: i64| crate::ctx::Ctx::new(crate::time::Timestamp(1_800_000_000_000 + ms), [5; 16]);
    let track = |kit: &Kit, ms: i64, user: &str| {
        let body = json!({"attributes": [{"external_id": user, "n": 1}]});
        let resp = pollster::block_on(
            kit.engine().handle(kit.request(crate::http::Method::Post, "/users/track", body), at(ms)),
        );
        (resp.status, resp.json_body())
    };
    // Another server queues past what a server lets a backlog grow to before the
    // appliers' rate is measured.
    let unmeasured = crate::track::pressure::UNMEASURED_MAX_PENDING;
    let others = |from: u64| {
        for i in from..from + unmeasured + 8 {
            pollster::block_on(store.enqueue(format!("not a job {i}").into_bytes())).unwrap();
        }
    };
    let (a, b) = (server(), server());
    assert_eq!(track(&a, 0, "a0").0, 201);
    assert_eq!(track(&b, 0, "b0").0, 201);
    others(0);
    // Within the second, the tail read at 0 (and the server's own jobs since) stands.
    assert_eq!(track(&a, 400, "a1").0, 201);
    // Its own job was numbered after the other server's.
    let (status, body) = track(&a, 999, "a2");
    assert_eq!(status, 503, "{body}");
    assert!(body["message"].as_str().unwrap().contains("too many writes are waiting"), "{body}");
    // A second on, the tail is read again.
    assert_eq!(track(&b, 1000, "b1").0, 503);
    // A clock that went back reads it again too.
    others(unmeasured + 8);
    let c = server();
    assert_eq!(track(&c, 5000, "c0").0, 201);
    others(2 * (unmeasured + 8));
    assert_eq!(track(&c, 4000, "c1").0, 503);
    let queued = pollster::block_on(store.queued(0, 100_000)).unwrap().len() as u64;
    assert_eq!(queued, 4 + 3 * (unmeasured + 8), "the refused requests queued nothing");
}
