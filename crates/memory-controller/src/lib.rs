//! The memory controller: per user message, whether memory is needed (yes, no, maybe), which
//! types, catalog or details, how many tokens, and which time range. Built-in rules for Chinese
//! and English, or the configured LLM with the design's prompt and a conservative fallback.

pub mod api;
pub mod client;
pub mod config;
pub mod convert;
pub mod grpc;
pub mod learned;
pub mod rules;
pub mod service;

pub use api::ControllerApi;
pub use client::ControllerGrpcClient;
pub use config::ControllerConfig;
pub use grpc::MemoryControllerGrpc;
pub use service::MemoryController;
