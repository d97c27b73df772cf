#![allow(missing_docs)]
//! One integration binary (one link on a two-core machine), a module per area.

mod atlasmart;
mod manifest_errors;
mod plan;
mod schema;
mod support;
