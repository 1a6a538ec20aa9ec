//! A read-through cache of API-key records: the isolate's memory first, then
//! Workers KV, then D1.
//!
//! Every request authenticates first, and D1 lives in one region while KV reads are
//! served from the location that runs the Worker; caching the key lookup saves one
//! D1 round trip per request. Only hits from D1 are cached (an unknown key always
//! goes to D1, so a new key works at once); a key record written or deleted through
//! this isolate (its last use noted, its revocation) is forgotten here and in KV at
//! once, and the TTL bounds how long another isolate's memory could still hold it. The cache key
//! is the key's SHA-256 hash (the secret itself is never stored), and the record
//! names its one workspace, so nothing crosses workspaces.

use std::cell::RefCell;
use std::collections::HashMap;

use engage_core::store::Entry;
use worker::{Date, KvStore};

/// Seconds a cached record lives (KV's minimum), in KV and in memory.
pub const TTL_SECONDS: u64 = 60;
/// Records kept in the isolate's memory at most (the map is emptied when full).
const MEMORY_ENTRIES: usize = 10_000;

/// The key cache: a small map in the isolate plus a KV namespace.
pub struct KeyCache {
    kv: KvStore,
    /// key hash → (record, expiry in ms since the epoch).
    memory: RefCell<HashMap<String, (Entry, u64)>>,
}

fn cache_key(key_hash: &str) -> String {
    format!("apikey:{key_hash}")
}

impl KeyCache {
    /// A cache over a KV namespace.
    pub fn new(kv: KvStore) -> KeyCache {
        KeyCache { kv, memory: RefCell::new(HashMap::new()) }
    }

    fn remember(&self, key_hash: &str, entry: &Entry) {
        let mut memory = self.memory.borrow_mut();
        if memory.len() >= MEMORY_ENTRIES {
            memory.clear();
        }
        memory.insert(key_hash.to_string(), (entry.clone(), Date::now().as_millis() + TTL_SECONDS * 1000));
    }

    /// The cached record, or `None` on a miss or any KV failure (then D1 answers).
    pub async fn get(&self, key_hash: &str) -> Option<Entry> {
        let now = Date::now().as_millis();
        if let Some((entry, expires)) = self.memory.borrow().get(key_hash) {
            if *expires > now {
                return Some(entry.clone());
            }
        }
        let text = self.kv.get(&cache_key(key_hash)).text().await.ok()??;
        let (version, value) = text.split_once(':')?;
        let entry = Entry { version: version.parse().ok()?, value: value.as_bytes().to_vec() };
        self.remember(key_hash, &entry);
        Some(entry)
    }

    /// Forgets a record that changed or went.
    pub async fn forget(&self, key_hash: &str) {
        self.memory.borrow_mut().remove(key_hash);
        if let Err(e) = self.kv.delete(&cache_key(key_hash)).await {
            worker::console_warn!("KV key cache delete failed: {e:?}");
        }
    }

    /// Stores a record read from D1; a failure only costs the next lookup a D1 read.
    pub async fn put(&self, key_hash: &str, entry: &Entry) {
        self.remember(key_hash, entry);
        let Ok(value) = std::str::from_utf8(&entry.value) else {
            return;
        };
        let text = format!("{}:{value}", entry.version);
        if let Ok(put) = self.kv.put(&cache_key(key_hash), text) {
            if let Err(e) = put.expiration_ttl(TTL_SECONDS).execute().await {
                worker::console_warn!("KV key cache write failed: {e:?}");
            }
        }
    }
}
