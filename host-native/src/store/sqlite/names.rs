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

use std::collections::VecDeque;
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

struct State {
    /// Jobs `(after, through]` were queued before the log was opened and are not
    /// named yet (`None` once they are).
    unnamed: Option<(u64, u64)>,
    /// Each job's names, sorted, in sequence order.
    jobs: VecDeque<(u64, Box<[i64]>)>,
}

impl Names {
    /// Names for a log whose jobs `(applied, tail]` are queued now.
    pub(super) fn new(applied: u64, tail: u64) -> Names {
        let unnamed = (tail > applied).then_some((applied, tail));
        Names { state: Mutex::new(State { unnamed, jobs: VecDeque::new() }), first_lookup: Mutex::new(()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Job `seq`, the newest queued, names `names`.
    pub(super) fn add(&self, seq: u64, mut names: Vec<i64>) {
        names.sort_unstable();
        names.dedup();
        self.state().jobs.push_back((seq, names.into_boxed_slice()));
    }

    /// Forgets the jobs through `through` (applied).
    pub(super) fn forget_through(&self, through: u64) {
        let mut st = self.state();
        while st.jobs.front().is_some_and(|(seq, _)| *seq <= through) {
            st.jobs.pop_front();
        }
    }

    /// The jobs after `after` that name one of `names`, in sequence order; `log` is
    /// read the first time for the jobs queued before it was opened.
    pub(super) fn naming(&self, log: &QueueLog, names: &[i64], after: u64) -> Result<Vec<u64>, StoreError> {
        if self.state().unnamed.is_some() {
            self.name_the_first(log)?;
        }
        let st = self.state();
        let start = st.jobs.partition_point(|(seq, _)| *seq <= after);
        Ok(st
            .jobs
            .range(start..)
            .filter(|(_, named)| names.iter().any(|n| named.binary_search(n).is_ok()))
            .map(|(seq, _)| *seq)
            .collect())
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
                let mut names = engage_core::queue::record_names(&job.job);
                names.sort_unstable();
                names.dedup();
                first.push((job.seq, names.into_boxed_slice()));
            }
            after = last;
        }
        let mut st = self.state();
        // Those applied meanwhile were forgotten from the front already; prepending
        // them only keeps them until the next trim, and lookups skip them.
        for job in first.into_iter().rev() {
            st.jobs.push_front(job);
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
    }
}
