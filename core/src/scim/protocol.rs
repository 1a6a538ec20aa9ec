//! The names SCIM fixes (schema and message URNs, the media type) and this
//! server's bounds: one leaf module every file of the family reads.

/// The core User schema's URN.
pub const USER_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
/// The enterprise User extension's URN (tolerated in bodies, not kept).
pub const ENTERPRISE_URN: &str = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
/// The ListResponse message's URN.
pub const LIST_URN: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
/// The SearchRequest message's URN.
pub const SEARCH_URN: &str = "urn:ietf:params:scim:api:messages:2.0:SearchRequest";
/// The PatchOp message's URN.
pub const PATCH_URN: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
/// SCIM's media type, returned on every body.
pub use crate::error::SCIM_CONTENT_TYPE as CONTENT_TYPE;
/// Where users live, under the public address.
pub const USERS_PATH: &str = "/scim/v2/Users";
/// Most dashboard users a deployment keeps (a listing reads them all).
pub const MAX_USERS: usize = 10_000;
/// The key, beside the user names' index entries, of the number of dashboard users
/// (a control character: no user name can be it, as names are email addresses).
pub const USER_COUNT_KEY: &str = "\u{1f}count";

/// True for paths of this family (their routing errors answer in SCIM's shape).
pub fn owns(path: &str) -> bool {
    path == "/scim/v2" || path.starts_with("/scim/v2/")
}

/// The shape of an error answered on `path` before any family's code: SCIM's on
/// this family's paths (even one no route has), the platform's elsewhere.
pub fn shape(path: &str) -> crate::error::Shape {
    match owns(path) {
        true => crate::error::Shape::Scim,
        false => crate::error::Shape::Platform,
    }
}
