//! The server's log: lines on stderr, as text or JSON, filtered by `RUST_LOG`.
//!
//! Logged values can come from outside (a warehouse row's text in a sync's error, a
//! request's id), so no value may break a line: in the text format every control
//! character of a field or message is written escaped (`\n`, `\u{1b}`), and the JSON
//! format escapes them as JSON does. One event is always one line.

use std::fmt::Write as _;

use tracing_subscriber::field::MakeExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::{debug_fn, Writer};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::startup::LogFormat;

/// Starts the process's log in `format`.
pub fn init(format: LogFormat) {
    let logs = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: a file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // Reporting a failed log write prints to stderr, which panics when stderr is
        // what failed (a full disk): a server must outlive its log.
        .log_internal_errors(false);
    match format {
        LogFormat::Text => {
            let fields = debug_fn(|w: &mut Writer<'_>, field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
                let text = escape_controls(&format!("{value:?}"));
                match field.name() {
                    "message" => w.write_str(&text),
                    name => write!(w, "{name}={text}"),
                }
            })
            .delimited(" ");
            logs.fmt_fields(fields).finish().with(filter()).init()
        }
        LogFormat::Json => logs.json().flatten_event(true).finish().with(filter()).init(),
    }
}

/// `text` with its control characters (and Unicode's line and paragraph
/// separators) written as escapes: what a logged value holds can never start a
/// line of its own or move a terminal's cursor.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Which log lines are written: `RUST_LOG` as a list of `target=level` and a bare
/// default level (`info,engage=debug`), else `info`. A `RUST_LOG` that does not
/// parse is reported and `info` used.
fn filter() -> Targets {
    let default = || Targets::new().with_default(tracing::Level::INFO);
    match std::env::var("RUST_LOG") {
        Ok(given) if !given.trim().is_empty() => given.parse().unwrap_or_else(|e| {
            eprintln!("engage: RUST_LOG={given:?} is not a list of target=level: {e}; logging at info");
            default()
        }),
        _ => default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_value_can_start_a_line_of_its_own() {
        let forged = "2026-01-01\n2026-12-01T00:00:00Z ERROR engage: forged\r\u{1b}[2J\u{2028}x";
        let escaped = escape_controls(forged);
        assert!(!escaped.chars().any(|c| c.is_control() || c == '\u{2028}'), "{escaped}");
        assert_eq!(escaped, "2026-01-01\\n2026-12-01T00:00:00Z ERROR engage: forged\\r\\u{1b}[2J\\u{2028}x");
    }
}
