//! The artifact service: tool outputs stored whole (content-addressed per user, in the blob
//! store, streamed in and out in chunks), a compact of fewer than 500 tokens injected instead,
//! and partial reads by lines, bytes, JSONPath or keyword on demand.

pub mod api;
pub mod client;
pub mod compact;
pub mod config;
pub mod convert;
pub mod grpc;
pub mod locator;
pub mod service;

pub use api::ArtifactApi;
pub use client::ArtifactGrpcClient;
pub use config::ArtifactConfig;
pub use grpc::ArtifactGrpc;
pub use service::ArtifactService;
