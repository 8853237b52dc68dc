//! [`RetrieverClient`]: the retriever in this process, or over gRPC.

use std::sync::Arc;

use async_trait::async_trait;
use thinkus_common::ApiError;
use thinkus_common::grpc::ClientChannel;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;

use crate::api::{DetailsRequest, DetailsResult, RecallRequest, RecallResult, RetrieverApi};
use crate::convert;

/// Calls the retriever wherever it runs.
#[derive(Clone)]
pub enum RetrieverClient {
    Local(Arc<dyn RetrieverApi>),
    Grpc(RetrieverServiceClient<ClientChannel>),
}

impl RetrieverClient {
    pub fn grpc(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self::Grpc(
            RetrieverServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        )
    }
}

#[async_trait]
impl RetrieverApi for RetrieverClient {
    async fn recall(&self, request: RecallRequest) -> Result<RecallResult, ApiError> {
        match self {
            Self::Local(api) => api.recall(request).await,
            Self::Grpc(client) => {
                let response = client.clone().recall(convert::recall_to_proto(&request)).await?;
                convert::result_from_proto(response.get_ref())
            }
        }
    }

    async fn get_details(&self, request: DetailsRequest) -> Result<DetailsResult, ApiError> {
        match self {
            Self::Local(api) => api.get_details(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .get_details(convert::details_request_to_proto(&request))
                    .await?;
                convert::details_result_from_proto(response.get_ref())
            }
        }
    }
}
