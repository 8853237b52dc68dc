//! [`ControllerClient`]: the memory controller in this process, or over gRPC.

use std::sync::Arc;

use async_trait::async_trait;
use thinkus_common::ApiError;
use thinkus_common::convert::{
    control_decision_from_proto, engine_to_proto_choice, memory_type_to_proto, query_embedding_to_proto,
    scope_to_proto, timestamp_opt,
};
use thinkus_common::grpc::ClientChannel;
use thinkus_common::model::ControlDecision;
use thinkus_proto::controller as pb;
use thinkus_proto::controller::memory_controller_service_client::MemoryControllerServiceClient;

use crate::api::{ControllerApi, DecideRequest};

/// Calls the memory controller wherever it runs.
#[derive(Clone)]
pub enum ControllerClient {
    Local(Arc<dyn ControllerApi>),
    Grpc(MemoryControllerServiceClient<ClientChannel>),
}

impl ControllerClient {
    pub fn grpc(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self::Grpc(
            MemoryControllerServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        )
    }
}

#[async_trait]
impl ControllerApi for ControllerClient {
    async fn decide(&self, request: DecideRequest) -> Result<ControlDecision, ApiError> {
        match self {
            Self::Local(api) => api.decide(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .decide(pb::DecideRequest {
                        scope: Some(scope_to_proto(&request.scope)),
                        message: request.message,
                        message_count: request.message_count as i32,
                        recent_messages: request.recent_messages,
                        type_hints: request.type_hints.iter().map(|t| memory_type_to_proto(*t)).collect(),
                        engine: engine_to_proto_choice(request.engine),
                        now: timestamp_opt(request.now),
                        query_embedding: query_embedding_to_proto(request.query_embedding.as_ref()),
                    })
                    .await?;
                let decision = response
                    .get_ref()
                    .decision
                    .as_ref()
                    .ok_or_else(|| ApiError::internal("the memory controller returned no decision"))?;
                control_decision_from_proto(decision)
                    .map_err(|e| ApiError::internal(format!("unreadable decision: {}", e.message)))
            }
        }
    }
}
