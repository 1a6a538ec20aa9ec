//! Documents are stored as JSON. Decoding failures are storage errors (a corrupt
//! document), never panics; so are encoding failures, never empty bytes.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::store::StoreError;

/// Decodes a stored JSON document; a corrupt document is a storage error, not a panic.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError(format!("corrupt document: {e}")))
}

/// Encodes a document.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError(format!("cannot encode a document: {e}")))
}
