//! The knowledge manager: the write path (extract, admit, deduplicate and merge, resolve
//! contradictions, write), corrections, decay, forgetting, quotas, promotion of iteration
//! knowledge, the candidate queue a person approves, and the history of every change.

pub mod admission;
pub mod api;
mod candidates;
pub mod changes;
pub mod client;
pub mod config;
pub mod conflicts;
pub mod convert;
pub mod data_rights;
mod facade;
pub mod grpc;
mod indexing;
pub mod learn;
pub mod learned;
pub mod markdown;
mod pending;
mod prompts;
pub mod rebuild;
pub mod rules;
pub mod service;
mod standing;
pub mod subject;
pub mod turns;
mod upkeep;

pub use api::KnowledgeApi;
pub use client::KnowledgeGrpcClient;
pub use config::KnowledgeConfig;
pub use grpc::KnowledgeGrpc;
pub use service::KnowledgeManager;
