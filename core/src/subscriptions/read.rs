//! GET /subscription/user/status and GET /subscription/status/get. Both report the
//! stored group status (`Subscribed`, `Unsubscribed`, `Unknown`): the platform's
//! reads return the last status set, not the global email state's mask.

use serde_json::{json, Map, Value};

use super::state;
use super::{check_channel, group_entries, group_of, parse_named, with_errors, Kind, Named, EMAIL_AND_PHONE};
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::WorkspaceName;
use crate::ids::{Identifier, ServiceId};
use crate::repo::Tx;
use crate::store::Store;
use crate::users::locate::pick_shared;

/// Default and largest `limit` of `/subscription/user/status`.
pub const MAX_LIMIT: usize = 100;

/// The decoded query string.
struct Query(Vec<(String, String)>);

impl Query {
    fn of(req: &Request) -> Query {
        Query(req.query_pairs())
    }

    /// Every value of a key, in order (`key[]=` and repeated `key=` alike).
    fn all(&self, key: &str) -> Vec<String> {
        self.0.iter().filter(|(k, _)| k == key).map(|(_, v)| v.clone()).collect()
    }

    fn first(&self, key: &str) -> Option<String> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    /// Phones: an unencoded `+` in a query string decodes to a space (the platform's
    /// own examples send `phone=+1...`), so a leading space before digits is a `+`.
    fn phones(&self) -> Vec<String> {
        self.all("phone")
            .into_iter()
            .map(|p| match p.strip_prefix(' ') {
                Some(rest) if rest.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty() => format!("+{rest}"),
                _ => p,
            })
            .collect()
    }

    /// An optional non-negative integer within `range`.
    fn number(&self, key: &str, default: usize, range: std::ops::RangeInclusive<usize>) -> Result<usize, ApiError> {
        match self.first(key) {
            None => Ok(default),
            Some(v) => v.parse::<usize>().ok().filter(|n| range.contains(n)).ok_or_else(|| {
                ApiError::bad(format!("'{key}' must be an integer from {} to {}", range.start(), range.end()))
            }),
        }
    }
}

/// The identifiers a read uses: external ids when given (email and phone are then
/// ignored, as the platform documents), else emails or phones but not both. Every
/// value sent is checked, used or not.
fn identifiers(q: &Query) -> Result<Vec<Named>, ApiError> {
    let mut named = used(q)?;
    let mut seen = std::collections::BTreeSet::new();
    named.retain(|n| seen.insert(n.ident.clone()));
    Ok(named)
}

fn used(q: &Query) -> Result<Vec<Named>, ApiError> {
    let externals = parse_named(q.all("external_id"), Kind::External, "external_id")?;
    let emails = parse_named(q.all("email"), Kind::Email, "email")?;
    let phones = parse_named(q.phones(), Kind::Phone, "phone")?;
    if !externals.is_empty() {
        return Ok(externals);
    }
    match (emails.is_empty(), phones.is_empty()) {
        (false, false) => Err(ApiError::bad(EMAIL_AND_PHONE)),
        (false, true) => Ok(emails),
        (true, false) => Ok(phones),
        (true, true) => Err(ApiError::bad("One of 'external_id', 'email' or 'phone' is required")),
    }
}

fn kind_of(n: &Named) -> Kind {
    match n.ident {
        Identifier::Email(_) => Kind::Email,
        Identifier::Phone(_) => Kind::Phone,
        _ => Kind::External,
    }
}

/// GET /subscription/user/status: each user the identifiers name (users sharing an
/// email or phone separately), with the groups in their history; `limit` (1 to 100,
/// default 100) and `offset` page through the users; `total_count` counts them all.
pub async fn user_status<S: Store>(store: &S, ws: &WorkspaceName, req: &Request) -> Result<Response, ApiError> {
    let q = Query::of(req);
    let named = identifiers(&q)?;
    let limit = q.number("limit", MAX_LIMIT, 1..=MAX_LIMIT)?;
    let offset = q.number("offset", 0, 0..=usize::MAX)?;
    let mut tx = Tx::new(store, ws.clone());
    let mut found: Vec<ServiceId> = Vec::new();
    let mut errors = Vec::new();
    for n in &named {
        let mut ids = tx.resolve(&n.ident).await?;
        if ids.is_empty() {
            errors.push(n.not_found());
            continue;
        }
        // Users sharing an address: oldest first, a stable order across pages.
        let mut keyed = Vec::new();
        for id in ids.drain(..) {
            if let Some(p) = tx.profile(&id).await? {
                keyed.push(((p.created_at, id.clone()), id));
            }
        }
        keyed.sort();
        for (_, id) in keyed {
            if !found.contains(&id) {
                found.push(id);
            }
        }
    }
    let mut users = Vec::new();
    for id in found.iter().skip(offset).take(limit) {
        let Some(p) = tx.profile(id).await?.cloned() else { continue };
        users.push(json!({
            "external_id": p.external_id.as_ref().map(|x| x.as_str()),
            "email": p.email.as_ref().map(|e| e.as_str()),
            "phone": p.phone.as_ref().map(|ph| ph.as_str()),
            "subscription_groups": group_entries(store, ws, &p, false).await?,
        }));
    }
    let body = json!({"users": users, "total_count": found.len(), "message": "success"});
    Ok(Response::json(200, &with_errors(body, errors)))
}

/// GET /subscription/status/get: the stored status of one group for each queried
/// identifier. An email or phone shared by several users reports the user an update
/// by that identifier would pick (identified first, then most recently updated).
pub async fn status_get<S: Store>(store: &S, ws: &WorkspaceName, req: &Request) -> Result<Response, ApiError> {
    let q = Query::of(req);
    let group_id = q.first("subscription_group_id").map(Value::String);
    let group = group_of(store, ws, group_id.as_ref()).await?;
    let named = identifiers(&q)?;
    for n in &named {
        check_channel(&group, kind_of(n), n.kind())?;
    }
    let mut tx = Tx::new(store, ws.clone());
    let mut status = Map::new();
    let mut errors = Vec::new();
    for n in &named {
        let ids = tx.resolve(&n.ident).await?;
        let chosen = match n.ident {
            Identifier::External(_) => ids.into_iter().next(),
            _ => pick_shared(&mut tx, ids).await?,
        };
        let s = match chosen {
            Some(id) => tx.profile(&id).await?.map(|p| state::stored(p, &group.id)).unwrap_or(state::Status::Unknown),
            None => {
                errors.push(n.not_found());
                state::Status::Unknown
            }
        };
        status.insert(n.raw.clone(), json!(s.as_str()));
    }
    let body = json!({"status": status, "message": "success"});
    Ok(Response::json(200, &with_errors(body, errors)))
}
