//! [`GatewayGrpcClient`]: the gateway over gRPC, behind the same [`GatewayApi`] as the service
//! itself (in process, a node holds the [`crate::Gateway`]). The CLI and the benches call the
//! gateway through it.

use async_trait::async_trait;
use thinkus_backends::sql::JobRecord;
use thinkus_common::ApiError;
use thinkus_common::grpc::ClientChannel;
use thinkus_common::model::Owner;
use thinkus_knowledge_manager::api::Erasure;
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;

use crate::api::{
    CompleteRequest, Completed, ConverseRequest, Conversed, GatewayApi, JobsRequest, PrepareRequest, Prepared,
};
use crate::convert;

/// Calls a gateway that runs in another process.
#[derive(Clone)]
pub struct GatewayGrpcClient {
    client: GatewayServiceClient<ClientChannel>,
}

impl GatewayGrpcClient {
    pub fn new(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self {
            client: GatewayServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        }
    }
}

#[async_trait]
impl GatewayApi for GatewayGrpcClient {
    async fn prepare_turn(&self, request: PrepareRequest) -> Result<Prepared, ApiError> {
        let response = self
            .client
            .clone()
            .prepare_turn(convert::prepare_to_proto(request))
            .await?;
        convert::prepared_from_proto(response.into_inner())
    }

    async fn complete_turn(&self, request: CompleteRequest) -> Result<Completed, ApiError> {
        let response = self
            .client
            .clone()
            .complete_turn(convert::complete_to_proto(request))
            .await?;
        convert::completed_from_proto(response.into_inner())
    }

    async fn converse(&self, request: ConverseRequest) -> Result<Conversed, ApiError> {
        let response = self
            .client
            .clone()
            .converse(convert::converse_request_to_proto(request))
            .await?;
        convert::conversed_from_proto(response.into_inner())
    }

    async fn list_jobs(&self, request: JobsRequest) -> Result<Vec<JobRecord>, ApiError> {
        let response = self
            .client
            .clone()
            .list_jobs(convert::jobs_request_to_proto(&request))
            .await?;
        response.get_ref().jobs.iter().map(convert::job_from_proto).collect()
    }

    async fn erase_user(&self, owner: Owner, _actor: String) -> Result<Erasure, ApiError> {
        // The gateway names the actor from the credential it sees (this client's key), not
        // from `_actor`.
        let response = self
            .client
            .clone()
            .erase_user(convert::erase_request_to_proto(owner))
            .await?;
        Ok(convert::erasure_from_proto(response.get_ref()))
    }
}
