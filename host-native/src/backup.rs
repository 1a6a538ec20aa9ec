//! `engage backup`: a consistent copy of a database and of the writes queued beside
//! it, taken while a server runs on it and takes writes.
//!
//! An acknowledged `/users/track` request is in one of two places: applied, in the
//! database (whose `queue_cursor` is the last job applied), or queued, in the log
//! beside it (`<db>-queue.<first seq>.log`, see [`crate::store::sqlite::queue_log`]). The
//! server retires a log segment (renames it to a spare, later reuses and overwrites
//! it) only after committing a cursor that covers every job in it. So the copy is
//! taken queue first, database second:
//!
//! 1. the queue log: each segment's valid records (sequence numbers consecutive
//!    from the one in its name, checksums right), from the job after the cursor read
//!    at the start, are copied to `<to>-queue.<first seq>.log`, one file per
//!    consecutive run. A segment retired while it is listed or read is missing or
//!    ends early; the jobs lost that way were applied before the database is copied.
//! 2. the database, with SQLite's online backup API, in one step inside one read
//!    transaction: a snapshot, whatever the server commits meanwhile (in WAL mode a
//!    reader never blocks the writer). Its cursor C is at least that of any job
//!    retired before, so of any job missing from step 1.
//! 3. the check: the copied jobs after C must be one consecutive run starting at or
//!    before C + 1 and reaching at least the start of the last segment listed; runs
//!    entirely at or below C are deleted. Should it fail (it cannot, by the above;
//!    it guards the reasoning), the whole copy is taken again.
//!
//! Every job acknowledged before the backup started is then in the copy exactly
//! once: applied in the database copy, or in the copied queue, which a server
//! started on the copy applies. (A record whose sync failed, answered 503 and cut
//! off by the server, could be copied in the moment it is on disk; restoring applies
//! it, as a retry by its client would.)

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use rusqlite::backup::{Backup, StepResult};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use crate::store::sqlite::queue_log::{checksum, HEADER, MAX_JOB};

/// Arguments of `engage backup`.
#[derive(Args)]
pub struct BackupArgs {
    /// The database to copy (a server may be running on it).
    #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
    pub db: PathBuf,
    /// The copy to write; it must not exist. Queued writes go beside it, in
    /// `FILE-queue.<seq>.log`.
    #[arg(long)]
    pub to: PathBuf,
}

/// Runs `engage backup` and prints its one-line summary.
pub fn run(args: BackupArgs) -> Result<(), String> {
    let summary = backup(&args.db, &args.to)?;
    crate::outln!("{summary}");
    Ok(())
}

/// Times the copy is taken before giving up on a check that fails.
const ATTEMPTS: usize = 3;

/// How long copying the database waits for a lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a backup wrote.
#[derive(Debug)]
pub struct Summary {
    pub to: PathBuf,
    /// Pages of the database copy, and its size in bytes.
    pub pages: u64,
    pub bytes: u64,
    /// The last job applied in the database copy.
    pub cursor: u64,
    /// The queued jobs copied beside it, after `cursor`: first and last.
    pub queued: Option<(u64, u64)>,
    /// The queue file holding them.
    pub queue_file: Option<PathBuf>,
}

impl Summary {
    /// Number of queued jobs copied.
    pub fn queued_jobs(&self) -> u64 {
        self.queued.map_or(0, |(first, last)| last - first + 1)
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "backup {}: {} pages ({} bytes), applied through job {}; {} queued jobs",
            self.to.display(),
            self.pages,
            self.bytes,
            self.cursor,
            self.queued_jobs()
        )?;
        match (self.queued, &self.queue_file) {
            (Some((first, last)), Some(file)) => write!(f, " ({first}..={last}) in {}", file.display()),
            _ => Ok(()),
        }
    }
}

/// Why one attempt failed.
enum Failure {
    /// The check of step 3 failed: take the copy again.
    Retry(String),
    Fatal(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Fatal(e)
    }
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The directory of a database and the prefix of its queue files' names.
fn queue_prefix(db: &Path) -> (PathBuf, String) {
    let dir = db.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let name = db.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    (dir, format!("{name}-queue."))
}

/// The queue files beside `db` (segments, spares, the lock), by name.
fn queue_files(db: &Path) -> Result<Vec<String>, String> {
    let (dir, prefix) = queue_prefix(db);
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    Ok(entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect())
}

/// Copies the database at `db` and its queued writes to `to` (see the module's
/// documentation).
pub fn backup(db: &Path, to: &Path) -> Result<Summary, String> {
    if db.to_str().is_some_and(crate::store::postgres::is_postgres_url) {
        return Err("engage backup copies a SQLite database: back PostgreSQL up with its own tools (pg_dump)".into());
    }
    if !db.is_file() {
        return Err(format!("database {} does not exist: check --db (or ENGAGE_DB)", db.display()));
    }
    let old_queue = with_suffix(db, "-queue");
    if old_queue.exists() {
        return Err(format!(
            "{} is a queue of an earlier version: start `engage serve` on the database once to import it",
            old_queue.display()
        ));
    }
    if to.exists() {
        return Err(format!("{} already exists: not overwriting it (remove it or choose another --to)", to.display()));
    }
    let (to_dir, _) = queue_prefix(to);
    if !to_dir.is_dir() {
        return Err(format!("directory {} does not exist", to_dir.display()));
    }
    let partial = with_suffix(to, ".partial");
    let mut stale: Vec<String> = ["-wal", "-shm", "-journal", ".partial"]
        .iter()
        .map(|s| with_suffix(to, s))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    stale.extend(queue_files(to)?.into_iter().map(|n| to_dir.join(n).display().to_string()));
    if !stale.is_empty() {
        return Err(format!("files of another database are in the way of the copy: {}", stale.join(", ")));
    }
    let mut last_retry = String::new();
    for _ in 0..ATTEMPTS {
        let outcome = attempt(db, to, &partial);
        if outcome.is_err() {
            clean_up(to, &partial);
        }
        match outcome {
            Ok(summary) => return Ok(summary),
            Err(Failure::Fatal(e)) => return Err(e),
            Err(Failure::Retry(e)) => last_retry = e,
        }
    }
    Err(format!("the copy did not check out after {ATTEMPTS} attempts: {last_retry}"))
}

/// Removes what an attempt wrote (the checks above made sure none of it was there before).
fn clean_up(to: &Path, partial: &Path) {
    let (dir, _) = queue_prefix(to);
    for name in queue_files(to).unwrap_or_default() {
        let _ = std::fs::remove_file(dir.join(name));
    }
    for p in [partial.to_path_buf(), with_suffix(partial, "-journal")] {
        let _ = std::fs::remove_file(p);
    }
}

fn attempt(db: &Path, to: &Path, partial: &Path) -> Result<Summary, Failure> {
    let fail = |what: &str, e: rusqlite::Error| format!("{what} {}: {e}", db.display());
    let src = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| fail("cannot open", e))?;
    src.busy_timeout(BUSY_TIMEOUT).map_err(|e| fail("cannot open", e))?;
    // Without a server, closing the last connection would checkpoint the source's WAL.
    src.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(|e| fail("cannot open", e))?;
    let applied = read_cursor(&src).map_err(|e| fail("not an engage database:", e))?;
    let queue = copy_queue(db, to, applied)?;
    let copied = copy_database(&src, partial).map_err(|e| fail("cannot copy", e))?;
    drop(src);
    let cursor = copied.cursor;
    // Step 3: runs at or below the cursor go; one run may be left, joining the cursor.
    let mut kept: Option<Run> = None;
    for run in queue.runs {
        if run.last <= cursor {
            std::fs::remove_file(&run.path).map_err(|e| format!("cannot remove {}: {e}", run.path.display()))?;
        } else if kept.is_none() && run.first <= cursor + 1 {
            kept = Some(run);
        } else {
            let from = kept.as_ref().map_or(cursor, |k| k.last) + 1;
            return Err(Failure::Retry(format!(
                "jobs {from}..{} are neither applied in the database copy nor in the copied queue",
                run.first - 1
            )));
        }
    }
    let through = kept.as_ref().map_or(cursor, |k| k.last.max(cursor));
    if let Some(first) = queue.last_segment {
        if through + 1 < first {
            return Err(Failure::Retry(format!(
                "jobs {}..{} of the queue log were not copied",
                through + 1,
                first - 1
            )));
        }
    }
    // Link, not rename: a file made at `to` meanwhile is not overwritten either.
    std::fs::hard_link(partial, to).map_err(|e| match e.kind() {
        ErrorKind::AlreadyExists => format!("{} already exists: not overwriting it", to.display()),
        _ => format!("cannot create {}: {e}", to.display()),
    })?;
    let _ = std::fs::remove_file(partial);
    let (dir, _) = queue_prefix(to);
    File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| format!("cannot sync {}: {e}", dir.display()))?;
    let bytes = std::fs::metadata(to).map(|m| m.len()).unwrap_or(0);
    Ok(Summary {
        to: to.to_path_buf(),
        pages: copied.pages,
        bytes,
        cursor,
        queued: kept.as_ref().map(|k| (cursor + 1, k.last)),
        queue_file: kept.map(|k| k.path),
    })
}

fn read_cursor(c: &Connection) -> Result<u64, rusqlite::Error> {
    c.query_row("SELECT applied FROM queue_cursor WHERE id = 1", [], |r| r.get::<_, i64>(0)).map(|v| v as u64)
}

/// The database copy: its cursor and pages.
struct Copied {
    cursor: u64,
    pages: u64,
}

/// Step 2: copies the database at one snapshot, inside a read transaction of `src`
/// (the backup uses the transaction it finds open), whose cursor is read first.
fn copy_database(src: &Connection, partial: &Path) -> Result<Copied, rusqlite::Error> {
    let mut dst = Connection::open(partial)?;
    dst.pragma_update(None, "synchronous", "FULL")?;
    src.execute_batch("BEGIN")?;
    let copied = (|| {
        let cursor = read_cursor(src)?;
        let backup = Backup::new(src, &mut dst)?;
        let started = Instant::now();
        // All pages in one step: the snapshot is held throughout anyway.
        loop {
            match backup.step(-1)? {
                StepResult::Done => break,
                StepResult::Busy | StepResult::Locked if started.elapsed() < BUSY_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                StepResult::More => {}
                _ => {
                    let busy = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY);
                    return Err(rusqlite::Error::SqliteFailure(busy, Some("the database stayed locked".into())));
                }
            }
        }
        Ok(Copied { cursor, pages: backup.progress().pagecount as u64 })
    })();
    let _ = src.execute_batch("COMMIT");
    let copied = copied?;
    dst.close().map_err(|(_, e)| e)?;
    Ok(copied)
}

/// A consecutive run of copied jobs and its file.
struct Run {
    first: u64,
    last: u64,
    path: PathBuf,
}

/// What step 1 copied.
struct Queue {
    runs: Vec<Run>,
    /// The first sequence number of the last segment listed.
    last_segment: Option<u64>,
}

/// The run being written.
struct Writing {
    run: Run,
    out: BufWriter<File>,
}

impl Writing {
    fn finish(mut self) -> Result<Run, String> {
        let path = self.run.path.clone();
        self.out
            .flush()
            .and_then(|()| self.out.get_ref().sync_all())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(self.run)
    }
}

/// Reads into `buf` all of it, or answers false at the end of the file.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match r.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// Step 1: copies the jobs after `applied` from the queue log of `db` beside `to`.
fn copy_queue(db: &Path, to: &Path, applied: u64) -> Result<Queue, String> {
    let (dir, prefix) = queue_prefix(db);
    let (to_dir, to_prefix) = queue_prefix(to);
    let mut firsts: Vec<u64> =
        queue_files(db)?.iter().filter_map(|n| n.strip_prefix(&prefix)?.strip_suffix(".log")?.parse().ok()).collect();
    firsts.sort_unstable();
    let mut runs = Vec::new();
    let mut writing: Option<Writing> = None;
    let mut job = Vec::new();
    for &first in &firsts {
        let path = dir.join(format!("{prefix}{first:020}.log"));
        let read_error = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
        let file = match File::open(&path) {
            Ok(f) => f,
            // Retired since it was listed: its jobs are applied.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(read_error(e)),
        };
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut header = [0u8; HEADER];
        let mut next = first;
        // The segment ends where a record is torn, or is not the next job: the end of
        // what is written, or older records of a reused file.
        while read_full(&mut reader, &mut header).map_err(read_error)? {
            let seq = u64::from_le_bytes(header[..8].try_into().unwrap_or_default());
            let len = u32::from_le_bytes(header[8..12].try_into().unwrap_or_default()) as usize;
            let crc = u32::from_le_bytes(header[12..16].try_into().unwrap_or_default());
            if seq != next || len > MAX_JOB {
                break;
            }
            job.resize(len, 0);
            if !read_full(&mut reader, &mut job).map_err(read_error)? || checksum(seq, &job) != crc {
                break;
            }
            next += 1;
            if seq <= applied || writing.as_ref().is_some_and(|w| seq <= w.run.last) {
                continue;
            }
            if writing.as_ref().is_some_and(|w| w.run.last + 1 != seq) {
                runs.extend(writing.take().map(Writing::finish).transpose()?);
            }
            if writing.is_none() {
                let path = to_dir.join(format!("{to_prefix}{seq:020}.log"));
                let file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
                writing = Some(Writing { run: Run { first: seq, last: seq - 1, path }, out: BufWriter::new(file) });
            }
            let Some(w) = writing.as_mut() else { continue };
            let written = w.out.write_all(&header).and_then(|()| w.out.write_all(&job));
            written.map_err(|e| format!("cannot write {}: {e}", w.run.path.display()))?;
            w.run.last = seq;
        }
    }
    runs.extend(writing.map(Writing::finish).transpose()?);
    Ok(Queue { runs, last_segment: firsts.last().copied() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use engage_core::store::Store;

    /// A migrated database `e.db` in a directory of its own, its cursor at `applied`.
    fn database(applied: u64) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("e.db");
        drop(SqliteStore::open(&db).unwrap());
        let c = Connection::open(&db).unwrap();
        c.execute("UPDATE queue_cursor SET applied = ?1 WHERE id = 1", [applied as i64]).unwrap();
        (dir, db)
    }

    /// Writes a segment holding jobs `seqs` (whose names are their numbers).
    fn segment(db: &Path, first: u64, seqs: std::ops::RangeInclusive<u64>, tail: &[u8]) {
        let mut bytes = Vec::new();
        for seq in seqs {
            let job = seq.to_string().into_bytes();
            bytes.extend_from_slice(&seq.to_le_bytes());
            bytes.extend_from_slice(&(job.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&checksum(seq, &job).to_le_bytes());
            bytes.extend_from_slice(&job);
        }
        bytes.extend_from_slice(tail);
        std::fs::write(db.with_file_name(format!("e.db-queue.{first:020}.log")), bytes).unwrap();
    }

    /// The jobs a store opened on `db` has queued.
    fn queued(db: &Path) -> Vec<(u64, String)> {
        let store = SqliteStore::open(db).unwrap();
        let jobs = pollster::block_on(store.queued(0, 100)).unwrap();
        jobs.into_iter().map(|j| (j.seq, String::from_utf8(j.job).unwrap())).collect()
    }

    #[test]
    fn applied_segments_and_torn_tails_are_left_out_and_the_rest_restores() {
        // Jobs 1-3 and 4-6 applied, their segments retired: one left under its name,
        // one reused for job 4 on (its old records 1-3 not yet overwritten); 7-9
        // queued, then a torn record.
        let (dir, db) = database(6);
        segment(&db, 1, 1..=3, &[]);
        segment(&db, 4, 1..=3, &[]);
        segment(&db, 7, 7..=9, &10u64.to_le_bytes());
        let to = dir.path().join("copy.db");
        let summary = backup(&db, &to).unwrap();
        assert_eq!((summary.cursor, summary.queued, summary.queued_jobs()), (6, Some((7, 9)), 3));
        assert!(summary.to_string().contains("3 queued jobs (7..=9) in "), "{summary}");
        let want: Vec<(u64, String)> = (7..=9).map(|s| (s, s.to_string())).collect();
        assert_eq!(queued(&to), want);
        // The source is as it was.
        assert_eq!(queued(&db), want);
    }

    #[test]
    fn jobs_at_or_below_the_cursor_are_not_copied() {
        let (dir, db) = database(2);
        segment(&db, 1, 1..=5, &[]);
        let to = dir.path().join("copy.db");
        let summary = backup(&db, &to).unwrap();
        assert_eq!(summary.queued, Some((3, 5)));
        assert_eq!(queued(&to).iter().map(|j| j.0).collect::<Vec<_>>(), vec![3, 4, 5]);
    }

    #[test]
    fn missing_jobs_after_the_cursor_fail_the_backup_and_leave_nothing() {
        // Jobs 4-6 neither applied nor in the log.
        let (dir, db) = database(2);
        segment(&db, 1, 1..=3, &[]);
        segment(&db, 7, 7..=9, &[]);
        let to = dir.path().join("copy.db");
        let e = backup(&db, &to).unwrap_err();
        assert!(e.contains("jobs 4..6 are neither applied"), "{e}");
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("copy.db"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
