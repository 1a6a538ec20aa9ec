//! Runs a parsed [`Filter`] against a user as it is returned (RFC 7644 §3.4.2.2):
//! a multi-valued attribute matches when one of its values does; `ne` is the
//! negation of `eq` (so an absent attribute is `ne` anything); `pr` needs a value
//! that is not null, an empty string, an empty list or an empty object; text
//! compares by the attribute's case rule (ordering too, character by character),
//! times in time order.

use std::cmp::Ordering;

use serde_json::Value;

use super::filter::{Attribute, CompareOp, Filter, Kind, Operand};
use crate::time::Timestamp;

/// Whether `resource` (a rendered user, or one entry inside a value path) matches.
pub fn matches(filter: &Filter, resource: &Value) -> bool {
    match filter {
        Filter::And(a, b) => matches(a, resource) && matches(b, resource),
        Filter::Or(a, b) => matches(a, resource) || matches(b, resource),
        Filter::Not(a) => !matches(a, resource),
        Filter::Present(attr) => values(attr, resource).iter().any(|v| present(v)),
        Filter::Has(attr, inner) => values(attr, resource).iter().any(|entry| matches(inner, entry)),
        Filter::Compare(attr, op, operand) => {
            let found = values(attr, resource);
            match (op, operand) {
                (CompareOp::Eq, Operand::Null) => !found.iter().any(|v| present(v)),
                (CompareOp::Ne, Operand::Null) => found.iter().any(|v| present(v)),
                (CompareOp::Ne, operand) => !found.iter().any(|v| compare(attr, CompareOp::Eq, operand, v)),
                (op, operand) => found.iter().any(|v| compare(attr, *op, operand, v)),
            }
        }
    }
}

/// The attribute's values in `resource`: keys matched ignoring case, lists on the
/// way and at the end flattened, nulls left out.
fn values<'a>(attr: &Attribute, resource: &'a Value) -> Vec<&'a Value> {
    let mut at = vec![resource];
    for key in attr.keys {
        at = at
            .into_iter()
            .flat_map(|v| match v {
                Value::Array(items) => items.iter().collect(),
                v => vec![v],
            })
            .filter_map(|v| v.as_object()?.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
            .collect();
    }
    at.into_iter()
        .flat_map(|v| match v {
            Value::Array(items) => items.iter().collect(),
            v => vec![v],
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn present(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    }
}

fn ordered(op: CompareOp, ord: Ordering) -> bool {
    match op {
        CompareOp::Eq => ord == Ordering::Equal,
        CompareOp::Ne => ord != Ordering::Equal,
        CompareOp::Gt => ord == Ordering::Greater,
        CompareOp::Ge => ord != Ordering::Less,
        CompareOp::Lt => ord == Ordering::Less,
        CompareOp::Le => ord != Ordering::Greater,
        CompareOp::Co | CompareOp::Sw | CompareOp::Ew => false,
    }
}

/// One value against the operand (the parser has matched operand and kind).
fn compare(attr: &Attribute, op: CompareOp, operand: &Operand, v: &Value) -> bool {
    match (attr.kind, operand) {
        (Kind::Boolean, Operand::Bool(b)) => v.as_bool().is_some_and(|x| ordered(op, x.cmp(b))),
        (Kind::DateTime, Operand::Time(t)) => {
            v.as_str().and_then(Timestamp::parse).is_some_and(|x: Timestamp| ordered(op, x.cmp(t)))
        }
        (Kind::Text { case_exact }, Operand::Text(want)) => {
            let Some(have) = v.as_str() else { return false };
            let (have, want) =
                if case_exact { (have.to_string(), want.clone()) } else { (have.to_lowercase(), want.to_lowercase()) };
            match op {
                CompareOp::Co => have.contains(&want),
                CompareOp::Sw => have.starts_with(&want),
                CompareOp::Ew => have.ends_with(&want),
                op => ordered(op, have.as_str().cmp(want.as_str())),
            }
        }
        _ => false,
    }
}
