//! The gRPC adapter of the gateway: the caller's rights on the scope, deadlines carried to the
//! services it calls, and the caller's credential forwarded to them (authentication, rates and
//! seats are the serving layer's: `thinkus_common::grpc::Gate`).

use std::future::Future;
use std::sync::Arc;

use thinkus_common::auth::{Principal, principal, with_forwarded_credential};
use thinkus_common::convert::{ScopeRules, scope_from_proto};
use thinkus_common::model::Scope;
use thinkus_common::{ApiError, deadline};
use thinkus_proto::gateway as pb;
use thinkus_proto::gateway::gateway_service_server::{GatewayService, GatewayServiceServer};
use tonic::{Request, Response, Status};

use crate::api::GatewayApi;
use crate::convert;

/// Serves [`GatewayApi`] over gRPC.
pub struct GatewayGrpc {
    api: Arc<dyn GatewayApi>,
}

impl GatewayGrpc {
    pub fn new(api: Arc<dyn GatewayApi>) -> Self {
        Self { api }
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
        Ok(with_forwarded_credential(
            principal.credential,
            deadline::with_deadline(deadline, work(scope, body)),
        )
        .await?)
    }
}

#[tonic::async_trait]
impl GatewayService for GatewayGrpc {
    async fn prepare_turn(
        &self,
        request: Request<pb::PrepareTurnRequest>,
    ) -> Result<Response<pb::PrepareTurnResponse>, Status> {
        let api = self.api.clone();
        let prepared = self
            .guarded(
                request,
                ScopeRules::USER_ROLE_SESSION,
                |body| body.scope.take(),
                |scope, body| async move { api.prepare_turn(convert::prepare_from_proto(scope, body)?).await },
            )
            .await?;
        Ok(Response::new(convert::prepared_to_proto(prepared)))
    }

    async fn complete_turn(
        &self,
        request: Request<pb::CompleteTurnRequest>,
    ) -> Result<Response<pb::CompleteTurnResponse>, Status> {
        let api = self.api.clone();
        let completed = self
            .guarded(
                request,
                ScopeRules::USER_ROLE_SESSION,
                |body| body.scope.take(),
                |scope, body| async move { api.complete_turn(convert::complete_from_proto(scope, body)?).await },
            )
            .await?;
        Ok(Response::new(convert::completed_to_proto(completed)))
    }

    async fn converse(&self, request: Request<pb::ConverseRequest>) -> Result<Response<pb::ConverseResponse>, Status> {
        let api = self.api.clone();
        let conversed = self
            .guarded(
                request,
                ScopeRules::USER_ROLE_SESSION,
                |body| body.scope.take(),
                |scope, body| async move { api.converse(convert::converse_from_proto(scope, body)?).await },
            )
            .await?;
        Ok(Response::new(convert::converse_to_proto(conversed)))
    }

    async fn list_jobs(&self, request: Request<pb::ListJobsRequest>) -> Result<Response<pb::ListJobsResponse>, Status> {
        let api = self.api.clone();
        let ((limit, offset), jobs) = self
            .guarded(
                request,
                ScopeRules::USER,
                |body| body.scope.take(),
                |scope, body| async move {
                    let request = convert::jobs_request_from_proto(scope, &body)?;
                    let page = (request.limit, request.offset);
                    Ok((page, api.list_jobs(request).await?))
                },
            )
            .await?;
        Ok(Response::new(convert::jobs_to_proto(limit, offset, &jobs)))
    }

    async fn erase_user(
        &self,
        request: Request<pb::EraseUserRequest>,
    ) -> Result<Response<pb::EraseUserResponse>, Status> {
        let api = self.api.clone();
        let actor = thinkus_knowledge_manager::grpc::actor_of_key(&principal(&request)?);
        let erasure = self
            .guarded(
                request,
                ScopeRules::USER,
                |body| body.scope.take(),
                |scope, _| async move { api.erase_user(scope.owner(), actor).await },
            )
            .await?;
        Ok(Response::new(convert::erasure_to_proto(&erasure)))
    }
}
