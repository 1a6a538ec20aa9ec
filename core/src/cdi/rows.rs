//! A source row, and what it asks for (pure): a `/users/track` object built from
//! its identifier columns and its `PAYLOAD` (the platform's CDI table layout), or
//! the identifier of a user to delete. A row that cannot be read says why.

use std::borrow::Cow;

use serde_json::json;

use super::integration::DataKind;
use crate::ids::{ExternalId, Identifier, ServiceId, UserAlias};
use crate::json::{Json, Object};
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

/// What a row asks for; a track object borrows the row's text (a `Value` of each
/// row's payload, built, converted and dropped, was 2.9% of a sync's instructions).
#[derive(Clone, Debug, PartialEq)]
pub enum Work<'a> {
    /// A track object for this array.
    Track(InputArray, Object<'a>),
    /// Delete the user this identifier names.
    Delete(Identifier),
}

/// Keys a `PAYLOAD` may not carry: the primary identifiers come from their
/// columns (an `email` or `phone` in an attributes payload is an attribute, as in
/// `/users/track`).
const IDENTIFIER_KEYS: [&str; 4] = ["external_id", "user_alias", "braze_id", "service_id"];

/// A column's text as a JSON string.
fn text(v: &str) -> Json<'_> {
    Json::Str(Cow::Borrowed(v))
}

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

    /// The identifier columns as a track object's members.
    fn identifiers(&self) -> Result<Vec<(Cow<'_, str>, Json<'_>)>, String> {
        let mut m = Vec::new();
        if let Some(x) = present(&self.external_id) {
            m.push(("external_id".into(), text(x)));
        }
        match (present(&self.alias_name), present(&self.alias_label)) {
            (Some(n), Some(l)) => {
                let alias = vec![("alias_name".into(), text(n)), ("alias_label".into(), text(l))];
                m.push(("user_alias".into(), Json::Object(Object::from_members(alias))));
            }
            (None, None) => {}
            _ => return Err("ALIAS_NAME and ALIAS_LABEL must be given together".into()),
        }
        if let Some(b) = present(&self.braze_id) {
            m.push(("braze_id".into(), text(b)));
        }
        if let Some(e) = present(&self.email) {
            m.push(("email".into(), text(e)));
        }
        if let Some(p) = present(&self.phone) {
            m.push(("phone".into(), text(p)));
        }
        if m.is_empty() {
            return Err(
                "the row has no identifier (EXTERNAL_ID, ALIAS_NAME and ALIAS_LABEL, BRAZE_ID, EMAIL or PHONE)".into(),
            );
        }
        Ok(m)
    }

    /// What the row asks for, or why it cannot be synced.
    pub fn work(&self, kind: DataKind) -> Result<Work<'_>, String> {
        let mut members = self.identifiers()?;
        let array = match kind {
            DataKind::Deletes => return self.delete_target().map(Work::Delete),
            DataKind::Users => InputArray::Attributes,
            DataKind::Events => InputArray::Events,
            DataKind::Purchases => InputArray::Purchases,
        };
        let text = present(&self.payload).ok_or("PAYLOAD is empty")?;
        let payload = Json::parse(text.as_bytes()).map_err(|e| format!("PAYLOAD is not valid JSON: {e}"))?;
        let Json::Object(payload) = payload else { return Err("PAYLOAD must be a JSON object".into()) };
        if let Some(k) = payload.keys().find(|k| IDENTIFIER_KEYS.contains(k)) {
            return Err(format!("PAYLOAD must not carry identifiers ('{k}'): they come from the identifier columns"));
        }
        // An event or purchase without a time happened at the row's UPDATED_AT.
        let untimed = matches!(kind, DataKind::Events | DataKind::Purchases) && !payload.contains_key("time");
        // The payload's members after the columns': an `email` or `phone` in it wins.
        members.extend(payload.into_members());
        if untimed {
            members.push(("time".into(), Json::Str(Cow::Owned(self.updated_at.to_rfc3339()))));
        }
        Ok(Work::Track(array, Object::from_members(members)))
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
        let r = row(r#"{"color":"red"}"#);
        let Ok(Work::Track(InputArray::Attributes, obj)) = r.work(DataKind::Users) else { panic!() };
        assert_eq!(Json::Object(obj).to_value(), json!({"external_id": "u1", "color": "red"}));
    }

    #[test]
    fn an_event_without_time_happened_at_updated_at() {
        let r = row(r#"{"name":"e"}"#);
        let Ok(Work::Track(InputArray::Events, obj)) = r.work(DataKind::Events) else { panic!() };
        assert_eq!(obj.get("time").map(Json::to_value), Some(json!("2023-11-14T22:13:20.000Z")));
    }

    #[test]
    fn the_payload_wins_over_a_column_and_keeps_its_own_time() {
        let r = Row {
            email: Some("col@example.com".into()),
            ..row(r#"{"email":"pay@example.com","time":"t","a":1,"a":2}"#)
        };
        let Ok(Work::Track(_, obj)) = r.work(DataKind::Events) else { panic!() };
        let want = json!({"external_id": "u1", "email": "pay@example.com", "time": "t", "a": 2});
        assert_eq!(Json::Object(obj).to_value(), want);
        let r = Row { alias_name: Some("n".into()), alias_label: Some("l".into()), ..row("{}") };
        let Ok(Work::Track(_, obj)) = r.work(DataKind::Users) else { panic!() };
        let want = json!({"external_id": "u1", "user_alias": {"alias_name": "n", "alias_label": "l"}});
        assert_eq!(Json::Object(obj).to_value(), want);
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
