//! Where the client commands connect, and the channel they open there.

use clap::Args;
use thinkus_common::grpc::{ClientChannel, channel, client_channel};

/// Where the client commands connect.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The gRPC address of the service (or of the all-in-one process).
    #[arg(long, env = "THINKUS_ADDR", default_value = "http://127.0.0.1:50051", global = true)]
    pub addr: String,
    /// The API key (dev mode on loopback needs none).
    #[arg(long, env = "THINKUS_API_KEY", hide_env_values = true, global = true)]
    pub api_key: Option<String>,
}

impl Connection {
    /// A channel to the address that sends the API key with every call.
    pub fn channel(&self) -> anyhow::Result<ClientChannel> {
        let channel = channel(&self.addr, std::time::Duration::from_secs(5))?;
        Ok(client_channel(channel, self.api_key.clone()))
    }
}
