//! A small Liquid engine for preference-center pages, written for this one use (see
//! docs/decisions/preference-center.md#preference-center-liquid-engine: the platform's
//! tags, `${...}` inside a variable path, are not Liquid syntax a general engine parses,
//! and validation needs the syntax tree).
//!
//! What it understands: text; `{{ expression | filter: arg }}`; the tags `if` /
//! `elsif` / `else` / `endif`, `unless`, `case` / `when` / `else` / `endcase`,
//! `for` / `else` / `endfor` (over a range `(1..n)` or a list, with `limit:`,
//! `offset:`, `reversed`, `forloop.*`, `break` and `continue`), `capture`,
//! `assign`, `comment`, `raw`, `{% # inline comments %}`, and the platform's
//! `form_field_name`; comparisons (`==`, `!=`, `<>`, `<`, `>`, `<=`, `>=`,
//! `contains`) joined by `and` / `or`; the filters `default`, `append`, `prepend`,
//! `upcase`, `downcase`, `capitalize`, `strip`, `escape`, `size`, `truncate`,
//! `replace`, `replace_first`, `remove`, `remove_first`, `split`, `join`, `first`,
//! `last` and `date`; whitespace control (`{{-`, `-%}`). Semantics are Shopify
//! Liquid's, which the platform uses.
//!
//! Everything a page can name is checked when the template is parsed (unknown tags,
//! filters, variables and attributes are errors with a line and column), so a
//! stored template always renders. Every value from user data is HTML-escaped on
//! output; only what `capture` rendered (already escaped) is output as markup. The
//! size of any rendering, and the work it takes, are bounded when the template is
//! parsed ([`MAX_OUTPUT_BYTES`], [`MAX_STEPS`]), since `capture` can double a value
//! each time and loops multiply what they hold.

mod ast;
mod cost;
mod filter;
mod html;
mod lex;
mod parse;
mod render;
#[cfg(test)]
mod tests;

use std::fmt;

/// Deepest nesting of blocks (`if`, `unless`, `capture`).
pub const MAX_DEPTH: usize = 32;
/// Largest page a template may render, whatever the user's data.
pub const MAX_OUTPUT_BYTES: u64 = 8 << 20;
/// Most steps (a node rendered, a loop's pass) a rendering may take.
pub const MAX_STEPS: u64 = 1_000_000;
/// Most passes of one `for` loop (a list split from user data has at most
/// [`USER_VALUE_BYTES`] + 1 items).
pub const MAX_ITERATIONS: u64 = 2_000;
/// Most bytes a value from user data has (identifiers and string attributes are at
/// most 255 characters; external ids at most 987 bytes).
pub const USER_VALUE_BYTES: u64 = 1024;

/// A place in a template: line and column, from 1, in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    /// Line.
    pub line: u32,
    /// Column.
    pub column: u32,
}

/// Why a template does not parse, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    /// Where.
    pub pos: Pos,
    /// What.
    pub message: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.pos.line, self.pos.column, self.message)
    }
}

/// A user attribute a page can show as `{{${name}}}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attr {
    /// `${email_address}`
    EmailAddress,
    /// `${first_name}`
    FirstName,
    /// `${last_name}`
    LastName,
    /// `${user_id}`: the external id.
    UserId,
    /// `${city}`
    City,
    /// `${country}`
    Country,
    /// `${language}`
    Language,
    /// `${gender}`
    Gender,
    /// `${date_of_birth}`
    DateOfBirth,
    /// `${phone_number}`
    PhoneNumber,
    /// `${time_zone}`
    TimeZone,
}

impl Attr {
    /// Every attribute with its tag name.
    pub const ALL: [(&'static str, Attr); 11] = [
        ("email_address", Attr::EmailAddress),
        ("first_name", Attr::FirstName),
        ("last_name", Attr::LastName),
        ("user_id", Attr::UserId),
        ("city", Attr::City),
        ("country", Attr::Country),
        ("language", Attr::Language),
        ("gender", Attr::Gender),
        ("date_of_birth", Attr::DateOfBirth),
        ("phone_number", Attr::PhoneNumber),
        ("time_zone", Attr::TimeZone),
    ];

    fn parse(name: &str) -> Option<Attr> {
        Attr::ALL.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
    }
}

/// What a variable names (checked when parsed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Var {
    /// `subscribed_state.${email_global}`
    EmailGlobal,
    /// `subscribed_state.${<group id>}`
    GroupState(String),
    /// `preference_center_submit_url`
    SubmitUrl,
    /// `${first_name}` and the other attributes.
    Attr(Attr),
    /// `custom_attribute.${name}`
    Custom(String),
    /// A variable set by `capture` or `assign` in the template.
    Local(String),
}

/// A form input marked by `{% form_field_name ... %}`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FieldRef {
    /// `:email_global_state`
    EmailGlobal,
    /// `:subscription_group <id>`
    Group(String),
}

impl FieldRef {
    /// The input's `name` as rendered and as submitted.
    pub fn name(&self) -> String {
        match self {
            FieldRef::EmailGlobal => "email_global_state".into(),
            FieldRef::Group(id) => format!("subscription_group_{id}"),
        }
    }
}

/// A value while rendering.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Nothing (an attribute the user lacks).
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// A number.
    Num(f64),
    /// Text, escaped when output.
    Text(String),
    /// Markup rendered by `capture` (already escaped), output as is.
    Markup(String),
    /// A list (`split`, a range), output as its items one after the other.
    List(Vec<Value>),
}

/// The data a page renders with; the template asks only for what it names.
pub trait Data {
    /// The value of any variable but [`Var::Local`].
    fn get(&self, var: &Var) -> Value;

    /// Now, in seconds since the epoch (`'now' | date: ...`).
    fn now(&self) -> i64;
}

/// A parsed, checked template.
#[derive(Clone, Debug)]
pub struct Template {
    nodes: Vec<ast::Node>,
    groups: Vec<(String, Pos)>,
}

/// A rendered page and the form inputs it marked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// The HTML.
    pub html: String,
    /// The inputs marked by `form_field_name`, each once, in order of appearance.
    pub fields: Vec<FieldRef>,
}

impl Template {
    /// Parses and checks a template.
    pub fn parse(src: &str) -> Result<Template, TemplateError> {
        let (nodes, groups) = parse::parse(src)?;
        let cost = cost::cost(&nodes);
        if cost.steps > MAX_STEPS {
            let message = format!(
                "the page could take more than {MAX_STEPS} steps to render: loops multiply what they hold, \
                 and a variable that grows in a loop of more than 64 passes cannot be bounded"
            );
            return Err(TemplateError { pos: Pos { line: 1, column: 1 }, message });
        }
        if cost.bytes > MAX_OUTPUT_BYTES {
            let why = if parse::sets_variables(&nodes) {
                "counting every output at its longest (a value from user data at 1 KiB, escaped), \
                 and captures and assigns as often as they are used"
            } else {
                "its text with every output at its longest (a value from user data at 1 KiB, escaped)"
            };
            let message = format!("the page could render more than {MAX_OUTPUT_BYTES} bytes: {why}");
            return Err(TemplateError { pos: Pos { line: 1, column: 1 }, message });
        }
        Ok(Template { nodes, groups })
    }

    /// The subscription groups the template names, each with where it first does.
    pub fn group_refs(&self) -> &[(String, Pos)] {
        &self.groups
    }

    /// Renders the template.
    pub fn render(&self, data: &dyn Data) -> Rendered {
        render::render(&self.nodes, data)
    }
}

/// The character reference of a character that HTML text and quoted attribute
/// values cannot hold as it is.
pub(super) fn html_entity(c: char) -> Option<&'static str> {
    match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some("&quot;"),
        '\'' => Some("&#39;"),
        _ => None,
    }
}

/// Escapes text for HTML text and quoted attribute values.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match html_entity(c) {
            Some(entity) => out.push_str(entity),
            None => out.push(c),
        }
    }
    out
}
