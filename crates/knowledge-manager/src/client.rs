//! [`KnowledgeGrpcClient`]: the knowledge manager over gRPC, behind the same [`KnowledgeApi`] as
//! the service itself (in process, a node holds the [`crate::KnowledgeManager`] as
//! `Arc<dyn KnowledgeApi>`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_backends::sql::{CandidateStatus, Change};
use thinkus_common::ApiError;
use thinkus_common::grpc::ClientChannel;
use thinkus_common::model::{EngineChoice, Language, Memory, MemoryType, Owner, Scope};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;

use crate::api::{
    CandidateView, Conflict, ConflictChoice, ConflictResolution, CorrectRequest, CorrectResult, Erasure,
    FinalizeResult, ImportReport, IngestResult, IngestTurnsRequest, KnowledgeApi, LearnRequest, LearnResult,
    ListRequest, MaintenanceReport, MarkdownFile, Owners, Quota, RememberRequest, Standing, ValueChange, WriteResult,
};
use crate::convert;
use crate::rebuild::IndexJob;

/// Calls a knowledge manager that runs in another process.
#[derive(Clone)]
pub struct KnowledgeGrpcClient {
    client: KnowledgeManagerServiceClient<ClientChannel>,
}

impl KnowledgeGrpcClient {
    pub fn new(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self {
            client: KnowledgeManagerServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        }
    }
}

#[async_trait]
impl KnowledgeApi for KnowledgeGrpcClient {
    async fn remember(&self, request: RememberRequest) -> Result<WriteResult, ApiError> {
        let response = self
            .client
            .clone()
            .remember(convert::remember_request_to_proto(request))
            .await?;
        convert::remember_response_from_proto(response.get_ref())
    }

    async fn ingest_turns(&self, request: IngestTurnsRequest) -> Result<IngestResult, ApiError> {
        let response = self
            .client
            .clone()
            .ingest_turns(convert::ingest_request_to_proto(&request))
            .await?;
        Ok(convert::ingest_from_proto(response.into_inner()))
    }

    async fn learn(&self, request: LearnRequest) -> Result<LearnResult, ApiError> {
        let response = self
            .client
            .clone()
            .learn_from_conversation(convert::learn_request_to_proto(request))
            .await?;
        convert::learn_from_proto(response.get_ref())
    }

    async fn get_memory(&self, scope: Scope, memory_id: String) -> Result<Memory, ApiError> {
        let response = self
            .client
            .clone()
            .get_memory(convert::get_memory_request_to_proto(&scope, memory_id))
            .await?;
        convert::required_memory(response.get_ref().memory.as_ref())
    }

    async fn list_memories(&self, request: ListRequest) -> Result<Vec<Memory>, ApiError> {
        let response = self
            .client
            .clone()
            .list_memories(convert::list_request_to_proto(&request))
            .await?;
        convert::memories_from_proto(&response.get_ref().memories)
    }

    async fn correct(&self, request: CorrectRequest) -> Result<CorrectResult, ApiError> {
        let response = self
            .client
            .clone()
            .correct_memory(convert::correct_request_to_proto(request))
            .await?;
        convert::correct_result_from_proto(response.get_ref())
    }

    async fn merge(
        &self,
        scope: Scope,
        memory_ids: Vec<String>,
        engine: EngineChoice,
        request_id: Option<String>,
    ) -> Result<Memory, ApiError> {
        let response = self
            .client
            .clone()
            .merge_memories(convert::merge_request_to_proto(&scope, memory_ids, engine, request_id))
            .await?;
        convert::required_memory(response.get_ref().memory.as_ref())
    }

    async fn delete(&self, scope: Scope, memory_id: String, reason: String) -> Result<(), ApiError> {
        self.client
            .clone()
            .delete_memory(convert::delete_request_to_proto(&scope, memory_id, reason))
            .await?;
        Ok(())
    }

    async fn history(&self, scope: Scope, memory_id: String) -> Result<Vec<Change>, ApiError> {
        let owner = scope.owner();
        let response = self
            .client
            .clone()
            .get_memory_history(convert::history_request_to_proto(&scope, memory_id))
            .await?;
        Ok(response
            .get_ref()
            .changes
            .iter()
            .map(|c| convert::change_from_proto(c, &owner))
            .collect())
    }

    async fn list_candidates(
        &self,
        scope: Scope,
        status: CandidateStatus,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<CandidateView>, ApiError> {
        let response = self
            .client
            .clone()
            .list_candidates(convert::list_candidates_request_to_proto(&scope, status, limit, offset))
            .await?;
        response
            .get_ref()
            .candidates
            .iter()
            .map(convert::candidate_from_proto)
            .collect()
    }

    async fn approve_candidate(
        &self,
        scope: Scope,
        candidate_id: String,
        edited_content: Option<String>,
    ) -> Result<WriteResult, ApiError> {
        let response = self
            .client
            .clone()
            .approve_candidate(convert::approve_request_to_proto(&scope, candidate_id, edited_content))
            .await?;
        convert::required_write_result(response.get_ref().result.as_ref())
    }

    async fn reject_candidate(&self, scope: Scope, candidate_id: String, reason: String) -> Result<(), ApiError> {
        self.client
            .clone()
            .reject_candidate(convert::reject_request_to_proto(&scope, candidate_id, reason))
            .await?;
        Ok(())
    }

    async fn promote(
        &self,
        scope: Scope,
        memory_id: String,
        target: Option<MemoryType>,
        title: Option<String>,
    ) -> Result<Memory, ApiError> {
        let response = self
            .client
            .clone()
            .promote_memory(convert::promote_request_to_proto(&scope, memory_id, target, title))
            .await?;
        convert::required_memory(response.get_ref().memory.as_ref())
    }

    async fn finalize_iteration(&self, scope: Scope, iteration_id: String) -> Result<FinalizeResult, ApiError> {
        let response = self
            .client
            .clone()
            .finalize_iteration(convert::finalize_request_to_proto(&scope, iteration_id))
            .await?;
        convert::finalize_from_proto(response.into_inner())
    }

    async fn quota(&self, scope: Scope) -> Result<Quota, ApiError> {
        let response = self
            .client
            .clone()
            .get_quota(convert::quota_request_to_proto(&scope))
            .await?;
        Ok(convert::quota_from_proto(response.into_inner()))
    }

    async fn set_plan(&self, owner: Owner, plan: String) -> Result<(), ApiError> {
        self.client
            .clone()
            .set_plan(convert::set_plan_request_to_proto(owner, plan))
            .await?;
        Ok(())
    }

    async fn run_maintenance(
        &self,
        owners: Owners,
        decay: bool,
        forget: bool,
        now: Option<DateTime<Utc>>,
    ) -> Result<MaintenanceReport, ApiError> {
        let response = self
            .client
            .clone()
            .run_maintenance(convert::maintenance_request_to_proto(&owners, decay, forget, now))
            .await?;
        Ok(convert::maintenance_from_proto(response.get_ref()))
    }

    async fn value_changes(&self, scope: Scope, limit: usize) -> Result<Vec<ValueChange>, ApiError> {
        self.client
            .clone()
            .list_value_changes(convert::value_changes_request_to_proto(&scope, limit))
            .await?
            .into_inner()
            .changes
            .into_iter()
            .map(convert::value_change_from_proto)
            .collect()
    }

    async fn rebuild_index(&self, owners: Owners) -> Result<IndexJob, ApiError> {
        let response = self
            .client
            .clone()
            .rebuild_index(convert::rebuild_request_to_proto(&owners))
            .await?;
        convert::index_job_from_proto(response.get_ref().job.as_ref())
    }

    async fn index_job(&self, job_id: String) -> Result<IndexJob, ApiError> {
        let response = self
            .client
            .clone()
            .get_index_job(convert::index_job_request_to_proto(job_id))
            .await?;
        convert::index_job_from_proto(response.get_ref().job.as_ref())
    }

    async fn list_conflicts(&self, scope: Scope, limit: usize) -> Result<Vec<Conflict>, ApiError> {
        let response = self
            .client
            .clone()
            .list_conflicts(convert::list_conflicts_request_to_proto(&scope, limit))
            .await?;
        response
            .get_ref()
            .conflicts
            .iter()
            .map(convert::conflict_from_proto)
            .collect()
    }

    async fn resolve_conflict(
        &self,
        scope: Scope,
        conflict_id: String,
        keep: ConflictChoice,
        reason: String,
    ) -> Result<ConflictResolution, ApiError> {
        let response = self
            .client
            .clone()
            .resolve_conflict(convert::resolve_request_to_proto(&scope, conflict_id, keep, reason))
            .await?;
        convert::resolution_from_proto(response.into_inner())
    }

    async fn standing(&self, scope: Scope, limit: usize) -> Result<Standing, ApiError> {
        let response = self
            .client
            .clone()
            .get_standing(convert::standing_request_to_proto(&scope, limit))
            .await?;
        convert::standing_from_proto(response.get_ref())
    }

    async fn export_markdown(&self, scope: Scope, language: Option<Language>) -> Result<Vec<MarkdownFile>, ApiError> {
        let mut stream = self
            .client
            .clone()
            .export_memory(convert::export_memory_request_to_proto(&scope, language))
            .await?
            .into_inner();
        let mut files = Vec::new();
        while let Some(message) = stream.message().await? {
            if let Some(file) = message.file {
                files.push(convert::markdown_file_from_proto(file));
            }
        }
        Ok(files)
    }

    async fn import_markdown(
        &self,
        scope: Scope,
        files: Vec<MarkdownFile>,
        dry_run: bool,
    ) -> Result<ImportReport, ApiError> {
        let messages = convert::import_messages_to_proto(&scope, files, dry_run);
        let response = self
            .client
            .clone()
            .import_memory(futures::stream::iter(messages))
            .await?;
        Ok(convert::import_report_from_proto(response.get_ref()))
    }

    async fn list_roles(&self, owner: Owner) -> Result<Vec<String>, ApiError> {
        let response = self
            .client
            .clone()
            .list_roles(convert::list_roles_request_to_proto(owner))
            .await?;
        Ok(response.into_inner().role_ids)
    }

    async fn export_user(&self, owner: Owner) -> Result<serde_json::Value, ApiError> {
        let mut stream = self
            .client
            .clone()
            .export_user(convert::export_user_request_to_proto(owner))
            .await?
            .into_inner();
        let mut document = Vec::new();
        while let Some(message) = stream.message().await? {
            document.extend_from_slice(&message.chunk);
        }
        serde_json::from_slice(&document)
            .map_err(|err| ApiError::internal(format!("the knowledge manager sent an unreadable export: {err}")))
    }

    async fn erase_user(&self, owner: Owner, _actor: String, artifacts_erased: u64) -> Result<Erasure, ApiError> {
        // The knowledge manager names the actor from the credential it sees (the caller's,
        // forwarded), not from `_actor`.
        let response = self
            .client
            .clone()
            .erase_user(convert::erase_user_request_to_proto(owner, artifacts_erased))
            .await?;
        Ok(convert::erasure_from_proto(response.get_ref()))
    }
}
