//! Engage's native host: the SQLite store and the hyper server, used by the
//! `engage` binary and by the load benchmark.

pub mod applier;
pub mod backup;
pub mod body;
pub mod cdi;
pub mod conn;
pub mod engine;
pub mod exchange;
pub mod framing;
pub mod health;
pub mod lanes;
pub mod logs;
pub mod metrics;
pub mod playground;
pub mod priority;
pub mod serve;
pub mod server;
pub mod startup;
pub mod store;

use engage_core::{Build, Ctx, Timestamp};

/// Prints a line of a command's output (as `println!`). A reader that closed the
/// pipe early (`engage cdi jobs ID | head`) ends the command quietly, with success,
/// as Unix tools end; `println!` panicked there.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::print_line(format_args!($($arg)*))
    };
}

/// [`outln!`]'s work: the line, then its newline; on a closed pipe the process
/// ends (what the command did is already committed), on another error it fails.
pub fn print_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(line).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("engage: cannot write the output: {e}");
        std::process::exit(1);
    }
}

/// The commit this binary was built from (build.rs), empty when unknown.
const COMMIT: &str = env!("ENGAGE_COMMIT");

/// `engage --version`: the version and, when known, the commit.
pub const VERSION: &str = match COMMIT.len() {
    0 => env!("CARGO_PKG_VERSION"),
    _ => concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("ENGAGE_COMMIT"), ")"),
};

/// Which build answers, for the core (`/healthz`, the landing page).
pub fn build() -> Build {
    Build { commit: (!COMMIT.is_empty()).then(|| COMMIT.to_string()) }
}

/// Milliseconds added to the wall clock: moved only by a test clock
/// (`engage serve --test-clock`, `POST /_engage/clock`).
static CLOCK_OFFSET_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Moves the clock every later [`ctx`] reads to `now` (a test clock).
pub fn set_clock(now: Timestamp) {
    CLOCK_OFFSET_MS.store(now.0 - wall_clock_ms(), std::sync::atomic::Ordering::SeqCst);
}

/// The clock at wall-clock time `wall`: moved by the test clock, if any.
fn clock_at(wall: i64) -> Timestamp {
    Timestamp(wall + CLOCK_OFFSET_MS.load(std::sync::atomic::Ordering::SeqCst))
}

/// The clock alone, for a loop that only needs the time (no randomness read).
pub fn now() -> Timestamp {
    clock_at(wall_clock_ms())
}

/// The host's context for one request: the clock (the wall clock, unless a test
/// clock moved it) and fresh OS randomness.
pub fn ctx() -> Ctx {
    let wall = wall_clock_ms();
    let mut seed = [0u8; 16];
    // Without OS randomness we must not mint keys or ids.
    getrandom::fill(&mut seed).expect("the operating system's random source is unavailable");
    Ctx { now: clock_at(wall), wall: Timestamp(wall), seed }
}

/// Counts one more on a counter until dropped: a request in flight on its lane, or
/// one backing off (`store::sqlite`), also when its future is dropped early.
pub struct Counted<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Counted<'a> {
    /// Counts one more; returns the guard and the count with this one.
    pub fn new(counter: &'a std::sync::atomic::AtomicUsize) -> (Counted<'a>, usize) {
        let now = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        (Counted(counter), now)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}
