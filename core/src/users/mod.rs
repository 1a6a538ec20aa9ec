//! Users: finding the user a request names, the prioritization rules that choose
//! among several, and the profile's description. The profile document itself, and
//! the rules of its attributes, are a layer below the repository
//! ([`crate::profile`]), which caches profiles in a unit of work.

pub mod locate;
pub mod prioritization;
pub mod schema;
