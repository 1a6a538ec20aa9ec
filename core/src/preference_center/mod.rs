//! Preference centers (`/preference_center/v1`): not built yet. Every route is in
//! the table and authenticated; this family's own arm answers 501 until it exists.

use crate::error::ApiError;
use crate::http::Response;
use crate::routes::PreferenceCenter;

/// Answers a preference-center endpoint.
pub fn handle(endpoint: PreferenceCenter) -> Result<Response, ApiError> {
    match endpoint {
        PreferenceCenter::Create | PreferenceCenter::Update(_) | PreferenceCenter::List | PreferenceCenter::Get(_) => {
            Err(ApiError::NotImplemented)
        }
    }
}
