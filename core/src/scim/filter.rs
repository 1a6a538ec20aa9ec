//! The one filter this server evaluates: `userName eq "<value>"` (RFC 7644
//! §3.4.2.2), the attribute optionally written with its schema URN, attribute and
//! operator case-insensitive, the value a JSON string (escapes included). Every
//! other filter is refused with a 400 `invalidFilter` that says what is missing,
//! never evaluated half-way.

use super::error::ScimError;
use super::protocol::USER_URN;

/// A parsed filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    /// `userName eq "value"`: compared case-insensitively.
    UserNameEq(String),
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

const LOGICAL: [&str; 3] = ["and", "or", "not"];
const OPERATORS: [&str; 10] = ["eq", "ne", "co", "sw", "ew", "pr", "gt", "ge", "lt", "le"];

fn tokens(text: &str) -> Result<Vec<Token>, ScimError> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if c == ' ' || c == '\t' {
            i += 1;
        } else if matches!(c, '(' | ')' | '[' | ']') {
            out.push(Token::Group(c));
            i += 1;
        } else if c == '"' {
            // Find the closing quote, stepping over escapes, then let the JSON parser
            // decode exactly that literal (it rejects bad escapes and raw controls).
            let mut j = i + 1;
            loop {
                match chars.get(j) {
                    None => return Err(ScimError::filter("invalid filter: a string is not closed")),
                    Some((_, '\\')) => j += 2,
                    Some((_, '"')) => break,
                    Some(_) => j += 1,
                }
            }
            let end = chars[j].0 + 1;
            let s: String = serde_json::from_str(&text[at..end])
                .map_err(|_| ScimError::filter("invalid filter: a string has an invalid escape"))?;
            out.push(Token::Str(s));
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
            out.push(if literal { Token::Literal(word.to_string()) } else { Token::Word(word.to_string()) });
            i = j;
        }
    }
    Ok(out)
}

fn is_user_name(path: &str) -> bool {
    // `userName`, or `<User URN>:userName`; byte offsets are taken only where
    // they fall between characters, so any text is safe.
    let Some(cut) = path.len().checked_sub("userName".len()).filter(|n| path.is_char_boundary(*n)) else {
        return false;
    };
    let (head, tail) = path.split_at(cut);
    tail.eq_ignore_ascii_case("userName")
        && (head.is_empty() || head.strip_suffix(':').is_some_and(|u| u.eq_ignore_ascii_case(USER_URN)))
}

/// Parses a `filter` query value.
pub fn parse(text: &str) -> Result<Filter, ScimError> {
    let toks = tokens(text)?;
    if toks.is_empty() {
        return Err(ScimError::filter("invalid filter: it is empty"));
    }
    if toks.iter().any(|t| matches!(t, Token::Word(w) if LOGICAL.iter().any(|l| w.eq_ignore_ascii_case(l)))) {
        return Err(ScimError::filter(
            "unsupported filter: 'and', 'or' and 'not' are not supported; use one userName eq \"...\" comparison",
        ));
    }
    if toks.iter().any(|t| matches!(t, Token::Group(_))) {
        return Err(ScimError::filter("unsupported filter: grouping and value paths ('(', '[') are not supported"));
    }
    let (attr, op, value) = match toks.as_slice() {
        [Token::Word(a), Token::Word(o), v] => (a, o, Some(v)),
        [Token::Word(a), Token::Word(o)] => (a, o, None),
        _ => {
            return Err(ScimError::filter(
                "invalid filter: expected <attribute> <operator> <value>, as in userName eq \"ada@example.com\"",
            ))
        }
    };
    if !OPERATORS.iter().any(|o| op.eq_ignore_ascii_case(o)) {
        return Err(ScimError::filter(format!("invalid filter: '{op}' is not a SCIM comparison operator")));
    }
    if !is_user_name(attr) {
        return Err(ScimError::filter(format!("unsupported filter: only userName can be filtered, not '{attr}'")));
    }
    if !op.eq_ignore_ascii_case("eq") {
        return Err(ScimError::filter(format!("unsupported filter: only 'eq' is supported, not '{op}'")));
    }
    match value {
        Some(Token::Str(s)) => Ok(Filter::UserNameEq(s.clone())),
        Some(Token::Literal(l) | Token::Word(l)) => {
            Err(ScimError::filter(format!("invalid filter: userName is compared with a quoted string, not {l}")))
        }
        _ => Err(ScimError::filter("invalid filter: 'eq' needs a quoted string value")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scim::error::ScimType;

    fn ok(text: &str) -> String {
        match parse(text) {
            Ok(Filter::UserNameEq(v)) => v,
            Err(e) => panic!("{text}: {e:?}"),
        }
    }

    fn err(text: &str) -> String {
        match parse(text) {
            Err(ScimError::Bad(ScimType::InvalidFilter, d)) => d,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn user_name_eq_in_its_spellings() {
        assert_eq!(ok(r#"userName eq "ada@example.com""#), "ada@example.com");
        assert_eq!(ok(r#"USERNAME EQ "Ada@Example.com""#), "Ada@Example.com");
        assert_eq!(ok(r#"  userName   eq   "a b"  "#), "a b");
        assert_eq!(ok(r#"urn:ietf:params:scim:schemas:core:2.0:User:userName eq "x""#), "x");
        assert_eq!(ok(r#"userName eq "q\"uote\\d\u0041""#), "q\"uote\\dA");
        assert_eq!(ok(r#"userName eq """#), "");
    }

    #[test]
    fn everything_else_is_refused_with_a_reason() {
        assert!(err(r#"userName eq "a" and userName eq "b""#).contains("'and', 'or'"));
        assert!(err(r#"userName eq "a" OR userName eq "b""#).contains("'and', 'or'"));
        assert!(err(r#"not (userName eq "a")"#).contains("'and', 'or'"));
        assert!(err(r#"(userName eq "a")"#).contains("grouping"));
        assert!(err(r#"emails[type eq "work"]"#).contains("grouping"));
        assert!(err(r#"userName co "a""#).contains("only 'eq'"));
        assert!(err(r#"userName pr"#).contains("only 'eq'"));
        assert!(err(r#"name.givenName eq "a""#).contains("only userName"));
        assert!(err(r#"urn:other:userName eq "a""#).contains("only userName"));
        assert!(err(r#"userName eq 12"#).contains("quoted string"));
        assert!(err(r#"userName eq true"#).contains("quoted string"));
        assert!(err(r#"userName eq ada"#).contains("quoted string"));
        assert!(err(r#"userName eq "open"#).contains("not closed"));
        assert!(err(r#"userName eq "bad\q""#).contains("escape"));
        assert!(err(r#"userName equals "a""#).contains("not a SCIM comparison operator"));
        assert!(err("").contains("empty"));
        assert!(err("userName").contains("expected"));
        assert!(err(r#"userName eq "a" "b""#).contains("expected"));
        assert!(err(r#"userName eq"#).contains("needs a quoted string"));
    }

    #[test]
    fn arbitrary_text_never_panics() {
        for text in ["\"", "\\", "\"\\", "eq eq eq", "[[[", "userName eq \"\\u12\"", "ü eq \"ü\"", "\u{0}"] {
            let _ = parse(text);
        }
        // Multi-byte characters where a byte offset would cut one in two.
        for text in ["éserName eq \"a\"", "日本語 eq \"x\"", "aaaaaaaaé eq \"x\"", "ééééééééé eq \"x\""] {
            assert!(err(text).contains("only userName"), "{text}");
        }
    }

    proptest::proptest! {
        // No regression files in the source tree: a failure prints its minimal case.
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512, failure_persistence: None, ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any text at all, multi-byte characters included: an answer, never a panic.
        #[test]
        fn any_text_is_parsed_or_refused(text in ".{0,60}", tail in "(userName|eq|\"|\\|:| ){0,6}") {
            let _ = parse(&format!("{text}{tail}"));
            let _ = parse(&format!("{tail}{text}"));
        }
    }
}
