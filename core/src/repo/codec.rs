//! Documents are stored as JSON. Decoding failures are storage errors (a corrupt
//! document), never panics; so are encoding failures, never empty bytes.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::store::StoreError;

/// Decodes a stored JSON document; a corrupt document is a storage error, not a panic.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError(format!("corrupt document: {e}")))
}

/// Encodes a document, into bytes of exactly its length. It is written into a buffer
/// kept for the thread and then copied once: `to_vec` grew its vector from nothing,
/// five reallocations for a 200-byte profile (the building thread of a warehouse sync
/// encodes 1,000 profiles a batch), and left up to half of it unused.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    /// A buffer grown past this (one large document) is not kept.
    const KEEP: usize = 16 << 10;
    let encoded = BUFFER.with(|buffer| {
        let Ok(mut buffer) = buffer.try_borrow_mut() else {
            // Only a `Serialize` that encodes another document inside it gets here.
            return serde_json::to_vec(value);
        };
        buffer.clear();
        let written = serde_json::to_writer(&mut *buffer, value).map(|()| buffer.as_slice().to_vec());
        if buffer.capacity() > KEEP {
            *buffer = Vec::new();
        }
        written
    });
    encoded.map_err(|e| StoreError(format!("cannot encode a document: {e}")))
}

#[cfg(test)]
mod tests {
    use serde::{Serialize, Serializer};
    use serde_json::json;

    use super::{decode, encode};

    /// A document that encodes another one while it is encoded (the thread's buffer is
    /// in use then).
    struct Nested(serde_json::Value);

    impl Serialize for Nested {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let inner = encode(&self.0).map_err(|e| serde::ser::Error::custom(e.0))?;
            s.serialize_str(std::str::from_utf8(&inner).unwrap())
        }
    }

    #[test]
    fn documents_encode_as_compact_json_into_vectors_of_their_length() {
        let small = json!({"external_id": "u1", "custom": {"plan": "pro", "score": 7}});
        let large = json!({"list": vec!["x".repeat(100); 1000]});
        for doc in [&small, &large, &small] {
            let bytes = encode(doc).unwrap();
            assert_eq!(bytes, serde_json::to_vec(doc).unwrap());
            assert_eq!(bytes.capacity(), bytes.len(), "no spare room kept in a stored document");
            assert_eq!(&decode::<serde_json::Value>(&bytes).unwrap(), doc);
        }
        let nested = encode(&Nested(small.clone())).unwrap();
        assert_eq!(decode::<String>(&nested).unwrap(), small.to_string());
    }
}
