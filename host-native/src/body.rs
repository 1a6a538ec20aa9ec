//! Reading a request's body within the core's limit, and draining one refused.

use engage_core::BodyError;
use http_body_util::BodyExt;
use hyper::body::Incoming;

/// Reads the body: too large past `limit` (after draining what the client still
/// sends), malformed when its framing breaks (a bad chunk, a connection closed early).
pub(crate) async fn read_bounded(mut body: Incoming, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return Err(BodyError::Malformed) };
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                discard(body).await;
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf)
}

/// Reads and drops what is left of a refused body (up to a bound), so the client,
/// still sending, gets the 413 instead of a broken connection.
pub(crate) async fn discard(mut body: Incoming) {
    const MAX_DISCARD: usize = 64 * 1024 * 1024;
    let mut seen = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen > MAX_DISCARD {
                break;
            }
        }
    }
}
