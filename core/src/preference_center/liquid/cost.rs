//! The bound on what a rendering can cost, shown when the template is parsed.

use std::collections::HashMap;

use super::ast::{Expr, Filter, For, Node, Operand, Source};
use super::render::{plain, split};
use super::{Value, Var, MAX_ITERATIONS, USER_VALUE_BYTES};

/// Upper bounds of a rendering, whatever the data: the bytes it writes (every value
/// from user data at its longest, every case change at its widest, escaping at its
/// widest, 6 bytes for 1, every branch at its longest) and its steps (a node
/// rendered, a loop's pass). `u64::MAX` when no bound can be shown.
pub(super) fn cost(nodes: &[Node]) -> Bound {
    let mut a = Analysis { env: HashMap::new(), work: 0 };
    a.nodes(nodes)
}

/// What a rendering can cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Bound {
    pub bytes: u64,
    pub steps: u64,
}

impl Bound {
    const UNBOUNDED: Bound = Bound { bytes: u64::MAX, steps: u64::MAX };

    fn plus(self, o: Bound) -> Bound {
        Bound { bytes: self.bytes.saturating_add(o.bytes), steps: self.steps.saturating_add(o.steps) }
    }

    fn max(self, o: Bound) -> Bound {
        Bound { bytes: self.bytes.max(o.bytes), steps: self.steps.max(o.steps) }
    }

    fn times(self, n: u64) -> Bound {
        Bound { bytes: self.bytes.saturating_mul(n), steps: self.steps.saturating_mul(n) }
    }
}

/// What the analysis knows of a value: the most bytes it outputs, and the most
/// items it has as a list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Shape {
    bytes: u64,
    items: u64,
}

impl Shape {
    fn widest(self, o: Shape) -> Shape {
        Shape { bytes: self.bytes.max(o.bytes), items: self.items.max(o.items) }
    }
}

const ESCAPED: u64 = 6;
const CASE: u64 = 3;
/// Passes of a loop the analysis follows one by one before it asks for a fixed
/// point (a loop whose variables still grow after that many passes is refused).
const FOLLOWED_PASSES: u64 = 64;
/// Most nodes the analysis visits (loops are followed pass by pass).
const MAX_ANALYSIS: u64 = 5_000_000;

struct Analysis {
    env: HashMap<String, Shape>,
    work: u64,
}

impl Analysis {
    fn set(&mut self, name: &str, shape: Shape) {
        let slot = self.env.entry(name.to_string()).or_default();
        *slot = slot.widest(shape);
    }

    fn nodes(&mut self, nodes: &[Node]) -> Bound {
        let mut total = Bound::default();
        for node in nodes {
            self.work += 1;
            if self.work > MAX_ANALYSIS {
                return Bound::UNBOUNDED;
            }
            let c = match node {
                Node::Text(t) => Bound { bytes: t.len() as u64, steps: 1 },
                Node::Output(e) => Bound { bytes: self.expr(e).bytes, steps: 1 },
                Node::Field(f) => Bound { bytes: ESCAPED.saturating_mul(f.name().len() as u64), steps: 1 },
                Node::If(branches, otherwise) => {
                    let bodies: Vec<&Vec<Node>> =
                        branches.iter().map(|(_, b)| b).chain(std::iter::once(otherwise)).collect();
                    self.one_of(&bodies).plus(Bound { bytes: 0, steps: branches.len() as u64 })
                }
                Node::Capture(name, body) => {
                    let c = self.nodes(body);
                    self.set(name, Shape { bytes: c.bytes, items: 1 });
                    Bound { bytes: 0, steps: c.steps.saturating_add(1) }
                }
                Node::Assign(name, e) => {
                    let shape = self.expr(e);
                    self.set(name, shape);
                    Bound { bytes: 0, steps: 1 }
                }
                // Every matching `when` renders: all of them, one after the other, at worst.
                Node::Case(_, whens, otherwise) => {
                    let mut c = Bound { bytes: 0, steps: 1 + whens.len() as u64 };
                    for (_, body) in whens {
                        c = c.plus(self.nodes(body));
                    }
                    c.plus(self.nodes(otherwise))
                }
                Node::For(f) => self.for_loop(f),
                Node::Break | Node::Continue => Bound { bytes: 0, steps: 1 },
            };
            total = total.plus(c);
        }
        total
    }

    /// One of `bodies` renders: the longest, each from the same variables, which
    /// then hold the widest any of them left.
    fn one_of(&mut self, bodies: &[&Vec<Node>]) -> Bound {
        let start = self.env.clone();
        let mut merged = start.clone();
        let mut longest = Bound::default();
        for body in bodies {
            self.env = start.clone();
            longest = longest.max(self.nodes(body));
            for (k, v) in std::mem::take(&mut self.env) {
                let slot = merged.entry(k).or_default();
                *slot = slot.widest(v);
            }
        }
        self.env = merged;
        longest
    }

    fn for_loop(&mut self, f: &For) -> Bound {
        let literal = |o: &Operand| match o {
            Operand::Lit(Value::Num(n)) => Some(*n as i64),
            _ => None,
        };
        let (mut passes, item) = match &f.source {
            Source::Range(a, b) => {
                let n = match (literal(a), literal(b)) {
                    (Some(a), Some(b)) => b.saturating_sub(a).saturating_add(1).max(0) as u64,
                    _ => MAX_ITERATIONS,
                };
                (n, Shape { bytes: ESCAPED * 20, items: 1 })
            }
            Source::Value(o) => {
                let s = self.operand(o);
                (s.items, Shape { bytes: s.bytes, items: 1 })
            }
        };
        if let Some(n) = f.limit.as_ref().and_then(literal) {
            passes = passes.min(n.max(0) as u64);
        }
        passes = passes.min(MAX_ITERATIONS);
        let before = self.env.remove(&f.var);
        let otherwise = {
            let start = self.env.clone();
            let c = self.nodes(&f.otherwise);
            for (k, v) in start {
                let slot = self.env.entry(k).or_default();
                *slot = slot.widest(v);
            }
            c
        };
        self.env.insert(f.var.clone(), item);
        // Followed pass by pass while its variables change; once they do not, every
        // further pass costs what the last one did.
        let mut total = Bound { bytes: 0, steps: 1 };
        let mut pass = 0;
        while pass < passes {
            let start = self.env.clone();
            let c = self.nodes(&f.body).plus(Bound { bytes: 0, steps: 1 });
            total = total.plus(c);
            pass += 1;
            if self.env == start {
                total = total.plus(c.times(passes - pass));
                break;
            }
            if pass >= FOLLOWED_PASSES && pass < passes {
                return Bound::UNBOUNDED;
            }
        }
        match before {
            Some(v) => self.env.insert(f.var.clone(), v),
            None => self.env.remove(&f.var),
        };
        total.max(otherwise)
    }

    /// The shape of an expression's value as output (after escaping).
    fn expr(&mut self, e: &Expr) -> Shape {
        let mut s = self.operand(&e.base);
        // A literal split by a literal: its items are known.
        if let (Operand::Lit(v), Some(Filter::Split(Operand::Lit(sep)))) = (&e.base, e.filters.first()) {
            if let Value::List(items) = split(v.clone(), &plain(sep)) {
                s.items = items.len() as u64;
            }
        }
        for (i, f) in e.filters.iter().enumerate() {
            let c = s.bytes;
            s = match f {
                Filter::Default(a) => s.widest(self.operand(a)),
                Filter::Append(a) | Filter::Prepend(a) => {
                    Shape { bytes: c.saturating_add(self.operand(a).bytes), items: 1 }
                }
                Filter::Upcase | Filter::Downcase | Filter::Capitalize => {
                    Shape { bytes: c.saturating_mul(CASE), items: 1 }
                }
                // Markup shown as text is escaped on output.
                Filter::Escape => Shape { bytes: c.saturating_mul(ESCAPED), items: 1 },
                Filter::Strip => Shape { bytes: c, items: 1 },
                Filter::Size => Shape { bytes: 20, items: 1 },
                // Cutting never lengthens, but the ellipsis may be added.
                Filter::Truncate(_, ellipsis) => {
                    let tail = ellipsis.as_ref().map_or(3, |e| self.operand(e).bytes);
                    Shape { bytes: c.saturating_add(tail), items: 1 }
                }
                // At worst every character is replaced (an empty pattern inserts between
                // every two).
                Filter::Replace(_, to) => {
                    let to = self.operand(to).bytes;
                    Shape { bytes: c.saturating_mul(to.saturating_add(1)).saturating_add(to), items: 1 }
                }
                Filter::ReplaceFirst(_, to) => Shape { bytes: c.saturating_add(self.operand(to).bytes), items: 1 },
                // Splitting never lengthens; at most one item more than characters (the
                // bound counts each character escaped, 6 bytes).
                Filter::Split(_) => {
                    let items = if i == 0 && s.items > 1 { s.items } else { (c / ESCAPED).saturating_add(1) };
                    Shape { bytes: c, items }
                }
                Filter::Join(sep) => {
                    let sep = sep.as_ref().map_or(1, |x| self.operand(x).bytes);
                    Shape { bytes: c.saturating_add(s.items.saturating_mul(sep)), items: 1 }
                }
                Filter::First | Filter::Last => Shape { bytes: c, items: 1 },
                // A time formatted (each directive at most 16 bytes wide), or the value
                // as it was when it is not a time.
                Filter::Date(format) => {
                    let formatted = ESCAPED.saturating_mul(16 * format.len() as u64 + 64);
                    Shape { bytes: c.max(formatted), items: 1 }
                }
            };
        }
        s
    }

    fn operand(&self, o: &Operand) -> Shape {
        let bytes = match o {
            Operand::Lit(v) => ESCAPED.saturating_mul(plain(v).len() as u64),
            Operand::Empty | Operand::Blank => 0,
            Operand::Var(Var::Local(name)) => return self.env.get(name).copied().unwrap_or_default(),
            Operand::Var(_) => ESCAPED.saturating_mul(USER_VALUE_BYTES),
            Operand::ForLoop(_) => 20,
        };
        Shape { bytes, items: 1 }
    }
}
