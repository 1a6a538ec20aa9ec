//! SCIM filters (RFC 7644 §3.4.2.2) over the dashboard user's attributes: the
//! comparison operators `eq ne co sw ew gt ge lt le` and `pr`, `and` / `or` / `not`
//! with parentheses (`not` binds tightest, then `and`, then `or`), attribute paths
//! optionally behind their schema's URN, and value paths (`[...]`) on the
//! multi-valued permission lists. Names and operators ignore case; values are JSON
//! literals. Each attribute has its type and case rule from the schema this server
//! publishes ([`attributes`]); a filter that is not the grammar, names an attribute
//! the resource does not have, or compares in a way its type does not allow is a
//! 400 `invalidFilter` naming the character position, never evaluated half-way.
//! [`super::evaluate`] runs a parsed filter against a user.

use super::error::ScimError;
use super::protocol::{ENTERPRISE_URN, USER_URN};
use crate::time::Timestamp;

/// What an attribute holds, for comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Text, compared exactly or ignoring case.
    Text {
        /// Whether case matters (RFC 7643 `caseExact`).
        case_exact: bool,
    },
    /// `true` / `false`: only `eq`, `ne` and `pr`.
    Boolean,
    /// An RFC 3339 time, compared in time order.
    DateTime,
    /// Sub-attributes: only `pr`, or a value path when multi-valued.
    Complex,
}

/// An attribute a filter may name: its name, where it is in a rendered user, its
/// kind, and (for a multi-valued complex one) the attributes of its entries.
#[derive(Debug)]
pub struct Attribute {
    /// The path as a filter writes it (compared ignoring case).
    pub name: &'static str,
    /// The keys to it in the rendered resource (or in one entry of a value path).
    pub keys: &'static [&'static str],
    /// Its kind.
    pub kind: Kind,
    /// The attributes of its entries, when a value path may filter them.
    pub entries: Option<&'static [Attribute]>,
}

const fn attr(name: &'static str, keys: &'static [&'static str], kind: Kind) -> Attribute {
    Attribute { name, keys, kind, entries: None }
}

const EXACT: Kind = Kind::Text { case_exact: true };
const FOLDED: Kind = Kind::Text { case_exact: false };

static ROLE: [Attribute; 3] = [
    attr("roleId", &["roleId"], EXACT),
    attr("roleName", &["roleName"], FOLDED),
    attr("appGroup", &["appGroup"], Kind::Complex),
];

static APP_GROUP: [Attribute; 5] = [
    attr("appGroupId", &["appGroupId"], EXACT),
    attr("appGroupName", &["appGroupName"], FOLDED),
    attr("appGroupPermissions", &["appGroupPermissions"], EXACT),
    attr("team", &["team"], Kind::Complex),
    attr("appGroupPermissionSets", &["appGroupPermissionSets"], Kind::Complex),
];

/// The user's attributes, as the published schema types them.
pub static ATTRIBUTES: [Attribute; 21] = [
    attr("id", &["id"], EXACT),
    attr("externalId", &["externalId"], EXACT),
    attr("displayName", &["displayName"], FOLDED),
    attr("userName", &["userName"], FOLDED),
    attr("name", &["name"], Kind::Complex),
    attr("name.givenName", &["name", "givenName"], FOLDED),
    attr("name.familyName", &["name", "familyName"], FOLDED),
    attr("department", &["department"], EXACT),
    attr("active", &["active"], Kind::Boolean),
    attr("createdAt", &["createdAt"], FOLDED),
    attr("lastSignInAt", &["lastSignInAt"], FOLDED),
    attr("schemas", &["schemas"], EXACT),
    attr("meta", &["meta"], Kind::Complex),
    attr("meta.resourceType", &["meta", "resourceType"], EXACT),
    attr("meta.created", &["meta", "created"], Kind::DateTime),
    attr("meta.lastModified", &["meta", "lastModified"], Kind::DateTime),
    attr("meta.location", &["meta", "location"], EXACT),
    attr("meta.version", &["meta", "version"], EXACT),
    attr("permissions.companyPermissions", &["permissions", "companyPermissions"], EXACT),
    Attribute { name: "permissions.roles", keys: &["permissions", "roles"], kind: Kind::Complex, entries: Some(&ROLE) },
    Attribute {
        name: "permissions.appGroup",
        keys: &["permissions", "appGroup"],
        kind: Kind::Complex,
        entries: Some(&APP_GROUP),
    },
];

/// `permissions` itself (complex: `pr` only).
static PERMISSIONS: Attribute = attr("permissions", &["permissions"], Kind::Complex);

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Contains.
    Co,
    /// Starts with.
    Sw,
    /// Ends with.
    Ew,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
}

impl CompareOp {
    fn parse(word: &str) -> Option<CompareOp> {
        Some(match word.to_ascii_lowercase().as_str() {
            "eq" => CompareOp::Eq,
            "ne" => CompareOp::Ne,
            "co" => CompareOp::Co,
            "sw" => CompareOp::Sw,
            "ew" => CompareOp::Ew,
            "gt" => CompareOp::Gt,
            "ge" => CompareOp::Ge,
            "lt" => CompareOp::Lt,
            "le" => CompareOp::Le,
            _ => return None,
        })
    }

    fn is_text(self) -> bool {
        matches!(self, CompareOp::Co | CompareOp::Sw | CompareOp::Ew)
    }
}

/// A comparison's value, checked against the attribute's kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    /// Text.
    Text(String),
    /// A boolean.
    Bool(bool),
    /// A time.
    Time(Timestamp),
    /// `null`: `eq null` is "not present", `ne null` "present".
    Null,
}

/// A parsed filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    /// `attr op value`.
    Compare(&'static Attribute, CompareOp, Operand),
    /// `attr pr`.
    Present(&'static Attribute),
    /// `a and b`.
    And(Box<Filter>, Box<Filter>),
    /// `a or b`.
    Or(Box<Filter>, Box<Filter>),
    /// `not (a)`.
    Not(Box<Filter>),
    /// `attr[filter]`: some entry of a multi-valued attribute matches.
    Has(&'static Attribute, Box<Filter>),
}

impl PartialEq for Attribute {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Attribute {}

impl Filter {
    /// The name of a `userName eq "<name>"` filter, which the name index answers.
    pub fn user_name_eq(&self) -> Option<&str> {
        match self {
            Filter::Compare(a, CompareOp::Eq, Operand::Text(name)) if a.name == "userName" => Some(name),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    /// An attribute path or a keyword.
    Word(String),
    /// A JSON string, decoded.
    Str(String),
    /// A bare JSON value other than a string (`true`, `12`, `null`).
    Literal(String),
    /// `(`, `)`, `[`, `]`.
    Group(char),
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Word(w) | Token::Literal(w) => format!("'{w}'"),
            Token::Str(s) => format!("\"{s}\""),
            Token::Group(c) => format!("'{c}'"),
        }
    }
}

fn error(at: usize, what: impl std::fmt::Display) -> ScimError {
    ScimError::filter(format!("invalid filter at character {at}: {what}"))
}

/// The tokens and the (1-based) character position each starts at.
fn tokens(text: &str) -> Result<Vec<(usize, Token)>, ScimError> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if c == ' ' || c == '\t' {
            i += 1;
        } else if matches!(c, '(' | ')' | '[' | ']') {
            out.push((i + 1, Token::Group(c)));
            i += 1;
        } else if c == '"' {
            // Find the closing quote, stepping over escapes, then let the JSON parser
            // decode exactly that literal (it rejects bad escapes and raw controls).
            let mut j = i + 1;
            loop {
                match chars.get(j) {
                    None => return Err(error(i + 1, "this string is not closed")),
                    Some((_, '\\')) => j += 2,
                    Some((_, '"')) => break,
                    Some(_) => j += 1,
                }
            }
            let end = chars[j].0 + 1;
            let s: String =
                serde_json::from_str(&text[at..end]).map_err(|_| error(i + 1, "this string has an invalid escape"))?;
            out.push((i + 1, Token::Str(s)));
            i = j + 1;
        } else {
            let mut j = i;
            while j < chars.len() && !matches!(chars[j].1, ' ' | '\t' | '(' | ')' | '[' | ']' | '"') {
                j += 1;
            }
            let end = chars.get(j).map_or(text.len(), |(e, _)| *e);
            let word = &text[at..end];
            let literal = word == "true"
                || word == "false"
                || word == "null"
                || word.parse::<f64>().is_ok_and(|_| word.starts_with(|c: char| c == '-' || c.is_ascii_digit()));
            out.push((i + 1, if literal { Token::Literal(word.to_string()) } else { Token::Word(word.to_string()) }));
            i = j;
        }
    }
    Ok(out)
}

/// `path` without a leading `<urn>:` (ASCII case-insensitive), or `None`.
fn after_urn<'a>(path: &'a str, urn: &str) -> Option<&'a str> {
    let n = urn.len();
    match path.get(..n) {
        Some(prefix) if prefix.eq_ignore_ascii_case(urn) => path[n..].strip_prefix(':'),
        _ => None,
    }
}

/// Where a path is resolved: among the user's attributes, or among the entries'
/// attributes inside a value path (`permissions.roles[roleName eq "x"]`).
#[derive(Clone, Copy)]
enum Scope {
    User,
    Entries(&'static [Attribute]),
}

/// Resolves an attribute path in its scope.
fn resolve(path: &str, at: usize, scope: Scope) -> Result<&'static Attribute, ScimError> {
    let (bare, among): (&str, &'static [Attribute]) = match scope {
        Scope::Entries(entries) => (path, entries),
        Scope::User => match after_urn(path, ENTERPRISE_URN) {
            // The extension's department is the user's department.
            Some(rest) if rest.eq_ignore_ascii_case("department") => ("department", &ATTRIBUTES),
            Some(_) => return Err(error(at, format!("'{path}' is not an attribute of this resource"))),
            None if path.eq_ignore_ascii_case("permissions") => return Ok(&PERMISSIONS),
            None => (after_urn(path, USER_URN).unwrap_or(path), &ATTRIBUTES),
        },
    };
    among.iter().find(|a| a.name.eq_ignore_ascii_case(bare)).ok_or_else(|| {
        let names: Vec<&str> = among.iter().map(|a| a.name).collect();
        error(at, format!("'{path}' is not an attribute of this resource (filterable: {})", names.join(", ")))
    })
}

/// Checks a comparison against the attribute's kind and makes its operand.
fn operand(attr: &Attribute, op: CompareOp, value: &Token, at: usize) -> Result<Operand, ScimError> {
    let name = attr.name;
    if *value == Token::Literal("null".into()) {
        return match op {
            CompareOp::Eq | CompareOp::Ne => Ok(Operand::Null),
            _ => Err(error(at, "null is compared only with 'eq' or 'ne'")),
        };
    }
    match (attr.kind, value) {
        (Kind::Complex, _) => Err(error(
            at,
            format!(
                "'{name}' has sub-attributes: compare one of them, test it with 'pr', or filter its entries with [...]"
            ),
        )),
        (Kind::Boolean, _) if op != CompareOp::Eq && op != CompareOp::Ne => {
            Err(error(at, format!("'{name}' is a boolean: only 'eq', 'ne' and 'pr' apply")))
        }
        (Kind::Boolean, Token::Literal(l)) if l == "true" || l == "false" => Ok(Operand::Bool(l == "true")),
        (Kind::Boolean, other) => {
            Err(error(at, format!("'{name}' is compared with true or false, not {}", other.describe())))
        }
        (Kind::DateTime, _) if op.is_text() => {
            Err(error(at, format!("'{name}' is a time: 'co', 'sw' and 'ew' do not apply")))
        }
        (Kind::DateTime, Token::Str(s)) => Timestamp::parse(s)
            .map(Operand::Time)
            .ok_or_else(|| error(at, format!("'{s}' is not an RFC 3339 time, as '{name}' needs"))),
        (Kind::Text { .. }, Token::Str(s)) => Ok(Operand::Text(s.clone())),
        (Kind::DateTime | Kind::Text { .. }, other) => {
            Err(error(at, format!("'{name}' is compared with a quoted string, not {}", other.describe())))
        }
    }
}

/// Deepest nesting of parentheses, `not` and value paths, and most comparisons in
/// one filter: bounds that keep parsing and evaluating a hostile filter shallow.
pub const MAX_DEPTH: usize = 16;
/// See [`MAX_DEPTH`].
pub const MAX_COMPARISONS: usize = 64;

struct Parser {
    toks: Vec<(usize, Token)>,
    next: usize,
    depth: usize,
    comparisons: usize,
    /// The position just past the text, for "ended early" messages.
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&(usize, Token)> {
        self.toks.get(self.next)
    }

    fn keyword(&mut self, word: &str) -> bool {
        let found = matches!(self.peek(), Some((_, Token::Word(w))) if w.eq_ignore_ascii_case(word));
        self.next += usize::from(found);
        found
    }

    fn group(&mut self, c: char) -> bool {
        let found = matches!(self.peek(), Some((_, Token::Group(g))) if *g == c);
        self.next += usize::from(found);
        found
    }

    fn expect_group(&mut self, c: char) -> Result<(), ScimError> {
        if self.group(c) {
            return Ok(());
        }
        Err(match self.peek() {
            Some((at, t)) => error(*at, format!("expected '{c}', found {}", t.describe())),
            None => error(self.end, format!("expected '{c}' before the end")),
        })
    }

    fn or(&mut self, scope: Scope) -> Result<Filter, ScimError> {
        let mut left = self.and(scope)?;
        while self.keyword("or") {
            left = Filter::Or(Box::new(left), Box::new(self.and(scope)?));
        }
        Ok(left)
    }

    fn and(&mut self, scope: Scope) -> Result<Filter, ScimError> {
        let mut left = self.unary(scope)?;
        while self.keyword("and") {
            left = Filter::And(Box::new(left), Box::new(self.unary(scope)?));
        }
        Ok(left)
    }

    /// One more level of nesting, refused past [`MAX_DEPTH`].
    fn deeper(&mut self, at: usize) -> Result<(), ScimError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(error(at, format!("the filter nests deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn unary(&mut self, scope: Scope) -> Result<Filter, ScimError> {
        let at = self.peek().map_or(self.end, |(at, _)| *at);
        let depth = self.depth;
        let inner = self.nested(scope, at);
        self.depth = depth;
        inner
    }

    fn nested(&mut self, scope: Scope, at: usize) -> Result<Filter, ScimError> {
        if matches!(self.peek(), Some((_, Token::Word(w))) if w.eq_ignore_ascii_case("not"))
            || matches!(self.peek(), Some((_, Token::Group('('))))
        {
            self.deeper(at)?;
        }
        if self.keyword("not") {
            self.expect_group('(')?;
            let inner = self.or(scope)?;
            self.expect_group(')')?;
            return Ok(Filter::Not(Box::new(inner)));
        }
        if self.group('(') {
            let inner = self.or(scope)?;
            self.expect_group(')')?;
            return Ok(inner);
        }
        self.comparison(scope)
    }

    fn comparison(&mut self, scope: Scope) -> Result<Filter, ScimError> {
        let (at, path) = match self.peek() {
            Some((at, Token::Word(w))) => (*at, w.clone()),
            Some((at, t)) => return Err(error(*at, format!("expected an attribute, found {}", t.describe()))),
            None => return Err(error(self.end, "expected an attribute before the end")),
        };
        self.next += 1;
        self.comparisons += 1;
        if self.comparisons > MAX_COMPARISONS {
            return Err(error(at, format!("the filter has more than {MAX_COMPARISONS} comparisons")));
        }
        let attr = resolve(&path, at, scope)?;
        if self.group('[') {
            self.deeper(at)?;
            let entries = match (attr.entries, scope) {
                (Some(entries), Scope::User) => entries,
                (_, Scope::Entries(_)) => return Err(error(at, "value paths cannot be nested")),
                (None, Scope::User) => return Err(error(at, format!("'{path}' has no entries to filter with [...]"))),
            };
            let inner = self.or(Scope::Entries(entries))?;
            self.expect_group(']')?;
            return Ok(Filter::Has(attr, Box::new(inner)));
        }
        let (op_at, op) = match self.peek() {
            Some((_, Token::Word(w))) if w.eq_ignore_ascii_case("pr") => {
                self.next += 1;
                return Ok(Filter::Present(attr));
            }
            Some((op_at, Token::Word(w))) => match CompareOp::parse(w) {
                Some(op) => (*op_at, op),
                None => {
                    return Err(error(*op_at, format!("'{w}' is not a SCIM operator (eq ne co sw ew gt ge lt le pr)")))
                }
            },
            Some((op_at, t)) => return Err(error(*op_at, format!("expected an operator, found {}", t.describe()))),
            None => return Err(error(self.end, format!("expected an operator after '{path}'"))),
        };
        self.next += 1;
        let (value_at, value) = match self.peek() {
            Some((value_at, t @ (Token::Str(_) | Token::Literal(_) | Token::Word(_)))) => (*value_at, t.clone()),
            Some((value_at, t)) => return Err(error(*value_at, format!("expected a value, found {}", t.describe()))),
            None => return Err(error(self.end, format!("'{}' needs a value", op_name(op_at, &self.toks)))),
        };
        self.next += 1;
        Ok(Filter::Compare(attr, op, operand(attr, op, &value, value_at)?))
    }
}

fn op_name(at: usize, toks: &[(usize, Token)]) -> String {
    toks.iter().find(|(a, _)| *a == at).map_or_else(String::new, |(_, t)| match t {
        Token::Word(w) => w.clone(),
        other => other.describe(),
    })
}

/// Parses a `filter` value.
pub fn parse(text: &str) -> Result<Filter, ScimError> {
    let toks = tokens(text)?;
    if toks.is_empty() {
        return Err(error(1, "the filter is empty"));
    }
    let mut parser = Parser { toks, next: 0, depth: 0, comparisons: 0, end: text.chars().count() + 1 };
    let filter = parser.or(Scope::User)?;
    match parser.peek() {
        None => Ok(filter),
        Some((at, t)) => Err(error(*at, format!("unexpected {} (join comparisons with 'and' or 'or')", t.describe()))),
    }
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
