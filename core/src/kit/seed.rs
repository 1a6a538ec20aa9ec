//! Fixtures: one JSON file of workspaces (with their API keys, subscription groups
//! with fixed ids, users as `/users/track` bodies, subscription states as
//! `/v2/subscription/status/set` bodies, preference centers as
//! `POST /preference_center/v1` bodies, list entries as the list reads answer them)
//! and SCIM users (as `POST /scim/v2/Users` bodies):
//!
//! ```json
//! {"workspaces": {"shop": {
//!     "keys": [{"key": "<32+ characters>", "permissions": "all"}],
//!     "groups": [{"id": "newsletter", "name": "Newsletter", "channel": "email"}],
//!     "users": [{"attributes": [{"external_id": "u1", "email": "u1@example.com"}]}],
//!     "subscriptions": [{"subscription_groups": [...]}],
//!     "preference_centers": [{"name": "prefs", ...}],
//!     "hard_bounces": [{"email": "b@example.com", "hard_bounced_at": "2026-01-02T03:04:05Z"}],
//!     "unsubscribes": [{"email": "u@example.com"}],
//!     "invalid_phone_numbers": [{"phone": "+12183095514"}]}},
//!  "scim_users": [{"schemas": [...], "userName": "ada@example.com", ...}]}
//! ```
//!
//! [`parse`] checks the file's shape, naming the path of a bad entry; the engine
//! then loads it as requests (every rule of each endpoint applies), first on an
//! empty in-memory store, so that a bad entry is refused before anything is
//! stored, then for real. Loading the same file again changes nothing: its
//! SHA-256 is remembered (until a reset); a changed file is loaded again, and what
//! it names that exists (a key, a group id, a center's name, a SCIM user name) is
//! left as it is. A list entry's time is optional (the time of loading); list
//! entries are put in place after the users, so the users they name have them.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::documents::Doc;
use crate::ids::WorkspaceName;
use crate::permission::{parse_permission_value, Permission};
use crate::subscriptions::groups::Channel;
use crate::subscriptions::lists::List;
use crate::time::Timestamp;

/// A seed file bigger than this is refused (it is loaded in memory, twice).
pub const MAX_SEED_BYTES: usize = 16 * 1024 * 1024;

/// A state file (`engage serve --state`) bigger than this is refused: a test
/// suite's state, not a production database's.
pub const MAX_STATE_BYTES: usize = 256 * 1024 * 1024;

/// A bad seed file: where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedError {
    /// The path of the bad entry, e.g. `workspaces.shop.users[3]`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for SeedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

fn bad(path: &str, message: impl Into<String>) -> SeedError {
    SeedError { path: path.to_string(), message: message.into() }
}

/// A key the file names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedKey {
    /// The key itself.
    pub secret: String,
    /// Its permissions.
    pub permissions: Vec<Permission>,
}

/// A subscription group with a fixed id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedGroup {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its channel.
    pub channel: Channel,
}

/// One request of the file, as the engine runs it, with the path it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedRequest {
    /// Where in the file.
    pub path: String,
    /// The body.
    pub body: Vec<u8>,
}

/// A list entry of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedListed {
    /// Where in the file.
    pub path: String,
    /// Which list.
    pub list: List,
    /// The address or number, as the list keys it.
    pub subject: String,
    /// Since when (none: when the file is loaded).
    pub at: Option<Timestamp>,
}

/// The lists a workspace may name, by their field in the file.
const LISTS: [(&str, List); 3] = [
    ("hard_bounces", List::HardBounces),
    ("unsubscribes", List::Unsubscribes),
    ("invalid_phone_numbers", List::InvalidPhones),
];

fn listed(v: &Value, path: &str, list: List) -> Result<SeedListed, SeedError> {
    let (_, by, when) = list.names();
    let m = object(v, path, &[by, when])?;
    let text = text(m, by, path)?;
    let subject = list.subject(text).ok_or_else(|| {
        let what = if list == List::InvalidPhones { "a phone number in E.164" } else { "an email address" };
        bad(path, format!("'{by}' must be {what}, not '{text}'"))
    })?;
    let at = match m.get(when) {
        None => None,
        Some(t) => Some(
            t.as_str()
                .and_then(Timestamp::parse)
                .ok_or_else(|| bad(path, format!("'{when}' must be an RFC 3339 time with an offset")))?,
        ),
    };
    Ok(SeedListed { path: path.to_string(), list, subject, at })
}

/// A workspace of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedWorkspace {
    /// Its name.
    pub name: WorkspaceName,
    /// Its keys.
    pub keys: Vec<SeedKey>,
    /// Its groups.
    pub groups: Vec<SeedGroup>,
    /// `/users/track` bodies.
    pub users: Vec<SeedRequest>,
    /// `/v2/subscription/status/set` bodies.
    pub subscriptions: Vec<SeedRequest>,
    /// `POST /preference_center/v1` bodies.
    pub preference_centers: Vec<SeedRequest>,
    /// Entries of the email and SMS lists.
    pub lists: Vec<SeedListed>,
    /// Stored documents, as `GET /_engage/state` writes them: put in place first,
    /// as they are.
    pub documents: Vec<Doc>,
}

/// A checked seed file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seed {
    /// Its SHA-256 (hex): loading it again changes nothing.
    pub digest: String,
    /// Its workspaces, in the file's order.
    pub workspaces: Vec<SeedWorkspace>,
    /// `POST /scim/v2/Users` bodies.
    pub scim_users: Vec<SeedRequest>,
    /// The deployment's stored documents (SCIM), as `GET /_engage/state` writes them.
    pub documents: Vec<Doc>,
}

impl Seed {
    /// Whether the file has a deployment's part (SCIM users or documents).
    pub fn has_deployment_part(&self) -> bool {
        !self.scim_users.is_empty() || !self.documents.is_empty()
    }
}

/// The documents listed at `key` of `m`, each checked to belong to `scope`.
fn documents(m: &Map<String, Value>, path: &str, scope: Option<&WorkspaceName>) -> Result<Vec<Doc>, SeedError> {
    let entries = list(m, "documents", path)?;
    // The integrations listed here: the only ones a document keyed by one may name.
    let integrations: std::collections::BTreeSet<String> = entries
        .iter()
        .filter(|(_, v)| v["table"] == "cdi_integration")
        .filter_map(|(_, v)| v["key"].as_str().map(str::to_string))
        .collect();
    entries
        .into_iter()
        .map(|(p, v)| {
            super::documents::from_json(v, scope, &integrations).map_err(|e| bad(p.trim_start_matches('.'), e))
        })
        .collect()
}

fn object<'a>(v: &'a Value, path: &str, allowed: &[&str]) -> Result<&'a Map<String, Value>, SeedError> {
    let m = v.as_object().ok_or_else(|| bad(path, "must be an object"))?;
    if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(path, format!("unknown field '{k}' (allowed: {})", allowed.join(", "))));
    }
    Ok(m)
}

fn list<'a>(m: &'a Map<String, Value>, key: &str, path: &str) -> Result<Vec<(String, &'a Value)>, SeedError> {
    let here = format!("{path}.{key}");
    match m.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.iter().enumerate().map(|(i, v)| (format!("{here}[{i}]"), v)).collect()),
        Some(_) => Err(bad(&here, "must be an array")),
    }
}

fn requests(m: &Map<String, Value>, key: &str, path: &str) -> Result<Vec<SeedRequest>, SeedError> {
    list(m, key, path)?
        .into_iter()
        .map(|(path, v)| {
            if !v.is_object() {
                return Err(bad(&path, "must be an object (a request body)"));
            }
            Ok(SeedRequest { path, body: v.to_string().into_bytes() })
        })
        .collect()
}

fn text<'a>(m: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str, SeedError> {
    m.get(key).and_then(Value::as_str).ok_or_else(|| bad(path, format!("'{key}' is required, as a string")))
}

fn key(v: &Value, path: &str) -> Result<SeedKey, SeedError> {
    let m = object(v, path, &["key", "permissions"])?;
    let secret = text(m, "key", path)?.to_string();
    super::key::check(&secret).map_err(|e| bad(path, e.message()))?;
    let permissions = parse_permission_value(m.get("permissions")).map_err(|e| bad(path, e))?;
    Ok(SeedKey { secret, permissions })
}

/// A fixed group id: 1 to 64 letters, digits, `-` and `_` (a UUID is one).
pub fn check_group_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn group(v: &Value, path: &str) -> Result<SeedGroup, SeedError> {
    let m = object(v, path, &["id", "name", "channel"])?;
    let id = text(m, "id", path)?;
    if !check_group_id(id) {
        return Err(bad(path, format!("'id' must be 1 to 64 letters, digits, '-' or '_', not '{id}'")));
    }
    let channel = text(m, "channel", path)?;
    let channel = Channel::parse(channel)
        .ok_or_else(|| bad(path, format!("'channel' must be email, sms, whatsapp, rcs or line, not '{channel}'")))?;
    let name = text(m, "name", path)?.trim();
    if name.is_empty() || name.len() > 255 {
        return Err(bad(path, "'name' must be 1 to 255 characters"));
    }
    Ok(SeedGroup { id: id.to_string(), name: name.to_string(), channel })
}

/// A JSON value read with every object's names checked unique: a file that names
/// a workspace (or any field) twice is refused, never read as its last one.
struct Unique(Value);

impl<'de> serde::Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Unique, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Unique;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Unique, E> {
                Ok(Unique(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Unique, E> {
                Ok(Unique(Value::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Unique, E> {
                Ok(Unique(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Unique, E> {
                Ok(Unique(Value::from(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Unique, E> {
                Ok(Unique(Value::String(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Unique, E> {
                Ok(Unique(Value::String(v)))
            }
            fn visit_unit<E>(self) -> Result<Unique, E> {
                Ok(Unique(Value::Null))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
                let mut items = Vec::new();
                while let Some(Unique(v)) = seq.next_element()? {
                    items.push(v);
                }
                Ok(Unique(Value::Array(items)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
                let mut out = Map::new();
                while let Some(name) = map.next_key::<String>()? {
                    let Unique(v) = map.next_value()?;
                    if out.contains_key(&name) {
                        return Err(serde::de::Error::custom(format!("'{name}' is named twice in one object")));
                    }
                    out.insert(name, v);
                }
                Ok(Unique(Value::Object(out)))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Refuses an API key or a group id named twice (a key in two workspaces would
/// belong to whichever was loaded last).
fn check_unique(workspaces: &[SeedWorkspace]) -> Result<(), SeedError> {
    let mut keys: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    for w in workspaces {
        for (i, k) in w.keys.iter().enumerate() {
            let path = format!("workspaces.{}.keys[{i}]", w.name.as_str());
            if let Some(first) = keys.insert(k.secret.as_str(), path.clone()) {
                return Err(bad(&path, format!("this key is already given at {first}: give each key once")));
            }
        }
        for (i, g) in w.groups.iter().enumerate() {
            if let Some(j) = w.groups[..i].iter().position(|x| x.id == g.id) {
                let path = format!("workspaces.{}.groups[{i}]", w.name.as_str());
                return Err(bad(&path, format!("group id '{}' is already given at groups[{j}]", g.id)));
            }
        }
    }
    Ok(())
}

/// Checks a seed file's shape (pure); the engine checks each request as it runs.
pub fn parse(bytes: &[u8]) -> Result<Seed, SeedError> {
    parse_sized(bytes, MAX_SEED_BYTES)
}

/// [`parse`], for a file of up to `limit` bytes.
pub fn parse_sized(bytes: &[u8], limit: usize) -> Result<Seed, SeedError> {
    if bytes.len() > limit {
        return Err(bad("", format!("the seed file is over {} MiB", limit >> 20)));
    }
    let Unique(value) = serde_json::from_slice(bytes)
        .map_err(|e| bad("", format!("not JSON (line {}, column {}): {e}", e.line(), e.column())))?;
    let top = object(&value, "(the file)", &["workspaces", "scim_users", "documents"])?;
    let mut workspaces = Vec::new();
    if let Some(all) = top.get("workspaces") {
        let all = all.as_object().ok_or_else(|| bad("workspaces", "must be an object of workspaces by name"))?;
        for (name, w) in all {
            let path = format!("workspaces.{name}");
            let ws = WorkspaceName::parse(name)
                .ok_or_else(|| bad(&path, format!("a workspace name is {}", WorkspaceName::RULE)))?;
            let allowed = [
                "keys",
                "groups",
                "users",
                "subscriptions",
                "preference_centers",
                "hard_bounces",
                "unsubscribes",
                "invalid_phone_numbers",
                "documents",
            ];
            let m = object(w, &path, &allowed)?;
            let mut lists = Vec::new();
            for (field, list) in LISTS {
                for (p, v) in self::list(m, field, &path)? {
                    lists.push(listed(v, &p, list)?);
                }
            }
            workspaces.push(SeedWorkspace {
                keys: list(m, "keys", &path)?.into_iter().map(|(p, v)| key(v, &p)).collect::<Result<_, _>>()?,
                groups: list(m, "groups", &path)?.into_iter().map(|(p, v)| group(v, &p)).collect::<Result<_, _>>()?,
                users: requests(m, "users", &path)?,
                subscriptions: requests(m, "subscriptions", &path)?,
                preference_centers: requests(m, "preference_centers", &path)?,
                lists,
                documents: documents(m, &path, Some(&ws))?,
                name: ws,
            });
        }
    }
    check_unique(&workspaces)?;
    let scim_users = requests(top, "scim_users", "")?
        .into_iter()
        .map(|r| SeedRequest { path: r.path.trim_start_matches('.').to_string(), ..r })
        .collect();
    let documents = documents(top, "", None)?;
    let digest = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
    Ok(Seed { digest, workspaces, scim_users, documents })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text.as_bytes()).expect_err(text).to_string()
    }

    #[test]
    fn a_file_s_shape_is_checked_with_the_path_of_the_bad_entry() {
        let key = "k".repeat(32);
        let ok = format!(
            r#"{{"workspaces": {{"shop": {{"keys": [{{"key": "{key}"}}], "groups": [{{"id": "g-1", "name": "N", "channel": "email"}}],
                "users": [{{"attributes": []}}]}}}}, "scim_users": [{{"userName": "a@b.c"}}]}}"#
        );
        let seed = parse(ok.as_bytes()).unwrap();
        assert_eq!(seed.workspaces[0].groups[0].id, "g-1");
        assert_eq!(seed.workspaces[0].users[0].path, "workspaces.shop.users[0]");
        assert_eq!(seed.scim_users[0].path, "scim_users[0]");
        assert_eq!(seed.digest.len(), 64);

        assert!(err("{").starts_with("not JSON (line 1"));
        assert_eq!(
            err(r#"{"users": []}"#),
            "(the file): unknown field 'users' (allowed: workspaces, scim_users, documents)"
        );
        assert!(err(r#"{"workspaces": {"w": {"documents": [{"table": "profile", "key": "x", "value": {}}]}}}"#)
            .starts_with("workspaces.w.documents[0]: this profile document does not belong to workspace 'w'"));
        assert!(err(r#"{"documents": [{"table": "workspace", "key": "w", "value": {}}]}"#)
            .starts_with("documents[0]: this workspace document does not belong to the deployment"));
        assert!(err(r#"{"workspaces": {"a b": {}}}"#).starts_with("workspaces.a b: a workspace name"));
        assert!(err(r#"{"workspaces": {"w": {"keys": [{"key": "short"}]}}}"#)
            .starts_with("workspaces.w.keys[0]: an API key must be 32"));
        assert!(err(r#"{"workspaces": {"w": {"groups": [{"id": "x", "name": "n", "channel": "fax"}]}}}"#)
            .starts_with("workspaces.w.groups[0]: 'channel'"));
        assert!(err(r#"{"workspaces": {"w": {"users": [1]}}}"#).starts_with("workspaces.w.users[0]: must be an object"));
        assert!(err(r#"{"workspaces": {"w": {"events": []}}}"#).starts_with("workspaces.w: unknown field 'events'"));
    }

    #[test]
    fn list_entries_are_read_in_the_lists_answer_shape() {
        let ok = r#"{"workspaces": {"w": {"invalid_phone_numbers": [{"phone": "12183095514"}],
            "hard_bounces": [{"email": "a@b.co", "hard_bounced_at": "2026-01-01T00:00:00+01:00"}]}}}"#;
        let lists = &parse(ok.as_bytes()).unwrap().workspaces[0].lists;
        assert_eq!(lists[0].list, List::HardBounces);
        assert_eq!(lists[0].at, Timestamp::parse("2025-12-31T23:00:00Z"));
        assert_eq!((lists[1].subject.as_str(), lists[1].at), ("+12183095514", None));
        assert_eq!(lists[1].path, "workspaces.w.invalid_phone_numbers[0]");
        for (file, needle) in [
            (r#"{"workspaces": {"w": {"hard_bounces": [{"email": "nope"}]}}}"#, "'email' must be an email address"),
            (r#"{"workspaces": {"w": {"unsubscribes": [{"email": "a@b.co", "at": 1}]}}}"#, "unknown field 'at'"),
            (r#"{"workspaces": {"w": {"invalid_phone_numbers": [{"phone": "+0"}]}}}"#, "'phone' must be a phone"),
            (
                r#"{"workspaces": {"w": {"invalid_phone_numbers": [{"phone": "+12183095514", "invalid_detected_at": "yesterday"}]}}}"#,
                "invalid_phone_numbers[0]: 'invalid_detected_at' must be an RFC 3339",
            ),
        ] {
            assert!(err(file).contains(needle), "{}", err(file));
        }
    }

    #[test]
    fn a_name_given_twice_is_refused_never_read_as_the_last() {
        let key = "k".repeat(32);
        assert!(
            err(r#"{"workspaces": {"w": {}, "w": {}}}"#).contains("'w' is named twice"),
            "{}",
            err(r#"{"workspaces": {"w": {}, "w": {}}}"#)
        );
        assert!(err(r#"{"workspaces": {"w": {"keys": [], "keys": []}}}"#).contains("'keys' is named twice"));
        let twice = format!(
            r#"{{"workspaces": {{"a": {{"keys": [{{"key": "{key}"}}]}}, "b": {{"keys": [{{"key": "{key}"}}]}}}}}}"#
        );
        assert_eq!(
            err(&twice),
            "workspaces.b.keys[0]: this key is already given at workspaces.a.keys[0]: give each key once"
        );
        let groups = r#"{"workspaces": {"w": {"groups": [{"id": "g", "name": "A", "channel": "email"}, {"id": "g", "name": "B", "channel": "sms"}]}}}"#;
        assert_eq!(err(groups), "workspaces.w.groups[1]: group id 'g' is already given at groups[0]");
        for dots in [".", ".."] {
            assert!(err(&format!(r#"{{"workspaces": {{"{dots}": {{}}}}}}"#))
                .starts_with(&format!("workspaces.{dots}: a workspace name")));
        }
    }
}
