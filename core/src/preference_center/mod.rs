//! Preference centers (`/preference_center/v1`): hosted pages where a person manages
//! their email subscriptions.
//!
//! - `write.rs`: create and update. Both templates are parsed and checked when
//!   stored (unknown tags, filters, variables and subscription groups are 400s with
//!   a line and column), so a stored center always renders.
//! - `read.rs`: list and detail.
//! - `link.rs`: a user's link, carrying a sealed token (unreadable, tamper-proof).
//! - `page.rs`: the page itself (`/preferences/{token}`): shown with the user's
//!   states, its form applied through the subscription state model.
//! - `system.rs`: the pages Engage shows itself (a bad link, a form not saved), in
//!   the center's language.
//! - `liquid/`: the template engine; `center.rs`: the stored center and its options.

pub mod cache;
pub mod center;
pub mod link;
pub mod liquid;
pub mod page;
pub mod read;
pub mod schema;
pub mod system;
pub mod write;

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::WorkspaceName;
use crate::routes::PreferenceCenter;
use crate::store::Store;

/// Answers a preference-center API endpoint.
pub async fn handle<S: Store>(
    store: &S,
    endpoint: PreferenceCenter,
    ws: &WorkspaceName,
    req: &Request,
    links: &link::LinkConfig,
    ctx: Ctx,
) -> Result<Response, ApiError> {
    match endpoint {
        PreferenceCenter::Create => write::create(store, ws, &req.body, ctx).await,
        PreferenceCenter::Update(id) => write::update(store, ws, &id, &req.body, ctx).await,
        PreferenceCenter::List => read::list(store, ws).await,
        PreferenceCenter::Get(id) => read::get(store, ws, &id).await,
        PreferenceCenter::UserUrl(id, user) => link::user_url(store, ws, &id, &user, req, links, ctx).await,
    }
}

#[cfg(test)]
mod tests;
