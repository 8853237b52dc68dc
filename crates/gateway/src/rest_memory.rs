//! REST routes for what people do with memories (seed 004 section 10.8, seed 001 sections
//! 3.5.3-3.5.4): the candidate queue, pending conflicts, a memory's history, the standing
//! context of a role, and Markdown export and import. Same keys, validation and error mapping
//! as the rest of the facade ([`crate::rest`]); an id of another user is NOT_FOUND.
//!
//! - `GET  /api/memory/candidates?userId&roleId&projectId&status`
//! - `POST /api/memory/candidates/{id}/approve` `{userId, editedContent?}`
//! - `POST /api/memory/candidates/{id}/reject` `{userId, reason?}`
//! - `GET  /api/memory/conflicts?userId&roleId&projectId`
//! - `POST /api/memory/conflicts/{id}/resolve` `{userId, keep: "current"|"proposed", reason?}`
//! - `GET  /api/memory/{id}/history?userId&roleId` (or `&allRoles=true`: the person's view)
//! - `GET  /api/memory/standing?userId&roleId&projectId`
//! - `GET  /api/memory/export?userId&projectId&lang`
//! - `POST /api/memory/import` `{userId, roleId?, dryRun?, files: [{path, content}]}`
//! - `GET  /api/user/export?userId`: the JSON export of everything the user owns (`ExportUser`)
//! - `POST /api/user/erase` `{userId}`: erases everything the user owns (`EraseUser`)

use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use thinkus_backends::sql::{CandidateStatus, Change};
use thinkus_common::ApiError;
use thinkus_common::model::{Language, Memory, Scope};
use thinkus_knowledge_manager::api::{CandidateView, Conflict, ConflictChoice, MarkdownFile, WriteResult};

use crate::rest_common::{Caller, RestError, RestState, required, scope_of};

type Answer = Result<Json<Value>, RestError>;

/// The routes of this module, merged into the facade's router.
pub fn routes() -> Router<RestState> {
    Router::new()
        .route("/api/memory/candidates", get(candidates))
        .route("/api/memory/candidates/{id}/approve", post(approve))
        .route("/api/memory/candidates/{id}/reject", post(reject))
        .route("/api/memory/conflicts", get(conflicts))
        .route("/api/memory/conflicts/{id}/resolve", post(resolve))
        .route("/api/memory/standing", get(standing))
        .route("/api/memory/export", get(export))
        .route("/api/memory/import", post(import))
        .route("/api/memory/{id}/history", get(history))
        .route("/api/user/export", get(export_user))
        .route("/api/user/erase", post(erase_user))
}

/// A memory as the REST facade shows it.
pub fn memory_json(m: &Memory) -> Value {
    json!({
        "id": m.id, "userId": m.scope.user_id, "roleId": m.scope.role_id, "projectId": m.scope.project_id,
        "sessionId": m.scope.session_id, "type": m.memory_type.as_str(), "content": m.content, "summary": m.summary,
        "importance": m.importance, "confidence": m.confidence, "freshness": m.freshness,
        "evidenceCount": m.evidence_count, "visibility": m.visibility.as_str(), "status": m.status.as_str(),
        "supersededBy": m.superseded_by, "source": m.source.as_str(), "tags": m.tags, "language": m.language.as_str(),
        "speaker": m.speaker, "subject": m.subject, "occurredAt": m.occurred_at, "createdAt": m.created_at,
        "updatedAt": m.updated_at, "lastAccessedAt": m.last_accessed_at, "accessCount": m.access_count,
    })
}

pub fn candidate_json(c: &CandidateView) -> Value {
    json!({
        "id": c.id, "userId": c.scope.user_id, "roleId": c.scope.role_id, "projectId": c.scope.project_id,
        "type": c.draft.memory_type.as_str(), "content": c.draft.content, "reason": c.reason, "score": c.score,
        "evidenceCount": c.evidence_count, "status": c.status.as_str(), "createdAt": c.created_at,
        "decidedAt": c.decided_at, "memoryId": c.memory_id, "conflictsWith": c.conflicts_with,
    })
}

pub fn conflict_json(c: &Conflict) -> Value {
    json!({
        "id": c.id, "userId": c.scope.user_id, "roleId": c.scope.role_id, "projectId": c.scope.project_id,
        "subject": c.subject, "question": c.question, "current": c.current.iter().map(memory_json).collect::<Vec<_>>(),
        "proposed": {"type": c.proposed.memory_type.as_str(), "content": c.proposed.content, "confidence": c.proposed.confidence},
        "reason": c.reason, "evidenceCount": c.evidence_count, "createdAt": c.created_at,
    })
}

fn change_json(c: &Change) -> Value {
    json!({
        "id": c.id, "memoryId": c.memory_id, "kind": c.kind.as_str(), "actor": c.actor, "reason": c.reason,
        "before": c.before.as_deref().and_then(|b| serde_json::from_str::<Value>(b).ok()),
        "after": c.after.as_deref().and_then(|a| serde_json::from_str::<Value>(a).ok()), "at": c.at,
    })
}

fn result_json(r: &WriteResult) -> Value {
    json!({
        "outcome": r.outcome.as_str(), "memory": r.memory.as_ref().map(memory_json), "replacedIds": r.replaced_ids,
        "candidateId": r.candidate_id, "reason": r.reason, "score": r.score,
    })
}

fn body<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError::invalid("body", e))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Listing {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    role_id: Option<String>,
    project_id: Option<String>,
    status: Option<String>,
    limit: Option<usize>,
}

async fn candidates(State(state): State<RestState>, caller: Caller, Query(query): Query<Listing>) -> Answer {
    required(&query.user_id, "userId")?;
    let status = match query.status.as_deref() {
        None | Some("") => CandidateStatus::Pending,
        Some(s) => s
            .parse()
            .map_err(|_| ApiError::invalid("status", format!("{s:?} is not pending, approved or rejected")))?,
    };
    let mut scope = scope_of(
        query.tenant_id,
        Some(query.user_id),
        query.role_id,
        query.project_id,
        None,
    );
    caller.allow(&mut scope)?;
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let knowledge = &state.gateway.upstreams.knowledge;
    let listed = caller
        .forward(knowledge.list_candidates(scope, status, limit, 0))
        .await?;
    Ok(Json(
        json!({"candidates": listed.iter().map(candidate_json).collect::<Vec<_>>()}),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Approval {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    edited_content: Option<String>,
}

async fn approve(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(value): Json<Value>,
) -> Answer {
    let request: Approval = body(value)?;
    required(&request.user_id, "userId")?;
    let mut scope = scope_of(request.tenant_id, Some(request.user_id), None, None, None);
    caller.allow(&mut scope)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    let result = caller
        .forward(knowledge.approve_candidate(scope, id, request.edited_content))
        .await?;
    Ok(Json(json!({"result": result_json(&result)})))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Rejection {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    reason: String,
}

async fn reject(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(value): Json<Value>,
) -> Answer {
    let request: Rejection = body(value)?;
    required(&request.user_id, "userId")?;
    let mut scope = scope_of(request.tenant_id, Some(request.user_id), None, None, None);
    caller.allow(&mut scope)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    caller
        .forward(knowledge.reject_candidate(scope, id.clone(), request.reason))
        .await?;
    Ok(Json(json!({"rejected": id})))
}

async fn conflicts(State(state): State<RestState>, caller: Caller, Query(query): Query<Listing>) -> Answer {
    required(&query.user_id, "userId")?;
    if query.status.is_some() {
        return Err(ApiError::invalid("status", "conflicts are listed while pending only").into());
    }
    let mut scope = scope_of(
        query.tenant_id,
        Some(query.user_id),
        query.role_id,
        query.project_id,
        None,
    );
    caller.allow(&mut scope)?;
    let limit = query.limit.unwrap_or(50).clamp(1, 200);
    let knowledge = &state.gateway.upstreams.knowledge;
    let listed = caller.forward(knowledge.list_conflicts(scope, limit)).await?;
    Ok(Json(
        json!({"conflicts": listed.iter().map(conflict_json).collect::<Vec<_>>()}),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Resolution {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    keep: String,
    #[serde(default)]
    reason: String,
}

async fn resolve(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(value): Json<Value>,
) -> Answer {
    let request: Resolution = body(value)?;
    required(&request.user_id, "userId")?;
    let keep = match request.keep.as_str() {
        "current" => ConflictChoice::Current,
        "proposed" => ConflictChoice::Proposed,
        other => return Err(ApiError::invalid("keep", format!("{other:?} is not current or proposed")).into()),
    };
    let mut scope = scope_of(request.tenant_id, Some(request.user_id), None, None, None);
    caller.allow(&mut scope)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    let resolution = caller
        .forward(knowledge.resolve_conflict(scope, id, keep, request.reason))
        .await?;
    Ok(Json(json!({
        "kept": memory_json(&resolution.kept),
        "replacedIds": resolution.replaced_ids,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HistoryQuery {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    /// The role reading: a live memory must be its own or shared with it.
    #[serde(default)]
    role_id: Option<String>,
    /// The person's view instead: any role's memory.
    #[serde(default)]
    all_roles: bool,
}

async fn history(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<HistoryQuery>,
) -> Answer {
    required(&query.user_id, "userId")?;
    let role = query.role_id.filter(|r| !r.is_empty());
    // As GetMemoryHistory: an empty role is no wildcard over the roles' private memories.
    match (&role, query.all_roles) {
        (None, false) => {
            return Err(ApiError::invalid(
                "roleId",
                "is required: a role reads its own memories and those shared with it (allRoles=true for the \
                 person's view of every role's)",
            )
            .into());
        }
        (Some(_), true) => return Err(ApiError::invalid("allRoles", "reads every role's: leave roleId out").into()),
        _ => {}
    }
    let mut scope = scope_of(query.tenant_id, Some(query.user_id), role, None, None);
    caller.allow(&mut scope)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    let changes = caller.forward(knowledge.history(scope, id)).await?;
    Ok(Json(
        json!({"changes": changes.iter().map(change_json).collect::<Vec<_>>()}),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StandingQuery {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    role_id: String,
    project_id: Option<String>,
    limit: Option<usize>,
}

async fn standing(State(state): State<RestState>, caller: Caller, Query(query): Query<StandingQuery>) -> Answer {
    required(&query.user_id, "userId")?;
    required(&query.role_id, "roleId")?;
    let mut scope = scope_of(
        query.tenant_id,
        Some(query.user_id),
        Some(query.role_id),
        query.project_id,
        None,
    );
    caller.allow(&mut scope)?;
    let limit = query.limit.unwrap_or(30).clamp(1, 200);
    let knowledge = &state.gateway.upstreams.knowledge;
    let standing = caller.forward(knowledge.standing(scope, limit)).await?;
    Ok(Json(json!({
        "rules": standing.rules.iter().map(memory_json).collect::<Vec<_>>(),
        "profile": standing.profile.iter().map(memory_json).collect::<Vec<_>>(),
        "conflicts": standing.conflicts.iter().map(conflict_json).collect::<Vec<_>>(),
        "language": standing.language.as_str(),
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExportQuery {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    project_id: Option<String>,
    lang: Option<String>,
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

async fn export(State(state): State<RestState>, caller: Caller, Query(query): Query<ExportQuery>) -> Answer {
    required(&query.user_id, "userId")?;
    let language = language(query.lang.as_deref())?;
    let mut scope = scope_of(query.tenant_id, Some(query.user_id), None, query.project_id, None);
    caller.allow(&mut scope)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    let files = caller.forward(knowledge.export_markdown(scope, language)).await?;
    Ok(Json(json!({"files": files})))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ImportBody {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    role_id: Option<String>,
    #[serde(default)]
    dry_run: bool,
    files: Vec<MarkdownFile>,
}

async fn import(State(state): State<RestState>, caller: Caller, Json(value): Json<Value>) -> Answer {
    let request: ImportBody = body(value)?;
    required(&request.user_id, "userId")?;
    let mut scope = scope_of(request.tenant_id, Some(request.user_id), request.role_id, None, None);
    caller.allow(&mut scope)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    let report = caller
        .forward(knowledge.import_markdown(scope, request.files, request.dry_run))
        .await?;
    Ok(Json(json!({
        "changes": report.changes.iter().map(|c| json!({
            "action": c.action, "path": c.path, "line": c.line, "memoryId": c.memory_id, "detail": c.detail,
        })).collect::<Vec<_>>(),
        "lines": report.lines, "replaced": report.replaced, "suppressed": report.suppressed,
        "created": report.created, "queued": report.queued, "skipped": report.skipped,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UserQuery {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
}

/// The user of a data-rights request, in the caller's tenant (or the one a service key names).
fn user_scope(caller: &Caller, user: UserQuery) -> Result<Scope, ApiError> {
    required(&user.user_id, "userId")?;
    let mut scope = scope_of(user.tenant_id, Some(user.user_id), None, None, None);
    caller.allow(&mut scope)?;
    Ok(scope)
}

async fn export_user(State(state): State<RestState>, caller: Caller, Query(query): Query<UserQuery>) -> Answer {
    let scope = user_scope(&caller, query)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    Ok(Json(caller.forward(knowledge.export_user(scope.owner())).await?))
}

async fn erase_user(State(state): State<RestState>, caller: Caller, Json(value): Json<Value>) -> Answer {
    let scope = user_scope(&caller, body(value)?)?;
    let actor = thinkus_knowledge_manager::grpc::actor_of_key(&caller.0);
    let erasure = caller.forward(state.gateway.erase(&scope.owner(), &actor)).await?;
    let c = &erasure.counts;
    Ok(Json(json!({
        "erasureId": erasure.id,
        "counts": {
            "memories": c.memories, "changes": c.changes, "candidates": c.candidates, "idempotency": c.idempotency,
            "plans": c.plans, "artifacts": c.artifacts, "sessions": c.sessions, "sessionMessages": c.session_messages,
            "summaries": c.summaries, "jobs": c.jobs, "vectors": c.vectors,
        },
    })))
}
