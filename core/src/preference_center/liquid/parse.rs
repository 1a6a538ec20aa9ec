//! Parsing: segments into a tree of nodes, every name checked.

use std::collections::BTreeSet;

use super::lex::{self, Lines, Segment, Tok};
use super::{Attr, FieldRef, Pos, TemplateError, Value, Var, MAX_DEPTH};

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

/// The groups a template names, each with where.
pub(super) type GroupRefs = Vec<(String, Pos)>;

/// Parses a template: its nodes and the groups it names.
pub(super) fn parse(src: &str) -> Result<(Vec<Node>, GroupRefs), TemplateError> {
    let lines = Lines::new(src);
    let segments = lex::segments(src, &lines)?;
    // Liquid variables exist from where they are set; a page may read one in a
    // branch written before it, so every name the page sets anywhere is known.
    let locals = segments
        .iter()
        .filter_map(|s| match s {
            Segment::Tag(_, name, args) if name == "capture" || name == "assign" => {
                args.split(|c: char| c.is_whitespace() || c == '=').next().map(str::to_string)
            }
            _ => None,
        })
        .collect();
    let mut p = Parser { segments, at: 0, locals, groups: Vec::new() };
    let (nodes, end) = p.block(0, &[])?;
    debug_assert!(end.is_none());
    Ok((nodes, p.groups))
}

struct Parser {
    segments: Vec<Segment>,
    at: usize,
    locals: BTreeSet<String>,
    groups: Vec<(String, Pos)>,
}

/// The tag that ended a block: name, arguments, position.
type End = (String, String, Pos);

fn fail(pos: Pos, message: impl Into<String>) -> TemplateError {
    TemplateError { pos, message: message.into() }
}

impl Parser {
    /// Nodes up to one of the tags `ends` (returned), or to the end of the source
    /// when `ends` is empty.
    fn block(&mut self, depth: usize, ends: &[&str]) -> Result<(Vec<Node>, Option<End>), TemplateError> {
        let mut nodes = Vec::new();
        while self.at < self.segments.len() {
            let segment = self.segments[self.at].clone();
            self.at += 1;
            match segment {
                Segment::Text(t) => nodes.push(Node::Text(t)),
                Segment::Output(pos, inner_at, inner) => {
                    let (toks, starts) = lex::tokens_at(&inner, pos)?;
                    let places = Places { text: &inner, at: inner_at, starts: &starts };
                    let mut c = Cursor { toks: &toks, at: 0, pos, places: Some(places) };
                    let expr = self.expr(&mut c)?;
                    c.done("output")?;
                    nodes.push(Node::Output(expr));
                }
                Segment::Tag(pos, name, args) => {
                    if ends.contains(&name.as_str()) {
                        return Ok((nodes, Some((name, args, pos))));
                    }
                    // Another block's end inside this one: this one is not closed.
                    if !ends.is_empty() && is_closing(&name) {
                        return Err(fail(Pos { line: 0, column: 0 }, "not closed"));
                    }
                    nodes.push(self.tag(depth, pos, &name, &args)?);
                }
            }
        }
        match ends.first() {
            None => Ok((nodes, None)),
            Some(end) => Err(fail(Pos { line: 0, column: 0 }, format!("missing '{{% {end} %}}'"))),
        }
    }

    fn nested(&mut self, depth: usize, pos: Pos, open: &str, ends: &[&str]) -> Result<(Vec<Node>, End), TemplateError> {
        if depth >= MAX_DEPTH {
            return Err(fail(pos, format!("blocks are nested more than {MAX_DEPTH} deep")));
        }
        match self.block(depth + 1, ends) {
            Ok((nodes, Some(end))) => Ok((nodes, end)),
            Ok((_, None)) => Err(fail(pos, format!("'{{% {open} %}}' is not closed"))),
            // An unclosed inner block reports where the outer one opened.
            Err(e) if e.pos.line == 0 => Err(fail(pos, format!("'{{% {open} %}}' is not closed"))),
            Err(e) => Err(e),
        }
    }

    fn tag(&mut self, depth: usize, pos: Pos, name: &str, args: &str) -> Result<Node, TemplateError> {
        match name {
            "if" | "unless" => {
                let end = if name == "if" { "endif" } else { "endunless" };
                let mut cond = self.cond_of(pos, args)?;
                if name == "unless" {
                    cond = Cond::Not(Box::new(cond));
                }
                let mut branches = Vec::new();
                let mut otherwise = Vec::new();
                loop {
                    let (nodes, (tag, tag_args, tag_pos)) = self.nested(depth, pos, name, &["elsif", "else", end])?;
                    branches.push((cond, nodes));
                    match tag.as_str() {
                        "elsif" => cond = self.cond_of(tag_pos, &tag_args)?,
                        "else" => {
                            let (nodes, (tag, _, tag_pos)) = self.nested(depth, pos, name, &["elsif", "else", end])?;
                            if tag != end {
                                return Err(fail(tag_pos, format!("'{{% {tag} %}}' after '{{% else %}}'")));
                            }
                            otherwise = nodes;
                            break;
                        }
                        _ => break,
                    }
                }
                Ok(Node::If(branches, otherwise))
            }
            "capture" => {
                let var = local_name(pos, args)?;
                let (nodes, _) = self.nested(depth, pos, "capture", &["endcapture"])?;
                Ok(Node::Capture(var, nodes))
            }
            "assign" => {
                let (var, value) =
                    args.split_once('=').ok_or_else(|| fail(pos, "write '{% assign name = value %}'"))?;
                let var = local_name(pos, var)?;
                let toks = lex::tokens(value, pos)?;
                let mut c = Cursor { toks: &toks, at: 0, pos, places: None };
                let expr = self.expr(&mut c)?;
                c.done("assign")?;
                Ok(Node::Assign(var, expr))
            }
            "form_field_name" => self.form_field(pos, args).map(Node::Field),
            "elsif" | "else" | "endif" | "endunless" | "endcapture" | "endcomment" | "endraw" => {
                Err(fail(pos, format!("'{{% {name} %}}' without its opening tag")))
            }
            _ => Err(fail(pos, format!("unknown tag '{name}'"))),
        }
    }

    fn form_field(&mut self, pos: Pos, args: &str) -> Result<FieldRef, TemplateError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        match words.as_slice() {
            [":email_global_state"] => Ok(FieldRef::EmailGlobal),
            [":subscription_group", id] => {
                let id = id.strip_prefix("${").and_then(|i| i.strip_suffix('}')).unwrap_or(id).trim();
                self.groups.push((id.to_string(), pos));
                Ok(FieldRef::Group(id.to_string()))
            }
            _ => Err(fail(
                pos,
                "form_field_name takes ':email_global_state' or ':subscription_group <subscription group id>'",
            )),
        }
    }

    fn cond_of(&mut self, pos: Pos, args: &str) -> Result<Cond, TemplateError> {
        let toks = lex::tokens(args, pos)?;
        if toks.is_empty() {
            return Err(fail(pos, "a condition is missing"));
        }
        let mut c = Cursor { toks: &toks, at: 0, pos, places: None };
        let cond = self.cond(&mut c)?;
        c.done("condition")?;
        Ok(cond)
    }

    fn cond(&mut self, c: &mut Cursor<'_>) -> Result<Cond, TemplateError> {
        let left = self.operand(c)?;
        let cmp = match c.peek() {
            Some(Tok::Punct(op)) => {
                let cmp = match *op {
                    "==" => Cmp::Eq,
                    "!=" => Cmp::Ne,
                    "<" => Cmp::Lt,
                    ">" => Cmp::Gt,
                    "<=" => Cmp::Le,
                    ">=" => Cmp::Ge,
                    other => return Err(fail(c.pos, format!("unexpected '{other}' in a condition"))),
                };
                c.at += 1;
                Some((cmp, self.operand(c)?))
            }
            Some(Tok::Ident(w)) if w == "contains" => {
                c.at += 1;
                Some((Cmp::Contains, self.operand(c)?))
            }
            _ => None,
        };
        let test = Cond::Test(left, cmp);
        match c.peek() {
            Some(Tok::Ident(w)) if w == "and" || w == "or" => {
                let and = w == "and";
                c.at += 1;
                let right = Box::new(self.cond(c)?);
                Ok(if and { Cond::And(Box::new(test), right) } else { Cond::Or(Box::new(test), right) })
            }
            _ => Ok(test),
        }
    }

    fn expr(&mut self, c: &mut Cursor<'_>) -> Result<Expr, TemplateError> {
        let base = self.operand(c)?;
        let mut filters = Vec::new();
        while c.eat("|") {
            // Errors about a filter point at its name.
            let name_pos = c.place();
            let name = match c.next() {
                Some(Tok::Ident(n)) => n.clone(),
                _ => return Err(fail(name_pos, "a filter name must follow '|'")),
            };
            let mut args = Vec::new();
            if c.eat(":") {
                args.push(self.operand(c)?);
                while c.eat(",") {
                    args.push(self.operand(c)?);
                }
            }
            filters.push(filter(name_pos, &name, args)?);
        }
        Ok(Expr { base, filters })
    }

    fn operand(&mut self, c: &mut Cursor<'_>) -> Result<Operand, TemplateError> {
        let pos = c.pos;
        let tok = c.next().cloned().ok_or_else(|| fail(pos, "a value is missing"))?;
        match tok {
            // The page's author wrote it: output as written (only values from user
            // data are escaped).
            Tok::Str(s) => Ok(Operand::Lit(Value::Markup(s))),
            Tok::Num(n) => Ok(Operand::Lit(Value::Num(n))),
            Tok::Dollar(name) => Attr::parse(&name)
                .map(|a| Operand::Var(Var::Attr(a)))
                .ok_or_else(|| fail(pos, format!("unknown attribute '${{{name}}}'"))),
            Tok::Punct(p) => Err(fail(pos, format!("unexpected '{p}'"))),
            Tok::Ident(word) => match word.as_str() {
                "true" => Ok(Operand::Lit(Value::Bool(true))),
                "false" => Ok(Operand::Lit(Value::Bool(false))),
                "nil" | "null" => Ok(Operand::Lit(Value::Nil)),
                "empty" => Ok(Operand::Empty),
                "blank" => Ok(Operand::Blank),
                "preference_center_submit_url" => Ok(Operand::Var(Var::SubmitUrl)),
                "subscribed_state" | "custom_attribute" => {
                    let key = match (c.eat("."), c.next()) {
                        (true, Some(Tok::Dollar(k))) => k.clone(),
                        _ => return Err(fail(pos, format!("write '{word}.${{name}}'"))),
                    };
                    if word == "custom_attribute" {
                        return Ok(Operand::Var(Var::Custom(key)));
                    }
                    if key == "email_global" {
                        return Ok(Operand::Var(Var::EmailGlobal));
                    }
                    self.groups.push((key.clone(), pos));
                    Ok(Operand::Var(Var::GroupState(key)))
                }
                _ if self.locals.contains(&word) => Ok(Operand::Var(Var::Local(word))),
                _ => Err(fail(pos, format!("unknown variable '{word}'"))),
            },
        }
    }
}

/// Whether the nodes set a variable (`capture`, `assign`) anywhere.
pub(super) fn sets_variables(nodes: &[Node]) -> bool {
    nodes.iter().any(|n| match n {
        Node::Capture(..) | Node::Assign(..) => true,
        Node::If(branches, otherwise) => {
            branches.iter().any(|(_, body)| sets_variables(body)) || sets_variables(otherwise)
        }
        _ => false,
    })
}

fn is_closing(name: &str) -> bool {
    matches!(name, "elsif" | "else" | "endif" | "endunless" | "endcapture")
}

fn local_name(pos: Pos, text: &str) -> Result<String, TemplateError> {
    let name = text.trim();
    let ok = name.starts_with(|c: char| c.is_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    let reserved = ["subscribed_state", "custom_attribute", "preference_center_submit_url", "empty", "blank", "nil"];
    if !ok || reserved.contains(&name) {
        return Err(fail(pos, format!("'{name}' cannot be a variable name")));
    }
    Ok(name.to_string())
}

fn filter(pos: Pos, name: &str, mut args: Vec<Operand>) -> Result<Filter, TemplateError> {
    let nothing = || Operand::Lit(Value::Markup(String::new()));
    let two = |args: &mut Vec<Operand>| {
        let second = args.pop().unwrap_or_else(nothing);
        (args.pop().unwrap_or_else(nothing), second)
    };
    match (name, args.len()) {
        ("truncate", 1 | 2) => {
            let ellipsis = if args.len() == 2 { args.pop() } else { None };
            return Ok(Filter::Truncate(args.pop().unwrap_or_else(nothing), ellipsis));
        }
        ("truncate", _) => return Err(fail(pos, "the filter 'truncate' takes 1 or 2 arguments")),
        ("replace", 2) => {
            let (from, to) = two(&mut args);
            return Ok(Filter::Replace(from, to));
        }
        ("replace_first", 2) => {
            let (from, to) = two(&mut args);
            return Ok(Filter::ReplaceFirst(from, to));
        }
        ("remove", 1) => return Ok(Filter::Replace(args.pop().unwrap_or_else(nothing), nothing())),
        ("remove_first", 1) => return Ok(Filter::ReplaceFirst(args.pop().unwrap_or_else(nothing), nothing())),
        ("replace" | "replace_first", _) => return Err(fail(pos, format!("the filter '{name}' takes 2 argument(s)"))),
        ("remove" | "remove_first", _) => return Err(fail(pos, format!("the filter '{name}' takes 1 argument(s)"))),
        _ => {}
    }
    let arity = match name {
        "default" | "append" | "prepend" => 1,
        "upcase" | "downcase" | "capitalize" | "strip" | "escape" | "size" => 0,
        _ => return Err(fail(pos, format!("unknown filter '{name}'"))),
    };
    if args.len() != arity {
        return Err(fail(pos, format!("the filter '{name}' takes {arity} argument(s)")));
    }
    Ok(match (name, args.pop()) {
        ("default", Some(a)) => Filter::Default(a),
        ("append", Some(a)) => Filter::Append(a),
        ("prepend", Some(a)) => Filter::Prepend(a),
        ("upcase", _) => Filter::Upcase,
        ("downcase", _) => Filter::Downcase,
        ("capitalize", _) => Filter::Capitalize,
        ("strip", _) => Filter::Strip,
        ("escape", _) => Filter::Escape,
        _ => Filter::Size,
    })
}

struct Cursor<'t> {
    toks: &'t [Tok],
    at: usize,
    /// Where the segment starts: errors about it as a whole point there.
    pos: Pos,
    /// Where each token is, when known (an output's).
    places: Option<Places<'t>>,
}

/// Where the tokens of an output are: its inside, where that starts, and the byte
/// offset of each token in it.
struct Places<'t> {
    text: &'t str,
    at: Pos,
    starts: &'t [usize],
}

impl<'t> Cursor<'t> {
    /// Where the next token is (the segment's start when unknown).
    fn place(&self) -> Pos {
        match &self.places {
            Some(p) => p.starts.get(self.at).map_or(self.pos, |&o| lex::pos_within(p.text, p.at, o)),
            None => self.pos,
        }
    }

    fn peek(&self) -> Option<&'t Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> Option<&'t Tok> {
        let t = self.toks.get(self.at);
        self.at += 1;
        t
    }

    fn eat(&mut self, punct: &str) -> bool {
        let hit = matches!(self.peek(), Some(Tok::Punct(p)) if *p == punct);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn done(&self, what: &str) -> Result<(), TemplateError> {
        match self.peek() {
            None => Ok(()),
            Some(t) => Err(fail(self.pos, format!("unexpected {} in the {what}", describe(t)))),
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("'{s}'"),
        Tok::Dollar(s) => format!("'${{{s}}}'"),
        Tok::Str(s) => format!("string '{s}'"),
        Tok::Num(n) => format!("number {n}"),
        Tok::Punct(p) => format!("'{p}'"),
    }
}
