//! Conversions between the retriever's protobuf messages and its domain API, both ways (the
//! server adapter reads requests and writes responses; the gRPC client does the opposite).

use thinkus_backends::vector::Layers;
use thinkus_common::ApiError;
use thinkus_common::convert::{
    ScopeRules, artifact_ref_from_proto, artifact_ref_to_proto, datetime, datetime_opt, language_from_proto,
    memory_type_from_proto, memory_type_to_proto, memory_types, mode_from_proto, mode_to_proto,
    query_embedding_from_proto, query_embedding_to_proto, scope_from_proto, scope_to_proto, status_from_proto,
    status_to_proto, time_range_from_proto, time_range_to_proto, timestamp, timestamp_opt, visibility_from_proto,
    visibility_to_proto,
};
use thinkus_common::model::{MemoryStatus, MemoryType, RetrievalMode, Visibility};
use thinkus_proto::common as pbc;
use thinkus_proto::retriever as pb;

use crate::api::{CatalogEntry, DetailsRequest, DetailsResult, MemoryDetails, RecallRequest, RecallResult, ScoreParts};

fn positive(value: i32, field: &str) -> Result<Option<u32>, ApiError> {
    match value {
        0 => Ok(None),
        v if v < 0 => Err(ApiError::invalid(field, format!("must not be negative, got {v}"))),
        v => Ok(Some(v as u32)),
    }
}

fn statuses(values: &[i32], field: &str) -> Result<Vec<MemoryStatus>, ApiError> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            status_from_proto(*v, &format!("{field}[{i}]"))?
                .ok_or_else(|| ApiError::invalid(&format!("{field}[{i}]"), "is unspecified"))
        })
        .collect()
}

fn visibilities(values: &[i32], field: &str) -> Result<Vec<Visibility>, ApiError> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            visibility_from_proto(*v, &format!("{field}[{i}]"))?
                .ok_or_else(|| ApiError::invalid(&format!("{field}[{i}]"), "is unspecified"))
        })
        .collect()
}

fn layers_from_proto(value: i32) -> Result<Layers, ApiError> {
    match pb::Layers::try_from(value) {
        Ok(pb::Layers::Unspecified) => Ok(Layers::Both),
        Ok(pb::Layers::Project) => Ok(Layers::Project),
        Ok(pb::Layers::CrossProject) => Ok(Layers::CrossProject),
        Err(_) => Err(ApiError::invalid("layers", format!("unknown layers value {value}"))),
    }
}

fn layers_to_proto(layers: Layers) -> i32 {
    match layers {
        Layers::Both => pb::Layers::Unspecified as i32,
        Layers::Project => pb::Layers::Project as i32,
        Layers::CrossProject => pb::Layers::CrossProject as i32,
    }
}

/// Reads and validates a recall request.
pub fn recall_from_proto(request: &pb::RecallRequest) -> Result<RecallRequest, ApiError> {
    let scope = scope_from_proto(request.scope.as_ref(), "scope", ScopeRules::USER_ROLE)?;
    let layers = layers_from_proto(request.layers)?;
    if layers == Layers::Project && scope.project_id.is_none() {
        return Err(ApiError::invalid(
            "scope.project_id",
            "is required to search the project layer only",
        ));
    }
    Ok(RecallRequest {
        scope,
        query: request.query.clone(),
        mode: mode_from_proto(request.mode, "mode")?.unwrap_or_default(),
        types: memory_types(&request.types, "types")?,
        time_range: time_range_from_proto(request.time_range.as_ref(), "time_range")?,
        budget_tokens: positive(request.budget_tokens, "budget_tokens")?,
        limit: positive(request.limit, "limit")?.map(|v| v as usize),
        statuses: statuses(&request.statuses, "statuses")?,
        visibilities: visibilities(&request.visibilities, "visibilities")?,
        tags: request.tags.clone(),
        session_only: request.session_only,
        layers,
        details_limit: positive(request.details_limit, "details_limit")?.map(|v| v as usize),
        language: language_from_proto(&request.language, "language")?,
        now: datetime_opt(request.now.as_ref(), "now")?,
        query_embedding: query_embedding_from_proto(request.query_embedding.as_ref(), "query_embedding")?,
    })
}

/// Writes a recall request (gRPC client).
pub fn recall_to_proto(request: &RecallRequest) -> pb::RecallRequest {
    pb::RecallRequest {
        scope: Some(scope_to_proto(&request.scope)),
        query: request.query.clone(),
        mode: mode_to_proto(request.mode),
        types: request.types.iter().map(|t| memory_type_to_proto(*t)).collect(),
        time_range: request.time_range.map(time_range_to_proto),
        budget_tokens: request.budget_tokens.unwrap_or(0) as i32,
        limit: request.limit.unwrap_or(0) as i32,
        statuses: request.statuses.iter().map(|s| status_to_proto(*s)).collect(),
        visibilities: request.visibilities.iter().map(|v| visibility_to_proto(*v)).collect(),
        tags: request.tags.clone(),
        session_only: request.session_only,
        layers: layers_to_proto(request.layers),
        details_limit: request.details_limit.unwrap_or(0) as i32,
        language: request.language.map(|l| l.as_str().to_string()).unwrap_or_default(),
        now: timestamp_opt(request.now),
        query_embedding: query_embedding_to_proto(request.query_embedding.as_ref()),
    }
}

pub fn parts_to_proto(parts: &ScoreParts) -> pbc::ScoreBreakdown {
    pbc::ScoreBreakdown {
        score: parts.score,
        relevance: parts.relevance,
        dense_similarity: parts.dense_similarity,
        keyword_score: parts.keyword_score,
        dense_rank: parts.dense_rank as i32,
        keyword_rank: parts.keyword_rank as i32,
        importance: parts.importance,
        freshness: parts.freshness,
        layer: parts.layer.to_string(),
    }
}

pub fn parts_from_proto(parts: Option<&pbc::ScoreBreakdown>) -> ScoreParts {
    let Some(p) = parts else {
        return ScoreParts::default();
    };
    ScoreParts {
        score: p.score,
        relevance: p.relevance,
        dense_similarity: p.dense_similarity,
        keyword_score: p.keyword_score,
        dense_rank: p.dense_rank.max(0) as u32,
        keyword_rank: p.keyword_rank.max(0) as u32,
        importance: p.importance,
        freshness: p.freshness,
        layer: if p.layer == "project" {
            "project"
        } else {
            "cross_project"
        },
    }
}

pub fn entry_to_proto(entry: &CatalogEntry) -> pbc::CatalogEntry {
    pbc::CatalogEntry {
        id: entry.id.clone(),
        summary: entry.summary.clone(),
        r#type: memory_type_to_proto(entry.memory_type),
        importance: i32::from(entry.importance),
        created_at: Some(timestamp(entry.occurred_at)),
        relative_time: entry.relative_time.clone(),
        tags: entry.tags.clone(),
        score: entry.score.score,
        score_breakdown: Some(parts_to_proto(&entry.score)),
        tokens: entry.tokens as i32,
        speaker: entry.speaker.clone().unwrap_or_default(),
        confidence: entry.confidence,
        role_id: entry.role_id.clone(),
        status: status_to_proto(entry.status),
    }
}

fn upstream(field: &str, err: ApiError) -> ApiError {
    ApiError::internal(format!("the retriever answered an unreadable {field}: {}", err.message))
}

pub fn entry_from_proto(entry: &pbc::CatalogEntry) -> Result<CatalogEntry, ApiError> {
    Ok(CatalogEntry {
        id: entry.id.clone(),
        summary: entry.summary.clone(),
        memory_type: memory_type_from_proto(entry.r#type, "type")
            .map_err(|e| upstream("catalog entry", e))?
            .unwrap_or(MemoryType::DiscussionConclusion),
        importance: entry.importance.clamp(1, 5) as u8,
        occurred_at: entry
            .created_at
            .as_ref()
            .map(|t| datetime(t, "created_at"))
            .transpose()
            .map_err(|e| upstream("catalog entry", e))?
            .unwrap_or_default(),
        relative_time: entry.relative_time.clone(),
        tags: entry.tags.clone(),
        score: parts_from_proto(entry.score_breakdown.as_ref()),
        tokens: entry.tokens.max(0) as u32,
        speaker: (!entry.speaker.is_empty()).then(|| entry.speaker.clone()),
        confidence: entry.confidence,
        role_id: entry.role_id.clone(),
        status: status_from_proto(entry.status, "status")
            .map_err(|e| upstream("catalog entry", e))?
            .unwrap_or(MemoryStatus::Active),
    })
}

pub fn details_to_proto(details: &MemoryDetails) -> pbc::MemoryDetails {
    pbc::MemoryDetails {
        id: details.id.clone(),
        summary: details.summary.clone(),
        content: details.content.clone(),
        context: details.context.clone(),
        decisions: details.decisions.clone(),
        refs: details.refs.iter().map(artifact_ref_to_proto).collect(),
        r#type: memory_type_to_proto(details.memory_type),
        importance: i32::from(details.importance),
        confidence: details.confidence,
        created_at: Some(timestamp(details.occurred_at)),
        relative_time: details.relative_time.clone(),
        tokens: details.tokens as i32,
        tags: details.tags.clone(),
        speaker: details.speaker.clone().unwrap_or_default(),
        freshness: details.freshness,
        status: status_to_proto(details.status),
        superseded_by: details.superseded_by.clone().unwrap_or_default(),
    }
}

pub fn details_from_proto(details: &pbc::MemoryDetails) -> Result<MemoryDetails, ApiError> {
    Ok(MemoryDetails {
        id: details.id.clone(),
        summary: details.summary.clone(),
        content: details.content.clone(),
        context: details.context.clone(),
        decisions: details.decisions.clone(),
        refs: details.refs.iter().map(artifact_ref_from_proto).collect(),
        memory_type: memory_type_from_proto(details.r#type, "type")
            .map_err(|e| upstream("details", e))?
            .unwrap_or(MemoryType::DiscussionConclusion),
        importance: details.importance.clamp(1, 5) as u8,
        confidence: details.confidence,
        occurred_at: details
            .created_at
            .as_ref()
            .map(|t| datetime(t, "created_at"))
            .transpose()
            .map_err(|e| upstream("details", e))?
            .unwrap_or_default(),
        relative_time: details.relative_time.clone(),
        tokens: details.tokens.max(0) as u32,
        tags: details.tags.clone(),
        speaker: (!details.speaker.is_empty()).then(|| details.speaker.clone()),
        freshness: details.freshness,
        status: status_from_proto(details.status, "status")
            .map_err(|e| upstream("details", e))?
            .unwrap_or(MemoryStatus::Active),
        superseded_by: (!details.superseded_by.is_empty()).then(|| details.superseded_by.clone()),
    })
}

pub fn result_to_proto(result: &RecallResult) -> pb::RecallResponse {
    pb::RecallResponse {
        mode: mode_to_proto(result.mode),
        catalog: result.catalog.iter().map(entry_to_proto).collect(),
        details: result.details.iter().map(details_to_proto).collect(),
        tokens_used: result.tokens_used as i32,
        budget_tokens: result.budget_tokens as i32,
        candidates: result.candidates as i32,
        omitted_for_budget: result.omitted_for_budget as i32,
        tokenizer: result.tokenizer.clone(),
        rendered: result.rendered.clone(),
    }
}

pub fn result_from_proto(response: &pb::RecallResponse) -> Result<RecallResult, ApiError> {
    Ok(RecallResult {
        mode: mode_from_proto(response.mode, "mode")
            .map_err(|e| upstream("mode", e))?
            .unwrap_or(RetrievalMode::Catalog),
        catalog: response
            .catalog
            .iter()
            .map(entry_from_proto)
            .collect::<Result<_, _>>()?,
        details: response
            .details
            .iter()
            .map(details_from_proto)
            .collect::<Result<_, _>>()?,
        tokens_used: response.tokens_used.max(0) as u32,
        budget_tokens: response.budget_tokens.max(0) as u32,
        candidates: response.candidates.max(0) as u32,
        omitted_for_budget: response.omitted_for_budget.max(0) as u32,
        tokenizer: response.tokenizer.clone(),
        rendered: response.rendered.clone(),
    })
}

pub fn details_request_from_proto(request: &pb::GetDetailsRequest) -> Result<DetailsRequest, ApiError> {
    Ok(DetailsRequest {
        scope: scope_from_proto(request.scope.as_ref(), "scope", ScopeRules::USER_ROLE)?,
        ids: request.ids.clone(),
        budget_tokens: positive(request.budget_tokens, "budget_tokens")?,
        language: language_from_proto(&request.language, "language")?,
        skip_access_update: request.skip_access_update,
        now: datetime_opt(request.now.as_ref(), "now")?,
    })
}

pub fn details_request_to_proto(request: &DetailsRequest) -> pb::GetDetailsRequest {
    pb::GetDetailsRequest {
        scope: Some(scope_to_proto(&request.scope)),
        ids: request.ids.clone(),
        budget_tokens: request.budget_tokens.unwrap_or(0) as i32,
        language: request.language.map(|l| l.as_str().to_string()).unwrap_or_default(),
        skip_access_update: request.skip_access_update,
        now: timestamp_opt(request.now),
    }
}

pub fn details_result_to_proto(result: &DetailsResult) -> pb::GetDetailsResponse {
    pb::GetDetailsResponse {
        details: result.details.iter().map(details_to_proto).collect(),
        tokens_used: result.tokens_used as i32,
        omitted_for_budget: result.omitted_for_budget.clone(),
        rendered: result.rendered.clone(),
    }
}

pub fn details_result_from_proto(response: &pb::GetDetailsResponse) -> Result<DetailsResult, ApiError> {
    Ok(DetailsResult {
        details: response
            .details
            .iter()
            .map(details_from_proto)
            .collect::<Result<_, _>>()?,
        tokens_used: response.tokens_used.max(0) as u32,
        omitted_for_budget: response.omitted_for_budget.clone(),
        rendered: response.rendered.clone(),
    })
}
