//! The gRPC adapter: authenticates, validates and converts, then calls the domain API.

use std::sync::Arc;

use thinkus_common::auth::principal;
use thinkus_proto::controller as pb;
use thinkus_proto::controller::memory_controller_service_server::{
    MemoryControllerService, MemoryControllerServiceServer,
};
use tonic::{Request, Response, Status};

use crate::api::ControllerApi;
use crate::convert;

/// Serves [`ControllerApi`] over gRPC.
pub struct MemoryControllerGrpc {
    api: Arc<dyn ControllerApi>,
}

impl MemoryControllerGrpc {
    pub fn new(api: Arc<dyn ControllerApi>) -> Self {
        Self { api }
    }

    /// The tonic service, with message size limits.
    pub fn into_server(self, max_message_bytes: usize) -> MemoryControllerServiceServer<Self> {
        MemoryControllerServiceServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }
}

#[tonic::async_trait]
impl MemoryControllerService for MemoryControllerGrpc {
    async fn decide(&self, request: Request<pb::DecideRequest>) -> Result<Response<pb::DecideResponse>, Status> {
        let principal = principal(&request)?;
        let mut request = convert::decide_from_proto(request.get_ref())?;
        principal.authorize(&mut request.scope)?;
        let decision = self.api.decide(request).await?;
        Ok(Response::new(convert::decision_to_proto(&decision)))
    }
}
