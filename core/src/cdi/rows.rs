//! A source row, and what it asks for (pure): a `/users/track` object built from
//! its identifier columns and its `PAYLOAD` (the platform's CDI table layout), or
//! the identifier of a user to delete. A row that cannot be read says why.

use serde_json::{json, Map, Value};

use super::integration::DataKind;
use crate::ids::{ExternalId, Identifier, ServiceId, UserAlias};
use crate::time::Timestamp;
use crate::track::parse::InputArray;

/// One row of a warehouse table, as a source reads it. Column names are the
/// platform's: `UPDATED_AT`, `EXTERNAL_ID`, `ALIAS_NAME`, `ALIAS_LABEL`, `BRAZE_ID`,
/// `EMAIL`, `PHONE`, `PAYLOAD` (identifier columns a table lacks read as null).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// `UPDATED_AT` in milliseconds (the cursor's unit).
    pub updated_at: Timestamp,
    /// `UPDATED_AT` as the source holds it where that is finer than a millisecond
    /// (PostgreSQL's microseconds): rows of one millisecond keep the source's order.
    pub exact: Option<String>,
    /// `EXTERNAL_ID`.
    pub external_id: Option<String>,
    /// `ALIAS_NAME`.
    pub alias_name: Option<String>,
    /// `ALIAS_LABEL`.
    pub alias_label: Option<String>,
    /// `BRAZE_ID`.
    pub braze_id: Option<String>,
    /// `EMAIL`.
    pub email: Option<String>,
    /// `PHONE`.
    pub phone: Option<String>,
    /// `PAYLOAD`: JSON text.
    pub payload: Option<String>,
}

/// What a row asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// A track object for this array.
    Track(InputArray, Map<String, Value>),
    /// Delete the user this identifier names.
    Delete(Identifier),
}

/// Keys a `PAYLOAD` may not carry: the primary identifiers come from their
/// columns (an `email` or `phone` in an attributes payload is an attribute, as in
/// `/users/track`).
const IDENTIFIER_KEYS: [&str; 4] = ["external_id", "user_alias", "braze_id", "service_id"];

fn present(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl Row {
    /// A row from its `UPDATED_AT` (milliseconds, and as the source holds it) and
    /// its seven other columns in the platform's order: `EXTERNAL_ID`,
    /// `ALIAS_NAME`, `ALIAS_LABEL`, `BRAZE_ID`, `EMAIL`, `PHONE`, `PAYLOAD`.
    pub fn from_columns(updated_at: Timestamp, exact: Option<String>, columns: [Option<String>; 7]) -> Row {
        let [external_id, alias_name, alias_label, braze_id, email, phone, payload] = columns;
        Row { updated_at, exact, external_id, alias_name, alias_label, braze_id, email, phone, payload }
    }

    /// The row's identifier for people (in a kept row error).
    pub fn describe(&self) -> Option<String> {
        if let Some(x) = present(&self.external_id) {
            return Some(format!("external_id {x}"));
        }
        if let (Some(n), Some(l)) = (present(&self.alias_name), present(&self.alias_label)) {
            return Some(format!("alias {n} ({l})"));
        }
        present(&self.braze_id)
            .map(|b| format!("braze_id {b}"))
            .or_else(|| present(&self.email).map(|e| format!("email {e}")))
            .or_else(|| present(&self.phone).map(|p| format!("phone {p}")))
    }

    /// The identifier columns as a track object's keys.
    fn identifiers(&self) -> Result<Map<String, Value>, String> {
        let mut m = Map::new();
        if let Some(x) = present(&self.external_id) {
            m.insert("external_id".into(), json!(x));
        }
        match (present(&self.alias_name), present(&self.alias_label)) {
            (Some(n), Some(l)) => {
                m.insert("user_alias".into(), json!({"alias_name": n, "alias_label": l}));
            }
            (None, None) => {}
            _ => return Err("ALIAS_NAME and ALIAS_LABEL must be given together".into()),
        }
        if let Some(b) = present(&self.braze_id) {
            m.insert("braze_id".into(), json!(b));
        }
        if let Some(e) = present(&self.email) {
            m.insert("email".into(), json!(e));
        }
        if let Some(p) = present(&self.phone) {
            m.insert("phone".into(), json!(p));
        }
        if m.is_empty() {
            return Err(
                "the row has no identifier (EXTERNAL_ID, ALIAS_NAME and ALIAS_LABEL, BRAZE_ID, EMAIL or PHONE)".into(),
            );
        }
        Ok(m)
    }

    /// What the row asks for, or why it cannot be synced.
    pub fn work(&self, kind: DataKind) -> Result<Work, String> {
        let mut object = self.identifiers()?;
        let array = match kind {
            DataKind::Deletes => return self.delete_target().map(Work::Delete),
            DataKind::Users => InputArray::Attributes,
            DataKind::Events => InputArray::Events,
            DataKind::Purchases => InputArray::Purchases,
        };
        let text = present(&self.payload).ok_or("PAYLOAD is empty")?;
        let payload: Value = serde_json::from_str(text).map_err(|e| format!("PAYLOAD is not valid JSON: {e}"))?;
        let Value::Object(payload) = payload else { return Err("PAYLOAD must be a JSON object".into()) };
        if let Some(k) = payload.keys().find(|k| IDENTIFIER_KEYS.contains(&k.as_str())) {
            return Err(format!("PAYLOAD must not carry identifiers ('{k}'): they come from the identifier columns"));
        }
        let timed = matches!(kind, DataKind::Events | DataKind::Purchases);
        object.extend(payload);
        // An event or purchase without a time happened at the row's UPDATED_AT.
        if timed && !object.contains_key("time") {
            object.insert("time".into(), json!(self.updated_at.to_rfc3339()));
        }
        Ok(Work::Track(array, object))
    }

    /// A delete row: exactly one of EXTERNAL_ID, the alias, BRAZE_ID (the platform
    /// deletes by no other identifier).
    fn delete_target(&self) -> Result<Identifier, String> {
        let mut found = Vec::new();
        if let Some(x) = present(&self.external_id) {
            found.push(Identifier::External(ExternalId::parse(x).ok_or("EXTERNAL_ID is not a valid external id")?));
        }
        if let (Some(n), Some(l)) = (present(&self.alias_name), present(&self.alias_label)) {
            let alias =
                UserAlias::from_json(&json!({"alias_name": n, "alias_label": l})).ok_or("the alias is not valid")?;
            found.push(Identifier::Alias(alias));
        }
        if let Some(b) = present(&self.braze_id) {
            found.push(Identifier::Service(ServiceId::parse(b).ok_or("BRAZE_ID is not a valid id")?));
        }
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err("a delete row needs EXTERNAL_ID, ALIAS_NAME and ALIAS_LABEL, or BRAZE_ID".into()),
            _ => Err("a delete row must carry exactly one identifier".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(payload: &str) -> Row {
        Row {
            updated_at: Timestamp(1_700_000_000_000),
            external_id: Some("u1".into()),
            payload: Some(payload.into()),
            ..Row::default()
        }
    }

    #[test]
    fn a_users_row_is_an_attributes_object() {
        let Ok(Work::Track(InputArray::Attributes, obj)) = row(r#"{"color":"red"}"#).work(DataKind::Users) else {
            panic!()
        };
        assert_eq!(Value::Object(obj), json!({"external_id": "u1", "color": "red"}));
    }

    #[test]
    fn an_event_without_time_happened_at_updated_at() {
        let Ok(Work::Track(InputArray::Events, obj)) = row(r#"{"name":"e"}"#).work(DataKind::Events) else { panic!() };
        assert_eq!(obj["time"], json!("2023-11-14T22:13:20.000Z"));
    }

    #[test]
    fn broken_rows_say_why() {
        assert!(row("{").work(DataKind::Users).unwrap_err().contains("not valid JSON"));
        assert!(row("[]").work(DataKind::Users).unwrap_err().contains("object"));
        assert!(row(r#"{"external_id":"x"}"#).work(DataKind::Users).unwrap_err().contains("identifiers"));
        assert!(row("").work(DataKind::Users).unwrap_err().contains("empty"));
        let nobody = Row { external_id: None, ..row("{}") };
        assert!(nobody.work(DataKind::Users).unwrap_err().contains("no identifier"));
        let half_alias = Row { alias_name: Some("a".into()), ..row("{}") };
        assert!(half_alias.work(DataKind::Users).unwrap_err().contains("together"));
        let two = Row { braze_id: Some("b".into()), payload: None, ..row("") };
        assert!(two.work(DataKind::Deletes).unwrap_err().contains("exactly one"));
    }
}
