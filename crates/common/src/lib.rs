//! What every Thinkus Memory service shares: configuration, telemetry, errors and their gRPC
//! statuses, tenant authentication, gRPC serving (health, reflection, layers, shutdown),
//! metrics, the domain model and its protobuf conversions, and text handling for Chinese and
//! English.

pub mod auth;
pub mod config;
pub mod convert;
pub mod deadline;
pub mod error;
pub mod grpc;
pub mod ids;
pub mod limits;
pub mod metrics;
pub mod model;
pub mod names;
pub mod redact;
pub mod shutdown;
pub mod telemetry;
pub mod text;
pub mod time;
pub mod tls;
pub mod tokens;
pub mod work;

pub use error::{ApiError, ErrorCode, ServiceError, to_json, to_status};
