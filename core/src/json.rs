//! A JSON value that borrows its strings from the request body, for the bodies the
//! core reads field by field and then drops (a `/users/track` batch): parsing a
//! full batch into [`serde_json::Value`] made about 2,500 allocations (a `String`
//! per key and string, a B-tree per object), and parsing and dropping them was the
//! largest part of an acknowledgement's CPU (perf, `core/examples/ack_cost.rs`).
//!
//! It holds exactly what [`Value`] would: the same parser builds it (so the same
//! bodies are refused, with the same messages), strings are the decoded text
//! (borrowed unless they had escapes), numbers are [`Number`]s, and an object keeps
//! the last of duplicate keys, in key order, as [`serde_json::Map`] does. It
//! serializes to the same bytes as the [`Value`] it stands for.
//!
//! Not `serde_json_borrow`: its objects keep every duplicate key and find the first,
//! where the rest of the API (a `Map`) keeps the last.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Number, Value};

/// A parsed JSON value whose strings borrow from the text it was parsed from.
#[derive(Clone, Debug, PartialEq)]
pub enum Json<'a> {
    /// `null`
    Null,
    /// `true` or `false`
    Bool(bool),
    /// A number, as [`Value`] holds it.
    Number(Number),
    /// A string, decoded.
    Str(Cow<'a, str>),
    /// An array.
    Array(Vec<Json<'a>>),
    /// An object.
    Object(Object<'a>),
}

/// An object's members, sorted by key, each key once (the last given).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Object<'a>(Vec<(Cow<'a, str>, Json<'a>)>);

impl<'a> Object<'a> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        // A track object has a handful of members, each looked up a dozen times:
        // comparing lengths first beats a binary search's string comparisons there.
        if self.0.len() <= 16 {
            return self.0.iter().find(|(k, _)| k.len() == key.len() && k.as_ref() == key).map(|(_, v)| v);
        }
        self.0.binary_search_by(|(k, _)| k.as_ref().cmp(key)).ok().map(|i| &self.0[i].1)
    }

    /// Whether `key` is present (even as `null`).
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Members in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json<'a>)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }

    /// The members, in key order.
    pub fn into_members(self) -> Vec<(Cow<'a, str>, Json<'a>)> {
        self.0
    }

    /// Sorts members by key, keeping the last of each key, as a `Map` built by
    /// inserting them in order would hold them.
    pub fn from_members(mut members: Vec<(Cow<'a, str>, Json<'a>)>) -> Self {
        // Reversed, a stable sort puts the last of equal keys first; dedup keeps it.
        members.reverse();
        members.sort_by(|(a, _), (b, _)| a.cmp(b));
        members.dedup_by(|later, kept| later.0 == kept.0);
        Object(members)
    }
}

impl<'a> Json<'a> {
    /// Parses JSON text; the error is serde_json's, as for a [`Value`].
    pub fn parse(text: &'a [u8]) -> Result<Json<'a>, serde_json::Error> {
        // Text that is UTF-8 (every body but a broken one) is checked once here, not
        // string by string as `from_slice` does (7% of an acknowledgement's
        // instructions, callgrind); other bytes take that path for its own error.
        match std::str::from_utf8(text) {
            Ok(text) => serde_json::from_str(text),
            Err(_) => serde_json::from_slice(text),
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object<'a>> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&Vec<Json<'a>>> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A member of an object.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.as_object().and_then(|o| o.get(key))
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// The number as an `f64`, as [`Value::as_f64`].
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    /// The number as a `u64`, as [`Value::as_u64`].
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// The owned [`Value`] this stands for.
    pub fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::Str(s) => Value::String(s.to_string()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.to_string(), v.to_value())).collect()),
        }
    }
}

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::Str(t) => s.serialize_str(t),
            Json::Array(items) => items.serialize(s),
            Json::Object(o) => o.serialize(s),
        }
    }
}

impl Serialize for Object<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k.as_ref(), v)?;
        }
        map.end()
    }
}

/// A string borrowed from the input when it had no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // What serde_json's own visitor for `Value` accepts, the same way.
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any valid JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
                Ok(Json::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
                Ok(Number::from_f64(n).map_or(Json::Null, Json::Number))
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Json::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Json::Str(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Json::Str(Cow::Owned(s)))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Json::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                Deserialize::deserialize(d)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Json::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                // No capacity up front: a hostile body of 4 MB of `{}` must not
                // allocate hundreds of bytes per empty object.
                let mut members = Vec::new();
                while let Some(Text(k)) = map.next_key()? {
                    members.push((k, map.next_value()?));
                }
                Ok(Json::Object(Object::from_members(members)))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parsed both ways, a body gives the same value, or the same error.
    fn same_as_value(text: &str) {
        let ours = Json::parse(text.as_bytes()).map(|j| j.to_value()).map_err(|e| e.to_string());
        let theirs = serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
        assert_eq!(ours, theirs, "{text}");
        if let Ok(j) = Json::parse(text.as_bytes()) {
            assert_eq!(serde_json::to_string(&j).unwrap(), serde_json::to_string(&theirs.unwrap()).unwrap());
        }
    }

    #[test]
    fn holds_what_a_value_holds_and_refuses_what_it_refuses() {
        for text in [
            r#"{"b": 1, "a": [true, null, -1, 2.5, 18446744073709551615, 1e300], "c": {"x": "y"}}"#,
            r#"{"k": 1, "k": 2, "j": 0, "k": 3}"#,
            r#"{"esc\"aped": "tab\t\u00e9\ud83d\ude00", "plain": "text"}"#,
            r#"{"lone": "\ud800"}"#,
            r#"{"big": 1e400}"#,
            r#"{"a": 1,}"#,
            r#"{"a": 1} trailing"#,
            r#"[1, 2"#,
            r#""just a string""#,
            "",
            "{\"ctl\": \"a\u{1}b\"}",
            "-0",
            "1.0",
        ] {
            same_as_value(text);
        }
        let deep = "[".repeat(200) + &"]".repeat(200);
        same_as_value(&deep);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused_as_a_value_refuses_them() {
        let texts: [&[u8]; 5] =
            [b"{\"a\": \"\xff\"}", b"\xff", b"{\"a\xc3\": 1}", b"{\"a\" 1, \"\xff\": 2}", b"{\"ok\": \"\xe2\x82\"}"];
        for text in texts {
            let ours = Json::parse(text).map(|j| j.to_value()).map_err(|e| e.to_string());
            let theirs = serde_json::from_slice::<Value>(text).map_err(|e| e.to_string());
            assert!(theirs.is_err(), "{text:?}");
            assert_eq!(ours, theirs, "{text:?}");
        }
    }

    #[test]
    fn the_last_of_duplicate_keys_is_kept() {
        let j = Json::parse(br#"{"k": 1, "a": 0, "k": 2}"#).unwrap();
        let o = j.as_object().unwrap();
        assert_eq!(o.get("k"), Some(&Json::Number(2.into())));
        assert_eq!(o.keys().collect::<Vec<_>>(), ["a", "k"]);
    }

    #[test]
    fn members_are_found_in_small_and_large_objects() {
        for n in [0, 1, 5, 16, 17, 40] {
            let text = format!("{{{}}}", (0..n).map(|i| format!("\"k{i}\": {i}")).collect::<Vec<_>>().join(","));
            let j = Json::parse(text.as_bytes()).unwrap();
            let o = j.as_object().unwrap();
            for i in 0..n {
                assert_eq!(o.get(&format!("k{i}")), Some(&Json::Number(i.into())), "{text}");
            }
            assert_eq!(o.get("k"), None);
            assert_eq!(o.get(&format!("k{n}")), None);
        }
    }

    #[test]
    fn unescaped_strings_are_borrowed() {
        let j = Json::parse(br#"{"plain": "text", "esc": "a\nb"}"#).unwrap();
        assert!(matches!(j.get("plain"), Some(Json::Str(Cow::Borrowed("text")))));
        assert!(matches!(j.get("esc"), Some(Json::Str(Cow::Owned(s))) if s == "a\nb"));
    }
}
