//! Paced writeback of the database and its WAL.
//!
//! Applying rewrites profiles at random, and a checkpoint copies every page it finds
//! in the WAL into the database file: hundreds of MB of dirty pages that the OS
//! keeps in memory until SQLite's fsync, which then sends them to the disk at once.
//! An acknowledgement's fdatasync of the queue log issued during that burst waits
//! behind it (measured: per-second p99 of 250-400 ms around each checkpoint). This
//! thread starts writeback of whatever is dirty in both files a few MB at a time,
//! waiting for each piece, so the disk never holds much of it and the later fsyncs
//! find little left. It changes nothing about durability: SQLite still syncs what it
//! must, this only makes that earlier and smoother.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};

use super::base::Background;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How often the dirty pages of both files are pushed out.
const INTERVAL: Duration = Duration::from_millis(50);

/// Bytes sent to the disk per step; the next step waits for them.
const STEP: u64 = 4 << 20;

/// Starts pacing writeback of `db` and `db-wal`; the thread ends when the sender is dropped.
pub(crate) fn spawn(db: &Path) -> Option<Background<()>> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let files = [db.to_path_buf(), PathBuf::from(wal)];
    let thread = std::thread::Builder::new()
        .name("engage-writeback".into())
        .spawn(move || {
            crate::priority::background();
            run(&files, stopped);
        })
        .ok()?;
    Some(Background::new(stop, thread))
}

fn run(files: &[PathBuf], stopped: Receiver<()>) {
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
        for path in files {
            if let Some(f) = handle(path) {
                push(f);
            }
        }
    }
}

/// A handle on `path`, opened once per process and never closed: closing any
/// descriptor of a database file drops every POSIX lock the process holds on it,
/// SQLite's included.
fn handle(path: &Path) -> Option<&'static File> {
    static OPEN: OnceLock<Mutex<Vec<(PathBuf, &'static File)>>> = OnceLock::new();
    let mut open = OPEN.get_or_init(|| Mutex::new(Vec::new())).lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, f)) = open.iter().find(|(p, _)| p == path) {
        return Some(f);
    }
    let f: &'static File = Box::leak(Box::new(File::open(path).ok()?));
    open.push((path.to_path_buf(), f));
    Some(f)
}

#[cfg(target_os = "linux")]
fn push(f: &File) {
    use std::os::fd::AsRawFd;
    let Ok(len) = f.metadata().map(|m| m.len()) else { return };
    let mut at = 0;
    while at < len {
        // SAFETY: a valid descriptor and a byte range; the call only starts and waits
        // for writeback of pages already dirty in that range.
        let rc = unsafe {
            libc::sync_file_range(
                f.as_raw_fd(),
                at as libc::off64_t,
                STEP as libc::off64_t,
                libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER,
            )
        };
        if rc != 0 {
            return;
        }
        at += STEP;
    }
}

#[cfg(not(target_os = "linux"))]
fn push(_: &File) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_opened_once_and_kept_open() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let path = dir.join("t.db");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let first = handle(&path).expect("opened") as *const File;
        let again = handle(&path).expect("opened") as *const File;
        assert_eq!(first, again, "the same descriptor every time: closing one would drop SQLite's locks");
        // Pushing dirty pages out leaves the content as it was.
        push(handle(&path).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 1 << 20]);
        assert!(handle(&dir.join("missing.db")).is_none());
    }
}
