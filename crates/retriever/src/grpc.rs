//! The gRPC adapter: authenticates, validates and converts, then calls the domain API.

use std::sync::Arc;

use thinkus_common::auth::principal;
use thinkus_proto::retriever as pb;
use thinkus_proto::retriever::retriever_service_server::{RetrieverService, RetrieverServiceServer};
use tonic::{Request, Response, Status};

use crate::api::RetrieverApi;
use crate::convert;

/// Serves [`RetrieverApi`] over gRPC.
pub struct RetrieverGrpc {
    api: Arc<dyn RetrieverApi>,
}

impl RetrieverGrpc {
    pub fn new(api: Arc<dyn RetrieverApi>) -> Self {
        Self { api }
    }

    /// The tonic service, with message size limits.
    pub fn into_server(self, max_message_bytes: usize) -> RetrieverServiceServer<Self> {
        RetrieverServiceServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }
}

#[tonic::async_trait]
impl RetrieverService for RetrieverGrpc {
    async fn recall(&self, request: Request<pb::RecallRequest>) -> Result<Response<pb::RecallResponse>, Status> {
        let principal = principal(&request)?;
        let mut request = convert::recall_from_proto(request.get_ref())?;
        principal.authorize(&mut request.scope)?;
        let result = self.api.recall(request).await?;
        Ok(Response::new(convert::result_to_proto(&result)))
    }

    async fn get_details(
        &self,
        request: Request<pb::GetDetailsRequest>,
    ) -> Result<Response<pb::GetDetailsResponse>, Status> {
        let principal = principal(&request)?;
        let mut request = convert::details_request_from_proto(request.get_ref())?;
        principal.authorize(&mut request.scope)?;
        let result = self.api.get_details(request).await?;
        Ok(Response::new(convert::details_result_to_proto(&result)))
    }
}
