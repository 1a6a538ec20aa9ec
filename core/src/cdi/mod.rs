//! Warehouse syncs (CDI, `/cdi/integrations`). Engage runs the syncs itself: the
//! host reads rows from a warehouse table; the rules are here.
//!
//! - `integration.rs`: an integration (table, kind of rows, schedule, cursor) and
//!   its list entry; `job.rs`: a job and its counts.
//! - `rows.rs`: a source row → a `/users/track` object or a user to delete (pure).
//! - `sync.rs`: begin a job, commit a batch (effects, counts and cursor in one
//!   unit of work), finish it; `pipeline.rs`: a job's batches, each built while
//!   the one before it commits.
//! - `position.rs`: where a job stands inside a group of rows sharing one
//!   `UPDATED_AT` (a batch may end inside it); `resume.rs`: moving the cursor
//!   over a group, and skipping what is committed when reading on from it.
//! - `cursor.rs`: opaque, signed page cursors and the `Link` header; `read.rs`:
//!   the two list endpoints.
//! - `manage.rs`: what operators and the host's runner do: create an integration,
//!   ask for a job, find what is due.
//!
//! Integrations are made by the operator (`engage cdi create`), not by the API.

pub mod columns;
pub mod cursor;
pub mod integration;
pub mod job;
pub mod manage;
pub mod pipeline;
pub mod position;
pub mod read;
pub mod resume;
pub mod rows;
pub mod schema;
pub mod sync;

use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::WorkspaceName;
use crate::routes::Cdi;
use crate::store::Store;

/// Answers a CDI endpoint.
pub async fn handle<S: Store>(
    store: &S,
    endpoint: Cdi,
    ws: &WorkspaceName,
    req: &Request,
) -> Result<Response, ApiError> {
    match endpoint {
        Cdi::Integrations => read::integrations(store, ws, req).await,
        Cdi::JobSyncStatus(id) => read::jobs(store, ws, &id, req).await,
    }
}

#[cfg(test)]
mod tests;
