//! Users: the profile document and the rules of its attributes, finding the user
//! a request names, and the prioritization rules that choose among several.

pub mod custom;
pub mod locate;
pub mod prioritization;
pub mod profile;
pub mod schema;
pub mod standard;
