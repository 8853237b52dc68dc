//! `thinkus bench locomo`: each conversation of a LoCoMo file becomes one user's history (one
//! memory per turn, dated by its session, image captions included); every question of
//! categories 1-4 is asked as that user; the ranked turns are scored against the evidence
//! turns: R@1, R@5, R@10 and nDCG@10 per category and overall, and the recall latency.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use thinkus_common::model::{RetrievalMode, Scope, Visibility};
use thinkus_knowledge_manager::KnowledgeManager;
use thinkus_knowledge_manager::api::{IngestTurnsRequest, KnowledgeApi, Turn};
use thinkus_retriever::Retriever;
use thinkus_retriever::api::{RecallRequest, RetrieverApi};

use super::locomo_data::{self, Sample};
use super::stats::{ndcg_at, percentile_ms, recall_at};
use super::{say, state_dir};
use crate::config::Config;
use crate::services::ServiceKind;

const CATEGORY_NAMES: [(u32, &str); 4] = [(1, "multi-hop"), (2, "temporal"), (3, "open-domain"), (4, "single-hop")];

#[derive(Debug, Default, Clone)]
struct Tally {
    n: usize,
    r1: f64,
    r5: f64,
    r10: f64,
    ndcg10: f64,
}

impl Tally {
    fn add(&mut self, ranked: &[String], evidence: &[String]) {
        self.n += 1;
        self.r1 += recall_at(ranked, evidence, 1);
        self.r5 += recall_at(ranked, evidence, 5);
        self.r10 += recall_at(ranked, evidence, 10);
        self.ndcg10 += ndcg_at(ranked, evidence, 10);
    }

    fn mean(&self, sum: f64) -> f64 {
        if self.n == 0 { 0.0 } else { sum / self.n as f64 }
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "r1": round(self.mean(self.r1)),
            "r5": round(self.mean(self.r5)),
            "r10": round(self.mean(self.r10)),
            "ndcg10": round(self.mean(self.ndcg10)),
            "n": self.n,
        })
    }
}

fn round(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

/// The user a sample's history belongs to.
fn user_of(sample: &Sample) -> String {
    format!("locomo-{}", sample.id)
}

/// The dialogue ids of the turns recalled for a question, best first (the top 50).
async fn ranked_turns(
    retriever: &Retriever,
    user: &str,
    question: &str,
    now: chrono::DateTime<chrono::Utc>,
    dia_of: &HashMap<String, String>,
) -> anyhow::Result<Vec<String>> {
    let result = retriever
        .recall(RecallRequest {
            scope: Scope::new(user, "assistant"),
            query: question.to_string(),
            mode: RetrievalMode::Catalog,
            budget_tokens: Some(32_000),
            limit: Some(50),
            now: Some(now),
            ..Default::default()
        })
        .await?;
    Ok(result
        .catalog
        .iter()
        .filter_map(|e| dia_of.get(&e.id).cloned())
        .collect())
}

pub async fn run(
    mut config: Config,
    data: &Path,
    data_dir: Option<PathBuf>,
    limit: Option<usize>,
    verbose: bool,
    weights: &[String],
) -> anyhow::Result<()> {
    let weights = weights
        .iter()
        .map(|pair| {
            let (dense, keyword) = pair
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("--weights: {pair:?} is not dense:keyword"))?;
            Ok((dense.trim().parse::<f64>()?, keyword.trim().parse::<f64>()?))
        })
        .collect::<anyhow::Result<Vec<(f64, f64)>>>()?;
    let mut samples = locomo_data::load(data)?;
    if let Some(limit) = limit {
        samples.truncate(limit);
    }
    let (dir, _temp) = state_dir(data_dir)?;
    config.server.data_dir = dir.clone();
    let services = [ServiceKind::KnowledgeManager, ServiceKind::Retriever]
        .into_iter()
        .collect();
    let backends = crate::node::open_backends(&config, &services).await?;
    let store = backends.store.clone().ok_or_else(|| anyhow::anyhow!("no database"))?;
    let vectors = backends
        .vectors
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no vector index"))?;
    let embedder = backends
        .embedder
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no embedder"))?;
    let km = Arc::new(KnowledgeManager::new(
        config.knowledge.clone(),
        store.clone(),
        vectors.clone(),
        embedder.clone(),
        backends.rules.clone(),
        None,
    ));
    let retriever = Retriever::new(
        config.retriever.clone(),
        store.clone(),
        vectors.clone(),
        embedder.clone(),
        backends.tokens,
    );
    say(format!(
        "locomo: {} conversations from {} (state in {}, embedder {})",
        samples.len(),
        data.display(),
        dir.display(),
        embedder.name()
    ));

    // Ingest: one user per conversation, one session per LoCoMo session.
    let started = Instant::now();
    let mut dia_of: HashMap<String, String> = HashMap::new();
    let mut turn_count = 0;
    let sessions = samples.iter().map(|s| s.sessions.len() as u64).sum();
    let progress = crate::progress::Progress::new("ingest sessions", Some(sessions));
    for sample in &samples {
        let user = user_of(sample);
        for session in &sample.sessions {
            progress.inc(1);
            if session.turns.is_empty() {
                continue;
            }
            let scope = Scope::new(&user, "assistant").with_session(format!("session_{}", session.number));
            let turns: Vec<Turn> = session
                .turns
                .iter()
                .map(|t| Turn {
                    speaker: t.speaker.clone(),
                    text: t.text.clone(),
                    occurred_at: Some(t.at),
                    external_id: Some(t.dia_id.clone()),
                    caption: t.caption.clone(),
                    ..Default::default()
                })
                .collect();
            let result = km
                .ingest_turns(IngestTurnsRequest {
                    scope,
                    turns,
                    visibility: Visibility::Private,
                    job_id: None,
                })
                .await?;
            for (turn, id) in session.turns.iter().zip(&result.memory_ids) {
                dia_of.insert(id.clone(), turn.dia_id.clone());
            }
            turn_count += session.turns.len();
        }
    }
    progress.finish();
    let ingest_time = started.elapsed();
    say(format!(
        "ingested {turn_count} turns in {:.1}s ({:.0} turns/s)",
        ingest_time.as_secs_f64(),
        turn_count as f64 / ingest_time.as_secs_f64().max(1e-9)
    ));

    // Ask.
    let mut overall = Tally::default();
    let mut per_category: BTreeMap<u32, Tally> = BTreeMap::new();
    let mut latencies: Vec<Duration> = Vec::new();
    let progress = crate::progress::Progress::new("questions", Some(samples.len() as u64));
    for sample in &samples {
        progress.inc(1);
        let user = user_of(sample);
        let now = sample.sessions.last().map(|s| s.date).unwrap_or_default() + chrono::Duration::days(1);
        for question in sample
            .questions
            .iter()
            .filter(|q| (1..=4).contains(&q.category) && !q.evidence.is_empty())
        {
            let started = Instant::now();
            let ranked = ranked_turns(&retriever, &user, &question.question, now, &dia_of).await?;
            latencies.push(started.elapsed());
            overall.add(&ranked, &question.evidence);
            per_category
                .entry(question.category)
                .or_default()
                .add(&ranked, &question.evidence);
            if verbose && recall_at(&ranked, &question.evidence, 10) < 1.0 {
                say(format!(
                    "miss [{}] {} | evidence {:?} | top {:?}",
                    question.category,
                    question.question,
                    question.evidence,
                    &ranked[..ranked.len().min(10)]
                ));
            }
        }
    }
    progress.finish();

    say(format!(
        "{:<12} {:>5} {:>7} {:>7} {:>7} {:>8}",
        "category", "n", "R@1", "R@5", "R@10", "nDCG@10"
    ));
    let mut categories = serde_json::Map::new();
    for (number, name) in CATEGORY_NAMES {
        let tally = per_category.get(&number).cloned().unwrap_or_default();
        say(format!(
            "{name:<12} {:>5} {:>7.3} {:>7.3} {:>7.3} {:>8.3}",
            tally.n,
            tally.mean(tally.r1),
            tally.mean(tally.r5),
            tally.mean(tally.r10),
            tally.mean(tally.ndcg10)
        ));
        categories.insert(name.to_string(), tally.json());
    }
    say(format!(
        "{:<12} {:>5} {:>7.3} {:>7.3} {:>7.3} {:>8.3}",
        "overall",
        overall.n,
        overall.mean(overall.r1),
        overall.mean(overall.r5),
        overall.mean(overall.r10),
        overall.mean(overall.ndcg10)
    ));
    let p50 = percentile_ms(&latencies, 0.5);
    let p95 = percentile_ms(&latencies, 0.95);
    // The same turns ranked with other fusion weights: R@10 overall and per conversation.
    let mut sweep = Vec::new();
    for &(dense, keyword) in &weights {
        let mut retriever_config = config.retriever.clone();
        retriever_config.ranking.dense_weight = dense;
        retriever_config.ranking.dense_weight_zh = dense;
        retriever_config.ranking.keyword_weight = keyword;
        let retriever = Retriever::new(
            retriever_config,
            store.clone(),
            vectors.clone(),
            embedder.clone(),
            backends.tokens,
        );
        let mut all = Tally::default();
        let mut per_sample = serde_json::Map::new();
        let mut line = String::new();
        for sample in &samples {
            let user = user_of(sample);
            let now = sample.sessions.last().map(|s| s.date).unwrap_or_default() + chrono::Duration::days(1);
            let mut tally = Tally::default();
            for question in sample
                .questions
                .iter()
                .filter(|q| (1..=4).contains(&q.category) && !q.evidence.is_empty())
            {
                let ranked = ranked_turns(&retriever, &user, &question.question, now, &dia_of).await?;
                tally.add(&ranked, &question.evidence);
                all.add(&ranked, &question.evidence);
            }
            line.push_str(&format!(" {} {:.3}", sample.id, tally.mean(tally.r10)));
            per_sample.insert(sample.id.clone(), json!({"r10_sum": tally.r10, "n": tally.n}));
        }
        say(format!(
            "weights dense {dense} / keyword {keyword}: R@10 {:.3}, R@5 {:.3} ({})",
            all.mean(all.r10),
            all.mean(all.r5),
            line.trim()
        ));
        sweep.push(json!({"dense": dense, "keyword": keyword, "r10": round(all.mean(all.r10)), "r5": round(all.mean(all.r5)), "per_sample": per_sample}));
    }
    say(format!(
        "recall latency: p50 {p50:.1} ms, p95 {p95:.1} ms (in process, query embedding included)"
    ));
    say(json!({
        "r1": round(overall.mean(overall.r1)),
        "r5": round(overall.mean(overall.r5)),
        "r10": round(overall.mean(overall.r10)),
        "ndcg10": round(overall.mean(overall.ndcg10)),
        "per_category": categories,
        "p50_ms": round(p50),
        "p95_ms": round(p95),
        "n": overall.n,
        "weights": sweep,
    })
    .to_string());
    Ok(())
}
