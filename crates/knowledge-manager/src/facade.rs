//! The knowledge manager's facade: [`KnowledgeApi`] on [`KnowledgeManager`]. Each call hands
//! over to the core (`service.rs`: the write pipeline, reads, quotas, upkeep sweeps) or to the
//! module of its concern (turns, learning, corrections, candidates, conflicts, Markdown, data
//! rights); nothing below this file calls the API back.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_backends::sql::{CandidateStatus, Change, ChangeKind, MemoryOrder, MemoryQuery, WriteBatch};
use thinkus_backends::vector::{Layers, MemoryFilter, Reader};
use thinkus_common::ApiError;
use thinkus_common::ids::{IdKind, check_id, new_id};
use thinkus_common::model::{EngineChoice, Language, Memory, MemoryStatus, MemoryType, Owner, Scope};

use crate::api::{
    CandidateView, Conflict, ConflictChoice, ConflictResolution, CorrectRequest, CorrectResult, Erasure,
    FinalizeResult, ImportReport, IngestResult, IngestTurnsRequest, KnowledgeApi, LearnRequest, LearnResult,
    ListRequest, MaintenanceReport, MarkdownFile, Owners, Quota, RememberRequest, Standing, ValueChange, WriteResult,
};
use crate::rebuild::IndexJob;
use crate::service::{Gate, KnowledgeManager, WriteOptions, actor_of, request_key};

#[async_trait]
impl KnowledgeApi for KnowledgeManager {
    async fn remember(&self, request: RememberRequest) -> Result<WriteResult, ApiError> {
        self.validate_draft(&request.draft, "memory")?;
        let options = WriteOptions {
            gate: match request.admission_bypassed_by {
                Some(by) => Gate::Bypass { by },
                None => Gate::default(),
            },
            skip_dedup: request.skip_dedup,
            request_key: request_key("remember", &request.request_id)?,
            actor: actor_of(&request.scope),
            ..Default::default()
        };
        self.write(&request.scope, &request.draft, options).await
    }

    async fn ingest_turns(&self, request: IngestTurnsRequest) -> Result<IngestResult, ApiError> {
        crate::turns::ingest(self, request).await
    }

    async fn learn(&self, request: LearnRequest) -> Result<LearnResult, ApiError> {
        crate::learn::learn(self, request).await
    }

    async fn get_memory(&self, scope: Scope, memory_id: String) -> Result<Memory, ApiError> {
        self.visible_memory(&scope, &memory_id, "memory_id").await
    }

    async fn list_memories(&self, request: ListRequest) -> Result<Vec<Memory>, ApiError> {
        let query = MemoryQuery {
            order: MemoryOrder::Newest,
            limit: request.limit,
            offset: request.offset,
            ..MemoryQuery::of(MemoryFilter {
                reader: (!request.scope.role_id.is_empty()).then(|| Reader {
                    role_id: request.scope.role_id.clone(),
                    project_id: request.scope.project_id.clone(),
                    layers: Layers::Both,
                }),
                types: request.types.clone(),
                statuses: if request.statuses.is_empty() {
                    vec![MemoryStatus::Active]
                } else {
                    request.statuses.clone()
                },
                ..MemoryFilter::user(&request.scope.owner())
            })
        };
        Ok(self.store.list_memories(&query).await?)
    }

    async fn correct(&self, request: CorrectRequest) -> Result<CorrectResult, ApiError> {
        crate::upkeep::correct(self, request).await
    }

    async fn merge(
        &self,
        scope: Scope,
        memory_ids: Vec<String>,
        engine: EngineChoice,
        request_id: Option<String>,
    ) -> Result<Memory, ApiError> {
        crate::upkeep::merge(self, scope, memory_ids, engine, request_id).await
    }

    async fn delete(&self, scope: Scope, memory_id: String, reason: String) -> Result<(), ApiError> {
        let memory = self.visible_memory(&scope, &memory_id, "memory_id").await?;
        let now = Utc::now();
        let batch = WriteBatch {
            deletes: vec![(scope.owner(), memory.id.clone())],
            changes: vec![Change {
                id: new_id(IdKind::Change),
                tenant_id: scope.tenant_id.clone(),
                user_id: scope.user_id.clone(),
                memory_id: memory.id.clone(),
                kind: ChangeKind::Delete,
                actor: actor_of(&scope),
                reason: if reason.is_empty() { "deleted".into() } else { reason },
                // The store drops every image of a deleted memory's content from its history.
                before: None,
                after: None,
                at: now,
            }],
            ..Default::default()
        };
        self.store.commit(batch).await?;
        self.index(Vec::new(), Vec::new(), vec![memory.id]).await;
        Ok(())
    }

    async fn history(&self, scope: Scope, memory_id: String) -> Result<Vec<Change>, ApiError> {
        check_id(IdKind::Memory, "memory_id", &memory_id)?;
        let changes = self.store.changes(&scope.owner(), &memory_id).await?;
        if changes.is_empty() {
            return Err(ApiError::not_found("memory", &memory_id));
        }
        // A deleted memory keeps its history; a live one must be visible to the asker.
        if self.store.get_memory(&scope.owner(), &memory_id).await?.is_some() {
            self.visible_memory(&scope, &memory_id, "memory_id").await?;
        }
        Ok(changes)
    }

    async fn list_candidates(
        &self,
        scope: Scope,
        status: CandidateStatus,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<CandidateView>, ApiError> {
        crate::candidates::list(self, scope, status, limit, offset).await
    }

    async fn approve_candidate(
        &self,
        scope: Scope,
        candidate_id: String,
        edited_content: Option<String>,
    ) -> Result<WriteResult, ApiError> {
        crate::candidates::approve(self, scope, candidate_id, edited_content).await
    }

    async fn reject_candidate(&self, scope: Scope, candidate_id: String, reason: String) -> Result<(), ApiError> {
        crate::candidates::reject(self, scope, candidate_id, reason).await
    }

    async fn promote(
        &self,
        scope: Scope,
        memory_id: String,
        target: Option<MemoryType>,
        title: Option<String>,
    ) -> Result<Memory, ApiError> {
        crate::upkeep::promote(self, scope, memory_id, target, title).await
    }

    async fn finalize_iteration(&self, scope: Scope, iteration_id: String) -> Result<FinalizeResult, ApiError> {
        crate::upkeep::finalize_iteration(self, scope, iteration_id).await
    }

    async fn quota(&self, scope: Scope) -> Result<Quota, ApiError> {
        self.quota_of(&scope).await
    }

    async fn set_plan(&self, owner: Owner, plan: String) -> Result<(), ApiError> {
        if self.config.quotas.limit(&plan).is_none() {
            return Err(ApiError::invalid(
                "plan",
                format!("unknown plan {plan:?} (unlimited, seed, growth, scale or enterprise)"),
            ));
        }
        Ok(self.store.set_plan(&owner, &plan).await?)
    }

    async fn run_maintenance(
        &self,
        owners: Owners,
        decay: bool,
        forget: bool,
        now: Option<DateTime<Utc>>,
    ) -> Result<MaintenanceReport, ApiError> {
        let now = now.unwrap_or_else(Utc::now);
        let mut report = MaintenanceReport::default();
        for user in self.users(owners).await? {
            if decay {
                report.decayed += self.decay(&user, now).await?;
            }
            if forget {
                report.forgotten += self.forget(&user, None, now).await?;
            }
        }
        let metrics = &thinkus_common::metrics::METRICS;
        if decay {
            metrics.sweeps.with_label_values(&["decay"]).inc();
        }
        if forget {
            metrics.sweeps.with_label_values(&["forget"]).inc();
        }
        if let Ok(counts) = self.store.count_by_status().await {
            for (status, count) in counts {
                metrics.memories.with_label_values(&[status.as_str()]).set(count as i64);
            }
        }
        Ok(report)
    }

    async fn value_changes(&self, scope: Scope, limit: usize) -> Result<Vec<ValueChange>, ApiError> {
        crate::turns::value_changes(self, &scope, limit).await
    }

    async fn rebuild_index(&self, owners: Owners) -> Result<IndexJob, ApiError> {
        self.start_rebuild(owners).await
    }

    async fn index_job(&self, job_id: String) -> Result<IndexJob, ApiError> {
        self.find_index_job(&job_id).await
    }

    async fn list_conflicts(&self, scope: Scope, limit: usize) -> Result<Vec<Conflict>, ApiError> {
        crate::conflicts::list(self, &scope, limit.clamp(1, 200)).await
    }

    async fn resolve_conflict(
        &self,
        scope: Scope,
        conflict_id: String,
        keep: ConflictChoice,
        reason: String,
    ) -> Result<ConflictResolution, ApiError> {
        crate::conflicts::resolve(self, scope, conflict_id, keep, reason).await
    }

    async fn standing(&self, scope: Scope, limit: usize) -> Result<Standing, ApiError> {
        crate::standing::standing(self, &scope, limit.clamp(1, 200)).await
    }

    async fn export_markdown(&self, scope: Scope, language: Option<Language>) -> Result<Vec<MarkdownFile>, ApiError> {
        crate::markdown::export(self, &scope, language).await
    }

    async fn import_markdown(
        &self,
        scope: Scope,
        files: Vec<MarkdownFile>,
        dry_run: bool,
    ) -> Result<ImportReport, ApiError> {
        crate::markdown::import(self, &scope, files, dry_run).await
    }

    async fn list_roles(&self, owner: Owner) -> Result<Vec<String>, ApiError> {
        Ok(self.store.list_roles(&owner).await?)
    }

    async fn export_user(&self, owner: Owner) -> Result<serde_json::Value, ApiError> {
        crate::data_rights::export(self, &owner).await
    }

    async fn erase_user(&self, owner: Owner, actor: String, artifacts_erased: u64) -> Result<Erasure, ApiError> {
        crate::data_rights::erase(self, &owner, &actor, artifacts_erased).await
    }
}
