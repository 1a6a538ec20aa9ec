//! POST /preference_center/v1 and PUT /preference_center/v1/{id}: parse (pure: every
//! field, the options and both templates checked) → apply (the groups the templates
//! name must exist; the name must be free; one unit of work) → render.

use serde_json::{json, Map, Value};

use super::center::{valid_name, Center, CenterState, Options, MAX_NAME_CHARS};
use super::liquid::{Template, TemplateError};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Response;
use crate::ids::WorkspaceName;
use crate::input;
use crate::repo::keys::{center_key, center_name_key, workspace_prefix};
use crate::repo::transact::transact;
use crate::store::{Store, Table};
use crate::subscriptions::groups;

/// Most preference centers in one workspace.
pub const MAX_CENTERS: usize = 1000;

/// The message for a center that does not exist.
pub const NOT_FOUND: &str = "Preference center not found";

/// A checked create or update body.
#[derive(Debug)]
struct Body {
    name: Option<String>,
    title: Option<String>,
    page_html: String,
    confirmation_html: String,
    state: Option<CenterState>,
    options: Option<Options>,
    /// The parsed templates (page, confirmation), for the group check.
    templates: [Template; 2],
}

const FIELDS: [&str; 6] =
    ["name", "preference_center_title", "preference_center_page_html", "confirmation_page_html", "state", "options"];

fn text(b: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match input::field(b, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::bad(format!("'{key}' must be a string"))),
    }
}

/// A template error as a 400: the field, then the line and column.
fn template_error(field: &str, e: &TemplateError) -> ApiError {
    ApiError::Fatal {
        message: format!("'{field}' is not a valid template: {e}"),
        errors: vec![json!({"field": field, "line": e.pos.line, "column": e.pos.column, "message": e.message})],
    }
}

fn template(b: &Map<String, Value>, field: &str) -> Result<(String, Template), ApiError> {
    let src = text(b, field)?.ok_or_else(|| ApiError::bad(format!("'{field}' is required")))?;
    let t = Template::parse(&src).map_err(|e| template_error(field, &e))?;
    Ok((src, t))
}

/// Parses a body (pure).
fn parse(body: &[u8]) -> Result<Body, ApiError> {
    let b = input::object(body).map_err(ApiError::BadRequest)?;
    if let Some(k) = b.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad(format!("unknown field '{k}'; allowed: {}", FIELDS.join(", "))));
    }
    let name = text(&b, "name")?;
    if let Some(n) = &name {
        if !valid_name(n) {
            return Err(ApiError::bad(format!(
                "'name' must be 1 to {MAX_NAME_CHARS} letters, digits, hyphens or underscores (no spaces)"
            )));
        }
    }
    let title = text(&b, "preference_center_title")?;
    let state = match text(&b, "state")? {
        None => None,
        Some(s) => Some(CenterState::parse(&s).ok_or_else(|| ApiError::bad("'state' must be 'active' or 'draft'"))?),
    };
    let options = input::field(&b, "options").map(Options::parse).transpose().map_err(ApiError::BadRequest)?;
    let (page_html, page) = template(&b, "preference_center_page_html")?;
    let (confirmation_html, confirmation) = template(&b, "confirmation_page_html")?;
    Ok(Body { name, title, page_html, confirmation_html, state, options, templates: [page, confirmation] })
}

/// Every subscription group a template names must exist in the workspace.
async fn check_groups<S: Store>(store: &S, ws: &WorkspaceName, body: &Body) -> Result<(), ApiError> {
    let fields = ["preference_center_page_html", "confirmation_page_html"];
    for (t, field) in body.templates.iter().zip(fields) {
        for (id, pos) in t.group_refs() {
            if groups::get(store, ws, id).await?.is_none() {
                let message = format!("unknown subscription group '{id}'");
                return Err(template_error(field, &TemplateError { pos: *pos, message }));
            }
        }
    }
    Ok(())
}

/// POST /preference_center/v1.
pub async fn create<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let b = parse(body)?;
    let name = b.name.clone().ok_or_else(|| ApiError::bad("'name' is required"))?;
    check_groups(store, ws, &b).await?;
    let center = transact(store, ws, ctx.seed, async |tx, ids| {
        let name_key = center_name_key(ws, &name);
        if tx.doc::<String>(Table::PreferenceCenterName, &name_key).await?.is_some() {
            return Err(ApiError::bad(format!("a preference center named '{name}' already exists")));
        }
        let count = store.scan(Table::PreferenceCenterName, &workspace_prefix(ws), MAX_CENTERS).await?.len();
        if count >= MAX_CENTERS {
            return Err(ApiError::bad(format!("a workspace has at most {MAX_CENTERS} preference centers")));
        }
        let center = Center {
            id: ids.uuid(),
            name: name.clone(),
            title: b.title.clone(),
            page_html: b.page_html.clone(),
            confirmation_html: b.confirmation_html.clone(),
            state: b.state.unwrap_or(CenterState::Active),
            options: b.options.clone().unwrap_or_default(),
            created_at: ctx.now,
            updated_at: ctx.now,
        };
        // Read first, so the commit expects the id to be free.
        let key = center_key(ws, &center.id);
        if tx.doc::<Center>(Table::PreferenceCenter, &key).await?.is_some() {
            return Err(ApiError::Busy);
        }
        tx.put_doc(Table::PreferenceCenterName, &name_key, &center.id)?;
        tx.put_doc(Table::PreferenceCenter, &key, &center)?;
        Ok(center)
    })
    .await?;
    Ok(Response::json(
        201,
        &json!({
            "preference_center_api_id": center.id,
            "liquid_tag": format!("{{{{preference_center.${{{}}}}}}}", center.name),
            "created_at": center.created_at.to_rfc3339_seconds(),
            "message": "success",
        }),
    ))
}

/// PUT /preference_center/v1/{id}: the templates are replaced; the title, state and
/// options keep their values when left out; a `name` must be the center's own.
pub async fn update<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    id: &str,
    body: &[u8],
    ctx: Ctx,
) -> Result<Response, ApiError> {
    let b = parse(body)?;
    if super::center::get(store, ws, id).await?.is_none() {
        return Err(ApiError::NotFound(NOT_FOUND.into()));
    }
    check_groups(store, ws, &b).await?;
    let center = transact(store, ws, ctx.seed, async |tx, _| {
        let key = center_key(ws, id);
        let mut c =
            tx.doc::<Center>(Table::PreferenceCenter, &key).await?.ok_or(ApiError::NotFound(NOT_FOUND.into()))?;
        if let Some(n) = &b.name {
            if *n != c.name {
                return Err(ApiError::bad(format!(
                    "'name' cannot be changed (this preference center is named '{}')",
                    c.name
                )));
            }
        }
        c.page_html = b.page_html.clone();
        c.confirmation_html = b.confirmation_html.clone();
        if b.title.is_some() {
            c.title = b.title.clone();
        }
        if let Some(s) = b.state {
            c.state = s;
        }
        if let Some(o) = &b.options {
            c.options = o.clone();
        }
        c.updated_at = ctx.now.max(c.created_at);
        tx.put_doc(Table::PreferenceCenter, &key, &c)?;
        Ok(c)
    })
    .await?;
    Ok(Response::json(
        200,
        &json!({
            "preference_center_api_id": center.id,
            "created_at": center.created_at.to_rfc3339_seconds(),
            "updated_at": center.updated_at.to_rfc3339_seconds(),
            "message": "success",
        }),
    ))
}
