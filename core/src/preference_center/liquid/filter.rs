//! Filters: each name with its arguments checked when the template is parsed.

use super::ast::{fail, Filter, Operand};
use super::{Pos, TemplateError, Value};

/// The filter `name` with `args`, or why it cannot be.
pub(super) fn filter(pos: Pos, name: &str, mut args: Vec<Operand>) -> Result<Filter, TemplateError> {
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
        ("join", 0 | 1) => return Ok(Filter::Join(args.pop())),
        ("join", _) => return Err(fail(pos, "the filter 'join' takes 0 or 1 argument")),
        ("date", 1) => {
            return match args.pop() {
                Some(Operand::Lit(Value::Markup(format))) => {
                    use chrono::format::{Item, StrftimeItems};
                    // Checked now: a format chrono cannot follow would fail at every view.
                    match StrftimeItems::new(&format).find(|i| matches!(i, Item::Error)) {
                        Some(_) => Err(fail(pos, format!("'{format}' is not a date format this engine knows"))),
                        None => Ok(Filter::Date(format)),
                    }
                }
                _ => Err(fail(pos, "the filter 'date' takes a quoted format, such as '%Y-%m-%d'")),
            };
        }
        ("date", _) => return Err(fail(pos, "the filter 'date' takes 1 argument(s)")),
        _ => {}
    }
    let arity = match name {
        "default" | "append" | "prepend" | "split" => 1,
        "upcase" | "downcase" | "capitalize" | "strip" | "escape" | "size" | "first" | "last" => 0,
        _ => return Err(fail(pos, format!("unknown filter '{name}'"))),
    };
    if args.len() != arity {
        return Err(fail(pos, format!("the filter '{name}' takes {arity} argument(s)")));
    }
    Ok(match (name, args.pop()) {
        ("default", Some(a)) => Filter::Default(a),
        ("append", Some(a)) => Filter::Append(a),
        ("prepend", Some(a)) => Filter::Prepend(a),
        ("split", Some(a)) => Filter::Split(a),
        ("first", _) => Filter::First,
        ("last", _) => Filter::Last,
        ("upcase", _) => Filter::Upcase,
        ("downcase", _) => Filter::Downcase,
        ("capitalize", _) => Filter::Capitalize,
        ("strip", _) => Filter::Strip,
        ("escape", _) => Filter::Escape,
        _ => Filter::Size,
    })
}
