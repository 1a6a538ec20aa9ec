//! Where a job stands inside a group of rows that share one `UPDATED_AT` (pure).
//!
//! A batch holds at most the host's batch size, so a group larger than a batch (a
//! backfill stamps a whole table with one time) is committed in several units of
//! work. The cursor then names the last committed row of the group by its place in
//! the order every source reads a group in: its exact source time (where finer
//! than a millisecond), then its seven other columns, a null before any text, text
//! by its bytes. Rows identical in all of these cannot be told apart: the cursor
//! counts how many of them were committed, and the next job skips that many
//! (`resume.rs`).

use serde::{Deserialize, Serialize};

/// A row's place in its group: its exact source time, then `EXTERNAL_ID`,
/// `ALIAS_NAME`, `ALIAS_LABEL`, `BRAZE_ID`, `EMAIL`, `PHONE`, `PAYLOAD`.
pub type Tie = [Option<String>; 8];

/// The last committed row of a group the job has not finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Within {
    /// Its place in the group.
    pub tie: Tie,
    /// How many rows with exactly this place were committed (at least 1).
    pub seen: u64,
}
