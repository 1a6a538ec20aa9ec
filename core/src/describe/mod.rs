//! The builders of the API description (`GET /openapi.json`): an operation
//! ([`op::Op`]) and JSON Schema values ([`schema`]). A leaf layer: each family's
//! `schema.rs` describes its endpoints with these, and `openapi` (above every family)
//! assembles the document from the route table.

pub mod op;
pub mod schema;
