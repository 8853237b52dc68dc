//! The gRPC adapter: authenticates, validates and converts, then calls the domain API.

use std::sync::Arc;

use thinkus_common::ApiError;
use thinkus_common::auth::principal;
use thinkus_common::convert::{ScopeRules, datetime_opt, scope_from_proto};
use thinkus_proto::summary as pb;
use thinkus_proto::summary::summary_service_server::{SummaryService, SummaryServiceServer};
use tonic::{Request, Response, Status};

use crate::api::SummaryApi;
use crate::convert;

/// Serves [`SummaryApi`] over gRPC.
pub struct SummaryGrpc {
    api: Arc<dyn SummaryApi>,
}

impl SummaryGrpc {
    pub fn new(api: Arc<dyn SummaryApi>) -> Self {
        Self { api }
    }

    /// The tonic service, with message size limits.
    pub fn into_server(self, max_message_bytes: usize) -> SummaryServiceServer<Self> {
        SummaryServiceServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }
}

#[tonic::async_trait]
impl SummaryService for SummaryGrpc {
    async fn record_messages(
        &self,
        request: Request<pb::RecordMessagesRequest>,
    ) -> Result<Response<pb::RecordMessagesResponse>, Status> {
        let principal = principal(&request)?;
        let mut body = convert::record_from_proto(request.get_ref())?;
        principal.authorize(&mut body.scope)?;
        let result = self.api.record(body).await?;
        Ok(Response::new(convert::record_result_to_proto(&result)))
    }

    async fn generate_summary(
        &self,
        request: Request<pb::GenerateSummaryRequest>,
    ) -> Result<Response<pb::GenerateSummaryResponse>, Status> {
        let principal = principal(&request)?;
        let mut body = convert::generate_from_proto(request.get_ref())?;
        principal.authorize(&mut body.scope)?;
        let result = self.api.generate(body).await?;
        Ok(Response::new(convert::generate_result_to_proto(&result)))
    }

    async fn get_summary(
        &self,
        request: Request<pb::GetSummaryRequest>,
    ) -> Result<Response<pb::GetSummaryResponse>, Status> {
        let principal = principal(&request)?;
        let body = request.get_ref();
        let mut scope = scope_from_proto(body.scope.as_ref(), "scope", ScopeRules::USER)?;
        principal.authorize(&mut scope)?;
        if body.session_id.is_empty() {
            return Err(Status::from(ApiError::invalid("session_id", "is required")));
        }
        let summary = self.api.get(scope, body.session_id.clone()).await?;
        Ok(Response::new(convert::get_response(&summary)))
    }

    async fn list_summaries(
        &self,
        request: Request<pb::ListSummariesRequest>,
    ) -> Result<Response<pb::ListSummariesResponse>, Status> {
        let principal = principal(&request)?;
        let mut body = convert::list_from_proto(request.get_ref())?;
        principal.authorize(&mut body.scope)?;
        let summaries = self.api.list(body).await?;
        Ok(Response::new(convert::list_response(&summaries)))
    }

    async fn render_summary(
        &self,
        request: Request<pb::RenderSummaryRequest>,
    ) -> Result<Response<pb::RenderSummaryResponse>, Status> {
        let principal = principal(&request)?;
        let mut body = convert::render_from_proto(request.get_ref())?;
        principal.authorize(&mut body.scope)?;
        let rendered = self.api.render(body).await?;
        Ok(Response::new(convert::rendered_to_proto(rendered)))
    }

    async fn get_previous_summary(
        &self,
        request: Request<pb::GetPreviousSummaryRequest>,
    ) -> Result<Response<pb::GetPreviousSummaryResponse>, Status> {
        let principal = principal(&request)?;
        let body = request.get_ref();
        let mut scope = scope_from_proto(body.scope.as_ref(), "scope", ScopeRules::USER_ROLE)?;
        principal.authorize(&mut scope)?;
        let now = datetime_opt(body.now.as_ref(), "now")?.unwrap_or_else(chrono::Utc::now);
        let previous = self.api.previous(scope, now).await?;
        Ok(Response::new(convert::previous_response(previous.as_ref())))
    }

    async fn end_session(
        &self,
        request: Request<pb::EndSessionRequest>,
    ) -> Result<Response<pb::EndSessionResponse>, Status> {
        let principal = principal(&request)?;
        let mut scope = scope_from_proto(request.get_ref().scope.as_ref(), "scope", ScopeRules::USER_SESSION)?;
        principal.authorize(&mut scope)?;
        let scheduled = self.api.end_session(scope).await?;
        Ok(Response::new(pb::EndSessionResponse {
            summary_scheduled: scheduled,
        }))
    }
}
