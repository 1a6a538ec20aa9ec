//! Moving the cursor over a group of rows that share one `UPDATED_AT`, and
//! reading on from a place inside one (pure; the place is [`super::position`]).

use super::integration::Cursor;
use super::position::{Tie, Within};
use super::rows::Row;

impl Row {
    /// The row's place in its group.
    pub fn tie(&self) -> Tie {
        [
            self.exact.clone(),
            self.external_id.clone(),
            self.alias_name.clone(),
            self.alias_label.clone(),
            self.braze_id.clone(),
            self.email.clone(),
            self.phone.clone(),
            self.payload.clone(),
        ]
    }
}

/// The cursor after committing `rows` (non-empty, in the source's order) read
/// after `after`: the batch's last `UPDATED_AT`, and, when the group goes on past
/// the batch (`group_continues`), the place of its last row.
pub fn next_cursor(after: Option<&Cursor>, rows: &[Row], group_continues: bool) -> Option<Cursor> {
    let last = rows.last()?;
    if !group_continues {
        return Some(Cursor { updated_at: last.updated_at, within: None });
    }
    let run = rows.iter().rev().take_while(|r| *r == last).count() as u64;
    let tie = last.tie();
    // A run of identical rows may have begun in the batch before.
    let before = match after {
        Some(Cursor { updated_at, within: Some(w) })
            if run == rows.len() as u64 && *updated_at == last.updated_at && w.tie == tie =>
        {
            w.seen
        }
        _ => 0,
    };
    Some(Cursor { updated_at: last.updated_at, within: Some(Within { tie, seen: before + run }) })
}

/// Reading again from a cursor inside a group: the source returns the rows from
/// the cursor's place on (its last row included), and the rows already committed
/// at that place are passed over.
#[derive(Clone, Debug)]
pub struct Resume {
    at: Option<Row>,
    skip: u64,
}

impl Resume {
    /// Resuming from `cursor`.
    pub fn new(cursor: Option<&Cursor>) -> Resume {
        match cursor {
            Some(Cursor { updated_at, within: Some(w) }) => {
                let [exact, a, b, c, d, e, f, g] = w.tie.clone();
                let at = Row::from_columns(*updated_at, exact, [a, b, c, d, e, f, g]);
                Resume { at: Some(at), skip: w.seen }
            }
            _ => Resume { at: None, skip: 0 },
        }
    }

    /// False for a row committed by an earlier job.
    pub fn admit(&mut self, row: &Row) -> bool {
        match &self.at {
            // Rows at one place are equal in every field a row has.
            Some(at) if self.skip > 0 && row == at => {
                self.skip -= 1;
                false
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    fn row(t: i64, id: &str) -> Row {
        Row { updated_at: Timestamp(t), external_id: Some(id.into()), payload: Some("{}".into()), ..Row::default() }
    }

    #[test]
    fn a_batch_that_ends_a_group_leaves_a_plain_cursor() {
        let c = next_cursor(None, &[row(1, "a"), row(2, "b")], false).unwrap();
        assert_eq!(c, Cursor { updated_at: Timestamp(2), within: None });
        assert_eq!(next_cursor(None, &[], false), None);
    }

    #[test]
    fn identical_rows_are_counted_across_batches_and_skipped_on_resume() {
        let first = next_cursor(None, &[row(1, "a"), row(2, "b"), row(2, "b")], true).unwrap();
        assert_eq!(first.within.as_ref().unwrap().seen, 2);
        // A batch of nothing but the same row adds to the count.
        let second = next_cursor(Some(&first), &[row(2, "b"), row(2, "b")], true).unwrap();
        assert_eq!(second.within.as_ref().unwrap().seen, 4);
        // A batch whose run began inside it counts its own rows only.
        let third = next_cursor(Some(&second), &[row(2, "b"), row(2, "c")], true).unwrap();
        assert_eq!(third.within.as_ref().unwrap().seen, 1);
        assert_eq!(third.within.as_ref().unwrap().tie[1].as_deref(), Some("c"));
        let mut resume = Resume::new(Some(&second));
        let admitted: Vec<bool> = [row(2, "b"), row(2, "b"), row(2, "b"), row(2, "b"), row(2, "b"), row(2, "c")]
            .iter()
            .map(|r| resume.admit(r))
            .collect();
        assert_eq!(admitted, [false, false, false, false, true, true]);
    }

    #[test]
    fn a_plain_cursor_skips_nothing() {
        let mut resume = Resume::new(Some(&Cursor { updated_at: Timestamp(2), within: None }));
        assert!(resume.admit(&row(2, "b")));
        assert!(Resume::new(None).admit(&row(3, "c")));
    }
}
