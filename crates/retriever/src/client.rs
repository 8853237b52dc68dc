//! [`RetrieverGrpcClient`]: the retriever over gRPC, behind the same [`RetrieverApi`] as the
//! service itself (in process, a node holds the [`crate::Retriever`] as `Arc<dyn RetrieverApi>`).

use async_trait::async_trait;
use thinkus_common::ApiError;
use thinkus_common::grpc::ClientChannel;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;

use crate::api::{DetailsRequest, DetailsResult, RecallRequest, RecallResult, RetrieverApi};
use crate::convert;

/// Calls a retriever that runs in another process.
#[derive(Clone)]
pub struct RetrieverGrpcClient {
    client: RetrieverServiceClient<ClientChannel>,
}

impl RetrieverGrpcClient {
    pub fn new(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self {
            client: RetrieverServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        }
    }
}

#[async_trait]
impl RetrieverApi for RetrieverGrpcClient {
    async fn recall(&self, request: RecallRequest) -> Result<RecallResult, ApiError> {
        let response = self.client.clone().recall(convert::recall_to_proto(&request)).await?;
        convert::result_from_proto(response.get_ref())
    }

    async fn get_details(&self, request: DetailsRequest) -> Result<DetailsResult, ApiError> {
        let response = self
            .client
            .clone()
            .get_details(convert::details_request_to_proto(&request))
            .await?;
        convert::details_result_from_proto(response.get_ref())
    }
}
