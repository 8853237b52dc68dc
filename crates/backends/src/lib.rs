//! The backends of Thinkus Memory, each behind a trait with one conformance suite:
//! the relational store ([`sql`]: PostgreSQL, SQLite), the vector index ([`vector`]:
//! qdrant-edge, Qdrant), the blob store ([`blob`]: local folder, S3), the embedder ([`embed`]:
//! local multilingual-e5-small, OpenAI-compatible HTTP, hashed n-grams) and the language model
//! ([`llm`]: OpenAI-compatible chat, Anthropic Messages, built-in rules). [`Backends::open`]
//! builds them all from the configuration's URIs.

pub mod blob;
pub mod embed;
pub mod filter;
pub mod llm;
pub mod sql;
pub mod vector;

#[cfg(any(test, feature = "testing"))]
pub mod conformance;

mod errors;
mod open;
pub mod traced;

#[cfg(feature = "local-embedder")]
pub use open::local_options;
pub use open::{Backends, BackendsConfig, Needs, OpenError, available_cores, open_blobs, open_embedder, open_vectors};
