//! The `thinkus` binary as a library: the root configuration, nodes (a set of services in one
//! process), the command line, the client commands and the benches.

pub mod bench;
pub mod cli;
pub mod commands;
pub mod config;
pub mod connection;
pub mod memory_cli;
pub mod node;
pub mod progress;
pub mod services;
pub mod train;

pub use cli::main;
pub use config::Config;
pub use services::ServiceKind;
