//! What keeps hostile or slow clients from taking the server down: the open-files
//! limit raised and a cap on connections below it, accept errors backed off and
//! logged at a bounded rate, and the idle and header timeouts of a connection.
//! (The body timeout is the request handler's: see `server::read_body`.)

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Sleep;

/// Timeouts and the connection cap of `engage serve`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// From a request's first byte to the end of its headers.
    pub header: Duration,
    /// To read a request's whole body.
    pub body: Duration,
    /// A kept-alive connection waiting for its next request; also the longest a
    /// write may stall on a client that does not read.
    pub idle: Duration,
    /// Most connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header: Duration::from_secs(10),
            body: Duration::from_secs(30),
            idle: Duration::from_secs(60),
            max_connections: 1024,
        }
    }
}

/// Descriptors kept for everything but client connections: the database's
/// connections (each holds the database, its WAL and shared-memory files), the
/// queue log's segments, warehouse connections, logs.
pub const RESERVED_FILES: u64 = 256;

/// Raises the soft open-files limit to the hard one and returns the resulting
/// connection cap: half of what is left after [`RESERVED_FILES`] (request handling
/// may open a database reader per connection), or `wanted` when given (an operator
/// may know better; past the limit, accepts fail and back off).
pub fn connection_cap(wanted: Option<usize>) -> usize {
    let files = raise_open_files_limit();
    let cap = (files.saturating_sub(RESERVED_FILES) / 2).max(16) as usize;
    match wanted {
        Some(w) => {
            if w > cap {
                tracing::warn!("--max-connections {w} is above what {files} open files leave room for ({cap})");
            }
            w.max(1)
        }
        None => cap.min(16_384),
    }
}

#[cfg(target_os = "linux")]
fn raise_open_files_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write the struct passed; nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

#[cfg(not(target_os = "linux"))]
fn raise_open_files_limit() -> u64 {
    1024
}

/// Pauses after failed accepts (10 ms, doubling to 1 s while they keep failing:
/// a full descriptor table would otherwise spin a core) and logs them at most once
/// a second, with how many were not logged.
#[derive(Default)]
pub struct AcceptBackoff {
    delay: Option<Duration>,
    last_log: Option<Instant>,
    unlogged: u64,
}

impl AcceptBackoff {
    /// An accept succeeded.
    pub fn reset(&mut self) {
        self.delay = None;
    }

    /// An accept failed: log (bounded) and wait.
    pub async fn failed(&mut self, e: &io::Error) {
        let delay = self.delay.map_or(Duration::from_millis(10), |d| (d * 2).min(Duration::from_secs(1)));
        self.delay = Some(delay);
        if self.last_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            tracing::warn!(
                "accept failed: {e} ({} more since the last report); pausing {} ms",
                self.unlogged,
                delay.as_millis()
            );
            self.last_log = Some(Instant::now());
            self.unlogged = 0;
        } else {
            self.unlogged += 1;
        }
        tokio::time::sleep(delay).await;
    }
}

/// Answers a connection beyond the cap with `response` (raw HTTP/1.1, already
/// closing) and closes it, spending at most a second on it.
pub async fn refuse(mut stream: tokio::net::TcpStream, response: Vec<u8>) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&response).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Where a connection is between requests, shared by its stream and its service.
#[derive(Default)]
pub struct Phase {
    /// 1 while a request is being handled.
    handling: AtomicU8,
    /// Requests finished on this connection.
    finished: AtomicU64,
    /// The `Content-Length` value of the request head being read, as sent (hyper
    /// drops it when `Transfer-Encoding` is present too; the core refuses that pair).
    content_length: std::sync::Mutex<Option<String>>,
}

impl Phase {
    /// A request's headers were read: the handler runs (its body has its own
    /// timeout). Returns the `Content-Length` the head carried, as sent.
    pub fn start(&self) -> Option<String> {
        self.handling.store(1, Ordering::SeqCst);
        self.content_length.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The handler answered: the connection waits for the next request.
    pub fn finish(&self) {
        self.finished.fetch_add(1, Ordering::SeqCst);
        self.handling.store(0, Ordering::SeqCst);
    }
}

/// A client stream with the idle and header timeouts: between requests, a read
/// waits at most `idle` for a request's first byte, then `header` from that byte
/// (the headers are read before the handler starts); a write that makes no
/// progress for `idle` fails. A timeout fails the read or write, and hyper closes
/// the connection.
pub struct Guarded<T> {
    inner: T,
    limits: Limits,
    phase: Arc<Phase>,
    /// Requests finished when this stream last looked.
    seen: u64,
    /// When the connection became idle (its start, or the end of a request).
    idle_since: Instant,
    /// When the next request's first byte arrived.
    head_since: Option<Instant>,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
    /// The head line being read (its first bytes), to see which framing headers came.
    line: Vec<u8>,
}

/// Bytes of a head line kept: enough for `content-length: ` and a length.
const LINE_KEPT: usize = 64;

impl<T> Guarded<T> {
    /// Guards `inner`; `phase` is shared with the connection's service.
    pub fn new(inner: T, limits: Limits, phase: Arc<Phase>) -> Guarded<T> {
        Guarded {
            inner,
            limits,
            phase,
            seen: 0,
            idle_since: Instant::now(),
            head_since: None,
            read_timer: None,
            write_timer: None,
            line: Vec::new(),
        }
    }

    /// Notes the `Content-Length` lines of a request head as its bytes arrive.
    fn scan_head(&mut self, bytes: &[u8]) {
        // A line at a time (a body of tens of KB passes through here too).
        let mut lines = bytes.split(|&b| b == b'\n').peekable();
        while let Some(part) = lines.next() {
            let room = LINE_KEPT.saturating_sub(self.line.len());
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            if lines.peek().is_none() {
                // No newline after this part: the line goes on in the next read.
                break;
            }
            let line = String::from_utf8_lossy(&self.line).trim_end_matches('\r').to_string();
            self.line.clear();
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    *self.phase.content_length.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(value.trim().to_string());
                }
            }
        }
    }

    /// When the pending read must give up, or `None` while a request is handled.
    fn read_deadline(&mut self) -> Option<Instant> {
        let finished = self.phase.finished.load(Ordering::SeqCst);
        if finished != self.seen {
            self.seen = finished;
            self.idle_since = Instant::now();
            self.head_since = None;
            self.line.clear();
        }
        if self.phase.handling.load(Ordering::SeqCst) == 1 {
            return None;
        }
        Some(match self.head_since {
            Some(t) => t + self.limits.header,
            None => self.idle_since + self.limits.idle,
        })
    }
}

/// Polls `timer` (armed for `deadline`): `true` once it has passed.
fn expired(timer: &mut Option<Pin<Box<Sleep>>>, deadline: Instant, cx: &mut Context<'_>) -> bool {
    let deadline = tokio::time::Instant::from_std(deadline);
    match timer {
        Some(t) if t.deadline() == deadline => {}
        Some(t) => t.as_mut().reset(deadline),
        None => *timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
    }
    timer.as_mut().is_some_and(|t| t.as_mut().poll(cx).is_ready())
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what} timed out"))
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.read_timer = None;
                if this.phase.handling.load(Ordering::SeqCst) == 0 {
                    this.scan_head(&buf.filled()[before..]);
                }
                if buf.filled().len() > before && this.head_since.is_none() {
                    // Bytes between requests start the next one's headers (when a
                    // request is being handled this is overwritten as it finishes).
                    this.head_since = Some(Instant::now());
                }
                Poll::Ready(r)
            }
            Poll::Pending => match this.read_deadline() {
                Some(deadline) if expired(&mut this.read_timer, deadline, cx) => {
                    Poll::Ready(Err(timed_out(if this.head_since.is_some() { "reading headers" } else { "idle" })))
                }
                Some(_) => Poll::Pending,
                None => {
                    this.read_timer = None;
                    Poll::Pending
                }
            },
        }
    }
}

impl<T> Guarded<T> {
    /// A write made progress (`Ready`), or stalls: fails once it has for `idle`.
    fn write_outcome<R>(&mut self, polled: Poll<io::Result<R>>, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.write_timer = None;
            return polled;
        }
        let deadline = match self.write_timer.as_ref() {
            Some(t) => t.deadline().into_std(),
            None => Instant::now() + self.limits.idle,
        };
        if expired(&mut self.write_timer, deadline, cx) {
            Poll::Ready(Err(timed_out("writing")))
        } else {
            Poll::Pending
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        self.write_outcome(polled, cx)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.write_outcome(polled, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
