//! The retriever: hybrid search (dense embeddings and BM25, fused), filtered by scope and
//! metadata, ranked by relevance, importance and freshness, packed into a token budget.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_backends::embed::{Embedder, normalize};
use thinkus_backends::sql::{MemoryOrder, MemoryQuery, MemoryStore};
use thinkus_backends::vector::{Bm25Encoder, MemoryFilter, Reader, VectorHit, VectorIndex};
use thinkus_common::ApiError;
use thinkus_common::model::{Language, Memory, MemoryStatus, MemoryType, Owner, QueryEmbedding, RetrievalMode};
use thinkus_common::text::detect_language;
use thinkus_common::time::relative;
use thinkus_common::tokens::TokenCounter;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::access::AccessRecorder;
use crate::api::{
    CatalogEntry, DetailsRequest, DetailsResult, MemoryDetails, RecallRequest, RecallResult, RetrieverApi, ScoreParts,
};
use crate::config::RetrieverConfig;
use crate::rank::{Evidence, final_score, fuse};
use crate::render::{Packer, catalog_heading, catalog_line, catalog_text, details_block, details_heading};

/// The retriever and its backends.
pub struct Retriever {
    config: RetrieverConfig,
    store: Arc<dyn MemoryStore>,
    vectors: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    bm25: Bm25Encoder,
    tokens: TokenCounter,
    /// Whether a query embedding from another model was already logged (once per process).
    foreign_model_logged: AtomicBool,
    access: AccessRecorder,
}

/// A memory with its evidence and final score.
#[derive(Debug, Clone)]
struct Ranked {
    memory: Memory,
    parts: ScoreParts,
}

impl Retriever {
    pub fn new(
        config: RetrieverConfig,
        store: Arc<dyn MemoryStore>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        tokens: TokenCounter,
    ) -> Self {
        Self {
            access: AccessRecorder::new(store.clone(), config.access_boost, config.freshness_cap),
            config,
            store,
            vectors,
            embedder,
            bm25: Bm25Encoder::default(),
            tokens,
            foreign_model_logged: AtomicBool::new(false),
        }
    }

    /// Writes the access statistics of recalls off their path until `shutdown`, then what is
    /// left (see [`crate::access`]). Without it, each recall writes its own before it answers.
    pub async fn record_accesses(&self, shutdown: CancellationToken) {
        self.access.run(shutdown).await;
    }

    pub fn config(&self) -> &RetrieverConfig {
        &self.config
    }

    fn filter(&self, request: &RecallRequest, now: DateTime<Utc>) -> MemoryFilter {
        let (from, to) = request.time_range.map(|r| r.bounds(now)).unwrap_or((None, None));
        MemoryFilter {
            tenant_id: request.scope.tenant_id.clone(),
            user_id: request.scope.user_id.clone(),
            reader: Some(Reader {
                role_id: request.scope.role_id.clone(),
                project_id: request.scope.project_id.clone(),
                layers: request.layers,
            }),
            types: request.types.clone(),
            statuses: if request.statuses.is_empty() {
                vec![MemoryStatus::Active]
            } else {
                request.statuses.clone()
            },
            visibilities: request.visibilities.clone(),
            session_id: if request.session_only {
                request.scope.session_id.clone()
            } else {
                None
            },
            occurred_from_ms: from.map(|t| t.timestamp_millis()),
            occurred_to_ms: to.map(|t| t.timestamp_millis()),
            tags: request.tags.clone(),
        }
    }

    fn validate(&self, request: &RecallRequest) -> Result<(), ApiError> {
        if request.query.len() > self.config.max_query_bytes {
            return Err(ApiError::invalid(
                "query",
                format!("longer than {} bytes", self.config.max_query_bytes),
            ));
        }
        if let Some(budget) = request.budget_tokens
            && (budget == 0 || budget > self.config.max_budget_tokens)
        {
            return Err(ApiError::invalid(
                "budget_tokens",
                format!("must be 1-{}, got {budget}", self.config.max_budget_tokens),
            ));
        }
        if let Some(limit) = request.limit
            && (limit == 0 || limit > 200)
        {
            return Err(ApiError::invalid("limit", format!("must be 1-200, got {limit}")));
        }
        if let Some(details) = request.details_limit
            && (details == 0 || details > 50)
        {
            return Err(ApiError::invalid(
                "details_limit",
                format!("must be 1-50, got {details}"),
            ));
        }
        let narrowed = !request.types.is_empty()
            || request.time_range.is_some()
            || !request.tags.is_empty()
            || request.session_only
            || !request.visibilities.is_empty();
        if request.query.trim().is_empty() && !narrowed {
            return Err(ApiError::invalid(
                "query",
                "is empty and no filter (types, time range, tags, session) narrows the recall",
            ));
        }
        if request.session_only && request.scope.session_id.is_none() {
            return Err(ApiError::invalid("scope.session_id", "is required with session_only"));
        }
        if let Some(embedding) = &request.query_embedding {
            if request.query.trim().is_empty() {
                return Err(ApiError::invalid("query_embedding", "is given without a query"));
            }
            let dim = self.embedder.dim();
            if embedding.model == self.embedder.name() && embedding.values.len() != dim {
                return Err(ApiError::invalid(
                    "query_embedding.values",
                    format!(
                        "{} values, the model {} has {dim} dimensions",
                        embedding.values.len(),
                        embedding.model
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The query's vector: the caller's when it came from this retriever's model (scaled to
    /// unit length, as the index's are), else embedded here.
    async fn query_vector(&self, query: &str, given: Option<&QueryEmbedding>) -> Result<Vec<f32>, ApiError> {
        let model = self.embedder.name();
        if let Some(given) = given {
            if given.model == model {
                let mut values = given.values.clone();
                normalize(&mut values);
                return Ok(values);
            }
            // A deployment whose gateway and retriever are configured with different models
            // still answers right, at the cost of a second embedding: said once, not per call.
            if !self.foreign_model_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    given = %given.model,
                    own = %model,
                    "a query embedding from another model was ignored and the query embedded again (check embedder.uri)"
                );
            }
        }
        Ok(self
            .embedder
            .embed_query(query)
            .instrument(tracing::info_span!("embed.query", embedder = %model))
            .await?)
    }

    /// Hybrid search: both rankings, fused, joined with the stored memories, scored.
    ///
    /// A query embedded here spends most of the recall in the embedding: the keyword search and
    /// the read of its hits run meanwhile, and only what the dense search alone found is read
    /// after it. A query that comes with its vector (the gateway's) is read in one go.
    async fn search(
        &self,
        query: &str,
        embedding: Option<&QueryEmbedding>,
        filter: &MemoryFilter,
    ) -> Result<(Vec<Ranked>, u32), ApiError> {
        let k = self.config.candidates.max(1);
        let owner = filter.owner();
        let embeds_here = embedding.is_none_or(|given| given.model != self.embedder.name());
        let sparse = self.bm25.query(query);
        let dense_search = async {
            let dense = self.query_vector(query, embedding).await?;
            let hits = self
                .vectors
                .search_dense(&dense, filter, k)
                .instrument(self.search_span("dense"))
                .await?;
            Ok::<_, ApiError>(hits)
        };
        let keyword_search = async {
            if sparse.is_empty() {
                return Ok((Vec::new(), Vec::new()));
            }
            let hits = self
                .vectors
                .search_sparse(&sparse, filter, k)
                .instrument(self.search_span("bm25"))
                .await?;
            let read = if embeds_here {
                let ids: Vec<String> = hits.iter().map(|h| h.id.clone()).collect();
                self.store.get_memories(&owner, &ids).await?
            } else {
                Vec::new()
            };
            Ok::<_, ApiError>((hits, read))
        };
        let (dense_hits, (keyword_hits, read)) = futures::try_join!(dense_search, keyword_search)?;
        let evidence = fuse(&dense_hits, &keyword_hits, &self.config.ranking.for_query(query));
        let candidates = evidence.len() as u32;
        let ids = ordered_ids(&dense_hits, &keyword_hits);
        let memories = self.read_candidates(&owner, &ids, read).await?;
        let ranked = self.score(memories, &evidence, filter, query);
        Ok((ranked, candidates))
    }

    /// The span of one ranking's search of the index.
    fn search_span(&self, kind: &'static str) -> tracing::Span {
        tracing::info_span!("vector.search", kind, index = self.vectors.name())
    }

    /// The stored memories of `ids`, in their order; those in `read` are not read again.
    async fn read_candidates(&self, owner: &Owner, ids: &[String], read: Vec<Memory>) -> Result<Vec<Memory>, ApiError> {
        let mut found: HashMap<String, Memory> = read.into_iter().map(|m| (m.id.clone(), m)).collect();
        let missing: Vec<String> = ids.iter().filter(|id| !found.contains_key(*id)).cloned().collect();
        found.extend(
            self.store
                .get_memories(owner, &missing)
                .await?
                .into_iter()
                .map(|m| (m.id.clone(), m)),
        );
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    /// Without a query: the newest memories that pass the filters, by importance and freshness.
    async fn browse(&self, filter: &MemoryFilter, limit: usize) -> Result<(Vec<Ranked>, u32), ApiError> {
        let query = MemoryQuery {
            order: MemoryOrder::Newest,
            limit,
            ..MemoryQuery::of(filter.clone())
        };
        let memories: Vec<Memory> = self.store.list_memories(&query).await?;
        let count = memories.len() as u32;
        // Recency stands in for relevance: the newest scores 1, the oldest of the page 0.5.
        let total = memories.len().max(1) as f64;
        let evidence: HashMap<String, Evidence> = memories
            .iter()
            .enumerate()
            .map(|(i, m)| {
                (
                    m.id.clone(),
                    Evidence {
                        relevance: 1.0 - 0.5 * i as f64 / total,
                        ..Default::default()
                    },
                )
            })
            .collect();
        Ok((self.score(memories, &evidence, filter, ""), count))
    }

    fn score(
        &self,
        memories: Vec<Memory>,
        evidence: &HashMap<String, Evidence>,
        filter: &MemoryFilter,
        query: &str,
    ) -> Vec<Ranked> {
        let ranking = &self.config.ranking;
        let query_lower = query.to_lowercase();
        let memories: Vec<(Memory, &Evidence, f64)> = memories
            .into_iter()
            // The index is updated with the store, but a memory corrected between the search
            // and this read must not slip through.
            .filter(|m| filter.matches_memory(m))
            .filter_map(|memory| {
                let e = evidence.get(&memory.id)?;
                Some((memory, e, e.relevance))
            })
            .collect();
        let inherited = neighbour_relevance(&memories, ranking.neighbor);
        let memories: Vec<(Memory, &Evidence, f64)> = memories
            .into_iter()
            .zip(inherited)
            .map(|((memory, e, relevance), inherited)| (memory, e, relevance + inherited))
            .collect();
        let from_session = session_relevance(&memories, ranking.session);
        let mut ranked: Vec<Ranked> = memories
            .into_iter()
            .zip(from_session)
            .map(|((memory, e, relevance), from_session)| {
                // Who said it counts after the shares: the turns around a named speaker's turn
                // are the other person's, and must not inherit the boost.
                let named = ranking.speaker > 0.0
                    && memory
                        .speaker
                        .as_deref()
                        .is_some_and(|speaker| names_speaker(&query_lower, speaker));
                let relevance = relevance + from_session + if named { ranking.speaker } else { 0.0 };
                let score = final_score(relevance, memory.importance, memory.freshness, ranking);
                let layer = if memory.scope.project_id.is_some() {
                    "project"
                } else {
                    "cross_project"
                };
                Ranked {
                    parts: ScoreParts {
                        score,
                        relevance,
                        dense_similarity: e.dense_similarity,
                        keyword_score: e.keyword_score,
                        dense_rank: e.dense_rank,
                        keyword_rank: e.keyword_rank,
                        importance: f64::from(memory.importance) / 5.0,
                        freshness: (memory.freshness / 5.0).clamp(0.0, 1.0),
                        layer,
                    },
                    memory,
                }
            })
            .collect();
        ranked.sort_by(|a, b| {
            b.parts
                .score
                .total_cmp(&a.parts.score)
                .then_with(|| b.memory.occurred_at.cmp(&a.memory.occurred_at))
        });
        ranked
    }

    /// Summaries of the related decisions of memories, by id; those among the memories the
    /// call read already (`read`) are not read again.
    async fn related_decisions(
        &self,
        owner: &Owner,
        memories: &[&Memory],
        read: &[&Memory],
    ) -> HashMap<String, String> {
        let mut decisions = HashMap::new();
        let mut ids: Vec<String> = Vec::new();
        for id in memories.iter().flat_map(|m| m.related_decision_ids.iter()) {
            match read.iter().find(|m| &m.id == id) {
                Some(known) => {
                    decisions.insert(id.clone(), known.summary.clone());
                }
                None => ids.push(id.clone()),
            }
        }
        if ids.is_empty() {
            return decisions;
        }
        match self.store.get_memories(owner, &ids).await {
            Ok(found) => decisions.extend(found.into_iter().map(|m| (m.id, m.summary))),
            // The recall answers without them; those it had read already stay.
            Err(err) => tracing::warn!(%err, "related decisions could not be read"),
        }
        decisions
    }

    fn details_of(
        &self,
        memory: &Memory,
        decisions: &HashMap<String, String>,
        now: DateTime<Utc>,
        language: Language,
        tokens: u32,
    ) -> MemoryDetails {
        MemoryDetails {
            id: memory.id.clone(),
            summary: memory.summary.clone(),
            content: memory.content.clone(),
            context: memory.context.clone(),
            decisions: memory
                .related_decision_ids
                .iter()
                .filter_map(|id| decisions.get(id).cloned())
                .collect(),
            refs: memory.artifact_refs.clone(),
            memory_type: memory.memory_type,
            importance: memory.importance,
            confidence: memory.confidence,
            occurred_at: memory.occurred_at,
            relative_time: relative(memory.occurred_at, now, language),
            tokens,
            tags: memory.tags.clone(),
            speaker: memory.speaker.clone(),
            freshness: memory.freshness,
            status: memory.status,
            superseded_by: memory.superseded_by.clone(),
        }
    }

    /// Marks the memories shown in detail read, and gives each the freshness the access brings.
    async fn touch(&self, owner: &Owner, details: &mut [MemoryDetails], now: DateTime<Utc>) {
        if details.is_empty() {
            return;
        }
        for d in details.iter_mut() {
            d.freshness = self.access.boosted(d.freshness);
        }
        let ids = details.iter().map(|d| d.id.clone()).collect();
        self.access.record(owner, ids, now).await;
    }
}

/// What each candidate inherits from its neighbours: `share` of the relevance of the best of
/// the conversation turns just before and just after it, when they are candidates too. A turn
/// stores the line of the turn before it as its context, which is how neighbours are
/// recognised without another read.
fn neighbour_relevance(candidates: &[(Memory, &Evidence, f64)], share: f64) -> Vec<f64> {
    let mut inherited = vec![0.0; candidates.len()];
    if share <= 0.0 {
        return inherited;
    }
    let is_turn = |m: &Memory| m.memory_type == MemoryType::ConversationTurn && m.scope.session_id.is_some();
    // (session, line of a turn) -> index, for the turn before; (session, context) -> index,
    // for the turn after.
    let mut by_line: HashMap<(&str, String), usize> = HashMap::new();
    let mut by_context: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, (memory, _, _)) in candidates.iter().enumerate() {
        if !is_turn(memory) {
            continue;
        }
        let session = memory.scope.session_id.as_deref().unwrap_or_default();
        by_line.insert((session, memory.turn_line()), i);
        if !memory.context.is_empty() {
            by_context.insert((session, memory.context.as_str()), i);
        }
    }
    for (i, (memory, _, _)) in candidates.iter().enumerate() {
        if !is_turn(memory) {
            continue;
        }
        let session = memory.scope.session_id.as_deref().unwrap_or_default();
        let before = by_line
            .get(&(session, memory.context.clone()))
            .filter(|&&j| j != i)
            .map(|&j| candidates[j].2);
        let line = memory.turn_line();
        let after = by_context
            .get(&(session, line.as_str()))
            .filter(|&&j| j != i)
            .map(|&j| candidates[j].2);
        let best = before.unwrap_or(0.0).max(after.unwrap_or(0.0));
        inherited[i] = share * best;
    }
    inherited
}

/// Whether a lowercased query names a speaker: the speaker's first name, lowercased, stands in
/// it as a word ("Caroline's" names Caroline, "Al" is not in "also"). A name in ideographs is
/// looked for anywhere, since Chinese has no spaces between words.
fn names_speaker(query_lower: &str, speaker: &str) -> bool {
    let first = speaker.split_whitespace().next().unwrap_or_default().to_lowercase();
    if first.is_empty() {
        return false;
    }
    // A letter or digit of a spaced script; ideographs need no boundary.
    let spaced = |c: char| c.is_alphanumeric() && !thinkus_common::text::is_han(c);
    query_lower.match_indices(first.as_str()).any(|(at, _)| {
        let before = query_lower[..at].chars().next_back();
        let after = query_lower[at + first.len()..].chars().next();
        // Inside a longer word: "jon" in "jonathan", "al" in "also".
        let glued_before = before.is_some_and(spaced) && first.starts_with(spaced);
        let glued_after = after.is_some_and(spaced) && first.ends_with(spaced);
        !(glued_before || glued_after)
    })
}

/// How many of a session's best candidates make its relevance.
const SESSION_BEST: usize = 3;

/// What each candidate gains from its session: `share` of the mean relevance of the session's
/// best [`SESSION_BEST`] candidates. Memories without a session gain nothing.
fn session_relevance(candidates: &[(Memory, &Evidence, f64)], share: f64) -> Vec<f64> {
    let mut gained = vec![0.0; candidates.len()];
    if share <= 0.0 {
        return gained;
    }
    let mut by_session: HashMap<&str, Vec<f64>> = HashMap::new();
    for (memory, _, relevance) in candidates {
        if let Some(session) = memory.scope.session_id.as_deref() {
            by_session.entry(session).or_default().push(*relevance);
        }
    }
    let session_score: HashMap<&str, f64> = by_session
        .into_iter()
        .map(|(session, mut scores)| {
            scores.sort_by(|a, b| b.total_cmp(a));
            scores.truncate(SESSION_BEST);
            let mean = scores.iter().sum::<f64>() / scores.len() as f64;
            (session, mean)
        })
        .collect();
    for (i, (memory, _, _)) in candidates.iter().enumerate() {
        if let Some(score) = memory.scope.session_id.as_deref().and_then(|s| session_score.get(s)) {
            gained[i] = share * score;
        }
    }
    gained
}

/// Ids in a stable order: dense hits first, then keyword-only hits.
fn ordered_ids(dense: &[VectorHit], keyword: &[VectorHit]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    dense
        .iter()
        .chain(keyword)
        .filter(|h| seen.insert(h.id.clone()))
        .map(|h| h.id.clone())
        .collect()
}

#[async_trait]
impl RetrieverApi for Retriever {
    async fn recall(&self, request: RecallRequest) -> Result<RecallResult, ApiError> {
        self.validate(&request)?;
        let now = request.now.unwrap_or_else(Utc::now);
        let language = request.language.unwrap_or_else(|| detect_language(&request.query));
        let budget = request.budget_tokens.unwrap_or(self.config.default_budget_tokens) as usize;
        let filter = self.filter(&request, now);
        let (ranked, candidates) = if request.query.trim().is_empty() {
            self.browse(&filter, request.limit.unwrap_or(200).max(50)).await?
        } else {
            self.search(&request.query, request.query_embedding.as_ref(), &filter)
                .await?
        };
        let limit = request.limit.unwrap_or(usize::MAX);

        let mut packer = Packer::new(&self.tokens, budget);
        let mut catalog = Vec::new();
        let mut details = Vec::new();
        let mut omitted = 0u32;
        let details_limit = match request.mode {
            RetrievalMode::Details => request.details_limit.unwrap_or(self.config.default_details),
            RetrievalMode::Catalog => 0,
        };
        let expanded: Vec<&Memory> = ranked.iter().take(details_limit).map(|r| &r.memory).collect();
        let read: Vec<&Memory> = ranked.iter().map(|r| &r.memory).collect();
        let decisions = self.related_decisions(&filter.owner(), &expanded, &read).await;

        // Details of the best entries first (they answer), then catalog lines for the rest
        // (they let the caller ask for more).
        let mut detailed = vec![false; ranked.len()];
        for (i, item) in ranked.iter().enumerate().take(details_limit.min(limit)) {
            let memory = &item.memory;
            let block = details_block(
                i + 1,
                memory,
                &relative(memory.occurred_at, now, language),
                &memory
                    .related_decision_ids
                    .iter()
                    .filter_map(|id| decisions.get(id).cloned())
                    .collect::<Vec<_>>(),
                language,
            );
            let cost = if details.is_empty() {
                packer.try_push_with_heading(details_heading(language), &block)
            } else {
                packer.try_push(&block)
            };
            let Some(cost) = cost else { break };
            detailed[i] = true;
            details.push(self.details_of(memory, &decisions, now, language, cost as u32));
        }
        let mut catalog_started = false;
        let query_terms = thinkus_common::text::term_set(&request.query);
        for (i, item) in ranked.iter().enumerate() {
            if catalog.len() >= limit {
                omitted += 1;
                continue;
            }
            let memory = &item.memory;
            let relative_time = relative(memory.occurred_at, now, language);
            let text = catalog_text(memory, &query_terms);
            let tokens = if detailed[i] {
                0
            } else {
                let line = catalog_line(i + 1, memory, &text, &relative_time, language);
                let cost = if catalog_started {
                    packer.try_push(&line)
                } else {
                    packer.try_push_with_heading(catalog_heading(language), &line)
                };
                match cost {
                    Some(cost) => {
                        catalog_started = true;
                        cost as u32
                    }
                    None => {
                        omitted += 1;
                        continue;
                    }
                }
            };
            catalog.push(CatalogEntry {
                id: memory.id.clone(),
                summary: text,
                memory_type: memory.memory_type,
                importance: memory.importance,
                occurred_at: memory.occurred_at,
                relative_time,
                tags: memory.tags.clone(),
                score: item.parts.clone(),
                tokens,
                speaker: memory.speaker.clone(),
                confidence: memory.confidence,
                role_id: memory.scope.role_id.clone(),
                status: memory.status,
            });
        }
        let (rendered, tokens_used) = packer.finish();

        self.touch(&filter.owner(), &mut details, now).await;
        tracing::debug!(
            user_id = %request.scope.user_id,
            candidates,
            returned = catalog.len(),
            tokens_used,
            "recall"
        );
        Ok(RecallResult {
            mode: request.mode,
            catalog,
            details,
            tokens_used: tokens_used as u32,
            budget_tokens: budget as u32,
            candidates,
            omitted_for_budget: omitted,
            tokenizer: self.tokens.encoding_name().to_string(),
            rendered,
        })
    }

    async fn get_details(&self, request: DetailsRequest) -> Result<DetailsResult, ApiError> {
        if request.ids.is_empty() || request.ids.len() > 100 {
            return Err(ApiError::invalid("ids", "must hold 1-100 memory ids"));
        }
        for (i, id) in request.ids.iter().enumerate() {
            thinkus_common::ids::check_id(thinkus_common::ids::IdKind::Memory, &format!("ids[{i}]"), id)?;
        }
        if let Some(budget) = request.budget_tokens
            && budget > self.config.max_budget_tokens
        {
            return Err(ApiError::invalid(
                "budget_tokens",
                format!("must be 0-{}, got {budget}", self.config.max_budget_tokens),
            ));
        }
        let now = request.now.unwrap_or_else(Utc::now);
        let reader = MemoryFilter {
            reader: Some(Reader {
                role_id: request.scope.role_id.clone(),
                project_id: request.scope.project_id.clone(),
                layers: Default::default(),
            }),
            statuses: thinkus_common::model::MemoryStatus::ALL.to_vec(),
            ..MemoryFilter::user(&request.scope.owner())
        };
        let memories = self.store.get_memories(&request.scope.owner(), &request.ids).await?;
        let by_id: HashMap<&str, &Memory> = memories.iter().map(|m| (m.id.as_str(), m)).collect();
        // Unknown and invisible ids answer the same: existence does not leak across roles.
        for id in &request.ids {
            match by_id.get(id.as_str()) {
                Some(memory) if reader.matches_memory(memory) => {}
                _ => return Err(ApiError::not_found("memory", id)),
            }
        }
        let ordered: Vec<&Memory> = request
            .ids
            .iter()
            .filter_map(|id| by_id.get(id.as_str()).copied())
            .collect();
        let decisions = self.related_decisions(&request.scope.owner(), &ordered, &ordered).await;
        let budget = request.budget_tokens.map(|b| b as usize).unwrap_or(usize::MAX);
        let mut packer = Packer::new(&self.tokens, budget);
        let mut details = Vec::new();
        let mut omitted = Vec::new();
        for (i, memory) in ordered.iter().enumerate() {
            let language = request.language.unwrap_or(memory.language);
            let decision_texts: Vec<String> = memory
                .related_decision_ids
                .iter()
                .filter_map(|id| decisions.get(id).cloned())
                .collect();
            let block = details_block(
                i + 1,
                memory,
                &relative(memory.occurred_at, now, language),
                &decision_texts,
                language,
            );
            let pushed = if details.is_empty() {
                packer.try_push_with_heading(details_heading(language), &block)
            } else {
                packer.try_push(&block)
            };
            match pushed {
                Some(cost) => details.push(self.details_of(memory, &decisions, now, language, cost as u32)),
                None => omitted.push(memory.id.clone()),
            }
        }
        if !request.skip_access_update {
            self.touch(&request.scope.owner(), &mut details, now).await;
        }
        let (rendered, tokens_used) = packer.finish();
        Ok(DetailsResult {
            details,
            tokens_used: tokens_used as u32,
            omitted_for_budget: omitted,
            rendered,
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use thinkus_common::model::Scope;

    use super::*;

    fn turn(session: &str, speaker: &str, content: &str, previous: Option<&Memory>) -> Memory {
        let at = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
        let scope = Scope::new("u1", "assistant").with_session(session);
        let context = previous.map(Memory::turn_line).unwrap_or_default();
        Memory::conversation_turn(scope, speaker, content.into(), context, at, at)
    }

    #[test]
    fn turns_inherit_from_their_neighbours_only() {
        let question = turn("s1", "Mel", "Which book did you like?", None);
        let answer = turn("s1", "Caroline", "Becoming Nicole, by Amy Ellis Nutt.", Some(&question));
        let later = turn("s1", "Mel", "Nice!", Some(&answer));
        // Same words, other session: not a neighbour.
        let elsewhere = turn("s2", "Caroline", "Becoming Nicole, by Amy Ellis Nutt.", Some(&question));
        let evidence = Evidence::default();
        let candidates = vec![
            (question, &evidence, 0.9),
            (answer, &evidence, 0.1),
            (later, &evidence, 0.0),
            (elsewhere, &evidence, 0.2),
        ];
        let inherited = neighbour_relevance(&candidates, 0.5);
        assert!(
            (inherited[0] - 0.05).abs() < 1e-9,
            "the question inherits from its answer"
        );
        assert!(
            (inherited[1] - 0.45).abs() < 1e-9,
            "the answer inherits from its question"
        );
        assert!((inherited[2] - 0.05).abs() < 1e-9, "from the turn before only");
        assert_eq!(inherited[3], 0.0, "another session is no neighbour");
        assert!(neighbour_relevance(&candidates, 0.0).iter().all(|&v| v == 0.0));
    }

    #[test]
    fn a_speaker_is_named_by_a_whole_word() {
        assert!(names_speaker("what did caroline say?", "Caroline"));
        assert!(names_speaker("what are the names of audrey's dogs?", "Audrey"));
        assert!(names_speaker("when did jon smith call", "Jon Smith"));
        assert!(!names_speaker("what did jonathan say?", "Jon"));
        assert!(!names_speaker("we also agreed", "Al"));
        assert!(names_speaker("小王喜欢什么设计风格", "小王"));
        assert!(names_speaker("what did 小王 say", "小王"));
        assert!(!names_speaker("anything", ""));
    }

    #[test]
    fn a_strong_session_lifts_its_turns() {
        let evidence = Evidence::default();
        let mut loose = turn("s1", "Mel", "unrelated", None);
        loose.scope.session_id = None;
        let candidates = vec![
            (turn("s1", "Mel", "a", None), &evidence, 0.9),
            (turn("s1", "Mel", "b", None), &evidence, 0.6),
            (turn("s1", "Mel", "c", None), &evidence, 0.3),
            (turn("s1", "Mel", "d", None), &evidence, 0.0),
            (turn("s2", "Mel", "e", None), &evidence, 0.2),
            (loose, &evidence, 0.8),
        ];
        let gained = session_relevance(&candidates, 0.5);
        // s1: mean of its best three (0.9, 0.6, 0.3) = 0.6.
        for g in &gained[..4] {
            assert!((g - 0.3).abs() < 1e-9, "{gained:?}");
        }
        assert!((gained[4] - 0.1).abs() < 1e-9, "a session of one: its own relevance");
        assert_eq!(gained[5], 0.0, "no session, nothing gained");
        assert!(session_relevance(&candidates, 0.0).iter().all(|&v| v == 0.0));
    }
}
