//! The gateway: one call prepares a turn's context, one call completes it. Not built yet: every
//! RPC answers UNIMPLEMENTED.

use thinkus_proto::gateway::gateway_service_server::{GatewayService, GatewayServiceServer};

/// The gRPC service; its RPCs answer UNIMPLEMENTED until the gateway lands.
#[derive(Debug, Default)]
pub struct GatewayGrpc;

#[tonic::async_trait]
impl GatewayService for GatewayGrpc {}

impl GatewayGrpc {
    pub fn into_server(self) -> GatewayServiceServer<Self> {
        GatewayServiceServer::new(self)
    }
}
