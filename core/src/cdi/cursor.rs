//! Page cursors: opaque to clients, signed (HMAC-SHA-256 under the workspace's
//! CDI secret) so that a changed or foreign cursor is refused, and naming the list
//! they belong to. Lists are newest first; a cursor says which side of which item
//! its page lies.
//!
//! The `Link` header follows the spec: relative URLs, `rel="prev"` and
//! `rel="next"`, absent when the whole list fits one page, no `prev` on a request
//! without a cursor, no `next` on the last page.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Items per page.
pub const PAGE: usize = 10;

/// Which way a cursor's page lies from its item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The items after it (older).
    Next,
    /// The items before it (newer).
    Prev,
}

/// What a cursor says: the list and the position it pages from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    /// The list: `i` (integrations) or `j:<integration id>`.
    pub list: String,
    /// Which way.
    pub direction: Direction,
    /// The item's sort key.
    pub key: String,
}

const SEP: char = '\u{1f}';

fn mac(secret: &str) -> Hmac<Sha256> {
    // HMAC takes keys of any length: this cannot fail.
    <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(secret.as_bytes()).unwrap_or_else(|_| unreachable!())
}

/// Signs a position.
pub fn encode(secret: &str, p: &Position) -> String {
    let dir = match p.direction {
        Direction::Next => "n",
        Direction::Prev => "p",
    };
    let payload = format!("v1{SEP}{}{SEP}{dir}{SEP}{}", p.list, p.key);
    let mut m = mac(secret);
    m.update(payload.as_bytes());
    let sig = m.finalize().into_bytes();
    format!("{}.{}", B64.encode(payload), B64.encode(sig))
}

/// Reads a cursor of `list`: `None` when it is malformed, signed otherwise or for
/// another list.
pub fn decode(secret: &str, list: &str, cursor: &str) -> Option<Position> {
    let (payload, sig) = cursor.split_once('.')?;
    let payload = B64.decode(payload).ok()?;
    let sig = B64.decode(sig).ok()?;
    let mut m = mac(secret);
    m.update(&payload);
    m.verify_slice(&sig).ok()?;
    let text = String::from_utf8(payload).ok()?;
    let mut parts = text.splitn(4, SEP);
    let (version, l, dir, key) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let direction = match dir {
        "n" => Direction::Next,
        "p" => Direction::Prev,
        _ => return None,
    };
    (version == "v1" && l == list).then(|| Position { list: list.to_string(), direction, key: key.to_string() })
}

/// One page of `keys` (sorted newest first) from an optional position: the page's
/// range of indices, and whether a previous and a next page exist.
pub fn page(keys: &[String], from: Option<&Position>) -> (std::ops::Range<usize>, bool, bool) {
    let n = keys.len();
    let (start, end) = match from {
        None => (0, PAGE.min(n)),
        Some(p) => match p.direction {
            // After the item: the first key that sorts after it (newest first).
            Direction::Next => {
                let start = keys.iter().position(|k| k.as_str() < p.key.as_str()).unwrap_or(n);
                (start, (start + PAGE).min(n))
            }
            Direction::Prev => {
                let end = keys.iter().position(|k| k.as_str() <= p.key.as_str()).unwrap_or(n);
                (end.saturating_sub(PAGE), end)
            }
        },
    };
    // A cursor from another state of the list can point past either end: the page
    // is then empty, with no links from it.
    let (start, end) = (start.min(n), end.min(n).max(start.min(n)));
    if start == end {
        return (start..end, false, false);
    }
    let has_prev = from.is_some() && start > 0;
    let has_next = end < n;
    (start..end, has_prev, has_next)
}

/// The `Link` header of a page, or `None` when the list fits one page.
pub fn link(path: &str, total: usize, prev: Option<String>, next: Option<String>) -> Option<String> {
    if total <= PAGE {
        return None;
    }
    let entry = |c: String, rel: &str| format!("<{path}?cursor={c}>; rel=\"{rel}\"");
    let parts: Vec<String> = prev.map(|c| entry(c, "prev")).into_iter().chain(next.map(|c| entry(c, "next"))).collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n).rev().map(|i| format!("{i:04}")).collect()
    }

    #[test]
    fn cursors_read_back_and_refuse_any_change() {
        let p = Position { list: "i".into(), direction: Direction::Next, key: "0005".into() };
        let c = encode("s", &p);
        assert_eq!(decode("s", "i", &c), Some(p));
        assert_eq!(decode("other", "i", &c), None);
        assert_eq!(decode("s", "j:x", &c), None);
        for bad in ["", ".", "x", "a.b", &c[1..], &format!("{c}x")] {
            assert_eq!(decode("s", "i", bad), None, "{bad}");
        }
    }

    #[test]
    fn pages_walk_forward_and_back() {
        let k = keys(25);
        let (r, prev, next) = page(&k, None);
        assert_eq!((r.clone(), prev, next), (0..10, false, true));
        let at = |i: usize, d| Position { list: "i".into(), direction: d, key: k[i].clone() };
        assert_eq!(page(&k, Some(&at(9, Direction::Next))), (10..20, true, true));
        assert_eq!(page(&k, Some(&at(19, Direction::Next))), (20..25, true, false));
        assert_eq!(page(&k, Some(&at(20, Direction::Prev))), (10..20, true, true));
        assert_eq!(page(&k, Some(&at(10, Direction::Prev))), (0..10, false, true));
        // A position from another state of the list (past either end) is an empty
        // page without links, never an index out of range.
        let far = |key: &str, d| Position { list: "i".into(), direction: d, key: key.into() };
        assert_eq!(page(&k, Some(&far("0000", Direction::Next))), (25..25, false, false));
        assert_eq!(page(&k, Some(&far("9999", Direction::Prev))), (0..0, false, false));
        assert_eq!(page(&[], Some(&far("5", Direction::Next))), (0..0, false, false));
        assert_eq!(link("/x", 10, None, None), None);
        assert_eq!(
            link("/x", 11, Some("a".into()), Some("b".into())).unwrap(),
            "</x?cursor=a>; rel=\"prev\",</x?cursor=b>; rel=\"next\""
        );
    }
}
