//! The names of the users each queued job names (the core's hashes of them,
//! `engage_core::queue::record_names`), kept in memory beside the queue log, so
//! that a request that must read its users' writes asks for the few jobs that name
//! them ([`engage_core::store::Store::queued_naming`]) instead of the engine
//! decoding and indexing every queued job. That index cost the first read during a
//! backlog of 8,000 full track batches 3.6 s and the server 695 MiB.
//!
//! Compact and bounded, because a backlog is bounded in seconds only when the
//! operator wants it to be (`--max-backlog-secs 0` bounds nothing): a name and a job
//! take about 4 bytes, in sorted runs of the jobs' names (the run's directory gives a
//! name's top bits, each entry 16 more and the job's place in the run), and at most
//! [`MAX_PAIRS`] are kept. A map of every name to its jobs took 22 bytes a name and a
//! job: the suite's closed track load (2,800 full batches/s, nothing applied beside
//! it, no bound) peaked at 378 MiB after 15 s. Names keep 28 bits of their hash here,
//! so a lookup may find a job that names none of its users: the reader decodes each
//! job found and takes only its own users' operations.
//!
//! Past the bound, jobs wait unnamed, as do those queued before the log was opened:
//! a lookup names them from the log while there is room, and reads the rest (their
//! records decoded, not kept) for its own names. Once some jobs wait unnamed, newer
//! ones join them, so what is named stays in order.
//!
//! Only the queue's owner enqueues, so it hears of every job.

use std::collections::VecDeque;
use std::sync::Mutex;

use engage_core::store::StoreError;

use super::queue_log::QueueLog;

/// Jobs read from the log at a time while naming or reading unnamed jobs (a full
/// track batch's record is about 25 KB).
const READ_CHUNK: usize = 256;

/// The most names of jobs kept (a name and a job each): about 17 MiB. Under the
/// default backlog bound of 30 s a server applying 300 full batches a second holds
/// about 2M; past it, reads decode the jobs left unnamed.
pub(super) const MAX_PAIRS: usize = 4 << 20;

/// Unnamed jobs are named again only once this share of [`MAX_PAIRS`] is free, so
/// that a full index does not have every lookup decode a chunk of the log to find
/// no room for it.
const ROOM_SHARE: usize = 4;

/// Names a run holds at most (a job's own names never split across runs).
const RUN_PAIRS: usize = 1 << 16;

/// Job numbers a run covers at most: its entries keep a job's place in 16 bits.
const RUN_SPAN: u64 = 1 << 16;

/// A run's directory is by a name's top bits.
const DIR_BITS: u32 = 12;
const DIR_SHIFT: u32 = 32 - DIR_BITS;

/// A name as the runs keep it: its 64 bits folded into 32, of which the directory
/// takes the top 12 and an entry the low 16.
fn short(name: i64) -> u32 {
    let h = name as u64;
    (h ^ (h >> 32)) as u32
}

/// `names` as the runs keep them, sorted, each once.
fn shorts(names: &[i64]) -> Vec<u32> {
    let mut hs: Vec<u32> = names.iter().map(|n| short(*n)).collect();
    hs.sort_unstable();
    hs.dedup();
    hs
}

/// The names of the queued jobs.
pub(super) struct Names {
    state: Mutex<State>,
    /// Held while unnamed jobs are read from the log and named, so that two lookups
    /// do not both read them.
    naming: Mutex<()>,
}

struct State {
    /// Sealed runs of names, oldest jobs first.
    runs: VecDeque<Run>,
    /// The newest named jobs' names, not sealed into a run yet: `(name, job)`, in
    /// job order.
    open: Vec<(u32, u64)>,
    /// Names kept, in `runs` and `open`.
    pairs: usize,
    /// At most this many ([`MAX_PAIRS`]).
    max_pairs: usize,
    /// Jobs `(after, through]` are queued and not named: those queued before the
    /// log was opened, or since the names were full.
    unnamed: Option<(u64, u64)>,
}

/// The names of a span of jobs, sorted by name: a lookup reads one directory
/// bucket.
struct Run {
    /// The job an entry's place counts from.
    first: u64,
    /// The newest job named.
    last: u64,
    /// Where each directory bucket's entries start (one more at the end).
    dir: Box<[u32]>,
    /// `(name's low 16 bits) << 16 | (job - first)`, sorted within each bucket.
    entries: Box<[u32]>,
}

impl Run {
    /// The run of `pairs` (`(name, job)`, jobs spanning under [`RUN_SPAN`]).
    fn seal(mut pairs: Vec<(u32, u64)>) -> Run {
        let first = pairs.iter().map(|p| p.1).min().unwrap_or(0);
        let last = pairs.iter().map(|p| p.1).max().unwrap_or(0);
        pairs.sort_unstable_by_key(|&(h, seq)| (h >> DIR_SHIFT, h as u16, seq));
        let mut dir = vec![0u32; (1 << DIR_BITS) + 1];
        for &(h, _) in &pairs {
            dir[(h >> DIR_SHIFT) as usize + 1] += 1;
        }
        for i in 1..dir.len() {
            dir[i] += dir[i - 1];
        }
        let entries = pairs.iter().map(|&(h, seq)| (u32::from(h as u16) << 16) | (seq - first) as u32).collect();
        Run { first, last, dir: dir.into_boxed_slice(), entries }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The jobs after `after` that `h` may name, into `out`.
    fn naming(&self, h: u32, after: u64, out: &mut Vec<u64>) {
        if self.last <= after {
            return;
        }
        let b = (h >> DIR_SHIFT) as usize;
        let bucket = &self.entries[self.dir[b] as usize..self.dir[b + 1] as usize];
        let low = u32::from(h as u16);
        let start = bucket.partition_point(|e| e >> 16 < low);
        for e in bucket[start..].iter().take_while(|e| *e >> 16 == low) {
            let seq = self.first + u64::from(e & 0xffff);
            if seq > after {
                out.push(seq);
            }
        }
    }

    /// This run without the jobs from `gone` on (`None` when nothing is left).
    fn before(&self, gone: u64) -> Option<Run> {
        let mut dir = vec![0u32; self.dir.len()];
        let mut entries = Vec::with_capacity(self.entries.len());
        let mut last = self.first;
        for b in 0..self.dir.len() - 1 {
            for &e in &self.entries[self.dir[b] as usize..self.dir[b + 1] as usize] {
                let seq = self.first + u64::from(e & 0xffff);
                if seq < gone {
                    entries.push(e);
                    last = last.max(seq);
                }
            }
            dir[b + 1] = entries.len() as u32;
        }
        (!entries.is_empty()).then(|| Run {
            first: self.first,
            last,
            dir: dir.into_boxed_slice(),
            entries: entries.into_boxed_slice(),
        })
    }
}

impl State {
    /// Names job `seq` (newer than every job named) by `names`; false, naming
    /// nothing, when they do not fit.
    fn name(&mut self, seq: u64, names: &[i64]) -> bool {
        let hs = shorts(names);
        if self.pairs + hs.len() > self.max_pairs {
            return false;
        }
        let spans_too_far = self.open.first().is_some_and(|&(_, first)| seq - first >= RUN_SPAN);
        if !self.open.is_empty() && (spans_too_far || self.open.len() + hs.len() > RUN_PAIRS) {
            self.runs.push_back(Run::seal(std::mem::take(&mut self.open)));
        }
        self.open.extend(hs.iter().map(|&h| (h, seq)));
        self.pairs += hs.len();
        true
    }

    /// Whether unnamed jobs are worth reading to name them.
    fn has_room(&self) -> bool {
        self.pairs + self.max_pairs / ROOM_SHARE <= self.max_pairs
    }

    /// The named jobs after `after` that `names` may name.
    fn naming(&self, names: &[i64], after: u64) -> Vec<u64> {
        let hs = shorts(names);
        let mut out = Vec::new();
        for run in &self.runs {
            for &h in &hs {
                run.naming(h, after, &mut out);
            }
        }
        out.extend(self.open.iter().filter(|(h, seq)| *seq > after && hs.binary_search(h).is_ok()).map(|p| p.1));
        out
    }
}

impl Names {
    /// Names for a log whose jobs `(applied, tail]` are queued now, keeping at most
    /// `max_pairs` names of jobs ([`MAX_PAIRS`]).
    pub(super) fn new(applied: u64, tail: u64, max_pairs: usize) -> Names {
        let state = State {
            runs: VecDeque::new(),
            open: Vec::new(),
            pairs: 0,
            max_pairs,
            unnamed: (tail > applied).then_some((applied, tail)),
        };
        Names { state: Mutex::new(state), naming: Mutex::new(()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Job `seq`, the newest queued, names `names`.
    pub(super) fn add(&self, seq: u64, names: Vec<i64>) {
        let mut st = self.state();
        match &mut st.unnamed {
            Some((_, through)) => *through = seq,
            None => {
                if !st.name(seq, &names) {
                    st.unnamed = Some((seq - 1, seq));
                }
            }
        }
    }

    /// Forgets the jobs through `through` (applied): each run once all its jobs are.
    pub(super) fn forget_through(&self, through: u64) {
        let mut st = self.state();
        while st.runs.front().is_some_and(|r| r.last <= through) {
            if let Some(run) = st.runs.pop_front() {
                st.pairs -= run.len();
            }
        }
        if st.open.last().is_some_and(|&(_, seq)| seq <= through) {
            st.pairs -= st.open.len();
            // A drained backlog gives its memory back.
            st.open = Vec::new();
        }
        st.unnamed = match st.unnamed {
            Some((_, end)) if end <= through => None,
            Some((after, end)) => Some((after.max(through), end)),
            None => None,
        };
    }

    /// Forgets the jobs from `first` on (their append failed).
    pub(super) fn forget_from(&self, first: u64) {
        let mut st = self.state();
        st.unnamed = match st.unnamed {
            Some((after, _)) if after + 1 >= first => None,
            Some((after, end)) => Some((after, end.min(first - 1))),
            None => None,
        };
        let kept = st.open.iter().filter(|(_, seq)| *seq < first).count();
        st.pairs -= st.open.len() - kept;
        st.open.truncate(kept);
        while st.runs.back().is_some_and(|r| r.last >= first) {
            let Some(run) = st.runs.pop_back() else { break };
            st.pairs -= run.len();
            if let Some(left) = run.before(first) {
                st.pairs += left.len();
                st.runs.push_back(left);
                break;
            }
        }
    }

    /// The jobs after `after` that may name one of `names` (every job that does, and
    /// perhaps a few that do not), in sequence order. Unnamed jobs are named from
    /// `log` first while there is room, and the rest read from it.
    pub(super) fn naming(&self, log: &QueueLog, names: &[i64], after: u64) -> Result<Vec<u64>, StoreError> {
        if self.state().unnamed.is_some() {
            self.name_unnamed(log)?;
        }
        let (mut seqs, unnamed) = {
            let st = self.state();
            (st.naming(names, after), st.unnamed)
        };
        if let Some((from, through)) = unnamed {
            seqs.extend(read_naming(log, names, from.max(after), through)?);
        }
        seqs.sort_unstable();
        seqs.dedup();
        Ok(seqs)
    }

    /// Names the unnamed jobs in order while there is room, reading them outside the
    /// lock the queue's writer takes for each append. Jobs named before their append
    /// are not in the log yet: they stay unnamed until the next lookup.
    fn name_unnamed(&self, log: &QueueLog) -> Result<(), StoreError> {
        let _one = self.naming.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let after = {
                let st = self.state();
                match st.unnamed {
                    Some((after, _)) if st.has_room() => after,
                    _ => return Ok(()),
                }
            };
            let jobs = log.read_after(after, READ_CHUNK)?;
            if jobs.is_empty() {
                return Ok(());
            }
            let named: Vec<(u64, Vec<i64>)> =
                jobs.iter().map(|j| (j.seq, engage_core::queue::record_names(&j.job))).collect();
            let mut st = self.state();
            for (seq, names) in named {
                // Applied meanwhile (the range moved past it, or is gone).
                let Some((at, end)) = st.unnamed else { return Ok(()) };
                if seq <= at {
                    continue;
                }
                if seq > end || !st.name(seq, &names) {
                    return Ok(());
                }
                st.unnamed = (seq < end).then_some((seq, end));
            }
        }
    }
}

/// The jobs in `(from, through]` of `log` that name one of `names`, read and decoded
/// (the names have no room for them).
fn read_naming(log: &QueueLog, names: &[i64], from: u64, through: u64) -> Result<Vec<u64>, StoreError> {
    let mut wanted = names.to_vec();
    wanted.sort_unstable();
    let mut out = Vec::new();
    let mut at = from;
    while at < through {
        let jobs = log.read_after(at, READ_CHUNK)?;
        let Some(last) = jobs.last().map(|j| j.seq) else { break };
        for job in jobs.iter().take_while(|j| j.seq <= through) {
            if engage_core::queue::record_names(&job.job).iter().any(|n| wanted.binary_search(n).is_ok()) {
                out.push(job.seq);
            }
        }
        at = last;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn empty_log() -> (tempfile::TempDir, QueueLog) {
        let dir = tempfile::tempdir().unwrap();
        let log = QueueLog::open(&dir.path().join("db"), 0).unwrap().unwrap();
        (dir, log)
    }

    #[test]
    fn jobs_are_found_by_any_of_their_names_until_forgotten() {
        let names = Names::new(0, 0, MAX_PAIRS);
        names.add(1, vec![30, 10, 10]);
        names.add(2, vec![20]);
        names.add(3, vec![10, -5]);
        let (_dir, log) = empty_log();
        assert_eq!(names.naming(&log, &[10], 0).unwrap(), vec![1, 3]);
        assert_eq!(names.naming(&log, &[20, -5, 99], 0).unwrap(), vec![2, 3]);
        assert_eq!(names.naming(&log, &[10], 1).unwrap(), vec![3], "those applied are skipped");
        names.forget_through(2);
        assert_eq!(names.naming(&log, &[10, 20, 30], 0).unwrap(), vec![1, 2, 3], "kept until all of theirs go");
        assert_eq!(names.naming(&log, &[10, 20, 30], 2).unwrap(), vec![3]);
        assert!(names.naming(&log, &[99], 0).unwrap().is_empty());
        names.add(4, vec![10, 7]);
        names.add(5, vec![7]);
        names.forget_from(4);
        assert_eq!(names.naming(&log, &[10, 7], 2).unwrap(), vec![3], "a failed append names nothing");
        names.forget_through(3);
        assert!(names.naming(&log, &[10, -5], 0).unwrap().is_empty());
        let st = names.state();
        assert!(st.runs.is_empty() && st.open.is_empty() && st.pairs == 0, "nothing kept for jobs forgotten");
    }

    /// Jobs over many runs (sealed by size and by span) are found as a map of every
    /// name to its jobs finds them, through trims and a failed append.
    #[test]
    fn runs_find_what_a_map_of_every_name_finds() {
        let names = Names::new(0, 0, MAX_PAIRS);
        let mut model: BTreeMap<i64, BTreeSet<u64>> = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // 3,000 users, each job naming up to 40 of them: runs sealed by size; then
        // 70,000 jobs of one name: sealed by span.
        let user = |r: u64| ((r % 3000) as i64 + 1).wrapping_mul(0x5851_f42d_4c95_7f2d);
        let mut seq = 0;
        for count in std::iter::repeat_n(40, 5000).chain(std::iter::repeat_n(1, 70_000)) {
            seq += 1;
            let job: Vec<i64> = (0..1 + next() % count).map(|_| user(next())).collect();
            for n in &job {
                model.entry(*n).or_default().insert(seq);
            }
            names.add(seq, job);
        }
        assert!(names.state().runs.len() >= 2, "sealed by size, then by span");
        let (_dir, log) = empty_log();
        let check = |names: &Names, model: &BTreeMap<i64, BTreeSet<u64>>, after: u64| {
            for probe in (0..3000).step_by(37).map(|u| user(u as u64)) {
                let want: Vec<u64> = model.get(&probe).into_iter().flatten().copied().filter(|s| *s > after).collect();
                let got = names.naming(&log, &[probe], after).unwrap();
                let extra = got.iter().filter(|s| !want.contains(s)).count();
                assert!(want.iter().all(|s| got.contains(s)), "{probe}: every job naming it");
                assert!(extra * 100 <= want.len().max(100), "{probe}: {extra} jobs too many of {}", want.len());
            }
        };
        check(&names, &model, 0);
        names.forget_through(40_000);
        check(&names, &model, 40_000);
        names.forget_from(60_001);
        for jobs in model.values_mut() {
            jobs.retain(|s| *s <= 60_000);
        }
        check(&names, &model, 40_000);
        names.forget_through(60_000);
        let st = names.state();
        assert!(st.runs.is_empty() && st.open.is_empty() && st.pairs == 0);
    }

    /// The records of one track request per entry of `requests`, as a store queues
    /// them, and the names of the users of each.
    fn records(requests: &[&[&str]]) -> Vec<(Vec<u8>, Vec<i64>)> {
        use engage_core::provision::{create_key, Permission, WorkspaceName};
        use engage_core::store::memory::MemoryStore;
        use engage_core::{Config, Engine, Method, Request, Store};
        let engine = Engine::new(MemoryStore::new(), Config { rate_limits: false, ..Config::default() });
        let ws = WorkspaceName::parse("w").unwrap();
        let key = pollster::block_on(create_key(engine.store(), &ws, Permission::ALL.to_vec(), crate::ctx())).unwrap();
        for users in requests {
            let attributes: Vec<_> = users.iter().map(|u| serde_json::json!({"external_id": u, "n": 1})).collect();
            let request = Request::new(Method::Post, "/users/track")
                .header("Authorization", &format!("Bearer {key}"))
                .body(serde_json::json!({ "attributes": attributes }).to_string());
            assert_eq!(pollster::block_on(engine.handle(request, crate::ctx())).status, 201);
        }
        let jobs = pollster::block_on(engine.store().queued(0, requests.len())).unwrap();
        jobs.into_iter().map(|j| (engage_core::queue::record_names(&j.job), j.job)).map(|(n, j)| (j, n)).collect()
    }

    /// Past its bound, jobs wait unnamed and lookups read them from the log; once
    /// the applied ones are forgotten, they are named again, in order.
    #[test]
    fn jobs_past_the_bound_are_read_from_the_log_until_there_is_room() {
        let jobs = records(&[&["ann", "bob"], &["cy"], &["ann", "dee"], &["eve"], &["bob"]]);
        let name = |i: usize, n: usize| jobs[i].1[n];
        let (ann, bob, cy, dee) = (name(0, 0), name(0, 1), name(1, 0), name(2, 1));
        assert_eq!(name(2, 0), ann);
        let (_dir, log) = empty_log();
        // Room for four names: the first three jobs take them (2 + 1 + 2 is five:
        // the third does not fit, and every job after it waits unnamed).
        let names = Names::new(0, 0, 4);
        for (i, (record, job_names)) in jobs.iter().enumerate() {
            names.add(i as u64 + 1, job_names.clone());
            assert_eq!(log.append(std::slice::from_ref(record)).unwrap(), vec![i as u64 + 1]);
        }
        assert_eq!(names.state().unnamed, Some((2, 5)));
        assert_eq!(names.naming(&log, &[ann], 0).unwrap(), vec![1, 3], "the unnamed read from the log");
        assert_eq!(names.naming(&log, &[bob, dee], 0).unwrap(), vec![1, 3, 5]);
        assert_eq!(names.naming(&log, &[cy], 1).unwrap(), vec![2]);
        assert_eq!(names.state().unnamed, Some((2, 5)), "no room: still unnamed");
        names.forget_through(2);
        assert_eq!(names.naming(&log, &[ann, bob], 2).unwrap(), vec![3, 5], "named once there is room");
        let st = names.state();
        assert_eq!((st.unnamed, st.pairs), (None, 4), "jobs 1 and 2 forgotten, 3 to 5 named");
    }

    /// Jobs queued before the log was opened, and those queued after them, are
    /// named at the first lookup; one not in the log yet at that moment is named at
    /// the next.
    #[test]
    fn jobs_queued_before_the_log_was_opened_are_named_at_the_first_lookup() {
        let jobs = records(&[&["ann"], &["bob"], &["ann"]]);
        let (_dir, log) = empty_log();
        let all: Vec<Vec<u8>> = jobs.iter().map(|j| j.0.clone()).collect();
        log.append(&all[..2]).unwrap();
        let names = Names::new(0, 2, MAX_PAIRS);
        names.add(3, jobs[2].1.clone());
        let ann = jobs[0].1[0];
        assert_eq!(names.naming(&log, &[ann], 0).unwrap(), vec![1], "job 3 is not in the log yet");
        assert_eq!(names.state().unnamed, Some((2, 3)));
        log.append(&all[2..]).unwrap();
        assert_eq!(names.naming(&log, &[ann], 0).unwrap(), vec![1, 3]);
        assert_eq!(names.state().unnamed, None);
    }
}
