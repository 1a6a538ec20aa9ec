//! Snapshots (`/_engage/snapshots`): a copy of a workspace's documents, or the
//! whole deployment's, kept in this server's memory under a name, and put back
//! in one unit of work. A test saves the state it built once and goes back to it
//! before each case, far faster than resetting and loading fixtures again.
//!
//! Snapshots are the server's, not the store's: another server sharing the store
//! does not see them, and they are gone when the server stops (`GET
//! /_engage/state` and `--state` are the durable form). They are bounded in count
//! and bytes ([`MAX_SNAPSHOTS`], [`MAX_BYTES`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::documents::Doc;
use crate::error::ApiError;
use crate::time::Timestamp;

/// Most snapshots one server keeps.
pub const MAX_SNAPSHOTS: usize = 64;

/// Most bytes of documents all snapshots hold together.
pub const MAX_BYTES: usize = 512 << 20;

/// A saved copy.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// When it was taken (the scope's clock).
    pub taken_at: Timestamp,
    /// The documents.
    pub docs: Arc<Vec<Doc>>,
    /// Their size.
    pub bytes: usize,
}

/// The snapshots, by workspace (empty: the deployment's) and name: two tests, each
/// with a workspace of its own, may both name one "before".
#[derive(Default)]
pub struct Shelf {
    kept: Mutex<BTreeMap<(String, String), Snapshot>>,
}

/// Checks a snapshot's name: 1 to 64 letters, digits, `-`, `_` and `.`.
pub fn check_name(name: &str) -> Result<(), ApiError> {
    let ok = (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    match ok {
        true => Ok(()),
        false => {
            Err(ApiError::bad(format!("a snapshot's name is 1 to 64 letters, digits, '-', '_' or '.', not '{name}'")))
        }
    }
}

impl Shelf {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Snapshot>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `docs` as `name` of `workspace`, in place of one of that name; refused
    /// past the bounds (nothing is dropped to make room).
    pub fn save(&self, workspace: &str, name: &str, docs: Vec<Doc>, taken_at: Timestamp) -> Result<Value, ApiError> {
        let bytes: usize = docs.iter().map(Doc::size).sum();
        let mut kept = self.lock();
        let key = (workspace.to_string(), name.to_string());
        let others: usize = kept.iter().filter(|(k, _)| **k != key).map(|(_, s)| s.bytes).sum();
        if !kept.contains_key(&key) && kept.len() >= MAX_SNAPSHOTS {
            return Err(ApiError::Conflict(format!(
                "this server keeps at most {MAX_SNAPSHOTS} snapshots: delete one (DELETE /_engage/snapshots/NAME)"
            )));
        }
        if others + bytes > MAX_BYTES {
            return Err(ApiError::Conflict(format!(
                "snapshots hold at most {} MiB together, and this one takes {} KiB more than is left: delete one",
                MAX_BYTES >> 20,
                (others + bytes - MAX_BYTES).div_ceil(1024)
            )));
        }
        let n = docs.len();
        kept.insert(key, Snapshot { taken_at, docs: Arc::new(docs), bytes });
        Ok(shown(workspace, name, n, bytes, taken_at))
    }

    /// The snapshot `name` of `workspace`.
    pub fn get(&self, workspace: &str, name: &str) -> Option<Snapshot> {
        self.lock().get(&(workspace.to_string(), name.to_string())).cloned()
    }

    /// Removes one; false when there was none.
    pub fn remove(&self, workspace: &str, name: &str) -> bool {
        self.lock().remove(&(workspace.to_string(), name.to_string())).is_some()
    }

    /// Removes every snapshot of `workspace` (all, with none): how many.
    pub fn clear(&self, workspace: Option<&str>) -> usize {
        let mut kept = self.lock();
        let before = kept.len();
        kept.retain(|(ws, _), _| workspace.is_some_and(|w| w != ws));
        before - kept.len()
    }

    /// Every snapshot (of `workspace`), by workspace and name.
    pub fn list(&self, workspace: Option<&str>) -> Vec<Value> {
        self.lock()
            .iter()
            .filter(|((ws, _), _)| workspace.is_none_or(|w| w == ws))
            .map(|((ws, name), s)| shown(ws, name, s.docs.len(), s.bytes, s.taken_at))
            .collect()
    }
}

fn shown(workspace: &str, name: &str, documents: usize, bytes: usize, taken_at: Timestamp) -> Value {
    let workspace = if workspace.is_empty() { Value::Null } else { json!(workspace) };
    json!({"name": name, "workspace": workspace, "documents": documents, "bytes": bytes, "taken_at": taken_at.to_rfc3339()})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Table;

    fn doc(n: usize) -> Doc {
        Doc { table: Table::Profile, key: format!("k{n}"), value: vec![b'x'; 100] }
    }

    #[test]
    fn snapshots_are_per_workspace_replaced_by_name_and_bounded_in_count() {
        let shelf = Shelf::default();
        shelf.save("a", "before", vec![doc(1)], Timestamp(0)).unwrap();
        shelf.save("b", "before", vec![doc(1), doc(2)], Timestamp(0)).unwrap();
        assert_eq!(shelf.get("b", "before").unwrap().docs.len(), 2);
        shelf.save("a", "before", vec![], Timestamp(0)).unwrap();
        assert_eq!(shelf.get("a", "before").unwrap().docs.len(), 0);
        assert_eq!(shelf.list(Some("b")).len(), 1);
        for i in 0..MAX_SNAPSHOTS - 2 {
            shelf.save("", &format!("s{i}"), vec![], Timestamp(0)).unwrap();
        }
        assert!(matches!(shelf.save("", "one-more", vec![], Timestamp(0)), Err(ApiError::Conflict(_))));
        // Replacing one by name is not one more.
        shelf.save("", "s0", vec![doc(3)], Timestamp(0)).unwrap();
        assert_eq!(shelf.clear(Some("a")), 1);
        assert!(shelf.remove("b", "before"));
        assert!(!shelf.remove("b", "before"));
        assert!(check_name("a.b-c_1").is_ok());
        for bad in ["", "a/b", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
