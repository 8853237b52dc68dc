//! Conversions between the summary service's protobuf messages and its domain API, with
//! validation naming the offending field.

use thinkus_common::ApiError;
use thinkus_common::convert::{
    ScopeRules, artifact_ref_from_proto, artifact_ref_to_proto, datetime, datetime_opt, decision_from_proto,
    decision_to_proto, engine_from_proto, engine_to_proto_choice, language_from_proto, message_to_proto,
    messages_from_proto, scope_from_proto, scope_to_proto, timestamp, timestamp_opt,
};
use thinkus_common::model::{Language, Scope};
use thinkus_proto::common as pbc;
use thinkus_proto::summary as pb;

use crate::api::{GenerateRequest, ListRequest, RecordRequest, RenderRequest, SessionSummary};

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
    })
}

pub fn record_to_proto(request: &RecordRequest) -> pb::RecordMessagesRequest {
    pb::RecordMessagesRequest {
        scope: Some(scope_to_proto(&request.scope)),
        messages: request.messages.iter().map(message_to_proto).collect(),
        phase_completed: request.phase_completed,
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
