//! The syntax tree of a template, as parsed and checked.

use super::{FieldRef, Pos, TemplateError, Value, Var};

/// An error at `pos`.
pub(super) fn fail(pos: Pos, message: impl Into<String>) -> TemplateError {
    TemplateError { pos, message: message.into() }
}

/// A node of the tree.
#[derive(Clone, Debug)]
pub(super) enum Node {
    Text(String),
    Output(Expr),
    Field(FieldRef),
    /// Branches tried in order, then the `else` nodes.
    If(Vec<(Cond, Vec<Node>)>, Vec<Node>),
    Capture(String, Vec<Node>),
    Assign(String, Expr),
    /// The subject, each `when`'s values and body (every matching one renders, as
    /// in Liquid), then the `else` nodes (when none matched).
    Case(Operand, Vec<(Vec<Operand>, Vec<Node>)>, Vec<Node>),
    For(Box<For>),
    Break,
    Continue,
}

/// A `for` loop.
#[derive(Clone, Debug)]
pub(super) struct For {
    pub var: String,
    pub source: Source,
    pub limit: Option<Operand>,
    pub offset: Option<Operand>,
    pub reversed: bool,
    pub body: Vec<Node>,
    /// Rendered when there is nothing to loop over.
    pub otherwise: Vec<Node>,
}

/// What a `for` loops over.
#[derive(Clone, Debug)]
pub(super) enum Source {
    /// `(first..last)`, both included.
    Range(Operand, Operand),
    /// A list (or one value, looped over once).
    Value(Operand),
}

/// What `forloop.<name>` tells inside a loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ForAttr {
    Index,
    Index0,
    Rindex,
    Rindex0,
    First,
    Last,
    Length,
}

/// An operand and its filters.
#[derive(Clone, Debug)]
pub(super) struct Expr {
    pub base: Operand,
    pub filters: Vec<Filter>,
}

#[derive(Clone, Debug)]
pub(super) enum Operand {
    Lit(Value),
    /// Liquid's `empty`: equal to an empty string.
    Empty,
    /// Liquid's `blank`: equal to nil, false, or a string of whitespace.
    Blank,
    Var(Var),
    /// `forloop.<name>` of the innermost loop.
    ForLoop(ForAttr),
}

#[derive(Clone, Debug)]
pub(super) enum Filter {
    Default(Operand),
    Append(Operand),
    Prepend(Operand),
    Upcase,
    Downcase,
    Capitalize,
    Strip,
    Escape,
    Size,
    /// At most this many characters, the last ones the ellipsis (default `...`).
    Truncate(Operand, Option<Operand>),
    /// Every occurrence of the first replaced by the second (`remove`: by nothing).
    Replace(Operand, Operand),
    /// The first occurrence of the first replaced by the second (`remove_first`).
    ReplaceFirst(Operand, Operand),
    /// Text cut at every occurrence of the separator into a list.
    Split(Operand),
    /// A list's items joined by the separator (default one space).
    Join(Option<Operand>),
    First,
    Last,
    /// A time formatted (strftime), the format checked when parsed.
    Date(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cmp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    Contains,
}

/// A condition. Liquid joins `and` / `or` from the right, without precedence.
#[derive(Clone, Debug)]
pub(super) enum Cond {
    Test(Operand, Option<(Cmp, Operand)>),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
}
