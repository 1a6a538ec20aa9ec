//! Permissions: one per endpoint family, named as the platform names them. Its own
//! module because both the error model (403 names the missing permission) and the
//! key records use it.

use serde::{Deserialize, Serialize};

macro_rules! permissions {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// A permission an API key may carry; one per endpoint family (the spec's table).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Permission {
            $(
                #[doc = $name]
                #[serde(rename = $name)]
                $variant,
            )*
        }

        impl Permission {
            /// Every permission, for "all".
            pub const ALL: &'static [Permission] = &[$(Permission::$variant),*];

            /// The permission's name as the platform writes it.
            pub fn as_str(self) -> &'static str {
                match self { $(Permission::$variant => $name),* }
            }

            /// Parses a permission name.
            pub fn parse(name: &str) -> Option<Permission> {
                match name { $($name => Some(Permission::$variant),)* _ => None }
            }
        }
    };
}

permissions! {
    UsersTrack => "users.track",
    UsersTrackSync => "users.track.sync",
    UsersIdentify => "users.identify",
    UsersMerge => "users.merge",
    UsersDelete => "users.delete",
    UsersAliasNew => "users.alias.new",
    UsersAliasUpdate => "users.alias.update",
    UsersExportIds => "users.export.ids",
    UsersExternalIdsRename => "users.external_ids.rename",
    UsersExternalIdsRemove => "users.external_ids.remove",
    SubscriptionStatusSet => "subscription.status.set",
    SubscriptionGroupsGet => "subscription.groups.get",
    SubscriptionStatusGet => "subscription.status.get",
    EmailStatus => "email.status",
    EmailBlacklist => "email.blacklist",
    EmailHardBounces => "email.hard_bounces",
    EmailUnsubscribe => "email.unsubscribe",
    EmailBounceRemove => "email.bounce.remove",
    EmailSpamRemove => "email.spam.remove",
    SmsInvalidPhoneNumbers => "sms.invalid_phone_numbers",
    SmsInvalidPhoneNumbersRemove => "sms.invalid_phone_numbers.remove",
    PreferenceCenterUpdate => "preference_center.update",
    PreferenceCenterList => "preference_center.list",
    PreferenceCenterGet => "preference_center.get",
    PreferenceCenterUserGet => "preference_center.user.get",
    CdiIntegrationList => "cdi.integration_list",
    CdiIntegrationJobStatus => "cdi.integration_job_status",
    Scim => "scim",
}

/// Parses a comma-separated permission list, or `all`.
pub fn parse_permission_list(text: &str) -> Result<Vec<Permission>, String> {
    if text.trim() == "all" {
        return Ok(Permission::ALL.to_vec());
    }
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match Permission::parse(name) {
            Some(p) if !out.contains(&p) => out.push(p),
            Some(_) => {}
            None => return Err(format!("unknown permission '{name}'")),
        }
    }
    if out.is_empty() {
        return Err("no permissions given".into());
    }
    Ok(out)
}

/// Permissions as JSON gives them: absent or `null` (all), `"all"` or a
/// comma-separated string, or an array of names.
pub fn parse_permission_value(v: Option<&serde_json::Value>) -> Result<Vec<Permission>, String> {
    use serde_json::Value;
    match v {
        None | Some(Value::Null) => parse_permission_list("all"),
        Some(Value::String(s)) => parse_permission_list(s),
        Some(Value::Array(items)) => {
            let names: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            names
                .ok_or_else(|| "permissions must be strings".to_string())
                .and_then(|n| parse_permission_list(&n.join(",")))
        }
        Some(_) => Err("'permissions' must be \"all\" or an array of strings".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_names_round_trip() {
        for p in Permission::ALL {
            assert_eq!(Permission::parse(p.as_str()), Some(*p));
        }
        assert_eq!(parse_permission_list("users.track, users.export.ids").unwrap().len(), 2);
        assert!(parse_permission_list("users.fly").is_err());
        assert_eq!(parse_permission_list("all").unwrap().len(), Permission::ALL.len());
    }
}
