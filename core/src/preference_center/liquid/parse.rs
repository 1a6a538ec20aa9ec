//! Parsing: segments into a tree of nodes, every name checked.

use std::collections::BTreeSet;

use super::ast::{fail, Cmp, Cond, Expr, For, ForAttr, Node, Operand, Source};
use super::lex::{self, Lines, Segment, Tok};
use super::{Attr, FieldRef, Pos, TemplateError, Value, Var, MAX_DEPTH, MAX_ITERATIONS};

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
            Segment::Tag(_, name, args) if name == "capture" || name == "assign" || name == "for" => {
                args.split(|c: char| c.is_whitespace() || c == '=').find(|w| !w.is_empty()).map(str::to_string)
            }
            _ => None,
        })
        .collect();
    let mut p = Parser { segments, at: 0, locals, groups: Vec::new(), loops: 0 };
    let (nodes, end) = p.block(0, &[])?;
    debug_assert!(end.is_none());
    Ok((nodes, p.groups))
}

struct Parser {
    segments: Vec<Segment>,
    at: usize,
    locals: BTreeSet<String>,
    groups: Vec<(String, Pos)>,
    /// Loops around the segment being parsed (`forloop`, `break` and `continue`
    /// need one).
    loops: usize,
}

/// The tag that ended a block: name, arguments, position.
type End = (String, String, Pos);

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
            "case" => self.case(depth, pos, args),
            "for" => self.for_loop(depth, pos, args),
            "break" | "continue" if self.loops == 0 => Err(fail(pos, format!("'{{% {name} %}}' outside a for loop"))),
            "break" | "continue" if !args.trim().is_empty() => {
                Err(fail(pos, format!("'{{% {name} %}}' takes nothing")))
            }
            "break" => Ok(Node::Break),
            "continue" => Ok(Node::Continue),
            "elsif" | "else" | "endif" | "endunless" | "endcapture" | "endcomment" | "endraw" | "when" | "endcase"
            | "endfor" => Err(fail(pos, format!("'{{% {name} %}}' without its opening tag"))),
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

    /// `{% case x %}{% when a, b %}...{% else %}...{% endcase %}` (`or` also
    /// separates values; text before the first `when` is not rendered).
    fn case(&mut self, depth: usize, pos: Pos, args: &str) -> Result<Node, TemplateError> {
        let toks = lex::tokens(args, pos)?;
        let mut c = Cursor { toks: &toks, at: 0, pos, places: None };
        let subject = self.operand(&mut c)?;
        c.done("case")?;
        const ENDS: [&str; 3] = ["when", "else", "endcase"];
        let (_, mut end) = self.nested(depth, pos, "case", &ENDS)?;
        let mut whens = Vec::new();
        loop {
            let (tag, tag_args, tag_pos) = end;
            match tag.as_str() {
                "when" => {
                    let toks = lex::tokens(&tag_args, tag_pos)?;
                    let mut c = Cursor { toks: &toks, at: 0, pos: tag_pos, places: None };
                    let mut values = vec![self.operand(&mut c)?];
                    while c.eat(",") || matches!(c.peek(), Some(Tok::Ident(w)) if w == "or") && c.skip() {
                        values.push(self.operand(&mut c)?);
                    }
                    c.done("when")?;
                    let (body, next) = self.nested(depth, pos, "case", &ENDS)?;
                    whens.push((values, body));
                    end = next;
                }
                "else" => {
                    let (body, (tag, _, tag_pos)) = self.nested(depth, pos, "case", &ENDS)?;
                    if tag != "endcase" {
                        return Err(fail(tag_pos, format!("'{{% {tag} %}}' after '{{% else %}}'")));
                    }
                    return Ok(Node::Case(subject, whens, body));
                }
                _ => return Ok(Node::Case(subject, whens, Vec::new())),
            }
        }
    }

    /// `{% for x in list [limit: n] [offset: n] [reversed] %}...{% else %}...{% endfor %}`.
    fn for_loop(&mut self, depth: usize, pos: Pos, args: &str) -> Result<Node, TemplateError> {
        let toks = lex::tokens(args, pos)?;
        let mut c = Cursor { toks: &toks, at: 0, pos, places: None };
        let shape = "write '{% for item in list %}' or '{% for i in (1..n) %}'";
        let var = match (c.next(), c.next()) {
            (Some(Tok::Ident(v)), Some(Tok::Ident(word))) if word == "in" => local_name(pos, v)?,
            _ => return Err(fail(pos, shape)),
        };
        let source = if c.eat("(") {
            let first = self.operand(&mut c)?;
            if !c.eat("..") {
                return Err(fail(pos, "a range is written '(first..last)'"));
            }
            let last = self.operand(&mut c)?;
            if !c.eat(")") {
                return Err(fail(pos, "a range is written '(first..last)'"));
            }
            if let (Operand::Lit(Value::Num(a)), Operand::Lit(Value::Num(b))) = (&first, &last) {
                if b - a >= MAX_ITERATIONS as f64 {
                    return Err(fail(pos, format!("a loop may make at most {MAX_ITERATIONS} passes")));
                }
            }
            Source::Range(first, last)
        } else {
            Source::Value(self.operand(&mut c)?)
        };
        let (mut limit, mut offset, mut reversed) = (None, None, false);
        while let Some(Tok::Ident(word)) = c.peek() {
            c.at += 1;
            match word.as_str() {
                "reversed" => reversed = true,
                "limit" | "offset" if c.eat(":") => {
                    let value = Some(self.operand(&mut c)?);
                    if word == "limit" {
                        limit = value;
                    } else {
                        offset = value;
                    }
                }
                other => return Err(fail(pos, format!("unknown loop option '{other}' (limit, offset, reversed)"))),
            }
        }
        c.done("for")?;
        self.loops += 1;
        let body = self.nested(depth, pos, "for", &["else", "endfor"]);
        self.loops -= 1;
        let (body, (tag, _, _)) = body?;
        let otherwise = if tag == "else" { self.nested(depth, pos, "for", &["endfor"])?.0 } else { Vec::new() };
        Ok(Node::For(Box::new(For { var, source, limit, offset, reversed, body, otherwise })))
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
            filters.push(super::filter::filter(name_pos, &name, args)?);
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
                "forloop" => {
                    if self.loops == 0 {
                        return Err(fail(pos, "'forloop' outside a for loop"));
                    }
                    let name = match (c.eat("."), c.next()) {
                        (true, Some(Tok::Ident(n))) => n.clone(),
                        _ => {
                            return Err(fail(
                                pos,
                                "write 'forloop.index' (or index0, rindex, rindex0, first, last, length)",
                            ))
                        }
                    };
                    let attr = match name.as_str() {
                        "index" => ForAttr::Index,
                        "index0" => ForAttr::Index0,
                        "rindex" => ForAttr::Rindex,
                        "rindex0" => ForAttr::Rindex0,
                        "first" => ForAttr::First,
                        "last" => ForAttr::Last,
                        "length" => ForAttr::Length,
                        other => return Err(fail(pos, format!("unknown 'forloop.{other}'"))),
                    };
                    Ok(Operand::ForLoop(attr))
                }
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
        Node::Case(_, whens, otherwise) => whens.iter().any(|(_, b)| sets_variables(b)) || sets_variables(otherwise),
        // A loop sets its variable.
        Node::For(_) => true,
        _ => false,
    })
}

fn is_closing(name: &str) -> bool {
    matches!(name, "elsif" | "else" | "endif" | "endunless" | "endcapture" | "when" | "endcase" | "endfor")
}

fn local_name(pos: Pos, text: &str) -> Result<String, TemplateError> {
    let name = text.trim();
    let ok = name.starts_with(|c: char| c.is_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    let reserved =
        ["subscribed_state", "custom_attribute", "preference_center_submit_url", "empty", "blank", "nil", "forloop"];
    if !ok || reserved.contains(&name) {
        return Err(fail(pos, format!("'{name}' cannot be a variable name")));
    }
    Ok(name.to_string())
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

    /// Steps over the next token (true, for use in conditions).
    fn skip(&mut self) -> bool {
        self.at += 1;
        true
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
