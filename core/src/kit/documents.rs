//! The stored documents that make up a workspace's state, or the deployment's:
//! what a snapshot copies and puts back, and what `GET /_engage/state` writes out
//! as the `documents` of a fixtures file. One rule says where each table's
//! documents belong ([`Owner`]), so that a snapshot of a workspace, its export,
//! and a fixtures file's documents loaded under a workspace all mean the same set.
//!
//! The queue's bookkeeping (set-aside and early-applied jobs) and the inspector's
//! sessions belong to no one: they are never copied, exported or loaded.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use crate::auth::KeyRecord;
use crate::cdi::integration::Integration;
use crate::error::ApiError;
use crate::ids::WorkspaceName;
use crate::repo::codec::decode;
use crate::repo::keys::{workspace_prefix, SEP};
use crate::store::{Store, StoreError, Table};

/// One stored document, without its version (a copy put back gets a new one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doc {
    /// Its table.
    pub table: Table,
    /// Its key.
    pub key: String,
    /// Its bytes.
    pub value: Vec<u8>,
}

impl Doc {
    /// Bytes it takes in memory, roughly (a snapshot's bound counts these).
    pub fn size(&self) -> usize {
        self.key.len() + self.value.len() + 48
    }

    /// The write that puts it in place, over whatever is there.
    pub fn put(&self) -> crate::store::Op {
        crate::store::Op::Put {
            table: self.table,
            key: self.key.clone(),
            value: self.value.clone(),
            expect: crate::store::Expect::Any,
        }
    }
}

/// Where a table's documents belong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// Keyed `workspace<SEP>...`.
    Prefixed,
    /// Keyed by the workspace's name.
    Named,
    /// The workspace is inside the document (API keys, integrations).
    Inside,
    /// Keyed by an integration's id: the integration's workspace.
    Integration,
    /// The deployment's (SCIM).
    Deployment,
    /// Keyed `digest<SEP>workspace` (a fixtures file's part loaded; the empty
    /// workspace is the deployment's part). Snapshots keep them, exports do not: a
    /// state file loaded back marks a part of its own.
    SeedMark,
    /// No one's.
    Bookkeeping,
}

fn owner(table: Table) -> Owner {
    match table {
        Table::Profile
        | Table::Ident
        | Table::Group
        | Table::Address
        | Table::PreferenceCenter
        | Table::PreferenceCenterName
        | Table::CdiJob
        | Table::LargeProfile
        | Table::EmailList
        | Table::PhoneList => Owner::Prefixed,
        Table::Workspace | Table::LinkSecret | Table::CdiSecret => Owner::Named,
        Table::ApiKey | Table::CdiIntegration => Owner::Inside,
        Table::CdiRequest | Table::CdiBatches => Owner::Integration,
        Table::ScimToken | Table::ScimUser | Table::ScimUserName => Owner::Deployment,
        Table::Seed => Owner::SeedMark,
        Table::SetAside | Table::QueueEarly | Table::InspectorSession => Owner::Bookkeeping,
    }
}

/// Where one document belongs: as its table's, but the deployment's secret for
/// signing preference-center links is kept by the empty name among the
/// workspaces' (`crate::preference_center::link`).
fn owner_of(table: Table, key: &str) -> Owner {
    match owner(table) {
        Owner::Named if key.is_empty() => Owner::Deployment,
        other => other,
    }
}

/// What the documents are collected for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A snapshot: everything the scope's requests could see, with the fixtures
    /// files' marks.
    Snapshot,
    /// A state file: without the marks.
    Export,
}

/// The workspace named inside a document of a table where it is inside.
fn inside(table: Table, value: &[u8]) -> Result<WorkspaceName, StoreError> {
    Ok(match table {
        Table::ApiKey => decode::<KeyRecord>(value)?.workspace,
        _ => decode::<Integration>(value)?.workspace,
    })
}

/// Most documents a snapshot or a state file holds: a test suite's data, not a
/// production database's (which `engage backup` copies). Reading stops past it, so a
/// mistaken snapshot of a large deployment cannot take the server's memory.
pub const MAX_DOCUMENTS: usize = 1_000_000;

fn too_large(what: &str) -> ApiError {
    ApiError::Conflict(format!(
        "this state is over {what}: snapshots and state files are for a test suite's data (back a database up with `engage backup`)"
    ))
}

/// Every document of `scope` (a workspace, or with none the whole deployment), in
/// table order, then key order; refused past [`MAX_DOCUMENTS`] or `max_bytes`.
pub async fn collect<S: Store>(
    store: &S,
    scope: Option<&WorkspaceName>,
    purpose: Purpose,
    max_bytes: usize,
) -> Result<Vec<Doc>, ApiError> {
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut integrations = BTreeSet::new();
    let prefix = scope.map(workspace_prefix).unwrap_or_default();
    let mut tables = Table::ALL;
    // Integrations before the documents keyed by their ids.
    tables.sort_by_key(|t| (owner(*t) == Owner::Integration, *t));
    for table in tables {
        // One more than may be kept: finding it says the state is too large.
        let room = MAX_DOCUMENTS + 1 - out.len();
        let rows = match owner(table) {
            Owner::Bookkeeping => continue,
            Owner::SeedMark if purpose == Purpose::Export => continue,
            Owner::Deployment if scope.is_some() => continue,
            Owner::Prefixed => store.scan(table, &prefix, room).await?,
            Owner::Named => match scope {
                Some(ws) => {
                    store.get(table, ws.as_str()).await?.map(|e| (ws.as_str().to_string(), e)).into_iter().collect()
                }
                None => store.scan(table, "", room).await?,
            },
            Owner::Inside | Owner::Integration | Owner::Deployment | Owner::SeedMark => {
                store.scan(table, "", room).await?
            }
        };
        if rows.len() >= room {
            return Err(too_large(&format!("{MAX_DOCUMENTS} documents")));
        }
        for (key, entry) in rows {
            let mine = match (owner(table), scope) {
                (_, None) => true,
                (Owner::Inside, Some(ws)) => inside(table, &entry.value)? == *ws,
                (Owner::Integration, Some(_)) => integrations.contains(&key),
                (Owner::SeedMark, Some(ws)) => key.rsplit(SEP).next() == Some(ws.as_str()),
                _ => true,
            };
            if !mine {
                continue;
            }
            if table == Table::CdiIntegration {
                integrations.insert(key.clone());
            }
            bytes += key.len() + entry.value.len();
            if bytes > max_bytes {
                return Err(too_large(&format!("{} MiB", max_bytes >> 20)));
            }
            out.push(Doc { table, key, value: entry.value });
        }
    }
    Ok(out)
}

/// A table's name in a state file.
pub fn table_name(table: Table) -> &'static str {
    match table {
        Table::Workspace => "workspace",
        Table::ApiKey => "api_key",
        Table::Profile => "profile",
        Table::Ident => "identifier",
        Table::Group => "group",
        Table::Address => "address",
        Table::SetAside => "set_aside",
        Table::PreferenceCenter => "preference_center",
        Table::PreferenceCenterName => "preference_center_name",
        Table::LinkSecret => "link_secret",
        Table::ScimToken => "scim_token",
        Table::ScimUser => "scim_user",
        Table::ScimUserName => "scim_user_name",
        Table::CdiIntegration => "cdi_integration",
        Table::CdiJob => "cdi_job",
        Table::CdiSecret => "cdi_secret",
        Table::CdiRequest => "cdi_request",
        Table::QueueEarly => "queue_early",
        Table::LargeProfile => "large_profile",
        Table::Seed => "seed",
        Table::CdiBatches => "cdi_batches",
        Table::InspectorSession => "inspector_session",
        Table::EmailList => "email_list",
        Table::PhoneList => "phone_list",
    }
}

/// A document as a state file holds it: `{"table", "key", "value"}` with the
/// document as JSON, or `"text"` for one that is not JSON (an identifier entry
/// holds a service id).
pub fn to_json(doc: &Doc) -> Result<Value, ApiError> {
    let mut m = Map::new();
    m.insert("table".into(), json!(table_name(doc.table)));
    m.insert("key".into(), json!(doc.key));
    match serde_json::from_slice::<Value>(&doc.value) {
        Ok(v) if !doc.value.is_empty() => m.insert("value".into(), v),
        _ => match std::str::from_utf8(&doc.value) {
            Ok(text) => m.insert("text".into(), json!(text)),
            Err(_) => {
                return Err(StoreError(format!("a {} document is neither JSON nor text", table_name(doc.table))).into())
            }
        },
    };
    Ok(Value::Object(m))
}

/// The state of `scope` as a fixtures file: each workspace's documents under it,
/// the deployment's (SCIM) at the top.
pub fn state_file(docs: &[Doc]) -> Result<Value, ApiError> {
    let mut workspaces: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    let mut deployment = Vec::new();
    // A document keyed by an integration's id goes where its integration went.
    let mut integration_ws: std::collections::HashMap<&str, String> = Default::default();
    for doc in docs {
        let ws = match owner_of(doc.table, &doc.key) {
            Owner::Prefixed => doc.key.split(SEP).next().map(str::to_string),
            Owner::Named => Some(doc.key.clone()),
            Owner::Inside => {
                let ws = inside(doc.table, &doc.value)?.as_str().to_string();
                if doc.table == Table::CdiIntegration {
                    integration_ws.insert(&doc.key, ws.clone());
                }
                Some(ws)
            }
            Owner::Integration => integration_ws.get(doc.key.as_str()).cloned(),
            Owner::Deployment | Owner::SeedMark | Owner::Bookkeeping => None,
        };
        match ws {
            Some(ws) => workspaces.entry(ws).or_default().push(to_json(doc)?),
            None => deployment.push(to_json(doc)?),
        }
    }
    let mut file = Map::new();
    let all: Map<String, Value> = workspaces.into_iter().map(|(ws, docs)| (ws, json!({ "documents": docs }))).collect();
    file.insert("workspaces".into(), Value::Object(all));
    if !deployment.is_empty() {
        file.insert("documents".into(), Value::Array(deployment));
    }
    Ok(Value::Object(file))
}

/// A fixtures file's document entry, checked: it names a table by its state-file
/// name, and belongs where it is listed (`scope`: the workspace it is under, none
/// at the top). `integrations`: the ids of the integrations listed with it, the
/// only ones a document keyed by an integration may name.
pub fn from_json(v: &Value, scope: Option<&WorkspaceName>, integrations: &BTreeSet<String>) -> Result<Doc, String> {
    let m = v.as_object().ok_or("must be an object {\"table\", \"key\", \"value\" or \"text\"}")?;
    if let Some(k) = m.keys().find(|k| !["table", "key", "value", "text"].contains(&k.as_str())) {
        return Err(format!("unknown field '{k}' (allowed: table, key, value, text)"));
    }
    let name = m.get("table").and_then(Value::as_str).ok_or("'table' is required, as a string")?;
    let table = Table::ALL
        .into_iter()
        .find(|t| table_name(*t) == name && !matches!(owner(*t), Owner::Bookkeeping | Owner::SeedMark))
        .ok_or_else(|| format!("'table' names no table of a state file: '{name}'"))?;
    let key = m.get("key").and_then(Value::as_str).ok_or("'key' is required, as a string")?.to_string();
    let value = match (m.get("value"), m.get("text")) {
        (Some(v), None) => serde_json::to_vec(v).map_err(|e| e.to_string())?,
        (None, Some(Value::String(t))) => t.clone().into_bytes(),
        _ => return Err("give the document as 'value' (JSON) or 'text' (a string), one of them".into()),
    };
    let doc = Doc { table, key, value };
    let belongs = match (owner_of(table, &doc.key), scope) {
        (Owner::Deployment, None) => true,
        (Owner::Deployment, Some(_)) | (_, None) => false,
        (Owner::Prefixed, Some(ws)) => doc.key.starts_with(&workspace_prefix(ws)),
        (Owner::Named, Some(ws)) => doc.key == ws.as_str(),
        (Owner::Inside, Some(ws)) => inside(table, &doc.value).map_err(|e| format!("'value' {}", e.0))? == *ws,
        (Owner::Integration, Some(_)) => integrations.contains(&doc.key),
        (Owner::SeedMark | Owner::Bookkeeping, _) => false,
    };
    if !belongs {
        let here = scope
            .map_or("the deployment (the file's top level)".to_string(), |ws| format!("workspace '{}'", ws.as_str()));
        return Err(format!("this {name} document does not belong to {here}"));
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_a_name_of_its_own() {
        let names: BTreeSet<_> = Table::ALL.iter().map(|t| table_name(*t)).collect();
        assert_eq!(names.len(), Table::ALL.len());
    }

    #[test]
    fn a_state_over_its_bound_is_refused_not_read_whole() {
        use crate::store::{memory::MemoryStore, ChangeSet, Expect, Op};
        let store = MemoryStore::new();
        let ws = WorkspaceName::parse("big").unwrap();
        let ops = (0..20)
            .map(|n| Op::Put {
                table: Table::Profile,
                key: format!("big{SEP}{n:04}"),
                value: vec![b'1'; 100],
                expect: Expect::Any,
            })
            .collect();
        futures_util::FutureExt::now_or_never(store.commit(ChangeSet { ops, ack: None })).unwrap().unwrap();
        let collect =
            |max| futures_util::FutureExt::now_or_never(collect(&store, Some(&ws), Purpose::Snapshot, max)).unwrap();
        assert_eq!(collect(1 << 20).unwrap().len(), 20);
        let Err(ApiError::Conflict(why)) = collect(1000) else { panic!("refused") };
        assert!(why.contains("engage backup"), "{why}");
    }

    #[test]
    fn a_document_is_refused_where_it_does_not_belong() {
        let ws = WorkspaceName::parse("shop").unwrap();
        let none = BTreeSet::new();
        let profile = json!({"table": "profile", "key": format!("other{SEP}x"), "value": {}});
        assert!(from_json(&profile, Some(&ws), &none).unwrap_err().contains("does not belong to workspace 'shop'"));
        let ok = json!({"table": "profile", "key": format!("shop{SEP}x"), "value": {"a": 1}});
        assert_eq!(from_json(&ok, Some(&ws), &none).unwrap().value, br#"{"a":1}"#);
        let scim = json!({"table": "scim_user", "key": "u1", "value": {}});
        assert!(from_json(&scim, Some(&ws), &none).is_err());
        assert!(from_json(&scim, None, &none).is_ok());
        for (bad, why) in [
            (json!({"table": "inspector_session", "key": "k", "text": ""}), "names no table"),
            (json!({"table": "profile", "key": "k"}), "'value' (JSON) or 'text'"),
            (json!({"table": "profile", "key": "k", "value": 1, "text": "x"}), "one of them"),
            (json!({"table": "cdi_batches", "key": "i1", "value": 1}), "does not belong"),
            (json!({"table": "api_key", "key": "h", "value": {"nope": 1}}), "'value' corrupt document"),
            (json!({"table": "profile", "key": "k", "value": {}, "version": 1}), "unknown field 'version'"),
        ] {
            let e = from_json(&bad, Some(&ws), &none).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
