//! A dashboard user's `permissions` object: company permissions, roles (with the
//! app groups and permission sets they grant) and app groups (with their teams).
//! Engage keeps no catalogue of roles, app groups, permission sets or teams: each
//! is named by its id, its name or both, and is stored and returned as given; the
//! permission strings are checked against the platform's lists.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::attrs::{join, list, object, one_of, pick, text};
use super::error::ScimError;
use super::values::{CompanyPermission, TeamPermission, WorkspacePermission};

/// Something named by an id, a name, or both: at least one is always there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Named {
    /// Only an id.
    Id(String),
    /// Only a name.
    Name(String),
    /// Both.
    Both {
        /// The id.
        id: String,
        /// The name.
        name: String,
    },
}

impl Named {
    fn parse(id: Option<&Value>, name: Option<&Value>, keys: (&str, &str), path: &str) -> Result<Named, ScimError> {
        let id = id.map(|v| text(v, &join(path, keys.0))).transpose()?;
        let name = name.map(|v| text(v, &join(path, keys.1))).transpose()?;
        match (id, name) {
            (Some(id), Some(name)) => Ok(Named::Both { id, name }),
            (Some(id), None) => Ok(Named::Id(id)),
            (None, Some(name)) => Ok(Named::Name(name)),
            (None, None) => Err(ScimError::value(format!("'{path}' needs '{}' or '{}'", keys.0, keys.1))),
        }
    }

    fn render(&self, out: &mut Map<String, Value>, keys: (&str, &str)) {
        let (id, name) = match self {
            Named::Id(id) => (Some(id), None),
            Named::Name(name) => (None, Some(name)),
            Named::Both { id, name } => (Some(id), Some(name)),
        };
        if let Some(id) = id {
            out.insert(keys.0.into(), json!(id));
        }
        if let Some(name) = name {
            out.insert(keys.1.into(), json!(name));
        }
    }
}

/// A workspace permission set: a named bundle of workspace permissions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionSet {
    /// Which set.
    pub named: Named,
    /// What it grants.
    pub permissions: Vec<WorkspacePermission>,
}

/// An app group (workspace) as a role grants it: through permission sets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleAppGroup {
    /// Which app group.
    pub named: Named,
    /// The permission sets granted in it.
    pub permission_sets: Vec<PermissionSet>,
}

/// A role assigned to the user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    /// Which role.
    pub named: Named,
    /// The app groups it grants.
    pub app_groups: Vec<RoleAppGroup>,
}

/// A team of an app group, with the user's permissions in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    /// Which team.
    pub named: Named,
    /// The user's permissions in the team.
    pub permissions: Vec<TeamPermission>,
}

/// An app group (workspace) with the user's permissions in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppGroup {
    /// Which app group.
    pub named: Named,
    /// The user's permissions in it.
    pub permissions: Vec<WorkspacePermission>,
    /// A permission set assigned instead of (or beside) single permissions; the
    /// platform allows one.
    pub permission_sets: Vec<PermissionSet>,
    /// Teams in it.
    pub teams: Vec<Team>,
}

/// The whole `permissions` object. Absent means none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permissions {
    /// Company-level permissions.
    pub company: Vec<CompanyPermission>,
    /// Roles.
    pub roles: Vec<Role>,
    /// App groups.
    pub app_groups: Vec<AppGroup>,
}

const ROLE_KEYS: (&str, &str) = ("roleId", "roleName");
const APP_GROUP_KEYS: (&str, &str) = ("appGroupId", "appGroupName");
const SET_KEYS: (&str, &str) = ("appGroupPermissionSetId", "appGroupPermissionSetName");
const TEAM_KEYS: (&str, &str) = ("teamId", "teamName");

/// Most permission sets in one app group: the platform takes a single one.
const MAX_SETS_PER_APP_GROUP: usize = 1;

impl Permissions {
    /// Parses the `permissions` attribute.
    pub fn parse(v: &Value, path: &str) -> Result<Permissions, ScimError> {
        let [company, roles, app_groups] = pick(object(v, path)?, ["companyPermissions", "roles", "appGroup"], path)?;
        Ok(Permissions {
            company: list(company, &join(path, "companyPermissions"), |v, p| {
                one_of(v, p, CompanyPermission::parse, CompanyPermission::listing)
            })?,
            roles: list(roles, &join(path, "roles"), parse_role)?,
            app_groups: list(app_groups, &join(path, "appGroup"), parse_app_group)?,
        })
    }

    /// True when the user has no permission of any kind.
    pub fn is_empty(&self) -> bool {
        self.company.is_empty() && self.roles.is_empty() && self.app_groups.is_empty()
    }

    /// The attribute as returned: the three lists always; the nested ones (teams,
    /// permission sets, a role's app groups) only when they hold something.
    pub fn render(&self) -> Value {
        let company: Vec<&str> = self.company.iter().map(|p| p.as_str()).collect();
        let roles: Vec<Value> = self.roles.iter().map(render_role).collect();
        let app_groups: Vec<Value> = self.app_groups.iter().map(render_app_group).collect();
        json!({"companyPermissions": company, "roles": roles, "appGroup": app_groups})
    }
}

fn workspace_permissions(v: Option<&Value>, path: &str) -> Result<Vec<WorkspacePermission>, ScimError> {
    list(v, path, |v, p| one_of(v, p, WorkspacePermission::parse, WorkspacePermission::listing))
}

fn parse_set(v: &Value, path: &str) -> Result<PermissionSet, ScimError> {
    // Names match case-insensitively, so the platform appendix's spelling
    // `appGroupPermissionSetID` reads as the spec's `appGroupPermissionSetId`.
    let [id, name, permissions] = pick(object(v, path)?, [SET_KEYS.0, SET_KEYS.1, "permissions"], path)?;
    Ok(PermissionSet {
        named: Named::parse(id, name, SET_KEYS, path)?,
        permissions: workspace_permissions(permissions, &join(path, "permissions"))?,
    })
}

fn parse_sets(v: Option<&Value>, path: &str, most: Option<usize>) -> Result<Vec<PermissionSet>, ScimError> {
    let sets = list(v, path, parse_set)?;
    match most {
        Some(most) if sets.len() > most => {
            Err(ScimError::value(format!("'{path}' takes at most {most} permission set")))
        }
        _ => Ok(sets),
    }
}

fn parse_role(v: &Value, path: &str) -> Result<Role, ScimError> {
    let [id, name, app_groups] = pick(object(v, path)?, [ROLE_KEYS.0, ROLE_KEYS.1, "appGroup"], path)?;
    Ok(Role {
        named: Named::parse(id, name, ROLE_KEYS, path)?,
        app_groups: list(app_groups, &join(path, "appGroup"), |v, p| {
            let [id, name, sets] =
                pick(object(v, p)?, [APP_GROUP_KEYS.0, APP_GROUP_KEYS.1, "appGroupPermissionSets"], p)?;
            Ok(RoleAppGroup {
                named: Named::parse(id, name, APP_GROUP_KEYS, p)?,
                permission_sets: parse_sets(sets, &join(p, "appGroupPermissionSets"), None)?,
            })
        })?,
    })
}

fn parse_team(v: &Value, path: &str) -> Result<Team, ScimError> {
    let [id, name, permissions] = pick(object(v, path)?, [TEAM_KEYS.0, TEAM_KEYS.1, "teamPermissions"], path)?;
    Ok(Team {
        named: Named::parse(id, name, TEAM_KEYS, path)?,
        permissions: list(permissions, &join(path, "teamPermissions"), |v, p| {
            one_of(v, p, TeamPermission::parse, TeamPermission::listing)
        })?,
    })
}

fn parse_app_group(v: &Value, path: &str) -> Result<AppGroup, ScimError> {
    let keys = [APP_GROUP_KEYS.0, APP_GROUP_KEYS.1, "appGroupPermissions", "appGroupPermissionSets", "team"];
    let [id, name, permissions, sets, teams] = pick(object(v, path)?, keys, path)?;
    Ok(AppGroup {
        named: Named::parse(id, name, APP_GROUP_KEYS, path)?,
        permissions: workspace_permissions(permissions, &join(path, "appGroupPermissions"))?,
        permission_sets: parse_sets(sets, &join(path, "appGroupPermissionSets"), Some(MAX_SETS_PER_APP_GROUP))?,
        teams: list(teams, &join(path, "team"), parse_team)?,
    })
}

fn render_set(s: &PermissionSet) -> Value {
    let mut m = Map::new();
    s.named.render(&mut m, SET_KEYS);
    let permissions: Vec<&str> = s.permissions.iter().map(|p| p.as_str()).collect();
    m.insert("permissions".into(), json!(permissions));
    Value::Object(m)
}

fn render_role(r: &Role) -> Value {
    let mut m = Map::new();
    r.named.render(&mut m, ROLE_KEYS);
    let groups: Vec<Value> = r
        .app_groups
        .iter()
        .map(|g| {
            let mut gm = Map::new();
            g.named.render(&mut gm, APP_GROUP_KEYS);
            gm.insert("appGroupPermissionSets".into(), g.permission_sets.iter().map(render_set).collect());
            Value::Object(gm)
        })
        .collect();
    // Left out when empty: /Schemas cannot describe it (it nests too deep), and
    // strict clients refuse what is not described.
    if !groups.is_empty() {
        m.insert("appGroup".into(), json!(groups));
    }
    Value::Object(m)
}

fn render_app_group(g: &AppGroup) -> Value {
    let mut m = Map::new();
    g.named.render(&mut m, APP_GROUP_KEYS);
    let permissions: Vec<&str> = g.permissions.iter().map(|p| p.as_str()).collect();
    m.insert("appGroupPermissions".into(), json!(permissions));
    if !g.permission_sets.is_empty() {
        m.insert("appGroupPermissionSets".into(), g.permission_sets.iter().map(render_set).collect());
    }
    let teams: Vec<Value> = g
        .teams
        .iter()
        .map(|t| {
            let mut tm = Map::new();
            t.named.render(&mut tm, TEAM_KEYS);
            let permissions: Vec<&str> = t.permissions.iter().map(|p| p.as_str()).collect();
            tm.insert("teamPermissions".into(), json!(permissions));
            Value::Object(tm)
        })
        .collect();
    if !teams.is_empty() {
        m.insert("team".into(), json!(teams));
    }
    Value::Object(m)
}
