//! The cross-service test binary: the conformance suites of every backend against every
//! implementation, and the end-to-end scenarios. One binary keeps link time down.

mod artifact;
mod browser;
mod capacity;
mod conflicts;
mod conformance;
mod data_rights;
mod dedup_calibration;
mod degraded;
mod durability;
mod embed_once;
mod foundation;
mod fuzz;
mod gateway;
mod hardening;
mod knowledge;
mod learned;
mod learned_extract;
mod llm_learning;
mod markdown;
mod memory_page;
mod nodes;
mod rebuild_index;
mod rest_routes;
mod summary;
mod support;
mod tenancy;
mod tls;
mod tracing;
mod upkeep;
mod visibility;
mod write_chain;
