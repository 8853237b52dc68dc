//! The gRPC adapter of the gateway: the caller's rights on the scope, deadlines carried to the
//! services it calls, and the caller's credential forwarded to them (authentication, rates and
//! seats are the serving layer's: `thinkus_common::grpc::Gate`).

use std::future::Future;
use std::sync::Arc;

use thinkus_common::auth::{Principal, principal, with_forwarded_credential};
use thinkus_common::convert::{ScopeRules, next_page, page_from_proto, scope_from_proto};
use thinkus_common::model::Scope;
use thinkus_common::{ApiError, deadline};
use thinkus_proto::gateway as pb;
use thinkus_proto::gateway::gateway_service_server::{GatewayService, GatewayServiceServer};
use tonic::{Request, Response, Status};

use crate::convert;
use crate::service::Gateway;

/// Serves the [`Gateway`] over gRPC.
pub struct GatewayGrpc {
    gateway: Arc<Gateway>,
}

impl GatewayGrpc {
    pub fn new(gateway: Arc<Gateway>) -> Self {
        Self { gateway }
    }

    pub fn into_server(self, max_message_bytes: usize) -> GatewayServiceServer<Self> {
        GatewayServiceServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }

    /// Checks the caller's rights on the scope `scope_of` takes out of the request's body, then
    /// runs `work` on the scope and the body (taken by value: a turn's tool outputs are not
    /// copied) under the request's deadline with the caller's credential forwarded.
    async fn guarded<T, R, F>(
        &self,
        request: Request<T>,
        rules: ScopeRules,
        scope_of: impl FnOnce(&mut T) -> Option<thinkus_proto::common::Scope>,
        work: impl FnOnce(Scope, T) -> F,
    ) -> Result<R, Status>
    where
        F: Future<Output = Result<R, ApiError>>,
    {
        let principal: Principal = principal(&request)?;
        let deadline = deadline::from_metadata(request.metadata());
        let mut body = request.into_inner();
        let mut scope = scope_from_proto(scope_of(&mut body).as_ref(), "scope", rules)?;
        principal.authorize(&mut scope)?;
        with_forwarded_credential(
            principal.credential,
            deadline::with_deadline(deadline, work(scope, body)),
        )
        .await
        .map_err(Status::from)
    }
}

#[tonic::async_trait]
impl GatewayService for GatewayGrpc {
    async fn prepare_turn(
        &self,
        request: Request<pb::PrepareTurnRequest>,
    ) -> Result<Response<pb::PrepareTurnResponse>, Status> {
        let gateway = self.gateway.clone();
        let prepared = self
            .guarded(
                request,
                ScopeRules::USER_ROLE_SESSION,
                |body| body.scope.take(),
                |scope, body| async move { gateway.prepare_turn(convert::prepare_from_proto(scope, body)?).await },
            )
            .await?;
        Ok(Response::new(convert::prepared_to_proto(prepared)))
    }

    async fn complete_turn(
        &self,
        request: Request<pb::CompleteTurnRequest>,
    ) -> Result<Response<pb::CompleteTurnResponse>, Status> {
        let gateway = self.gateway.clone();
        let completed = self
            .guarded(
                request,
                ScopeRules::USER_ROLE_SESSION,
                |body| body.scope.take(),
                |scope, body| async move { gateway.complete(convert::complete_from_proto(scope, body)?).await },
            )
            .await?;
        Ok(Response::new(convert::completed_to_proto(completed)))
    }

    async fn converse(&self, request: Request<pb::ConverseRequest>) -> Result<Response<pb::ConverseResponse>, Status> {
        let gateway = self.gateway.clone();
        let (reply, prepared, completed) = self
            .guarded(
                request,
                ScopeRules::USER_ROLE_SESSION,
                |body| body.scope.take(),
                |scope, body| async move {
                    let (turn, system_prompt, request_id) = convert::converse_from_proto(scope, body)?;
                    gateway.converse(turn, system_prompt, request_id).await
                },
            )
            .await?;
        Ok(Response::new(convert::converse_to_proto(reply, prepared, completed)))
    }

    async fn list_jobs(&self, request: Request<pb::ListJobsRequest>) -> Result<Response<pb::ListJobsResponse>, Status> {
        let gateway = self.gateway.clone();
        let (jobs, size, offset) = self
            .guarded(
                request,
                ScopeRules::USER,
                |body| body.scope.take(),
                |scope, body| async move {
                    let (size, offset) = page_from_proto(body.page.as_ref(), "page")?;
                    let status = convert::job_status_from_proto(body.status)?;
                    let jobs = gateway.list_jobs(&scope, status, size, offset).await?;
                    Ok((jobs, size, offset))
                },
            )
            .await?;
        Ok(Response::new(pb::ListJobsResponse {
            page: Some(next_page(size, offset, jobs.len())),
            jobs: jobs.iter().map(convert::job_to_proto).collect(),
        }))
    }

    async fn erase_user(
        &self,
        request: Request<pb::EraseUserRequest>,
    ) -> Result<Response<pb::EraseUserResponse>, Status> {
        let gateway = self.gateway.clone();
        let actor = thinkus_knowledge_manager::grpc::actor_of_key(&principal(&request)?);
        let erasure = self
            .guarded(
                request,
                ScopeRules::USER,
                |body| body.scope.take(),
                |scope, _| async move { gateway.erase_user(&scope.owner(), &actor).await },
            )
            .await?;
        Ok(Response::new(convert::erasure_to_proto(&erasure)))
    }
}
