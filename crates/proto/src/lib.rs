//! The gRPC contracts of Thinkus Memory, generated from `proto/` at build time.
//!
//! One module per proto package: [`common`] holds the shared messages, the others one service
//! each. [`FILE_DESCRIPTOR_SET`] feeds gRPC reflection.

#![allow(
    clippy::doc_lazy_continuation,
    clippy::large_enum_variant,
    clippy::doc_overindented_list_items
)]

include!(concat!(env!("OUT_DIR"), "/thinkus.rs"));

pub mod codec;

/// The artifact service (`thinkus.artifact.v1`).
pub use thinkus::artifact::v1 as artifact;
/// Messages shared by every service (`thinkus.common.v1`).
pub use thinkus::common::v1 as common;
/// The memory controller (`thinkus.controller.v1`).
pub use thinkus::controller::v1 as controller;
/// The gateway (`thinkus.gateway.v1`).
pub use thinkus::gateway::v1 as gateway;
/// The knowledge manager (`thinkus.knowledge.v1`).
pub use thinkus::knowledge::v1 as knowledge;
/// The retriever (`thinkus.retriever.v1`).
pub use thinkus::retriever::v1 as retriever;
/// The summary service (`thinkus.summary.v1`).
pub use thinkus::summary::v1 as summary;

/// The encoded descriptor set of every contract, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/thinkus_descriptor.bin"));

/// Fully qualified names of the services, as health checks and reflection list them.
pub const SERVICE_NAMES: [&str; 6] = [
    "thinkus.controller.v1.MemoryControllerService",
    "thinkus.retriever.v1.RetrieverService",
    "thinkus.knowledge.v1.KnowledgeManagerService",
    "thinkus.artifact.v1.ArtifactService",
    "thinkus.summary.v1.SummaryService",
    "thinkus.gateway.v1.GatewayService",
];
