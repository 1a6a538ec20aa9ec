//! SCIM provisioning of dashboard users (`/scim/v2`): not built yet. Its routes are
//! in the table; this family's own arm answers 501 until it exists (SCIM tokens,
//! which it authenticates with, do not exist yet either).

use crate::error::ApiError;
use crate::http::Response;
use crate::routes::Scim;

/// Answers a SCIM endpoint.
pub fn handle(endpoint: Scim) -> Result<Response, ApiError> {
    match endpoint {
        Scim::Search | Scim::Create | Scim::Get(_) | Scim::Replace(_) | Scim::Delete(_) => {
            Err(ApiError::NotImplemented)
        }
    }
}
