//! JSON Schema (2020-12, the dialect of OpenAPI 3.1) in a few words: the helpers
//! every family's `schema.rs` writes its request and response bodies with. An
//! empty description is left out.

use serde_json::{json, Map, Value};

fn described(mut schema: Value, description: &str) -> Value {
    if !description.is_empty() {
        schema["description"] = Value::from(description);
    }
    schema
}

/// A string.
pub fn string(description: &str) -> Value {
    described(json!({"type": "string"}), description)
}

/// An RFC 3339 / ISO 8601 time.
pub fn time(description: &str) -> Value {
    described(json!({"type": "string", "format": "date-time"}), description)
}

/// An integer.
pub fn integer(description: &str) -> Value {
    described(json!({"type": "integer"}), description)
}

/// A number.
pub fn number(description: &str) -> Value {
    described(json!({"type": "number"}), description)
}

/// The end of the text, in every regex dialect: `$` also matches before a final
/// newline in some (Python's), where a schema-valid value would then end in one.
pub const END: &str = "(?![\\s\\S])";

/// White space as the server reads it (`char::is_whitespace`, what `str::trim`
/// drops), written out for a character class: `\s` differs between dialects (in
/// ECMA-262 it takes U+FEFF and leaves U+0085; in Python it also takes U+001C to
/// U+001F), so with `\S` a generator could send a "not blank" value the
/// server found blank.
pub const BLANK: &str = "\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

/// A string that is not all [`BLANK`] (what `str::trim` leaves non-empty).
pub fn not_blank(schema: Value) -> Value {
    with(schema, "pattern", Value::from(format!("[^{BLANK}]")))
}

/// Control characters (as Rust's `char::is_control`), which no identifier holds.
const CONTROL: &str = "\\u0000-\\u001f\\u007f-\\u009f";

/// An external ID (or alias name, service ID): the rules of `ids::ExternalId`.
pub fn external_id(description: &str) -> Value {
    described(
        json!({"type": "string", "minLength": 1, "maxLength": crate::ids::MAX_IDENTIFIER_LEN,
               "pattern": format!("^[^{CONTROL}]+{END}")}),
        &format!("{description} No control characters; at most {} bytes.", crate::ids::MAX_IDENTIFIER_LEN),
    )
}

/// An identifier as the platform reads it: a string ([`external_id`]), or a whole
/// number of at most 2^53 - 1 in magnitude, read as its decimal text (refused with
/// `--strict`).
pub fn lenient_id(description: &str) -> Value {
    let max = crate::dialect::MAX_ID_NUMBER;
    described(
        json!({"anyOf": [external_id(""), {"type": "integer", "minimum": -(max as i64), "maximum": max}]}),
        &format!(
            "{description} A string of at most {} bytes without control characters; or a whole number, read as its decimal text (the platform's reading; refused with `--strict`).",
            crate::ids::MAX_IDENTIFIER_LEN
        ),
    )
}

/// An email address: the rules of `ids::Email` (one `@`, a dotted domain that
/// neither starts nor ends with a dot, no spaces).
pub fn email(description: &str) -> Value {
    let c = format!("@{BLANK}{CONTROL}");
    described(
        json!({"type": "string", "maxLength": 254,
               "pattern": format!("^[^{c}]+@[^{c}.][^{c}]*\\.[^{c}]*[^{c}.]{END}")}),
        description,
    )
}

/// A phone number in E.164 form: the rules of `ids::Phone`.
pub fn phone(description: &str) -> Value {
    described(json!({"type": "string", "pattern": format!("^\\+[1-9][0-9]{{1,14}}{END}")}), description)
}

/// A workspace name: the rules of `ids::WorkspaceName` (not dots alone).
pub fn workspace_name(description: &str) -> Value {
    described(json!({"type": "string", "pattern": format!("^(?![.]+{END})[A-Za-z0-9._-]{{1,64}}{END}")}), description)
}

/// A boolean.
pub fn boolean(description: &str) -> Value {
    described(json!({"type": "boolean"}), description)
}

/// One of these strings.
pub fn values(list: &[&str], description: &str) -> Value {
    described(json!({"type": "string", "enum": list}), description)
}

/// The constant string every success body carries in `message`.
pub fn success() -> Value {
    json!({"const": "success", "description": "`success`."})
}

/// An array of `items`.
pub fn array(items: Value, description: &str) -> Value {
    described(json!({"type": "array", "items": items}), description)
}

/// An object with these properties, of which `required` must be present. Other
/// properties are not described and not refused unless [`closed`] says so.
pub fn object(description: &str, properties: &[(&str, Value)], required: &[&str]) -> Value {
    let props: Map<String, Value> = properties.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let mut v = described(json!({"type": "object", "properties": props}), description);
    if !required.is_empty() {
        v["required"] = json!(required);
    }
    v
}

/// An object whose keys are chosen by the client (custom attributes, properties).
pub fn free_object(description: &str) -> Value {
    described(json!({"type": "object", "additionalProperties": true}), description)
}

/// Any JSON value.
pub fn any(description: &str) -> Value {
    described(json!({}), description)
}

/// A schema of `#/components/schemas`.
pub fn refer(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// Exactly one of these shapes.
pub fn one_of(shapes: Vec<Value>, description: &str) -> Value {
    described(json!({"oneOf": shapes}), description)
}

/// A value or an array of 1 to `max` of them (the platform's "string or array").
pub fn one_or_many(item: Value, max: usize, description: &str) -> Value {
    let many = with(with(array(item.clone(), "Several."), "minItems", json!(1)), "maxItems", json!(max));
    one_of(vec![item, many], description)
}

/// `schema`, or `null`.
pub fn nullable(schema: Value) -> Value {
    let description = schema.get("description").cloned().unwrap_or(Value::Null);
    let mut inner = schema;
    if let Some(o) = inner.as_object_mut() {
        o.remove("description");
    }
    let mut v = json!({"anyOf": [inner, {"type": "null"}]});
    if !description.is_null() {
        v["description"] = description;
    }
    v
}

/// `schema` with one more keyword (`maxItems`, `example`, `format`, ...).
pub fn with(mut schema: Value, keyword: &str, value: Value) -> Value {
    if let Some(o) = schema.as_object_mut() {
        o.insert(keyword.to_string(), value);
    }
    schema
}

/// An object that refuses properties it does not describe.
pub fn closed(schema: Value) -> Value {
    with(schema, "additionalProperties", Value::Bool(false))
}

/// A success body: `message` plus these properties.
pub fn success_body(description: &str, properties: &[(&str, Value)], required: &[&str]) -> Value {
    let mut props = vec![("message", success())];
    props.extend(properties.iter().cloned());
    let mut req = vec!["message"];
    req.extend_from_slice(required);
    object(description, &props, &req)
}
