//! The knowledge manager: the write path and the upkeep of memories.
//!
//! Every write goes through one pipeline ([`KnowledgeManager::write`]): validate, normalise
//! (summary, language, subject), embed, then
//! 1. contradiction: an active memory about the same subject stating other values is replaced
//!    (status `replaced`, `superseded_by` the new one);
//! 2. deduplication: an active memory of the same owner and type that is similar enough is
//!    reinforced (evidence + 1, confidence + 0.1) instead of writing a new one;
//! 3. quota: a full role first forgets low-value old memories, then refuses;
//! 4. commit: the relational store first (the source of truth, with the change history and the
//!    idempotency record in the same transaction), then the vector index.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use thinkus_backends::embed::Embedder;
use thinkus_backends::llm::{LanguageModel, RuleEngine};
use thinkus_backends::sql::{
    Change, ChangeKind, IdempotencyRecord, MemoryOrder, MemoryQuery, MemoryStore, OwnerLock, StoreError, WriteBatch,
};
use thinkus_backends::vector::{Bm25Encoder, IndexedPoint, Layers, MemoryFilter, Reader, VectorIndex};
use thinkus_common::ApiError;
use thinkus_common::error::ErrorCode;
use thinkus_common::ids::{IdKind, check_id, new_id};
use thinkus_common::model::{EngineChoice, Memory, MemorySource, MemoryStatus, MemoryType, Owner, Scope, Visibility};
use thinkus_common::text::{char_count, summarize_to};
use tracing::Instrument;

use crate::api::{MemoryDraft, Owners, Quota, WriteOutcome, WriteResult};
use crate::config::KnowledgeConfig;
use crate::subject;

/// Who made a change, for the history.
pub(crate) fn actor_of(scope: &Scope) -> String {
    if scope.role_id.is_empty() {
        format!("user:{}", scope.user_id)
    } else {
        format!("role:{}", scope.role_id)
    }
}

fn memory_json(memory: &Memory) -> Result<String, ApiError> {
    thinkus_common::to_json(memory, "a memory's image")
}

/// The history record of `before` becoming `after`: both images, who and why.
pub(crate) fn update_record(
    before: &Memory,
    after: &Memory,
    kind: ChangeKind,
    actor: impl Into<String>,
    reason: impl Into<String>,
    at: DateTime<Utc>,
) -> Result<Change, ApiError> {
    Ok(Change {
        id: new_id(IdKind::Change),
        tenant_id: before.scope.tenant_id.clone(),
        user_id: before.scope.user_id.clone(),
        memory_id: before.id.clone(),
        kind,
        actor: actor.into(),
        reason: reason.into(),
        before: Some(memory_json(before)?),
        after: Some(memory_json(after)?),
        at,
    })
}

/// How a write passes admission: every memory goes through [`KnowledgeManager::write`], and
/// its admission (`crate::admission::admit`: noise, echoes of the prompt's memories, the length
/// limit, the score threshold, the profile rules) unless a trusted caller bypasses it.
#[derive(Debug, Clone)]
pub(crate) enum Gate {
    /// The draft is admitted first. `injected` holds the contents of the memories that were in
    /// the prompt (a candidate echoing one is noise). `by_person`: a person made this write
    /// (a correction, an approval, a merge, a promotion, an import), so what admission would
    /// queue for a person's approval is written.
    Check { injected: Vec<String>, by_person: bool },
    /// A trusted caller writes the draft as is; `by` names it in the history.
    Bypass { by: String },
}

impl Default for Gate {
    fn default() -> Self {
        Gate::Check {
            injected: Vec::new(),
            by_person: false,
        }
    }
}

impl Gate {
    /// The gate of a write a person decided.
    pub(crate) fn person() -> Self {
        Gate::Check {
            injected: Vec::new(),
            by_person: true,
        }
    }
}

/// How a write should behave.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteOptions {
    /// Admission (see [`Gate`]).
    pub gate: Gate,
    pub skip_dedup: bool,
    /// The idempotency key ("remember:<request id>").
    pub request_key: Option<String>,
    /// The gateway job the write comes from: refused once an erasure of the user deleted it.
    pub job_id: Option<String>,
    pub actor: String,
    /// History entries to record with the write (a merge records its sources).
    pub extra_changes: Vec<Change>,
    /// Memories to mark replaced by the new one, with the reason (merges, replacements).
    pub replaces: Vec<(Memory, ChangeKind, String)>,
    /// A candidate to update in the same transaction (approval).
    pub candidate: Option<thinkus_backends::sql::Candidate>,
    /// Skip the quota check (replacements do not grow the number of active memories).
    pub skip_quota: bool,
    /// The evidence count of the new memory (a merge sums its sources').
    pub evidence_count: Option<u32>,
    /// The embedding of the memory's index text when the caller already has it (`learn`
    /// embeds all of a conversation's candidates in one call).
    pub dense: Option<Vec<f32>>,
}

/// The knowledge manager and its backends.
pub struct KnowledgeManager {
    pub(crate) config: KnowledgeConfig,
    pub(crate) store: Arc<dyn MemoryStore>,
    pub(crate) vectors: Arc<dyn VectorIndex>,
    pub(crate) embedder: Arc<dyn Embedder>,
    pub(crate) rules: RuleEngine,
    pub(crate) llm: Option<Arc<dyn LanguageModel>>,
    pub(crate) bm25: Bm25Encoder,
    /// The learned clause head of the built-in extraction, when loaded.
    pub(crate) learned: Option<crate::learned::LearnedExtraction>,
    /// The job queue index rebuilds run in (`rebuild`).
    pub(crate) jobs: Option<Arc<dyn thinkus_backends::sql::JobStore>>,
    /// Wakes this node's rebuild worker when a rebuild is queued here.
    pub(crate) rebuild_queued: tokio::sync::Notify,
}

impl KnowledgeManager {
    pub fn new(
        config: KnowledgeConfig,
        store: Arc<dyn MemoryStore>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        rules: RuleEngine,
        llm: Option<Arc<dyn LanguageModel>>,
    ) -> Self {
        crate::rules::register(&rules);
        Self {
            config,
            store,
            vectors,
            embedder,
            rules,
            llm,
            bm25: Bm25Encoder::default(),
            learned: None,
            jobs: None,
            rebuild_queued: tokio::sync::Notify::new(),
        }
    }

    /// Adds the learned clause head to the built-in extraction (used when the embedder is the
    /// one it was trained on).
    pub fn with_learned(mut self, learned: crate::learned::LearnedExtraction) -> Self {
        self.learned = Some(learned);
        self
    }

    /// Runs index rebuilds as jobs of this queue (`crate::rebuild`); without one, RebuildIndex
    /// answers FAILED_PRECONDITION.
    pub fn with_jobs(mut self, jobs: Arc<dyn thinkus_backends::sql::JobStore>) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// The critical section of a user's writes (`MemoryStore::lock_owner`): the check-then-
    /// commit part of writes runs in it, so that a write's duplicate and contradiction checks
    /// see every earlier write of the same user, concurrent ones included, in this process and
    /// in every other replica on the same PostgreSQL. Embedding happens before, outside it, so
    /// concurrent writes still share the embedder's batches.
    pub(crate) async fn lock_user(&self, owner: &Owner) -> Result<OwnerLock, ApiError> {
        Ok(self.store.lock_owner(owner).await?)
    }

    /// Refuses the write of a gateway job an erasure of its user deleted (its data is gone,
    /// and what it would write came from that data). Called in the user's critical section,
    /// which the erasure holds too: a job's write lands before the erasure, and is erased with
    /// the rest, or is refused after it.
    pub(crate) async fn check_job(&self, owner: &Owner, job_id: &Option<String>) -> Result<(), ApiError> {
        match job_id {
            Some(id) if !self.store.job_exists(owner, id).await? => Err(ApiError::failed_precondition(format!(
                "job {id} no longer exists (user {:?} of tenant {:?} was erased while it ran): its writes are dropped",
                owner.user_id, owner.tenant_id
            ))),
            _ => Ok(()),
        }
    }

    /// The user's critical section with [`Self::check_job`] passed, for a job's write outside
    /// the write pipeline's own section; no section when the write comes from no job.
    pub(crate) async fn fence_job(
        &self,
        owner: &Owner,
        job_id: &Option<String>,
    ) -> Result<Option<OwnerLock>, ApiError> {
        if job_id.is_none() {
            return Ok(None);
        }
        let lock = self.lock_user(owner).await?;
        self.check_job(owner, job_id).await?;
        Ok(Some(lock))
    }

    pub fn config(&self) -> &KnowledgeConfig {
        &self.config
    }

    /// The engine for a request: the configured LLM unless rules are asked for or none is set.
    pub(crate) fn engine(&self, choice: EngineChoice) -> Result<Arc<dyn LanguageModel>, ApiError> {
        match (choice, &self.llm) {
            (EngineChoice::Rules, _) | (EngineChoice::Configured, None) => Ok(Arc::new(self.rules.clone())),
            (_, Some(llm)) => Ok(llm.clone()),
            (EngineChoice::Llm, None) => Err(ApiError::failed_precondition(
                "engine: no LLM is configured (set llm.provider)",
            )),
        }
    }

    pub(crate) fn validate_draft(&self, draft: &MemoryDraft, field: &str) -> Result<(), ApiError> {
        let content = draft.content.trim();
        if content.is_empty() {
            return Err(ApiError::invalid(&format!("{field}.content"), "is empty"));
        }
        let chars = char_count(content);
        if chars > self.config.max_content_chars {
            return Err(ApiError::invalid(
                &format!("{field}.content"),
                format!("is {chars} characters, the limit is {}", self.config.max_content_chars),
            ));
        }
        if let Some(importance) = draft.importance
            && !(1..=5).contains(&importance)
        {
            return Err(ApiError::invalid(
                &format!("{field}.importance"),
                format!("must be 1-5, got {importance}"),
            ));
        }
        if let Some(confidence) = draft.confidence
            && (!(0.0..=1.0).contains(&confidence) || confidence.is_nan())
        {
            return Err(ApiError::invalid(&format!("{field}.confidence"), "must be within 0-1"));
        }
        if draft.tags.len() > 32 {
            return Err(ApiError::invalid(&format!("{field}.tags"), "at most 32 tags"));
        }
        for (i, tag) in draft.tags.iter().enumerate() {
            if tag.trim().is_empty() || char_count(tag) > 64 {
                return Err(ApiError::invalid(
                    &format!("{field}.tags[{i}]"),
                    "must be 1-64 characters",
                ));
            }
        }
        for (i, id) in draft.related_decision_ids.iter().enumerate() {
            check_id(IdKind::Memory, &format!("{field}.related_decision_ids[{i}]"), id)?;
        }
        if char_count(&draft.context) > self.config.max_content_chars {
            return Err(ApiError::invalid(&format!("{field}.context"), "is too long"));
        }
        Ok(())
    }

    /// A new memory from a draft.
    pub(crate) fn new_memory(&self, scope: &Scope, draft: &MemoryDraft, now: DateTime<Utc>) -> Memory {
        let content = draft.content.trim().to_string();
        let summary = draft
            .summary
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| summarize_to(s, 50))
            .unwrap_or_else(|| summarize_to(&content, 50));
        let importance = draft.importance.unwrap_or(3);
        let source = draft.source.unwrap_or(MemorySource::UserInput);
        let subject = draft.subject.clone().filter(|s| !s.is_empty()).or_else(|| {
            subject::is_factual(draft.memory_type)
                .then(|| subject::detect(&content))
                .flatten()
                .map(str::to_string)
        });
        let mut tags: Vec<String> = Vec::new();
        for tag in &draft.tags {
            let tag = tag.trim().to_string();
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        }
        Memory {
            summary,
            importance,
            confidence: draft.confidence.unwrap_or(1.0),
            freshness: f64::from(importance),
            visibility: draft.visibility.unwrap_or(Visibility::Private),
            tags,
            context: draft.context.trim().to_string(),
            related_decision_ids: draft.related_decision_ids.clone(),
            artifact_refs: draft.artifact_refs.clone(),
            occurred_at: draft.occurred_at.unwrap_or(now),
            subject,
            iteration_id: draft.iteration_id.clone().filter(|s| !s.is_empty()),
            speaker: draft.speaker.clone().filter(|s| !s.is_empty()),
            ..Memory::new(scope.clone(), draft.memory_type, content, source, now)
        }
    }

    /// The text embedded and indexed for a memory ([`crate::indexing`]).
    pub(crate) fn index_text(memory: &Memory) -> String {
        crate::indexing::index_text(memory)
    }

    pub(crate) fn point(&self, memory: &Memory, dense: Vec<f32>) -> IndexedPoint {
        let sparse = crate::indexing::sparse_vector(&self.bm25, memory);
        IndexedPoint::from_memory(memory, dense, sparse)
    }

    /// Writes new points and status changes to the index after a commit. The store is the
    /// source of truth: a failure here is logged and repaired by reconciliation.
    pub(crate) async fn index(
        &self,
        points: Vec<IndexedPoint>,
        status_changes: Vec<(String, MemoryStatus)>,
        deletes: Vec<String>,
    ) {
        let span = tracing::info_span!("vector.write", index = self.vectors.name());
        async {
            if !points.is_empty()
                && let Err(err) = self.vectors.upsert(points).await
            {
                tracing::error!(%err, "vector index upsert failed; run `thinkus admin rebuild-index` if it persists");
            }
            for status in [
                MemoryStatus::Active,
                MemoryStatus::Suppressed,
                MemoryStatus::Frozen,
                MemoryStatus::Replaced,
                MemoryStatus::Forgotten,
            ] {
                let ids: Vec<String> = status_changes
                    .iter()
                    .filter(|(_, s)| *s == status)
                    .map(|(id, _)| id.clone())
                    .collect();
                if !ids.is_empty()
                    && let Err(err) = self.vectors.set_status(&ids, status).await
                {
                    tracing::error!(%err, "vector index status update failed");
                }
            }
            if !deletes.is_empty()
                && let Err(err) = self.vectors.delete(&deletes).await
            {
                tracing::error!(%err, "vector index delete failed");
            }
        }
        .instrument(span)
        .await
    }

    async fn embed_one(&self, text: &str) -> Result<Vec<f32>, ApiError> {
        let mut vectors = self
            .embedder
            .embed_passages(&[text.to_string()])
            .instrument(tracing::info_span!("embed.passages", count = 1))
            .await?;
        vectors
            .pop()
            .ok_or_else(|| ApiError::internal("the embedder returned no vector"))
    }

    /// The stored result of an earlier request with the same key.
    pub(crate) async fn replay(&self, owner: &Owner, key: &Option<String>) -> Result<Option<String>, ApiError> {
        match key {
            Some(key) => Ok(self.store.get_idempotent(owner, key).await?),
            None => Ok(None),
        }
    }

    /// Active memories about the same subject that a new statement contradicts.
    async fn contradicted(&self, memory: &Memory) -> Result<Vec<Memory>, ApiError> {
        let Some(subject) = &memory.subject else {
            return Ok(Vec::new());
        };
        if !subject::is_factual(memory.memory_type) {
            return Ok(Vec::new());
        }
        let query = MemoryQuery {
            subject: Some(subject.clone()),
            limit: 50,
            ..MemoryQuery::of(MemoryFilter {
                reader: Some(Reader {
                    role_id: memory.scope.role_id.clone(),
                    project_id: memory.scope.project_id.clone(),
                    layers: if memory.scope.project_id.is_some() {
                        Layers::Project
                    } else {
                        Layers::CrossProject
                    },
                }),
                statuses: vec![MemoryStatus::Active, MemoryStatus::Suppressed],
                ..MemoryFilter::user(&memory.scope.owner())
            })
        };
        let negated = subject::negated_values(&memory.content);
        let stated = subject::values(&memory.content);
        Ok(self
            .store
            .list_memories(&query)
            .await?
            .into_iter()
            .filter(|old| old.scope.project_id == memory.scope.project_id)
            // "装修预算" and "营销预算" are two budgets: neither replaces the other.
            .filter(|old| subject::same_subject(&old.content, &memory.content, subject))
            // Private memories of other roles stay theirs.
            .filter(|old| old.scope.role_id == memory.scope.role_id || old.visibility != Visibility::Private)
            .filter(|old| {
                if old.memory_type == MemoryType::ConversationTurn {
                    // A turn is a record of what was said, values and all: it goes only when
                    // it states none of the new values ("预算改成$800了，不是之前说的$500"
                    // stays with "预算是$800", "这个项目的预算是$500" goes), and no more
                    // values than the new memory: a turn that says more (an analysis, a list of
                    // figures) holds more than what replaces one of its values, so it stays and
                    // its replaced values are struck where it is shown (`crate::changes`).
                    let said = subject::values(&old.content);
                    return !stated.is_empty()
                        && !said.is_empty()
                        && said.len() <= stated.len()
                        && said.is_disjoint(&stated);
                }
                subject::values_differ(&old.content, &memory.content)
                    || subject::values(&old.content).iter().any(|v| negated.contains(v))
            })
            .collect())
    }

    /// The most similar active memory of the same owner and type, above the threshold.
    async fn similar(&self, memory: &Memory, dense: &[f32]) -> Result<Option<(Memory, f64)>, ApiError> {
        let filter = MemoryFilter {
            reader: Some(Reader {
                role_id: memory.scope.role_id.clone(),
                project_id: memory.scope.project_id.clone(),
                layers: if memory.scope.project_id.is_some() {
                    Layers::Project
                } else {
                    Layers::CrossProject
                },
            }),
            types: vec![memory.memory_type],
            ..MemoryFilter::user(&memory.scope.owner())
        };
        let hits = self
            .vectors
            .search_dense(dense, &filter, 5)
            .instrument(tracing::info_span!(
                "vector.search",
                kind = "dedup",
                index = self.vectors.name()
            ))
            .await?;
        let threshold = self.config.dedup_threshold;
        let candidates: Vec<(String, f64)> = hits
            .into_iter()
            .map(|h| (h.id, f64::from(h.score)))
            .filter(|(_, score)| *score >= threshold)
            .collect();
        if candidates.is_empty() {
            return Ok(None);
        }
        let ids: Vec<String> = candidates.iter().map(|(id, _)| id.clone()).collect();
        let memories = self.store.get_memories(&memory.scope.owner(), &ids).await?;
        Ok(memories
            .into_iter()
            .filter(|m| m.status == MemoryStatus::Active)
            .filter(|m| m.scope.role_id == memory.scope.role_id && m.scope.project_id == memory.scope.project_id)
            .filter(|m| !subject::values_conflict(&m.content, &memory.content))
            .filter_map(|m| {
                let score = candidates.iter().find(|(id, _)| *id == m.id)?.1;
                Some((m, score))
            })
            .next())
    }

    /// Makes room in a full role for a memory of `importance`, in the order of seed 002
    /// section 6: first forgets old low-value memories (the forgetting sweep's rule, for this
    /// role), then gives up the least valuable active memory (lowest importance, fewest reads,
    /// oldest) when it is less important than the new one. Returns the memories to give up
    /// with the write (forgotten in its batch); refuses (RESOURCE_EXHAUSTED naming the plan,
    /// counted in `thinkus_quota_refusals_total{plan}`) when the role is full of memories at
    /// least as important as the new one.
    async fn enforce_quota(&self, scope: &Scope, importance: u8, now: DateTime<Utc>) -> Result<Vec<Memory>, ApiError> {
        if self.plan_limit(&scope.owner()).await?.1 == 0 {
            // Unlimited: nothing to count.
            return Ok(Vec::new());
        }
        let quota = self.quota_of(scope).await?;
        if quota.limit == 0 || quota.used < quota.limit {
            return Ok(Vec::new());
        }
        let forgotten = self.forget(&scope.owner(), Some(&scope.role_id), now).await?;
        let quota = self.quota_of(scope).await?;
        if quota.used < quota.limit {
            tracing::info!(owner = %scope.owner(), role_id = %scope.role_id, forgotten, "quota cleanup made room");
            return Ok(Vec::new());
        }
        let excess = (quota.used + 1 - quota.limit) as usize;
        let least_valuable = self
            .store
            .list_memories(&MemoryQuery {
                owner_role: Some(scope.role_id.clone()),
                exclude_types: vec![MemoryType::ConversationTurn],
                order: MemoryOrder::LeastValuable,
                limit: excess,
                ..MemoryQuery::of(MemoryFilter::user(&scope.owner()))
            })
            .await?;
        if least_valuable.len() == excess && least_valuable.iter().all(|m| m.importance < importance) {
            tracing::info!(
                owner = %scope.owner(),
                role_id = %scope.role_id,
                evicted = excess,
                "quota cleanup gives up the least valuable memories"
            );
            return Ok(least_valuable);
        }
        thinkus_common::metrics::METRICS
            .quota_refusals
            .with_label_values(&[quota.plan.as_str()])
            .inc();
        Err(ApiError::new(
            ErrorCode::ResourceExhausted,
            format!(
                "quota: the {} plan allows {} memories per role and role {:?} has {}, none old and unread enough to \
                 forget nor less important than this one: delete or merge memories, or upgrade the plan",
                quota.plan, quota.limit, scope.role_id, quota.used
            ),
        ))
    }

    /// A user's plan and its limit per role (0: unlimited).
    async fn plan_limit(&self, owner: &Owner) -> Result<(String, u64), ApiError> {
        let plan = self
            .store
            .get_plan(owner)
            .await?
            .unwrap_or_else(|| self.config.quotas.default_plan.clone());
        let limit = self.config.quotas.limit(&plan).unwrap_or(self.config.quotas.seed);
        Ok((plan, limit))
    }

    pub(crate) async fn quota_of(&self, scope: &Scope) -> Result<Quota, ApiError> {
        let (plan, limit) = self.plan_limit(&scope.owner()).await?;
        let used = self
            .store
            .count_memories(&MemoryQuery {
                owner_role: Some(scope.role_id.clone()),
                // Raw turns are the conversation itself, not curated memories: no quota.
                exclude_types: vec![MemoryType::ConversationTurn],
                ..MemoryQuery::of(MemoryFilter::user(&scope.owner()))
            })
            .await?;
        Ok(Quota { plan, used, limit })
    }

    /// The write pipeline: contradiction, deduplication, quota, commit, index.
    pub(crate) async fn write(
        &self,
        scope: &Scope,
        draft: &MemoryDraft,
        options: WriteOptions,
    ) -> Result<WriteResult, ApiError> {
        let now = Utc::now();
        if let Some(stored) = self.replay(&scope.owner(), &options.request_key).await? {
            return duplicate(&stored);
        }
        if let Gate::Check { injected, by_person } = &options.gate {
            let (admission, score) =
                crate::admission::admit(&self.config, &crate::admission::Extracted::of(scope, draft), injected);
            match admission {
                crate::admission::Admission::Write => {}
                crate::admission::Admission::Queue(_) if *by_person => {}
                crate::admission::Admission::Queue(reason) => {
                    let _fence = self.fence_job(&scope.owner(), &options.job_id).await?;
                    return self.queue(scope, draft, &reason, score, &options.request_key).await;
                }
                crate::admission::Admission::Reject(reason) => {
                    let _fence = self.fence_job(&scope.owner(), &options.job_id).await?;
                    let result = WriteResult::rejected(reason, score).about(draft);
                    self.commit(WriteBatch::default(), &scope.owner(), &options.request_key, &result)
                        .await?;
                    return Ok(result);
                }
            }
        }
        let mut memory = self.new_memory(scope, draft, now);
        if let Some(evidence) = options.evidence_count {
            memory.evidence_count = evidence.max(1);
        }
        let dense = match options.dense.clone() {
            Some(dense) => dense,
            None => self.embed_one(&Self::index_text(&memory)).await?,
        };

        // From the checks to the index: one write of this user at a time.
        let _user = self.lock_user(&scope.owner()).await?;
        self.check_job(&scope.owner(), &options.job_id).await?;
        // A decision a session's summary offers belongs to the session: once an erasure of the
        // user removed it, the summary that read it is gone too, and so is the decision.
        if draft.source == Some(MemorySource::Summary)
            && let Some(session) = scope.session_id.as_deref()
            && !self.store.session_exists(&scope.owner(), session).await?
        {
            return Err(ApiError::failed_precondition(format!(
                "session {session} no longer exists (user {:?} was erased): the decision its summary offered is dropped",
                scope.user_id
            )));
        }
        let mut replaces = options.replaces.clone();
        // A statement processed after a later one about the same subject (two turns learned
        // by two workers at once, a late import) does not undo it: it is written already
        // replaced by the value said later.
        let mut outdated_by: Option<String> = None;
        if !options.skip_dedup {
            let contradicted = self.contradicted(&memory).await?;
            let (later, contradicted): (Vec<Memory>, Vec<Memory>) = contradicted.into_iter().partition(|old| {
                old.status == MemoryStatus::Active
                    && old.memory_type != MemoryType::ConversationTurn
                    && old.occurred_at > memory.occurred_at
            });
            if let Some(latest) = later.iter().max_by_key(|m| m.occurred_at) {
                memory.status = MemoryStatus::Replaced;
                memory.superseded_by = Some(latest.id.clone());
                outdated_by = Some(latest.id.clone());
            }
            let contradicted = if outdated_by.is_some() {
                Vec::new()
            } else {
                contradicted
            };
            // An unsure new value does not replace a sure old one: both are kept as a pending
            // conflict a person resolves (seed 001 section 3.5.4; `crate::conflicts`). Writes a
            // person decided (an approval, an explicit replacement) are never held.
            let decided = options.candidate.is_some() || !options.replaces.is_empty();
            if !contradicted.is_empty()
                && !decided
                && let Some((batch, held)) =
                    crate::pending::hold(self.store.as_ref(), &self.config, &memory, &contradicted, now).await?
            {
                self.commit(batch, &memory.scope.owner(), &options.request_key, &held)
                    .await?;
                return Ok(held);
            }
            for old in contradicted {
                if replaces.iter().any(|(listed, _, _)| listed.id == old.id) {
                    continue;
                }
                replaces.push((
                    old,
                    ChangeKind::Supersede,
                    format!("replaced by a newer value of {:?}", memory.subject),
                ));
            }
            if replaces.is_empty()
                && outdated_by.is_none()
                && let Some((existing, similarity)) = self.similar(&memory, &dense).await?
            {
                return self.reinforce(existing, similarity, &options, now).await;
            }
        }
        let evicted = if !options.skip_quota
            && replaces.is_empty()
            && outdated_by.is_none()
            && memory.memory_type != MemoryType::ConversationTurn
        {
            self.enforce_quota(scope, memory.importance, now).await?
        } else {
            Vec::new()
        };

        let outcome = if replaces.is_empty() {
            WriteOutcome::Created
        } else {
            WriteOutcome::ReplacedOlder
        };
        let mut batch = WriteBatch::default();
        let mut status_changes = Vec::new();
        let mut replaced_ids = Vec::new();
        for (old, kind, reason) in &replaces {
            let mut updated = old.clone();
            updated.status = MemoryStatus::Replaced;
            updated.superseded_by = Some(memory.id.clone());
            updated.updated_at = now;
            batch
                .changes
                .push(update_record(old, &updated, *kind, &options.actor, reason, now)?);
            status_changes.push((old.id.clone(), MemoryStatus::Replaced));
            replaced_ids.push(old.id.clone());
            batch.updates.push(updated);
        }
        for old in &evicted {
            let mut updated = old.clone();
            updated.status = MemoryStatus::Forgotten;
            updated.updated_at = now;
            let reason = format!(
                "quota cleanup: importance {} with {} reads, the least valuable of role {:?}, makes room for {}",
                old.importance, old.access_count, scope.role_id, memory.id
            );
            batch.changes.push(update_record(
                old,
                &updated,
                ChangeKind::Forget,
                "system:quota",
                reason,
                now,
            )?);
            status_changes.push((old.id.clone(), MemoryStatus::Forgotten));
            batch.updates.push(updated);
        }
        if !evicted.is_empty() {
            thinkus_common::metrics::METRICS
                .sweep_changes
                .with_label_values(&["quota"])
                .inc_by(evicted.len() as u64);
        }
        let mut reason = if replaced_ids.is_empty() {
            "written".to_string()
        } else {
            format!("replaces {}", replaced_ids.join(", "))
        };
        if let Some(latest) = &outdated_by {
            reason = format!(
                "written as replaced: {latest} states a later value of {:?}",
                memory.subject
            );
        }
        if let Gate::Bypass { by } = &options.gate {
            reason.push_str(&format!(" (admission bypassed by {by})"));
        }
        if !evicted.is_empty() {
            let ids: Vec<&str> = evicted.iter().map(|m| m.id.as_str()).collect();
            reason.push_str(&format!(" (the quota gave up {})", ids.join(", ")));
        }
        batch.changes.push(Change {
            id: new_id(IdKind::Change),
            tenant_id: scope.tenant_id.clone(),
            user_id: scope.user_id.clone(),
            memory_id: memory.id.clone(),
            kind: ChangeKind::Create,
            actor: options.actor.clone(),
            reason: reason.clone(),
            before: None,
            after: Some(memory_json(&memory)?),
            at: now,
        });
        batch.changes.extend(options.extra_changes.iter().cloned());
        batch.inserts.push(memory.clone());
        if let Some(candidate) = &options.candidate {
            let mut candidate = candidate.clone();
            candidate.memory_id = Some(memory.id.clone());
            batch.candidates.push(candidate);
        }
        if !replaced_ids.is_empty() {
            // Pending conflicts about a value this write replaced are answered by it.
            let except = options.candidate.as_ref().map(|c| c.id.as_str());
            batch.candidates.extend(
                crate::pending::settled_by(
                    self.store.as_ref(),
                    &scope.owner(),
                    &replaced_ids,
                    &memory.id,
                    except,
                    now,
                )
                .await?,
            );
        }
        let result = WriteResult {
            outcome,
            memory: Some(memory.clone()),
            replaced_ids,
            candidate_id: None,
            reason,
            score: 1.0,
            draft: None,
        };
        self.commit(batch, &scope.owner(), &options.request_key, &result)
            .await?;
        let point = self.point(&memory, dense);
        self.index(vec![point], status_changes, Vec::new()).await;
        Ok(result)
    }

    /// Sends a draft admission holds back to the candidate queue, counting a repeated
    /// observation on the pending candidate of the same content.
    pub(crate) async fn queue(
        &self,
        scope: &Scope,
        draft: &MemoryDraft,
        reason: &str,
        score: f64,
        request_key: &Option<String>,
    ) -> Result<WriteResult, ApiError> {
        let key = crate::admission::content_key(&draft.content);
        let record = match self.store.find_pending_candidate(&scope.owner(), &key).await? {
            Some(mut pending) => {
                pending.evidence_count += 1;
                pending.score = pending.score.max(score);
                pending
            }
            None => thinkus_backends::sql::Candidate {
                id: new_id(IdKind::Candidate),
                scope: scope.clone(),
                draft: thinkus_common::to_json(draft, "a candidate's draft")?,
                reason: reason.to_string(),
                score,
                evidence_count: 1,
                status: thinkus_backends::sql::CandidateStatus::Pending,
                content_key: key,
                created_at: Utc::now(),
                decided_at: None,
                memory_id: None,
            },
        };
        let result = WriteResult {
            outcome: WriteOutcome::Queued,
            memory: None,
            replaced_ids: Vec::new(),
            candidate_id: Some(record.id.clone()),
            reason: reason.to_string(),
            score,
            draft: None,
        }
        .about(draft);
        let batch = WriteBatch {
            candidates: vec![record],
            ..Default::default()
        };
        self.commit(batch, &scope.owner(), request_key, &result).await?;
        Ok(result)
    }

    /// Commits a batch with the idempotency record of `result`; a concurrent request with the
    /// same key that won is answered with its result.
    pub(crate) async fn commit(
        &self,
        mut batch: WriteBatch,
        owner: &Owner,
        request_key: &Option<String>,
        result: &WriteResult,
    ) -> Result<(), ApiError> {
        if let Some(key) = request_key {
            batch.idempotency = Some(IdempotencyRecord {
                tenant_id: owner.tenant_id.clone(),
                user_id: owner.user_id.clone(),
                key: key.clone(),
                response: thinkus_common::to_json(result, "a write's answer")?,
                created_at: Utc::now(),
            });
        }
        match self.store.commit(batch).await {
            Ok(()) => Ok(()),
            Err(StoreError::Conflict(message)) => Err(ApiError::new(
                ErrorCode::AlreadyExists,
                format!("a concurrent change won: {message}; retry"),
            )),
            Err(err) => Err(err.into()),
        }
    }

    /// Strengthens an existing memory with one more observation.
    async fn reinforce(
        &self,
        existing: Memory,
        similarity: f64,
        options: &WriteOptions,
        now: DateTime<Utc>,
    ) -> Result<WriteResult, ApiError> {
        let mut updated = existing.clone();
        updated.evidence_count += 1;
        updated.confidence = (updated.confidence + 0.1).min(1.0);
        updated.last_accessed_at = Some(now);
        updated.freshness = f64::from(updated.importance).max(updated.freshness);
        updated.updated_at = now;
        let reason = format!("similar to {} ({similarity:.2})", existing.id);
        let batch = WriteBatch {
            updates: vec![updated.clone()],
            changes: vec![update_record(
                &existing,
                &updated,
                ChangeKind::Evidence,
                &options.actor,
                &reason,
                now,
            )?],
            candidates: options.candidate.iter().cloned().collect(),
            ..Default::default()
        };
        updated.version += 1;
        let result = WriteResult {
            outcome: WriteOutcome::Reinforced,
            memory: Some(updated),
            replaced_ids: Vec::new(),
            candidate_id: None,
            reason,
            score: similarity,
            draft: None,
        };
        self.commit(batch, &existing.scope.owner(), &options.request_key, &result)
            .await?;
        Ok(result)
    }

    /// A memory visible to the scope, or NOT_FOUND (existence does not leak across roles).
    pub(crate) async fn visible_memory(&self, scope: &Scope, memory_id: &str, field: &str) -> Result<Memory, ApiError> {
        check_id(IdKind::Memory, field, memory_id)?;
        let memory = self
            .store
            .get_memory(&scope.owner(), memory_id)
            .await?
            .ok_or_else(|| ApiError::not_found("memory", memory_id))?;
        let filter = MemoryFilter {
            reader: (!scope.role_id.is_empty()).then(|| Reader {
                role_id: scope.role_id.clone(),
                project_id: scope.project_id.clone(),
                layers: Layers::Both,
            }),
            statuses: MemoryStatus::ALL.to_vec(),
            ..MemoryFilter::user(&scope.owner())
        };
        if !filter.matches_memory(&memory) {
            return Err(ApiError::not_found("memory", memory_id));
        }
        Ok(memory)
    }

    /// Forgets low-value old memories (seed 002 section 5.2) of a user (one role if given).
    pub(crate) async fn forget(
        &self,
        owner: &Owner,
        role_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<u64, ApiError> {
        let query = MemoryQuery {
            owner_role: role_id.map(str::to_string),
            exclude_types: vec![MemoryType::ConversationTurn],
            created_before: Some(now - Duration::days(self.config.forget_after_days)),
            max_importance: Some(self.config.forget_max_importance),
            max_access_count: Some(self.config.forget_max_access),
            order: MemoryOrder::LeastValuable,
            limit: 500,
            ..MemoryQuery::of(MemoryFilter::user(owner))
        };
        let mut total = 0;
        loop {
            let batch_memories = self.store.list_memories(&query).await?;
            if batch_memories.is_empty() {
                break;
            }
            let mut batch = WriteBatch::default();
            let mut status_changes = Vec::new();
            for memory in &batch_memories {
                let mut updated = memory.clone();
                updated.status = MemoryStatus::Forgotten;
                updated.updated_at = now;
                let reason = format!(
                    "importance {} with {} reads, older than {} days",
                    memory.importance, memory.access_count, self.config.forget_after_days
                );
                batch.changes.push(update_record(
                    memory,
                    &updated,
                    ChangeKind::Forget,
                    "system:forget",
                    reason,
                    now,
                )?);
                status_changes.push((memory.id.clone(), MemoryStatus::Forgotten));
                batch.updates.push(updated);
            }
            let count = batch_memories.len() as u64;
            match self.store.commit(batch).await {
                Ok(()) => {}
                // A memory changed meanwhile: the next round reads it again.
                Err(StoreError::Conflict(_)) => continue,
                Err(err) => return Err(err.into()),
            }
            self.index(Vec::new(), status_changes, Vec::new()).await;
            total += count;
            if count < 500 {
                break;
            }
        }
        if total > 0 {
            thinkus_common::metrics::METRICS
                .sweep_changes
                .with_label_values(&["forget"])
                .inc_by(total);
        }
        Ok(total)
    }

    /// Recomputes freshness = importance * rate ^ days since the last access (or creation).
    pub(crate) async fn decay(&self, owner: &Owner, now: DateTime<Utc>) -> Result<u64, ApiError> {
        let mut offset = 0;
        let mut total = 0;
        loop {
            let memories = self
                .store
                .list_memories(&MemoryQuery {
                    order: MemoryOrder::Oldest,
                    limit: 500,
                    offset,
                    ..MemoryQuery::of(MemoryFilter::user(owner))
                })
                .await?;
            if memories.is_empty() {
                break;
            }
            offset += memories.len();
            let mut batch = WriteBatch::default();
            for memory in &memories {
                let since = memory.last_accessed_at.unwrap_or(memory.created_at);
                let days = (now - since).num_seconds().max(0) as f64 / 86_400.0;
                let target = (f64::from(memory.importance) * self.config.decay_rate.powf(days)).max(0.1);
                // Reads raise freshness above the formula until it decays below it again.
                let next = target.min(memory.freshness);
                if (memory.freshness - next).abs() < 0.05 {
                    continue;
                }
                let mut updated = memory.clone();
                updated.freshness = (next * 100.0).round() / 100.0;
                updated.updated_at = now;
                batch.changes.push(Change {
                    id: new_id(IdKind::Change),
                    tenant_id: owner.tenant_id.clone(),
                    user_id: owner.user_id.clone(),
                    memory_id: memory.id.clone(),
                    kind: ChangeKind::Decay,
                    actor: "system:decay".into(),
                    reason: format!(
                        "freshness {:.2} -> {:.2} after {days:.0} days without access",
                        memory.freshness, updated.freshness
                    ),
                    before: Some(format!("{{\"freshness\":{}}}", memory.freshness)),
                    after: Some(format!("{{\"freshness\":{}}}", updated.freshness)),
                    at: now,
                });
                batch.updates.push(updated);
            }
            let changed = batch.updates.len() as u64;
            match self.store.commit(batch).await {
                Ok(()) => total += changed,
                Err(StoreError::Conflict(_)) => {
                    tracing::debug!(%owner, "a memory changed during the decay sweep; it decays next time");
                }
                Err(err) => return Err(err.into()),
            }
            if memories.len() < 500 {
                break;
            }
        }
        if total > 0 {
            thinkus_common::metrics::METRICS
                .sweep_changes
                .with_label_values(&["decay"])
                .inc_by(total);
        }
        Ok(total)
    }

    /// Makes the index agree with the store for one user: indexes what is missing, removes
    /// what should not be there.
    pub async fn reconcile(&self, owner: &Owner) -> Result<u64, ApiError> {
        let indexed: HashSet<String> = self.vectors.list_ids(owner).await?.into_iter().collect();
        let mut stored = HashSet::new();
        let mut missing = Vec::new();
        let mut offset = 0;
        loop {
            let page = self
                .store
                .list_memories(&MemoryQuery {
                    order: MemoryOrder::Oldest,
                    limit: 1000,
                    offset,
                    ..MemoryQuery::of(MemoryFilter::any_status(owner))
                })
                .await?;
            if page.is_empty() {
                break;
            }
            offset += page.len();
            for memory in page {
                stored.insert(memory.id.clone());
                if !indexed.contains(&memory.id) {
                    missing.push(memory);
                }
            }
        }
        let extra: Vec<String> = indexed.difference(&stored).cloned().collect();
        let repaired = missing.len() as u64 + extra.len() as u64;
        for chunk in missing.chunks(64) {
            let texts: Vec<String> = chunk.iter().map(Self::index_text).collect();
            let vectors = self.embedder.embed_passages(&texts).await?;
            let points = chunk
                .iter()
                .zip(vectors)
                .map(|(memory, dense)| self.point(memory, dense))
                .collect();
            self.vectors.upsert(points).await?;
        }
        if !extra.is_empty() {
            self.vectors.delete(&extra).await?;
        }
        Ok(repaired)
    }

    /// Reconciles the index of every user; returns how many points were repaired.
    pub async fn reconcile_all(&self) -> Result<u64, ApiError> {
        let mut repaired = 0;
        for user in self.store.list_users().await? {
            repaired += self.reconcile(&user).await?;
        }
        if repaired > 0 {
            self.vectors.flush().await?;
        }
        Ok(repaired)
    }

    pub(crate) async fn users(&self, owners: Owners) -> Result<Vec<Owner>, ApiError> {
        match owners {
            Owners::One(owner) => Ok(vec![owner]),
            Owners::Tenant(tenant) => Ok(self
                .store
                .list_users()
                .await?
                .into_iter()
                .filter(|owner| owner.tenant_id == tenant)
                .collect()),
            Owners::All => Ok(self.store.list_users().await?),
        }
    }
}

fn duplicate(stored: &str) -> Result<WriteResult, ApiError> {
    let mut result: WriteResult =
        serde_json::from_str(stored).map_err(|err| ApiError::internal(format!("unreadable stored response: {err}")))?;
    result.outcome = WriteOutcome::DuplicateRequest;
    Ok(result)
}

pub(crate) fn request_key(operation: &str, request_id: &Option<String>) -> Result<Option<String>, ApiError> {
    match request_id {
        Some(id) if id.chars().count() > 128 => Err(ApiError::invalid("request_id", "longer than 128 characters")),
        Some(id) if !id.is_empty() => Ok(Some(format!("{operation}:{id}"))),
        _ => Ok(None),
    }
}
