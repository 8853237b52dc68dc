//! Conversions between the gateway's protobuf messages and its domain types (`api.rs`), both
//! ways where the gateway reads and writes them: the gRPC adapter (`grpc.rs`) reads requests
//! with the `*_from_proto` functions and answers with the `*_to_proto` ones.

use thinkus_backends::sql::{JobRecord, JobStatus};
use thinkus_common::ApiError;
use thinkus_common::convert::{control_decision_to_proto, datetime_opt, scope_to_proto, timestamp};
use thinkus_common::model::Scope;
use thinkus_proto::gateway as pb;

use crate::api::{CompleteRequest, Completed, LearnReport, PrepareRequest, Prepared, SectionKind, ToolCall, TraceKind};

/// A turn to prepare, in `scope` (already authorized).
pub fn prepare_from_proto(scope: Scope, body: pb::PrepareTurnRequest) -> Result<PrepareRequest, ApiError> {
    Ok(PrepareRequest {
        scope,
        message: body.message,
        budget_tokens: budget_from_proto(body.budget_tokens)?,
        recent_messages: body.recent_messages,
        now: datetime_opt(body.now.as_ref(), "now")?,
    })
}

/// A turn to complete, in `scope` (already authorized); tool outputs are moved, not copied.
pub fn complete_from_proto(scope: Scope, body: pb::CompleteTurnRequest) -> Result<CompleteRequest, ApiError> {
    Ok(CompleteRequest {
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
}

/// What `Converse` asks, in `scope` (already authorized): the turn to prepare, the system
/// prompt and the request id.
pub fn converse_from_proto(
    scope: Scope,
    body: pb::ConverseRequest,
) -> Result<(PrepareRequest, Option<String>, Option<String>), ApiError> {
    Ok((
        PrepareRequest {
            scope,
            message: body.message,
            budget_tokens: budget_from_proto(body.budget_tokens)?,
            recent_messages: Vec::new(),
            now: None,
        },
        optional(&body.system_prompt),
        optional(&body.request_id),
    ))
}

/// The wire form of a `Converse` answer.
pub fn converse_to_proto(reply: String, prepared: Prepared, completed: Completed) -> pb::ConverseResponse {
    pb::ConverseResponse {
        reply,
        prepared: Some(prepared_to_proto(prepared)),
        completed: Some(completed_to_proto(completed)),
    }
}

/// The job status a `ListJobs` request filters on (`None`: every status).
pub fn job_status_from_proto(value: i32) -> Result<Option<JobStatus>, ApiError> {
    match pb::JobStatus::try_from(value) {
        Ok(pb::JobStatus::Unspecified) => Ok(None),
        Ok(pb::JobStatus::Pending) => Ok(Some(JobStatus::Pending)),
        Ok(pb::JobStatus::Running) => Ok(Some(JobStatus::Running)),
        Ok(pb::JobStatus::Succeeded) => Ok(Some(JobStatus::Succeeded)),
        Ok(pb::JobStatus::Failed) => Ok(Some(JobStatus::Failed)),
        Err(_) => Err(ApiError::invalid("status", format!("unknown job status {value}"))),
    }
}

fn section_kind_to_proto(kind: SectionKind) -> pb::SectionKind {
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
                kind: section_kind_to_proto(s.kind) as i32,
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

fn budget_from_proto(value: i32) -> Result<Option<u32>, ApiError> {
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

pub fn job_to_proto(job: &JobRecord) -> pb::Job {
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
        learned: learn_report_to_proto(job),
    }
}

/// The report a succeeded learn job stored.
fn learn_report_to_proto(job: &JobRecord) -> Option<pb::LearnReport> {
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

/// The wire form of an erasure (the knowledge manager's counts and id).
pub fn erasure_to_proto(erasure: &thinkus_knowledge_manager::api::Erasure) -> pb::EraseUserResponse {
    let answer = thinkus_knowledge_manager::convert::erasure_to_proto(erasure);
    pb::EraseUserResponse {
        counts: answer.counts,
        erasure_id: answer.erasure_id,
    }
}
