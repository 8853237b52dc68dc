//! [`ControllerGrpcClient`]: the memory controller over gRPC, behind the same [`ControllerApi`]
//! as the service itself (in process, a node holds the [`crate::MemoryController`] as
//! `Arc<dyn ControllerApi>`).

use async_trait::async_trait;
use thinkus_common::ApiError;
use thinkus_common::grpc::ClientChannel;
use thinkus_common::model::ControlDecision;
use thinkus_proto::controller::memory_controller_service_client::MemoryControllerServiceClient;

use crate::api::{ControllerApi, DecideRequest};
use crate::convert;

/// Calls a memory controller that runs in another process.
#[derive(Clone)]
pub struct ControllerGrpcClient {
    client: MemoryControllerServiceClient<ClientChannel>,
}

impl ControllerGrpcClient {
    pub fn new(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self {
            client: MemoryControllerServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        }
    }
}

#[async_trait]
impl ControllerApi for ControllerGrpcClient {
    async fn decide(&self, request: DecideRequest) -> Result<ControlDecision, ApiError> {
        let response = self.client.clone().decide(convert::decide_to_proto(request)).await?;
        convert::decision_from_proto(response.get_ref())
    }
}
