//! The gRPC adapter of the knowledge manager.

use std::sync::Arc;

use thinkus_common::ApiError;
use thinkus_common::auth::{Principal, principal};
use thinkus_common::convert::{
    ScopeRules, datetime_opt, engine_from_proto, memory_to_proto, page_from_proto, scope_from_proto,
};
use thinkus_common::model::Scope;
use thinkus_proto::knowledge as pb;
use thinkus_proto::knowledge::knowledge_manager_service_server::{
    KnowledgeManagerService, KnowledgeManagerServiceServer,
};
use tonic::codegen::BoxStream;
use tonic::{Request, Response, Status, Streaming};

use crate::api::{KnowledgeApi, Owners};
use crate::convert;

/// Serves [`KnowledgeApi`] over gRPC.
pub struct KnowledgeGrpc {
    api: Arc<dyn KnowledgeApi>,
}

impl KnowledgeGrpc {
    pub fn new(api: Arc<dyn KnowledgeApi>) -> Self {
        Self { api }
    }

    pub fn into_server(self, max_message_bytes: usize) -> KnowledgeManagerServiceServer<Self> {
        KnowledgeManagerServiceServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }
}

/// Validates the scope, puts it in the caller's tenant and checks the caller may act for its
/// user.
fn scoped<T>(
    request: &Request<T>,
    scope: Option<&thinkus_proto::common::Scope>,
    rules: ScopeRules,
) -> Result<(Principal, Scope), Status> {
    let principal = principal(request)?;
    let mut scope = scope_from_proto(scope, "scope", rules)?;
    principal.authorize(&mut scope)?;
    Ok((principal, scope))
}

/// A scope that may name no user: every user of the caller's tenant (or of the tenant a
/// service key names), or of every tenant for a service key that names none. Needs a key that
/// may act for every user.
fn owners<T>(request: &Request<T>, scope: Option<&thinkus_proto::common::Scope>, what: &str) -> Result<Owners, Status> {
    let principal = principal(request)?;
    match scope {
        Some(scope) if !scope.user_id.is_empty() => {
            let mut scope = scope_from_proto(Some(scope), "scope", ScopeRules::USER)?;
            principal.authorize(&mut scope)?;
            Ok(Owners::One(scope.owner()))
        }
        _ => {
            principal.require_admin(what)?;
            let requested = scope.map(|s| s.tenant_id.as_str()).unwrap_or("");
            if requested.is_empty() && principal.any_tenant {
                return Ok(Owners::All);
            }
            Ok(Owners::Tenant(principal.tenant_for(requested)?))
        }
    }
}

/// Who a key is, for records that name who asked (an erasure's): "key 1a2b3c4d of tenant acme".
pub fn actor_of_key(principal: &Principal) -> String {
    format!("key {} of tenant {}", principal.key_id, principal.tenant)
}

/// The largest piece of an `ExportUser` stream.
pub const EXPORT_CHUNK_BYTES: usize = 256 * 1024;

/// The reader of a memory read (GetMemory, ListMemories, GetMemoryHistory): a role reads its
/// own memories and those shared with it; every role's, private ones included, only when the
/// caller asks for the person's view (`all_roles`) and names no role. An empty role_id is no
/// longer a silent wildcard over the roles' private memories.
fn reader(scope: Scope, all_roles: bool) -> Result<Scope, Status> {
    match (scope.role_id.is_empty(), all_roles) {
        (true, false) => Err(Status::from(ApiError::invalid(
            "scope.role_id",
            "is required: a role reads its own memories and those shared with it (set all_roles for the \
             person's view of every role's memories)",
        ))),
        (false, true) => Err(Status::from(ApiError::invalid(
            "all_roles",
            "reads every role's memories: leave scope.role_id empty",
        ))),
        _ => Ok(scope),
    }
}

/// Whether the principal may rebuild (and so follow the rebuild of) these owners' index: the
/// same rule as `owners` above.
fn may_rebuild(principal: &Principal, owners: &Owners) -> bool {
    match owners {
        Owners::One(owner) => {
            principal
                .tenant_for(&owner.tenant_id)
                .is_ok_and(|tenant| tenant == owner.tenant_id)
                && principal.authorize_user(&owner.user_id).is_ok()
        }
        Owners::Tenant(tenant) => {
            principal.is_admin() && principal.tenant_for(tenant).is_ok_and(|granted| &granted == tenant)
        }
        Owners::All => principal.is_admin() && principal.any_tenant,
    }
}

/// The most files an import may carry, and their total size.
pub const MAX_IMPORT_FILES: usize = 10_000;
pub const MAX_IMPORT_BYTES: usize = 64 * 1024 * 1024;

fn language(value: &str, field: &str) -> Result<Option<thinkus_common::model::Language>, ApiError> {
    match value {
        "" => Ok(None),
        other => other
            .parse()
            .map(Some)
            .map_err(|_| ApiError::invalid(field, format!("{other:?} is not zh or en"))),
    }
}

/// A limit between 1 and `max`; 0 means `default`.
fn limit(value: i32, default: usize, max: usize, field: &str) -> Result<usize, ApiError> {
    match value {
        0 => Ok(default),
        n if n > 0 => Ok((n as usize).min(max)),
        n => Err(ApiError::invalid(field, format!("must not be negative, got {n}"))),
    }
}

#[tonic::async_trait]
impl KnowledgeManagerService for KnowledgeGrpc {
    async fn list_conflicts(
        &self,
        request: Request<pb::ListConflictsRequest>,
    ) -> Result<Response<pb::ListConflictsResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let limit = limit(request.get_ref().limit, 50, 200, "limit")?;
        let conflicts = self.api.list_conflicts(scope, limit).await?;
        Ok(Response::new(convert::conflicts_response(&conflicts)))
    }

    async fn resolve_conflict(
        &self,
        request: Request<pb::ResolveConflictRequest>,
    ) -> Result<Response<pb::ResolveConflictResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let body = request.get_ref();
        let keep = convert::conflict_choice_from_proto(body.keep)?;
        let resolution = self
            .api
            .resolve_conflict(scope, body.conflict_id.clone(), keep, body.reason.clone())
            .await?;
        Ok(Response::new(convert::resolution_to_proto(resolution)))
    }

    async fn get_standing(
        &self,
        request: Request<pb::GetStandingRequest>,
    ) -> Result<Response<pb::GetStandingResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER_ROLE)?;
        let limit = limit(request.get_ref().limit, 30, 200, "limit")?;
        let standing = self.api.standing(scope, limit).await?;
        Ok(Response::new(convert::standing_to_proto(&standing)))
    }

    async fn export_memory(
        &self,
        request: Request<pb::ExportMemoryRequest>,
    ) -> Result<Response<BoxStream<pb::ExportMemoryResponse>>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let language = language(&request.get_ref().language, "language")?;
        let files = self.api.export_markdown(scope, language).await?;
        let stream = futures::stream::iter(files.into_iter().map(|file| {
            Ok(pb::ExportMemoryResponse {
                file: Some(convert::markdown_file_to_proto(file)),
            })
        }));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn export_user(
        &self,
        request: Request<pb::ExportUserRequest>,
    ) -> Result<Response<BoxStream<pb::ExportUserResponse>>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let document = self.api.export_user(scope.owner()).await?;
        let bytes = serde_json::to_vec(&document)
            .map_err(|err| ApiError::internal(format!("cannot serialise the export: {err}")))?;
        let chunks: Vec<Result<pb::ExportUserResponse, Status>> = bytes
            .chunks(EXPORT_CHUNK_BYTES)
            .map(|chunk| Ok(pb::ExportUserResponse { chunk: chunk.to_vec() }))
            .collect();
        Ok(Response::new(Box::pin(futures::stream::iter(chunks))))
    }

    async fn erase_user(
        &self,
        request: Request<pb::EraseUserRequest>,
    ) -> Result<Response<pb::EraseUserResponse>, Status> {
        let (principal, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let erasure = self
            .api
            .erase_user(
                scope.owner(),
                actor_of_key(&principal),
                request.get_ref().artifacts_erased,
            )
            .await?;
        Ok(Response::new(convert::erasure_to_proto(&erasure)))
    }

    async fn import_memory(
        &self,
        request: Request<Streaming<pb::ImportMemoryRequest>>,
    ) -> Result<Response<pb::ImportMemoryResponse>, Status> {
        let principal = principal(&request)?;
        let mut stream = request.into_inner();
        let header = match stream.message().await? {
            Some(pb::ImportMemoryRequest {
                item: Some(pb::import_memory_request::Item::Header(header)),
            }) => header,
            _ => {
                return Err(Status::from(ApiError::invalid(
                    "header",
                    "the first message must be the header",
                )));
            }
        };
        let mut scope = scope_from_proto(header.scope.as_ref(), "header.scope", ScopeRules::USER)?;
        principal.authorize(&mut scope)?;
        let mut files = Vec::new();
        let mut bytes = 0usize;
        while let Some(message) = stream.message().await? {
            match message.item {
                Some(pb::import_memory_request::Item::File(file)) => {
                    bytes += file.content.len();
                    if files.len() >= MAX_IMPORT_FILES || bytes > MAX_IMPORT_BYTES {
                        return Err(Status::from(ApiError::invalid(
                            "file",
                            format!("an import holds at most {MAX_IMPORT_FILES} files and {MAX_IMPORT_BYTES} bytes"),
                        )));
                    }
                    files.push(convert::markdown_file_from_proto(file));
                }
                _ => {
                    return Err(Status::from(ApiError::invalid(
                        "file",
                        "only the first message is a header",
                    )));
                }
            }
        }
        let report = self.api.import_markdown(scope, files, header.dry_run).await?;
        Ok(Response::new(convert::import_report_to_proto(&report)))
    }

    async fn list_roles(
        &self,
        request: Request<pb::ListRolesRequest>,
    ) -> Result<Response<pb::ListRolesResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let role_ids = self.api.list_roles(scope.owner()).await?;
        Ok(Response::new(pb::ListRolesResponse { role_ids }))
    }

    async fn remember(&self, request: Request<pb::RememberRequest>) -> Result<Response<pb::RememberResponse>, Status> {
        let (principal, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER_ROLE)?;
        let body = request.get_ref();
        let admission_bypassed_by = if body.bypass_admission {
            if !principal.is_admin() {
                return Err(Status::from(ApiError::permission_denied(
                    "bypass_admission: only a key that may act for every user of its tenant may bypass admission",
                )));
            }
            Some(actor_of_key(&principal))
        } else {
            None
        };
        let request = convert::remember_request_from_proto(scope, body, admission_bypassed_by)?;
        let result = self.api.remember(request).await?;
        Ok(Response::new(pb::RememberResponse {
            result: Some(convert::write_result_to_proto(&result)),
        }))
    }

    async fn ingest_turns(
        &self,
        request: Request<pb::IngestTurnsRequest>,
    ) -> Result<Response<pb::IngestTurnsResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER_ROLE)?;
        let request = convert::ingest_request_from_proto(scope, request.get_ref())?;
        let result = self.api.ingest_turns(request).await?;
        Ok(Response::new(convert::ingest_to_proto(&result)))
    }

    async fn learn_from_conversation(
        &self,
        request: Request<pb::LearnFromConversationRequest>,
    ) -> Result<Response<pb::LearnFromConversationResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER_ROLE)?;
        let request = convert::learn_request_from_proto(scope, request.get_ref())?;
        let result = self.api.learn(request).await?;
        Ok(Response::new(convert::learn_to_proto(&result)))
    }

    async fn get_memory(
        &self,
        request: Request<pb::GetMemoryRequest>,
    ) -> Result<Response<pb::GetMemoryResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let scope = reader(scope, request.get_ref().all_roles)?;
        let memory = self.api.get_memory(scope, request.get_ref().memory_id.clone()).await?;
        Ok(Response::new(pb::GetMemoryResponse {
            memory: Some(memory_to_proto(&memory)),
        }))
    }

    async fn list_memories(
        &self,
        request: Request<pb::ListMemoriesRequest>,
    ) -> Result<Response<pb::ListMemoriesResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let scope = reader(scope, request.get_ref().all_roles)?;
        let request = convert::list_request_from_proto(scope, request.get_ref())?;
        let (size, offset) = (request.limit, request.offset);
        let memories = self.api.list_memories(request).await?;
        Ok(Response::new(convert::memories_response(&memories, size, offset)))
    }

    async fn correct_memory(
        &self,
        request: Request<pb::CorrectMemoryRequest>,
    ) -> Result<Response<pb::CorrectMemoryResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let request = convert::correct_request_from_proto(scope, request.get_ref())?;
        let result = self.api.correct(request).await?;
        Ok(Response::new(convert::correct_result_to_proto(&result)))
    }

    async fn merge_memories(
        &self,
        request: Request<pb::MergeMemoriesRequest>,
    ) -> Result<Response<pb::MergeMemoriesResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let body = request.get_ref();
        let memory = self
            .api
            .merge(
                scope,
                body.memory_ids.clone(),
                engine_from_proto(body.engine, "engine")?,
                convert::optional(&body.request_id),
            )
            .await?;
        Ok(Response::new(pb::MergeMemoriesResponse {
            memory: Some(memory_to_proto(&memory)),
        }))
    }

    async fn delete_memory(
        &self,
        request: Request<pb::DeleteMemoryRequest>,
    ) -> Result<Response<pb::DeleteMemoryResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let body = request.get_ref();
        self.api
            .delete(scope, body.memory_id.clone(), body.reason.clone())
            .await?;
        Ok(Response::new(pb::DeleteMemoryResponse {}))
    }

    async fn get_memory_history(
        &self,
        request: Request<pb::GetMemoryHistoryRequest>,
    ) -> Result<Response<pb::GetMemoryHistoryResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let scope = reader(scope, request.get_ref().all_roles)?;
        let changes = self.api.history(scope, request.get_ref().memory_id.clone()).await?;
        Ok(Response::new(convert::history_response(&changes)))
    }

    async fn list_candidates(
        &self,
        request: Request<pb::ListCandidatesRequest>,
    ) -> Result<Response<pb::ListCandidatesResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let body = request.get_ref();
        let (size, offset) = page_from_proto(body.page.as_ref(), "page")?;
        let candidates = self
            .api
            .list_candidates(scope, convert::candidate_status_from_proto(body.status)?, size, offset)
            .await?;
        Ok(Response::new(convert::candidates_response(&candidates, size, offset)))
    }

    async fn approve_candidate(
        &self,
        request: Request<pb::ApproveCandidateRequest>,
    ) -> Result<Response<pb::ApproveCandidateResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let body = request.get_ref();
        let result = self
            .api
            .approve_candidate(
                scope,
                body.candidate_id.clone(),
                convert::optional(&body.edited_content),
            )
            .await?;
        Ok(Response::new(pb::ApproveCandidateResponse {
            result: Some(convert::write_result_to_proto(&result)),
        }))
    }

    async fn reject_candidate(
        &self,
        request: Request<pb::RejectCandidateRequest>,
    ) -> Result<Response<pb::RejectCandidateResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let body = request.get_ref();
        self.api
            .reject_candidate(scope, body.candidate_id.clone(), body.reason.clone())
            .await?;
        Ok(Response::new(pb::RejectCandidateResponse {}))
    }

    async fn promote_memory(
        &self,
        request: Request<pb::PromoteMemoryRequest>,
    ) -> Result<Response<pb::PromoteMemoryResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        let body = request.get_ref();
        let target = thinkus_common::convert::memory_type_from_proto(body.target_type, "target_type")?;
        let memory = self
            .api
            .promote(scope, body.memory_id.clone(), target, convert::optional(&body.title))
            .await?;
        Ok(Response::new(pb::PromoteMemoryResponse {
            memory: Some(memory_to_proto(&memory)),
        }))
    }

    async fn finalize_iteration(
        &self,
        request: Request<pb::FinalizeIterationRequest>,
    ) -> Result<Response<pb::FinalizeIterationResponse>, Status> {
        let rules = ScopeRules {
            project: true,
            ..ScopeRules::USER
        };
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), rules)?;
        let result = self
            .api
            .finalize_iteration(scope, request.get_ref().iteration_id.clone())
            .await?;
        Ok(Response::new(convert::finalize_to_proto(result)))
    }

    async fn get_quota(&self, request: Request<pb::GetQuotaRequest>) -> Result<Response<pb::GetQuotaResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER_ROLE)?;
        let quota = self.api.quota(scope).await?;
        Ok(Response::new(convert::quota_to_proto(quota)))
    }

    async fn set_plan(&self, request: Request<pb::SetPlanRequest>) -> Result<Response<pb::SetPlanResponse>, Status> {
        let (principal, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER)?;
        principal.require_admin("setting a plan")?;
        self.api.set_plan(scope.owner(), request.get_ref().plan.clone()).await?;
        Ok(Response::new(pb::SetPlanResponse {}))
    }

    async fn run_maintenance(
        &self,
        request: Request<pb::RunMaintenanceRequest>,
    ) -> Result<Response<pb::RunMaintenanceResponse>, Status> {
        let owners = owners(&request, request.get_ref().scope.as_ref(), "maintenance")?;
        let body = request.get_ref();
        if !body.decay && !body.forget {
            return Err(Status::from(ApiError::invalid(
                "decay",
                "ask for decay, forget or both",
            )));
        }
        let now = datetime_opt(body.now.as_ref(), "now")?;
        let report = self.api.run_maintenance(owners, body.decay, body.forget, now).await?;
        Ok(Response::new(convert::maintenance_to_proto(&report)))
    }

    async fn rebuild_index(
        &self,
        request: Request<pb::RebuildIndexRequest>,
    ) -> Result<Response<pb::RebuildIndexResponse>, Status> {
        let owners = owners(&request, request.get_ref().scope.as_ref(), "rebuilding the index")?;
        let job = self.api.rebuild_index(owners).await?;
        Ok(Response::new(pb::RebuildIndexResponse {
            job: Some(convert::index_job_to_proto(&job)),
        }))
    }

    async fn get_index_job(
        &self,
        request: Request<pb::GetIndexJobRequest>,
    ) -> Result<Response<pb::GetIndexJobResponse>, Status> {
        let principal = principal(&request)?;
        let id = request.get_ref().job_id.clone();
        if id.is_empty() {
            return Err(Status::from(ApiError::invalid("job_id", "required")));
        }
        let job = self.api.index_job(id.clone()).await?;
        // Someone who could not have started the job is told it does not exist.
        if !may_rebuild(&principal, &job.owners) {
            return Err(Status::from(ApiError::not_found("index job", &id)));
        }
        Ok(Response::new(pb::GetIndexJobResponse {
            job: Some(convert::index_job_to_proto(&job)),
        }))
    }

    async fn list_value_changes(
        &self,
        request: Request<pb::ListValueChangesRequest>,
    ) -> Result<Response<pb::ListValueChangesResponse>, Status> {
        let (_, scope) = scoped(&request, request.get_ref().scope.as_ref(), ScopeRules::USER_ROLE)?;
        let limit = match request.get_ref().limit {
            0 => 200,
            n @ 1..=1000 => n as usize,
            n => {
                return Err(Status::from(ApiError::invalid(
                    "limit",
                    format!("must be 0-1000, got {n}"),
                )));
            }
        };
        let changes = self.api.value_changes(scope, limit).await?;
        Ok(Response::new(convert::value_changes_response(&changes)))
    }
}
