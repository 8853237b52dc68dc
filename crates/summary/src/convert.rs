//! Conversions between the summary service's protobuf messages and its domain API, with
//! validation naming the offending field.

use chrono::{DateTime, Utc};
use thinkus_common::ApiError;
use thinkus_common::convert::{
    ScopeRules, artifact_ref_from_proto, artifact_ref_to_proto, datetime, datetime_opt, decision_from_proto,
    decision_to_proto, engine_from_proto, engine_to_proto_choice, language_from_proto, message_to_proto,
    messages_from_proto, scope_from_proto, scope_to_proto, timestamp, timestamp_opt,
};
use thinkus_common::model::{Language, Scope};
use thinkus_proto::common as pbc;
use thinkus_proto::summary as pb;

use crate::api::{
    GenerateRequest, GenerateResult, ListRequest, RecordRequest, RecordResult, RenderRequest, Rendered, SessionSummary,
};

/// The longest message accepted over gRPC, in characters (the service may be stricter).
pub const MAX_MESSAGE_CHARS: usize = 32 * 1024;

pub fn summary_to_proto(summary: &SessionSummary) -> pbc::SessionSummary {
    pbc::SessionSummary {
        id: summary.id.clone(),
        scope: Some(scope_to_proto(&summary.scope)),
        goal: summary.goal.clone(),
        constraints: summary.constraints.clone(),
        decisions: summary.decisions.iter().map(decision_to_proto).collect(),
        progress: summary.progress.clone(),
        artifacts: summary.artifacts.iter().map(artifact_ref_to_proto).collect(),
        next_actions: summary.next_actions.clone(),
        risks: summary.risks.clone(),
        open_questions: summary.open_questions.clone(),
        trajectory_start: summary.trajectory_start,
        trajectory_end: summary.trajectory_end,
        created_at: Some(timestamp(summary.created_at)),
        updated_at: Some(timestamp(summary.updated_at)),
        language: summary.language.as_str().to_string(),
        engine: summary.engine.clone(),
    }
}

/// Reads a summary returned by the service (the client side).
pub fn summary_from_proto(summary: &pbc::SessionSummary) -> Result<SessionSummary, ApiError> {
    let scope = summary
        .scope
        .as_ref()
        .ok_or_else(|| ApiError::internal("a summary without its scope"))?;
    let at = |ts: &Option<prost_types::Timestamp>, field: &str| match ts {
        Some(ts) => datetime(ts, field),
        None => Err(ApiError::internal(format!("a summary without {field}"))),
    };
    Ok(SessionSummary {
        id: summary.id.clone(),
        scope: Scope {
            tenant_id: scope.tenant_id.clone(),
            user_id: scope.user_id.clone(),
            role_id: scope.role_id.clone(),
            project_id: (!scope.project_id.is_empty()).then(|| scope.project_id.clone()),
            session_id: (!scope.session_id.is_empty()).then(|| scope.session_id.clone()),
        },
        goal: summary.goal.clone(),
        constraints: summary.constraints.clone(),
        decisions: summary.decisions.iter().map(decision_from_proto).collect(),
        progress: summary.progress.clone(),
        artifacts: summary.artifacts.iter().map(artifact_ref_from_proto).collect(),
        next_actions: summary.next_actions.clone(),
        risks: summary.risks.clone(),
        open_questions: summary.open_questions.clone(),
        trajectory_start: summary.trajectory_start,
        trajectory_end: summary.trajectory_end,
        language: summary.language.parse().unwrap_or(Language::En),
        engine: summary.engine.clone(),
        created_at: at(&summary.created_at, "created_at")?,
        updated_at: at(&summary.updated_at, "updated_at")?,
    })
}

/// Reads a summary the service must have returned (the client side).
fn required_summary(value: Option<&pbc::SessionSummary>) -> Result<SessionSummary, ApiError> {
    summary_from_proto(value.ok_or_else(|| ApiError::internal("the summary service returned no summary"))?)
}

fn index(value: Option<i32>, field: &str) -> Result<Option<u32>, ApiError> {
    match value {
        None => Ok(None),
        Some(v) if v >= 0 => Ok(Some(v as u32)),
        Some(v) => Err(ApiError::invalid(field, format!("must not be negative, got {v}"))),
    }
}

pub fn record_from_proto(request: &pb::RecordMessagesRequest) -> Result<RecordRequest, ApiError> {
    let scope = scope_from_proto(request.scope.as_ref(), "scope", ScopeRules::USER_ROLE_SESSION)?;
    if request.messages.is_empty() {
        return Err(ApiError::invalid("messages", "is empty: send 1 to 500 messages"));
    }
    Ok(RecordRequest {
        scope,
        messages: messages_from_proto(&request.messages, "messages", MAX_MESSAGE_CHARS)?,
        phase_completed: request.phase_completed,
        job_id: Some(request.job_id.clone()).filter(|id| !id.is_empty()),
    })
}

pub fn record_to_proto(request: &RecordRequest) -> pb::RecordMessagesRequest {
    pb::RecordMessagesRequest {
        scope: Some(scope_to_proto(&request.scope)),
        messages: request.messages.iter().map(message_to_proto).collect(),
        phase_completed: request.phase_completed,
        job_id: request.job_id.clone().unwrap_or_default(),
    }
}

pub fn generate_from_proto(request: &pb::GenerateSummaryRequest) -> Result<GenerateRequest, ApiError> {
    Ok(GenerateRequest {
        scope: scope_from_proto(request.scope.as_ref(), "scope", ScopeRules::USER_SESSION)?,
        messages: messages_from_proto(&request.messages, "messages", MAX_MESSAGE_CHARS)?,
        trajectory_start: index(request.trajectory_start, "trajectory_start")?,
        trajectory_end: index(request.trajectory_end, "trajectory_end")?,
        engine: engine_from_proto(request.engine, "engine")?,
    })
}

pub fn generate_to_proto(request: &GenerateRequest) -> pb::GenerateSummaryRequest {
    pb::GenerateSummaryRequest {
        scope: Some(scope_to_proto(&request.scope)),
        messages: request.messages.iter().map(message_to_proto).collect(),
        trajectory_start: request.trajectory_start.map(|v| v as i32),
        trajectory_end: request.trajectory_end.map(|v| v as i32),
        engine: engine_to_proto_choice(request.engine),
    }
}

pub fn list_from_proto(request: &pb::ListSummariesRequest) -> Result<ListRequest, ApiError> {
    let limit = match request.limit {
        0 => 5,
        l if (1..=50).contains(&l) => l as usize,
        l => return Err(ApiError::invalid("limit", format!("must be 0-50, got {l}"))),
    };
    Ok(ListRequest {
        scope: scope_from_proto(request.scope.as_ref(), "scope", ScopeRules::USER)?,
        limit,
        other_roles_only: request.other_roles_only,
    })
}

pub fn list_to_proto(request: &ListRequest) -> pb::ListSummariesRequest {
    pb::ListSummariesRequest {
        scope: Some(scope_to_proto(&request.scope)),
        limit: request.limit as i32,
        other_roles_only: request.other_roles_only,
    }
}

pub fn render_from_proto(request: &pb::RenderSummaryRequest) -> Result<RenderRequest, ApiError> {
    let budget_tokens = match request.budget_tokens {
        0 => None,
        b if b > 0 => Some(b as u32),
        b => {
            return Err(ApiError::invalid(
                "budget_tokens",
                format!("must not be negative, got {b}"),
            ));
        }
    };
    if request.session_id.is_empty() {
        return Err(ApiError::invalid("session_id", "is required"));
    }
    Ok(RenderRequest {
        scope: scope_from_proto(request.scope.as_ref(), "scope", ScopeRules::USER)?,
        session_id: request.session_id.clone(),
        budget_tokens,
        language: language_from_proto(&request.language, "language")?,
        now: datetime_opt(request.now.as_ref(), "now")?,
    })
}

pub fn render_to_proto(request: &RenderRequest) -> pb::RenderSummaryRequest {
    pb::RenderSummaryRequest {
        scope: Some(scope_to_proto(&request.scope)),
        session_id: request.session_id.clone(),
        budget_tokens: request.budget_tokens.unwrap_or(0) as i32,
        language: request.language.map(|l| l.as_str().to_string()).unwrap_or_default(),
        now: timestamp_opt(request.now),
    }
}

pub fn record_result_to_proto(result: &RecordResult) -> pb::RecordMessagesResponse {
    pb::RecordMessagesResponse {
        first_index: result.first_index as i32,
        message_count: result.message_count as i32,
        summary_scheduled: result.summary_scheduled,
    }
}

pub fn record_result_from_proto(response: &pb::RecordMessagesResponse) -> RecordResult {
    RecordResult {
        first_index: response.first_index.max(0) as u32,
        message_count: response.message_count.max(0) as u32,
        summary_scheduled: response.summary_scheduled,
    }
}

pub fn generate_result_to_proto(result: &GenerateResult) -> pb::GenerateSummaryResponse {
    pb::GenerateSummaryResponse {
        summary: Some(summary_to_proto(&result.summary)),
        messages_read: result.messages_read as i32,
    }
}

pub fn generate_result_from_proto(response: &pb::GenerateSummaryResponse) -> Result<GenerateResult, ApiError> {
    Ok(GenerateResult {
        summary: required_summary(response.summary.as_ref())?,
        messages_read: response.messages_read.max(0) as u32,
    })
}

pub fn get_to_proto(scope: &Scope, session_id: String) -> pb::GetSummaryRequest {
    pb::GetSummaryRequest {
        scope: Some(scope_to_proto(scope)),
        session_id,
    }
}

pub fn get_response(summary: &SessionSummary) -> pb::GetSummaryResponse {
    pb::GetSummaryResponse {
        summary: Some(summary_to_proto(summary)),
    }
}

pub fn get_from_response(response: &pb::GetSummaryResponse) -> Result<SessionSummary, ApiError> {
    required_summary(response.summary.as_ref())
}

pub fn list_response(summaries: &[SessionSummary]) -> pb::ListSummariesResponse {
    pb::ListSummariesResponse {
        summaries: summaries.iter().map(summary_to_proto).collect(),
    }
}

pub fn list_from_response(response: &pb::ListSummariesResponse) -> Result<Vec<SessionSummary>, ApiError> {
    response.summaries.iter().map(summary_from_proto).collect()
}

pub fn rendered_to_proto(rendered: Rendered) -> pb::RenderSummaryResponse {
    pb::RenderSummaryResponse {
        markdown: rendered.markdown,
        tokens: rendered.tokens as i32,
    }
}

pub fn rendered_from_proto(response: pb::RenderSummaryResponse) -> Rendered {
    Rendered {
        markdown: response.markdown,
        tokens: response.tokens.max(0) as u32,
    }
}

pub fn previous_to_proto(scope: &Scope, now: DateTime<Utc>) -> pb::GetPreviousSummaryRequest {
    pb::GetPreviousSummaryRequest {
        scope: Some(scope_to_proto(scope)),
        now: Some(timestamp(now)),
    }
}

pub fn previous_response(previous: Option<&SessionSummary>) -> pb::GetPreviousSummaryResponse {
    pb::GetPreviousSummaryResponse {
        summary: previous.map(summary_to_proto),
    }
}

pub fn previous_from_response(response: &pb::GetPreviousSummaryResponse) -> Result<Option<SessionSummary>, ApiError> {
    response.summary.as_ref().map(summary_from_proto).transpose()
}

pub fn end_session_to_proto(scope: &Scope) -> pb::EndSessionRequest {
    pb::EndSessionRequest {
        scope: Some(scope_to_proto(scope)),
    }
}
