//! The durable queue of accepted `/users/track` jobs, as append-only segment files
//! beside the database (`<db>-queue.<first seq>.log`).
//!
//! Acknowledging a request is one `write` of every job waiting at that moment and
//! one `fdatasync` (group commit). There is no checkpoint and no page bookkeeping,
//! and applied jobs go away a whole segment at a time, so acknowledging never waits
//! behind maintenance. (A SQLite table did all three, and its checkpoints and trims
//! stalled acknowledgements for hundreds of milliseconds under load.)
//!
//! An applied segment is not deleted but kept as a spare (`<db>-queue.<n>.spare`)
//! and renamed to become a later segment, whose records overwrite it from the
//! start. Deleting a 64 MiB file frees its blocks, and on a file system mounted with
//! `discard` the journal commit that follows sends the whole range to the device:
//! measured on these machines, every such delete held the fdatasyncs issued beside
//! it for ~60 ms; a renamed spare costs nothing of the kind. Once the queue is
//! drained the spares are deleted (`drop_spares`, by the checkpointer), so a disk
//! that filled gets its space back as soon as the backlog is applied.
//!
//! Record: `seq: u64 LE | len: u32 LE | crc32(seq, len, job): u32 LE | job`. The
//! records of a segment carry consecutive sequence numbers starting at the one in
//! its name, and a segment ends where the next number does not follow: that is a
//! torn record at the end of the last segment (a write that was never synced, so
//! never acknowledged), or what a spare held before (older, smaller numbers). A
//! segment other than the last must end just before the next segment's first
//! number, or every job in between must be applied; anything else is corruption and
//! refuses to open.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use engage_core::store::{QueuedJob, StoreError};

pub(crate) const HEADER: usize = 16;
/// A new segment is started once the current one is this large.
const SEGMENT_BYTES: u64 = 64 << 20;
/// Largest job accepted (the request body limit is far below it).
pub(crate) const MAX_JOB: usize = 256 << 20;
/// Applied segments kept for reuse; beyond this many they are deleted.
const MAX_SPARES: usize = 4;

fn io(what: &str, e: std::io::Error) -> StoreError {
    StoreError(format!("queue log: {what}: {e}"))
}

pub(crate) fn checksum(seq: u64, job: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&(job.len() as u32).to_le_bytes());
    h.update(job);
    h.finalize()
}

struct Segment {
    first_seq: u64,
    path: PathBuf,
    file: Arc<File>,
    len: u64,
}

/// Where a synced job lives.
#[derive(Clone, Copy)]
struct Slot {
    seq: u64,
    segment_first_seq: u64,
    offset: u64,
    len: u32,
}

struct State {
    segments: Vec<Segment>,
    /// Synced jobs not yet trimmed, in sequence order.
    index: VecDeque<Slot>,
    /// Files of applied segments, to become later segments.
    spares: Vec<PathBuf>,
    /// Highest sequence number assigned.
    tail: u64,
    /// Set after a write that could not be undone: the log refuses further appends.
    poisoned: bool,
}

/// What reading picked jobs found.
enum Read {
    Jobs(Vec<QueuedJob>),
    /// This job's segment was retired and reused before it was read.
    Retired(u64),
}

/// The queue log of one database.
pub struct QueueLog {
    dir: PathBuf,
    stem: String,
    state: Mutex<State>,
    _lock: File,
}

impl QueueLog {
    /// Opens (or creates) the log of the database at `db`; sequence numbers continue
    /// after `applied` when no job is left. Only one process may own a log: the lock
    /// file refuses a second (`engage keys create` beside a running server opens the
    /// database without the queue).
    pub fn open(db: &Path, applied: u64) -> Result<Option<QueueLog>, StoreError> {
        let dir = db.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        let stem = format!("{}-queue.", db.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(format!("{stem}lock")))
            .map_err(|e| io("lock file", e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(e)) => return Err(io("lock", e)),
        }
        let mut firsts = Vec::new();
        let mut spares = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| io("list", e))?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix(&stem) else { continue };
            if let Some(first) = rest.strip_suffix(".log").and_then(|n| n.parse::<u64>().ok()) {
                firsts.push(first);
            } else if rest.strip_suffix(".spare").is_some_and(|n| n.parse::<u64>().is_ok()) {
                spares.push(entry.path());
            }
        }
        firsts.sort_unstable();
        spares.sort_unstable();
        for extra in spares.split_off(spares.len().min(MAX_SPARES)) {
            let _ = std::fs::remove_file(extra);
        }
        let mut state = State { segments: Vec::new(), index: VecDeque::new(), spares, tail: applied, poisoned: false };
        for (i, &first) in firsts.iter().enumerate() {
            let path = dir.join(format!("{stem}{first:020}.log"));
            let file = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| io("open segment", e))?;
            let mut bytes = Vec::new();
            (&file).read_to_end(&mut bytes).map_err(|e| io("read segment", e))?;
            let mut at = 0usize;
            let mut next = first;
            while at + HEADER <= bytes.len() {
                let seq = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
                let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap_or_default()) as usize;
                let crc = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap_or_default());
                let end = at + HEADER + len;
                if seq != next || end > bytes.len() || checksum(seq, &bytes[at + HEADER..end]) != crc {
                    break;
                }
                if seq > applied {
                    state.index.push_back(Slot {
                        seq,
                        segment_first_seq: first,
                        offset: (at + HEADER) as u64,
                        len: len as u32,
                    });
                }
                state.tail = state.tail.max(seq);
                next = seq + 1;
                at = end;
            }
            // Jobs missing between this segment and the next are lost, unless they
            // were applied (a segment whose retirement failed or did not survive a
            // crash, left before a later one).
            if let Some(&following) = firsts.get(i + 1) {
                if next > following || (next < following && following - 1 > applied) {
                    return Err(StoreError(format!("queue log: segment {} is corrupt at byte {at}", path.display())));
                }
            }
            // Whatever follows `at` in the last segment is overwritten by the next append.
            state.segments.push(Segment { first_seq: first, path, file: Arc::new(file), len: at as u64 });
        }
        Ok(Some(QueueLog { dir, stem, state: Mutex::new(state), _lock: lock }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends jobs and makes them durable with one sync; returns their sequence numbers.
    pub fn append(&self, jobs: &[Vec<u8>]) -> Result<Vec<u64>, StoreError> {
        let mut st = self.lock();
        if st.poisoned {
            return Err(StoreError("queue log: an earlier write failed; restart to recover".into()));
        }
        if jobs.iter().any(|j| j.len() > MAX_JOB) {
            return Err(StoreError("queue log: job too large".into()));
        }
        let needs_segment = st.segments.last().is_none_or(|s| s.len >= SEGMENT_BYTES);
        if needs_segment {
            let first = st.tail + 1;
            let path = self.dir.join(format!("{}{first:020}.log", self.stem));
            // A spare's old records stay until overwritten; opening reads past none of
            // them, as their numbers are all below `first`.
            let reused = match st.spares.pop() {
                Some(spare) => std::fs::rename(&spare, &path).is_ok(),
                None => false,
            };
            let file = OpenOptions::new()
                .create(true)
                .truncate(!reused)
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| io("create segment", e))?;
            // Make the new file's name durable before any job in it is acknowledged.
            File::open(&self.dir).and_then(|d| d.sync_all()).map_err(|e| io("sync directory", e))?;
            st.segments.push(Segment { first_seq: first, path, file: Arc::new(file), len: 0 });
        }
        let tail = st.tail;
        let Some(seg) = st.segments.last() else { return Err(StoreError("queue log: no segment".into())) };
        let mut buf = Vec::with_capacity(jobs.iter().map(|j| j.len() + HEADER).sum());
        let mut slots = Vec::with_capacity(jobs.len());
        for (i, job) in jobs.iter().enumerate() {
            let seq = tail + 1 + i as u64;
            buf.extend_from_slice(&seq.to_le_bytes());
            buf.extend_from_slice(&(job.len() as u32).to_le_bytes());
            buf.extend_from_slice(&checksum(seq, job).to_le_bytes());
            let offset = seg.len + buf.len() as u64;
            buf.extend_from_slice(job);
            slots.push(Slot { seq, segment_first_seq: seg.first_seq, offset, len: job.len() as u32 });
        }
        let start = seg.len;
        let written = seg.file.write_all_at(&buf, start).and_then(|()| seg.file.sync_data());
        if let Err(e) = written {
            // Cut off what may have been written, so later appends stay readable.
            if seg.file.set_len(start).and_then(|()| seg.file.sync_data()).is_err() {
                st.poisoned = true;
            }
            return Err(io("append", e));
        }
        let new_len = start + buf.len() as u64;
        if let Some(seg) = st.segments.last_mut() {
            seg.len = new_len;
        }
        st.tail = tail + jobs.len() as u64;
        st.index.extend(slots.iter().copied());
        Ok(slots.iter().map(|s| s.seq).collect())
    }

    /// The oldest synced jobs after `applied`, at most `limit`.
    pub fn read_after(&self, applied: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        let mut after = applied;
        loop {
            match self.read(self.pick(after, limit))? {
                Read::Jobs(jobs) => return Ok(jobs),
                // Jobs through `seq` were applied meanwhile and their segment reused.
                Read::Retired(seq) => after = seq,
            }
        }
    }

    /// Where the first `limit` jobs after `after` are.
    fn pick(&self, after: u64, limit: usize) -> Vec<(Slot, Arc<File>)> {
        let st = self.lock();
        let start = st.index.partition_point(|s| s.seq <= after);
        st.index
            .range(start..)
            .take(limit)
            .filter_map(|s| {
                let seg = st.segments.iter().find(|g| g.first_seq == s.segment_first_seq)?;
                Some((*s, seg.file.clone()))
            })
            .collect()
    }

    /// Reads picked jobs outside the lock, checking each record: between picking
    /// and reading, a job may be applied and its segment trimmed and reused.
    fn read(&self, picked: Vec<(Slot, Arc<File>)>) -> Result<Read, StoreError> {
        let mut jobs = Vec::with_capacity(picked.len());
        for (slot, file) in picked {
            let mut record = vec![0u8; HEADER + slot.len as usize];
            file.read_exact_at(&mut record, slot.offset - HEADER as u64).map_err(|e| io("read", e))?;
            let seq = u64::from_le_bytes(record[..8].try_into().unwrap_or_default());
            let crc = u32::from_le_bytes(record[12..16].try_into().unwrap_or_default());
            let job = record.split_off(HEADER);
            if seq != slot.seq || checksum(seq, &job) != crc {
                // Still indexed means the bytes on disk are wrong.
                if self.lock().index.front().is_some_and(|s| s.seq <= slot.seq) {
                    return Err(StoreError(format!("queue log: job {} does not read back", slot.seq)));
                }
                return Ok(Read::Retired(slot.seq));
            }
            jobs.push(QueuedJob { seq: slot.seq, part: 0, job });
        }
        Ok(Read::Jobs(jobs))
    }

    /// True when every job is applied and forgotten.
    pub fn is_drained(&self) -> bool {
        self.lock().index.is_empty()
    }

    /// True when a job after `applied` is indexed (appended and not forgotten).
    pub fn holds_after(&self, applied: u64) -> bool {
        self.lock().index.back().is_some_and(|s| s.seq > applied)
    }

    /// Deletes the spare segments, giving their space back to the disk; returns the
    /// bytes freed. For a drained queue (see the module docs for why not under load).
    pub fn drop_spares(&self) -> u64 {
        let spares = std::mem::take(&mut self.lock().spares);
        let mut freed = 0;
        for spare in spares {
            let len = std::fs::metadata(&spare).map_or(0, |m| m.len());
            if std::fs::remove_file(&spare).is_ok() {
                freed += len;
            }
        }
        freed
    }

    /// The highest sequence number assigned.
    pub fn tail(&self) -> u64 {
        self.lock().tail
    }

    /// Forgets jobs up to `through` (applied, and the cursor saying so is durable) and
    /// deletes the segments that hold nothing else.
    pub fn trim(&self, through: u64) {
        let mut st = self.lock();
        while st.index.front().is_some_and(|s| s.seq <= through) {
            st.index.pop_front();
        }
        // A segment can go when the next one starts at or before `through + 1`; the
        // last (active) segment always stays.
        while st.segments.len() > 1 && st.segments[1].first_seq <= through + 1 {
            let seg = st.segments.remove(0);
            // Neither needs a sync: after a crash the file is found under either name,
            // and an applied segment under its old one is skipped past. Failing only
            // leaves such a file.
            if st.spares.len() < MAX_SPARES {
                let spare = self.dir.join(format!("{}{:020}.spare", self.stem, seg.first_seq));
                if std::fs::rename(&seg.path, &spare).is_ok() {
                    st.spares.push(spare);
                }
            } else {
                let _ = std::fs::remove_file(&seg.path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A database path in a directory of its own (removed when dropped).
    fn dir() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("t.db");
        (d, db)
    }

    #[test]
    fn jobs_survive_reopen_and_a_torn_tail_is_cut() {
        let (_dir, db) = dir();
        let log = QueueLog::open(&db, 0).unwrap().unwrap();
        assert_eq!(log.append(&[b"a".to_vec(), b"bb".to_vec()]).unwrap(), vec![1, 2]);
        assert_eq!(log.append(&[b"ccc".to_vec()]).unwrap(), vec![3]);
        drop(log);
        // A crash in the middle of a write leaves half a record at the end.
        let seg = db.parent().unwrap().join(format!("t.db-queue.{:020}.log", 1));
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(&4u64.to_le_bytes()).unwrap();
        f.write_all(&[9, 0, 0]).unwrap();
        drop(f);
        let log = QueueLog::open(&db, 1).unwrap().unwrap();
        let jobs = log.read_after(1, 10).unwrap();
        assert_eq!(
            jobs.iter().map(|j| (j.seq, j.job.clone())).collect::<Vec<_>>(),
            vec![(2, b"bb".to_vec()), (3, b"ccc".to_vec())]
        );
        assert_eq!(log.tail(), 3);
        assert_eq!(log.append(&[b"d".to_vec()]).unwrap(), vec![4]);
        assert_eq!(log.read_after(3, 10).unwrap()[0].job, b"d".to_vec());
    }

    /// A log whose jobs 1 and 2 are in two segments (the first marked full).
    fn two_segments() -> (tempfile::TempDir, PathBuf, QueueLog) {
        let (dir, db) = dir();
        let log = QueueLog::open(&db, 0).unwrap().unwrap();
        log.append(&[b"1".to_vec()]).unwrap();
        fill(&log);
        log.append(&[b"2".to_vec()]).unwrap();
        (dir, db, log)
    }

    #[test]
    fn a_corrupt_record_before_the_end_refuses_to_open() {
        // Two segments, so the damaged one is not the last.
        let (_dir, db, log) = two_segments();
        drop(log);
        let seg = db.parent().unwrap().join(format!("t.db-queue.{:020}.log", 1));
        let mut bytes = std::fs::read(&seg).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&seg, bytes).unwrap();
        assert!(QueueLog::open(&db, 0).is_err());
    }

    fn names(db: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(db.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// Marks the active segment full, so the next append starts a new one.
    fn fill(log: &QueueLog) {
        log.lock().segments.last_mut().unwrap().len = SEGMENT_BYTES;
    }

    #[test]
    fn trimming_retires_whole_segments_and_numbering_continues() {
        let (_dir, db, log) = two_segments();
        log.trim(1);
        assert_eq!(
            names(&db),
            [format!("t.db-queue.{:020}.spare", 1), format!("t.db-queue.{:020}.log", 2), "t.db-queue.lock".to_string()],
            "the applied segment is kept as a spare"
        );
        assert_eq!(log.read_after(0, 10).unwrap().iter().map(|j| j.seq).collect::<Vec<_>>(), vec![2]);
        log.trim(2);
        drop(log);
        // Everything applied: numbering continues after the cursor.
        let log = QueueLog::open(&db, 2).unwrap().unwrap();
        assert!(log.read_after(2, 10).unwrap().is_empty());
        assert_eq!(log.append(&[b"3".to_vec()]).unwrap(), vec![3]);
    }

    #[test]
    fn a_spare_becomes_the_next_segment_and_its_old_records_are_never_read() {
        let (_dir, db) = dir();
        let log = QueueLog::open(&db, 0).unwrap().unwrap();
        // Segment 1 holds long jobs, so the short ones written over it later leave
        // old records behind them.
        log.append(&[vec![b'x'; 100], vec![b'y'; 100]]).unwrap();
        fill(&log);
        log.append(&[b"3".to_vec()]).unwrap();
        log.trim(2);
        fill(&log);
        assert_eq!(log.append(&[b"4".to_vec()]).unwrap(), vec![4]);
        assert_eq!(
            names(&db),
            [format!("t.db-queue.{:020}.log", 3), format!("t.db-queue.{:020}.log", 4), "t.db-queue.lock".to_string()],
            "the spare was renamed, not a new file made"
        );
        fill(&log);
        log.append(&[b"5".to_vec()]).unwrap();
        let all =
            |log: &QueueLog| log.read_after(2, 10).unwrap().into_iter().map(|j| (j.seq, j.job)).collect::<Vec<_>>();
        let want = vec![(3, b"3".to_vec()), (4, b"4".to_vec()), (5, b"5".to_vec())];
        assert_eq!(all(&log), want);
        drop(log);
        // Segment 4 is no longer the last, and has old bytes after its one record.
        let log = QueueLog::open(&db, 2).unwrap().unwrap();
        assert_eq!(all(&log), want);
        assert_eq!(log.append(&[b"6".to_vec()]).unwrap(), vec![6]);
        drop(log);
        let log = QueueLog::open(&db, 5).unwrap().unwrap();
        assert_eq!(log.read_after(5, 10).unwrap()[0].job, b"6".to_vec());
    }

    #[test]
    fn an_applied_segment_left_behind_is_skipped_past() {
        let (_dir, db) = dir();
        let log = QueueLog::open(&db, 0).unwrap().unwrap();
        for _ in 0..3 {
            log.append(&[b"j".to_vec()]).unwrap();
            fill(&log);
        }
        log.trim(2);
        drop(log);
        // As if retiring segment 1 had failed while segment 2's went through.
        let seg = |n: u64, ext: &str| db.parent().unwrap().join(format!("t.db-queue.{n:020}.{ext}"));
        std::fs::rename(seg(1, "spare"), seg(1, "log")).unwrap();
        let log = QueueLog::open(&db, 2).unwrap().unwrap();
        assert_eq!(log.read_after(2, 10).unwrap().iter().map(|j| j.seq).collect::<Vec<_>>(), vec![3]);
        drop(log);
        // The same gap with job 2 not applied is a lost job.
        assert!(QueueLog::open(&db, 1).is_err());
    }

    #[test]
    fn spares_beyond_the_limit_are_deleted() {
        let (_dir, db) = dir();
        let log = QueueLog::open(&db, 0).unwrap().unwrap();
        let segments = MAX_SPARES as u64 + 3;
        for _ in 0..segments {
            log.append(&[b"j".to_vec()]).unwrap();
            fill(&log);
        }
        log.trim(segments);
        let count = |suffix: &str| names(&db).iter().filter(|n| n.ends_with(suffix)).count();
        assert_eq!(count(".spare"), MAX_SPARES);
        assert_eq!(count(".log"), 1, "the active segment stays");
        drop(log);
        let log = QueueLog::open(&db, segments).unwrap().unwrap();
        fill(&log);
        assert_eq!(log.append(&[b"k".to_vec()]).unwrap(), vec![segments + 1]);
        assert_eq!(count(".spare"), MAX_SPARES - 1, "the next segment is a spare");
    }

    #[test]
    fn a_job_whose_segment_is_reused_while_it_is_read_is_skipped() {
        let (_dir, db, log) = two_segments();
        // A reader picks job 1; meanwhile it is applied, its segment trimmed and
        // reused for job 3.
        let picked = log.pick(0, 10);
        log.trim(1);
        fill(&log);
        log.append(&[b"3".to_vec()]).unwrap();
        assert_eq!(names(&db).iter().filter(|n| n.ends_with(".spare")).count(), 0, "the segment was reused");
        assert!(matches!(log.read(picked).unwrap(), Read::Retired(1)));
        let jobs = log.read_after(0, 10).unwrap();
        assert_eq!(
            jobs.iter().map(|j| (j.seq, j.job.clone())).collect::<Vec<_>>(),
            vec![(2, b"2".to_vec()), (3, b"3".to_vec())]
        );
    }

    #[test]
    fn a_job_that_does_not_read_back_is_an_error() {
        let (_dir, db) = dir();
        let log = QueueLog::open(&db, 0).unwrap().unwrap();
        log.append(&[b"abc".to_vec()]).unwrap();
        let seg = db.parent().unwrap().join(format!("t.db-queue.{:020}.log", 1));
        let f = OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(b"z", HEADER as u64).unwrap();
        assert!(log.read_after(0, 10).is_err());
    }

    #[test]
    fn a_second_owner_is_refused() {
        let (_dir, db) = dir();
        let first = QueueLog::open(&db, 0).unwrap();
        assert!(first.is_some());
        assert!(QueueLog::open(&db, 0).unwrap().is_none());
    }
}
