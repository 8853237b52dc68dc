//! [`SummaryClient`]: the summary service in this process, or over gRPC.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_common::ApiError;
use thinkus_common::convert::scope_to_proto;
use thinkus_common::grpc::ClientChannel;
use thinkus_common::model::Scope;
use thinkus_proto::summary as pb;
use thinkus_proto::summary::summary_service_client::SummaryServiceClient;

use crate::api::{
    GenerateRequest, GenerateResult, ListRequest, RecordRequest, RecordResult, RenderRequest, Rendered, SessionSummary,
    SummaryApi,
};
use crate::convert;

/// Calls the summary service wherever it runs.
#[derive(Clone)]
pub enum SummaryClient {
    Local(Arc<dyn SummaryApi>),
    Grpc(SummaryServiceClient<ClientChannel>),
}

impl SummaryClient {
    pub fn grpc(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self::Grpc(
            SummaryServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        )
    }
}

fn summary(value: Option<&thinkus_proto::common::SessionSummary>) -> Result<SessionSummary, ApiError> {
    convert::summary_from_proto(value.ok_or_else(|| ApiError::internal("the summary service returned no summary"))?)
}

#[async_trait]
impl SummaryApi for SummaryClient {
    async fn record(&self, request: RecordRequest) -> Result<RecordResult, ApiError> {
        match self {
            Self::Local(api) => api.record(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .record_messages(convert::record_to_proto(&request))
                    .await?
                    .into_inner();
                Ok(RecordResult {
                    first_index: response.first_index.max(0) as u32,
                    message_count: response.message_count.max(0) as u32,
                    summary_scheduled: response.summary_scheduled,
                })
            }
        }
    }

    async fn generate(&self, request: GenerateRequest) -> Result<GenerateResult, ApiError> {
        match self {
            Self::Local(api) => api.generate(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .generate_summary(convert::generate_to_proto(&request))
                    .await?;
                Ok(GenerateResult {
                    summary: summary(response.get_ref().summary.as_ref())?,
                    messages_read: response.get_ref().messages_read.max(0) as u32,
                })
            }
        }
    }

    async fn get(&self, scope: Scope, session_id: String) -> Result<SessionSummary, ApiError> {
        match self {
            Self::Local(api) => api.get(scope, session_id).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .get_summary(pb::GetSummaryRequest {
                        scope: Some(scope_to_proto(&scope)),
                        session_id,
                    })
                    .await?;
                summary(response.get_ref().summary.as_ref())
            }
        }
    }

    async fn list(&self, request: ListRequest) -> Result<Vec<SessionSummary>, ApiError> {
        match self {
            Self::Local(api) => api.list(request).await,
            Self::Grpc(client) => {
                let response = client.clone().list_summaries(convert::list_to_proto(&request)).await?;
                response
                    .get_ref()
                    .summaries
                    .iter()
                    .map(convert::summary_from_proto)
                    .collect()
            }
        }
    }

    async fn render(&self, request: RenderRequest) -> Result<Rendered, ApiError> {
        match self {
            Self::Local(api) => api.render(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .render_summary(convert::render_to_proto(&request))
                    .await?
                    .into_inner();
                Ok(Rendered {
                    markdown: response.markdown,
                    tokens: response.tokens.max(0) as u32,
                })
            }
        }
    }

    async fn previous(&self, scope: Scope, now: DateTime<Utc>) -> Result<Option<SessionSummary>, ApiError> {
        match self {
            Self::Local(api) => api.previous(scope, now).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .get_previous_summary(pb::GetPreviousSummaryRequest {
                        scope: Some(scope_to_proto(&scope)),
                        now: Some(thinkus_common::convert::timestamp(now)),
                    })
                    .await?;
                match response.get_ref().summary.as_ref() {
                    Some(found) => summary(Some(found)).map(Some),
                    None => Ok(None),
                }
            }
        }
    }

    async fn end_session(&self, scope: Scope) -> Result<bool, ApiError> {
        match self {
            Self::Local(api) => api.end_session(scope).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .end_session(pb::EndSessionRequest {
                        scope: Some(scope_to_proto(&scope)),
                    })
                    .await?;
                Ok(response.get_ref().summary_scheduled)
            }
        }
    }
}
