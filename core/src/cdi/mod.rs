//! Warehouse sync status (`/cdi/integrations`): not built yet. Its routes are in the
//! table and authenticated; this family's own arm answers 501 until it exists.

use crate::error::ApiError;
use crate::http::Response;
use crate::routes::Cdi;

/// Answers a CDI endpoint.
pub fn handle(endpoint: Cdi) -> Result<Response, ApiError> {
    match endpoint {
        Cdi::Integrations | Cdi::JobSyncStatus(_) => Err(ApiError::NotImplemented),
    }
}
