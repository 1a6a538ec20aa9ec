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
    /// Given and family name.
    pub name: PersonName,
    /// Department.
    pub department: Department,
    /// Company, role, app-group and team permissions.
    pub permissions: Permissions,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last replaced.
    pub updated_at: Timestamp,
    /// When the user last signed in to the dashboard; Engage has no dashboard, so
    /// this stays empty.
    pub last_sign_in_at: Option<Timestamp>,
    /// Incremented by every write: `meta.version` and the `ETag`.
    pub version: u64,
}

/// A person's name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonName {
    /// `givenName`.
    pub given: String,
    /// `familyName`.
    pub family: String,
}

/// A checked POST or PUT body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInput {
    /// `userName`.
    pub user_name: String,
    /// `externalId`.
    pub external_id: Option<String>,
    /// `name`.
    pub name: PersonName,
    /// `department`.
    pub department: Department,
    /// `permissions` (none when left out).
    pub permissions: Permissions,
    /// `id`, if the body carries one (it must be the resource's own).
    pub id: Option<String>,
    /// `createdAt`, if the body carries one (it must be the stored one).
    pub created_at: Option<String>,
}

/// Attributes of SCIM's core User schema that Engage does not keep: identity
/// providers send them (Okta `active`, `emails`, `displayName`...), so they are
/// accepted and dropped rather than refused (`active: false` excepted: see
/// [`parse_value`]).
pub const DROPPED: [&str; 19] = [
    "displayName",
    "nickName",
    "profileUrl",
    "title",
    "userType",
    "preferredLanguage",
    "locale",
    "timezone",
    "active",
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
];

/// Sub-attributes of the core schema's `name` that Engage does not keep.
pub const DROPPED_NAME: [&str; 4] = ["formatted", "middleName", "honorificPrefix", "honorificSuffix"];

fn without(map: &Map<String, Value>, dropped: &[&str]) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !dropped.iter().any(|d| d.eq_ignore_ascii_case(k)) && !k.eq_ignore_ascii_case(ENTERPRISE_URN))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The `schemas` attribute: required, and naming the core User schema (the
/// enterprise extension is tolerated: its attributes are not kept).
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

/// Parses a POST or PUT body (pure).
pub fn parse(body: &[u8]) -> Result<UserInput, ScimError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ScimError::syntax(format!("the body is not valid JSON: {e}")))?;
    parse_value(&value)
}

/// Checks a whole resource given as JSON (a body, or a user a PATCH has changed).
pub fn parse_value(value: &Value) -> Result<UserInput, ScimError> {
    let map = value.as_object().ok_or_else(|| ScimError::syntax("the body must be a JSON object"))?;
    // An identity provider deactivates a user with `active: false` (Okta always,
    // Entra by default). Engage has no inactive dashboard users: refusing is safer
    // than answering 200 and leaving the user's access in place.
    if map.iter().any(|(k, v)| k.eq_ignore_ascii_case("active") && *v == Value::Bool(false)) {
        return Err(ScimError::value(
            "'active': false is not supported: there are no inactive dashboard users; DELETE the user to remove it",
        ));
    }
    let map = without(map, &DROPPED);
    let names = [
        "schemas",
        "id",
        "externalId",
        "meta",
        "userName",
        "name",
        "department",
        "permissions",
        "createdAt",
        "lastSignInAt",
    ];
    let [schemas, id, external_id, _meta, user_name, name, department, permissions, created_at, _last_sign_in] =
        pick(&map, names, "")?;
    check_schemas(schemas)?;
    let user_name = text(required(user_name, "userName")?, "userName")?;
    if Email::parse(&user_name).is_none() {
        return Err(ScimError::value(format!("'userName' must be an email address, not '{user_name}'")));
    }
    Ok(UserInput {
        user_name,
        external_id: external_id.map(|v| text(v, "externalId")).transpose()?,
        name: parse_name(required(name, "name")?)?,
        department: one_of(required(department, "department")?, "department", Department::parse, Department::listing)?,
        permissions: permissions.map(|v| Permissions::parse(v, "permissions")).transpose()?.unwrap_or_default(),
        id: id.map(|v| text(v, "id")).transpose()?,
        created_at: created_at.map(|v| text(v, "createdAt")).transpose()?,
    })
}

impl UserInput {
    /// Refuses a body whose `id` or `createdAt` differ from the stored user's: both
    /// are immutable (read-only attributes that match are accepted).
    pub fn check_immutable(&self, stored: &DashboardUser) -> Result<(), ScimError> {
        if self.id.as_ref().is_some_and(|id| *id != stored.id) {
            return Err(ScimError::Bad(ScimType::Mutability, "'id' cannot be changed".into()));
        }
        if self.created_at.as_ref().is_some_and(|c| *c != stored.created_at.to_long_text()) {
            return Err(ScimError::Bad(ScimType::Mutability, "'createdAt' cannot be changed".into()));
        }
        Ok(())
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
        if !self.permissions.is_empty() {
            v["permissions"] = self.permissions.render();
        }
    }

    /// Takes a checked replacement: every writable attribute, a new version.
    pub fn replace_with(&mut self, input: &UserInput, now: Timestamp) {
        self.user_name = input.user_name.clone();
        self.external_id = input.external_id.clone();
        self.name = input.name.clone();
        self.department = input.department;
        self.permissions = input.permissions.clone();
        self.updated_at = now.max(self.created_at);
        self.version += 1;
    }

    /// The version as an entity tag (weak: the representation may vary in form).
    pub fn etag(&self) -> String {
        format!("W/\"{}\"", self.version)
    }

    /// The resource as returned; `base` is the server's public address.
    pub fn render(&self, base: &str) -> Value {
        let mut v = json!({
            "schemas": [USER_URN],
            "id": self.id,
            "userName": self.user_name,
            "name": {"givenName": self.name.given, "familyName": self.name.family},
            "department": self.department.as_str(),
            // The platform writes a user who never signed in as the epoch.
            "lastSignInAt": self.last_sign_in_at.unwrap_or_default().to_long_text(),
            "createdAt": self.created_at.to_long_text(),
            "meta": {
                "resourceType": "User",
                "created": self.created_at.to_rfc3339(),
                "lastModified": self.updated_at.to_rfc3339(),
                "location": format!("{base}{}/{}", USERS_PATH, self.id),
                "version": self.etag(),
            },
        });
        self.optional(&mut v);
        v
    }
}

/// An attribute named by `attributes` / `excludedAttributes`: a top-level name and
/// perhaps one sub-attribute (both lower case: names ignore case).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selected {
    attr: String,
    sub: Option<String>,
}

/// Which attributes a response carries (`attributes` / `excludedAttributes`, RFC
/// 7644 §3.9). `schemas` and `id` are always returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Selection {
    /// Every attribute.
    #[default]
    All,
    /// Only these.
    Only(Vec<Selected>),
    /// All but these.
    Except(Vec<Selected>),
}

impl Selection {
    /// From the two parameters' values (comma-separated attribute paths).
    pub fn parse(attributes: Option<&str>, excluded: Option<&str>) -> Result<Selection, ScimError> {
        fn paths(text: &str) -> Vec<Selected> {
            text.split(',')
                .map(|p| {
                    // A path may carry its schema's URN.
                    let p = strip_urn(p.trim()).to_ascii_lowercase();
                    let (attr, sub) = match p.split_once('.') {
                        Some((a, s)) => (a.to_string(), Some(s.to_string())),
                        None => (p, None),
                    };
                    Selected { attr, sub }
                })
                .filter(|s| !s.attr.is_empty())
                .collect()
        }
        match (attributes.filter(|a| !a.trim().is_empty()), excluded.filter(|e| !e.trim().is_empty())) {
            (Some(_), Some(_)) => Err(ScimError::value("use 'attributes' or 'excludedAttributes', not both")),
            (Some(a), None) => Ok(Selection::Only(paths(a))),
            (None, Some(e)) => Ok(Selection::Except(paths(e))),
            (None, None) => Ok(Selection::All),
        }
    }

    /// Applies the selection to a rendered resource: a sub-attribute path keeps (or
    /// drops) only that part of its attribute.
    pub fn apply(&self, resource: Value) -> Value {
        let (Value::Object(map), Selection::Only(list) | Selection::Except(list)) = (&resource, self) else {
            return resource;
        };
        let only = matches!(self, Selection::Only(_));
        let mut out = Map::new();
        for (k, v) in map {
            let key = k.to_ascii_lowercase();
            let named: Vec<&Selected> = list.iter().filter(|s| s.attr == key).collect();
            let whole = named.iter().any(|s| s.sub.is_none());
            let subs: Vec<&str> = named.iter().filter_map(|s| s.sub.as_deref()).collect();
            let value = match (v, only) {
                _ if key == "schemas" || key == "id" => Some(v.clone()),
                (_, true) if whole => Some(v.clone()),
                (Value::Object(inner), true) if !subs.is_empty() => Some(Value::Object(
                    inner
                        .iter()
                        .filter(|(sk, _)| subs.contains(&sk.to_ascii_lowercase().as_str()))
                        .map(|(a, b)| (a.clone(), b.clone()))
                        .collect(),
                )),
                (_, true) => None,
                (_, false) if whole => None,
                (Value::Object(inner), false) => Some(Value::Object(
                    inner
                        .iter()
                        .filter(|(sk, _)| !subs.contains(&sk.to_ascii_lowercase().as_str()))
                        .map(|(a, b)| (a.clone(), b.clone()))
                        .collect(),
                )),
                (_, false) => Some(v.clone()),
            };
            if let Some(value) = value {
                out.insert(k.clone(), value);
            }
        }
        Value::Object(out)
    }
}

fn strip_urn(path: &str) -> &str {
    let n = USER_URN.len();
    match path.get(..n) {
        Some(prefix) if prefix.eq_ignore_ascii_case(USER_URN) && path[n..].starts_with(':') => &path[n + 1..],
        _ => path,
    }
}

/// A response carrying one user: its JSON and its `ETag`.
pub fn found(status: u16, user: &DashboardUser, body: Value) -> Response {
    Response::json(status, &body).with_header("ETag", user.etag())
}
