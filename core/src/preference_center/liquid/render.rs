//! Rendering, and the bound on what a template can render.

use std::collections::HashMap;

use super::parse::{Cmp, Cond, Expr, Filter, Node, Operand};
use super::{escape_html, Data, FieldRef, Rendered, Value, Var, USER_VALUE_BYTES};

struct Run<'a> {
    data: &'a dyn Data,
    locals: HashMap<String, Value>,
    fields: Vec<FieldRef>,
}

pub(super) fn render(nodes: &[Node], data: &dyn Data) -> Rendered {
    let mut run = Run { data, locals: HashMap::new(), fields: Vec::new() };
    let mut html = String::new();
    run.nodes(nodes, &mut html);
    Rendered { html, fields: run.fields }
}

impl Run<'_> {
    fn nodes(&mut self, nodes: &[Node], out: &mut String) {
        for node in nodes {
            match node {
                Node::Text(t) => out.push_str(t),
                Node::Output(e) => {
                    let v = self.expr(e);
                    out.push_str(&output(&v));
                }
                Node::Field(f) => {
                    out.push_str(&escape_html(&f.name()));
                    if !self.fields.contains(f) {
                        self.fields.push(f.clone());
                    }
                }
                Node::If(branches, otherwise) => {
                    let taken = branches.iter().find(|(c, _)| self.cond(c)).map(|(_, n)| n).unwrap_or(otherwise);
                    self.nodes(taken, out);
                }
                Node::Capture(name, body) => {
                    let mut inner = String::new();
                    self.nodes(body, &mut inner);
                    self.locals.insert(name.clone(), Value::Markup(inner));
                }
                Node::Assign(name, e) => {
                    let v = self.expr(e);
                    self.locals.insert(name.clone(), v);
                }
            }
        }
    }

    fn operand(&self, o: &Operand) -> Value {
        match o {
            Operand::Lit(v) => v.clone(),
            Operand::Empty | Operand::Blank => Value::Text(String::new()),
            Operand::Var(Var::Local(name)) => self.locals.get(name).cloned().unwrap_or(Value::Nil),
            Operand::Var(v) => self.data.get(v),
        }
    }

    fn expr(&self, e: &Expr) -> Value {
        let mut v = self.operand(&e.base);
        for f in &e.filters {
            v = match f {
                Filter::Default(arg) => {
                    if truthy(&v) && !is_empty_text(&v) {
                        v
                    } else {
                        self.operand(arg)
                    }
                }
                Filter::Append(arg) => concat(v, self.operand(arg)),
                Filter::Prepend(arg) => concat(self.operand(arg), v),
                Filter::Upcase => map_text(v, |s| s.to_uppercase()),
                Filter::Downcase => map_text(v, |s| s.to_lowercase()),
                Filter::Capitalize => map_text(v, capitalize),
                Filter::Strip => map_text(v, |s| s.trim().to_string()),
                Filter::Escape => match v {
                    // Shown as text: the markup is escaped once on output.
                    Value::Markup(m) => Value::Text(m),
                    other => Value::Text(plain(&other)),
                },
                Filter::Size => Value::Num(plain(&v).chars().count() as f64),
                Filter::Truncate(length, ellipsis) => {
                    let length = number(&self.operand(length)).clamp(0.0, 1e9) as usize;
                    let ellipsis = ellipsis.as_ref().map_or_else(|| "...".to_string(), |e| plain(&self.operand(e)));
                    map_text(v, |s| truncate(s, length, &ellipsis))
                }
                Filter::Replace(from, to) => {
                    let (from, to) = (plain(&self.operand(from)), plain(&self.operand(to)));
                    map_text(v, |s| s.replace(&from, &to))
                }
                Filter::ReplaceFirst(from, to) => {
                    let (from, to) = (plain(&self.operand(from)), plain(&self.operand(to)));
                    map_text(v, |s| s.replacen(&from, &to, 1))
                }
            };
        }
        v
    }

    fn cond(&self, c: &Cond) -> bool {
        match c {
            Cond::Not(c) => !self.cond(c),
            Cond::And(a, b) => self.cond(a) && self.cond(b),
            Cond::Or(a, b) => self.cond(a) || self.cond(b),
            Cond::Test(a, None) => truthy(&self.operand(a)),
            Cond::Test(a, Some((cmp, b))) => {
                let left = self.operand(a);
                match (cmp, b) {
                    (Cmp::Eq, Operand::Empty) => is_empty_text(&left),
                    (Cmp::Ne, Operand::Empty) => !is_empty_text(&left),
                    (Cmp::Eq, Operand::Blank) => is_blank(&left),
                    (Cmp::Ne, Operand::Blank) => !is_blank(&left),
                    _ => compare(*cmp, &left, &self.operand(b)),
                }
            }
        }
    }
}

fn truthy(v: &Value) -> bool {
    !matches!(v, Value::Nil | Value::Bool(false))
}

fn is_empty_text(v: &Value) -> bool {
    matches!(v, Value::Text(s) | Value::Markup(s) if s.is_empty())
}

fn is_blank(v: &Value) -> bool {
    match v {
        Value::Nil | Value::Bool(false) => true,
        Value::Text(s) | Value::Markup(s) => s.trim().is_empty(),
        _ => false,
    }
}

fn compare(cmp: Cmp, a: &Value, b: &Value) -> bool {
    use std::cmp::Ordering;
    let order = match (a, b) {
        (Value::Num(x), Value::Num(y)) => x.partial_cmp(y),
        (Value::Text(x) | Value::Markup(x), Value::Text(y) | Value::Markup(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Nil, Value::Nil) => Some(Ordering::Equal),
        _ => None,
    };
    match cmp {
        Cmp::Eq => order == Some(Ordering::Equal),
        Cmp::Ne => order != Some(Ordering::Equal),
        Cmp::Lt => order == Some(Ordering::Less),
        Cmp::Gt => order == Some(Ordering::Greater),
        Cmp::Le => matches!(order, Some(Ordering::Less | Ordering::Equal)),
        Cmp::Ge => matches!(order, Some(Ordering::Greater | Ordering::Equal)),
        Cmp::Contains => match (a, b) {
            (Value::Text(x) | Value::Markup(x), y) => x.contains(plain(y).as_str()),
            _ => false,
        },
    }
}

/// The text of a value (markup as it is).
fn plain(v: &Value) -> String {
    match v {
        Value::Nil => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", *n as i64),
        Value::Num(n) => n.to_string(),
        Value::Text(s) | Value::Markup(s) => s.clone(),
    }
}

/// A value as it goes into the page: escaped unless it is rendered markup.
fn output(v: &Value) -> String {
    match v {
        Value::Markup(m) => m.clone(),
        other => escape_html(&plain(other)),
    }
}

fn concat(a: Value, b: Value) -> Value {
    match (&a, &b) {
        // Joining markup and text keeps markup: the text part is escaped now.
        (Value::Markup(_), _) | (_, Value::Markup(_)) => Value::Markup(output(&a) + &output(&b)),
        _ => Value::Text(plain(&a) + &plain(&b)),
    }
}

fn map_text(v: Value, f: impl Fn(&str) -> String) -> Value {
    match v {
        Value::Markup(m) => Value::Markup(f(&m)),
        other => Value::Text(f(&plain(&other))),
    }
}

/// Liquid's `truncate`: text longer than `length` characters is cut so that, with
/// the ellipsis, it is `length` long (the ellipsis alone when it is longer).
fn truncate(s: &str, length: usize, ellipsis: &str) -> String {
    if s.chars().count() <= length {
        return s.to_string();
    }
    let keep = length.saturating_sub(ellipsis.chars().count());
    s.chars().take(keep).collect::<String>() + ellipsis
}

/// A value as a number (Liquid reads numeric text), 0 when it is none.
fn number(v: &Value) -> f64 {
    match v {
        Value::Num(n) => *n,
        Value::Text(s) | Value::Markup(s) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars.flat_map(char::to_lowercase)).collect(),
        None => String::new(),
    }
}

/// An upper bound of the bytes a rendering writes, whatever the data: every value
/// from user data at its longest, every case change at its widest, escaping at its
/// widest (6 bytes for 1), every branch at its longest.
pub(super) fn cost(nodes: &[Node]) -> u64 {
    let mut env = HashMap::new();
    cost_nodes(nodes, &mut env)
}

const ESCAPED: u64 = 6;
const CASE: u64 = 3;

fn cost_nodes(nodes: &[Node], env: &mut HashMap<String, u64>) -> u64 {
    let mut total: u64 = 0;
    for node in nodes {
        let c = match node {
            Node::Text(t) => t.len() as u64,
            Node::Output(e) => cost_expr(e, env),
            Node::Field(f) => ESCAPED.saturating_mul(f.name().len() as u64),
            Node::If(branches, otherwise) => {
                let mut longest = 0;
                let start = env.clone();
                for body in branches.iter().map(|(_, b)| b).chain(std::iter::once(otherwise)) {
                    let mut branch_env = start.clone();
                    longest = cost_nodes(body, &mut branch_env).max(longest);
                    for (k, v) in branch_env {
                        let slot = env.entry(k).or_insert(0);
                        *slot = (*slot).max(v);
                    }
                }
                longest
            }
            Node::Capture(name, body) => {
                let c = cost_nodes(body, env);
                let slot = env.entry(name.clone()).or_insert(0);
                *slot = (*slot).max(c);
                0
            }
            Node::Assign(name, e) => {
                let c = cost_expr(e, env);
                let slot = env.entry(name.clone()).or_insert(0);
                *slot = (*slot).max(c);
                0
            }
        };
        total = total.saturating_add(c);
    }
    total
}

/// Bytes of an expression's value as output (after escaping).
fn cost_expr(e: &Expr, env: &HashMap<String, u64>) -> u64 {
    let mut c = cost_operand(&e.base, env);
    for f in &e.filters {
        c = match f {
            Filter::Default(a) => c.max(cost_operand(a, env)),
            Filter::Append(a) | Filter::Prepend(a) => c.saturating_add(cost_operand(a, env)),
            Filter::Upcase | Filter::Downcase | Filter::Capitalize => c.saturating_mul(CASE),
            // Markup shown as text is escaped on output.
            Filter::Escape => c.saturating_mul(ESCAPED),
            Filter::Strip => c,
            Filter::Size => 20,
            // Cutting never lengthens, but the ellipsis may be added.
            Filter::Truncate(_, ellipsis) => c.saturating_add(ellipsis.as_ref().map_or(3, |e| cost_operand(e, env))),
            // At worst every character is replaced (an empty pattern inserts between
            // every two).
            Filter::Replace(_, to) => {
                c.saturating_mul(cost_operand(to, env).saturating_add(1)).saturating_add(cost_operand(to, env))
            }
            Filter::ReplaceFirst(_, to) => c.saturating_add(cost_operand(to, env)),
        };
    }
    c
}

fn cost_operand(o: &Operand, env: &HashMap<String, u64>) -> u64 {
    match o {
        Operand::Lit(v) => ESCAPED.saturating_mul(plain(v).len() as u64),
        Operand::Empty | Operand::Blank => 0,
        Operand::Var(Var::Local(name)) => env.get(name).copied().unwrap_or(0),
        Operand::Var(_) => ESCAPED.saturating_mul(USER_VALUE_BYTES),
    }
}
