//! The gateway: a thin front for the employee core. `PrepareTurn` returns a turn's context
//! within one token budget (the controller decides, the retriever recalls, artifacts and the
//! last session are added, with a trace of what was used and why); `CompleteTurn` offloads large
//! tool outputs as artifacts and queues learning and the summary update on a durable queue that
//! background workers drain. A REST/JSON facade serves the design's HTTP routes.

pub mod adapters;
pub mod api;
pub mod client;
pub mod config;
pub mod context;
pub mod convert;
pub mod data_rights;
pub mod extras;
pub mod grpc;
pub mod jobs;
pub mod rest;
pub mod rest_common;
pub mod rest_memory;
pub mod rest_records;
pub mod service;
pub mod traces;
pub mod ui;

pub use api::GatewayApi;
pub use client::GatewayGrpcClient;
pub use config::GatewayConfig;
pub use grpc::GatewayGrpc;
pub use service::{Gateway, UpstreamAddresses, Upstreams};
