//! Request bodies: full `/users/track` batches (75 attributes + 75 events + 75
//! purchases) over uniform or Zipf-skewed users, and the single requests of the
//! other endpoints, all on seeded profiles.

use serde_json::{json, Value};

use crate::seed::user;

/// xorshift64: deterministic, so every run sends the same requests.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How the users of a batch are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Users {
    Uniform,
    /// Zipf with exponent 1 (the continuous approximation: the rank is N^u), ranks
    /// scattered over the key space so the hot users are not neighbours on disk.
    Zipf,
}

impl Users {
    pub fn name(self) -> &'static str {
        match self {
            Users::Uniform => "uniform",
            Users::Zipf => "zipf",
        }
    }

    pub fn pick(self, rng: &mut Rng, profiles: u64) -> u64 {
        match self {
            Users::Uniform => rng.next() % profiles,
            Users::Zipf => {
                let rank = ((profiles as f64).powf(rng.unit()) as u64).saturating_sub(1).min(profiles - 1);
                // A multiplier coprime with every data set's size: a permutation.
                (rank.wrapping_mul(2_654_435_761)) % profiles
            }
        }
    }
}

/// Objects in a full batch.
pub const BATCH_OBJECTS: f64 = 225.0;

/// One full `/users/track` batch.
pub fn track_batch(rng: &mut Rng, profiles: u64, users: Users) -> Vec<u8> {
    let mut u = || user(users.pick(rng, profiles));
    let attributes: Vec<Value> = (0..75)
        .map(
            |i| json!({"external_id": u(), "first_name": "Bench", "visits": {"inc": 1}, "tier": format!("t{}", i % 5)}),
        )
        .collect();
    let events: Vec<Value> = (0..75)
        .map(|_| json!({"external_id": u(), "name": "viewed_item", "time": "2026-11-01T10:00:00Z", "properties": {"item": "sku-1", "price": 9.99}}))
        .collect();
    let purchases: Vec<Value> = (0..75)
        .map(|_| json!({"external_id": u(), "product_id": "sku-1", "currency": "USD", "price": 9.99, "quantity": 1, "time": "2026-11-01T10:00:00Z"}))
        .collect();
    serde_json::to_vec(&json!({"attributes": attributes, "events": events, "purchases": purchases})).unwrap()
}

/// A running number spread over the users (a different user for each of many requests).
pub fn spread(n: u64, profiles: u64) -> u64 {
    n.wrapping_mul(0x9E37_79B9_7F4A_7C15) % profiles
}

/// `/users/track/sync` with one event.
pub fn sync_event(n: u64, profiles: u64) -> Vec<u8> {
    let u = user(spread(n, profiles));
    serde_json::to_vec(&json!({"events": [{"external_id": u, "name": "opened_app", "time": "2026-11-01T10:00:00Z"}]}))
        .unwrap()
}

/// `/users/export/ids` of 50 users.
pub fn export_50(n: u64, profiles: u64) -> Vec<u8> {
    let ids: Vec<String> = (0..50).map(|i| user(spread(n * 50 + i, profiles))).collect();
    serde_json::to_vec(&json!({"external_ids": ids})).unwrap()
}

/// `/subscription/user/status` of one user.
pub fn user_status(n: u64, profiles: u64) -> String {
    format!("/subscription/user/status?external_id={}", user(spread(n, profiles)))
}

/// `/users/identify`: a new alias onto an existing user.
pub fn identify(n: u64, profiles: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({"aliases_to_identify": [{
        "external_id": user(spread(n, profiles)),
        "user_alias": {"alias_name": format!("bench-{n}"), "alias_label": "bench"}
    }]}))
    .unwrap()
}

/// `/users/merge`: user 2n into user 2n+1 (each pair once; wraps after profiles/2).
pub fn merge(n: u64, profiles: u64) -> Vec<u8> {
    let pair = n % (profiles / 2);
    serde_json::to_vec(&json!({"merge_updates": [{
        "identifier_to_merge": {"external_id": user(2 * pair)},
        "identifier_to_keep": {"external_id": user(2 * pair + 1)}
    }]}))
    .unwrap()
}

/// `/v2/subscription/status/set`: one user into `group`.
pub fn status_set(n: u64, profiles: u64, group: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"subscription_groups": [{
        "subscription_group_id": group, "subscription_state": if n.is_multiple_of(2) { "subscribed" } else { "unsubscribed" },
        "external_ids": [user(spread(n, profiles))]
    }]}))
    .unwrap()
}
