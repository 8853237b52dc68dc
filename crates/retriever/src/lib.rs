//! The retriever: two-stage recall (a catalog of short entries, then details for chosen ids)
//! over hybrid search (dense embeddings and BM25, fused), filtered by scope, type, status,
//! visibility, session, time and tags, ranked by relevance, importance and freshness, and
//! packed into a token budget.

mod access;
pub mod api;
pub mod client;
pub mod config;
pub mod convert;
pub mod grpc;
pub mod rank;
pub mod render;
pub mod service;

pub use api::RetrieverApi;
pub use client::RetrieverGrpcClient;
pub use config::RetrieverConfig;
pub use grpc::RetrieverGrpc;
pub use service::Retriever;
