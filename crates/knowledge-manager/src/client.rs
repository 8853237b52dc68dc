//! [`KnowledgeClient`]: the knowledge manager in this process, or over gRPC.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_backends::sql::{CandidateStatus, Change};
use thinkus_common::ApiError;
use thinkus_common::convert::{
    engine_to_proto_choice, memory_type_to_proto, message_to_proto, scope_to_proto, status_to_proto, timestamp_opt,
    visibility_to_proto,
};
use thinkus_common::grpc::ClientChannel;
use thinkus_common::model::{EngineChoice, Language, Memory, MemoryType, Owner, Scope};
use thinkus_proto::common as pbc;
use thinkus_proto::knowledge as pb;
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;

use crate::api::{
    CandidateView, Conflict, ConflictChoice, ConflictResolution, CorrectRequest, CorrectResult, Erasure,
    FinalizeResult, ImportReport, IngestResult, IngestTurnsRequest, KnowledgeApi, LearnRequest, LearnResult,
    ListRequest, MaintenanceReport, MarkdownFile, Owners, Quota, RememberRequest, Standing, ValueChange, WriteResult,
};
use crate::convert;

/// Calls the knowledge manager wherever it runs.
#[derive(Clone)]
pub enum KnowledgeClient {
    Local(Arc<dyn KnowledgeApi>),
    Grpc(KnowledgeManagerServiceClient<ClientChannel>),
}

impl KnowledgeClient {
    pub fn grpc(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self::Grpc(
            KnowledgeManagerServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        )
    }
}

fn scope(scope: &Scope) -> Option<pbc::Scope> {
    Some(scope_to_proto(scope))
}

/// The scope of an administrative call: one user, a tenant's users (no user id), or everyone
/// (no scope).
fn owners_scope(owners: &Owners) -> Option<pbc::Scope> {
    match owners {
        Owners::One(owner) => Some(pbc::Scope {
            tenant_id: owner.tenant_id.clone(),
            user_id: owner.user_id.clone(),
            ..Default::default()
        }),
        Owners::Tenant(tenant) => Some(pbc::Scope {
            tenant_id: tenant.clone(),
            ..Default::default()
        }),
        Owners::All => None,
    }
}

fn memory(response: Option<&pbc::Memory>) -> Result<Memory, ApiError> {
    convert::memory_from_proto(response.ok_or_else(|| ApiError::internal("the knowledge manager returned no memory"))?)
}

#[async_trait]
impl KnowledgeApi for KnowledgeClient {
    async fn remember(&self, request: RememberRequest) -> Result<WriteResult, ApiError> {
        match self {
            Self::Local(api) => api.remember(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .remember(pb::RememberRequest {
                        scope: scope(&request.scope),
                        memory: Some(convert::draft_to_proto(&request.draft)),
                        request_id: request.request_id.unwrap_or_default(),
                        skip_dedup: request.skip_dedup,
                        bypass_admission: request.admission_bypassed_by.is_some(),
                    })
                    .await?;
                convert::write_result_from_proto(
                    response
                        .get_ref()
                        .result
                        .as_ref()
                        .ok_or_else(|| ApiError::internal("the knowledge manager returned no result"))?,
                )
            }
        }
    }

    async fn ingest_turns(&self, request: IngestTurnsRequest) -> Result<IngestResult, ApiError> {
        match self {
            Self::Local(api) => api.ingest_turns(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .ingest_turns(pb::IngestTurnsRequest {
                        scope: scope(&request.scope),
                        turns: convert::turns_to_proto(&request.turns),
                        visibility: visibility_to_proto(request.visibility),
                    })
                    .await?
                    .into_inner();
                Ok(IngestResult {
                    memory_ids: response.memory_ids,
                    created: response.created.max(0) as u32,
                })
            }
        }
    }

    async fn learn(&self, request: LearnRequest) -> Result<LearnResult, ApiError> {
        match self {
            Self::Local(api) => api.learn(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .learn_from_conversation(pb::LearnFromConversationRequest {
                        scope: scope(&request.scope),
                        messages: request.messages.iter().map(message_to_proto).collect(),
                        engine: engine_to_proto_choice(request.engine),
                        request_id: request.request_id.unwrap_or_default(),
                        not_memorable: request.not_memorable,
                        dry_run: request.dry_run,
                        injected_memories: request.injected_memories,
                    })
                    .await?;
                convert::learn_from_proto(response.get_ref())
            }
        }
    }

    async fn get_memory(&self, scope_: Scope, memory_id: String) -> Result<Memory, ApiError> {
        match self {
            Self::Local(api) => api.get_memory(scope_, memory_id).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .get_memory(pb::GetMemoryRequest {
                        scope: scope(&scope_),
                        memory_id,
                        all_roles: scope_.role_id.is_empty(),
                    })
                    .await?;
                memory(response.get_ref().memory.as_ref())
            }
        }
    }

    async fn list_memories(&self, request: ListRequest) -> Result<Vec<Memory>, ApiError> {
        match self {
            Self::Local(api) => api.list_memories(request).await,
            Self::Grpc(client) => {
                let offset = if request.offset == 0 {
                    String::new()
                } else {
                    format!("o{}", request.offset)
                };
                let response = client
                    .clone()
                    .list_memories(pb::ListMemoriesRequest {
                        scope: scope(&request.scope),
                        all_roles: request.scope.role_id.is_empty(),
                        types: request.types.iter().map(|t| memory_type_to_proto(*t)).collect(),
                        statuses: request.statuses.iter().map(|s| status_to_proto(*s)).collect(),
                        page: Some(pbc::PageRequest {
                            page_size: request.limit.min(500) as i32,
                            page_token: offset,
                        }),
                    })
                    .await?;
                response
                    .get_ref()
                    .memories
                    .iter()
                    .map(convert::memory_from_proto)
                    .collect()
            }
        }
    }

    async fn correct(&self, request: CorrectRequest) -> Result<CorrectResult, ApiError> {
        match self {
            Self::Local(api) => api.correct(request).await,
            Self::Grpc(client) => {
                let (action, importance) = convert::correction_to_proto(request.action);
                let response = client
                    .clone()
                    .correct_memory(pb::CorrectMemoryRequest {
                        scope: scope(&request.scope),
                        memory_id: request.memory_id,
                        action,
                        evidence: request.evidence,
                        new_content: request.new_content.unwrap_or_default(),
                        new_summary: request.new_summary.unwrap_or_default(),
                        request_id: request.request_id.unwrap_or_default(),
                        importance,
                    })
                    .await?;
                let body = response.get_ref();
                Ok(CorrectResult {
                    memory: memory(body.memory.as_ref())?,
                    replacement: body.replacement.as_ref().map(convert::memory_from_proto).transpose()?,
                })
            }
        }
    }

    async fn merge(
        &self,
        scope_: Scope,
        memory_ids: Vec<String>,
        engine: EngineChoice,
        request_id: Option<String>,
    ) -> Result<Memory, ApiError> {
        match self {
            Self::Local(api) => api.merge(scope_, memory_ids, engine, request_id).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .merge_memories(pb::MergeMemoriesRequest {
                        scope: scope(&scope_),
                        memory_ids,
                        engine: engine_to_proto_choice(engine),
                        request_id: request_id.unwrap_or_default(),
                    })
                    .await?;
                memory(response.get_ref().memory.as_ref())
            }
        }
    }

    async fn delete(&self, scope_: Scope, memory_id: String, reason: String) -> Result<(), ApiError> {
        match self {
            Self::Local(api) => api.delete(scope_, memory_id, reason).await,
            Self::Grpc(client) => {
                client
                    .clone()
                    .delete_memory(pb::DeleteMemoryRequest {
                        scope: scope(&scope_),
                        memory_id,
                        reason,
                    })
                    .await?;
                Ok(())
            }
        }
    }

    async fn history(&self, scope_: Scope, memory_id: String) -> Result<Vec<Change>, ApiError> {
        match self {
            Self::Local(api) => api.history(scope_, memory_id).await,
            Self::Grpc(client) => {
                let owner = scope_.owner();
                let response = client
                    .clone()
                    .get_memory_history(pb::GetMemoryHistoryRequest {
                        scope: scope(&scope_),
                        memory_id,
                        all_roles: scope_.role_id.is_empty(),
                    })
                    .await?;
                Ok(response
                    .get_ref()
                    .changes
                    .iter()
                    .map(|c| convert::change_from_proto(c, &owner))
                    .collect())
            }
        }
    }

    async fn list_candidates(
        &self,
        scope_: Scope,
        status: CandidateStatus,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<CandidateView>, ApiError> {
        match self {
            Self::Local(api) => api.list_candidates(scope_, status, limit, offset).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .list_candidates(pb::ListCandidatesRequest {
                        scope: scope(&scope_),
                        status: convert::candidate_status_to_proto(status),
                        page: Some(pbc::PageRequest {
                            page_size: limit.min(500) as i32,
                            page_token: if offset == 0 {
                                String::new()
                            } else {
                                format!("o{offset}")
                            },
                        }),
                    })
                    .await?;
                response
                    .get_ref()
                    .candidates
                    .iter()
                    .map(convert::candidate_from_proto)
                    .collect()
            }
        }
    }

    async fn approve_candidate(
        &self,
        scope_: Scope,
        candidate_id: String,
        edited_content: Option<String>,
    ) -> Result<WriteResult, ApiError> {
        match self {
            Self::Local(api) => api.approve_candidate(scope_, candidate_id, edited_content).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .approve_candidate(pb::ApproveCandidateRequest {
                        scope: scope(&scope_),
                        candidate_id,
                        edited_content: edited_content.unwrap_or_default(),
                    })
                    .await?;
                convert::write_result_from_proto(
                    response
                        .get_ref()
                        .result
                        .as_ref()
                        .ok_or_else(|| ApiError::internal("the knowledge manager returned no result"))?,
                )
            }
        }
    }

    async fn reject_candidate(&self, scope_: Scope, candidate_id: String, reason: String) -> Result<(), ApiError> {
        match self {
            Self::Local(api) => api.reject_candidate(scope_, candidate_id, reason).await,
            Self::Grpc(client) => {
                client
                    .clone()
                    .reject_candidate(pb::RejectCandidateRequest {
                        scope: scope(&scope_),
                        candidate_id,
                        reason,
                    })
                    .await?;
                Ok(())
            }
        }
    }

    async fn promote(
        &self,
        scope_: Scope,
        memory_id: String,
        target: Option<MemoryType>,
        title: Option<String>,
    ) -> Result<Memory, ApiError> {
        match self {
            Self::Local(api) => api.promote(scope_, memory_id, target, title).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .promote_memory(pb::PromoteMemoryRequest {
                        scope: scope(&scope_),
                        memory_id,
                        target_type: target.map(memory_type_to_proto).unwrap_or(0),
                        title: title.unwrap_or_default(),
                    })
                    .await?;
                memory(response.get_ref().memory.as_ref())
            }
        }
    }

    async fn finalize_iteration(&self, scope_: Scope, iteration_id: String) -> Result<FinalizeResult, ApiError> {
        match self {
            Self::Local(api) => api.finalize_iteration(scope_, iteration_id).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .finalize_iteration(pb::FinalizeIterationRequest {
                        scope: scope(&scope_),
                        iteration_id,
                    })
                    .await?
                    .into_inner();
                Ok(FinalizeResult {
                    promoted: response
                        .promoted
                        .iter()
                        .map(convert::memory_from_proto)
                        .collect::<Result<_, _>>()?,
                    skipped_ids: response.skipped_ids,
                })
            }
        }
    }

    async fn quota(&self, scope_: Scope) -> Result<Quota, ApiError> {
        match self {
            Self::Local(api) => api.quota(scope_).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .get_quota(pb::GetQuotaRequest { scope: scope(&scope_) })
                    .await?
                    .into_inner();
                Ok(Quota {
                    plan: response.plan,
                    used: response.used.max(0) as u64,
                    limit: response.limit.max(0) as u64,
                })
            }
        }
    }

    async fn set_plan(&self, owner: Owner, plan: String) -> Result<(), ApiError> {
        match self {
            Self::Local(api) => api.set_plan(owner, plan).await,
            Self::Grpc(client) => {
                client
                    .clone()
                    .set_plan(pb::SetPlanRequest {
                        scope: owners_scope(&Owners::One(owner)),
                        plan,
                    })
                    .await?;
                Ok(())
            }
        }
    }

    async fn run_maintenance(
        &self,
        owners: Owners,
        decay: bool,
        forget: bool,
        now: Option<DateTime<Utc>>,
    ) -> Result<MaintenanceReport, ApiError> {
        match self {
            Self::Local(api) => api.run_maintenance(owners, decay, forget, now).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .run_maintenance(pb::RunMaintenanceRequest {
                        scope: owners_scope(&owners),
                        decay,
                        forget,
                        now: timestamp_opt(now),
                    })
                    .await?
                    .into_inner();
                Ok(MaintenanceReport {
                    decayed: response.decayed.max(0) as u64,
                    forgotten: response.forgotten.max(0) as u64,
                })
            }
        }
    }

    async fn value_changes(&self, scope_: Scope, limit: usize) -> Result<Vec<ValueChange>, ApiError> {
        match self {
            Self::Local(api) => api.value_changes(scope_, limit).await,
            Self::Grpc(client) => client
                .clone()
                .list_value_changes(pb::ListValueChangesRequest {
                    scope: scope(&scope_),
                    limit: limit.min(1000) as i32,
                })
                .await?
                .into_inner()
                .changes
                .into_iter()
                .map(convert::value_change_from_proto)
                .collect(),
        }
    }

    async fn rebuild_index(&self, owners: Owners) -> Result<crate::rebuild::IndexJob, ApiError> {
        match self {
            Self::Local(api) => api.rebuild_index(owners).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .rebuild_index(pb::RebuildIndexRequest {
                        scope: owners_scope(&owners),
                    })
                    .await?;
                convert::index_job_from_proto(response.get_ref().job.as_ref())
            }
        }
    }

    async fn index_job(&self, job_id: String) -> Result<crate::rebuild::IndexJob, ApiError> {
        match self {
            Self::Local(api) => api.index_job(job_id).await,
            Self::Grpc(client) => {
                let response = client.clone().get_index_job(pb::GetIndexJobRequest { job_id }).await?;
                convert::index_job_from_proto(response.get_ref().job.as_ref())
            }
        }
    }

    async fn list_conflicts(&self, scope_: Scope, limit: usize) -> Result<Vec<Conflict>, ApiError> {
        match self {
            Self::Local(api) => api.list_conflicts(scope_, limit).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .list_conflicts(pb::ListConflictsRequest {
                        scope: scope(&scope_),
                        limit: limit.min(200) as i32,
                    })
                    .await?;
                response
                    .get_ref()
                    .conflicts
                    .iter()
                    .map(convert::conflict_from_proto)
                    .collect()
            }
        }
    }

    async fn resolve_conflict(
        &self,
        scope_: Scope,
        conflict_id: String,
        keep: ConflictChoice,
        reason: String,
    ) -> Result<ConflictResolution, ApiError> {
        match self {
            Self::Local(api) => api.resolve_conflict(scope_, conflict_id, keep, reason).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .resolve_conflict(pb::ResolveConflictRequest {
                        scope: scope(&scope_),
                        conflict_id,
                        keep: convert::conflict_choice_to_proto(keep),
                        reason,
                    })
                    .await?
                    .into_inner();
                Ok(ConflictResolution {
                    kept: memory(response.kept.as_ref())?,
                    replaced_ids: response.replaced_ids,
                })
            }
        }
    }

    async fn standing(&self, scope_: Scope, limit: usize) -> Result<Standing, ApiError> {
        match self {
            Self::Local(api) => api.standing(scope_, limit).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .get_standing(pb::GetStandingRequest {
                        scope: scope(&scope_),
                        limit: limit.min(200) as i32,
                    })
                    .await?
                    .into_inner();
                let memories = |list: &[pbc::Memory]| -> Result<Vec<Memory>, ApiError> {
                    list.iter().map(convert::memory_from_proto).collect()
                };
                Ok(Standing {
                    rules: memories(&response.rules)?,
                    profile: memories(&response.profile)?,
                    conflicts: response
                        .conflicts
                        .iter()
                        .map(convert::conflict_from_proto)
                        .collect::<Result<_, _>>()?,
                    language: response.language.parse().unwrap_or(Language::En),
                })
            }
        }
    }

    async fn export_markdown(&self, scope_: Scope, language: Option<Language>) -> Result<Vec<MarkdownFile>, ApiError> {
        match self {
            Self::Local(api) => api.export_markdown(scope_, language).await,
            Self::Grpc(client) => {
                let mut stream = client
                    .clone()
                    .export_memory(pb::ExportMemoryRequest {
                        scope: scope(&scope_),
                        language: language.map(|l| l.as_str().to_string()).unwrap_or_default(),
                    })
                    .await?
                    .into_inner();
                let mut files = Vec::new();
                while let Some(message) = stream.message().await? {
                    if let Some(file) = message.file {
                        files.push(MarkdownFile {
                            path: file.path,
                            content: file.content,
                        });
                    }
                }
                Ok(files)
            }
        }
    }

    async fn import_markdown(
        &self,
        scope_: Scope,
        files: Vec<MarkdownFile>,
        dry_run: bool,
    ) -> Result<ImportReport, ApiError> {
        match self {
            Self::Local(api) => api.import_markdown(scope_, files, dry_run).await,
            Self::Grpc(client) => {
                use pb::import_memory_request::Item;
                let header = pb::ImportMemoryRequest {
                    item: Some(Item::Header(pb::ImportHeader {
                        scope: scope(&scope_),
                        dry_run,
                    })),
                };
                let messages = std::iter::once(header).chain(files.into_iter().map(|file| pb::ImportMemoryRequest {
                    item: Some(Item::File(pb::MemoryFile {
                        path: file.path,
                        content: file.content,
                    })),
                }));
                let response = client.clone().import_memory(futures::stream::iter(messages)).await?;
                Ok(convert::import_report_from_proto(response.get_ref()))
            }
        }
    }

    async fn list_roles(&self, owner: Owner) -> Result<Vec<String>, ApiError> {
        match self {
            Self::Local(api) => api.list_roles(owner).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .list_roles(pb::ListRolesRequest {
                        scope: owners_scope(&Owners::One(owner)),
                    })
                    .await?;
                Ok(response.into_inner().role_ids)
            }
        }
    }

    async fn export_user(&self, owner: Owner) -> Result<serde_json::Value, ApiError> {
        match self {
            Self::Local(api) => api.export_user(owner).await,
            Self::Grpc(client) => {
                let mut stream = client
                    .clone()
                    .export_user(pb::ExportUserRequest {
                        scope: owners_scope(&Owners::One(owner)),
                    })
                    .await?
                    .into_inner();
                let mut document = Vec::new();
                while let Some(message) = stream.message().await? {
                    document.extend_from_slice(&message.chunk);
                }
                serde_json::from_slice(&document).map_err(|err| {
                    ApiError::internal(format!("the knowledge manager sent an unreadable export: {err}"))
                })
            }
        }
    }

    async fn erase_user(&self, owner: Owner, actor: String, artifacts_erased: u64) -> Result<Erasure, ApiError> {
        match self {
            Self::Local(api) => api.erase_user(owner, actor, artifacts_erased).await,
            Self::Grpc(client) => {
                // The knowledge manager names the actor from the credential it sees (the
                // caller's, forwarded).
                let response = client
                    .clone()
                    .erase_user(pb::EraseUserRequest {
                        scope: owners_scope(&Owners::One(owner)),
                        artifacts_erased,
                    })
                    .await?
                    .into_inner();
                Ok(convert::erasure_from_proto(&response))
            }
        }
    }
}
