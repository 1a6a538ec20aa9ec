//! Lexing: the source cut into text, `{{ output }}` and `{% tag %}` segments (with
//! whitespace control and the raw bodies of `comment` and `raw` already resolved),
//! and the inside of a segment cut into expression tokens.

use super::{Pos, TemplateError};

/// One piece of the source.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Segment {
    /// Literal text (markup written by the page's author).
    Text(String),
    /// The inside of `{{ ... }}`: where the `{{` is, where the inside starts, and
    /// the inside.
    Output(Pos, Pos, String),
    /// The inside of `{% ... %}`: the tag name and the rest.
    Tag(Pos, String, String),
}

/// Line and column (1-based, in characters) of byte offsets of one source.
pub(super) struct Lines<'a> {
    src: &'a str,
    starts: Vec<usize>,
    /// The last offset asked, its line and column: offsets are asked in order, so
    /// the next column counts on from there instead of from the line's start (a
    /// template on one long line would otherwise cost the square of its length).
    last: std::cell::Cell<(usize, usize, usize)>,
}

impl<'a> Lines<'a> {
    pub(super) fn new(src: &'a str) -> Lines<'a> {
        let starts = std::iter::once(0).chain(src.match_indices('\n').map(|(i, _)| i + 1)).collect();
        Lines { src, starts, last: std::cell::Cell::new((0, 1, 1)) }
    }

    pub(super) fn pos(&self, offset: usize) -> Pos {
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let (last_offset, last_line, last_column) = self.last.get();
        let (from, base) = if line == last_line && offset >= last_offset {
            (last_offset, last_column)
        } else {
            (self.starts[line - 1], 1)
        };
        let column = self.src.get(from..offset).map_or(base, |s| base + s.chars().count());
        self.last.set((offset, line, column));
        Pos { line: line as u32, column: column as u32 }
    }
}

/// The next occurrence of a delimiter at or after a position that only moves
/// forward: found once and kept until passed, so finding every `{{` and `{%` of a
/// source reads it once (searching both from each position was quadratic when one
/// of them is rare).
struct Next {
    delimiter: &'static str,
    /// Where it was found (absolute), or `None` once there is none further on.
    found: Option<usize>,
    /// The position the last search started from.
    searched_from: usize,
}

impl Next {
    fn new(delimiter: &'static str) -> Next {
        Next { delimiter, found: None, searched_from: usize::MAX }
    }

    fn at_or_after(&mut self, src: &str, from: usize) -> Option<usize> {
        let stale = match self.found {
            Some(at) => at < from,
            None => self.searched_from == usize::MAX || self.searched_from > from,
        };
        if stale {
            self.found = src[from..].find(self.delimiter).map(|i| from + i);
            self.searched_from = from;
        }
        self.found
    }
}

fn err(lines: &Lines<'_>, offset: usize, message: impl Into<String>) -> TemplateError {
    TemplateError { pos: lines.pos(offset), message: message.into() }
}

/// Where the delimiter `close` ends the markup starting at `from`: quotes and the
/// platform's `${...}` are skipped, so `{{subscribed_state.${email_global}}}` ends
/// after the third brace. Returns (end of the inside, end of the delimiter).
fn find_close(src: &str, from: usize, close: &str) -> Option<(usize, usize)> {
    let bytes = src.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'"' | b'\'') => {
                i += 1 + src[i + 1..].find(q as char)?;
            }
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                i += 1 + src[i + 1..].find('}')?;
            }
            _ if bytes[i..].starts_with(close.as_bytes()) => return Some((i, i + close.len())),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Cuts a template into segments.
pub(super) fn segments(src: &str, lines: &Lines<'_>) -> Result<Vec<Segment>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = 0;
    // A `-}}` or `-%}` strips the whitespace at the start of the next text.
    let mut trim_next = false;
    let (mut next_output, mut next_tag) = (Next::new("{{"), Next::new("{%"));
    while rest < src.len() {
        let open = match (next_output.at_or_after(src, rest), next_tag.at_or_after(src, rest)) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => src.len(),
        };
        let mut text = &src[rest..open];
        if trim_next {
            text = text.trim_start();
        }
        if open == src.len() {
            push_text(&mut out, text);
            break;
        }
        let is_output = src[open..].starts_with("{{");
        let mut inner_start = open + 2;
        if src[inner_start..].starts_with('-') {
            text = text.trim_end();
            inner_start += 1;
        }
        push_text(&mut out, text);
        let close = if is_output { "}}" } else { "%}" };
        let what = if is_output { "an output '{{'" } else { "a tag '{%'" };
        let (mut inner_end, end) = find_close(src, inner_start, close)
            .ok_or_else(|| err(lines, open, format!("{what} is not closed with '{close}'")))?;
        trim_next = inner_end > inner_start && src[..inner_end].ends_with('-');
        if trim_next {
            inner_end -= 1;
        }
        let inner = src[inner_start..inner_end].trim();
        let pos = lines.pos(open);
        rest = end;
        if is_output {
            let leading = src[inner_start..inner_end].len() - src[inner_start..inner_end].trim_start().len();
            out.push(Segment::Output(pos, lines.pos(inner_start + leading), inner.to_string()));
            continue;
        }
        let (name, args) = match inner.find(char::is_whitespace) {
            Some(i) => (&inner[..i], inner[i..].trim()),
            None => (inner, ""),
        };
        if name.starts_with('#') {
            continue; // `{% # an inline comment %}`
        }
        if name == "comment" || name == "raw" {
            let end_name = format!("end{name}");
            let (body_end, after) = find_end_tag(src, rest, &end_name)
                .ok_or_else(|| err(lines, open, format!("'{{% {name} %}}' is not closed with '{{% {end_name} %}}'")))?;
            if name == "raw" {
                push_text(&mut out, &src[rest..body_end]);
            }
            rest = after;
            trim_next = false;
            continue;
        }
        out.push(Segment::Tag(pos, name.to_string(), args.to_string()));
    }
    Ok(out)
}

fn push_text(out: &mut Vec<Segment>, text: &str) {
    if !text.is_empty() {
        out.push(Segment::Text(text.to_string()));
    }
}

/// The next `{% end_name %}` (with optional `-`) from `from`: (its start, its end).
fn find_end_tag(src: &str, from: usize, end_name: &str) -> Option<(usize, usize)> {
    let mut at = from;
    while let Some(i) = src[at..].find("{%") {
        let start = at + i;
        let close = start + 2 + src[start + 2..].find("%}")?;
        let inner = src[start + 2..close].trim_matches('-').trim();
        if inner == end_name {
            return Some((start, close + 2));
        }
        at = start + 2;
    }
    None
}

/// An expression token.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    /// A name: letters, digits, `_`, `-`, `?`.
    Ident(String),
    /// The platform's `${name}`.
    Dollar(String),
    /// A quoted string.
    Str(String),
    /// A number.
    Num(f64),
    /// `.`, `..`, `|`, `:`, `,`, `=`, `(`, `)`, or a comparison operator.
    Punct(&'static str),
}

/// Cuts the inside of a segment into tokens. `at` is where the segment starts, for
/// error positions.
pub(super) fn tokens(text: &str, at: Pos) -> Result<Vec<Tok>, TemplateError> {
    Ok(tokens_at(text, at)?.0)
}

/// [`tokens`], and the byte offset in `text` where each starts.
pub(super) fn tokens_at(text: &str, at: Pos) -> Result<(Vec<Tok>, Vec<usize>), TemplateError> {
    let fail = |m: String| TemplateError { pos: at, message: m };
    let mut out = Vec::new();
    let mut starts = Vec::new();
    // Each pass past the whitespace reads one token, which starts where it began.
    let mut token_start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if out.len() > starts.len() {
            starts.push(token_start);
        }
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        token_start = i;
        if c == '"' || c == '\'' {
            let end = text[i + 1..].find(c).ok_or_else(|| fail(format!("a string starting with {c} is not closed")))?;
            out.push(Tok::Str(text[i + 1..i + 1 + end].to_string()));
            let stop = i + 1 + end;
            while chars.next_if(|&(j, _)| j <= stop).is_some() {}
            continue;
        }
        if c == '$' {
            let body = text[i..].strip_prefix("${").ok_or_else(|| fail("'$' must start '${name}'".into()))?;
            let end = body.find('}').ok_or_else(|| fail("'${' is not closed with '}'".into()))?;
            out.push(Tok::Dollar(body[..end].trim().to_string()));
            let stop = i + 2 + end;
            while chars.next_if(|&(j, _)| j <= stop).is_some() {}
            continue;
        }
        let two = text.get(i..i + 2).unwrap_or("");
        if let Some(op) = ["==", "!=", "<>", "<=", ">=", ".."].into_iter().find(|op| *op == two) {
            out.push(Tok::Punct(if op == "<>" { "!=" } else { op }));
            chars.next();
            chars.next();
            continue;
        }
        if let Some(p) = [".", "|", ":", ",", "=", "<", ">", "(", ")"].into_iter().find(|p| p.starts_with(c)) {
            out.push(Tok::Punct(p));
            chars.next();
            continue;
        }
        if c.is_ascii_digit() || (c == '-' && text[i + 1..].starts_with(|d: char| d.is_ascii_digit())) {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                // `1..3` is a range: its `..` ends the number.
                if j > i && !(d.is_ascii_digit() || d == '.') || text[j..].starts_with("..") {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            let num = &text[i..end];
            let n = num.parse::<f64>().map_err(|_| fail(format!("'{num}' is not a number")))?;
            out.push(Tok::Num(n));
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let mut end = i;
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_' || d == '-' || d == '?') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            out.push(Tok::Ident(text[i..end].to_string()));
            continue;
        }
        return Err(fail(format!("unexpected character '{c}'")));
    }
    if out.len() > starts.len() {
        starts.push(token_start);
    }
    Ok((out, starts))
}

/// Where the byte `offset` of a segment's inside is, the inside starting at `at`.
pub(super) fn pos_within(text: &str, at: Pos, offset: usize) -> Pos {
    let before = text.get(..offset).unwrap_or(text);
    match before.rfind('\n') {
        None => Pos { line: at.line, column: at.column + before.chars().count() as u32 },
        Some(nl) => Pos {
            line: at.line + before.matches('\n').count() as u32,
            column: before[nl + 1..].chars().count() as u32 + 1,
        },
    }
}
