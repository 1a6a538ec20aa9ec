//! User identifiers, parsed once into types so the rest of the core never sees an
//! unchecked string. Also the generation of service ids from the host's seed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest identifier accepted, in bytes (the platform documents 987 for external ids).
pub const MAX_IDENTIFIER_LEN: usize = 987;

fn clean(text: &str) -> Option<&str> {
    // Control characters would break the store's key encoding and are never meaningful.
    if text.is_empty() || text.len() > MAX_IDENTIFIER_LEN || text.chars().any(char::is_control) {
        None
    } else {
        Some(text)
    }
}

/// A workspace name: 1 to 64 of letters, digits, `-`, `_`, `.`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkspaceName(String);

impl WorkspaceName {
    /// What a valid name is, for messages.
    pub const RULE: &'static str = "1 to 64 of letters, digits, '-', '_', '.' (not dots alone)";

    /// Parses a workspace name. The restricted alphabet keeps store keys
    /// unambiguous; names of dots alone (`.`, `..`) read as paths, so none is one.
    pub fn parse(text: &str) -> Option<WorkspaceName> {
        let ok = !text.is_empty()
            && text.len() <= 64
            && text.bytes().any(|b| b != b'.')
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        ok.then(|| WorkspaceName(text.to_string()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The empty name, which [`WorkspaceName::parse`] never yields: the scope of a
    /// unit of work over company-wide documents (SCIM's dashboard users), which
    /// belong to no workspace and can never be mistaken for one's.
    pub(crate) fn company() -> WorkspaceName {
        WorkspaceName(String::new())
    }
}

/// A client-chosen external user id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ExternalId(String);

/// External ids the platform rejects as dummy (spam) users; compared case-insensitively.
pub const BLOCKED_EXTERNAL_IDS: &[&str] =
    &["undefined", "null", "nil", "none", "n/a", "nan", "[object object]", "(null)", "0", "-1", "unknown"];

impl ExternalId {
    /// Parses an external id: non-empty, at most [`MAX_IDENTIFIER_LEN`] bytes, no control characters.
    pub fn parse(text: &str) -> Option<ExternalId> {
        clean(text).map(|t| ExternalId(t.to_string()))
    }

    /// True for placeholder ids such as `undefined` or `null` that the platform refuses.
    pub fn is_blocked(&self) -> bool {
        let id = self.0.trim();
        id.is_empty() || BLOCKED_EXTERNAL_IDS.iter().any(|b| b.eq_ignore_ascii_case(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A user alias: one name under one label.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct UserAlias {
    /// The alias value.
    pub alias_name: String,
    /// The namespace of the alias; a user has at most one alias per label.
    pub alias_label: String,
}

impl UserAlias {
    /// Parses `{"alias_name": "...", "alias_label": "..."}`.
    pub fn from_json(v: &Value) -> Option<UserAlias> {
        let o = v.as_object()?;
        let name = clean(o.get("alias_name")?.as_str()?)?;
        let label = clean(o.get("alias_label")?.as_str()?)?;
        Some(UserAlias { alias_name: name.to_string(), alias_label: label.to_string() })
    }

    /// The JSON form.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"alias_name": self.alias_name, "alias_label": self.alias_label})
    }
}

/// An email address, normalised to lower case and trimmed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Email(String);

impl Email {
    /// Parses an address with one `@`, a non-empty local part and a dotted domain, no spaces.
    pub fn parse(text: &str) -> Option<Email> {
        let t = clean(text.trim())?;
        let (local, domain) = t.split_once('@')?;
        let ok = !local.is_empty()
            && !domain.is_empty()
            && !domain.contains('@')
            && domain.contains('.')
            && !domain.starts_with('.')
            && !domain.ends_with('.')
            && !t.chars().any(char::is_whitespace)
            // 254 characters (RFC 5321's bound, counted in characters so that an
            // internationalised address is held to the same length as the API
            // description states).
            && t.chars().count() <= 254;
        ok.then(|| Email(t.to_ascii_lowercase()))
    }

    /// The address as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A phone number in E.164 form (`+` then 2 to 15 digits, no leading zero).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Phone(String);

impl Phone {
    /// Parses an E.164 number; anything else is refused (the spec: phone-based updates
    /// need a valid number).
    pub fn parse(text: &str) -> Option<Phone> {
        let digits = text.strip_prefix('+')?;
        let ok =
            (2..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0');
        ok.then(|| Phone(text.to_string()))
    }

    /// The number as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The service's internal profile id (24 lowercase hex characters).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ServiceId(String);

impl ServiceId {
    /// Parses a service id as sent by a client.
    pub fn parse(text: &str) -> Option<ServiceId> {
        clean(text).map(|t| ServiceId(t.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A map keyed by service ids is looked up by the text of one (the derived `Hash`,
/// `Eq` and `Ord` are the inner string's, as `Borrow` requires).
impl std::borrow::Borrow<str> for ServiceId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// How a request names one user.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Identifier {
    /// By external id.
    External(ExternalId),
    /// By alias.
    Alias(UserAlias),
    /// By internal id.
    Service(ServiceId),
    /// By email (may match several profiles).
    Email(Email),
    /// By phone (may match several profiles).
    Phone(Phone),
}

impl Identifier {
    /// The identifier as the JSON object a client would send.
    pub fn to_json(&self) -> Value {
        match self {
            Identifier::External(e) => serde_json::json!({"external_id": e.as_str()}),
            Identifier::Alias(a) => serde_json::json!({"user_alias": a.to_json()}),
            Identifier::Service(s) => serde_json::json!({"service_id": s.as_str()}),
            Identifier::Email(e) => serde_json::json!({"email": e.as_str()}),
            Identifier::Phone(p) => serde_json::json!({"phone": p.as_str()}),
        }
    }
}

/// Generates ids from the per-request seed the host passes in [`crate::Ctx`]: the core
/// never calls an RNG itself, and tests with a fixed seed get stable ids.
#[derive(Debug)]
pub struct IdGen {
    a: u64,
    b: u64,
    /// The random middle of this generator's service ids and its next counter
    /// (drawn at its first service id).
    object: Option<(u64, u32)>,
}

/// Randomness derived from `parts` (a seed and what the derived one is for): the
/// first 16 bytes of their SHA-256, one after the other. Every sub-seed is made
/// here, so that two derivations never differ only in how they hash.
pub fn derived_seed(parts: &[&[u8]]) -> [u8; 16] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in parts {
        h.update(part);
    }
    let mut out = [0u8; 16];
    out.copy_from_slice(&h.finalize()[..16]);
    out
}

impl IdGen {
    /// Starts from a seed.
    pub fn new(seed: [u8; 16]) -> IdGen {
        let a = u64::from_le_bytes(seed[..8].try_into().unwrap_or([0; 8]));
        let b = u64::from_le_bytes(seed[8..].try_into().unwrap_or([0; 8]));
        IdGen { a, b, object: None }
    }

    /// A generator for a sub-task (a queue batch, a retry), derived from a seed by
    /// hashing, so that ids of different sub-tasks of one request never repeat.
    pub fn derive(seed: [u8; 16], domain: &str, n: u64) -> IdGen {
        IdGen::new(derived_seed(&[&seed, domain.as_bytes(), &n.to_le_bytes()]))
    }

    /// A generator for what one queued operation creates: from the seed, its job's
    /// sequence number and its target, so that a job draws the same ids in whatever
    /// batch it is applied, and its operations applied apart (some ahead of the
    /// queue for a read, the rest in order) never draw one twice. With a seed that
    /// is the same for every batch (`--id-seed`), the ids do not depend on how the
    /// queue was cut into batches.
    pub fn for_op(seed: [u8; 16], seq: u64, target: &Identifier) -> IdGen {
        let (tag, first, second) = match target {
            Identifier::External(e) => (1u8, e.as_str(), ""),
            Identifier::Alias(a) => (2, a.alias_name.as_str(), a.alias_label.as_str()),
            Identifier::Service(s) => (3, s.as_str(), ""),
            Identifier::Email(e) => (4, e.as_str(), ""),
            Identifier::Phone(p) => (5, p.as_str(), ""),
        };
        // Lengths first: ("ab", "c") and ("a", "bc") hash apart.
        let len = (first.len() as u64).to_le_bytes();
        IdGen::new(derived_seed(&[&seed, b"op", &seq.to_le_bytes(), &[tag], &len, first.as_bytes(), second.as_bytes()]))
    }

    fn mix(mut z: u64) -> u64 {
        // splitmix64's finaliser: a bijection.
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn next_u64(&mut self) -> u64 {
        // Two independent splitmix64 streams, so all 128 bits of the seed matter.
        self.a = self.a.wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.b = self.b.wrapping_add(0xD1B5_4A32_D192_ED03);
        Self::mix(self.a) ^ Self::mix(self.b).rotate_left(32)
    }

    /// A fresh service id made at `now`: 24 hex characters laid out as the
    /// platform's (a MongoDB ObjectId): the second it was made, 5 random bytes of
    /// this generator, and a counter from a random start. Ids made together sort
    /// together, so a batch of new profiles writes to a few neighbouring pages of
    /// the store's key index instead of one page each.
    pub fn service_id(&mut self, now: crate::time::Timestamp) -> ServiceId {
        let (middle, counter) = match self.object {
            Some(o) => o,
            None => {
                let r = self.next_u64();
                (r >> 24, r as u32 & 0xFF_FFFF)
            }
        };
        self.object = Some((middle, counter.wrapping_add(1)));
        let secs = (now.0.div_euclid(1000)).clamp(0, i64::from(u32::MAX));
        // The 96 bits as 24 hex digits, by hand: `format!` of the three fields cost
        // 2,000 instructions an id, 2% of a warehouse sync of new users (callgrind).
        let bits = (secs as u128) << 64 | u128::from(middle & 0xFF_FFFF_FFFF) << 24 | u128::from(counter & 0xFF_FFFF);
        // Into bytes, then one string: collecting chars pushed each as UTF-8 (700
        // instructions an id, callgrind).
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0u8; 24];
        for (i, digit) in hex.iter_mut().rev().enumerate() {
            *digit = HEX[(bits >> (4 * i)) as usize & 0xF];
        }
        // Hex digits are ASCII: the lossy form only copies them.
        ServiceId(String::from_utf8_lossy(&hex).into_owned())
    }

    /// A fresh random (version 4 layout) UUID.
    pub fn uuid(&mut self) -> String {
        let h = self.token(16);
        format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
    }

    /// `n` fresh random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next_u64().to_be_bytes());
        }
        out.truncate(n);
        out
    }

    /// A fresh opaque token of `bytes` random bytes, hex encoded.
    pub fn token(&mut self, bytes: usize) -> String {
        let mut s = String::with_capacity(bytes * 2);
        while s.len() < bytes * 2 {
            s.push_str(&format!("{:016x}", self.next_u64()));
        }
        s.truncate(bytes * 2);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phones_must_be_e164() {
        assert!(Phone::parse("+14155550100").is_some());
        assert!(Phone::parse("14155550100").is_none());
        assert!(Phone::parse("+0123").is_none());
        assert!(Phone::parse("+1 415 555").is_none());
        assert!(Phone::parse("+1234567890123456").is_none());
    }

    #[test]
    fn emails_are_normalised_and_checked() {
        assert_eq!(Email::parse(" A@Example.COM ").unwrap().as_str(), "a@example.com");
        assert!(Email::parse("no-at-sign").is_none());
        assert!(Email::parse("a@b").is_none());
        assert!(Email::parse("a b@c.de").is_none());
    }

    #[test]
    fn placeholder_external_ids_are_blocked() {
        assert!(ExternalId::parse("undefined").unwrap().is_blocked());
        assert!(ExternalId::parse("NULL").unwrap().is_blocked());
        assert!(!ExternalId::parse("user-17").unwrap().is_blocked());
        assert!(ExternalId::parse("").is_none());
        assert!(ExternalId::parse("a\u{1f}b").is_none());
    }

    #[test]
    fn service_ids_are_the_second_the_generators_bytes_and_a_counter_in_hex() {
        for (seed, ms) in [([0u8; 16], 0i64), ([7; 16], 1_735_689_600_123), ([255; 16], i64::MAX)] {
            let mut g = IdGen::new(seed);
            let first = g.service_id(crate::time::Timestamp(ms)).0;
            let second = g.service_id(crate::time::Timestamp(ms)).0;
            let secs = ms.div_euclid(1000).clamp(0, i64::from(u32::MAX));
            assert_eq!(&first[..8], format!("{secs:08x}"));
            assert_eq!(first.len(), 24);
            assert!(first.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{first}");
            assert_eq!(first[..18], second[..18], "one generator's ids share second and bytes");
            let counter = |id: &str| u32::from_str_radix(&id[18..], 16).unwrap();
            assert_eq!(counter(&second), (counter(&first) + 1) & 0xFF_FFFF);
        }
    }

    #[test]
    fn derived_generators_differ_from_each_other_and_from_the_seed() {
        let seed = [9; 16];
        let now = crate::time::Timestamp(1_700_000_000_000);
        let base = IdGen::new(seed).service_id(now);
        let one = IdGen::derive(seed, "queue", 1).service_id(now);
        let two = IdGen::derive(seed, "queue", 2).service_id(now);
        assert!(base != one && one != two && base != two);
        let mut other = seed;
        other[15] ^= 1;
        assert_ne!(IdGen::new(other).service_id(now), base, "the second half of the seed matters");
    }

    #[test]
    fn generated_ids_differ() {
        let mut g = IdGen::new([7; 16]);
        let now = crate::time::Timestamp(1_700_000_000_000);
        let a = g.service_id(now);
        let b = g.service_id(now);
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 24);
        // The platform's layout: the second first (ids of one generator ascend).
        assert!(a.as_str().starts_with("6553f100"), "{a:?}");
        assert!(a.as_str() < b.as_str() || a.as_str()[18..] == *"ffffff");
    }
}
