//! Conversions between the memory controller's protobuf messages and its domain API, with
//! validation naming the offending field.

use thinkus_common::ApiError;
use thinkus_common::convert::{
    ScopeRules, control_decision_from_proto, control_decision_to_proto, datetime_opt, engine_from_proto,
    engine_to_proto_choice, memory_type_to_proto, memory_types, query_embedding_from_proto, query_embedding_to_proto,
    scope_from_proto, scope_to_proto, timestamp_opt,
};
use thinkus_common::model::ControlDecision;
use thinkus_proto::controller as pb;

use crate::api::DecideRequest;

/// Reads and validates a decide request.
pub fn decide_from_proto(request: &pb::DecideRequest) -> Result<DecideRequest, ApiError> {
    if request.message_count < 0 {
        return Err(ApiError::invalid("message_count", "must not be negative"));
    }
    Ok(DecideRequest {
        scope: scope_from_proto(request.scope.as_ref(), "scope", ScopeRules::USER_ROLE)?,
        message: request.message.clone(),
        message_count: request.message_count as u32,
        recent_messages: request.recent_messages.iter().rev().take(20).rev().cloned().collect(),
        type_hints: memory_types(&request.type_hints, "type_hints")?,
        engine: engine_from_proto(request.engine, "engine")?,
        now: datetime_opt(request.now.as_ref(), "now")?,
        query_embedding: query_embedding_from_proto(request.query_embedding.as_ref(), "query_embedding")?,
    })
}

pub fn decide_to_proto(request: DecideRequest) -> pb::DecideRequest {
    pb::DecideRequest {
        scope: Some(scope_to_proto(&request.scope)),
        message: request.message,
        message_count: request.message_count as i32,
        recent_messages: request.recent_messages,
        type_hints: request.type_hints.iter().map(|t| memory_type_to_proto(*t)).collect(),
        engine: engine_to_proto_choice(request.engine),
        now: timestamp_opt(request.now),
        query_embedding: query_embedding_to_proto(request.query_embedding.as_ref()),
    }
}

pub fn decision_to_proto(decision: &ControlDecision) -> pb::DecideResponse {
    pb::DecideResponse {
        decision: Some(control_decision_to_proto(decision)),
    }
}

/// Reads a decision returned by the service (the client side).
pub fn decision_from_proto(response: &pb::DecideResponse) -> Result<ControlDecision, ApiError> {
    let decision = response
        .decision
        .as_ref()
        .ok_or_else(|| ApiError::internal("the memory controller returned no decision"))?;
    control_decision_from_proto(decision).map_err(|e| ApiError::internal(format!("unreadable decision: {}", e.message)))
}
