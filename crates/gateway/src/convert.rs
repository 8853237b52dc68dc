//! Conversions between the gateway's protobuf messages and its domain types (`api.rs`), both
//! ways: the gRPC adapter (`grpc.rs`) reads requests with the `*_from_proto` functions and
//! answers with the `*_to_proto` ones; the client (`client.rs`) does the reverse. Bodies are
//! taken by value where they hold messages or tool outputs, so nothing large is copied.

use thinkus_backends::sql::{JobRecord, JobStatus};
use thinkus_common::ApiError;
use thinkus_common::convert::{
    control_decision_from_proto, control_decision_to_proto, datetime, datetime_opt, required_memory_type,
    scope_to_proto, timestamp, timestamp_opt,
};
use thinkus_common::model::{Owner, Scope};
use thinkus_knowledge_manager::api::Erasure;
use thinkus_proto::gateway as pb;

use crate::api::{
    CompleteRequest, Completed, ConverseRequest, Conversed, JobsRequest, LearnReport, PrepareRequest, Prepared,
    Refusal, Section, SectionKind, ToolCall, ToolCallResult, TraceItem, TraceKind,
};

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

/// What `Converse` asks, in `scope` (already authorized).
pub fn converse_from_proto(scope: Scope, body: pb::ConverseRequest) -> Result<ConverseRequest, ApiError> {
    Ok(ConverseRequest {
        scope,
        message: body.message,
        budget_tokens: budget_from_proto(body.budget_tokens)?,
        system_prompt: optional(&body.system_prompt),
        request_id: optional(&body.request_id),
    })
}

/// The wire form of a `Converse` answer.
pub fn converse_to_proto(conversed: Conversed) -> pb::ConverseResponse {
    pb::ConverseResponse {
        reply: conversed.reply,
        prepared: Some(prepared_to_proto(conversed.prepared)),
        completed: Some(completed_to_proto(conversed.completed)),
    }
}

/// A page of jobs to list, in `scope` (already authorized).
pub fn jobs_request_from_proto(scope: Scope, body: &pb::ListJobsRequest) -> Result<JobsRequest, ApiError> {
    let (limit, offset) = thinkus_common::convert::page_from_proto(body.page.as_ref(), "page")?;
    Ok(JobsRequest {
        scope,
        status: job_status_from_proto(body.status)?,
        limit,
        offset,
    })
}

/// The wire form of a page of jobs: a next-page token when the page came back full.
pub fn jobs_to_proto(limit: usize, offset: usize, jobs: &[JobRecord]) -> pb::ListJobsResponse {
    pb::ListJobsResponse {
        page: Some(thinkus_common::convert::next_page(limit, offset, jobs.len())),
        jobs: jobs.iter().map(job_to_proto).collect(),
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

// The client's side (`client.rs`): requests to the wire, answers from it.

fn budget_to_proto(budget: Option<u32>) -> i32 {
    budget.map_or(0, |b| b.min(i32::MAX as u32) as i32)
}

fn count(value: i32) -> u32 {
    value.max(0) as u32
}

/// A turn to prepare, to the wire.
pub fn prepare_to_proto(request: PrepareRequest) -> pb::PrepareTurnRequest {
    pb::PrepareTurnRequest {
        scope: Some(scope_to_proto(&request.scope)),
        message: request.message,
        budget_tokens: budget_to_proto(request.budget_tokens),
        recent_messages: request.recent_messages,
        now: timestamp_opt(request.now),
    }
}

/// A turn to complete, to the wire (tool outputs moved, not copied).
pub fn complete_to_proto(request: CompleteRequest) -> pb::CompleteTurnRequest {
    pb::CompleteTurnRequest {
        scope: Some(scope_to_proto(&request.scope)),
        user_message: request.user_message,
        assistant_message: request.assistant_message,
        tool_calls: request
            .tool_calls
            .into_iter()
            .map(|c| pb::ToolCall {
                id: c.id,
                name: c.name,
                output: c.output,
                mime_type: c.mime_type,
                path: c.path,
            })
            .collect(),
        not_memorable: request.not_memorable,
        request_id: request.request_id.unwrap_or_default(),
        occurred_at: timestamp_opt(request.occurred_at),
        injected_memory_ids: request.injected_memory_ids,
        end_session: request.end_session,
        wait_for_learning: request.wait_for_learning,
    }
}

/// A message to converse on, to the wire.
pub fn converse_request_to_proto(request: ConverseRequest) -> pb::ConverseRequest {
    pb::ConverseRequest {
        scope: Some(scope_to_proto(&request.scope)),
        message: request.message,
        budget_tokens: budget_to_proto(request.budget_tokens),
        system_prompt: request.system_prompt.unwrap_or_default(),
        request_id: request.request_id.unwrap_or_default(),
    }
}

/// A page of jobs to list, to the wire.
pub fn jobs_request_to_proto(request: &JobsRequest) -> pb::ListJobsRequest {
    pb::ListJobsRequest {
        scope: Some(scope_to_proto(&request.scope)),
        status: request.status.map_or(pb::JobStatus::Unspecified, job_status_to_proto) as i32,
        page: Some(thinkus_common::convert::page_to_proto(request.limit, request.offset)),
    }
}

/// A user to erase, to the wire.
pub fn erase_request_to_proto(owner: Owner) -> pb::EraseUserRequest {
    pb::EraseUserRequest {
        scope: Some(thinkus_proto::common::Scope {
            tenant_id: owner.tenant_id,
            user_id: owner.user_id,
            ..Default::default()
        }),
    }
}

fn section_kind_from_proto(value: i32, field: &str) -> Result<SectionKind, ApiError> {
    Ok(match pb::SectionKind::try_from(value) {
        Ok(pb::SectionKind::Standing) => SectionKind::Standing,
        Ok(pb::SectionKind::Decisions) => SectionKind::Decisions,
        Ok(pb::SectionKind::Preferences) => SectionKind::Preferences,
        Ok(pb::SectionKind::Conclusions) => SectionKind::Conclusions,
        Ok(pb::SectionKind::Insights) => SectionKind::Insights,
        Ok(pb::SectionKind::Other) => SectionKind::Other,
        Ok(pb::SectionKind::Artifacts) => SectionKind::Artifacts,
        Ok(pb::SectionKind::LastSession) => SectionKind::LastSession,
        Ok(pb::SectionKind::Unspecified) | Err(_) => {
            return Err(ApiError::invalid(field, format!("unknown section kind {value}")));
        }
    })
}

fn trace_kind_from_proto(value: i32, field: &str) -> Result<TraceKind, ApiError> {
    match pb::TraceItemKind::try_from(value) {
        Ok(pb::TraceItemKind::Memory) => Ok(TraceKind::Memory),
        Ok(pb::TraceItemKind::Artifact) => Ok(TraceKind::Artifact),
        Ok(pb::TraceItemKind::Summary) => Ok(TraceKind::Summary),
        Ok(pb::TraceItemKind::Unspecified) | Err(_) => {
            Err(ApiError::invalid(field, format!("unknown trace item kind {value}")))
        }
    }
}

/// A prepared context, from the wire (moved, not copied). A context without its trace or the
/// trace without the controller's decision is refused: every answer of the gateway has both.
pub fn prepared_from_proto(response: pb::PrepareTurnResponse) -> Result<Prepared, ApiError> {
    let trace = response
        .trace
        .ok_or_else(|| ApiError::invalid("trace", "is missing from the gateway's answer"))?;
    let decision = trace
        .decision
        .as_ref()
        .ok_or_else(|| ApiError::invalid("trace.decision", "is missing from the gateway's answer"))?;
    Ok(Prepared {
        context: response.context,
        sections: response
            .sections
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                Ok(Section {
                    kind: section_kind_from_proto(s.kind, &format!("sections[{i}].kind"))?,
                    title: s.title,
                    text: s.text,
                    tokens: count(s.tokens),
                })
            })
            .collect::<Result<_, ApiError>>()?,
        tokens_used: count(response.tokens_used),
        budget_tokens: count(response.budget_tokens),
        decision: control_decision_from_proto(decision)?,
        items: trace
            .items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                Ok(TraceItem {
                    kind: trace_kind_from_proto(item.kind, &format!("trace.items[{i}].kind"))?,
                    parts: item
                        .score_breakdown
                        .as_ref()
                        .map(|p| thinkus_retriever::convert::parts_from_proto(Some(p))),
                    id: item.id,
                    score: item.score,
                    confidence: item.confidence,
                    reason: item.reason,
                    included: item.included,
                    tokens: count(item.tokens),
                })
            })
            .collect::<Result<_, ApiError>>()?,
        timings_ms: trace.timings_ms.into_iter().collect(),
        degraded: trace.degraded,
    })
}

/// A completed turn, from the wire (moved, not copied).
pub fn completed_from_proto(response: pb::CompleteTurnResponse) -> Result<Completed, ApiError> {
    Ok(Completed {
        tool_calls: response
            .tool_calls
            .into_iter()
            .map(|r| ToolCallResult {
                artifact_id: optional(&r.artifact_id),
                id: r.id,
                offloaded: r.offloaded,
                compact: r.compact,
                replacement: r.replacement,
                original_tokens: count(r.original_tokens),
            })
            .collect(),
        job_ids: response.job_ids,
        learning: response.learning.as_ref().map(job_from_proto).transpose()?,
    })
}

/// A `Converse` answer, from the wire.
pub fn conversed_from_proto(response: pb::ConverseResponse) -> Result<Conversed, ApiError> {
    Ok(Conversed {
        reply: response.reply,
        prepared: prepared_from_proto(
            response
                .prepared
                .ok_or_else(|| ApiError::invalid("prepared", "is missing from the gateway's answer"))?,
        )?,
        completed: completed_from_proto(
            response
                .completed
                .ok_or_else(|| ApiError::invalid("completed", "is missing from the gateway's answer"))?,
        )?,
    })
}

/// A job, from the wire: what the wire carries of it. Its payload, lease and dedupe key stay
/// in the gateway (empty here); a learn job's report comes back as its result.
pub fn job_from_proto(job: &pb::Job) -> Result<JobRecord, ApiError> {
    let scope = job.scope.clone().unwrap_or_default();
    let time = |value: Option<&prost_types::Timestamp>, field: &str| match value {
        Some(ts) => datetime(ts, field),
        None => Err(ApiError::invalid(field, "is missing from the gateway's answer")),
    };
    let result = match &job.learned {
        Some(report) => Some(
            serde_json::to_string(&learn_report_from_proto(report)?)
                .map_err(|err| ApiError::internal(format!("job {}: its learn report: {err}", job.id)))?,
        ),
        None => None,
    };
    Ok(JobRecord {
        id: job.id.clone(),
        kind: job.kind.clone(),
        tenant_id: scope.tenant_id,
        user_id: scope.user_id,
        session_id: optional(&scope.session_id),
        payload: String::new(),
        status: job_status_from_proto(job.status)?
            .ok_or_else(|| ApiError::invalid("job.status", "is unspecified in the gateway's answer"))?,
        attempts: count(job.attempts),
        max_attempts: 0,
        last_error: optional(&job.last_error),
        run_after: time(job.run_after.as_ref(), "job.run_after")?,
        lease_until: None,
        dedupe_key: None,
        result,
        created_at: time(job.created_at.as_ref(), "job.created_at")?,
        updated_at: time(job.updated_at.as_ref(), "job.updated_at")?,
    })
}

fn learn_report_from_proto(report: &pb::LearnReport) -> Result<LearnReport, ApiError> {
    Ok(LearnReport {
        candidates: count(report.candidates),
        written: count(report.written),
        reinforced: count(report.reinforced),
        queued: count(report.queued),
        rejected: count(report.rejected),
        refused: count(report.refused),
        refusals: report
            .refusals
            .iter()
            .enumerate()
            .map(|(i, r)| {
                Ok(Refusal {
                    memory_type: required_memory_type(r.r#type, &format!("learned.refusals[{i}].type"))?,
                    summary: r.summary.clone(),
                    reason: r.reason.clone(),
                })
            })
            .collect::<Result<_, ApiError>>()?,
    })
}

/// An erasure, from the wire.
pub fn erasure_from_proto(response: &pb::EraseUserResponse) -> Erasure {
    Erasure {
        id: optional(&response.erasure_id),
        counts: thinkus_knowledge_manager::convert::erasure_counts_from_proto(response.counts.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use thinkus_common::model::{ControlDecision, Language, MemoryType, NeedMemory, RetrievalMode, TimeRange};
    use thinkus_retriever::api::ScoreParts;

    use super::*;
    use crate::api::ToolCall;

    fn at(seconds: i64) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc.timestamp_opt(seconds, 123_000_000).unwrap()
    }

    fn scope() -> Scope {
        Scope {
            tenant_id: "acme".into(),
            user_id: "dana".into(),
            role_id: "cto".into(),
            project_id: Some("shop".into()),
            session_id: Some("s1".into()),
        }
    }

    /// A prepared context with every field set to something other than its default.
    fn prepared() -> Prepared {
        Prepared {
            context: "## Decisions\n- Next.js".into(),
            sections: vec![
                Section {
                    kind: SectionKind::Standing,
                    title: "Standing".into(),
                    text: "- budget 5万".into(),
                    tokens: 7,
                },
                Section {
                    kind: SectionKind::LastSession,
                    title: "Last session".into(),
                    text: "we chose".into(),
                    tokens: 3,
                },
            ],
            tokens_used: 42,
            budget_tokens: 1500,
            decision: ControlDecision {
                need_memory: NeedMemory::Yes,
                memory_types: vec![MemoryType::ProjectDecision, MemoryType::UserPreference],
                retrieval_mode: RetrievalMode::Details,
                budget_tokens: 900,
                time_range: TimeRange::Last30Days,
                reason: "asks about a decision".into(),
                engine: "rules".into(),
                signals: vec!["decision".into()],
                language: Language::Zh,
            },
            items: vec![
                TraceItem {
                    kind: TraceKind::Memory,
                    id: "mem_1".into(),
                    score: 0.75,
                    confidence: 0.9,
                    reason: "relevant".into(),
                    included: true,
                    parts: Some(ScoreParts {
                        score: 0.75,
                        relevance: 0.5,
                        dense_similarity: 0.8,
                        keyword_score: 1.5,
                        dense_rank: 1,
                        keyword_rank: 2,
                        importance: 0.6,
                        freshness: 0.95,
                        layer: "project",
                    }),
                    tokens: 12,
                },
                TraceItem {
                    kind: TraceKind::Artifact,
                    id: "art_1".into(),
                    score: 0.0,
                    confidence: 0.0,
                    reason: "over budget".into(),
                    included: false,
                    parts: None,
                    tokens: 30,
                },
            ],
            timings_ms: [("controller".to_string(), 1.5), ("retriever".to_string(), 7.25)].into(),
            degraded: vec!["summary (http://summary:50051) failed: down".into()],
        }
    }

    fn learn_job() -> JobRecord {
        let report = LearnReport {
            candidates: 3,
            written: 1,
            reinforced: 1,
            queued: 0,
            rejected: 0,
            refused: 1,
            refusals: vec![Refusal {
                memory_type: MemoryType::Fact,
                summary: "the office is in Berlin".into(),
                reason: "plan free: 100 facts".into(),
            }],
        };
        // What the wire carries of a job: no payload, lease or dedupe key.
        JobRecord {
            id: "job_1".into(),
            kind: crate::service::LEARN_JOB.into(),
            tenant_id: "acme".into(),
            user_id: "dana".into(),
            session_id: Some("s1".into()),
            payload: String::new(),
            status: JobStatus::Succeeded,
            attempts: 2,
            max_attempts: 0,
            last_error: Some("first try: timeout".into()),
            run_after: at(1_700_000_000),
            lease_until: None,
            dedupe_key: None,
            result: Some(serde_json::to_string(&report).unwrap()),
            created_at: at(1_700_000_001),
            updated_at: at(1_700_000_002),
        }
    }

    #[test]
    fn a_prepared_context_survives_the_wire() {
        let sent = prepared();
        assert_eq!(prepared_from_proto(prepared_to_proto(sent.clone())).unwrap(), sent);
    }

    #[test]
    fn a_completed_turn_survives_the_wire() {
        let sent = Completed {
            tool_calls: vec![
                ToolCallResult {
                    id: "call-1".into(),
                    offloaded: true,
                    artifact_id: Some("art_9".into()),
                    compact: Some(thinkus_proto::common::ArtifactCompact {
                        summary: "a table of 90 rows".into(),
                        tokens: 40,
                        ..Default::default()
                    }),
                    replacement: "[artifact art_9]".into(),
                    original_tokens: 4000,
                },
                ToolCallResult {
                    id: "call-2".into(),
                    offloaded: false,
                    artifact_id: None,
                    compact: None,
                    replacement: "ok".into(),
                    original_tokens: 1,
                },
            ],
            job_ids: vec!["job_1".into(), "job_2".into()],
            learning: Some(learn_job()),
        };
        assert_eq!(completed_from_proto(completed_to_proto(sent.clone())).unwrap(), sent);
    }

    #[test]
    fn a_converse_answer_survives_the_wire() {
        let sent = Conversed {
            reply: "We chose Next.js.".into(),
            prepared: prepared(),
            completed: Completed {
                tool_calls: Vec::new(),
                job_ids: vec!["job_3".into()],
                learning: None,
            },
        };
        assert_eq!(conversed_from_proto(converse_to_proto(sent.clone())).unwrap(), sent);
    }

    #[test]
    fn requests_survive_the_wire() {
        let prepare = PrepareRequest {
            scope: scope(),
            message: "我们定的前端框架是什么？".into(),
            budget_tokens: Some(1500),
            recent_messages: vec!["好的".into()],
            now: Some(at(1_700_000_000)),
        };
        let mut wire = prepare_to_proto(prepare.clone());
        assert_eq!(wire.scope.take(), Some(scope_to_proto(&prepare.scope)));
        let read = prepare_from_proto(prepare.scope.clone(), wire).unwrap();
        assert_eq!(
            (read.message, read.budget_tokens, read.recent_messages, read.now),
            (
                prepare.message,
                prepare.budget_tokens,
                prepare.recent_messages,
                prepare.now
            )
        );

        let complete = CompleteRequest {
            scope: scope(),
            user_message: "we pick Next.js".into(),
            assistant_message: "noted".into(),
            tool_calls: vec![ToolCall {
                id: "call-1".into(),
                name: "search".into(),
                output: "results".into(),
                mime_type: "text/plain".into(),
                path: "/out.txt".into(),
            }],
            not_memorable: true,
            request_id: Some("turn-1".into()),
            occurred_at: Some(at(1_700_000_000)),
            injected_memory_ids: vec!["mem_1".into()],
            end_session: true,
            wait_for_learning: true,
        };
        let mut wire = complete_to_proto(complete.clone());
        assert_eq!(wire.scope.take(), Some(scope_to_proto(&complete.scope)));
        let read = complete_from_proto(complete.scope.clone(), wire).unwrap();
        assert_eq!(format!("{read:?}"), format!("{complete:?}"));

        let converse = ConverseRequest {
            scope: scope(),
            message: "hi".into(),
            budget_tokens: Some(800),
            system_prompt: Some("be brief".into()),
            request_id: Some("c-1".into()),
        };
        let mut wire = converse_request_to_proto(converse.clone());
        assert_eq!(wire.scope.take(), Some(scope_to_proto(&converse.scope)));
        let read = converse_from_proto(converse.scope.clone(), wire).unwrap();
        assert_eq!(format!("{read:?}"), format!("{converse:?}"));

        let jobs = JobsRequest {
            scope: scope(),
            status: Some(JobStatus::Running),
            limit: 20,
            offset: 40,
        };
        let wire = jobs_request_to_proto(&jobs);
        assert_eq!(wire.scope, Some(scope_to_proto(&jobs.scope)));
        let read = jobs_request_from_proto(jobs.scope.clone(), &wire).unwrap();
        assert_eq!(format!("{read:?}"), format!("{jobs:?}"));

        let wire = erase_request_to_proto(Owner::new("acme", "dana"));
        let scope = wire.scope.unwrap();
        assert_eq!((scope.tenant_id.as_str(), scope.user_id.as_str()), ("acme", "dana"));
    }

    #[test]
    fn an_answer_without_its_trace_is_refused() {
        let mut wire = prepared_to_proto(prepared());
        wire.trace = None;
        assert_eq!(
            prepared_from_proto(wire).unwrap_err().code,
            thinkus_common::ErrorCode::InvalidArgument
        );
        let mut wire = prepared_to_proto(prepared());
        wire.sections[0].kind = 99;
        let err = prepared_from_proto(wire).unwrap_err();
        assert!(err.message.contains("sections[0].kind"), "{err}");
    }
}
