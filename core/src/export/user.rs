//! One exported user, written straight from the stored profile.
//!
//! Building a [`Value`] per user first (a B-tree map of owned strings, the custom
//! attributes cloned) and then serializing and dropping it was about a third of an
//! export's instructions (callgrind, 50 users a request). The bytes are the same:
//! members in key order, as a [`serde_json::Map`] writes them, the last of two
//! members of one name kept, as its `insert` does.

use std::collections::BTreeMap;

use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::profile::{Profile, Summary};
use crate::time::Timestamp;

/// A user as `/users/export/ids` answers it; `only` restricts the fields, and
/// `groups` are the subscription-group entries when they are exported.
pub struct ExportUser<'a> {
    pub profile: &'a Profile,
    pub only: Option<&'a [String]>,
    pub groups: Option<Vec<Value>>,
}

/// A member's value, borrowed from the profile where it can be.
enum Field<'a> {
    Str(&'a str),
    Time(Timestamp),
    Json(&'a Value),
    Aliases(&'a BTreeMap<String, String>),
    Custom(&'a Map<String, Value>),
    Summaries(&'a BTreeMap<String, Summary>),
    Number(f64),
    Bool(bool),
    List(&'a [Value]),
}

impl ExportUser<'_> {
    /// Whether field `f` is exported.
    pub fn wants(&self, f: &str) -> bool {
        self.only.is_none_or(|o| o.iter().any(|x| x == f || (f == "service_id" && x == "braze_id")))
    }

    /// The members, in the order the export adds them.
    fn fields(&self) -> Vec<(&str, Field<'_>)> {
        let p = self.profile;
        let mut out = Vec::with_capacity(16 + p.standard.len());
        let mut add = |wanted: bool, key, value| {
            if wanted {
                out.push((key, value));
            }
        };
        add(self.wants("created_at"), "created_at", Field::Time(p.created_at));
        add(self.wants("updated_at"), "updated_at", Field::Time(p.updated_at));
        add(self.wants("service_id"), "service_id", Field::Str(p.id.as_str()));
        if let Some(x) = &p.external_id {
            add(self.wants("external_id"), "external_id", Field::Str(x.as_str()));
        }
        add(self.wants("user_aliases") && !p.aliases.is_empty(), "user_aliases", Field::Aliases(&p.aliases));
        if let Some(e) = &p.email {
            add(self.wants("email"), "email", Field::Str(e.as_str()));
        }
        if let Some(ph) = &p.phone {
            add(self.wants("phone"), "phone", Field::Str(ph.as_str()));
        }
        let all_standard = self.wants("standard_attributes");
        for (k, v) in &p.standard {
            add(all_standard || self.wants(k), k.as_str(), Field::Json(v));
        }
        add(self.wants("custom_attributes") && !p.custom.is_empty(), "custom_attributes", Field::Custom(&p.custom));
        add(self.wants("custom_events") && !p.events.is_empty(), "custom_events", Field::Summaries(&p.events));
        add(self.wants("purchases") && !p.purchases.is_empty(), "purchases", Field::Summaries(&p.purchases));
        add(self.wants("total_revenue") && !p.purchases.is_empty(), "total_revenue", Field::Number(p.total_revenue));
        if let Some(s) = p.email_subscribe {
            add(self.wants("email_subscribe"), "email_subscribe", Field::Str(s.as_str()));
        }
        if let Some(s) = p.push_subscribe {
            add(self.wants("push_subscribe"), "push_subscribe", Field::Str(s.as_str()));
        }
        add(self.wants("email_hard_bounced"), "email_hard_bounced", Field::Bool(p.email_hard_bounced));
        if let Some(groups) = &self.groups {
            add(true, "subscription_groups", Field::List(groups));
        }
        out
    }
}

impl Serialize for ExportUser<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut fields = self.fields();
        // Stable: of two members with one name, the one added last stays last.
        fields.sort_by(|a, b| a.0.cmp(b.0));
        let mut map = serializer.serialize_map(None)?;
        for (i, (key, value)) in fields.iter().enumerate() {
            if fields.get(i + 1).is_some_and(|next| next.0 == *key) {
                continue;
            }
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Str(s) => serializer.serialize_str(s),
            Field::Time(t) => serializer.serialize_str(&t.to_rfc3339()),
            Field::Json(v) => v.serialize(serializer),
            Field::Aliases(aliases) => {
                let mut seq = serializer.serialize_seq(Some(aliases.len()))?;
                for (label, name) in aliases.iter() {
                    seq.serialize_element(&Alias { alias_label: label, alias_name: name })?;
                }
                seq.end()
            }
            Field::Custom(custom) => custom.serialize(serializer),
            Field::Summaries(summaries) => {
                let mut seq = serializer.serialize_seq(Some(summaries.len()))?;
                for (name, summary) in summaries.iter() {
                    seq.serialize_element(&Named::new(name, summary))?;
                }
                seq.end()
            }
            // As a `Value` holds it: not finite is `null`.
            Field::Number(n) if n.is_finite() => serializer.serialize_f64(*n),
            Field::Number(_) => serializer.serialize_unit(),
            Field::Bool(b) => serializer.serialize_bool(*b),
            Field::List(items) => items.serialize(serializer),
        }
    }
}

/// `{"alias_label": .., "alias_name": ..}`: fields declared in key order, as a
/// map writes them.
#[derive(Serialize)]
struct Alias<'a> {
    alias_label: &'a str,
    alias_name: &'a str,
}

/// An event or purchase summary: fields declared in key order.
#[derive(Serialize)]
struct Named<'a> {
    count: u64,
    first: String,
    last: String,
    name: &'a str,
}

impl<'a> Named<'a> {
    fn new(name: &'a str, summary: &Summary) -> Self {
        Named { count: summary.count, first: summary.first.to_rfc3339(), last: summary.last.to_rfc3339(), name }
    }
}
