//! REST routes for artifacts and session summaries (seed 000 sections 4.2 and 4.3), over the
//! artifact and summary services' APIs. An id of another user is NOT_FOUND.
//!
//! - `POST /api/artifacts` `{userId, sessionId, roleId?, projectId?, toolCallId?, toolName?,
//!   mimeType?, path?, metadata?, content | contentBase64}`
//! - `GET  /api/artifacts/{id}?userId&lines=1-50 | bytes=0-1000 | jsonPath=$.data | search=kw&maxBytes`
//!   (the whole content up to `maxBytes` without a locator)
//! - `GET  /api/artifacts/{id}/compact?userId&lang`
//! - `POST /api/session/summary` `{userId, sessionId, roleId?, projectId?, messages?,
//!   trajectoryStart?, trajectoryEnd?}`
//! - `GET  /api/session/summary/{sessionId}?userId&projectId&render&lang`
//! - `GET  /api/session/summaries?userId&projectId&limit`

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use thinkus_artifact::ArtifactApi;
use thinkus_artifact::api::{ArtifactInfo, Compact, Locator, NewArtifact, ReadRequest};
use thinkus_common::ApiError;
use thinkus_common::model::{EngineChoice, Language, Message};
use thinkus_summary::SummaryApi;
use thinkus_summary::api::{GenerateRequest, ListRequest, RenderRequest, SessionSummary};

use crate::rest_common::{Caller, RestError, RestState, required, scope_of};

type Answer = Result<Json<Value>, RestError>;

/// The routes of this module, merged into the facade's router.
pub fn routes() -> Router<RestState> {
    Router::new()
        .route("/api/artifacts", post(store))
        .route("/api/artifacts/{id}", get(read))
        .route("/api/artifacts/{id}/compact", get(compact))
        .route("/api/session/summary", post(summarize))
        .route("/api/session/summary/{session_id}", get(summary))
        .route("/api/session/summaries", get(summaries))
}

fn artifacts(state: &RestState) -> Result<Arc<dyn ArtifactApi>, ApiError> {
    state.gateway.upstreams.artifact_api.clone().ok_or_else(|| {
        ApiError::failed_precondition("endpoints.artifact: no artifact service is reachable from the gateway")
    })
}

fn summaries_api(state: &RestState) -> Result<Arc<dyn SummaryApi>, ApiError> {
    state.gateway.upstreams.summary_api.clone().ok_or_else(|| {
        ApiError::failed_precondition("endpoints.summary: no summary service is reachable from the gateway")
    })
}

fn body<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError::invalid("body", e))
}

fn language(value: Option<&str>) -> Result<Option<Language>, ApiError> {
    match value {
        None | Some("") => Ok(None),
        Some(other) => other
            .parse()
            .map(Some)
            .map_err(|_| ApiError::invalid("lang", format!("{other:?} is not zh or en"))),
    }
}

fn info_json(info: &ArtifactInfo) -> Value {
    json!({
        "id": info.id, "userId": info.scope.user_id, "roleId": info.scope.role_id, "projectId": info.scope.project_id,
        "sessionId": info.scope.session_id, "toolCallId": info.tool_call_id, "toolName": info.tool_name,
        "mimeType": info.mime_type, "sizeBytes": info.size_bytes, "sha256": info.sha256, "path": info.path,
        "lineCount": info.line_count, "kind": info.kind.as_str(), "language": info.language.as_str(),
        "createdAt": info.created_at, "expiresAt": info.expires_at, "metadata": info.metadata,
    })
}

fn compact_json(compact: &Compact) -> Value {
    json!({
        "ref": compact.reference, "type": compact.type_label, "path": compact.path, "summary": compact.summary,
        "size": compact.size, "locators": compact.locators.iter().map(|l| json!({"type": l.kind, "example": l.example})).collect::<Vec<_>>(),
        "rendered": compact.rendered, "tokens": compact.tokens, "language": compact.language.as_str(),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StoreBody {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    session_id: String,
    role_id: Option<String>,
    project_id: Option<String>,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    mime_type: Option<String>,
    path: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, Value>,
    content: Option<String>,
    content_base64: Option<String>,
}

async fn store(State(state): State<RestState>, caller: Caller, Json(value): Json<Value>) -> Answer {
    let request: StoreBody = body(value)?;
    required(&request.user_id, "userId")?;
    required(&request.session_id, "sessionId")?;
    let content = match (request.content, request.content_base64) {
        (Some(text), None) => text.into_bytes(),
        (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| ApiError::invalid("contentBase64", format!("is not base64: {e}")))?,
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid("content", "give content or contentBase64, not both").into());
        }
        (None, None) => return Err(ApiError::invalid("content", "is required (or contentBase64)").into()),
    };
    let metadata = request
        .metadata
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            (k, text)
        })
        .collect();
    let mut scope = scope_of(
        request.tenant_id,
        Some(request.user_id),
        request.role_id,
        request.project_id,
        Some(request.session_id),
    );
    caller.allow(&mut scope)?;
    let api = artifacts(&state)?;
    let some = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    let stored = caller
        .forward(api.create(
            NewArtifact {
                scope,
                tool_call_id: some(request.tool_call_id),
                tool_name: some(request.tool_name),
                mime_type: some(request.mime_type),
                path: some(request.path),
                metadata,
                ..Default::default()
            },
            bytes::Bytes::from(content),
        ))
        .await?;
    Ok(Json(json!({
        "artifact": info_json(&stored.artifact),
        "compact": compact_json(&stored.compact),
        "deduplicated": stored.deduplicated,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadQuery {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    lines: Option<String>,
    bytes: Option<String>,
    json_path: Option<String>,
    search: Option<String>,
    max_bytes: Option<usize>,
}

async fn read(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<ReadQuery>,
) -> Answer {
    required(&query.user_id, "userId")?;
    let given = [&query.lines, &query.bytes, &query.json_path, &query.search]
        .iter()
        .filter(|v| v.is_some())
        .count();
    if given > 1 {
        return Err(ApiError::invalid("lines", "give one of lines, bytes, jsonPath or search").into());
    }
    let locator = if let Some(lines) = &query.lines {
        let (start, end) = thinkus_artifact::locator::parse_lines(lines)?;
        Locator::Lines { start, end }
    } else if let Some(bytes) = &query.bytes {
        let (start, end) = thinkus_artifact::locator::parse_bytes(bytes)?;
        Locator::Bytes { start, end }
    } else if let Some(path) = query.json_path {
        Locator::JsonPath(path)
    } else if let Some(keyword) = query.search {
        Locator::Search(keyword)
    } else {
        Locator::Bytes { start: 0, end: None }
    };
    let mut scope = scope_of(query.tenant_id, Some(query.user_id), None, None, None);
    caller.allow(&mut scope)?;
    let api = artifacts(&state)?;
    let part = caller
        .forward(api.read(ReadRequest {
            scope,
            artifact_id: id,
            locator,
            max_bytes: query.max_bytes,
        }))
        .await?;
    Ok(Json(json!({
        "content": part.content,
        "dataBase64": (!part.data.is_empty()).then(|| base64::engine::general_purpose::STANDARD.encode(&part.data)),
        "start": part.start, "end": part.end, "pastEnd": part.past_end, "truncated": part.truncated,
        "note": part.note, "totalLines": part.total_lines, "totalBytes": part.total_bytes,
        "hits": part.hits.iter().map(|h| json!({"line": h.line, "startLine": h.start_line, "endLine": h.end_line, "text": h.text})).collect::<Vec<_>>(),
        "matches": part.matches,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompactQuery {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    lang: Option<String>,
}

async fn compact(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<CompactQuery>,
) -> Answer {
    required(&query.user_id, "userId")?;
    let language = language(query.lang.as_deref())?;
    let mut scope = scope_of(query.tenant_id, Some(query.user_id), None, None, None);
    caller.allow(&mut scope)?;
    let api = artifacts(&state)?;
    let (info, compact) = caller.forward(api.get(scope, id, language)).await?;
    Ok(Json(
        json!({"artifact": info_json(&info), "compact": compact_json(&compact)}),
    ))
}

/// A session summary as the REST facade shows it.
pub fn summary_json(s: &SessionSummary) -> Value {
    json!({
        "id": s.id, "userId": s.scope.user_id, "roleId": s.scope.role_id, "projectId": s.scope.project_id,
        "sessionId": s.scope.session_id, "goal": s.goal, "constraints": s.constraints,
        "decisions": s.decisions.iter().map(|d| json!({"what": d.what, "why": d.why, "who": d.who, "confidence": d.confidence})).collect::<Vec<_>>(),
        "progress": s.progress,
        "artifacts": s.artifacts.iter().map(|a| json!({"ref": a.reference, "locator": a.locator, "desc": a.desc})).collect::<Vec<_>>(),
        "nextActions": s.next_actions, "risks": s.risks, "openQuestions": s.open_questions,
        "trajectoryStart": s.trajectory_start, "trajectoryEnd": s.trajectory_end, "language": s.language.as_str(),
        "engine": s.engine, "createdAt": s.created_at, "updatedAt": s.updated_at,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MessageBody {
    role: String,
    content: String,
    speaker: Option<String>,
    created_at: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SummarizeBody {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    session_id: String,
    role_id: Option<String>,
    project_id: Option<String>,
    #[serde(default)]
    messages: Vec<MessageBody>,
    trajectory_start: Option<u32>,
    trajectory_end: Option<u32>,
}

async fn summarize(State(state): State<RestState>, caller: Caller, Json(value): Json<Value>) -> Answer {
    let request: SummarizeBody = body(value)?;
    required(&request.user_id, "userId")?;
    required(&request.session_id, "sessionId")?;
    let now = chrono::Utc::now();
    let mut messages = Vec::with_capacity(request.messages.len());
    for (i, m) in request.messages.into_iter().enumerate() {
        if !matches!(m.role.as_str(), "user" | "assistant" | "system" | "tool") {
            return Err(ApiError::invalid(
                &format!("messages[{i}].role"),
                format!("{:?} is not user, assistant, system or tool", m.role),
            )
            .into());
        }
        required(&m.content, &format!("messages[{i}].content"))?;
        messages.push(Message {
            role: m.role,
            content: m.content,
            speaker: m.speaker,
            created_at: m.created_at.unwrap_or(now),
            index: i as u32,
        });
    }
    let mut scope = scope_of(
        request.tenant_id,
        Some(request.user_id),
        request.role_id,
        request.project_id,
        Some(request.session_id),
    );
    caller.allow(&mut scope)?;
    let api = summaries_api(&state)?;
    let generated = caller
        .forward(api.generate(GenerateRequest {
            scope,
            messages,
            trajectory_start: request.trajectory_start,
            trajectory_end: request.trajectory_end,
            engine: EngineChoice::Configured,
        }))
        .await?;
    Ok(Json(json!({
        "summary": summary_json(&generated.summary),
        "messagesRead": generated.messages_read,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SummaryQuery {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    project_id: Option<String>,
    /// Also render it as Markdown (within `budgetTokens`).
    #[serde(default)]
    render: bool,
    budget_tokens: Option<u32>,
    lang: Option<String>,
}

async fn summary(
    State(state): State<RestState>,
    caller: Caller,
    Path(session_id): Path<String>,
    Query(query): Query<SummaryQuery>,
) -> Answer {
    required(&query.user_id, "userId")?;
    let language = language(query.lang.as_deref())?;
    let mut scope = scope_of(query.tenant_id, Some(query.user_id), None, query.project_id, None);
    caller.allow(&mut scope)?;
    let api = summaries_api(&state)?;
    let found = caller.forward(api.get(scope.clone(), session_id.clone())).await?;
    let rendered = if query.render {
        let rendered = caller
            .forward(api.render(RenderRequest {
                scope,
                session_id,
                budget_tokens: query.budget_tokens,
                language,
                now: None,
            }))
            .await?;
        Some(json!({"markdown": rendered.markdown, "tokens": rendered.tokens}))
    } else {
        None
    };
    Ok(Json(json!({"summary": summary_json(&found), "rendered": rendered})))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SummariesQuery {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    project_id: Option<String>,
    limit: Option<usize>,
}

async fn summaries(State(state): State<RestState>, caller: Caller, Query(query): Query<SummariesQuery>) -> Answer {
    required(&query.user_id, "userId")?;
    let mut scope = scope_of(query.tenant_id, Some(query.user_id), None, query.project_id, None);
    caller.allow(&mut scope)?;
    let api = summaries_api(&state)?;
    let listed = caller
        .forward(api.list(ListRequest {
            scope,
            limit: query.limit.unwrap_or(10).clamp(1, 50),
            other_roles_only: false,
        }))
        .await?;
    Ok(Json(
        json!({"summaries": listed.iter().map(summary_json).collect::<Vec<_>>()}),
    ))
}
