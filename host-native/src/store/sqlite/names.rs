//! The names of the users each queued job names (the core's hashes of them,
//! `engage_core::queue::record_names`), kept in memory beside the queue log, so
//! that a request that must read its users' writes asks for the few jobs that name
//! them ([`engage_core::store::Store::queued_naming`]) instead of the engine
//! decoding and indexing every queued job. That index cost the first read during a
//! backlog of 8,000 full track batches 3.6 s and the server 695 MiB; these names
//! cost 8 bytes a user a job.
//!
//! Only the queue's owner enqueues, so it hears of every job. The jobs already queued
//! when the log was opened are read and named at the first lookup, once.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use engage_core::store::StoreError;

use super::queue_log::QueueLog;

/// Jobs read from the log at a time while naming those queued before it was opened.
const READ_CHUNK: usize = 1000;

/// The names of the queued jobs.
pub(super) struct Names {
    state: Mutex<State>,
    /// Held while the jobs queued before the log was opened are named, so that two
    /// first lookups do not both read them.
    first_lookup: Mutex<()>,
}

#[derive(Default)]
struct State {
    /// Jobs `(after, through]` were queued before the log was opened and are not
    /// named yet (`None` once they are).
    unnamed: Option<(u64, u64)>,
    /// Each job's names, in sequence order: what to take out of `by_name` when it is
    /// forgotten.
    jobs: VecDeque<(u64, Box<[i64]>)>,
    /// The jobs naming each name, in sequence order: a lookup costs what it finds,
    /// not the length of the queue (a scan of 100,000 jobs a round of every read
    /// kept a server's request threads busy).
    by_name: HashMap<i64, Seqs>,
}

/// The jobs naming one name: most name one job.
enum Seqs {
    One(u64),
    Many(VecDeque<u64>),
}

impl Seqs {
    fn after(&self, after: u64) -> impl Iterator<Item = u64> + '_ {
        let (front, back) = match self {
            Seqs::One(seq) => (std::slice::from_ref(seq), &[][..]),
            Seqs::Many(seqs) => seqs.as_slices(),
        };
        front.iter().chain(back).copied().filter(move |seq| *seq > after)
    }
}

impl State {
    /// Job `seq` names `names`: the newest job (`newest`) or the oldest.
    fn add(&mut self, seq: u64, mut names: Vec<i64>, newest: bool) {
        names.sort_unstable();
        names.dedup();
        for &name in &names {
            match self.by_name.get_mut(&name) {
                None => {
                    self.by_name.insert(name, Seqs::One(seq));
                }
                Some(Seqs::One(other)) => {
                    let (first, second) = if newest { (*other, seq) } else { (seq, *other) };
                    self.by_name.insert(name, Seqs::Many(VecDeque::from([first, second])));
                }
                Some(Seqs::Many(seqs)) if newest => seqs.push_back(seq),
                Some(Seqs::Many(seqs)) => seqs.push_front(seq),
            }
        }
        let job = (seq, names.into_boxed_slice());
        if newest {
            self.jobs.push_back(job);
        } else {
            self.jobs.push_front(job);
        }
    }

    /// Forgets the oldest job (`oldest`) or the newest.
    fn forget(&mut self, oldest: bool) {
        let job = if oldest { self.jobs.pop_front() } else { self.jobs.pop_back() };
        let Some((seq, names)) = job else { return };
        for name in names.iter() {
            let gone = match self.by_name.get_mut(name) {
                Some(Seqs::Many(seqs)) => {
                    // The oldest job is the first of each of its names', the newest the last.
                    let end = if oldest { seqs.front() } else { seqs.back() };
                    match (end == Some(&seq), oldest) {
                        (true, true) => {
                            seqs.pop_front();
                        }
                        (true, false) => {
                            seqs.pop_back();
                        }
                        (false, _) => seqs.retain(|s| *s != seq),
                    }
                    if seqs.len() == 1 {
                        let last = seqs[0];
                        self.by_name.insert(*name, Seqs::One(last));
                    }
                    false
                }
                Some(Seqs::One(_)) => true,
                None => false,
            };
            if gone {
                self.by_name.remove(name);
            }
        }
    }
}

impl Names {
    /// Names for a log whose jobs `(applied, tail]` are queued now.
    pub(super) fn new(applied: u64, tail: u64) -> Names {
        let unnamed = (tail > applied).then_some((applied, tail));
        Names { state: Mutex::new(State { unnamed, ..State::default() }), first_lookup: Mutex::new(()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Job `seq`, the newest queued, names `names`.
    pub(super) fn add(&self, seq: u64, names: Vec<i64>) {
        self.state().add(seq, names, true);
    }

    /// Forgets the jobs through `through` (applied).
    pub(super) fn forget_through(&self, through: u64) {
        let mut st = self.state();
        while st.jobs.front().is_some_and(|(seq, _)| *seq <= through) {
            st.forget(true);
        }
        if st.by_name.capacity() > 1024 && st.by_name.len() * 4 < st.by_name.capacity() {
            // A drained backlog gives its memory back.
            let len = st.by_name.len();
            st.by_name.shrink_to(len * 2);
            st.jobs.shrink_to_fit();
        }
    }

    /// Forgets the jobs from `first` on (their append failed).
    pub(super) fn forget_from(&self, first: u64) {
        let mut st = self.state();
        while st.jobs.back().is_some_and(|(seq, _)| *seq >= first) {
            st.forget(false);
        }
    }

    /// The jobs after `after` that name one of `names`, in sequence order; `log` is
    /// read the first time for the jobs queued before it was opened.
    pub(super) fn naming(&self, log: &QueueLog, names: &[i64], after: u64) -> Result<Vec<u64>, StoreError> {
        if self.state().unnamed.is_some() {
            self.name_the_first(log)?;
        }
        let st = self.state();
        let mut seqs: Vec<u64> = names.iter().filter_map(|n| st.by_name.get(n)).flat_map(|s| s.after(after)).collect();
        seqs.sort_unstable();
        seqs.dedup();
        Ok(seqs)
    }

    /// Names the jobs queued before the log was opened, reading them outside the
    /// lock the queue's writer takes for each append.
    fn name_the_first(&self, log: &QueueLog) -> Result<(), StoreError> {
        let _one = self.first_lookup.lock().unwrap_or_else(|e| e.into_inner());
        let Some((mut after, through)) = self.state().unnamed else { return Ok(()) };
        let mut first = Vec::new();
        while after < through {
            let jobs = log.read_after(after, READ_CHUNK)?;
            let Some(last) = jobs.last().map(|j| j.seq) else { break };
            for job in jobs.into_iter().take_while(|j| j.seq <= through) {
                first.push((job.seq, engage_core::queue::record_names(&job.job)));
            }
            after = last;
        }
        let mut st = self.state();
        // Older than every job added since. Those applied meanwhile are kept only
        // until the next trim, and lookups skip them.
        for (seq, names) in first.into_iter().rev() {
            st.add(seq, names, false);
        }
        st.unnamed = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_found_by_any_of_their_names_until_forgotten() {
        let names = Names::new(0, 0);
        names.add(1, vec![30, 10, 10]);
        names.add(2, vec![20]);
        names.add(3, vec![10, -5]);
        let dir = tempfile::tempdir().unwrap();
        let log = QueueLog::open(&dir.path().join("db"), 0).unwrap().unwrap();
        assert_eq!(names.naming(&log, &[10], 0).unwrap(), vec![1, 3]);
        assert_eq!(names.naming(&log, &[20, -5, 99], 0).unwrap(), vec![2, 3]);
        assert_eq!(names.naming(&log, &[10], 1).unwrap(), vec![3], "those applied are skipped");
        names.forget_through(2);
        assert_eq!(names.naming(&log, &[10, 20, 30], 0).unwrap(), vec![3]);
        assert!(names.naming(&log, &[99], 0).unwrap().is_empty());
        names.add(4, vec![10, 7]);
        names.add(5, vec![7]);
        names.forget_from(4);
        assert_eq!(names.naming(&log, &[10, 7], 0).unwrap(), vec![3], "a failed append names nothing");
        names.forget_through(3);
        assert!(names.naming(&log, &[10, -5], 0).unwrap().is_empty());
        let st = names.state();
        assert!(st.by_name.is_empty() && st.jobs.is_empty(), "nothing kept for jobs forgotten");
    }
}
