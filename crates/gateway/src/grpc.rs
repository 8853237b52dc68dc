//! The gRPC adapter of the gateway: the caller's rights on the scope, deadlines carried to the
//! services it calls, and the caller's credential forwarded to them (authentication, rates and
//! seats are the serving layer's: `thinkus_common::grpc::Gate`).

use std::future::Future;
use std::sync::Arc;

use thinkus_backends::sql::{JobRecord, JobStatus};
use thinkus_common::auth::{Principal, principal, with_forwarded_credential};
use thinkus_common::convert::{
    ScopeRules, control_decision_to_proto, datetime_opt, next_page, page_from_proto, scope_from_proto, scope_to_proto,
    timestamp,
};
use thinkus_common::model::Scope;
use thinkus_common::{ApiError, deadline};
use thinkus_proto::gateway as pb;
use thinkus_proto::gateway::gateway_service_server::{GatewayService, GatewayServiceServer};
use tonic::{Request, Response, Status};

use crate::api::{CompleteRequest, Completed, LearnReport, PrepareRequest, Prepared, SectionKind, ToolCall, TraceKind};
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

fn section_kind(kind: SectionKind) -> pb::SectionKind {
    match kind {
        SectionKind::Standing => pb::SectionKind::Standing,
        SectionKind::Decisions => pb::SectionKind::Decisions,
        SectionKind::Preferences => pb::SectionKind::Preferences,
        SectionKind::Conclusions => pb::SectionKind::Conclusions,
        SectionKind::Insights => pb::SectionKind::Insights,
        SectionKind::Other => pb::SectionKind::Other,
        SectionKind::Artifacts => pb::SectionKind::Artifacts,
        SectionKind::LastSession => pb::SectionKind::LastSession,
    }
}

/// The wire form of a prepared context (moved, not copied).
pub fn prepared_to_proto(prepared: Prepared) -> pb::PrepareTurnResponse {
    pb::PrepareTurnResponse {
        context: prepared.context,
        sections: prepared
            .sections
            .into_iter()
            .map(|s| pb::ContextSection {
                kind: section_kind(s.kind) as i32,
                title: s.title,
                text: s.text,
                tokens: s.tokens as i32,
            })
            .collect(),
        tokens_used: prepared.tokens_used as i32,
        budget_tokens: prepared.budget_tokens as i32,
        trace: Some(pb::ContextTrace {
            decision: Some(control_decision_to_proto(&prepared.decision)),
            items: prepared
                .items
                .into_iter()
                .map(|item| pb::TraceItem {
                    kind: match item.kind {
                        TraceKind::Memory => pb::TraceItemKind::Memory,
                        TraceKind::Artifact => pb::TraceItemKind::Artifact,
                        TraceKind::Summary => pb::TraceItemKind::Summary,
                    } as i32,
                    id: item.id,
                    score: item.score,
                    confidence: item.confidence,
                    reason: item.reason,
                    included: item.included,
                    score_breakdown: item.parts.as_ref().map(thinkus_retriever::convert::parts_to_proto),
                    tokens: item.tokens as i32,
                })
                .collect(),
            timings_ms: prepared.timings_ms.into_iter().collect(),
            degraded: prepared.degraded,
        }),
    }
}

/// The wire form of a completed turn (moved, not copied).
pub fn completed_to_proto(completed: Completed) -> pb::CompleteTurnResponse {
    pb::CompleteTurnResponse {
        tool_calls: completed
            .tool_calls
            .into_iter()
            .map(|r| pb::ToolCallResult {
                id: r.id,
                offloaded: r.offloaded,
                artifact_id: r.artifact_id.unwrap_or_default(),
                compact: r.compact,
                replacement: r.replacement,
                original_tokens: r.original_tokens as i32,
            })
            .collect(),
        job_ids: completed.job_ids,
        learning: completed.learning.as_ref().map(job_to_proto),
    }
}

fn budget(value: i32) -> Result<Option<u32>, ApiError> {
    match value {
        0 => Ok(None),
        v if v < 0 => Err(ApiError::invalid("budget_tokens", format!("{v} is negative"))),
        v => Ok(Some(v as u32)),
    }
}

fn optional(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

fn job_status_to_proto(status: JobStatus) -> pb::JobStatus {
    match status {
        JobStatus::Pending => pb::JobStatus::Pending,
        JobStatus::Running => pb::JobStatus::Running,
        JobStatus::Succeeded => pb::JobStatus::Succeeded,
        JobStatus::Failed => pb::JobStatus::Failed,
    }
}

fn job_to_proto(job: &JobRecord) -> pb::Job {
    pb::Job {
        id: job.id.clone(),
        kind: job.kind.clone(),
        status: job_status_to_proto(job.status) as i32,
        attempts: job.attempts as i32,
        last_error: job.last_error.clone().unwrap_or_default(),
        run_after: Some(timestamp(job.run_after)),
        created_at: Some(timestamp(job.created_at)),
        updated_at: Some(timestamp(job.updated_at)),
        scope: Some(scope_to_proto(&Scope {
            tenant_id: job.tenant_id.clone(),
            user_id: job.user_id.clone(),
            role_id: String::new(),
            project_id: None,
            session_id: job.session_id.clone(),
        })),
        learned: learn_report(job),
    }
}

/// The report a succeeded learn job stored.
fn learn_report(job: &JobRecord) -> Option<pb::LearnReport> {
    if job.kind != crate::service::LEARN_JOB {
        return None;
    }
    let report: LearnReport = serde_json::from_str(job.result.as_deref()?).ok()?;
    Some(pb::LearnReport {
        candidates: report.candidates as i32,
        written: report.written as i32,
        reinforced: report.reinforced as i32,
        queued: report.queued as i32,
        rejected: report.rejected as i32,
        refused: report.refused as i32,
        refusals: report
            .refusals
            .iter()
            .map(|r| pb::Refusal {
                r#type: thinkus_common::convert::memory_type_to_proto(r.memory_type),
                summary: r.summary.clone(),
                reason: r.reason.clone(),
            })
            .collect(),
    })
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
                |scope, body| async move {
                    gateway
                        .prepare_turn(PrepareRequest {
                            scope,
                            message: body.message,
                            budget_tokens: budget(body.budget_tokens)?,
                            recent_messages: body.recent_messages,
                            now: datetime_opt(body.now.as_ref(), "now")?,
                        })
                        .await
                },
            )
            .await?;
        Ok(Response::new(prepared_to_proto(prepared)))
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
                |scope, body| async move {
                    gateway
                        .complete(CompleteRequest {
                            scope,
                            user_message: body.user_message,
                            assistant_message: body.assistant_message,
                            tool_calls: body
                                .tool_calls
                                .into_iter()
                                .map(|c| ToolCall {
                                    id: c.id,
                                    name: c.name,
                                    output: c.output,
                                    mime_type: c.mime_type,
                                    path: c.path,
                                })
                                .collect(),
                            not_memorable: body.not_memorable,
                            request_id: optional(&body.request_id),
                            occurred_at: datetime_opt(body.occurred_at.as_ref(), "occurred_at")?,
                            injected_memory_ids: body.injected_memory_ids,
                            end_session: body.end_session,
                            wait_for_learning: body.wait_for_learning,
                        })
                        .await
                },
            )
            .await?;
        Ok(Response::new(completed_to_proto(completed)))
    }

    async fn converse(&self, request: Request<pb::ConverseRequest>) -> Result<Response<pb::ConverseResponse>, Status> {
        let gateway = self.gateway.clone();
        let (reply, prepared, completed) = self
            .guarded(
                request,
                ScopeRules::USER_ROLE_SESSION,
                |body| body.scope.take(),
                |scope, body| async move {
                    gateway
                        .converse(
                            PrepareRequest {
                                scope,
                                message: body.message,
                                budget_tokens: budget(body.budget_tokens)?,
                                recent_messages: Vec::new(),
                                now: None,
                            },
                            optional(&body.system_prompt),
                            optional(&body.request_id),
                        )
                        .await
                },
            )
            .await?;
        Ok(Response::new(pb::ConverseResponse {
            reply,
            prepared: Some(prepared_to_proto(prepared)),
            completed: Some(completed_to_proto(completed)),
        }))
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
                    let status = match pb::JobStatus::try_from(body.status) {
                        Ok(pb::JobStatus::Unspecified) => None,
                        Ok(pb::JobStatus::Pending) => Some(JobStatus::Pending),
                        Ok(pb::JobStatus::Running) => Some(JobStatus::Running),
                        Ok(pb::JobStatus::Succeeded) => Some(JobStatus::Succeeded),
                        Ok(pb::JobStatus::Failed) => Some(JobStatus::Failed),
                        Err(_) => {
                            return Err(ApiError::invalid(
                                "status",
                                format!("unknown job status {}", body.status),
                            ));
                        }
                    };
                    let jobs = gateway.list_jobs(&scope, status, size, offset).await?;
                    Ok((jobs, size, offset))
                },
            )
            .await?;
        Ok(Response::new(pb::ListJobsResponse {
            page: Some(next_page(size, offset, jobs.len())),
            jobs: jobs.iter().map(job_to_proto).collect(),
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
        let answer = thinkus_knowledge_manager::convert::erasure_to_proto(&erasure);
        Ok(Response::new(pb::EraseUserResponse {
            counts: answer.counts,
            erasure_id: answer.erasure_id,
        }))
    }
}
