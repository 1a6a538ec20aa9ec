//! GET /preference_center/v1/list and GET /preference_center/v1/{id}.

use serde_json::{json, Value};

use super::center;
use super::write::NOT_FOUND;
use crate::error::ApiError;
use crate::http::Response;
use crate::ids::WorkspaceName;
use crate::store::Store;

/// GET /preference_center/v1/list: every center of the workspace, oldest first.
pub async fn list<S: Store>(store: &S, ws: &WorkspaceName) -> Result<Response, ApiError> {
    let centers: Vec<Value> = center::list(store, ws).await?.iter().map(center::Center::summary).collect();
    Ok(Response::json(200, &json!({ "preference_centers": centers })))
}

/// GET /preference_center/v1/{id}: every field of one center.
pub async fn get<S: Store>(store: &S, ws: &WorkspaceName, id: &str) -> Result<Response, ApiError> {
    match center::get(store, ws, id).await? {
        Some(c) => Ok(Response::json(200, &c.detail())),
        None => Err(ApiError::NotFound(NOT_FOUND.into())),
    }
}
