//! POST /users/track/sync: one object, applied before answering with what it left
//! on the user's profile: parse (pure) → look up groups → apply in one unit of work
//! → render the summaries the request named.

use serde_json::{json, Map, Value};

use super::apply::{apply_op, look_up_groups};
use super::parse::{self, fatal, nothing_valid, AttrUpdate, TrackOp};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Response;
use crate::ids::WorkspaceName;
use crate::profile::{Profile, Summary};
use crate::repo::transact::transact;
use crate::store::Store;

/// POST /users/track/sync: one object, applied before answering with the resulting
/// summaries of what the request named.
pub async fn track_sync<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    body: &[u8],
    ctx: Ctx,
    dialect: crate::dialect::Dialect,
) -> Result<Response, ApiError> {
    let obj = parse::body_object(body)?;
    let arrays = parse::arrays(&obj, 1)?;
    if arrays.iter().map(|(_, items)| items.len()).sum::<usize>() != 1 {
        return Err(fatal("A request may contain only one attribute, event or purchase object", vec![]));
    }
    let parsed = look_up_groups(store, ws, parse::parse(&arrays, ctx.now, dialect)).await?;
    let Some((_, op)) = parsed.ops.first() else { return Err(nothing_valid(&parsed.errors)) };
    let users = transact(store, ws, ctx.seed, async |tx, ids| {
        Ok(match apply_op(tx, op, ctx.now, ids).await? {
            Some(id) => tx.profile(&id).await?.map(|p| vec![user_entry(op, p)]).unwrap_or_default(),
            None => Vec::new(),
        })
    })
    .await?;
    let mut body = json!({"users": users, "message": "success"});
    if !parsed.errors.is_empty() {
        body["errors"] = Value::Array(parsed.errors.clone());
    }
    Ok(Response::json(201, &body))
}

fn summary(key: &str, name: &str, s: &Summary) -> Value {
    json!({key: name, "first": s.first.to_rfc3339(), "last": s.last.to_rfc3339(), "count": s.count})
}

/// The `users` entry of a sync response: the request's identifier and only the
/// attributes, events and purchases the request named, as now stored.
fn user_entry(op: &TrackOp, p: &Profile) -> Value {
    let mut entry = match op.target().ident.to_json() {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    match op {
        TrackOp::Attributes { updates, .. } => {
            let mut attrs = Map::new();
            for u in updates {
                if let AttrUpdate::Custom(k, _) = u {
                    attrs.insert(k.clone(), p.custom.get(k).cloned().unwrap_or(Value::Null));
                }
            }
            if !attrs.is_empty() {
                entry.insert("custom_attributes".into(), Value::Object(attrs));
            }
        }
        TrackOp::Event { name, .. } => {
            let events: Vec<Value> = p.events.get(name).map(|s| summary("name", name, s)).into_iter().collect();
            entry.insert("custom_events".into(), Value::Array(events));
        }
        TrackOp::Purchase { product_id, .. } => {
            let purchases: Vec<Value> =
                p.purchases.get(product_id).map(|s| summary("product_id", product_id, s)).into_iter().collect();
            entry.insert("purchase_events".into(), Value::Array(purchases));
        }
    }
    Value::Object(entry)
}
