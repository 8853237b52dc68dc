//! The cross-service test binary: the conformance suites of every backend against every
//! implementation, and the end-to-end scenarios. One binary keeps link time down.

mod artifact;
mod conformance;
mod foundation;
mod gateway;
mod knowledge;
mod nodes;
mod summary;
mod support;
mod tracing;
mod visibility;
