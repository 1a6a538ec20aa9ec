//! Which profiles are large. Acknowledging a `/users/track` request checks the bound
//! on a profile's size against every profile it names; reading them all (two B-tree
//! descents each in SQLite, 225 profiles for a full batch) was most of what an
//! acknowledgement cost on a data set larger than memory. Most profiles are far
//! below the bound, so the store keeps the few that are not: for each profile whose
//! stored document is over [`LARGE_PROFILE_BYTES`], one entry per unique identifier
//! (external id, alias) and one for its profile key, in [`Table::LargeProfile`]. A
//! request naming only unregistered users knows each is at most that large without
//! reading it, and reads just the registered ones.
//!
//! The entries are derived from the profile documents in the same change set that
//! writes them ([`crate::repo::Tx`]), never by hand, like the identifier index. An
//! extra entry only costs a read; a missing one would let a request through the
//! acknowledgement's check (the applier still checks exactly and sets aside what
//! does not fit), so a workspace is trusted only once its prefix alone is in the
//! table: written when the workspace is created by a version that keeps it.
//! Workspaces made earlier keep the full check.

use std::collections::BTreeSet;

use super::index::Identity;
use super::keys::{profile_key, workspace_prefix};
use crate::ids::{ServiceId, WorkspaceName};
use crate::store::{Store, StoreError, Table};

/// Stored profiles larger than this (bytes of their document) are registered. It
/// bounds an unregistered profile: at most `(LARGE_PROFILE_BYTES + 1) / 5` = 409
/// entries in any of its maps, so a request adding up to 591 custom attributes,
/// events or products takes the acknowledgement's check without a read.
pub const LARGE_PROFILE_BYTES: usize = 2048;

/// True when a stored document of `len` bytes is large.
pub fn is_large(len: usize) -> bool {
    len > LARGE_PROFILE_BYTES
}

/// The entry saying a workspace's large profiles are all registered.
pub fn complete_key(ws: &WorkspaceName) -> String {
    workspace_prefix(ws)
}

/// The registry's entries for profile `id` with `identity`: its unique identifiers'
/// index keys, and its profile key (for requests naming it by service id). No two
/// collide: an index key has two separators or more, a profile key one.
pub(crate) fn entries(ws: &WorkspaceName, identity: &Identity, id: &ServiceId) -> Vec<String> {
    let mut out: Vec<String> =
        identity.index_entries(ws, id).into_iter().filter(|(_, unique)| *unique).map(|(k, _)| k).collect();
    out.push(profile_key(ws, id));
    out
}

/// A workspace's registry read in one range read when it holds at most this many
/// entries (usually it holds only its completeness entry); a larger one is read
/// entry by entry for the keys asked about.
pub(crate) const READ_WHOLE_UP_TO: usize = 256;

/// Whether `ws`'s registry is complete, and which of `keys` (index or profile keys)
/// are registered. A full batch asks about 225 keys: looked up one by one, absent
/// keys each cost a B-tree descent in SQLite (17% of a server's CPU under a burst
/// of acknowledgements, measured), while the whole registry of a workspace with few
/// large profiles is one short range read.
pub(crate) async fn registered<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    keys: &[&str],
) -> Result<(bool, Vec<bool>), StoreError> {
    let complete = complete_key(ws);
    let listed = store.scan(Table::LargeProfile, &complete, READ_WHOLE_UP_TO + 1).await?;
    if listed.len() <= READ_WHOLE_UP_TO {
        let present: BTreeSet<&str> = listed.iter().map(|(k, _)| k.as_str()).collect();
        return Ok((present.contains(complete.as_str()), keys.iter().map(|k| present.contains(k)).collect()));
    }
    let mut asked = Vec::with_capacity(keys.len() + 1);
    asked.push(complete);
    asked.extend(keys.iter().map(|k| k.to_string()));
    let found = store.get_many(Table::LargeProfile, &asked).await?;
    Ok((found[0].is_some(), found[1..].iter().map(Option::is_some).collect()))
}
