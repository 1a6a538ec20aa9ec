//! Applying generated [`Mutation`]s: to a JSON body (by the pre-order index of its
//! nodes) and to a list of pairs (a form or a query string).

use serde_json::{json, Value};

use super::strategies::Mutation;

/// One step from a node to a child.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn nodes(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(at.clone());
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(Step::Index(i));
                nodes(item, at, out);
                at.pop();
            }
        }
        Value::Object(m) => {
            for (k, item) in m {
                at.push(Step::Key(k.clone()));
                nodes(item, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'a>(mut v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    for step in path {
        v = match (step, v) {
            (Step::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (Step::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

pub(super) fn mutate_json(mut v: Value, mutations: &[Mutation]) -> Value {
    for m in mutations {
        let mut all = Vec::new();
        nodes(&v, &mut Vec::new(), &mut all);
        let pick = |i: usize| all[i % all.len()].clone();
        match m {
            Mutation::Replace(i, with) => {
                if let Some(n) = node_mut(&mut v, &pick(*i)) {
                    *n = with.clone();
                }
            }
            Mutation::Remove(i) => {
                let path = pick(*i);
                let Some((last, parent)) = path.split_last() else {
                    v = Value::Null;
                    continue;
                };
                match (node_mut(&mut v, parent), last) {
                    (Some(Value::Object(m)), Step::Key(k)) => {
                        m.remove(k);
                    }
                    (Some(Value::Array(a)), Step::Index(i)) if *i < a.len() => {
                        a.remove(*i);
                    }
                    _ => {}
                }
            }
            Mutation::Insert(i, k, with) => match node_mut(&mut v, &pick(*i)) {
                Some(Value::Object(m)) => {
                    m.insert(k.clone(), with.clone());
                }
                Some(Value::Array(a)) => {
                    let at = k.len() % (a.len() + 1);
                    a.insert(at, with.clone());
                }
                Some(other) => *other = json!({ k.clone(): with.clone() }),
                None => {}
            },
            Mutation::Grow(i, n) => match node_mut(&mut v, &pick(*i)) {
                Some(Value::Array(a)) if !a.is_empty() => {
                    let items = a.clone();
                    while a.len() < *n {
                        a.push(items[a.len() % items.len()].clone());
                    }
                }
                Some(Value::Object(m)) if !m.is_empty() => {
                    let fields: Vec<(String, Value)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    for j in 0..*n {
                        let (k, v) = &fields[j % fields.len()];
                        m.insert(format!("{k}{j}"), v.clone());
                    }
                }
                Some(other) => *other = Value::Array(vec![other.clone(); *n]),
                None => {}
            },
        }
    }
    v
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The same changes to a list of pairs (a form or a query string).
pub(super) fn mutate_pairs(mut pairs: Vec<(String, String)>, mutations: &[Mutation]) -> Vec<(String, String)> {
    for m in mutations {
        match m {
            Mutation::Replace(i, with) if !pairs.is_empty() => {
                let n = pairs.len();
                pairs[i % n].1 = as_text(with);
            }
            Mutation::Remove(i) if !pairs.is_empty() => {
                let n = pairs.len();
                pairs.remove(i % n);
            }
            Mutation::Insert(i, k, with) => {
                let at = i % (pairs.len() + 1);
                pairs.insert(at, (k.clone(), as_text(with)));
            }
            Mutation::Grow(i, n) if !pairs.is_empty() => {
                let one = pairs[i % pairs.len()].clone();
                pairs.extend(std::iter::repeat_n(one, (*n).min(60)));
            }
            _ => {}
        }
    }
    pairs
}
