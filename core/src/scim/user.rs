//! The dashboard user: what is stored, how a POST or PUT body becomes one (pure),
//! and how it is returned.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::attrs::{list, object, one_of, pick, required, text};
use super::error::{ScimError, ScimType};
use super::permissions::Permissions;
use super::protocol::{ENTERPRISE_URN, USERS_PATH, USER_URN};
use super::values::Department;
use crate::http::Response;
use crate::ids::Email;
use crate::time::Timestamp;

/// A dashboard user as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardUser {
    /// The resource id (made by Engage, never changes).
    pub id: String,
    /// The email address it signs in with, as given (unique case-insensitively).
    pub user_name: String,
    /// The identity provider's own id for the user, if it sent one.
    pub external_id: Option<String>,
    /// The name to show (RFC 7643 `displayName`), if the provider sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Given and family name.
    pub name: PersonName,
    /// Department.
    pub department: Department,
    /// Company, role, app-group and team permissions.
    pub permissions: Permissions,
    /// RFC 7643 `active`: false once an identity provider deactivated the user (it
    /// is kept, listed and found, and may not use the dashboard). Users stored
    /// before the attribute existed are active.
    #[serde(default = "active_by_default")]
    pub active: bool,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When the user last signed in to the dashboard; Engage has no dashboard, so
    /// this stays empty.
    pub last_sign_in_at: Option<Timestamp>,
    /// Incremented by every change: `meta.version` and the `ETag`.
    pub version: u64,
}

fn active_by_default() -> bool {
    true
}

/// A person's name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonName {
    /// `givenName`.
    pub given: String,
    /// `familyName`.
    pub family: String,
}

/// An optional attribute as a POST or PUT body gives it. A PUT that leaves one out
/// does not assert it and the stored value stays (RFC 7644 §3.5.1 lets the server
/// choose; Okta's PUT knows nothing of `permissions`); `null` unassigns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Given<T> {
    /// Not in the body.
    Omitted,
    /// `null`: unassigned.
    Unassigned,
    /// A value.
    Value(T),
}

impl<T: Clone> Given<T> {
    /// The value after a replacement: the given one, `unassigned` for `null`, or
    /// the stored one when left out.
    pub fn resolve(&self, stored: &T, unassigned: T) -> T {
        match self {
            Given::Omitted => stored.clone(),
            Given::Unassigned => unassigned,
            Given::Value(v) => v.clone(),
        }
    }

    /// As [`Given::resolve`], for an attribute that may be unassigned.
    pub fn resolve_option(&self, stored: &Option<T>) -> Option<T> {
        match self {
            Given::Omitted => stored.clone(),
            Given::Unassigned => None,
            Given::Value(v) => Some(v.clone()),
        }
    }
}

/// A checked POST or PUT body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInput {
    /// `userName`.
    pub user_name: String,
    /// `name`.
    pub name: PersonName,
    /// `department` (at the top level or in the enterprise extension); `None` when
    /// left out: a PUT keeps the stored one, a create takes the token's default.
    pub department: Option<Department>,
    /// `externalId`.
    pub external_id: Given<String>,
    /// `displayName`.
    pub display_name: Given<String>,
    /// `permissions`.
    pub permissions: Given<Permissions>,
    /// `active` (`null` reads as left out; a new user is active unless it says not).
    pub active: Given<bool>,
    /// `id`, if the body carries one (a PATCH may not change it; a PUT ignores it).
    pub id: Option<String>,
    /// `createdAt`, if the body carries one (as `id`).
    pub created_at: Option<String>,
}

/// Attributes of SCIM's core User schema that Engage does not keep: identity
/// providers send them (Okta `emails`, `displayName`, `password`...), so they are
/// accepted and dropped rather than refused. None is in the schema this server
/// publishes, which names only what it keeps, and none is ever read back.
pub const DROPPED: [&str; 18] = [
    "nickName",
    "profileUrl",
    "title",
    "userType",
    "preferredLanguage",
    "locale",
    "timezone",
    "password",
    "emails",
    "phoneNumbers",
    "ims",
    "photos",
    "addresses",
    "groups",
    "entitlements",
    "roles",
    "x509Certificates",
    // Not a core attribute, but Entra ID's documented requests send it at the top
    // level (`"manager": null`, a PATCH to path `manager`).
    "manager",
];

/// Sub-attributes of the core schema's `name` that Engage does not keep.
pub const DROPPED_NAME: [&str; 4] = ["formatted", "middleName", "honorificPrefix", "honorificSuffix"];

/// Attributes of the enterprise extension (RFC 7643 §4.3) other than `department`:
/// accepted and not kept (Entra ID maps `employeeNumber` and `manager` by default).
pub const ENTERPRISE_DROPPED: [&str; 5] = ["employeeNumber", "costCenter", "organization", "division", "manager"];

fn without(map: &Map<String, Value>, dropped: &[&str]) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !dropped.iter().any(|d| d.eq_ignore_ascii_case(k)) && !k.eq_ignore_ascii_case(ENTERPRISE_URN))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The `schemas` attribute: required, and naming the core User schema (and perhaps
/// the enterprise extension).
fn check_schemas(v: Option<&Value>) -> Result<(), ScimError> {
    let urns = list(Some(required(v, "schemas")?), "schemas", |v, p| {
        v.as_str().map(str::to_string).ok_or_else(|| ScimError::value(format!("'{p}' must be a string")))
    })?;
    if let Some(other) =
        urns.iter().find(|u| !u.eq_ignore_ascii_case(USER_URN) && !u.eq_ignore_ascii_case(ENTERPRISE_URN))
    {
        return Err(ScimError::value(format!("'schemas': '{other}' is not a schema of this resource; use {USER_URN}")));
    }
    if !urns.iter().any(|u| u.eq_ignore_ascii_case(USER_URN)) {
        return Err(ScimError::value(format!("'schemas' must include {USER_URN}")));
    }
    Ok(())
}

fn parse_name(v: &Value) -> Result<PersonName, ScimError> {
    let map = without(object(v, "name")?, &DROPPED_NAME);
    let [given, family] = pick(&map, ["givenName", "familyName"], "name")?;
    Ok(PersonName {
        given: text(required(given, "name.givenName")?, "name.givenName")?,
        family: text(required(family, "name.familyName")?, "name.familyName")?,
    })
}

/// `active`: a JSON boolean, or the strings `"True"` / `"False"` in any case (what
/// Entra ID sends without its compliance flag). Anything else is refused: reading
/// it as either value would answer 2xx for a change that was not asked for.
pub fn parse_active(v: &Value) -> Result<bool, ScimError> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        other => Err(ScimError::value(format!("'active' must be true or false, not {other}"))),
    }
}

fn department(v: &Value, path: &str) -> Result<Department, ScimError> {
    one_of(v, path, Department::parse, Department::listing)
}

/// The enterprise extension's `department`, if the body carries the extension.
fn enterprise_department(map: &Map<String, Value>) -> Result<Option<Department>, ScimError> {
    let Some(v) = map.iter().find(|(k, _)| k.eq_ignore_ascii_case(ENTERPRISE_URN)).map(|(_, v)| v) else {
        return Ok(None);
    };
    if v.is_null() {
        return Ok(None);
    }
    // A client may send the extension as a resource, with its own `schemas`.
    let ext = without(object(v, ENTERPRISE_URN)?, &[&ENTERPRISE_DROPPED[..], &["schemas"]].concat());
    let [dept] = pick(&ext, ["department"], ENTERPRISE_URN)?;
    dept.map(|v| department(v, &format!("{ENTERPRISE_URN}:department"))).transpose()
}

/// An optional attribute: its value, `null`, or left out.
fn given<T>(
    map: &Map<String, Value>,
    name: &str,
    v: Option<&Value>,
    parse: impl FnOnce(&Value) -> Result<T, ScimError>,
) -> Result<Given<T>, ScimError> {
    match v {
        Some(v) => Ok(Given::Value(parse(v)?)),
        None if map.keys().any(|k| k.eq_ignore_ascii_case(name)) => Ok(Given::Unassigned),
        None => Ok(Given::Omitted),
    }
}

/// Parses a POST or PUT body (pure).
pub fn parse(body: &[u8]) -> Result<UserInput, ScimError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ScimError::syntax(format!("the body is not valid JSON: {e}")))?;
    parse_value(&value)
}

/// Checks a whole resource given as JSON (a body, or a user a PATCH has changed).
pub fn parse_value(value: &Value) -> Result<UserInput, ScimError> {
    let map = value.as_object().ok_or_else(|| ScimError::syntax("the body must be a JSON object"))?;
    let extension = enterprise_department(map)?;
    let map = without(map, &DROPPED);
    let names = [
        "schemas",
        "id",
        "externalId",
        "displayName",
        "meta",
        "userName",
        "name",
        "department",
        "permissions",
        "active",
        "createdAt",
        "lastSignInAt",
    ];
    let [schemas, id, external_id, display_name, _meta, user_name, name, dept, permissions, active, created_at, _last_sign_in] =
        pick(&map, names, "")?;
    check_schemas(schemas)?;
    let user_name = text(required(user_name, "userName")?, "userName")?;
    if Email::parse(&user_name).is_none() {
        return Err(ScimError::value(format!("'userName' must be an email address, not '{user_name}'")));
    }
    // `department: null` reads as left out (Entra ID's documented create sends it).
    let top = dept.map(|v| department(v, "department")).transpose()?;
    let department = match (top, extension) {
        (Some(a), Some(b)) if a != b => {
            return Err(ScimError::value(format!(
                "'department' ({}) and the enterprise extension's department ({}) differ",
                a.as_str(),
                b.as_str()
            )))
        }
        (a, b) => a.or(b),
    };
    Ok(UserInput {
        user_name,
        name: parse_name(required(name, "name")?)?,
        department,
        external_id: given(&map, "externalId", external_id, |v| text(v, "externalId"))?,
        display_name: given(&map, "displayName", display_name, |v| text(v, "displayName"))?,
        permissions: given(&map, "permissions", permissions, |v| Permissions::parse(v, "permissions"))?,
        // `active: null` reads as left out: a user is always active or not, and
        // unassigning it must not quietly reactivate one.
        active: match given(&map, "active", active, parse_active)? {
            Given::Unassigned => Given::Omitted,
            given => given,
        },
        id: id.map(|v| text(v, "id")).transpose()?,
        created_at: created_at.map(|v| text(v, "createdAt")).transpose()?,
    })
}

impl UserInput {
    /// A PATCH may not change `id` or `createdAt` (400 `mutability`); a PUT ignores
    /// them, as RFC 7644 §3.5.1 says of read-only values.
    pub fn check_immutable(&self, stored: &DashboardUser) -> Result<(), ScimError> {
        if self.id.as_ref().is_some_and(|id| *id != stored.id) {
            return Err(ScimError::Bad(ScimType::Mutability, "'id' cannot be changed".into()));
        }
        if self.created_at.as_ref().is_some_and(|c| *c != stored.created_at.to_long_text()) {
            return Err(ScimError::Bad(ScimType::Mutability, "'createdAt' cannot be changed".into()));
        }
        Ok(())
    }

    /// The department of a new user: the body's, else the SCIM token's default.
    pub fn department_or(&self, default: Option<Department>) -> Result<Department, ScimError> {
        self.department.or(default).ok_or_else(|| {
            ScimError::value(
                "'department' is required (at the top level or in the enterprise extension); a SCIM token made \
                 with a default department supplies one",
            )
        })
    }

    /// The new user this body describes.
    pub fn new_user(&self, id: String, department: Department, now: Timestamp) -> DashboardUser {
        DashboardUser {
            id,
            user_name: self.user_name.clone(),
            external_id: self.external_id.resolve_option(&None),
            display_name: self.display_name.resolve_option(&None),
            name: self.name.clone(),
            department,
            permissions: self.permissions.resolve(&Permissions::default(), Permissions::default()),
            active: self.active.resolve(&true, true),
            created_at: now,
            updated_at: now,
            last_sign_in_at: None,
            version: 1,
        }
    }
}

/// The key of a user name in the name index: user names are unique regardless of case.
pub fn name_key(user_name: &str) -> String {
    user_name.to_lowercase()
}

impl DashboardUser {
    /// The attributes a client can write, as JSON: what a PATCH starts from.
    pub fn writable(&self) -> Value {
        let mut v = json!({
            "schemas": [USER_URN],
            "userName": self.user_name,
            "name": {"givenName": self.name.given, "familyName": self.name.family},
            "department": self.department.as_str(),
            "active": self.active,
        });
        self.optional(&mut v);
        v
    }

    /// The attributes that may be unassigned, only when they are assigned: a user
    /// without permissions has no `permissions` (RFC 7643 §2.5), as after a PATCH
    /// `remove`.
    fn optional(&self, v: &mut Value) {
        if let Some(x) = &self.external_id {
            v["externalId"] = json!(x);
        }
        if let Some(x) = &self.display_name {
            v["displayName"] = json!(x);
        }
        if !self.permissions.is_empty() {
            v["permissions"] = self.permissions.render();
        }
    }

    /// Takes a checked replacement. Only a real change makes a new version: a PUT
    /// or PATCH that changes nothing leaves `meta.version` and `lastModified` as
    /// they were. Returns whether anything changed.
    pub fn replace_with(&mut self, input: &UserInput, now: Timestamp) -> bool {
        let mut next = self.clone();
        next.user_name = input.user_name.clone();
        next.name = input.name.clone();
        next.department = input.department.unwrap_or(self.department);
        next.external_id = input.external_id.resolve_option(&self.external_id);
        next.display_name = input.display_name.resolve_option(&self.display_name);
        next.permissions = input.permissions.resolve(&self.permissions, Permissions::default());
        next.active = input.active.resolve(&self.active, true);
        if next == *self {
            return false;
        }
        next.updated_at = now.max(self.created_at);
        next.version += 1;
        *self = next;
        true
    }

    /// The version as an entity tag (weak: the representation may vary in form).
    pub fn etag(&self) -> String {
        format!("W/\"{}\"", self.version)
    }

    /// Whether an `If-Match` / `If-None-Match` value names this version: `*`, or a
    /// list of tags one of which is it, weak or strong (compared weakly).
    pub fn is_named_by(&self, header: &str) -> bool {
        let current = self.version.to_string();
        header
            .split(',')
            .map(str::trim)
            .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag).trim_matches('"') == current)
    }

    /// The resource as returned; `base` is the server's public address. The
    /// department is also in the enterprise extension, where Entra ID maps it.
    pub fn render(&self, base: &str) -> Value {
        let mut v = json!({
            "schemas": [USER_URN, ENTERPRISE_URN],
            "id": self.id,
            "userName": self.user_name,
            "name": {"givenName": self.name.given, "familyName": self.name.family},
            "active": self.active,
            "department": self.department.as_str(),
            "createdAt": self.created_at.to_long_text(),
            "meta": {
                "resourceType": "User",
                "created": self.created_at.to_rfc3339(),
                "lastModified": self.updated_at.to_rfc3339(),
                "location": format!("{base}{}/{}", USERS_PATH, self.id),
                "version": self.etag(),
            },
        });
        // Left out until there is a sign-in (the platform wrote the epoch).
        if let Some(at) = self.last_sign_in_at {
            v["lastSignInAt"] = json!(at.to_long_text());
        }
        self.optional(&mut v);
        v[ENTERPRISE_URN] = json!({"department": self.department.as_str()});
        v
    }
}

/// A response carrying one user: its JSON and its `ETag`.
pub fn found(status: u16, user: &DashboardUser, body: Value) -> Response {
    Response::json(status, &body).with_header("ETag", user.etag())
}
