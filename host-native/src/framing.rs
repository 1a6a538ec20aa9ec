//! Where each request starts and ends in a connection's bytes, read before hyper
//! reads them: each request head is held back until it is whole, parsed
//! (httparse, as hyper does) and judged by the core ([`engage_core::head::judge`]),
//! then passed on with its body, whose framing says where the next head starts.
//! A refused head never reaches hyper; the refusal is answered after the responses
//! to the requests before it (see `conn::Guarded`).
//!
//! Why here and not in hyper: hyper answers its own parse errors with an empty body
//! and no request id, keeps `Content-Length` beside `Transfer-Encoding` out of sight,
//! and reads a request's head only once the request before it has been answered, so
//! a smuggled second request in one write would be served.

use engage_core::head::{self, Framing, Head, Verdict, MAX_HEADER_FIELDS, MAX_HEAD_BYTES};
use engage_core::Response;

/// Longest chunk-size or trailer line followed; a longer one ends the tracking
/// (hyper refuses the body, and the handler answers 400).
const MAX_LINE: usize = 4096;

/// Where the tracker is in the connection's bytes.
#[derive(Debug)]
enum Stage {
    /// Reading a head (held back in `Tracker::head`).
    Head,
    /// In a body of known length: this many bytes to go.
    Body(u64),
    /// In a chunked body.
    Chunked(Chunk),
    /// The framing was lost (a malformed chunk): everything passes; hyper fails the
    /// request on the same bytes and the connection closes.
    Lost,
}

#[derive(Debug)]
enum Chunk {
    /// Reading a chunk-size line.
    Size,
    /// In a chunk's data: this many bytes to go.
    Data(u64),
    /// After a chunk's data, up to its line end.
    DataEnd,
    /// Reading trailer lines, up to an empty one.
    Trailer,
}

/// Follows one connection's request framing.
#[derive(Debug)]
pub struct Tracker {
    stage: Stage,
    /// The head being read, or the chunk line being read.
    held: Vec<u8>,
    /// How far `held` was searched for the head's end.
    scanned: usize,
    /// Heads accepted so far.
    accepted: u64,
    max_body_bytes: usize,
}

/// What one call to [`Tracker::feed`] found.
#[derive(Debug, PartialEq)]
pub enum Fed {
    /// Every byte was taken.
    Taken,
    /// A head was refused: answer this and close; the bytes from that head on are
    /// dropped.
    Refused(Response),
}

impl Tracker {
    /// A tracker for a new connection.
    pub fn new(max_body_bytes: usize) -> Tracker {
        Tracker { stage: Stage::Head, held: Vec::new(), scanned: 0, accepted: 0, max_body_bytes }
    }

    /// Heads accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// What is held of a head that will not be finished (the client closed): it goes
    /// on to hyper as it is.
    pub fn take_held(&mut self) -> Vec<u8> {
        match self.stage {
            Stage::Head => std::mem::take(&mut self.held),
            _ => Vec::new(),
        }
    }

    /// True while part of a head has arrived but not all of it.
    pub fn head_started(&self) -> bool {
        matches!(self.stage, Stage::Head) && !self.held.is_empty()
    }

    /// The refusal for a head that did not arrive whole in time.
    pub fn timed_out(&self, secs: u64, seed: [u8; 16]) -> Response {
        refusal(head::judge(&Head::TimedOut { secs }, self.max_body_bytes, seed))
    }

    /// Takes `input`, appending to `out` what may go on to hyper.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>, seed: [u8; 16]) -> Fed {
        while !input.is_empty() {
            let taken = match &mut self.stage {
                Stage::Lost => {
                    out.extend_from_slice(input);
                    input.len()
                }
                Stage::Body(left) => {
                    let n = (*left).min(input.len() as u64) as usize;
                    out.extend_from_slice(&input[..n]);
                    *left -= n as u64;
                    if *left == 0 {
                        self.stage = Stage::Head;
                    }
                    n
                }
                Stage::Chunked(_) => self.chunked(input, out),
                Stage::Head => match self.head(input, out, seed) {
                    Ok(n) => n,
                    Err(response) => return Fed::Refused(response),
                },
            };
            input = &input[taken..];
        }
        Fed::Taken
    }

    /// Takes head bytes from `input`; returns how many, or the refusal.
    fn head(&mut self, input: &[u8], out: &mut Vec<u8>, seed: [u8; 16]) -> Result<usize, Response> {
        if self.held.is_empty() {
            // Empty lines before a request line are ignored (RFC 9112 2.2).
            let blank = input.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
            if blank > 0 {
                out.extend_from_slice(&input[..blank]);
                return Ok(blank);
            }
        }
        let before = self.held.len();
        self.held.extend_from_slice(input);
        let Some(end) = head_end(&self.held, self.scanned.saturating_sub(3)) else {
            self.scanned = self.held.len();
            if self.held.len() > MAX_HEAD_BYTES {
                return Err(refusal(head::judge(&Head::TooLarge { start: &self.held }, self.max_body_bytes, seed)));
            }
            return Ok(input.len());
        };
        if end > MAX_HEAD_BYTES {
            return Err(refusal(head::judge(&Head::TooLarge { start: &self.held }, self.max_body_bytes, seed)));
        }
        let verdict = judge(&self.held[..end], self.max_body_bytes, seed);
        match verdict {
            Verdict::Refuse(response) => Err(response),
            Verdict::Accept(framing) => {
                out.extend_from_slice(&self.held[..end]);
                self.held.clear();
                self.scanned = 0;
                self.accepted += 1;
                self.stage = match framing {
                    Framing::Empty => Stage::Head,
                    Framing::Length(n) => Stage::Body(n),
                    Framing::Chunked => Stage::Chunked(Chunk::Size),
                };
                Ok(end - before)
            }
        }
    }

    /// Takes chunked-body bytes from `input`; returns how many.
    fn chunked(&mut self, input: &[u8], out: &mut Vec<u8>) -> usize {
        let Stage::Chunked(chunk) = &mut self.stage else { return 0 };
        if let Chunk::Data(left) = chunk {
            let n = (*left).min(input.len() as u64) as usize;
            out.extend_from_slice(&input[..n]);
            *left -= n as u64;
            if *left == 0 {
                *chunk = Chunk::DataEnd;
            }
            return n;
        }
        // A line: up to and including its '\n'.
        let (line_part, complete) = match input.iter().position(|&b| b == b'\n') {
            Some(i) => (&input[..=i], true),
            None => (input, false),
        };
        out.extend_from_slice(line_part);
        self.held.extend_from_slice(line_part);
        if !complete {
            if self.held.len() > MAX_LINE {
                self.stage = Stage::Lost;
            }
            return line_part.len();
        }
        let line = std::mem::take(&mut self.held);
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        self.stage = match chunk {
            Chunk::Size => match chunk_size(text) {
                Some(0) => Stage::Chunked(Chunk::Trailer),
                Some(n) => Stage::Chunked(Chunk::Data(n)),
                None => Stage::Lost,
            },
            Chunk::DataEnd if text.is_empty() => Stage::Chunked(Chunk::Size),
            Chunk::DataEnd => Stage::Lost,
            Chunk::Trailer if text.is_empty() => Stage::Head,
            Chunk::Trailer => Stage::Chunked(Chunk::Trailer),
            Chunk::Data(_) => Stage::Lost,
        };
        line_part.len()
    }
}

/// The length of the head at the start of `bytes` (through its empty line), searching
/// from `from`.
fn head_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(p) = bytes.get(i..).and_then(|rest| rest.iter().position(|&b| b == b'\n')) {
        let nl = i + p;
        match bytes.get(nl + 1..) {
            Some([b'\n', ..]) => return Some(nl + 2),
            Some([b'\r', b'\n', ..]) => return Some(nl + 3),
            _ => i = nl + 1,
        }
    }
    None
}

/// A chunk-size line's size (hex digits, then optional extensions).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let rest = &line[digits..];
    if digits == 0 || digits > 15 || !(rest.is_empty() || matches!(rest[0], b';' | b' ' | b'\t')) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(&line[..digits]).ok()?, 16).ok()
}

/// Parses a whole head and asks the core.
fn judge(bytes: &[u8], max_body_bytes: usize, seed: [u8; 16]) -> Verdict {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADER_FIELDS];
    let mut request = httparse::Request::new(&mut fields);
    let parsed = match request.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => match (request.path, request.version) {
            (Some(target), Some(minor_version)) => Head::Parsed {
                target,
                minor_version,
                fields: request.headers.iter().map(|h| (h.name, h.value)).collect(),
            },
            _ => Head::Malformed,
        },
        Err(httparse::Error::TooManyHeaders) => Head::TooLarge { start: bytes },
        Ok(httparse::Status::Partial) | Err(_) => Head::Malformed,
    };
    head::judge(&parsed, max_body_bytes, seed)
}

fn refusal(verdict: Verdict) -> Response {
    match verdict {
        Verdict::Refuse(response) => response,
        // The core refuses every head that is not a parsed one.
        Verdict::Accept(_) => engage_core::ApiError::bad("Bad Request").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(t: &mut Tracker, parts: &[&[u8]]) -> (Vec<u8>, Option<u16>) {
        let mut out = Vec::new();
        for part in parts {
            if let Fed::Refused(r) = t.feed(part, &mut out, [0; 16]) {
                return (out, Some(r.status));
            }
        }
        (out, None)
    }

    #[test]
    fn pipelined_requests_are_each_judged_by_their_own_head() {
        let good = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".as_slice();
        let smuggled =
            b"POST /users/track HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        let mut t = Tracker::new(1000);
        let (out, refused) = feed_all(&mut t, &[&[good, smuggled.as_slice()].concat()]);
        assert_eq!(refused, Some(400));
        assert_eq!(out, good, "only the first request goes on");
        assert_eq!(t.accepted(), 1);
    }

    #[test]
    fn body_bytes_are_never_read_as_a_head() {
        let body = b"{\"a\":\"content-length: 3\\r\\ntransfer-encoding: chunked\"}";
        let chunked = format!("{:x}\r\n", body.len());
        let req = [
            b"POST /users/track HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".as_slice(),
            chunked.as_bytes(),
            body,
            b"\r\n0\r\n\r\n",
            b"POST /users/track HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        ]
        .concat();
        // Whole, and a byte at a time.
        for split in [req.len(), 1] {
            let mut t = Tracker::new(1000);
            let parts: Vec<&[u8]> = req.chunks(split).collect();
            let (out, refused) = feed_all(&mut t, &parts);
            assert_eq!((refused, out.len(), t.accepted()), (None, req.len(), 3), "split {split}");
            assert!(!t.head_started());
        }
    }

    #[test]
    fn an_oversized_head_is_refused_before_its_end_arrives() {
        let mut t = Tracker::new(1000);
        let mut out = Vec::new();
        assert_eq!(t.feed(b"GET / HTTP/1.1\r\nHost: x\r\n", &mut out, [0; 16]), Fed::Taken);
        assert!(t.head_started() && out.is_empty(), "the head is held back");
        let pad = format!("X-Pad: {}\r\n", "p".repeat(MAX_HEAD_BYTES));
        let Fed::Refused(r) = t.feed(pad.as_bytes(), &mut out, [0; 16]) else { panic!("refused") };
        assert_eq!(r.status, 431);
    }

    #[test]
    fn a_declared_body_over_the_limit_is_refused_from_the_head() {
        let mut t = Tracker::new(1000);
        let (_, refused) =
            feed_all(&mut t, &[b"POST /users/track HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"]);
        assert_eq!(refused, Some(413));
    }

    #[test]
    fn a_malformed_chunk_hands_the_rest_to_hyper() {
        let mut t = Tracker::new(1000);
        let req = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET / HTTP/1.1\r\n\r\n";
        let (out, refused) = feed_all(&mut t, &[req]);
        assert_eq!((refused, out.len()), (None, req.len()));
    }

    #[test]
    fn chunk_sizes_and_head_ends_are_read_as_the_rfc_writes_them() {
        assert_eq!(chunk_size(b"1a"), Some(26));
        assert_eq!(chunk_size(b"1A;name=value"), Some(26));
        assert_eq!(chunk_size(b""), None);
        assert_eq!(chunk_size(b"zz"), None);
        assert_eq!(chunk_size(b"ffffffffffffffff"), None);
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nrest", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    }
}
