//! `/users/track` parsing: turns a request body into validated operations (a job),
//! the non-fatal `errors` list, and the processed counts. Applying a job is in
//! [`crate::track::apply`]; the asynchronous queue in [`crate::track::queue`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::dialect::{self, Dialect};
use crate::error::ApiError;
use crate::ids::{Email, ExternalId, Identifier, Phone, ServiceId, UserAlias, WorkspaceName};
use crate::input;
use crate::json::{Json, Object};
use crate::profile::custom::{self, CustomError, CustomOp};
use crate::profile::standard;
use crate::profile::states::{GlobalState, GroupState};
use crate::subscriptions::groups::Channel;
use crate::time::Timestamp;

/// Most objects of each kind in one request.
pub const MAX_OBJECTS: usize = 75;
/// Largest purchase price accepted (in magnitude).
pub const MAX_PRICE: f64 = 1e15;
/// Largest event or purchase `properties` object, serialized.
pub const MAX_PROPERTIES_BYTES: usize = 100 * 1024;

/// Which array of the request an object came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputArray {
    /// `attributes`
    Attributes,
    /// `events`
    Events,
    /// `purchases`
    Purchases,
}

impl InputArray {
    fn as_str(self) -> &'static str {
        match self {
            InputArray::Attributes => "attributes",
            InputArray::Events => "events",
            InputArray::Purchases => "purchases",
        }
    }
}

/// The user an object updates, and whether it may be created.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The identifier.
    pub ident: Identifier,
    /// Create the profile when no user matches.
    pub create: bool,
}

/// The channel of a group named in a request, before apply has looked the group up:
/// parsing never reads the store. Only operations whose groups were found (their
/// channel known) can be queued or applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotLookedUp;

/// One validated change of an attribute object; `C` is what is known of a
/// subscription group's channel ([`NotLookedUp`] after parsing, [`Channel`] once found).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttrUpdate<C = Channel> {
    /// Set or clear the email.
    Email(Option<Email>),
    /// Set or clear the phone.
    Phone(Option<Phone>),
    /// Set (or, with `null`, remove) a standard attribute.
    Standard(String, Value),
    /// Global email state; applied to every user sharing the email.
    EmailSubscribe(GlobalState),
    /// Global push state.
    PushSubscribe(GlobalState),
    /// A subscription-group state; applied to every user sharing the email (email
    /// groups) or phone (other channels).
    Group {
        /// The group's id.
        id: String,
        /// Its channel.
        channel: C,
        /// The state set.
        state: GroupState,
    },
    /// A custom attribute update.
    Custom(String, CustomOp),
}

/// An attribute update as parsed: ready, or a group change waiting for its group.
pub enum Lookup {
    /// Nothing to look up.
    Ready(AttrUpdate<Channel>),
    /// A change of this group, which apply looks up.
    Group {
        /// The group's id as sent.
        id: String,
        /// The state set.
        state: GroupState,
    },
}

impl AttrUpdate<NotLookedUp> {
    /// Separates the updates that need a group looked up from the rest.
    pub fn lookup(self) -> Lookup {
        Lookup::Ready(match self {
            AttrUpdate::Group { id, state, .. } => return Lookup::Group { id, state },
            AttrUpdate::Email(e) => AttrUpdate::Email(e),
            AttrUpdate::Phone(p) => AttrUpdate::Phone(p),
            AttrUpdate::Standard(k, v) => AttrUpdate::Standard(k, v),
            AttrUpdate::EmailSubscribe(s) => AttrUpdate::EmailSubscribe(s),
            AttrUpdate::PushSubscribe(s) => AttrUpdate::PushSubscribe(s),
            AttrUpdate::Custom(k, op) => AttrUpdate::Custom(k, op),
        })
    }
}

/// One validated object of a track request (`C`: see [`AttrUpdate`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrackOp<C = Channel> {
    /// An attribute object.
    Attributes { target: Target, merge_objects: bool, updates: Vec<AttrUpdate<C>> },
    /// One custom event occurrence.
    Event { target: Target, name: String, time: Timestamp },
    /// One purchase (of `quantity` items).
    Purchase { target: Target, product_id: String, price: f64, quantity: u64, time: Timestamp },
}

impl<C> TrackOp<C> {
    /// The user the operation updates.
    pub fn target(&self) -> &Target {
        match self {
            TrackOp::Attributes { target, .. } | TrackOp::Event { target, .. } | TrackOp::Purchase { target, .. } => {
                target
            }
        }
    }
}

/// A queued unit of work: one accepted request's operations, in request order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrackJob {
    /// Workspace of the API key.
    pub workspace: WorkspaceName,
    /// When the request was accepted (profile timestamps use it).
    pub at: Timestamp,
    /// Operations.
    pub ops: Vec<TrackOp>,
    /// How this job, one partition's part of a request spanning several, waits on
    /// the others ([`super::barrier`]); none for most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier: Option<super::barrier::Barrier>,
}

/// The outcome of parsing a request body (`C`: see [`AttrUpdate`]).
#[derive(Debug)]
pub struct Parsed<C = NotLookedUp> {
    /// Valid operations, attributes first, then events, then purchases, each with
    /// the index of its object in its array (for errors found later).
    pub ops: Vec<(usize, TrackOp<C>)>,
    /// Non-fatal errors in the platform's shape.
    pub errors: Vec<Value>,
    /// Processed counts of each array that was sent.
    pub processed: BTreeMap<&'static str, usize>,
}

impl<C> Parsed<C> {
    /// The success body: `message`, the processed counts and any `errors`.
    pub fn success_body(&self) -> Value {
        let mut body = Map::new();
        body.insert("message".into(), json!("success"));
        for (k, n) in &self.processed {
            body.insert(format!("{k}_processed"), json!(n));
        }
        if !self.errors.is_empty() {
            body.insert("errors".into(), Value::Array(self.errors.clone()));
        }
        Value::Object(body)
    }
}

pub(crate) fn object_error(array: InputArray, index: usize, message: impl Into<String>) -> Value {
    json!({"type": message.into(), "input_array": array.as_str(), "index": index})
}

/// The message used when no object in the request could be processed.
pub const NOTHING_VALID: &str = "Valid data must be provided in the 'attributes', 'events', or 'purchases' fields.";

/// The fatal error of a request in which no object could be processed.
pub fn nothing_valid(errors: &[Value]) -> ApiError {
    fatal(NOTHING_VALID, errors.to_vec())
}

/// Parses the JSON body into an object, or the fatal error. Its strings borrow from
/// `body` ([`Json`]): a full batch is read field by field and dropped.
pub fn body_object(body: &[u8]) -> Result<Object<'_>, ApiError> {
    input::borrowed_object(body).map_err(|m| fatal(m, vec![]))
}

/// A fatal track error: `message` plus `errors` holding it (and any details).
pub fn fatal(message: impl Into<String>, mut errors: Vec<Value>) -> ApiError {
    let message = message.into();
    if errors.is_empty() {
        errors.push(json!({"type": message}));
    }
    ApiError::Fatal { message, errors }
}

/// The three arrays of a request, checked for type and size.
pub fn arrays<'b, 'a>(body: &'b Object<'a>, max: usize) -> Result<Vec<(InputArray, &'b Vec<Json<'a>>)>, ApiError> {
    let mut out = Vec::new();
    for (name, kind) in
        [("attributes", InputArray::Attributes), ("events", InputArray::Events), ("purchases", InputArray::Purchases)]
    {
        match body.get(name) {
            None | Some(Json::Null) => {}
            Some(Json::Array(items)) => {
                if items.len() > max {
                    return Err(fatal(
                        format!(
                            "Max Input Length Exceeded: '{name}' holds {} objects; at most {max} are allowed",
                            items.len()
                        ),
                        vec![],
                    ));
                }
                out.push((kind, items));
            }
            Some(_) => return Err(fatal(format!("'{name}' must be an array of objects"), vec![])),
        }
    }
    if out.is_empty() {
        return Err(fatal(NOTHING_VALID, vec![]));
    }
    Ok(out)
}

/// Parses and validates a whole track body (already split into arrays). Pure: the
/// subscription groups it names are looked up by apply.
pub fn parse(arrays: &[(InputArray, &Vec<Json<'_>>)], now: Timestamp, dialect: Dialect) -> Parsed {
    let mut parsed = Parsed { ops: Vec::new(), errors: Vec::new(), processed: BTreeMap::new() };
    let mut nested_invalid: Option<String> = None;
    for (kind, items) in arrays {
        let mut accepted = 0;
        for (index, item) in items.iter().enumerate() {
            let result = match item.as_object() {
                None => Err("each object must be a JSON object".to_string()),
                Some(obj) => match kind {
                    InputArray::Attributes => {
                        parse_attributes(obj, *kind, index, &mut parsed.errors, &mut nested_invalid, dialect)
                    }
                    InputArray::Events => parse_event(obj, now, dialect),
                    InputArray::Purchases => parse_purchase(obj, now, dialect),
                },
            };
            match result {
                Ok(op) => {
                    accepted += 1;
                    parsed.ops.push((index, op));
                }
                Err(message) => parsed.errors.push(object_error(*kind, index, message)),
            }
        }
        parsed.processed.insert(kind.as_str(), accepted);
    }
    if let Some(why) = nested_invalid {
        // Rule 2: one invalid nested value excludes every nested update of the request.
        for (_, op) in &mut parsed.ops {
            if let TrackOp::Attributes { updates, .. } = op {
                updates.retain(|u| !matches!(u, AttrUpdate::Custom(_, c) if c.is_nested()));
            }
        }
        parsed.errors.push(json!({
            "type": format!("{why}; all nested custom attribute updates of this request were skipped"),
            "input_array": "attributes",
        }));
    }
    parsed
}

/// Finds the identifier of an object: exactly one of `external_id`, `user_alias`,
/// `service_id` (or `braze_id`), else `email`, else `phone`.
fn identifier(obj: &Object<'_>, kind: InputArray, dialect: Dialect) -> Result<Identifier, String> {
    let primary: Vec<&str> =
        ["external_id", "user_alias", "service_id", "braze_id"].into_iter().filter(|k| obj.contains_key(k)).collect();
    let required = "one of 'external_id', 'user_alias', 'service_id', 'email' or 'phone' is required";
    if primary.len() > 1 {
        return Err(format!(
            "only one of 'external_id', 'user_alias', 'service_id' may be given, found {}",
            primary.join(", ")
        ));
    }
    if primary.len() == 1 && kind != InputArray::Attributes && (obj.contains_key("email") || obj.contains_key("phone"))
    {
        return Err(format!(
            "exactly one kind of identifier is allowed: {} and email/phone were both given",
            primary[0]
        ));
    }
    match primary.first() {
        Some(&"external_id") => {
            let x = obj.get("external_id").map_or(Err("'external_id' must be a string".into()), |v| {
                dialect::id_text(v, "external_id", dialect)
            })?;
            let x = ExternalId::parse(&x).ok_or("'external_id' must be 1 to 987 bytes without control characters")?;
            if x.is_blocked() {
                return Err("provided external_id is blacklisted and disallowed".into());
            }
            Ok(Identifier::External(x))
        }
        Some(&"user_alias") => obj
            .get("user_alias")
            .and_then(|a| UserAlias::from_json(&a.to_value()))
            .map(Identifier::Alias)
            .ok_or_else(|| "'user_alias' must be an object with string 'alias_name' and 'alias_label'".into()),
        Some(k) => obj
            .get(k)
            .and_then(Json::as_str)
            .and_then(ServiceId::parse)
            .map(Identifier::Service)
            .ok_or_else(|| format!("'{k}' must be a non-empty string")),
        None => match (obj.get("email"), obj.get("phone")) {
            (Some(e), _) if !e.is_null() => e
                .as_str()
                .and_then(Email::parse)
                .map(Identifier::Email)
                .ok_or_else(|| "The value provided for the 'email' field is not a valid email.".into()),
            (_, Some(p)) if !p.is_null() => p
                .as_str()
                .and_then(Phone::parse)
                .map(Identifier::Phone)
                .ok_or_else(|| "The value provided for the 'phone' field is not a valid E.164 phone number.".into()),
            _ => Err(required.into()),
        },
    }
}

fn update_existing_only(obj: &Object<'_>) -> Result<Option<bool>, String> {
    match obj.get("_update_existing_only") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err("'_update_existing_only' must be a boolean".into()),
    }
}

/// Whether a missing user is created: aliases only when `_update_existing_only` is
/// explicitly false, internal ids never, the rest unless it is true.
fn target(obj: &Object<'_>, kind: InputArray, dialect: Dialect) -> Result<Target, String> {
    let ident = identifier(obj, kind, dialect)?;
    let flag = update_existing_only(obj)?;
    let create = match ident {
        Identifier::Alias(_) => flag == Some(false),
        Identifier::Service(_) => false,
        _ => flag != Some(true),
    };
    Ok(Target { ident, create })
}

fn parse_attributes(
    obj: &Object<'_>,
    kind: InputArray,
    index: usize,
    errors: &mut Vec<Value>,
    nested_invalid: &mut Option<String>,
    dialect: Dialect,
) -> Result<TrackOp<NotLookedUp>, String> {
    let target = target(obj, kind, dialect)?;
    let merge_objects = match obj.get("_merge_objects") {
        None | Some(Json::Null) => false,
        Some(Json::Bool(b)) => *b,
        Some(_) => return Err("'_merge_objects' must be a boolean".into()),
    };
    let mut updates = Vec::new();
    let mut field_error = |message: String| errors.push(object_error(kind, index, message));
    for (key, value) in obj.iter() {
        if standard::RESERVED.contains(&key) {
            continue;
        }
        match key {
            "email" => match value {
                Json::Null => updates.push(AttrUpdate::Email(None)),
                v => match v.as_str().and_then(Email::parse) {
                    Some(e) => updates.push(AttrUpdate::Email(Some(e))),
                    None => field_error("The value provided for the 'email' field is not a valid email.".into()),
                },
            },
            "phone" => match value {
                Json::Null => updates.push(AttrUpdate::Phone(None)),
                v => match v.as_str().and_then(Phone::parse) {
                    Some(p) => updates.push(AttrUpdate::Phone(Some(p))),
                    None => field_error(
                        "The value provided for the 'phone' field is not a valid E.164 phone number.".into(),
                    ),
                },
            },
            "email_subscribe" | "push_subscribe" => match value.as_str().and_then(GlobalState::parse) {
                Some(s) if key == "email_subscribe" => updates.push(AttrUpdate::EmailSubscribe(s)),
                Some(s) => updates.push(AttrUpdate::PushSubscribe(s)),
                None => field_error(format!("'{key}' must be 'subscribed', 'unsubscribed', or 'opted_in'")),
            },
            "subscription_groups" => {
                let Some(items) = value.as_array() else {
                    field_error("'subscription_groups' must be an array of objects".into());
                    continue;
                };
                for item in items {
                    let id = item.get("subscription_group_id").and_then(Json::as_str);
                    let state = item.get("subscription_state").and_then(Json::as_str);
                    let (Some(id), Some(state_text)) = (id, state) else {
                        field_error(
                            "'subscription_groups' entries need 'subscription_group_id' and 'subscription_state'"
                                .into(),
                        );
                        continue;
                    };
                    let Some(state) = GroupState::parse(state_text) else {
                        field_error("'subscription_state' must be 'subscribed' or 'unsubscribed'".into());
                        continue;
                    };
                    updates.push(AttrUpdate::Group { id: id.to_string(), channel: NotLookedUp, state });
                }
            }
            _ => {
                // Owned once, for both the standard and the custom attribute rules.
                let value = value.to_value();
                match standard::parse(key, &value) {
                    Some(Ok(v)) => updates.push(AttrUpdate::Standard(key.to_string(), v)),
                    Some(Err(why)) => field_error(why),
                    None => match custom::parse(key, &value, merge_objects) {
                        Ok(op) => updates.push(AttrUpdate::Custom(key.to_string(), op)),
                        Err(CustomError::Invalid(why)) => field_error(why),
                        Err(CustomError::InvalidNested(why)) => {
                            nested_invalid.get_or_insert(why);
                        }
                    },
                }
            }
        }
    }
    Ok(TrackOp::Attributes { target, merge_objects, updates })
}

fn time_field(obj: &Object<'_>, now: Timestamp, dialect: Dialect) -> Result<Timestamp, String> {
    let t = obj.get("time").and_then(Json::as_str).ok_or("'time' is required: an ISO 8601 time with an offset or Z")?;
    let t = dialect::time(t, "time", dialect)?;
    // The platform records future times as the current time.
    Ok(t.min(now))
}

fn check_properties(obj: &Object<'_>) -> Result<(), String> {
    match obj.get("properties") {
        None | Some(Json::Null) => Ok(()),
        Some(Json::Object(p)) => {
            for k in p.keys() {
                if k.is_empty() || k.chars().count() > 255 || k.starts_with('$') {
                    return Err("'properties' keys must be 1 to 255 characters and not start with '$'".into());
                }
                if k == "time" || k == "event_name" {
                    return Err(format!("'properties' may not use the reserved key '{k}'"));
                }
            }
            if custom::encoded_len(p) > MAX_PROPERTIES_BYTES {
                return Err("'properties' exceeds 100 KB".into());
            }
            Ok(())
        }
        Some(_) => Err("'properties' must be an object".into()),
    }
}

fn check_app_id(obj: &Object<'_>) -> Result<(), String> {
    match obj.get("app_id") {
        None | Some(Json::Null) | Some(Json::Str(_)) => Ok(()),
        Some(_) => Err("'app_id' must be a string".into()),
    }
}

fn name_field(obj: &Object<'_>, key: &str) -> Result<String, String> {
    match obj.get(key).and_then(Json::as_str) {
        Some(n) if !n.is_empty() && n.chars().count() <= 255 => Ok(n.to_string()),
        _ => Err(format!("'{key}' is required: a string of 1 to 255 characters")),
    }
}

/// A purchase's `product_id`: a name, or (the platform's reading) a whole number
/// as its decimal text.
fn product_id(obj: &Object<'_>, dialect: Dialect) -> Result<String, String> {
    match obj.get("product_id") {
        Some(v @ Json::Number(_)) => dialect::id_text(v, "product_id", dialect).map(|t| t.into_owned()),
        _ => name_field(obj, "product_id"),
    }
}

fn parse_event(obj: &Object<'_>, now: Timestamp, dialect: Dialect) -> Result<TrackOp<NotLookedUp>, String> {
    let target = target(obj, InputArray::Events, dialect)?;
    let name = name_field(obj, "name")?;
    let time = time_field(obj, now, dialect)?;
    check_app_id(obj)?;
    check_properties(obj)?;
    Ok(TrackOp::Event { target, name, time })
}

fn parse_purchase(obj: &Object<'_>, now: Timestamp, dialect: Dialect) -> Result<TrackOp<NotLookedUp>, String> {
    let target = target(obj, InputArray::Purchases, dialect)?;
    let product_id = product_id(obj, dialect)?;
    match obj.get("currency").and_then(Json::as_str) {
        Some(c) if c.len() == 3 && c.bytes().all(|b| b.is_ascii_alphabetic()) => {}
        _ => return Err("'currency' is required: an ISO 4217 three-letter code".into()),
    }
    let price = obj
        .get("price")
        .and_then(Json::as_f64)
        .filter(|p| p.is_finite() && p.abs() <= MAX_PRICE)
        .ok_or("'price' is required: a number of at most 1e15 in magnitude")?;
    let quantity = match obj.get("quantity") {
        None | Some(Json::Null) => 1,
        Some(q) => q.as_u64().filter(|q| (1..=100).contains(q)).ok_or("'quantity' must be an integer from 1 to 100")?,
    };
    let time = time_field(obj, now, dialect)?;
    check_app_id(obj)?;
    check_properties(obj)?;
    Ok(TrackOp::Purchase { target, product_id, price, quantity, time })
}
