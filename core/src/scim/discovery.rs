//! Discovery (RFC 7644 §4): `/ServiceProviderConfig`, `/ResourceTypes` and
//! `/Schemas`, saying exactly what this server does, so that identity providers
//! and testers adapt: filtering, ETags, PATCH, no bulk, no sorting, no password
//! changes; the core User schema as kept here and the enterprise extension, whose
//! one attribute kept is `department` (the others are accepted and not kept, so
//! they are not described).
//!
//! The dashboard user's own attributes (`department`, `permissions`, `createdAt`,
//! `lastSignInAt`) sit beside the core ones, as the platform returns them, so the
//! User schema describes them too. SCIM schemas nest complex attributes at most
//! one level under another, so `permissions` is described down to its app groups
//! and roles; their teams and permission sets are accepted and returned but not
//! described.

use serde_json::{json, Value};

use super::error::ScimError;
use super::protocol::{ENTERPRISE_URN, LIST_URN, USER_URN};
use super::read::MAX_PAGE;
use super::values::{CompanyPermission, Department, WorkspacePermission};
use crate::http::Response;
use crate::routes::NotOffered;

const SPC_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig";
const RESOURCE_TYPE_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:ResourceType";
const SCHEMA_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:Schema";

fn attr(name: &str, kind: &str, description: &str) -> Value {
    json!({
        "name": name,
        "type": kind,
        "multiValued": false,
        "description": description,
        "required": false,
        "caseExact": false,
        "mutability": "readWrite",
        "returned": "default",
        "uniqueness": "none",
    })
}

fn set(mut v: Value, key: &str, value: Value) -> Value {
    v[key] = value;
    v
}

fn required(v: Value) -> Value {
    set(v, "required", json!(true))
}

fn many(v: Value) -> Value {
    set(v, "multiValued", json!(true))
}

fn read_only(v: Value) -> Value {
    set(v, "mutability", json!("readOnly"))
}

fn one_of(v: Value, values: Vec<&str>) -> Value {
    set(set(v, "canonicalValues", json!(values)), "caseExact", json!(true))
}

fn complex(v: Value, sub: Vec<Value>) -> Value {
    set(v, "subAttributes", json!(sub))
}

/// `department_required`: whether a create must name a department (it need not
/// when the SCIM token asking has a default one).
fn user_attributes(department_required: bool) -> Vec<Value> {
    let company: Vec<&str> = CompanyPermission::ALL.iter().map(|p| p.as_str()).collect();
    let workspace: Vec<&str> = WorkspacePermission::ALL.iter().map(|p| p.as_str()).collect();
    let departments: Vec<&str> = Department::ALL.iter().map(|d| d.as_str()).collect();
    vec![
        set(
            required(attr("userName", "string", "The user's email address; unique regardless of case.")),
            "uniqueness",
            json!("server"),
        ),
        required(complex(
            attr("name", "complex", "The user's name."),
            vec![
                required(attr("givenName", "string", "Given name.")),
                required(attr("familyName", "string", "Family name.")),
            ],
        )),
        attr("displayName", "string", "The name to show, if the identity provider sends one."),
        set(
            attr(
                "active",
                "boolean",
                "False once an identity provider deactivated the user: kept and listed, not able to use the dashboard.",
            ),
            "returned",
            json!("always"),
        ),
        set(
            one_of(
                attr(
                    "department",
                    "string",
                    "The user's department (also in the enterprise extension); required on create unless the SCIM \
                     token has a default one.",
                ),
                departments,
            ),
            "required",
            json!(department_required),
        ),
        complex(
            attr(
                "permissions",
                "complex",
                "Company permissions, roles and app groups (workspaces). App groups may also carry \
                 'team' and 'appGroupPermissionSets' entries, and roles 'appGroup' entries: accepted and \
                 returned, not described here (SCIM schemas nest one level).",
            ),
            vec![
                many(one_of(attr("companyPermissions", "string", "Company-level permissions."), company)),
                many(complex(
                    attr("roles", "complex", "Roles, by id or name."),
                    vec![attr("roleId", "string", "The role's id."), attr("roleName", "string", "The role's name.")],
                )),
                many(complex(
                    attr("appGroup", "complex", "App groups (workspaces) and the user's permissions in each."),
                    vec![
                        attr("appGroupId", "string", "The app group's id."),
                        attr("appGroupName", "string", "The app group's name."),
                        many(one_of(attr("appGroupPermissions", "string", "Permissions in the app group."), workspace)),
                    ],
                )),
            ],
        ),
        read_only(attr("createdAt", "string", "When the user was created, as the platform writes it.")),
        read_only(attr("lastSignInAt", "string", "When the user last signed in; absent until then.")),
    ]
}

fn user_schema(base: &str, department_required: bool) -> Value {
    json!({
        "schemas": [SCHEMA_URN],
        "id": USER_URN,
        "name": "User",
        "description": "A dashboard user",
        "attributes": user_attributes(department_required),
        "meta": {"resourceType": "Schema", "location": format!("{base}/scim/v2/Schemas/{USER_URN}")},
    })
}

/// The enterprise extension: its department is required as the core one is.
fn enterprise_schema(base: &str, department_required: bool) -> Value {
    let departments: Vec<&str> = Department::ALL.iter().map(|d| d.as_str()).collect();
    json!({
        "schemas": [SCHEMA_URN],
        "id": ENTERPRISE_URN,
        "name": "EnterpriseUser",
        "description": "Enterprise User: its department is the user's department",
        "attributes": [set(
            one_of(attr("department", "string", "The user's department (the same value as the core `department`)."), departments),
            "required",
            json!(department_required),
        )],
        "meta": {"resourceType": "Schema", "location": format!("{base}/scim/v2/Schemas/{ENTERPRISE_URN}")},
    })
}

fn user_type(base: &str) -> Value {
    json!({
        "schemas": [RESOURCE_TYPE_URN],
        "id": "User",
        "name": "User",
        "endpoint": "/Users",
        "description": "A dashboard user",
        "schema": USER_URN,
        "schemaExtensions": [{"schema": ENTERPRISE_URN, "required": false}],
        "meta": {"resourceType": "ResourceType", "location": format!("{base}/scim/v2/ResourceTypes/User")},
    })
}

fn listing(resources: Vec<Value>) -> Response {
    let n = resources.len();
    Response::json(
        200,
        &json!({"schemas": [LIST_URN], "totalResults": n, "itemsPerPage": n, "startIndex": 1, "Resources": resources}),
    )
}

/// GET /scim/v2/ServiceProviderConfig.
pub fn service_provider_config(base: &str) -> Response {
    Response::json(
        200,
        &json!({
            "schemas": [SPC_URN],
            "patch": {"supported": true},
            "bulk": {"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
            "filter": {"supported": true, "maxResults": MAX_PAGE},
            "changePassword": {"supported": false},
            "sort": {"supported": false},
            "etag": {"supported": true},
            "authenticationSchemes": [{
                "type": "oauthbearertoken",
                "name": "SCIM token",
                "description": "Authorization: Bearer <SCIM token>, with X-Request-Origin set to the origin \
                                the token was made for",
                "primary": true,
            }],
            "meta": {"resourceType": "ServiceProviderConfig", "location": format!("{base}/scim/v2/ServiceProviderConfig")},
        }),
    )
}

/// GET /scim/v2/ResourceTypes.
pub fn resource_types(base: &str) -> Response {
    listing(vec![user_type(base)])
}

/// GET /scim/v2/ResourceTypes/{id}.
pub fn resource_type(base: &str, id: &str) -> Result<Response, ScimError> {
    if id == "User" {
        Ok(Response::json(200, &user_type(base)))
    } else {
        Err(ScimError::NotFound(format!("no resource type '{id}'; this server has User")))
    }
}

/// GET /scim/v2/Schemas.
pub fn schemas(base: &str, department_required: bool) -> Response {
    listing(vec![user_schema(base, department_required), enterprise_schema(base, department_required)])
}

/// GET /scim/v2/Schemas/{id}.
pub fn schema(base: &str, id: &str, department_required: bool) -> Result<Response, ScimError> {
    if id.eq_ignore_ascii_case(USER_URN) {
        Ok(Response::json(200, &user_schema(base, department_required)))
    } else if id.eq_ignore_ascii_case(ENTERPRISE_URN) {
        Ok(Response::json(200, &enterprise_schema(base, department_required)))
    } else {
        Err(ScimError::NotFound(format!("no schema '{id}'; this server has {USER_URN} and {ENTERPRISE_URN}")))
    }
}

/// The 501 of an endpoint RFC 7644 defines and this server does not offer.
pub fn not_offered(what: NotOffered) -> ScimError {
    ScimError::NotImplemented(match what {
        NotOffered::Me => {
            "/Me is not offered: a SCIM token stands for an identity provider, not for a user (RFC 7644 §3.11)"
        }
        NotOffered::Bulk => "bulk operations are not offered (/ServiceProviderConfig: bulk.supported is false)",
    })
}
