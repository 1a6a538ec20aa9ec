//! Finding users: the one profile an identifier names (choosing among profiles that
//! share an email or phone), and every profile sharing an address, which
//! subscription changes reach together.

use crate::ids::{Identifier, ServiceId};
use crate::profile::Profile;
use crate::repo::Tx;
use crate::store::{Store, StoreError};
use crate::time::Timestamp;

/// Among several profiles sharing an email or phone, the one to update: the most
/// recently updated identified profile, else the most recently updated one.
pub async fn pick_shared<S: Store>(tx: &mut Tx<'_, S>, ids: Vec<ServiceId>) -> Result<Option<ServiceId>, StoreError> {
    let mut best: Option<((bool, Timestamp), ServiceId)> = None;
    for id in ids {
        if let Some(p) = tx.profile(&id).await? {
            let rank = (p.is_identified(), p.updated_at);
            if best.as_ref().is_none_or(|(r, _)| rank > *r) {
                best = Some((rank, id));
            }
        }
    }
    Ok(best.map(|(_, id)| id))
}

/// The user an identifier names: the one profile of a unique identifier, or the
/// chosen one ([`pick_shared`]) among those sharing an email or phone.
pub async fn find<S: Store>(tx: &mut Tx<'_, S>, ident: &Identifier) -> Result<Option<ServiceId>, StoreError> {
    let found = tx.resolve(ident).await?;
    match ident {
        Identifier::Email(_) | Identifier::Phone(_) => pick_shared(tx, found).await,
        _ => Ok(found.into_iter().next()),
    }
}

/// Every profile sharing the email (or phone) of `id`, including `id` itself.
pub async fn sharing<S: Store>(
    tx: &mut Tx<'_, S>,
    id: &ServiceId,
    by_phone: bool,
) -> Result<Vec<ServiceId>, StoreError> {
    let ident = match tx.profile(id).await? {
        Some(p) if by_phone => p.phone.clone().map(Identifier::Phone),
        Some(p) => p.email.clone().map(Identifier::Email),
        None => None,
    };
    let mut out = match ident {
        Some(i) => tx.resolve(&i).await?,
        None => Vec::new(),
    };
    if !out.contains(id) {
        out.push(id.clone());
    }
    Ok(out)
}

/// Changes every profile sharing the email (or phone) of `id`.
pub async fn for_sharing<S: Store>(
    tx: &mut Tx<'_, S>,
    id: &ServiceId,
    by_phone: bool,
    at: Timestamp,
    mut change: impl FnMut(&mut Profile),
) -> Result<(), StoreError> {
    for other in sharing(tx, id, by_phone).await? {
        if let Some(p) = tx.profile_mut(&other).await? {
            change(p);
            p.updated_at = p.updated_at.max(at);
        }
    }
    Ok(())
}
