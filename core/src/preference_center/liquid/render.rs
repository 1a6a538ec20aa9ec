//! Rendering (the bound on what it can cost is in `cost.rs`).

use std::collections::HashMap;

use super::ast::{Cmp, Cond, Expr, Filter, For, ForAttr, Node, Operand, Source};
use super::html::{escape_in_tag, Place, Scanner};
use super::{escape_html, Data, FieldRef, Rendered, Value, Var, MAX_ITERATIONS};

struct Run<'a> {
    /// Where outputs land in the buffer being rendered (one per `capture` open).
    scanners: Vec<Scanner>,
    data: &'a dyn Data,
    locals: HashMap<String, Value>,
    fields: Vec<FieldRef>,
    /// The loops being rendered: the pass (from 0) and the number of passes.
    loops: Vec<(usize, usize)>,
    /// A `break` or `continue` on its way to its loop.
    jump: Option<Jump>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Jump {
    Break,
    Continue,
}

pub(super) fn render(nodes: &[Node], data: &dyn Data) -> Rendered {
    let mut run = Run {
        scanners: vec![Scanner::default()],
        data,
        locals: HashMap::new(),
        fields: Vec::new(),
        loops: Vec::new(),
        jump: None,
    };
    let mut html = String::new();
    run.nodes(nodes, &mut html);
    if let Some(mut scanner) = run.scanners.pop() {
        scanner.finish(&mut html);
    }
    Rendered { html, fields: run.fields }
}

impl Run<'_> {
    fn nodes(&mut self, nodes: &[Node], out: &mut String) {
        for node in nodes {
            // A `break` or `continue` skips the rest of its loop's pass.
            if self.jump.is_some() {
                return;
            }
            match node {
                Node::Text(t) => out.push_str(t),
                Node::Output(e) => {
                    let v = self.expr(e);
                    let place = match self.scanners.last_mut() {
                        Some(scanner) => {
                            scanner.advance(out);
                            scanner.place()
                        }
                        None => Place::Text,
                    };
                    out.push_str(&output_at(&v, place));
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
                    self.scanners.push(Scanner::default());
                    self.nodes(body, &mut inner);
                    if let Some(mut scanner) = self.scanners.pop() {
                        scanner.finish(&mut inner);
                    }
                    self.locals.insert(name.clone(), Value::Markup(inner));
                }
                Node::Assign(name, e) => {
                    let v = self.expr(e);
                    self.locals.insert(name.clone(), v);
                }
                Node::Case(subject, whens, otherwise) => {
                    let subject = self.operand(subject);
                    let mut matched = false;
                    for (values, body) in whens {
                        if values.iter().any(|v| compare(Cmp::Eq, &subject, &self.operand(v))) {
                            matched = true;
                            self.nodes(body, out);
                        }
                    }
                    if !matched {
                        self.nodes(otherwise, out);
                    }
                }
                Node::For(f) => self.for_loop(f, out),
                Node::Break => self.jump = Some(Jump::Break),
                Node::Continue => self.jump = Some(Jump::Continue),
            }
        }
    }

    fn for_loop(&mut self, f: &For, out: &mut String) {
        let mut items: Vec<Value> = match &f.source {
            Source::Range(first, last) => {
                let (a, b) = (number(&self.operand(first)) as i64, number(&self.operand(last)) as i64);
                let n = b.saturating_sub(a).saturating_add(1).clamp(0, MAX_ITERATIONS as i64);
                (0..n).map(|i| Value::Num((a + i) as f64)).collect()
            }
            Source::Value(o) => match self.operand(o) {
                Value::List(items) => items,
                Value::Nil => Vec::new(),
                one => vec![one],
            },
        };
        // Liquid: offset, then limit, then reversed.
        let offset = f.offset.as_ref().map_or(0, |o| number(&self.operand(o)).max(0.0) as usize);
        items.drain(..offset.min(items.len()));
        if let Some(limit) = &f.limit {
            items.truncate(number(&self.operand(limit)).max(0.0) as usize);
        }
        if f.reversed {
            items.reverse();
        }
        items.truncate(MAX_ITERATIONS as usize);
        if items.is_empty() {
            self.nodes(&f.otherwise, out);
            return;
        }
        // The loop's variable exists inside it only.
        let before = self.locals.remove(&f.var);
        let n = items.len();
        for (i, item) in items.into_iter().enumerate() {
            self.locals.insert(f.var.clone(), item);
            self.loops.push((i, n));
            self.nodes(&f.body, out);
            self.loops.pop();
            if self.jump.take() == Some(Jump::Break) {
                break;
            }
        }
        match before {
            Some(v) => self.locals.insert(f.var.clone(), v),
            None => self.locals.remove(&f.var),
        };
    }

    fn operand(&self, o: &Operand) -> Value {
        match o {
            Operand::Lit(v) => v.clone(),
            Operand::Empty | Operand::Blank => Value::Text(String::new()),
            Operand::Var(Var::Local(name)) => self.locals.get(name).cloned().unwrap_or(Value::Nil),
            Operand::Var(v) => self.data.get(v),
            Operand::ForLoop(attr) => match self.loops.last() {
                Some(&(i, n)) => match attr {
                    ForAttr::Index => Value::Num((i + 1) as f64),
                    ForAttr::Index0 => Value::Num(i as f64),
                    ForAttr::Rindex => Value::Num((n - i) as f64),
                    ForAttr::Rindex0 => Value::Num((n - i - 1) as f64),
                    ForAttr::First => Value::Bool(i == 0),
                    ForAttr::Last => Value::Bool(i + 1 == n),
                    ForAttr::Length => Value::Num(n as f64),
                },
                None => Value::Nil,
            },
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
                Filter::Size => match &v {
                    Value::List(items) => Value::Num(items.len() as f64),
                    other => Value::Num(plain(other).chars().count() as f64),
                },
                Filter::Split(sep) => split(v, &plain(&self.operand(sep))),
                Filter::Join(sep) => {
                    let sep = sep.as_ref().map_or(Value::Text(" ".into()), |s| self.operand(s));
                    join(v, &sep)
                }
                Filter::First => match v {
                    Value::List(mut items) if !items.is_empty() => items.swap_remove(0),
                    _ => Value::Nil,
                },
                Filter::Last => match v {
                    Value::List(mut items) => items.pop().unwrap_or(Value::Nil),
                    _ => Value::Nil,
                },
                Filter::Date(format) => date(v, format, self.data.now()),
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
    match v {
        Value::Text(s) | Value::Markup(s) => s.is_empty(),
        Value::List(items) => items.is_empty(),
        _ => false,
    }
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
        (Value::List(x), Value::List(y)) if x.len() == y.len() => {
            let same = x.iter().zip(y).all(|(a, b)| compare(Cmp::Eq, a, b));
            if same {
                Some(Ordering::Equal)
            } else {
                None
            }
        }
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
            (Value::List(items), y) => items.iter().any(|i| compare(Cmp::Eq, i, y)),
            _ => false,
        },
    }
}

/// The text of a value (markup as it is).
pub(super) fn plain(v: &Value) -> String {
    match v {
        Value::Nil => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", *n as i64),
        Value::Num(n) => n.to_string(),
        Value::Text(s) | Value::Markup(s) => s.clone(),
        Value::List(items) => items.iter().map(plain).collect(),
    }
}

/// A value as it goes into the page: escaped unless it is rendered markup.
fn output(v: &Value) -> String {
    output_at(v, Place::Text)
}

/// A value as it goes into the page at `place`: text escaped for it; rendered
/// markup as it is between tags, and inside a tag with nothing in it that could
/// end a value or start an attribute (a capture's markup may hold user data
/// escaped as text).
fn output_at(v: &Value, place: Place) -> String {
    match (v, place) {
        (Value::Markup(m), Place::Text) => m.clone(),
        (Value::Markup(m), Place::InTag) => m
            .chars()
            .map(|c| match c {
                '&' => "&".to_string(),
                c => escape_in_tag(c.encode_utf8(&mut [0; 4])),
            })
            .collect(),
        (Value::List(items), _) => items.iter().map(|i| output_at(i, place)).collect(),
        (other, Place::Text) => escape_html(&plain(other)),
        (other, Place::InTag) => escape_in_tag(&plain(other)),
    }
}

/// Liquid's `split` (Ruby's): an empty separator cuts between characters, empty
/// items at the end are dropped, nothing gives an empty list.
pub(super) fn split(v: Value, sep: &str) -> Value {
    let (text, markup) = match v {
        Value::Nil => return Value::List(Vec::new()),
        Value::Markup(m) => (m, true),
        other => (plain(&other), false),
    };
    let item = |s: &str| if markup { Value::Markup(s.to_string()) } else { Value::Text(s.to_string()) };
    let mut items: Vec<Value> = if sep.is_empty() {
        text.chars().map(|c| item(c.encode_utf8(&mut [0; 4]))).collect()
    } else if sep == " " {
        // Ruby splits on runs of whitespace for a single space.
        text.split_whitespace().map(item).collect()
    } else {
        text.split(sep).map(item).collect()
    };
    while matches!(items.last(), Some(Value::Text(s) | Value::Markup(s)) if s.is_empty()) {
        items.pop();
    }
    Value::List(items)
}

/// Liquid's `join`: a list's items with `sep` between them (anything else as it is).
fn join(v: Value, sep: &Value) -> Value {
    let Value::List(items) = v else { return v };
    if items.iter().chain(std::iter::once(sep)).any(|i| matches!(i, Value::Markup(_) | Value::List(_))) {
        let sep = output(sep);
        Value::Markup(items.iter().map(output).collect::<Vec<_>>().join(&sep))
    } else {
        let sep = plain(sep);
        Value::Text(items.iter().map(plain).collect::<Vec<_>>().join(&sep))
    }
}

/// Liquid's `date`: `now` / `today`, seconds since the epoch, or a date or time in
/// ISO 8601 form, formatted (in UTC); anything else is left as it is.
fn date(v: Value, format: &str, now: i64) -> Value {
    use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
    let at: Option<DateTime<Utc>> = match &v {
        Value::Nil => return Value::Nil,
        Value::Num(n) => DateTime::from_timestamp(*n as i64, 0),
        Value::Text(s) | Value::Markup(s) => {
            let s = s.trim();
            match s.to_ascii_lowercase().as_str() {
                "now" | "today" => DateTime::from_timestamp(now, 0),
                _ => DateTime::parse_from_rfc3339(s)
                    .map(|d| d.with_timezone(&Utc))
                    .ok()
                    .or_else(|| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").ok().map(|d| d.and_utc()))
                    .or_else(|| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").ok().map(|d| d.and_utc()))
                    .or_else(|| {
                        NaiveDate::parse_from_str(s, "%Y-%m-%d")
                            .ok()
                            .and_then(|d| d.and_hms_opt(0, 0, 0))
                            .map(|d| d.and_utc())
                    })
                    .or_else(|| s.parse::<i64>().ok().and_then(|n| DateTime::from_timestamp(n, 0))),
            }
        }
        _ => None,
    };
    match at {
        // The format was checked when the template was parsed: writing it cannot fail.
        Some(at) => {
            use std::fmt::Write as _;
            let mut out = String::new();
            match write!(out, "{}", at.format(format)) {
                Ok(()) => Value::Text(out),
                Err(_) => v,
            }
        }
        None => v,
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
