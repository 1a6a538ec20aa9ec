//! The API description of the SCIM endpoints: the dashboard user, the list
//! response, the search request and the PatchOp, and each operation's answers in
//! SCIM's media type.

use serde_json::{json, Value};

use super::attrs::one_of;
use super::error::ScimError;
use super::protocol::{CONTENT_TYPE, ENTERPRISE_URN, LIST_URN, MAX_USERS, PATCH_URN, SEARCH_URN, USER_URN};
use super::read::{MAX_PAGE, NOT_FOUND};
use super::values::{CompanyPermission, Department, TeamPermission, WorkspacePermission};
use crate::openapi::op::{Op, JSON};
use crate::openapi::schema::{array, integer, object, refer, string, values, with};
use crate::ratelimit::Bucket;
use crate::routes::{NotOffered, Scim};

fn list<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|v| name(*v)).collect()
}

fn strings(description: &str) -> Value {
    array(string(""), description)
}

/// `#/components/schemas` of SCIM.
pub fn components() -> Vec<(&'static str, Value)> {
    let workspace = list(WorkspacePermission::ALL, WorkspacePermission::as_str);
    let set = object(
        "",
        &[
            ("appGroupPermissionSetName", string("")),
            ("appGroupPermissionSetId", string("")),
            ("permissions", array(values(&workspace, ""), "")),
        ],
        &[],
    );
    let role = object(
        "",
        &[
            ("roleName", string("")),
            ("roleId", string("")),
            (
                "appGroup",
                array(
                    object(
                        "",
                        &[
                            ("appGroupId", string("")),
                            ("appGroupName", string("")),
                            ("appGroupPermissionSets", array(set, "")),
                        ],
                        &[],
                    ),
                    "",
                ),
            ),
        ],
        &[],
    );
    let team = object(
        "",
        &[
            ("teamId", string("")),
            ("teamName", string("")),
            ("teamPermissions", array(values(&list(TeamPermission::ALL, TeamPermission::as_str), ""), "")),
        ],
        &[],
    );
    let app_group = object(
        "",
        &[
            ("appGroupId", string("")),
            ("appGroupName", string("")),
            ("appGroupPermissions", array(values(&workspace, ""), "")),
            ("team", array(team, "")),
        ],
        &[],
    );
    let permissions = object("What the dashboard user may do: company permissions, roles, and per workspace (app group) permissions and teams.", &[
        ("companyPermissions", array(values(&list(CompanyPermission::ALL, CompanyPermission::as_str), ""), "")),
        ("roles", array(role, "")),
        ("appGroup", array(app_group, "")),
    ], &[]);
    let meta = object(
        "RFC 7643 metadata.",
        &[
            ("resourceType", string("`User`.")),
            ("created", string("")),
            ("lastModified", string("")),
            ("location", string("The user's URL.")),
            ("version", string("Its version, as the `ETag` (`W/\"n\"`).")),
        ],
        &[],
    );
    let department = values(&list(Department::ALL, Department::as_str), "");
    let enterprise =
        object("The enterprise extension: its `department` is the user's.", &[("department", department.clone())], &[]);
    let user = object(&format!("A dashboard user (at most {MAX_USERS} per deployment). On write, `userName` and `name` are required, and `department` (at the top level or in the enterprise extension) on create unless the SCIM token has a default; a PUT keeps what it leaves out of `department`, `permissions`, `externalId`, `displayName` and `active`, and ignores the read-only `id`, `createdAt`, `lastSignInAt` and `meta`."), &[
        ("schemas", strings(&format!("`{USER_URN}` and `{ENTERPRISE_URN}`."))),
        ("id", string("The resource id (read-only).")),
        ("externalId", string("The identity provider's id.")),
        ("displayName", string("The name to show.")),
        ("userName", string("The user's email; unique, case-insensitive.")),
        ("name", object("", &[("givenName", string("")), ("familyName", string(""))], &["givenName", "familyName"])),
        ("active", json!({"type": "boolean", "description": "False once deactivated (kept, listed, not able to use the dashboard). Writes also take the strings `\"True\"` / `\"False\"` in any case."})),
        ("department", department),
        ("lastSignInAt", string("Formatted date-time text; absent until the user signs in.")),
        ("createdAt", string("Formatted date-time text.")),
        ("permissions", permissions),
        ("meta", meta),
        (ENTERPRISE_URN, enterprise),
    ], &["schemas", "id"]);
    // As read: `attributes` / `excludedAttributes` leave out whatever they do not
    // ask for, but never `id` and `schemas` (RFC 7644 §3.9).
    let user = with(user, "description", json!(format!("A dashboard user as read (at most {MAX_USERS} per deployment). `attributes` and `excludedAttributes` return only what they select, and always `id` and `schemas`."))) ;
    // As written: `userName` and `name` are required, `schemas` must name the User schema.
    let mut write = user.clone();
    write["required"] = json!(["schemas", "userName", "name"]);
    write["properties"]["schemas"] = json!({
        "type": "array",
        "items": {"enum": [USER_URN, ENTERPRISE_URN]},
        "contains": {"const": USER_URN},
        "description": format!("`{USER_URN}`, and `{ENTERPRISE_URN}` when the extension is sent (compared without case)."),
    });
    let text = |d: &str| json!({"type": "string", "pattern": "\\S", "maxLength": super::attrs::MAX_TEXT_CHARS, "description": d});
    write["properties"]["userName"] = crate::openapi::schema::email("The user's email; unique, case-insensitive.");
    write["properties"]["name"] = object(
        "",
        &[("givenName", text("Not blank.")), ("familyName", text("Not blank."))],
        &["givenName", "familyName"],
    );
    write["description"] = json!("A dashboard user as written. `userName` and `name` are required, and `department` (at the top level or in the enterprise extension) on create unless the SCIM token has a default; a PUT keeps what it leaves out of `department`, `permissions`, `externalId`, `displayName` and `active`, and ignores the read-only `id`, `createdAt`, `lastSignInAt` and `meta`.");
    let list_response = object(
        "RFC 7644 §3.4.2 ListResponse.",
        &[
            ("schemas", strings(&format!("`{LIST_URN}`."))),
            ("totalResults", integer("Users matching.")),
            ("itemsPerPage", integer("Users in this page.")),
            ("startIndex", integer("1-based index of the first.")),
            ("Resources", array(refer("ScimUser"), "")),
        ],
        &["schemas", "totalResults", "Resources"],
    );
    let search = object(
        "RFC 7644 §3.4.3 SearchRequest (no sorting).",
        &[
            (
                "schemas",
                json!({"type": "array", "items": {"const": SEARCH_URN}, "minItems": 1, "maxItems": 1, "description": format!("`[\"{SEARCH_URN}\"]`.")}),
            ),
            (
                "filter",
                crate::openapi::schema::nullable(with(
                    string("An RFC 7644 §3.4.2.2 filter, as in `GET /Users` (`null`: none)."),
                    "minLength",
                    json!(1),
                )),
            ),
            ("startIndex", integer("")),
            ("count", integer("")),
            ("attributes", strings("Only these attributes.")),
            ("excludedAttributes", strings("All but these.")),
        ],
        &[],
    );
    let operation = object(
        "",
        &[
            ("op", values(&["add", "replace", "remove"], "Case-insensitive.")),
            ("path", string("An attribute path (no filters); required for `remove`.")),
            ("value", json!({"description": "The value (absent for `remove`)."})),
        ],
        &["op"],
    );
    let patch = object(
        "RFC 7644 §3.5.2 PatchOp: applied in order, then checked as a whole; any failure leaves the user unchanged.",
        &[
            (
                "schemas",
                json!({"type": "array", "items": {"const": PATCH_URN}, "minItems": 1, "maxItems": 1, "description": format!("`[\"{PATCH_URN}\"]`.")}),
            ),
            ("Operations", array(operation, "")),
        ],
        &["schemas", "Operations"],
    );
    vec![
        ("ScimUser", user),
        ("ScimUserWrite", write),
        ("ScimListResponse", list_response),
        ("ScimSearchRequest", search),
        ("ScimPatchOp", patch),
    ]
}

/// An error answer, its example made by the error itself.
fn error(op: Op, status: u16, description: &str, e: ScimError) -> Op {
    let example = e.into_response().json_body();
    op.reply_in(status, description, CONTENT_TYPE, refer("ScimError")).with_example("error", example)
}

fn missing(op: Op) -> Op {
    error(op, 404, NOT_FOUND, ScimError::NotFound(NOT_FOUND.into()))
}

fn taken(op: Op) -> Op {
    error(op, 409, "`userName` is taken.", ScimError::Taken)
}

fn bad(op: Op) -> Op {
    let wrong = one_of(&json!("sales"), "department", Department::parse, Department::listing).err();
    error(op, 400, "Invalid input; `scimType` says which kind.", wrong.unwrap_or_else(|| ScimError::value("")))
}

fn selection(op: Op) -> Op {
    op.query("attributes", false, "Comma-separated: only these attributes.", string("")).query(
        "excludedAttributes",
        false,
        "Comma-separated: all but these.",
        string(""),
    )
}

fn user_path(op: Op) -> Op {
    op.path("id", "The user's resource id (from creation or a lookup).")
}

fn found(op: Op, status: u16, description: &str) -> Op {
    op.reply_in(status, description, CONTENT_TYPE, refer("ScimUser")).with_header("ETag", "The user's version.")
}

fn body(op: Op, schema: Value) -> Op {
    let op = op.body_in(&[CONTENT_TYPE, JSON], schema, true);
    error(
        op,
        415,
        "A body that is neither `application/scim+json` nor `application/json`.",
        ScimError::UnsupportedMediaType,
    )
}

fn if_match(op: Op) -> Op {
    let op = op.header("If-Match", false, "`*` or the `ETag`s the change applies to.");
    error(op, 412, "`If-Match` names a version that is no longer current.", ScimError::PreconditionFailed)
}

fn listing(op: Op) -> Op {
    bad(op).reply_in(200, "The users found.", CONTENT_TYPE, refer("ScimListResponse"))
}

fn discovery(op: Op, description: &str) -> Op {
    op.reply_in(200, description, CONTENT_TYPE, crate::openapi::schema::free_object("A SCIM resource."))
}

/// A SCIM endpoint.
pub fn describe(endpoint: &Scim) -> Op {
    let op = match endpoint {
        Scim::Search => listing(selection(
            Op::new("Finds dashboard users: all, or those an RFC 7644 filter matches (`eq ne co sw ew gt ge lt le pr`, `and or not`, parentheses, value paths on `permissions.roles` and `permissions.appGroup`), a page at a time.")
                .query("filter", false, "e.g. `userName eq \"<email>\"`, `externalId eq \"...\" and active eq true` (URL-encoded).", with(string(""), "minLength", json!(1)))
                .query("startIndex", false, "1-based index of the first user (below 1 is taken as 1).", integer(""))
                .query("count", false, &format!("Users per page: 0 to {MAX_PAGE} (default {MAX_PAGE}; more is taken as {MAX_PAGE}, less than 0 as 0)."), integer("")),
        )),
        Scim::SearchPost => listing(body(Op::new("As `GET /Users`, with the query in a SearchRequest body."), refer("ScimSearchRequest"))),
        Scim::SearchRoot => listing(body(Op::new("A search of every resource type: here, dashboard users."), refer("ScimSearchRequest"))),
        Scim::Create => {
            let created = found(body(Op::new("Creates a dashboard user."), refer("ScimUserWrite")), 201, "Created.");
            taken(bad(created.with_header("Location", "The user's URL.")))
        }
        Scim::Get(_) => missing(
            found(selection(user_path(Op::new("Reads a dashboard user."))), 200, "The user.")
                .header("If-None-Match", false, "`*` or `ETag`s: a 304 when one names the current version.")
                .empty(304, "The copy named in `If-None-Match` is current (the `ETag` header, no body)."),
        ),
        Scim::Replace(_) => missing(taken(bad(if_match(found(body(user_path(Op::new("Replaces the writable attributes the body gives; `department`, `permissions`, `externalId`, `displayName` and `active` left out stay; read-only ones are ignored. A replacement that changes nothing keeps the version.")), refer("ScimUserWrite")), 200, "Replaced."))))),
        Scim::Patch(_) => missing(taken(bad(if_match(found(body(user_path(Op::new("Changes some attributes of a dashboard user (RFC 7644 §3.5.2).")), refer("ScimPatchOp")), 200, "Changed."))))),
        Scim::Delete(_) => missing(if_match(user_path(Op::new("Permanently deletes a dashboard user.")).empty(204, "Deleted."))),
        Scim::ServiceProviderConfig => discovery(
            Op::new("What this server supports: PATCH, ETags and filtering yes; bulk, sorting, password changes no."),
            "The configuration (RFC 7643 §5).",
        ),
        Scim::ResourceTypes => discovery(Op::new("The resource types: `User`."), "A ListResponse of resource types."),
        Scim::ResourceType(_) => missing(discovery(Op::new("One resource type.").path("id", "`User`."), "The resource type.")),
        Scim::Schemas => discovery(Op::new("The schemas: the core User schema as this server keeps it, and the enterprise extension's `department`."), "A ListResponse of schemas."),
        Scim::Schema(_) => missing(discovery(Op::new("One schema.").path("id", "The schema's URN."), "The schema (RFC 7643 §7).")),
        Scim::NotOffered(what) => {
            let detail = match what {
                NotOffered::Me => "`/Me` is not offered (RFC 7644 §3.11): a SCIM token is no user.",
                NotOffered::Bulk => "Bulk operations are not offered (`bulk.supported` is false).",
            };
            error(Op::new(detail), 501, "Not offered.", super::discovery::not_offered(*what))
        }
    };
    if endpoint.is_discovery() {
        op
    } else {
        op.limited(Bucket::Scim, "per company (shared by the SCIM user endpoints)")
    }
}
