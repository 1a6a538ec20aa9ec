//! What keeps hostile or slow clients from taking the server down: the open-files
//! limit raised and a cap on connections below it, accept errors backed off and
//! logged at a bounded rate, the idle and header timeouts of a connection, and its
//! request framing judged head by head ([`crate::framing`]), with refusals written
//! in the platform's shape. (The body timeout is the request handler's: see
//! `body::read_bounded`.)

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Sleep;

use crate::framing::{Fed, Tracker};

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

/// What a connection's service tells its stream: how many requests it has answered,
/// when it last did, and whom to wake then (a stream that waits for an answer
/// before it may time out, or before it may end the connection after a refusal).
#[derive(Default)]
pub struct Phase {
    state: std::sync::Mutex<PhaseState>,
}

#[derive(Default)]
struct PhaseState {
    finished: u64,
    last_finished: Option<Instant>,
    waker: Option<std::task::Waker>,
}

impl Phase {
    fn lock(&self) -> std::sync::MutexGuard<'_, PhaseState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The handler answered a request: the connection waits for the next one.
    pub fn finish(&self) {
        let mut state = self.lock();
        state.finished += 1;
        state.last_finished = Some(Instant::now());
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
    }

    /// Requests answered, and when the last one was; `waker` is woken at the next answer.
    fn answered(&self, waker: &std::task::Waker) -> (u64, Option<Instant>) {
        let mut state = self.lock();
        state.waker = Some(waker.clone());
        (state.finished, state.last_finished)
    }
}

/// Turns a core response into raw HTTP/1.1 bytes, for answers hyper never sends.
pub fn raw_response(resp: &engage_core::Response) -> Vec<u8> {
    let reason = hyper::StatusCode::from_u16(resp.status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
    let mut out = format!("HTTP/1.1 {} {reason}\r\n", resp.status);
    for (k, v) in &resp.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", resp.body.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&resp.body);
    bytes
}

/// How long a refused connection keeps reading (and dropping) what the client still
/// sends after the refusal, so the client reads the answer instead of a reset.
const LINGER: Duration = Duration::from_secs(2);

/// Most bytes read and dropped while lingering.
const LINGER_BYTES: usize = 16 << 20;

/// A refusal being sent in place of hyper's next response.
struct Refusal {
    bytes: Vec<u8>,
    written: usize,
    /// Set once the bytes are written and the write side shut: reading until then.
    linger_until: Option<Instant>,
    drained: usize,
}

/// A client stream with the connection's timeouts and request framing:
/// - each request head is held back until whole and judged ([`Tracker`]); a refused
///   one never reaches hyper: hyper sees the connection end there, answers the
///   requests before it, and the refusal is written when hyper shuts the stream;
/// - with no request outstanding, a read waits at most `idle` from the last answer
///   for a head's first byte, then `header` for the rest (else 408);
/// - a write that makes no progress for `idle` fails.
pub struct Guarded<T> {
    inner: T,
    limits: Limits,
    phase: Arc<Phase>,
    tracker: Tracker,
    /// Bytes judged and not yet handed to hyper.
    out: Vec<u8>,
    out_at: usize,
    /// When the connection opened.
    opened: Instant,
    /// When the head being read started.
    head_since: Option<Instant>,
    refusal: Option<Refusal>,
    /// The client closed its side.
    eof: bool,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
    seed: fn() -> [u8; 16],
}

/// Bytes read from the client at a time.
const READ_CHUNK: usize = 16 * 1024;

impl<T> Guarded<T> {
    /// Guards `inner`; `phase` is shared with the connection's service; `seed` gives
    /// request ids to refusals.
    pub fn new(
        inner: T,
        limits: Limits,
        max_body_bytes: usize,
        phase: Arc<Phase>,
        seed: fn() -> [u8; 16],
    ) -> Guarded<T> {
        Guarded {
            inner,
            limits,
            phase,
            tracker: Tracker::new(max_body_bytes),
            out: Vec::new(),
            out_at: 0,
            opened: Instant::now(),
            head_since: None,
            refusal: None,
            eof: false,
            read_timer: None,
            write_timer: None,
            seed,
        }
    }

    /// Requests hyper was handed that have not been answered.
    fn outstanding(&self, cx: &Context<'_>) -> (bool, Instant) {
        let (finished, last) = self.phase.answered(cx.waker());
        (self.tracker.accepted() > finished, last.unwrap_or(self.opened))
    }

    fn refuse(&mut self, response: engage_core::Response) {
        self.refusal = Some(Refusal { bytes: raw_response(&response), written: 0, linger_until: None, drained: 0 });
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
        let this = &mut *self;
        loop {
            if this.out_at < this.out.len() {
                let n = (this.out.len() - this.out_at).min(buf.remaining());
                buf.put_slice(&this.out[this.out_at..this.out_at + n]);
                this.out_at += n;
                if this.out_at == this.out.len() {
                    this.out.clear();
                    this.out_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            if this.refusal.is_some() {
                // The connection ends at the refused head, once hyper has answered
                // every request before it (an end of input while one is outstanding
                // would make hyper drop its answer).
                return match this.outstanding(cx).0 {
                    true => Poll::Pending,
                    false => Poll::Ready(Ok(())),
                };
            }
            let mut chunk = [0u8; READ_CHUNK];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    // The client closed: what was held of a head goes on as it is.
                    this.eof = true;
                    let held = this.tracker.take_held();
                    this.out.extend_from_slice(&held);
                }
                Poll::Ready(Ok(())) => {
                    this.read_timer = None;
                    let seed = (this.seed)();
                    if let Fed::Refused(response) = this.tracker.feed(read.filled(), &mut this.out, seed) {
                        this.refuse(response);
                    }
                    this.head_since = match (this.tracker.head_started(), this.head_since) {
                        (true, None) => Some(Instant::now()),
                        (true, since) => since,
                        (false, _) => None,
                    };
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    let (outstanding, last_answer) = this.outstanding(cx);
                    if outstanding {
                        // A body is being read (the handler's own timeout) or an answer
                        // is being made: no deadline here; the answer wakes this read.
                        this.read_timer = None;
                        return Poll::Pending;
                    }
                    let deadline = match this.head_since {
                        Some(t) => t + this.limits.header,
                        None => last_answer + this.limits.idle,
                    };
                    if !expired(&mut this.read_timer, deadline, cx) {
                        return Poll::Pending;
                    }
                    this.read_timer = None;
                    if this.head_since.is_none() {
                        return Poll::Ready(Err(timed_out("idle")));
                    }
                    let response = this.tracker.timed_out(this.limits.header.as_secs(), (this.seed)());
                    this.refuse(response);
                }
            }
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

impl<T: AsyncRead + AsyncWrite + Unpin> Guarded<T> {
    /// Writes the refusal, shuts the write side, then reads and drops what the
    /// client still sends (bounded), so it reads the refusal rather than a reset.
    fn poll_refusal(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(refusal) = self.refusal.as_mut() else { return Poll::Ready(Ok(())) };
        while refusal.written < refusal.bytes.len() {
            let polled = Pin::new(&mut self.inner).poll_write(cx, &refusal.bytes[refusal.written..]);
            match polled {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => refusal.written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        if refusal.linger_until.is_none() {
            match Pin::new(&mut self.inner).poll_shutdown(cx) {
                Poll::Pending => return Poll::Pending,
                // The client is gone: nothing to linger for.
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {}
            }
            refusal.linger_until = Some(Instant::now() + LINGER);
        }
        let until = refusal.linger_until.unwrap_or_else(Instant::now);
        let mut sink = [0u8; READ_CHUNK];
        loop {
            if self.eof || refusal.drained > LINGER_BYTES {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut sink);
            match Pin::new(&mut self.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => refusal.drained += read.filled().len(),
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => {
                    return match expired(&mut self.read_timer, until, cx) {
                        true => Poll::Ready(Ok(())),
                        false => Poll::Pending,
                    }
                }
            }
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        self.write_outcome(polled, cx)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.refusal.is_some() {
            return self.poll_refusal(cx);
        }
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
