//! Rate-limit accounting: fixed windows per workspace and limit bucket, with the
//! spec's limits. The counters live in memory in the engine (per process, or per
//! isolate at the edge), or in the store when several processes share it
//! ([`Store::count_in_window`]): they bound load, they are not billing records.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::store::Store;
use crate::time::Timestamp;

/// A group of endpoints sharing one limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// `/users/track`: 3,000 per 3 seconds.
    Track,
    /// `/users/track/sync`: 500 per minute.
    TrackSync,
    /// identify, merge, delete, alias new/update: 20,000 per minute, shared.
    Identity,
    /// `/users/export/ids`: 2,500 per minute.
    Export,
    /// `/users/external_ids/rename` and `/remove`: 1,000 per minute, shared.
    ExternalIds,
    /// v1 and v2 subscription set: 5,000 per minute, shared.
    SubscriptionSet,
    /// subscription and email status reads and email writes: 250,000 per hour.
    EmailAndStatus,
    /// preference center create and update: 10 per minute.
    PreferenceWrite,
    /// preference center list and get: 1,000 per minute.
    PreferenceRead,
    /// preference center user links: 1,000 per minute.
    PreferenceUrl,
    /// preference page form submissions, per link: 20 per minute.
    PreferenceSubmit,
    /// SCIM: 5,000 per day.
    Scim,
    /// `/cdi/integrations`: 50 per minute.
    CdiList,
    /// `/cdi/integrations/{id}/job_sync_status`: 100 per minute.
    CdiJobs,
    /// Operator routes: not limited.
    Admin,
}

impl Bucket {
    /// (requests allowed, window in seconds).
    pub fn limit(self) -> (u64, i64) {
        match self {
            Bucket::Track => (3_000, 3),
            Bucket::TrackSync => (500, 60),
            Bucket::Identity => (20_000, 60),
            Bucket::Export => (2_500, 60),
            Bucket::ExternalIds => (1_000, 60),
            Bucket::SubscriptionSet => (5_000, 60),
            Bucket::EmailAndStatus => (250_000, 3_600),
            Bucket::PreferenceWrite => (10, 60),
            Bucket::PreferenceRead => (1_000, 60),
            Bucket::PreferenceUrl => (1_000, 60),
            Bucket::PreferenceSubmit => (20, 60),
            Bucket::Scim => (5_000, 86_400),
            Bucket::CdiList => (50, 60),
            Bucket::CdiJobs => (100, 60),
            Bucket::Admin => (u64::MAX, 1),
        }
    }
}

/// The outcome of counting one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the headers to send.
    Allowed { limit: u64, remaining: u64, reset: i64 },
    /// Refused; seconds until the window resets.
    Limited { retry_after: u64 },
    /// Limits are switched off.
    Unlimited,
}

/// Fixed-window counters.
#[derive(Debug)]
pub struct RateLimiter {
    enabled: bool,
    windows: Mutex<HashMap<(String, Bucket), (i64, u64)>>,
}

impl RateLimiter {
    /// A limiter; `enabled: false` allows everything (benchmarks, local tools).
    pub fn new(enabled: bool) -> RateLimiter {
        RateLimiter { enabled, windows: Mutex::new(HashMap::new()) }
    }

    /// Forgets this process's counts of `workspace` (every workspace's with `None`):
    /// a test kit's reset starts the windows afresh. Counts a store keeps for
    /// several servers (PostgreSQL) stay.
    pub fn forget(&self, workspace: Option<&str>) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        windows.retain(|(ws, _), _| workspace.is_some_and(|w| w != ws));
    }

    /// Counts one request of `workspace` in `bucket` at `now`: in the store's shared
    /// counters when it keeps them, else in this process's memory (also when the
    /// store cannot count: a limit bounds load, it never refuses for a storage fault).
    pub async fn check<S: Store>(&self, store: &S, workspace: &str, bucket: Bucket, now: Timestamp) -> Decision {
        if !self.enabled || bucket == Bucket::Admin {
            return Decision::Unlimited;
        }
        let (limit, window) = bucket.limit();
        let start = now.seconds().div_euclid(window) * window;
        let reset = (start + window - now.seconds()).max(1);
        let key = format!("{workspace}/{bucket:?}");
        let count = match store.count_in_window(&key, start, start + window).await {
            Ok(Some(n)) => n,
            Ok(None) | Err(_) => match self.count_here(workspace, bucket, now, start, limit) {
                Some(n) => n,
                None => return Decision::Limited { retry_after: reset as u64 },
            },
        };
        if count > limit {
            return Decision::Limited { retry_after: reset as u64 };
        }
        Decision::Allowed { limit, remaining: limit - count, reset }
    }

    /// Counts one request in this process's memory, in the window starting at
    /// `start`: the count with it, or `None` when the window is full (a refused
    /// request is not counted).
    fn count_here(&self, workspace: &str, bucket: Bucket, now: Timestamp, start: i64, limit: u64) -> Option<u64> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if windows.len() > 100_000 {
            // Drop expired windows so the map cannot grow without bound.
            windows.retain(|(_, b), (s, _)| *s + b.limit().1 > now.seconds());
        }
        let entry = windows.entry((workspace.to_string(), bucket)).or_insert((start, 0));
        if entry.0 != start {
            *entry = (start, 0);
        }
        if entry.1 >= limit {
            return None;
        }
        entry.1 += 1;
        Some(entry.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(r: &RateLimiter, ws: &str, bucket: Bucket, now: Timestamp) -> Decision {
        pollster::block_on(r.check(&crate::store::memory::MemoryStore::new(), ws, bucket, now))
    }

    #[test]
    fn the_window_fills_then_resets() {
        let r = RateLimiter::new(true);
        let t = Timestamp(60_000);
        for i in 0..10 {
            assert_eq!(
                check(&r, "w", Bucket::PreferenceWrite, t),
                Decision::Allowed { limit: 10, remaining: 9 - i, reset: 60 }
            );
        }
        assert_eq!(check(&r, "w", Bucket::PreferenceWrite, Timestamp(90_000)), Decision::Limited { retry_after: 30 });
        assert!(matches!(check(&r, "other", Bucket::PreferenceWrite, t), Decision::Allowed { .. }));
        assert!(matches!(
            check(&r, "w", Bucket::PreferenceWrite, Timestamp(120_000)),
            Decision::Allowed { remaining: 9, .. }
        ));
    }
}
