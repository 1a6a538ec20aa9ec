//! POST /email/status and POST /email/blocklist (alias /email/blacklist): the global
//! email state of up to 50 addresses. Each address's state is remembered in its
//! address record, so a profile that gets the address later (track, identify,
//! merge) inherits it, and applied now to every profile that has the address.

use serde_json::{json, Value};

use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::Response;
use crate::ids::Email;
use crate::ids::WorkspaceName;
use crate::profile::states::GlobalState;
use crate::repo::transact::transact;
use crate::store::Store;
use crate::subscriptions::state::{self, EmailChange};
use crate::subscriptions::{body_object, email_addresses, field};

/// The platform's message for a global email state outside the three values.
pub const BAD_EMAIL_STATE: &str = "'subscription_state' must be 'subscribed', 'unsubscribed', or 'opted_in'";

/// Applies one change to every address in one unit of work; answers 201.
async fn apply<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    emails: &[Email],
    change: EmailChange,
    ctx: Ctx,
) -> Result<Response, ApiError> {
    transact(store, ws, ctx.seed, async |tx, _| {
        for e in emails {
            state::change_address(tx, e, change, ctx.now).await?;
        }
        Ok(())
    })
    .await?;
    Ok(Response::json(201, &json!({"message": "success"})))
}

/// POST /email/status: `email` and `subscription_state` (`subscribed`,
/// `unsubscribed` or `opted_in`).
pub async fn status<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let b = body_object(body)?;
    let emails = email_addresses(&b)?;
    let state = field(&b, "subscription_state")
        .and_then(Value::as_str)
        .and_then(GlobalState::parse)
        .ok_or_else(|| ApiError::bad(BAD_EMAIL_STATE))?;
    apply(store, ws, &emails, EmailChange::Set(state), ctx).await
}

/// POST /email/blocklist and /email/blacklist: unsubscribe globally and mark as a
/// hard bounce.
pub async fn blocklist<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let b = body_object(body)?;
    let emails = email_addresses(&b)?;
    apply(store, ws, &emails, EmailChange::Blocklist, ctx).await
}
