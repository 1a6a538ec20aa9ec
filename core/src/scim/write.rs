//! POST /scim/v2/Users, PUT, PATCH and DELETE /scim/v2/Users/{id}:
//! parse the body (pure) → one unit of work over the user and its name's index
//! entry, so a user name is never taken twice nor left behind → render.

use super::error::ScimError;
use super::protocol::{MAX_USERS, USERS_PATH, USER_COUNT_KEY};
use super::read::NOT_FOUND;
use super::user::{self, found, name_key, DashboardUser, UserInput};
use super::values::Department;
use crate::ctx::Ctx;
use crate::http::{Request, Response};
use crate::repo::transact::transact_company;
use crate::repo::Tx;
use crate::store::{Store, Table};

/// The `If-Match` precondition of a write (RFC 7644 §3.14): `*` or a list of tags,
/// weak or strong, one of which must be the user's current version.
fn check_if_match(req: &Request, user: &DashboardUser) -> Result<(), ScimError> {
    match req.header_value("if-match") {
        Some(header) if !user.is_named_by(header) => Err(ScimError::PreconditionFailed),
        _ => Ok(()),
    }
}

/// POST /scim/v2/Users; a body without a department takes the token's default.
pub async fn create<S: Store>(
    store: &S,
    body: &[u8],
    default_department: Option<Department>,
    base: &str,
    ctx: Ctx,
) -> Result<Response, ScimError> {
    let input = user::parse(body)?;
    let department = input.department_or(default_department)?;
    let created = transact_company(store, ctx.seed, async |tx, ids| {
        let key = name_key(&input.user_name);
        if tx.doc::<String>(Table::ScimUserName, &key).await?.is_some() {
            return Err(ScimError::Taken);
        }
        // The count is a document of its own, read and written in this unit of work,
        // so concurrent creates cannot pass the bound together.
        let count: usize = tx.doc(Table::ScimUserName, USER_COUNT_KEY).await?.unwrap_or(0);
        if count >= MAX_USERS {
            return Err(ScimError::Limit(format!(
                "this deployment has the most dashboard users it keeps ({MAX_USERS})"
            )));
        }
        tx.put_doc(Table::ScimUserName, USER_COUNT_KEY, &(count + 1))?;
        let user = input.new_user(ids.uuid(), department, ctx.now);
        // Read first, so that the commit expects the new id to be free.
        if tx.doc::<DashboardUser>(Table::ScimUser, &user.id).await?.is_some() {
            return Err(crate::error::ApiError::Busy.into());
        }
        tx.put_doc(Table::ScimUserName, &key, &user.id)?;
        tx.put_doc(Table::ScimUser, &user.id, &user)?;
        Ok(user)
    })
    .await?;
    let resp = found(201, &created, created.render(base));
    Ok(resp.with_header("Location", format!("{base}{}/{}", USERS_PATH, created.id)))
}

/// PUT /scim/v2/Users/{id}: replaces the writable attributes the body gives; those
/// it leaves out (`department`, `permissions`, `externalId`, `displayName`, `active`) stay, as a
/// provider that does not manage one must not wipe it; read-only ones (`id`,
/// `createdAt`, `meta`, `lastSignInAt`) are ignored (RFC 7644 §3.5.1). A new
/// `userName` must be free (another case of the same one is fine).
pub async fn replace<S: Store>(
    store: &S,
    id: &str,
    req: &Request,
    base: &str,
    ctx: Ctx,
) -> Result<Response, ScimError> {
    let input = user::parse(&req.body)?;
    let replaced = transact_company(store, ctx.seed, async |tx, _| {
        let mut user =
            tx.doc::<DashboardUser>(Table::ScimUser, id).await?.ok_or_else(|| ScimError::NotFound(NOT_FOUND.into()))?;
        check_if_match(req, &user)?;
        store_replacement(tx, &mut user, &input, ctx).await?;
        Ok::<_, ScimError>(user)
    })
    .await?;
    Ok(found(200, &replaced, replaced.render(base)))
}

/// PATCH /scim/v2/Users/{id}: the operations change the user's writable attributes
/// in order, then the result is checked as a whole, exactly as a PUT body, and
/// stored in one unit of work; any failure leaves the user as it was.
pub async fn patch<S: Store>(store: &S, id: &str, req: &Request, base: &str, ctx: Ctx) -> Result<Response, ScimError> {
    let ops = super::patch::parse(&req.body)?;
    let patched = transact_company(store, ctx.seed, async |tx, _| {
        let mut user =
            tx.doc::<DashboardUser>(Table::ScimUser, id).await?.ok_or_else(|| ScimError::NotFound(NOT_FOUND.into()))?;
        check_if_match(req, &user)?;
        let input = user::parse_value(&super::patch::apply(&ops, user.writable())?)?;
        input.check_immutable(&user)?;
        store_replacement(tx, &mut user, &input, ctx).await?;
        Ok::<_, ScimError>(user)
    })
    .await?;
    Ok(found(200, &patched, patched.render(base)))
}

/// Writes a checked replacement, if it changes anything: a changed `userName`
/// moves its index entry, and must be free (another case of the user's own is fine).
async fn store_replacement<S: Store>(
    tx: &mut Tx<'_, S>,
    user: &mut DashboardUser,
    input: &UserInput,
    ctx: Ctx,
) -> Result<(), ScimError> {
    let old_key = name_key(&user.user_name);
    if !user.replace_with(input, ctx.now) {
        return Ok(());
    }
    let new_key = name_key(&user.user_name);
    if new_key != old_key {
        if tx.doc::<String>(Table::ScimUserName, &new_key).await?.is_some() {
            return Err(ScimError::Taken);
        }
        tx.delete_doc(Table::ScimUserName, &old_key);
        tx.put_doc(Table::ScimUserName, &new_key, &user.id)?;
    }
    tx.put_doc(Table::ScimUser, &user.id, user)?;
    Ok(())
}

/// DELETE /scim/v2/Users/{id}: the user and its name are gone together.
pub async fn delete<S: Store>(store: &S, id: &str, req: &Request, ctx: Ctx) -> Result<Response, ScimError> {
    transact_company(store, ctx.seed, async |tx, _| {
        let user =
            tx.doc::<DashboardUser>(Table::ScimUser, id).await?.ok_or_else(|| ScimError::NotFound(NOT_FOUND.into()))?;
        check_if_match(req, &user)?;
        tx.delete_doc(Table::ScimUserName, &name_key(&user.user_name));
        tx.delete_doc(Table::ScimUser, id);
        let count: usize = tx.doc(Table::ScimUserName, USER_COUNT_KEY).await?.unwrap_or(1);
        tx.put_doc(Table::ScimUserName, USER_COUNT_KEY, &count.saturating_sub(1))?;
        Ok::<(), ScimError>(())
    })
    .await?;
    Ok(Response::empty(204))
}
