//! The gRPC adapter of the memory controller.

use std::sync::Arc;

use thinkus_common::ApiError;
use thinkus_common::auth::principal;
use thinkus_common::convert::{
    ScopeRules, control_decision_to_proto, datetime_opt, engine_from_proto, memory_types, query_embedding_from_proto,
    scope_from_proto,
};
use thinkus_proto::controller as pb;
use thinkus_proto::controller::memory_controller_service_server::{
    MemoryControllerService, MemoryControllerServiceServer,
};
use tonic::{Request, Response, Status};

use crate::api::{ControllerApi, DecideRequest};

/// Serves [`ControllerApi`] over gRPC.
pub struct MemoryControllerGrpc {
    api: Arc<dyn ControllerApi>,
}

impl MemoryControllerGrpc {
    pub fn new(api: Arc<dyn ControllerApi>) -> Self {
        Self { api }
    }

    pub fn into_server(self, max_message_bytes: usize) -> MemoryControllerServiceServer<Self> {
        MemoryControllerServiceServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }
}

/// Reads and validates a decide request.
pub fn decide_from_proto(request: &pb::DecideRequest) -> Result<DecideRequest, ApiError> {
    if request.message_count < 0 {
        return Err(ApiError::invalid("message_count", "must not be negative"));
    }
    Ok(DecideRequest {
        scope: scope_from_proto(request.scope.as_ref(), "scope", ScopeRules::USER_ROLE)?,
        message: request.message.clone(),
        message_count: request.message_count as u32,
        recent_messages: request.recent_messages.iter().rev().take(20).rev().cloned().collect(),
        type_hints: memory_types(&request.type_hints, "type_hints")?,
        engine: engine_from_proto(request.engine, "engine")?,
        now: datetime_opt(request.now.as_ref(), "now")?,
        query_embedding: query_embedding_from_proto(request.query_embedding.as_ref(), "query_embedding")?,
    })
}

#[tonic::async_trait]
impl MemoryControllerService for MemoryControllerGrpc {
    async fn decide(&self, request: Request<pb::DecideRequest>) -> Result<Response<pb::DecideResponse>, Status> {
        let principal = principal(&request)?;
        let mut request = decide_from_proto(request.get_ref())?;
        principal.authorize(&mut request.scope)?;
        let decision = self.api.decide(request).await?;
        Ok(Response::new(pb::DecideResponse {
            decision: Some(control_decision_to_proto(&decision)),
        }))
    }
}
