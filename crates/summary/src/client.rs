//! [`SummaryGrpcClient`]: the summary service over gRPC, behind the same [`SummaryApi`] as the
//! service itself (in process, a node holds the [`crate::Summarizer`] as `Arc<dyn SummaryApi>`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_common::ApiError;
use thinkus_common::grpc::ClientChannel;
use thinkus_common::model::Scope;
use thinkus_proto::summary::summary_service_client::SummaryServiceClient;

use crate::api::{
    GenerateRequest, GenerateResult, ListRequest, RecordRequest, RecordResult, RenderRequest, Rendered, SessionSummary,
    SummaryApi,
};
use crate::convert;

/// Calls a summary service that runs in another process.
#[derive(Clone)]
pub struct SummaryGrpcClient {
    client: SummaryServiceClient<ClientChannel>,
}

impl SummaryGrpcClient {
    pub fn new(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self {
            client: SummaryServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        }
    }
}

#[async_trait]
impl SummaryApi for SummaryGrpcClient {
    async fn record(&self, request: RecordRequest) -> Result<RecordResult, ApiError> {
        let response = self
            .client
            .clone()
            .record_messages(convert::record_to_proto(&request))
            .await?;
        Ok(convert::record_result_from_proto(response.get_ref()))
    }

    async fn generate(&self, request: GenerateRequest) -> Result<GenerateResult, ApiError> {
        let response = self
            .client
            .clone()
            .generate_summary(convert::generate_to_proto(&request))
            .await?;
        convert::generate_result_from_proto(response.get_ref())
    }

    async fn get(&self, scope: Scope, session_id: String) -> Result<SessionSummary, ApiError> {
        let response = self
            .client
            .clone()
            .get_summary(convert::get_to_proto(&scope, session_id))
            .await?;
        convert::get_from_response(response.get_ref())
    }

    async fn list(&self, request: ListRequest) -> Result<Vec<SessionSummary>, ApiError> {
        let response = self
            .client
            .clone()
            .list_summaries(convert::list_to_proto(&request))
            .await?;
        convert::list_from_response(response.get_ref())
    }

    async fn render(&self, request: RenderRequest) -> Result<Rendered, ApiError> {
        let response = self
            .client
            .clone()
            .render_summary(convert::render_to_proto(&request))
            .await?;
        Ok(convert::rendered_from_proto(response.into_inner()))
    }

    async fn previous(&self, scope: Scope, now: DateTime<Utc>) -> Result<Option<SessionSummary>, ApiError> {
        let response = self
            .client
            .clone()
            .get_previous_summary(convert::previous_to_proto(&scope, now))
            .await?;
        convert::previous_from_response(response.get_ref())
    }

    async fn end_session(&self, scope: Scope) -> Result<bool, ApiError> {
        let response = self
            .client
            .clone()
            .end_session(convert::end_session_to_proto(&scope))
            .await?;
        Ok(response.get_ref().summary_scheduled)
    }
}
