//! The summary service: a structured summary per session (goal, constraints, decisions with
//! their reasons, progress, artifacts, next actions, risks, open questions) that a new session
//! or another role of the project starts from. Updated incrementally from the messages after
//! the summary's end, by the configured LLM or the built-in rules for Chinese and English, in
//! the background when a session asks for it, completes a phase, ends or goes idle. Rendered
//! as Markdown within a token budget; decisions are offered to the knowledge manager.

pub mod api;
pub mod client;
pub mod config;
pub mod convert;
pub mod grpc;
pub mod parse;
pub mod prompts;
pub mod render;
pub mod rules;
pub mod salience;
pub mod service;

pub use api::SummaryApi;
pub use client::SummaryGrpcClient;
pub use config::SummaryConfig;
pub use grpc::SummaryGrpc;
pub use service::Summarizer;
