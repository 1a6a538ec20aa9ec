//! Identity: `/users/identify`, `/users/merge`, `/users/delete` and the alias
//! endpoints. Each parses its whole body first (pure), then applies it in one unit
//! of work; [`merge::absorb`] holds the profile-combining rules identify and merge share.

pub mod alias;
pub mod delete;
pub mod external_ids;
pub mod identify;
pub mod merge;
pub mod schema;
