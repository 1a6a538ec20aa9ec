//! The queue's writer thread over the log (group commit: one append and one fsync
//! acknowledge every job waiting at that moment) and the import of older queues.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

use engage_core::store::StoreError;
use rusqlite::{params, Connection};

use super::base::err;
use super::names::Names;
use super::queue_log::QueueLog;

pub(super) struct Queue {
    pub(super) log: Arc<QueueLog>,
    /// Senders are shared by all requests without a lock: at a cold start a lock here
    /// made a convoy of request threads (its holder preempted among dozens).
    pub(super) appender: std::sync::mpsc::Sender<Append>,
    /// Jobs through this number may be forgotten (see `Queue::trim`).
    trim_through: Arc<AtomicU64>,
    /// The users each queued job names.
    pub(super) names: Arc<Names>,
}

/// A job to append, the names of the users it names, and where to answer with its
/// sequence number once it is on disk (awaited: a request lane takes other requests
/// meanwhile, `crate::lanes`).
pub(super) type Append = (Vec<u8>, Vec<i64>, tokio::sync::oneshot::Sender<Result<u64, StoreError>>);

/// Most jobs made durable by one sync of the queue log.
pub(super) const GROUP_COMMIT_MAX: usize = 256;

/// How long an idle queue writer waits before it looks for applied jobs to forget.
const TRIM_POLL: Duration = Duration::from_secs(1);

impl Queue {
    /// Starts the queue's writer thread over `log`, whose jobs after `applied` are queued.
    pub(super) fn start(log: Arc<QueueLog>, applied: u64) -> Queue {
        let trim_through = Arc::new(AtomicU64::new(0));
        let names = Arc::new(Names::new(applied, log.tail(), super::names::MAX_PAIRS));
        Queue { appender: spawn_appender(log.clone(), trim_through.clone(), names.clone()), log, trim_through, names }
    }

    /// Lets the writer thread forget the jobs through `through` (applied, and the
    /// cursor saying so durable) when it next wakes: after its next append, or within
    /// `TRIM_POLL`. A store, not a message on the appender's channel: the applier's
    /// threads call this, and sending takes the channel's internal lock. An
    /// idle-class thread preempted while holding it kept every acknowledgement
    /// from queueing its job until a core fell idle: request threads waited up to
    /// 71 ms for that lock (p99 66 ms) in a 2,000/s burst (perf, sched_switch).
    pub(super) fn trim(&self, through: u64) {
        self.trim_through.fetch_max(through, Ordering::SeqCst);
    }
}

/// The queue's single writer: it appends every job waiting at that moment with one
/// write and one sync, so one fsync acknowledges many concurrent requests. It also
/// forgets applied jobs, so the log's state lock is taken by normal-priority threads
/// only (and the applier's brief reads).
fn spawn_appender(
    log: Arc<QueueLog>,
    trim_through: Arc<AtomicU64>,
    names: Arc<Names>,
) -> std::sync::mpsc::Sender<Append> {
    let (tx, rx) = std::sync::mpsc::channel::<Append>();
    std::thread::Builder::new()
        .name("engage-queue".into())
        .spawn(move || {
            let mut trimmed = 0;
            loop {
                let mut next = match rx.recv_timeout(TRIM_POLL) {
                    Ok(first) => Some(first),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                };
                let mut jobs = Vec::new();
                let mut named = Vec::new();
                let mut replies = Vec::new();
                while let Some((job, job_names, reply)) = next {
                    jobs.push(job);
                    named.push(job_names);
                    replies.push(reply);
                    next = if replies.len() < GROUP_COMMIT_MAX { rx.try_recv().ok() } else { None };
                }
                if !jobs.is_empty() {
                    // Named before the log's tail passes them (this thread alone
                    // appends, so it knows their numbers): every job a read can see
                    // the tail pass is found by its names, and so is every job
                    // acknowledged before the read.
                    let first = log.tail() + 1;
                    for (i, job_names) in named.into_iter().enumerate() {
                        names.add(first + i as u64, job_names);
                    }
                    match log.append(&jobs) {
                        Ok(seqs) => {
                            for (reply, seq) in replies.into_iter().zip(seqs) {
                                let _ = reply.send(Ok(seq));
                            }
                        }
                        Err(e) => {
                            // Not queued: their numbers go to the next jobs.
                            names.forget_from(first);
                            for reply in replies {
                                let _ = reply.send(Err(e.clone()));
                            }
                        }
                    }
                }
                let through = trim_through.load(Ordering::SeqCst);
                if through > trimmed {
                    log.trim(through);
                    names.forget_through(through);
                    trimmed = through;
                }
            }
        })
        .expect("spawn the queue writer thread");
    tx
}

/// A document from its row: `version` in column `at`, `value` in the next.
/// into the log, keeping their sequence numbers, then removes that file.
pub(super) fn import_sqlite_queue(db: &Path, applied: u64, log: &QueueLog) -> Result<(), StoreError> {
    let mut name = db.as_os_str().to_owned();
    name.push("-queue");
    let old = PathBuf::from(name);
    if !old.is_file() {
        return Ok(());
    }
    let jobs: Vec<(u64, Vec<u8>)> = {
        let c = Connection::open(&old).map_err(err)?;
        let tables: i64 = c
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'queue'", [], |r| r.get(0))
            .map_err(err)?;
        if tables > 0 {
            let mut st = c.prepare("SELECT seq, job FROM queue WHERE seq > ?1 ORDER BY seq").map_err(err)?;
            let rows =
                st.query_map(params![applied as i64], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?))).map_err(err)?;
            rows.collect::<Result<_, _>>().map_err(err)?
        } else {
            Vec::new()
        }
    };
    if !jobs.is_empty() {
        let seqs = log.append(&jobs.iter().map(|(_, j)| j.clone()).collect::<Vec<_>>())?;
        if seqs.iter().zip(&jobs).any(|(new, (old, _))| new != old) {
            return Err(StoreError("the old queue file's jobs do not follow the applied cursor".into()));
        }
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut p = old.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn applied_jobs_are_forgotten_without_another_append() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(QueueLog::open(&dir.path().join("t.db"), 0).unwrap().unwrap());
        let queue = Queue::start(log.clone(), 0);
        let append = |job: &[u8]| {
            let (reply, answer) = tokio::sync::oneshot::channel();
            queue.appender.send((job.to_vec(), vec![i64::from(job[0])], reply)).unwrap();
            answer.blocking_recv().unwrap().unwrap()
        };
        let seqs = |log: &QueueLog| log.read_after(0, 10).unwrap().iter().map(|j| j.seq).collect::<Vec<_>>();
        assert_eq!((append(b"a"), append(b"b")), (1, 2));
        let naming = |name: u8| queue.names.naming(&log, &[i64::from(name)], 0).unwrap();
        assert_eq!((naming(b'a'), naming(b'b')), (vec![1], vec![2]), "named as soon as acknowledged");
        queue.trim(1);
        // No job arrives: the idle writer trims when its wait times out.
        let deadline = Instant::now() + TRIM_POLL * 5;
        while seqs(&log) != [2] {
            assert!(Instant::now() < deadline, "job 1 still queued: {:?}", seqs(&log));
            std::thread::sleep(Duration::from_millis(10));
        }
        // Trimming only moves forward; the next append keeps its number.
        queue.trim(0);
        assert_eq!(append(b"c"), 3);
        assert_eq!(seqs(&log), [2, 3]);
        // Names go a run at a time: with every job of theirs applied.
        queue.trim(3);
        // The writer trims the log, then the names.
        while !seqs(&log).is_empty() || !naming(b'c').is_empty() {
            assert!(Instant::now() < deadline + TRIM_POLL * 5, "jobs still queued: {:?}", seqs(&log));
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!([b'a', b'b', b'c'].iter().all(|n| naming(*n).is_empty()), "forgotten with their records");
    }
}
