//! Subscription groups: the set endpoints (`/subscription/status/set`, v1, and
//! `/v2/subscription/status/set`), the reads (`/subscription/user/status`,
//! `/subscription/status/get`), and the state machines they share with
//! `/users/track` and the email endpoints ([`state`]).
//!
//! Every handler parses the whole request first (a bad value anywhere is a 400 and
//! nothing is written), then applies it in one unit of work committed once. An
//! identifier that matches no user is not fatal: the rest is applied and the
//! response lists it in `errors` as `{"type": <message>, <field>: <value>}`.

pub mod address;
pub mod email;
pub mod fixtures;
pub mod groups;
pub mod lists;
pub mod read;
pub mod schema;
pub mod set;
pub mod state;

#[cfg(test)]
mod tests;

use serde_json::{json, Map, Value};

use self::groups::{Channel, Group};
use crate::error::ApiError;
use crate::ids::{Email, ExternalId, Identifier, Phone, WorkspaceName};
use crate::input;
use crate::profile::Profile;
use crate::store::{Store, StoreError};

/// Most identifiers (external ids, emails, phones) one request may name.
pub const MAX_IDS: usize = 50;

/// The platform's message when a request sends both emails and phones.
pub const EMAIL_AND_PHONE: &str = "Either an email address or a phone number should be provided, but not both.";
/// The platform's message for a missing or mistyped subscription group id.
pub const BAD_GROUP_ID: &str = "'subscription_group_id' must be a valid subscription group UUID";
/// The platform's message for a subscription group id no group has (recorded by
/// public clients' test suites, for both versions of the set and for status get).
pub const UNKNOWN_GROUP: &str = "Invalid subscription group ID";
/// The platform's message for a group state other than `subscribed` / `unsubscribed`.
pub const BAD_GROUP_STATE: &str =
    "'subscription_state' for a subscription group must be 'subscribed' or 'unsubscribed'";
/// The platform's message for more than 50 identifiers.
pub const TOO_MANY_IDS: &str = "The max number of ids per request was exceeded";

/// The `email` field: an address or an array of 1 to 50, each valid; duplicates
/// (after normalisation) count once.
pub(crate) fn email_addresses(b: &Map<String, Value>) -> Result<Vec<Email>, ApiError> {
    let v =
        field(b, "email").ok_or_else(|| ApiError::bad("'email' is required: an address or an array of up to 50"))?;
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for raw in json_strings(v, "email", true)? {
        let e = Email::parse(&raw)
            .ok_or_else(|| ApiError::bad("The value provided for the 'email' field is not a valid email."))?;
        if seen.insert(e.clone()) {
            out.push(e);
        }
    }
    Ok(out)
}

/// Parses a JSON object body.
pub(crate) fn body_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    input::object(body).map_err(ApiError::bad)
}

pub(crate) use crate::input::field;

/// The strings of an identifier field: a string (when `one_allowed`) or an array of
/// 1 to 50 strings.
pub(crate) fn json_strings(v: &Value, name: &str, one_allowed: bool) -> Result<Vec<String>, ApiError> {
    let wrong = || {
        let what = if one_allowed { "a string or an array of 1 to 50 strings" } else { "an array of 1 to 50 strings" };
        ApiError::bad(format!("'{name}' must be {what}"))
    };
    match v {
        Value::String(s) if one_allowed => Ok(vec![s.clone()]),
        Value::Array(items) if !items.is_empty() => {
            if items.len() > MAX_IDS {
                return Err(ApiError::bad(TOO_MANY_IDS));
            }
            items.iter().map(|i| i.as_str().map(str::to_string).ok_or_else(wrong)).collect()
        }
        _ => Err(wrong()),
    }
}

/// `use_double_opt_in_logic`: accepted as a boolean (there is no SMS double opt-in
/// workflow to enrol users in, so it changes nothing); any other type is a 400.
pub(crate) fn double_opt_in(body: &Map<String, Value>) -> Result<(), ApiError> {
    match field(body, "use_double_opt_in_logic") {
        None | Some(Value::Bool(_)) => Ok(()),
        Some(_) => Err(ApiError::bad("'use_double_opt_in_logic' must be a boolean")),
    }
}

/// One identifier as a request named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Named {
    /// The parsed identifier.
    pub ident: Identifier,
    /// The value as sent (keys of `/subscription/status/get`, `errors` entries).
    pub raw: String,
}

impl Named {
    /// The identifier's field name in responses.
    pub fn kind(&self) -> &'static str {
        match self.ident {
            Identifier::Email(_) => "email",
            Identifier::Phone(_) => "phone",
            _ => "external_id",
        }
    }

    /// The non-fatal error entry for an identifier that matches no user.
    pub fn not_found(&self) -> Value {
        json!({"type": format!("No user found with this {}", self.kind()), self.kind(): self.raw})
    }
}

/// The kinds of identifier the subscription endpoints take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    External,
    Email,
    Phone,
}

/// Parses identifier values of one kind; `name` is the field, for messages.
pub(crate) fn parse_named(values: Vec<String>, kind: Kind, name: &str) -> Result<Vec<Named>, ApiError> {
    if values.len() > MAX_IDS {
        return Err(ApiError::bad(TOO_MANY_IDS));
    }
    values
        .into_iter()
        .map(|raw| {
            let ident = match kind {
                Kind::External => ExternalId::parse(&raw).map(Identifier::External).ok_or_else(|| {
                    ApiError::bad(format!("The value provided for the '{name}' field is not a valid external id."))
                })?,
                Kind::Email => Email::parse(&raw).map(Identifier::Email).ok_or_else(|| {
                    ApiError::bad(format!("The value provided for the '{name}' field is not a valid email."))
                })?,
                Kind::Phone => Phone::parse(&raw).map(Identifier::Phone).ok_or_else(|| {
                    ApiError::bad(format!(
                        "The value provided for the '{name}' field is not a valid E.164 phone number."
                    ))
                })?,
            };
            Ok(Named { ident, raw })
        })
        .collect()
}

/// The group a request names: a missing, mistyped or unknown id is the platform's 400.
pub(crate) async fn group_of<S: Store>(store: &S, ws: &WorkspaceName, v: Option<&Value>) -> Result<Group, ApiError> {
    let id = v.and_then(Value::as_str).ok_or_else(|| ApiError::bad(BAD_GROUP_ID))?;
    groups::get(store, ws, id).await?.ok_or_else(|| ApiError::bad(UNKNOWN_GROUP))
}

/// Checks that a group's channel is addressed by this kind of identifier: email
/// groups by external id or email; SMS, RCS and WhatsApp groups by external id or
/// phone; LINE groups by external id only.
pub(crate) fn check_channel(group: &Group, kind: Kind, name: &str) -> Result<(), ApiError> {
    let ok = match kind {
        Kind::External => true,
        Kind::Email => group.channel == Channel::Email,
        Kind::Phone => matches!(group.channel, Channel::Sms | Channel::Rcs | Channel::Whatsapp),
    };
    if ok {
        return Ok(());
    }
    let takes = match group.channel {
        Channel::Email => "'external_id' or 'email'",
        Channel::Line => "'external_id' only",
        _ => "'external_id' or 'phone'",
    };
    Err(ApiError::bad(format!(
        "'{name}' cannot be used with the {} subscription group '{}': it takes {takes}",
        group.channel.as_str(),
        group.id
    )))
}

/// The listing of a user's groups (only those with a status in the user's history):
/// `id`, `name`, `channel` and the stored `status`; with `effective`, also
/// `effective_status` (the status after the global email state's mask).
pub async fn group_entries<S: Store>(
    store: &S,
    ws: &WorkspaceName,
    p: &Profile,
    effective: bool,
) -> Result<Vec<Value>, StoreError> {
    let mut out = Vec::with_capacity(p.groups.len());
    for gid in p.groups.keys() {
        let g = groups::get(store, ws, gid).await?;
        let channel = g.as_ref().map(|g| g.channel);
        let mut entry = json!({
            "id": gid,
            "name": g.as_ref().map(|g| g.name.clone()),
            "channel": channel.map(Channel::as_str),
            "status": state::stored(p, gid).as_str(),
        });
        if effective {
            entry["effective_status"] = json!(state::effective(p, gid, channel).as_str());
        }
        out.push(entry);
    }
    Ok(out)
}

/// Adds `errors` to a success body when there are any.
pub(crate) fn with_errors(mut body: Value, errors: Vec<Value>) -> Value {
    if !errors.is_empty() {
        body["errors"] = Value::Array(errors);
    }
    body
}
