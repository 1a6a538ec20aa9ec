//! The retry loop around a unit of work: optimistic concurrency means a request
//! whose commit finds that somebody else wrote first reads again and recomputes.

use super::Tx;
use crate::error::ApiError;
use crate::ids::{IdGen, WorkspaceName};
use crate::store::{CommitError, Store};

/// Attempts before a request gives up on contention (503).
pub const MAX_ATTEMPTS: u32 = 16;

/// Runs one request's read-compute-commit in a fresh unit of work, again from the
/// start whenever another request committed first (an expectation failed), so
/// concurrent requests never lose each other's updates. `work` gets the unit of work
/// and an id generator unique to the attempt; its value is returned once the changes
/// are committed (nothing is written when it fails or changes nothing).
pub async fn transact<'s, S: Store, T>(
    store: &'s S,
    ws: &WorkspaceName,
    seed: [u8; 16],
    work: impl AsyncFnMut(&mut Tx<'s, S>, &mut IdGen) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    run(store, ws, seed, work).await
}

/// [`transact`] over company-wide documents (SCIM's dashboard users): the unit of
/// work belongs to no workspace, so it reads and writes plain documents only. Its
/// error type is the family's own, as long as shared errors convert into it.
pub async fn transact_company<'s, S: Store, T, E: From<ApiError>>(
    store: &'s S,
    seed: [u8; 16],
    work: impl AsyncFnMut(&mut Tx<'s, S>, &mut IdGen) -> Result<T, E>,
) -> Result<T, E> {
    run(store, &WorkspaceName::company(), seed, work).await
}

async fn run<'s, S: Store, T, E: From<ApiError>>(
    store: &'s S,
    ws: &WorkspaceName,
    seed: [u8; 16],
    mut work: impl AsyncFnMut(&mut Tx<'s, S>, &mut IdGen) -> Result<T, E>,
) -> Result<T, E> {
    for attempt in 0..MAX_ATTEMPTS {
        if attempt > 0 {
            store.contended(attempt).await;
        }
        let mut ids = IdGen::derive(seed, "request", u64::from(attempt));
        let mut tx = Tx::new(store, ws.clone());
        let out = work(&mut tx, &mut ids).await?;
        // A request that would take a profile over the bound on its size is refused whole.
        if let Some(message) = tx.take_oversized() {
            return Err(E::from(ApiError::bad(message)));
        }
        let changes = tx.into_changes().map_err(|e| E::from(e.into()))?;
        if changes.is_empty() {
            return Ok(out);
        }
        match store.commit(changes).await {
            Ok(()) => return Ok(out),
            Err(CommitError::Conflict) => continue,
            Err(CommitError::Store(e)) => return Err(E::from(e.into())),
        }
    }
    Err(E::from(ApiError::Busy))
}
