//! The REST/JSON facade (seed 000 section 4): the design's HTTP routes over the same services,
//! with the same API keys, the same validation, and gRPC codes mapped to HTTP statuses
//! (INVALID_ARGUMENT 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404,
//! RESOURCE_EXHAUSTED 429 with Retry-After, ...). Errors are `{"error": {"code", "message"}}`.
//!
//! Routes: POST /api/memory/control, /api/memory/retrieve, /api/memory/write,
//! /api/memory/correct; POST /api/turn/prepare, /api/turn/complete; GET /api/jobs; the
//! candidate queue, conflicts, history, standing context, export and import
//! ([`crate::rest_memory`]); artifacts and session summaries ([`crate::rest_records`]).
//!
//! Every route is behind the same gate as the gRPC services (see [`guard`]): authentication
//! (dev mode's exemption only on a loopback listener, from a loopback peer, without proxy
//! headers), the process's admission (the tenant's rate and a seat, shared with gRPC), and the
//! request timeout.

use std::net::SocketAddr;
use std::time::Instant;

use axum::extract::{ConnectInfo, DefaultBodyLimit, Extension, Query, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use thinkus_common::auth::{Origin, Principal, bearer_from_headers, with_forwarded_credential};
use thinkus_common::limits::TenantLimits;
use thinkus_common::model::{EngineChoice, MemoryType, Message, RetrievalMode, TimeRange};
use thinkus_common::{ApiError, ErrorCode};
use thinkus_knowledge_manager::api::{CorrectRequest, CorrectionAction, LearnRequest};
use thinkus_memory_controller::api::DecideRequest;
use thinkus_retriever::api::RecallRequest;

use crate::api::{CompleteRequest, GatewayApi, JobsRequest, PrepareRequest, ToolCall};
pub use crate::rest_common::{RestError, RestState};
use crate::rest_common::{required, scope_of};

type Answer = Result<Json<Value>, RestError>;

/// The largest request body, as for gRPC messages.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// The router of the facade.
pub fn router(state: RestState) -> Router {
    Router::new()
        .route("/api/memory/control", post(control))
        .route("/api/memory/retrieve", post(retrieve))
        .route("/api/memory/write", post(write))
        .route("/api/memory/correct", post(correct))
        .route("/api/turn/prepare", post(prepare))
        .route("/api/turn/complete", post(complete))
        .route("/api/jobs", get(jobs))
        .merge(crate::rest_memory::routes())
        .merge(crate::rest_records::routes())
        // After the merges: route_layer wraps only the routes added before it.
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Authenticates the caller, admits the request (its tenant's rate and a seat, waiting no
/// longer than the request may take) and bounds its time, before any handler reads the body.
async fn guard(
    State(state): State<RestState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    let origin = Origin::of(state.listener, Some(peer), request.headers());
    let principal = match state
        .authenticator
        .authenticate(bearer_from_headers(request.headers()), &origin)
    {
        Ok(principal) => principal,
        Err(err) => return RestError(err).into_response(),
    };
    let deadline = Instant::now() + state.request_timeout;
    let limits = TenantLimits {
        rate_per_second: principal.rate_per_second,
        concurrency: principal.max_concurrency,
    };
    let work = thinkus_common::limits::http_work(request.method(), request.uri().path());
    let seat = match state
        .admission
        .admit(&principal.tenant, limits, &work, Some(deadline))
        .await
    {
        Ok(seat) => seat,
        Err(err) => return RestError(err).into_response(),
    };
    request.extensions_mut().insert(principal);
    let run = thinkus_common::deadline::with_deadline(Some(deadline), next.run(request));
    let response = match tokio::time::timeout_at(deadline.into(), run).await {
        Ok(response) => response,
        Err(_) => RestError(ApiError::new(
            ErrorCode::Timeout,
            format!("the request took longer than {:?}", state.request_timeout),
        ))
        .into_response(),
    };
    drop(seat);
    response
}

/// Serves the facade on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: RestState,
    tls: Option<thinkus_common::tls::ServerTls>,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    thinkus_common::tls::serve_http(listener, tls.as_ref(), router(state), shutdown).await
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ControlBody {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    role_id: String,
    project_id: Option<String>,
    user_message: String,
    #[serde(default)]
    message_count: u32,
    #[serde(default)]
    recent_messages: Vec<String>,
}

async fn control(
    State(state): State<RestState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<Value>,
) -> Answer {
    let body: ControlBody = serde_json::from_value(body).map_err(|e| ApiError::invalid("body", e))?;
    required(&body.user_id, "userId")?;
    required(&body.user_message, "userMessage")?;
    let mut scope = scope_of(
        body.tenant_id,
        Some(body.user_id),
        Some(body.role_id),
        body.project_id,
        None,
    );
    principal.authorize(&mut scope)?;
    let decision = with_forwarded_credential(principal.credential, async {
        state
            .gateway
            .upstreams
            .controller
            .decide(DecideRequest {
                scope,
                message: body.user_message,
                message_count: body.message_count,
                recent_messages: body.recent_messages,
                ..Default::default()
            })
            .await
    })
    .await?;
    Ok(Json(json!({
        "needMemory": decision.need_memory,
        "memoryTypes": decision.memory_types.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        "retrievalMode": decision.retrieval_mode,
        "budgetTokens": decision.budget_tokens,
        "timeRange": decision.time_range.label(),
        "reason": decision.reason,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RetrieveBody {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    role_id: String,
    project_id: Option<String>,
    query: String,
    mode: Option<String>,
    #[serde(default)]
    memory_types: Vec<String>,
    time_range: Option<String>,
    limit: Option<usize>,
    budget_tokens: Option<u32>,
}

fn time_range(value: Option<&str>) -> Result<Option<TimeRange>, ApiError> {
    match value {
        None | Some("") => Ok(None),
        Some("all") => Ok(Some(TimeRange::All)),
        Some("last_7_days") => Ok(Some(TimeRange::Last7Days)),
        Some("last_30_days") => Ok(Some(TimeRange::Last30Days)),
        Some(other) => Err(ApiError::invalid(
            "timeRange",
            format!("{other:?} is not all, last_7_days or last_30_days"),
        )),
    }
}

async fn retrieve(
    State(state): State<RestState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<Value>,
) -> Answer {
    let body: RetrieveBody = serde_json::from_value(body).map_err(|e| ApiError::invalid("body", e))?;
    required(&body.user_id, "userId")?;
    let mode = match body.mode.as_deref() {
        None | Some("catalog") => RetrievalMode::Catalog,
        Some("details") => RetrievalMode::Details,
        Some(other) => return Err(ApiError::invalid("mode", format!("{other:?} is not catalog or details")).into()),
    };
    let types = body
        .memory_types
        .iter()
        .map(|t| t.parse::<MemoryType>().map_err(|e| ApiError::invalid("memoryTypes", e)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut scope = scope_of(
        body.tenant_id,
        Some(body.user_id),
        Some(body.role_id),
        body.project_id,
        None,
    );
    principal.authorize(&mut scope)?;
    let result = with_forwarded_credential(principal.credential, async {
        state
            .gateway
            .upstreams
            .retriever
            .recall(RecallRequest {
                scope,
                query: body.query,
                mode,
                types,
                time_range: time_range(body.time_range.as_deref())?,
                budget_tokens: body.budget_tokens,
                limit: body.limit,
                ..Default::default()
            })
            .await
    })
    .await?;
    Ok(Json(json!({
        "mode": result.mode,
        "catalog": result.catalog.iter().map(|e| json!({
            "id": e.id,
            "summary": e.summary,
            "type": e.memory_type.as_str(),
            "importance": e.importance,
            "date": e.relative_time,
            "tags": e.tags,
            "score": e.score.score,
        })).collect::<Vec<_>>(),
        "details": result.details.iter().map(|d| json!({
            "id": d.id,
            "content": d.content,
            "context": d.context,
            "relatedDecisions": d.decisions,
            "artifactRefs": d.refs.iter().map(|r| json!({"ref": r.reference, "locator": r.locator, "desc": r.desc})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "tokensUsed": result.tokens_used,
        "rendered": result.rendered,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WriteBody {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    role_id: String,
    project_id: Option<String>,
    session_id: Option<String>,
    conversation: String,
    request_id: Option<String>,
}

/// "user: ...\nassistant: ..." into messages; lines without a speaker continue the last one.
fn conversation_messages(text: &str) -> Vec<Message> {
    let now = chrono::Utc::now();
    let mut messages: Vec<Message> = Vec::new();
    for line in text.lines() {
        let speaker = line
            .split_once([':', '：'])
            .filter(|(who, _)| {
                let who = who.trim().to_lowercase();
                matches!(who.as_str(), "user" | "assistant" | "用户" | "助手" | "ai" | "human")
            })
            .map(|(who, rest)| (who.trim().to_lowercase(), rest.trim().to_string()));
        match (speaker, messages.last_mut()) {
            (Some((who, rest)), _) => {
                let role = if matches!(who.as_str(), "assistant" | "助手" | "ai") {
                    "assistant"
                } else {
                    "user"
                };
                messages.push(Message {
                    role: role.into(),
                    content: rest,
                    speaker: None,
                    created_at: now,
                    index: messages.len() as u32,
                });
            }
            (None, Some(last)) => {
                last.content.push('\n');
                last.content.push_str(line);
            }
            (None, None) if !line.trim().is_empty() => messages.push(Message {
                role: "user".into(),
                content: line.trim().to_string(),
                speaker: None,
                created_at: now,
                index: 0,
            }),
            (None, None) => {}
        }
    }
    messages
}

async fn write(
    State(state): State<RestState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<Value>,
) -> Answer {
    let body: WriteBody = serde_json::from_value(body).map_err(|e| ApiError::invalid("body", e))?;
    required(&body.user_id, "userId")?;
    required(&body.role_id, "roleId")?;
    let messages = conversation_messages(&body.conversation);
    if messages.is_empty() {
        return Err(ApiError::invalid("conversation", "is empty").into());
    }
    let mut scope = scope_of(
        body.tenant_id,
        Some(body.user_id),
        Some(body.role_id),
        body.project_id,
        body.session_id,
    );
    principal.authorize(&mut scope)?;
    let learned = with_forwarded_credential(principal.credential, async {
        state
            .gateway
            .upstreams
            .knowledge
            .learn(LearnRequest {
                scope,
                messages,
                engine: EngineChoice::Configured,
                request_id: body.request_id,
                ..Default::default()
            })
            .await
    })
    .await?;
    Ok(Json(json!({
        "memories": learned.results.iter().filter_map(|r| r.memory.as_ref()).map(|m| json!({
            "id": m.id,
            "type": m.memory_type.as_str(),
            "content": m.content,
            "summary": m.summary,
            "importance": m.importance,
            "confidence": m.confidence,
            "evidenceCount": m.evidence_count,
        })).collect::<Vec<_>>(),
        "results": learned.results.iter().map(|r| json!({
            "outcome": r.outcome.as_str(),
            "memoryId": r.memory.as_ref().map(|m| m.id.clone()),
            "candidateId": r.candidate_id,
            "reason": r.reason,
            "score": r.score,
        })).collect::<Vec<_>>(),
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CorrectBody {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    role_id: Option<String>,
    memory_id: String,
    action: String,
    evidence: Option<String>,
    new_content: Option<String>,
    request_id: Option<String>,
}

async fn correct(
    State(state): State<RestState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<Value>,
) -> Answer {
    let body: CorrectBody = serde_json::from_value(body).map_err(|e| ApiError::invalid("body", e))?;
    required(&body.user_id, "userId")?;
    required(&body.memory_id, "memoryId")?;
    let action = match body.action.as_str() {
        "suppress" => CorrectionAction::Suppress,
        "freeze" => CorrectionAction::Freeze,
        "replace" => CorrectionAction::Replace,
        "restore" => CorrectionAction::Restore,
        other => {
            return Err(ApiError::invalid(
                "action",
                format!("{other:?} is not suppress, freeze, replace or restore"),
            )
            .into());
        }
    };
    let mut scope = scope_of(body.tenant_id, Some(body.user_id), body.role_id, None, None);
    principal.authorize(&mut scope)?;
    let corrected = with_forwarded_credential(principal.credential, async {
        state
            .gateway
            .upstreams
            .knowledge
            .correct(CorrectRequest {
                scope,
                memory_id: body.memory_id,
                action,
                evidence: body.evidence.unwrap_or_default(),
                new_content: body.new_content,
                new_summary: None,
                request_id: body.request_id,
            })
            .await
    })
    .await?;
    Ok(Json(json!({
        "memory": {"id": corrected.memory.id, "status": corrected.memory.status.as_str(),
                   "confidence": corrected.memory.confidence,
                   "supersededBy": corrected.memory.superseded_by},
        "replacement": corrected.replacement.map(|m| json!({"id": m.id, "content": m.content})),
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PrepareBody {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    role_id: String,
    project_id: Option<String>,
    session_id: String,
    message: String,
    budget_tokens: Option<u32>,
    #[serde(default)]
    recent_messages: Vec<String>,
}

async fn prepare(
    State(state): State<RestState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<Value>,
) -> Answer {
    let body: PrepareBody = serde_json::from_value(body).map_err(|e| ApiError::invalid("body", e))?;
    required(&body.user_id, "userId")?;
    let mut scope = scope_of(
        body.tenant_id,
        Some(body.user_id),
        Some(body.role_id),
        body.project_id,
        Some(body.session_id),
    );
    principal.authorize(&mut scope)?;
    let prepared = with_forwarded_credential(principal.credential, async {
        state
            .gateway
            .prepare_turn(PrepareRequest {
                scope,
                message: body.message,
                budget_tokens: body.budget_tokens,
                recent_messages: body.recent_messages,
                now: None,
            })
            .await
    })
    .await?;
    Ok(Json(json!({
        "context": prepared.context,
        "tokensUsed": prepared.tokens_used,
        "budgetTokens": prepared.budget_tokens,
        "needMemory": prepared.decision.need_memory,
        "trace": prepared.items.iter().map(|i| json!({
            "id": i.id, "score": i.score, "confidence": i.confidence,
            "reason": i.reason, "included": i.included, "tokens": i.tokens,
        })).collect::<Vec<_>>(),
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ToolCallBody {
    id: String,
    #[serde(default)]
    name: String,
    output: String,
    #[serde(default)]
    mime_type: String,
    #[serde(default)]
    path: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompleteBody {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    role_id: String,
    project_id: Option<String>,
    session_id: String,
    user_message: String,
    #[serde(default)]
    assistant_message: String,
    #[serde(default)]
    tool_calls: Vec<ToolCallBody>,
    #[serde(default)]
    not_memorable: bool,
    request_id: Option<String>,
    /// The turn ends the session (its summary is completed).
    #[serde(default)]
    end_session: bool,
    #[serde(default)]
    injected_memory_ids: Vec<String>,
    #[serde(default)]
    wait_for_learning: bool,
}

async fn complete(
    State(state): State<RestState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<Value>,
) -> Answer {
    let body: CompleteBody = serde_json::from_value(body).map_err(|e| ApiError::invalid("body", e))?;
    required(&body.user_id, "userId")?;
    let mut scope = scope_of(
        body.tenant_id,
        Some(body.user_id),
        Some(body.role_id),
        body.project_id,
        Some(body.session_id),
    );
    principal.authorize(&mut scope)?;
    let completed = with_forwarded_credential(principal.credential, async {
        state
            .gateway
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
                request_id: body.request_id,
                end_session: body.end_session,
                injected_memory_ids: body.injected_memory_ids,
                wait_for_learning: body.wait_for_learning,
                ..Default::default()
            })
            .await
    })
    .await?;
    Ok(Json(json!({
        "toolCalls": completed.tool_calls.iter().map(|r| json!({
            "id": r.id, "offloaded": r.offloaded, "artifactId": r.artifact_id,
            "replacement": r.replacement, "originalTokens": r.original_tokens,
        })).collect::<Vec<_>>(),
        "jobIds": completed.job_ids,
        "learning": completed.learning.as_ref().map(job_json),
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JobsQuery {
    user_id: String,
    /// The tenant, for service keys; others act in their own.
    #[serde(default)]
    tenant_id: Option<String>,
    session_id: Option<String>,
    limit: Option<usize>,
}

async fn jobs(
    State(state): State<RestState>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<JobsQuery>,
) -> Answer {
    required(&query.user_id, "userId")?;
    let mut scope = scope_of(query.tenant_id, Some(query.user_id), None, None, query.session_id);
    principal.authorize(&mut scope)?;
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let jobs = state
        .gateway
        .list_jobs(JobsRequest {
            scope,
            status: None,
            limit,
            offset: 0,
        })
        .await?;
    Ok(Json(json!({
        "jobs": jobs.iter().map(job_json).collect::<Vec<_>>(),
    })))
}

/// A job as JSON; a learn job that succeeded carries what it did (`learned`: counts, and the
/// memories the quota refused with why).
fn job_json(job: &thinkus_backends::sql::JobRecord) -> Value {
    let learned = job
        .result
        .as_deref()
        .and_then(|result| serde_json::from_str::<crate::api::LearnReport>(result).ok());
    json!({
        "id": job.id, "kind": job.kind, "status": job.status.as_str(), "attempts": job.attempts,
        "lastError": job.last_error, "runAfter": job.run_after, "createdAt": job.created_at,
        "learned": learned,
    })
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    #[test]
    fn conversations_split_by_speaker() {
        let messages = conversation_messages("user: 我们决定用Stripe\nassistant: 好的\n记下了\n用户：预算5万");
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0].role, "user");
        assert_eq!(messages[1].content, "好的\n记下了");
        assert_eq!(messages[2].content, "预算5万");
    }

    #[test]
    fn errors_map_to_http_statuses() {
        let response = RestError(ApiError::invalid("userId", "is required")).into_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let limited = RestError(
            ApiError::new(thinkus_common::ErrorCode::ResourceExhausted, "slow down")
                .with_retry_after(std::time::Duration::from_millis(300)),
        )
        .into_response();
        assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(limited.headers()["retry-after"], "1");
    }
}
