//! The platform's rules for a warehouse table's columns: which it reads, and what a
//! table must have for its kind of sync. Pure: the hosts read a table's column names
//! and ask here.

use super::integration::DataKind;

/// The platform's column names, in the order a source returns them.
pub const COLUMNS: [&str; 8] =
    ["UPDATED_AT", "EXTERNAL_ID", "ALIAS_NAME", "ALIAS_LABEL", "BRAZE_ID", "EMAIL", "PHONE", "PAYLOAD"];

/// Which of [`COLUMNS`] a table has, under their names in the table.
#[derive(Clone, Debug)]
pub struct Columns {
    /// The table's own spelling of each column, or `None` when it lacks it.
    pub names: [Option<String>; 8],
}

impl Columns {
    /// Matches a table's columns (any case) and checks what `kind` needs; the error
    /// is the integration's `config_error`.
    pub fn check(actual: &[String], kind: DataKind) -> Result<Columns, String> {
        let names = COLUMNS.map(|c| actual.iter().find(|a| a.eq_ignore_ascii_case(c)).cloned());
        let has = |i: usize| names[i].is_some();
        if !has(0) {
            return Err("the table has no UPDATED_AT column".into());
        }
        if !(1..7).any(has) {
            return Err(
                "the table has no identifier column (EXTERNAL_ID, ALIAS_NAME and ALIAS_LABEL, BRAZE_ID, EMAIL, PHONE)"
                    .into(),
            );
        }
        match (super::sync::reads_payload(kind), has(7)) {
            (true, false) => Err("the table has no PAYLOAD column".into()),
            // The platform's guard against deleting users by mistake.
            (false, true) => Err("a user-delete table must not have a PAYLOAD column".into()),
            _ => Ok(Columns { names }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_needs_a_time_an_identifier_and_a_payload_unless_it_deletes() {
        let cols = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let ok = Columns::check(&cols(&["updated_at", "External_Id", "PAYLOAD"]), DataKind::Users).unwrap();
        assert_eq!(ok.names[1].as_deref(), Some("External_Id"));
        assert!(Columns::check(&cols(&["EXTERNAL_ID", "PAYLOAD"]), DataKind::Users)
            .unwrap_err()
            .contains("UPDATED_AT"));
        assert!(Columns::check(&cols(&["UPDATED_AT", "PAYLOAD"]), DataKind::Users).unwrap_err().contains("identifier"));
        assert!(Columns::check(&cols(&["UPDATED_AT", "EMAIL"]), DataKind::Users).unwrap_err().contains("PAYLOAD"));
        assert!(Columns::check(&cols(&["UPDATED_AT", "EMAIL", "PAYLOAD"]), DataKind::Deletes)
            .unwrap_err()
            .contains("must not"));
        assert!(Columns::check(&cols(&["UPDATED_AT", "PHONE"]), DataKind::Deletes).is_ok());
    }
}
