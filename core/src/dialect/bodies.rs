//! The lenient forms of the JSON bodies other than `/users/track`'s, rewritten into
//! the reference's before the family reads the body (or, under `--strict`,
//! refused with what the reference expects).

use serde_json::{Map, Value};

use super::{number_text, refusal, Dialect, Form};
use crate::error::ApiError;
use crate::routes::Api;

/// A body's rewrite in progress.
struct Rewrite {
    dialect: Dialect,
    changed: bool,
}

impl Rewrite {
    /// Accepts `form` at `field` (noting the change), or refuses it under `--strict`.
    fn accept(&mut self, field: &str, form: Form) -> Result<(), ApiError> {
        if self.dialect == Dialect::Strict {
            return Err(ApiError::bad(refusal(field, form)));
        }
        self.changed = true;
        Ok(())
    }

    /// An identifier given as a number becomes its decimal text.
    fn id(&mut self, v: &mut Value, field: &str) -> Result<(), ApiError> {
        if let Value::Number(n) = v {
            let text = number_text(n).map_err(|why| ApiError::bad(format!("'{field}' {why}")))?;
            self.accept(field, Form::NumberAsId)?;
            *v = Value::String(text);
        }
        Ok(())
    }

    /// A member of `obj` that is an identifier.
    fn id_in(&mut self, obj: &mut Map<String, Value>, key: &str, at: &str) -> Result<(), ApiError> {
        match obj.get_mut(key) {
            Some(v) => self.id(v, &format!("{at}{key}")),
            None => Ok(()),
        }
    }

    /// A member of `obj` that is an array of identifiers: numbers in it become
    /// their text; with `one_allowed`, one string (or number) becomes an array of
    /// it (the subscription endpoints, whose platform examples send one).
    fn ids_in(&mut self, obj: &mut Map<String, Value>, key: &str, at: &str, one_allowed: bool) -> Result<(), ApiError> {
        let field = format!("{at}{key}");
        let Some(v) = obj.get_mut(key) else { return Ok(()) };
        if one_allowed && matches!(v, Value::String(_) | Value::Number(_)) {
            self.accept(&field, Form::SingleForArray)?;
            *v = Value::Array(vec![v.take()]);
        }
        if let Value::Array(items) = v {
            for (i, item) in items.iter_mut().enumerate() {
                self.id(item, &format!("{field}[{i}]"))?;
            }
        }
        Ok(())
    }

    /// Renames `from` to `to` in `obj` (when only `from` is there).
    fn rename(&mut self, obj: &mut Map<String, Value>, from: &str, to: &str, at: &str) -> Result<(), ApiError> {
        if obj.contains_key(from) && !obj.contains_key(to) {
            self.accept(&format!("{at}{from}"), Form::SingularField)?;
            if let Some(v) = obj.remove(from) {
                obj.insert(to.to_string(), v);
            }
        }
        Ok(())
    }
}

/// The objects of an array member of `obj`, with their paths.
fn each<'a>(obj: &'a mut Map<String, Value>, key: &str) -> Vec<(String, &'a mut Map<String, Value>)> {
    match obj.get_mut(key) {
        Some(Value::Array(items)) => items
            .iter_mut()
            .enumerate()
            .filter_map(|(i, v)| v.as_object_mut().map(|o| (format!("{key}[{i}]."), o)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The body of a request to `api` with the platform's lenient forms rewritten into
/// the reference's (`None`: nothing to rewrite, or not a JSON object, which the
/// family refuses in its own words); under `--strict`, a lenient form is a 400
/// saying what the reference expects.
pub fn normalize(api: &Api, body: &[u8], dialect: Dialect) -> Result<Option<Vec<u8>>, ApiError> {
    if !has_lenient_forms(api) || body.is_empty() {
        return Ok(None);
    }
    let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(body) else { return Ok(None) };
    let mut r = Rewrite { dialect, changed: false };
    match api {
        Api::ExportIds => r.ids_in(&mut obj, "external_ids", "", false)?,
        Api::Delete => r.ids_in(&mut obj, "external_ids", "", false)?,
        Api::Identify => {
            for key in ["aliases_to_identify", "emails_to_identify", "phone_numbers_to_identify"] {
                for (at, entry) in each(&mut obj, key) {
                    r.id_in(entry, "external_id", &at)?;
                }
            }
        }
        Api::Merge => {
            for (at, update) in each(&mut obj, "merge_updates") {
                for side in ["identifier_to_merge", "identifier_to_keep"] {
                    if let Some(Value::Object(ident)) = update.get_mut(side) {
                        r.id_in(ident, "external_id", &format!("{at}{side}."))?;
                    }
                }
            }
        }
        Api::AliasNew => {
            for (at, entry) in each(&mut obj, "user_aliases") {
                let nested = matches!(entry.get("user_alias"), Some(Value::Object(_)))
                    && !entry.contains_key("alias_name")
                    && !entry.contains_key("alias_label");
                if nested {
                    r.accept(&format!("{at}user_alias"), Form::NestedUserAlias)?;
                    if let Some(Value::Object(alias)) = entry.remove("user_alias") {
                        for key in ["alias_name", "alias_label"] {
                            if let Some(v) = alias.get(key) {
                                entry.insert(key.to_string(), v.clone());
                            }
                        }
                    }
                }
                r.id_in(entry, "external_id", &at)?;
            }
        }
        Api::SubscriptionSetV1 => r.ids_in(&mut obj, "external_id", "", true)?,
        Api::ExternalIdsRename => {
            for (at, entry) in each(&mut obj, "external_id_renames") {
                r.id_in(entry, "current_external_id", &at)?;
                r.id_in(entry, "new_external_id", &at)?;
            }
        }
        Api::ExternalIdsRemove => r.ids_in(&mut obj, "external_ids", "", false)?,
        Api::SubscriptionSetV2 => {
            for (at, entry) in each(&mut obj, "subscription_groups") {
                r.rename(entry, "external_id", "external_ids", &at)?;
                r.rename(entry, "email", "emails", &at)?;
                r.rename(entry, "phone", "phones", &at)?;
                r.ids_in(entry, "external_ids", &at, true)?;
            }
        }
        _ => {}
    }
    Ok(r.changed.then(|| Value::Object(obj).to_string().into_bytes()))
}

/// Whether `api`'s body has forms [`normalize`] rewrites (the others are not parsed
/// twice).
fn has_lenient_forms(api: &Api) -> bool {
    matches!(
        api,
        Api::ExportIds
            | Api::Delete
            | Api::Identify
            | Api::Merge
            | Api::AliasNew
            | Api::SubscriptionSetV1
            | Api::SubscriptionSetV2
            | Api::ExternalIdsRename
            | Api::ExternalIdsRemove
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn platform(api: Api, body: Value) -> Value {
        let out = normalize(&api, body.to_string().as_bytes(), Dialect::Platform).unwrap();
        out.map_or(body, |b| serde_json::from_slice(&b).unwrap())
    }

    fn strict(api: Api, body: Value) -> String {
        match normalize(&api, body.to_string().as_bytes(), Dialect::Strict) {
            Err(e) => e.message(),
            Ok(_) => String::new(),
        }
    }

    #[test]
    fn numbers_as_ids_read_as_their_text_and_strict_refuses_them() {
        assert_eq!(
            platform(Api::Delete, json!({"external_ids": [400, "401"]})),
            json!({"external_ids": ["400", "401"]})
        );
        assert_eq!(platform(Api::ExportIds, json!({"external_ids": [12345]})), json!({"external_ids": ["12345"]}));
        let identify =
            json!({"aliases_to_identify": [{"external_id": 7, "user_alias": {"alias_name": "a", "alias_label": "l"}}]});
        assert_eq!(platform(Api::Identify, identify.clone())["aliases_to_identify"][0]["external_id"], "7");
        let merge = json!({"merge_updates": [{"identifier_to_merge": {"external_id": 1}, "identifier_to_keep": {"external_id": 2}}]});
        assert_eq!(platform(Api::Merge, merge.clone())["merge_updates"][0]["identifier_to_keep"]["external_id"], "2");
        assert!(strict(Api::Identify, identify).starts_with("'aliases_to_identify[0].external_id' must be a string"));
        assert!(strict(Api::Merge, merge)
            .starts_with("'merge_updates[0].identifier_to_merge.external_id' must be a string"));
        let too_big =
            normalize(&Api::Delete, br#"{"external_ids": [9007199254740993]}"#, Dialect::Platform).unwrap_err();
        assert!(too_big.message().contains("2^53"), "{}", too_big.message());
        let float = normalize(&Api::Delete, br#"{"external_ids": [1.5]}"#, Dialect::Platform).unwrap_err();
        assert!(float.message().contains("whole number"));
        // One id where an array belongs is not read as one here.
        assert_eq!(normalize(&Api::Delete, br#"{"external_ids": "a"}"#, Dialect::Platform), Ok(None));
        // The reference's forms pass untouched under both.
        assert_eq!(normalize(&Api::Delete, br#"{"external_ids": ["a"]}"#, Dialect::Strict), Ok(None));
    }

    #[test]
    fn older_and_singular_shapes_read_as_the_reference_s() {
        let nested =
            json!({"user_aliases": [{"user_alias": {"alias_name": "n", "alias_label": "l"}, "external_id": 3}]});
        assert_eq!(
            platform(Api::AliasNew, nested.clone()),
            json!({"user_aliases": [{"alias_name": "n", "alias_label": "l", "external_id": "3"}]})
        );
        assert!(strict(Api::AliasNew, nested).starts_with("'user_aliases[0].user_alias' must be 'alias_name'"));
        let v2 = json!({"subscription_groups": [{"subscription_group_id": "g", "subscription_state": "subscribed", "external_id": "u1"}]});
        assert_eq!(
            platform(Api::SubscriptionSetV2, v2.clone())["subscription_groups"][0]["external_ids"],
            json!(["u1"])
        );
        assert!(strict(Api::SubscriptionSetV2, v2)
            .starts_with("'subscription_groups[0].external_id' must be 'external_ids'"));
        let email = json!({"subscription_groups": [{"subscription_group_id": "g", "subscription_state": "subscribed", "email": "a@b.c"}]});
        assert_eq!(platform(Api::SubscriptionSetV2, email)["subscription_groups"][0]["emails"], json!("a@b.c"));
        let v1 = json!({"subscription_group_id": "g", "subscription_state": "subscribed", "external_id": "u1"});
        assert_eq!(platform(Api::SubscriptionSetV1, v1.clone())["external_id"], json!(["u1"]));
        assert!(strict(Api::SubscriptionSetV1, v1).starts_with("'external_id' must be an array of strings"));
    }
}
