//! The API description of the SCIM endpoints: the dashboard user, the list
//! response, the search request and the PatchOp, and each operation's answers in
//! SCIM's media type.

use serde_json::{json, Value};

use super::attrs::one_of;
use super::discovery;
use super::error::ScimError;
use super::protocol::{CONTENT_TYPE, ENTERPRISE_URN, LIST_URN, MAX_USERS, PATCH_URN, SEARCH_URN, USER_URN};
use super::read::{MAX_PAGE, NOT_FOUND};
use super::values::{CompanyPermission, Department, TeamPermission, WorkspacePermission};
use crate::describe::op::{Op, JSON};
use crate::describe::schema::{array, integer, object, refer, string, values, with};
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
    let text = |d: &str| {
        crate::describe::schema::not_blank(
            json!({"type": "string", "maxLength": super::attrs::MAX_TEXT_CHARS, "description": d}),
        )
    };
    write["properties"]["userName"] = crate::describe::schema::email("The user's email; unique, case-insensitive.");
    write["properties"]["name"] = object(
        "",
        &[("givenName", text("Not blank.")), ("familyName", text("Not blank."))],
        &["givenName", "familyName"],
    );
    // `null` is read as the extension left out.
    // Any attribute, at any depth, may be `null`: the server reads it as left out.
    null_is_absent(&mut write);
    // Read-only attributes the server ignores on write, whatever their value.
    write["properties"]["meta"] = json!({"description": "Read-only: ignored on write."});
    write["properties"]["lastSignInAt"] = json!({"description": "Read-only: ignored on write."});
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
                json!({"type": "array", "items": {}, "contains": {"const": SEARCH_URN}, "description": format!("`[\"{SEARCH_URN}\"]` (an array that holds it is read as such).")}),
            ),
            (
                "filter",
                crate::describe::schema::nullable(with(
                    string("An RFC 7644 §3.4.2.2 filter, as in `GET /Users` (`null`: none)."),
                    "minLength",
                    json!(1),
                )),
            ),
            // `null` is read as left out, as for every SCIM attribute.
            ("startIndex", crate::describe::schema::nullable(integer(""))),
            ("count", crate::describe::schema::nullable(integer(""))),
            ("attributes", crate::describe::schema::nullable(strings("Only these attributes."))),
            ("excludedAttributes", crate::describe::schema::nullable(strings("All but these."))),
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
                json!({"type": "array", "items": {}, "contains": {"const": PATCH_URN}, "description": format!("`[\"{PATCH_URN}\"]` (an array that holds it is read as such).")}),
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

/// A search as the examples write it.
fn example_search() -> Value {
    json!({"schemas": [SEARCH_URN], "filter": "userName eq \"grace.hopper@example.com\"", "startIndex": 1, "count": 10, "excludedAttributes": ["permissions"]})
}

/// Makes every property of an object schema that is not required accept `null`, in
/// nested objects too (also those inside arrays): SCIM writes read `null` as the
/// attribute left out.
fn null_is_absent(schema: &mut Value) {
    if let Some(items) = schema.get_mut("items") {
        null_is_absent(items);
    }
    let required: Vec<String> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for (name, property) in props.iter_mut() {
            null_is_absent(property);
            if !required.contains(name) {
                *property = crate::describe::schema::nullable(property.take());
            }
        }
    }
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

/// The base URL the examples' locations are under.
const EXAMPLE_BASE: &str = "https://engage.example.com";

/// The id the examples give a dashboard user.
const EXAMPLE_USER: &str = "4f1e9a7c-2b3d-4c5e-8f60-718293a4b5c6";

/// A dashboard user as written in the examples.
fn example_write(department: &str) -> Value {
    json!({
        "schemas": [USER_URN],
        "userName": "grace.hopper@example.com",
        "externalId": "00u1abcd2EFGH3ijk4x7",
        "name": {"givenName": "Grace", "familyName": "Hopper"},
        "department": department,
        "permissions": {"appGroup": [{"appGroupName": "Production", "appGroupPermissions": ["basic_access", "view_user_profile"]}]},
    })
}

/// A dashboard user as read in the examples.
fn example_user() -> Value {
    json!({
        "schemas": [USER_URN, ENTERPRISE_URN],
        "id": EXAMPLE_USER,
        "externalId": "00u1abcd2EFGH3ijk4x7",
        "userName": "grace.hopper@example.com",
        "name": {"givenName": "Grace", "familyName": "Hopper"},
        "active": true,
        "department": "engineering",
        "createdAt": "Thursday, November 26, 2026 10:00:00 AM",
        "permissions": {"companyPermissions": [], "roles": [],
            "appGroup": [{"appGroupName": "Production", "appGroupPermissions": ["basic_access", "view_user_profile"]}]},
        "meta": {"resourceType": "User", "created": "2026-11-26T10:00:00.000Z", "lastModified": "2026-11-26T10:00:00.000Z",
            "location": format!("{EXAMPLE_BASE}/scim/v2/Users/{EXAMPLE_USER}"), "version": "W/\"1\""},
        ENTERPRISE_URN: {"department": "engineering"},
    })
}

fn found(op: Op, status: u16, description: &str) -> Op {
    op.reply_in(status, description, CONTENT_TYPE, refer("ScimUser"))
        .with_header("ETag", "The user's version.")
        .with_example("user", example_user())
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
    let page = json!({"schemas": [LIST_URN], "totalResults": 1, "itemsPerPage": 1, "startIndex": 1, "Resources": [example_user()]});
    bad(op).reply_in(200, "The users found.", CONTENT_TYPE, refer("ScimListResponse")).with_example("users", page)
}

/// A discovery answer, its example this server's own answer (under an example base URL).
fn discovery(op: Op, description: &str, example: crate::http::Response) -> Op {
    let body = example.json_body();
    op.reply_in(200, description, CONTENT_TYPE, crate::describe::schema::free_object("A SCIM resource."))
        .with_example("resource", body)
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
        Scim::SearchPost => listing(body(Op::new("As `GET /Users`, with the query in a SearchRequest body."), refer("ScimSearchRequest")).example(example_search())),
        Scim::SearchRoot => listing(body(Op::new("A search of every resource type: here, dashboard users."), refer("ScimSearchRequest")).example(example_search())),
        Scim::Create => {
            let created = found(body(Op::new("Creates a dashboard user."), refer("ScimUserWrite")).example(example_write("engineering")), 201, "Created.");
            taken(bad(created.with_header("Location", "The user's URL.")))
        }
        Scim::Get(_) => missing(
            found(selection(user_path(Op::new("Reads a dashboard user."))), 200, "The user.")
                .header("If-None-Match", false, "`*` or `ETag`s: a 304 when one names the current version.")
                .empty(304, "The copy named in `If-None-Match` is current (the `ETag` header, no body)."),
        ),
        Scim::Replace(_) => missing(taken(bad(if_match(found(body(user_path(Op::new("Replaces the writable attributes the body gives; `department`, `permissions`, `externalId`, `displayName` and `active` left out stay; read-only ones are ignored. A replacement that changes nothing keeps the version.")), refer("ScimUserWrite")).example(example_write("finance")), 200, "Replaced."))))),
        Scim::Patch(_) => missing(taken(bad(if_match(found(body(user_path(Op::new("Changes some attributes of a dashboard user (RFC 7644 §3.5.2).")), refer("ScimPatchOp")).example(json!({"schemas": [PATCH_URN], "Operations": [
            {"op": "replace", "path": "name.givenName", "value": "Amazing Grace"},
            {"op": "replace", "path": "active", "value": false}
        ]})), 200, "Changed."))))),
        Scim::Delete(_) => missing(if_match(user_path(Op::new("Permanently deletes a dashboard user.")).empty(204, "Deleted."))),
        Scim::ServiceProviderConfig => discovery(
            Op::new("What this server supports: PATCH, ETags and filtering yes; bulk, sorting, password changes no."),
            "The configuration (RFC 7643 §5).",
            discovery::service_provider_config(EXAMPLE_BASE),
        ),
        Scim::ResourceTypes => discovery(Op::new("The resource types: `User`."), "A ListResponse of resource types.", discovery::resource_types(EXAMPLE_BASE)),
        Scim::ResourceType(_) => missing(discovery(Op::new("One resource type.").path("id", "`User`."), "The resource type.", discovery::resource_type(EXAMPLE_BASE, "User").unwrap_or_else(ScimError::into_response))),
        Scim::Schemas => discovery(Op::new("The schemas: the core User schema as this server keeps it, and the enterprise extension's `department`."), "A ListResponse of schemas.", discovery::schemas(EXAMPLE_BASE, true)),
        Scim::Schema(_) => missing(discovery(Op::new("One schema.").path("id", "The schema's URN."), "The schema (RFC 7643 §7).", discovery::schema(EXAMPLE_BASE, USER_URN, true).unwrap_or_else(ScimError::into_response))),
        Scim::NotOffered(what) => {
            let detail = match what {
                NotOffered::Me => "`/Me` is not offered (RFC 7644 §3.11): a SCIM token is no user.",
                NotOffered::Bulk => "Bulk operations are not offered (`bulk.supported` is false).",
            };
            error(Op::new(detail), 501, "Not offered.", discovery::not_offered(*what))
        }
    };
    if endpoint.is_discovery() {
        op
    } else {
        op.limited(Bucket::Scim, "per company (shared by the SCIM user endpoints)")
    }
}
