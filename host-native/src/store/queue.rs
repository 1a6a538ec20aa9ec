//! The queue's writer thread over the log (group commit: one append and one fsync
//! acknowledge every job waiting at that moment) and the import of older queues.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use engage_core::store::StoreError;
use rusqlite::{params, Connection};

use super::queue_log::QueueLog;
use super::sqlite::err;

pub(super) struct Queue {
    pub(super) log: Arc<QueueLog>,
    /// Senders are shared by all requests without a lock: at a cold start a lock here
    /// made a convoy of request threads (its holder preempted among dozens).
    pub(super) appender: std::sync::mpsc::Sender<QueueMsg>,
}

/// Work for the queue writer thread.
pub(super) enum QueueMsg {
    /// Append a job; answer with its sequence number once it is on disk.
    Append(Vec<u8>, std::sync::mpsc::SyncSender<Result<u64, StoreError>>),
    /// Forget applied jobs up to this sequence number.
    Trim(u64),
}

/// Most jobs made durable by one sync of the queue log.
pub(super) const GROUP_COMMIT_MAX: usize = 256;

/// The queue's single writer: it appends every job waiting at that moment with one
/// write and one sync, so one fsync acknowledges many concurrent requests.
pub(super) fn spawn_appender(log: Arc<QueueLog>) -> std::sync::mpsc::Sender<QueueMsg> {
    let (tx, rx) = std::sync::mpsc::channel::<QueueMsg>();
    std::thread::Builder::new()
        .name("engage-queue".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut jobs = Vec::new();
                let mut replies = Vec::new();
                let mut trim: Option<u64> = None;
                let mut next = Some(first);
                while let Some(m) = next {
                    match m {
                        QueueMsg::Append(job, reply) => {
                            jobs.push(job);
                            replies.push(reply);
                        }
                        QueueMsg::Trim(t) => trim = Some(trim.map_or(t, |x| x.max(t))),
                    }
                    next = if replies.len() < GROUP_COMMIT_MAX { rx.try_recv().ok() } else { None };
                }
                if !jobs.is_empty() {
                    match log.append(&jobs) {
                        Ok(seqs) => {
                            for (reply, seq) in replies.into_iter().zip(seqs) {
                                let _ = reply.send(Ok(seq));
                            }
                        }
                        Err(e) => {
                            for reply in replies {
                                let _ = reply.send(Err(e.clone()));
                            }
                        }
                    }
                }
                if let Some(t) = trim {
                    log.trim(t);
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
