//! Where in the page's HTML an output lands, so that a value from user data is
//! escaped for that place: as text between tags, or inside a tag, where a quote,
//! a space, `=` or a backtick could otherwise end an unquoted attribute value and
//! start an attribute of the user's choosing (`x autofocus onfocus=...`). And a URL
//! attribute (`href`, `src`, `action`...) that an output wrote into is checked once
//! its value is complete: a `javascript:`, `data:` or any scheme but http(s),
//! mailto, tel and sms makes the whole value `#`.
//!
//! A small scanner over what has been rendered so far, after the HTML tokenizer's
//! states (data, tag, attribute name, attribute value quoted or not, comment, raw
//! text of `script`/`style`/`textarea`/`title`). Values escaped by this module hold
//! none of the characters that move it, so it scans the author's markup only.

/// Attributes whose value is a URL a browser may navigate to or load.
const URL_ATTRIBUTES: [&str; 14] = [
    "href",
    "src",
    "action",
    "formaction",
    "xlink:href",
    "poster",
    "background",
    "cite",
    "data",
    "codebase",
    "ping",
    "longdesc",
    "manifest",
    "lowsrc",
];

/// URL schemes a value from user data may lead to.
const SAFE_SCHEMES: [&str; 5] = ["http", "https", "mailto", "tel", "sms"];

/// What a blocked URL value becomes.
pub const BLOCKED_URL: &str = "#";

/// Elements whose content is raw text up to their end tag.
const RAW_TEXT: [&str; 4] = ["script", "style", "textarea", "title"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Data,
    /// After `<`.
    TagOpen,
    /// After `</` and a letter: an end tag's name.
    EndTagName,
    TagName,
    BeforeAttrName,
    AttrName,
    AfterAttrName,
    BeforeAttrValue,
    /// In a value quoted with this character, or unquoted (`None`).
    AttrValue(Option<u8>),
    /// `<!--` up to `-->`.
    Comment,
    /// `<!...>` or `<?...>`.
    Bogus,
    /// Inside a raw-text element, up to `</` and its name.
    RawText,
}

/// How an output is written where it lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Text between tags (or a comment, or raw text), or a quoted attribute value
    /// (a quote, escaped, cannot end it).
    Text,
    /// Inside a tag, or in an unquoted attribute value.
    InTag,
}

/// The scanner of one rendered buffer.
#[derive(Clone, Debug)]
pub struct Scanner {
    /// Bytes of the buffer scanned so far.
    pos: usize,
    state: State,
    /// The tag's name (lower case, bounded).
    tag: String,
    /// Whether the tag is an end tag.
    end_tag: bool,
    /// The raw-text element we are in.
    raw: Option<String>,
    /// The attribute's name (lower case, bounded).
    attr: String,
    /// Where the current attribute value starts in the buffer.
    value_start: usize,
    /// Whether an output was written into the current value.
    tainted: bool,
}

impl Default for Scanner {
    fn default() -> Scanner {
        Scanner {
            pos: 0,
            state: State::Data,
            tag: String::new(),
            end_tag: false,
            raw: None,
            attr: String::new(),
            value_start: 0,
            tainted: false,
        }
    }
}

fn push_bounded(s: &mut String, c: u8) {
    if s.len() < 32 {
        s.push(c.to_ascii_lowercase() as char);
    }
}

impl Scanner {
    /// Scans what was added to `out` since the last call; a URL value an output
    /// wrote into is checked (and blocked) as it ends.
    pub fn advance(&mut self, out: &mut String) {
        let mut i = self.pos;
        while i < out.len() {
            let c = out.as_bytes()[i];
            match self.state {
                State::Data => {
                    if c == b'<' {
                        self.state = State::TagOpen;
                    }
                }
                State::TagOpen => {
                    self.tag.clear();
                    if c.is_ascii_alphabetic() {
                        self.end_tag = false;
                        push_bounded(&mut self.tag, c);
                        self.state = State::TagName;
                    } else if c == b'/' {
                        self.end_tag = true;
                        self.state = State::EndTagName;
                    } else if c == b'!' {
                        self.state = if out[i..].starts_with("!--") { State::Comment } else { State::Bogus };
                        if self.state == State::Comment {
                            i += 2;
                        }
                    } else if c == b'?' {
                        self.state = State::Bogus;
                    } else {
                        self.state = State::Data;
                    }
                }
                State::EndTagName => {
                    if c == b'>' {
                        self.state = State::Data;
                    } else if c.is_ascii_whitespace() || c == b'/' {
                        self.state = State::BeforeAttrName;
                    } else {
                        push_bounded(&mut self.tag, c);
                    }
                }
                State::TagName => {
                    if c == b'>' {
                        self.end_of_tag();
                    } else if c.is_ascii_whitespace() || c == b'/' {
                        self.state = State::BeforeAttrName;
                    } else {
                        push_bounded(&mut self.tag, c);
                    }
                }
                State::BeforeAttrName => {
                    if c == b'>' {
                        self.end_of_tag();
                    } else if !(c.is_ascii_whitespace() || c == b'/') {
                        self.attr.clear();
                        push_bounded(&mut self.attr, c);
                        self.state = State::AttrName;
                    }
                }
                State::AttrName => {
                    if c == b'=' {
                        self.state = State::BeforeAttrValue;
                    } else if c == b'>' {
                        self.end_of_tag();
                    } else if c.is_ascii_whitespace() || c == b'/' {
                        self.state = State::AfterAttrName;
                    } else {
                        push_bounded(&mut self.attr, c);
                    }
                }
                State::AfterAttrName => {
                    if c == b'=' {
                        self.state = State::BeforeAttrValue;
                    } else if c == b'>' {
                        self.end_of_tag();
                    } else if !(c.is_ascii_whitespace() || c == b'/') {
                        self.attr.clear();
                        push_bounded(&mut self.attr, c);
                        self.state = State::AttrName;
                    }
                }
                State::BeforeAttrValue => {
                    if c == b'"' || c == b'\'' {
                        self.start_value(i + 1, Some(c));
                    } else if c == b'>' {
                        self.end_of_tag();
                    } else if !c.is_ascii_whitespace() {
                        self.start_value(i, None);
                    }
                }
                State::AttrValue(quote) => {
                    let ends = match quote {
                        Some(q) => c == q,
                        None => c.is_ascii_whitespace() || c == b'>',
                    };
                    if ends {
                        i = self.end_value(out, i);
                        let c = out.as_bytes()[i];
                        self.state = State::BeforeAttrName;
                        if quote.is_none() && c == b'>' {
                            self.end_of_tag();
                        }
                    }
                }
                State::Comment => {
                    if out.as_bytes()[..=i].ends_with(b"-->") {
                        self.state = State::Data;
                    }
                }
                State::Bogus => {
                    if c == b'>' {
                        self.state = State::Data;
                    }
                }
                State::RawText => {
                    if c == b'<' {
                        let name = self.raw.as_deref().unwrap_or("");
                        let rest = &out.as_bytes()[i + 1..];
                        let closes = rest.first() == Some(&b'/')
                            && rest.len() > name.len()
                            && rest[1..=name.len()].eq_ignore_ascii_case(name.as_bytes());
                        if closes {
                            self.raw = None;
                            self.state = State::TagOpen;
                        }
                    }
                }
            }
            i += 1;
        }
        self.pos = out.len();
    }

    fn start_value(&mut self, at: usize, quote: Option<u8>) {
        self.value_start = at;
        self.tainted = false;
        self.state = State::AttrValue(quote);
    }

    /// The value ending at `end` (its closing quote or the character after it):
    /// blocked when an output wrote into a URL value that leads anywhere unsafe.
    /// Returns where `end` is now.
    fn end_value(&mut self, out: &mut String, end: usize) -> usize {
        let tainted = std::mem::take(&mut self.tainted);
        if !tainted || !URL_ATTRIBUTES.contains(&self.attr.as_str()) {
            return end;
        }
        let start = self.value_start.min(end);
        if safe_url(&out[start..end]) {
            return end;
        }
        out.replace_range(start..end, BLOCKED_URL);
        start + BLOCKED_URL.len()
    }

    fn end_of_tag(&mut self) {
        self.state = State::Data;
        if !self.end_tag && RAW_TEXT.contains(&self.tag.as_str()) {
            self.raw = Some(self.tag.clone());
            self.state = State::RawText;
        }
        self.end_tag = false;
    }

    /// Where an output written now lands (after [`Scanner::advance`]); notes that
    /// it writes into the attribute value it lands in.
    pub fn place(&mut self) -> Place {
        match self.state {
            State::Data | State::Comment | State::Bogus | State::RawText => Place::Text,
            State::BeforeAttrValue => {
                // The output starts an unquoted value.
                self.value_start = self.pos;
                self.state = State::AttrValue(None);
                self.tainted = true;
                Place::InTag
            }
            State::AttrValue(quote) => {
                self.tainted = true;
                if quote.is_some() {
                    Place::Text
                } else {
                    Place::InTag
                }
            }
            _ => Place::InTag,
        }
    }

    /// Ends the buffer: a value still open is checked as if it ended here.
    pub fn finish(&mut self, out: &mut String) {
        self.advance(out);
        if let State::AttrValue(_) = self.state {
            let end = out.len();
            self.end_value(out, end);
            self.pos = out.len();
        }
    }
}

/// Escapes text for any place inside a tag: besides what [`super::escape_html`]
/// escapes, whitespace, `=`, `` ` `` and `/`, so an unquoted value stays one value.
pub fn escape_in_tag(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if let Some(entity) = super::html_entity(c) {
            out.push_str(entity);
            continue;
        }
        match c {
            '=' => out.push_str("&#61;"),
            '`' => out.push_str("&#96;"),
            '/' => out.push_str("&#47;"),
            c if c.is_whitespace() || c.is_control() => out.push_str(&format!("&#{};", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Decodes the character references a browser would in an attribute value (the
/// numeric ones, and the named ones that can spell a scheme).
fn decode_refs(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest[1..].find(|c: char| !c.is_ascii_alphanumeric() && c != '#').map_or(rest.len(), |e| e + 1);
        let name = &rest[1..end];
        let decoded = if let Some(num) = name.strip_prefix('#') {
            let n = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => num.parse().ok(),
            };
            n.and_then(char::from_u32)
        } else {
            match name.to_ascii_lowercase().as_str() {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "colon" => Some(':'),
                "tab" => Some('\t'),
                "newline" => Some('\n'),
                "sol" => Some('/'),
                "quest" => Some('?'),
                "num" => Some('#'),
                _ => None,
            }
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = rest[end..].strip_prefix(';').unwrap_or(&rest[end..]);
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether a URL attribute's value (as written in the HTML) leads somewhere safe:
/// a relative URL, or one of [`SAFE_SCHEMES`]. Browsers drop tabs and line breaks
/// anywhere in a URL and leading spaces and controls, so the check does too.
pub fn safe_url(value: &str) -> bool {
    let url: String = decode_refs(value).chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
    let url = url.trim_start_matches(|c: char| c <= ' ');
    match url.find([':', '/', '?', '#']) {
        Some(at) if url.as_bytes()[at] == b':' => SAFE_SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(&url[..at])),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lead_only_where_user_data_may() {
        for ok in ["https://x.example/a", "/prefs?x=1", "#top", "mailto:a@b.c", "page.html", "", "HTTP://x"] {
            assert!(safe_url(ok), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            " JavaScript:alert(1)",
            "java\tscript:alert(1)",
            "javascript&#58;alert(1)",
            "javascript&#x3A;x",
            "javascript&colon;x",
            "&#106;avascript:x",
            "data:text/html,<script>",
            "vbscript:x",
        ] {
            assert!(!safe_url(bad), "{bad}");
        }
    }

    #[test]
    fn the_scanner_knows_text_from_tags_and_values() {
        let mut s = Scanner::default();
        let mut out = String::from("<p title=\"a>b\" class=x>");
        s.advance(&mut out);
        assert_eq!(s.place(), Place::Text);
        out.push_str("<input value=");
        s.advance(&mut out);
        assert_eq!(s.place(), Place::InTag);
        out.push_str("v><script>var a = '<b>'; </script><a href='");
        s.advance(&mut out);
        assert_eq!(s.place(), Place::Text);
        out.push_str("javascript&#58;x'>");
        s.finish(&mut out);
        assert!(out.ends_with("<a href='#'>"), "{out}");
    }
}
