//! The conformance suites: one per backend trait, run by the cross-service test binary
//! against every implementation (compiled with the `testing` feature).

pub mod blob;
pub mod embed;
pub mod fixtures;
pub mod llm;
pub mod memory_store;
pub mod sql;
pub mod vector;
pub mod visibility;
