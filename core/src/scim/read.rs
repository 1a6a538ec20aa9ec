//! GET /scim/v2/Users/{id} (304 when `If-None-Match` names its version), and the
//! listings: GET /scim/v2/Users (with an optional [`filter`], paged by `startIndex`
//! / `count`) and POST `/.search`.

use serde_json::{json, Map, Value};

use super::error::ScimError;
use super::evaluate;
use super::filter::{self, Filter};
use super::protocol::{LIST_URN, SEARCH_URN};
use super::select::Selection;
use super::user::{found, name_key, DashboardUser};
use crate::http::{Request, Response};
use crate::repo::codec::decode;
use crate::store::{Store, Table, MAX_SCAN};

/// Most resources on one page, and the page size when `count` is left out.
pub const MAX_PAGE: usize = 100;

/// The message of a 404 (the platform's).
pub const NOT_FOUND: &str = "User not found";

/// A checked listing request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// The filter, if any.
    pub filter: Option<Filter>,
    /// 1-based index of the first result.
    pub start_index: usize,
    /// Most results to return.
    pub count: usize,
    /// Which attributes to return.
    pub selection: Selection,
}

/// An integer paging parameter: RFC 7644 §3.4.2.4 reads values below 1 (startIndex)
/// or 0 (count) as those minimums; anything that is not an integer is refused.
fn integer(text: &str, name: &str) -> Result<i64, ScimError> {
    text.trim().parse::<i64>().map_err(|_| ScimError::value(format!("'{name}' must be an integer, not '{text}'")))
}

fn page(start: Option<i64>, count: Option<i64>) -> (usize, usize) {
    let start = start.unwrap_or(1).max(1);
    let count = count.unwrap_or(MAX_PAGE as i64).clamp(0, MAX_PAGE as i64);
    (usize::try_from(start).unwrap_or(usize::MAX), count as usize)
}

fn no_sorting() -> ScimError {
    ScimError::value("sorting is not supported (see /scim/v2/ServiceProviderConfig)")
}

impl Query {
    /// From GET /Users's query string. Unknown parameters are ignored, as RFC 7644
    /// leaves them to the server and identity providers add their own.
    pub fn from_query(req: &Request) -> Result<Query, ScimError> {
        let pairs = req.query_pairs();
        let get = |name: &str| pairs.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
        if get("sortBy").is_some() || get("sortOrder").is_some() {
            return Err(no_sorting());
        }
        let filter = get("filter").map(filter::parse).transpose()?;
        let start = get("startIndex").map(|v| integer(v, "startIndex")).transpose()?;
        let count = get("count").map(|v| integer(v, "count")).transpose()?;
        let (start_index, count) = page(start, count);
        let selection = Selection::parse(get("attributes"), get("excludedAttributes"))?;
        Ok(Query { filter, start_index, count, selection })
    }

    /// From a SearchRequest body (POST `/.search`, RFC 7644 §3.4.3).
    pub fn from_search(body: &[u8]) -> Result<Query, ScimError> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| ScimError::syntax(format!("the body is not valid JSON: {e}")))?;
        let map = value.as_object().ok_or_else(|| ScimError::syntax("the body must be a JSON object"))?;
        let names =
            ["schemas", "attributes", "excludedAttributes", "filter", "startIndex", "count", "sortBy", "sortOrder"];
        let [schemas, attributes, excluded, filter, start, count, sort_by, sort_order] =
            super::attrs::pick(map, names, "")?;
        let is_search = schemas
            .and_then(Value::as_array)
            .is_some_and(|s| s.iter().any(|u| u.as_str().is_some_and(|u| u.eq_ignore_ascii_case(SEARCH_URN))));
        if !is_search {
            return Err(ScimError::value(format!("'schemas' must be [\"{SEARCH_URN}\"]")));
        }
        if sort_by.is_some() || sort_order.is_some() {
            return Err(no_sorting());
        }
        let joined = |v: Option<&Value>, name: &str| -> Result<Option<String>, ScimError> {
            let Some(v) = v else { return Ok(None) };
            let items = super::attrs::list(Some(v), name, |v, p| {
                v.as_str().map(str::to_string).ok_or_else(|| ScimError::value(format!("'{p}' must be a string")))
            })?;
            Ok(Some(items.join(",")))
        };
        let selection = Selection::parse(
            joined(attributes, "attributes")?.as_deref(),
            joined(excluded, "excludedAttributes")?.as_deref(),
        )?;
        let filter = match filter {
            None => None,
            Some(Value::String(f)) => Some(filter::parse(f)?),
            Some(_) => return Err(ScimError::value("'filter' must be a string")),
        };
        let int = |v: Option<&Value>, name: &str| -> Result<Option<i64>, ScimError> {
            v.map(|v| v.as_i64().ok_or_else(|| ScimError::value(format!("'{name}' must be an integer")))).transpose()
        };
        let (start_index, count) = page(int(start, "startIndex")?, int(count, "count")?);
        Ok(Query { filter, start_index, count, selection })
    }
}

/// Reads one dashboard user.
pub async fn load<S: Store>(store: &S, id: &str) -> Result<Option<DashboardUser>, ScimError> {
    match store.get(Table::ScimUser, id).await? {
        Some(e) => Ok(Some(decode(&e.value)?)),
        None => Ok(None),
    }
}

/// Whether an `If-None-Match` header names the user's current version (`*`, or a
/// tag compared weakly, RFC 7232 §3.2).
fn not_modified(req: &Request, user: &DashboardUser) -> bool {
    req.header_value("if-none-match").is_some_and(|h| user.is_named_by(h))
}

/// GET /scim/v2/Users/{id}: the user, or a 304 without a body when the client's
/// copy (`If-None-Match`) is current (RFC 7644 §3.14).
pub async fn get<S: Store>(store: &S, id: &str, req: &Request, base: &str) -> Result<Response, ScimError> {
    let pairs = req.query_pairs();
    let param = |name: &str| pairs.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
    let selection = Selection::parse(param("attributes"), param("excludedAttributes"))?;
    let user = load(store, id).await?.ok_or_else(|| ScimError::NotFound(NOT_FOUND.into()))?;
    if not_modified(req, &user) {
        return Ok(Response::empty(304).with_header("ETag", user.etag()));
    }
    Ok(found(200, &user, selection.apply(user.render(base))))
}

/// The users a query matches, in creation order, each with its rendered form
/// (what the filter reads and the page shows).
async fn matching<S: Store>(
    store: &S,
    filter: Option<&Filter>,
    base: &str,
) -> Result<Vec<(DashboardUser, Value)>, ScimError> {
    let users = match filter.and_then(Filter::user_name_eq) {
        // The name index answers the filter providers send most.
        Some(name) => {
            let Some(id) = store.get(Table::ScimUserName, &name_key(name)).await? else { return Ok(Vec::new()) };
            let id: String = decode(&id.value)?;
            load(store, &id).await?.into_iter().collect()
        }
        None => {
            let mut users = Vec::new();
            // Every user: the create bound keeps them few (MAX_USERS).
            for (_, e) in store.scan(Table::ScimUser, "", MAX_SCAN).await? {
                users.push(decode::<DashboardUser>(&e.value)?);
            }
            users.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
            users
        }
    };
    Ok(users
        .into_iter()
        .map(|u| {
            let rendered = u.render(base);
            (u, rendered)
        })
        .filter(|(_, rendered)| filter.is_none_or(|f| evaluate::matches(f, rendered)))
        .collect())
}

/// A listing: the ListResponse of one page.
pub async fn list<S: Store>(store: &S, q: &Query, base: &str) -> Result<Response, ScimError> {
    let users = matching(store, q.filter.as_ref(), base).await?;
    let resources: Vec<Value> = users
        .iter()
        .skip(q.start_index.saturating_sub(1))
        .take(q.count)
        .map(|(_, rendered)| q.selection.apply(rendered.clone()))
        .collect();
    let mut body = Map::new();
    body.insert("schemas".into(), json!([LIST_URN]));
    body.insert("totalResults".into(), json!(users.len()));
    body.insert("itemsPerPage".into(), json!(resources.len()));
    body.insert("startIndex".into(), json!(q.start_index));
    body.insert("Resources".into(), Value::Array(resources));
    Ok(Response::json(200, &Value::Object(body)))
}
