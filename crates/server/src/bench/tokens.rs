//! `thinkus bench tokens`: the gateway end to end on a LoCoMo file. Each conversation is
//! replayed through `CompleteTurn` turn by turn (one user per conversation, one session per
//! LoCoMo session, the turn's date as its time, "Speaker: text" as the message); once the queue
//! has drained, every question of categories 1-4 goes through `PrepareTurn` with the default
//! budget. Printed: the context's tokens (median, p95) against the full history's, the share of
//! questions whose evidence turns are all in the context (and the share with at least one), the
//! same with a turn's stand-in memories counting for it (a turn gives way in a context to the
//! memories learned from it when they hold what it says), and PrepareTurn's latency through gRPC.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use thinkus_backends::sql::JobStatus;
use thinkus_backends::sql::MemoryStore;
use thinkus_common::model::Scope;
use thinkus_common::model::{DEFAULT_TENANT, Owner};
use thinkus_common::tokens::TokenCounter;
use thinkus_gateway::api::{CompleteRequest, JobsRequest, PrepareRequest, TraceKind};
use thinkus_gateway::{GatewayApi, GatewayGrpcClient};
use tokio_util::sync::CancellationToken;

use super::locomo_data;
use super::stats::{median, percentile_ms, quantile};
use super::{say, state_dir};
use crate::config::Config;
use crate::services::ServiceKind;

/// The LoCoMo dialogue id ("D3:5") of a stored turn, read once per memory.
async fn dialogue_id(
    store: &dyn MemoryStore,
    user: &str,
    memory_id: &str,
    known: &mut HashMap<String, Option<String>>,
) -> anyhow::Result<Option<String>> {
    if let Some(dia) = known.get(memory_id) {
        return Ok(dia.clone());
    }
    let dia = store
        .get_memory(&Owner::new(DEFAULT_TENANT, user), memory_id)
        .await?
        .and_then(|m| m.external_id)
        .map(|e| e.trim_end_matches(":user").trim_end_matches(":assistant").to_string());
    known.insert(memory_id.to_string(), dia.clone());
    Ok(dia)
}

/// The memories the stored turn of LoCoMo turn `dia` gives way to in a context (its
/// "extracted:" tags: those learned from its exchange that hold what it says), each with
/// whether it was said at the turn's time (learned from it, not an earlier memory it
/// reinforced).
async fn taught_by(
    store: &dyn MemoryStore,
    user: &str,
    dia: &str,
) -> anyhow::Result<Vec<(bool, thinkus_common::model::Memory)>> {
    let owner = Owner::new(DEFAULT_TENANT, user);
    let Some((_, turn)) = store
        .find_external(&owner, &[format!("{dia}:user")])
        .await?
        .into_iter()
        .next()
    else {
        return Ok(Vec::new());
    };
    let Some(turn) = store.get_memory(&owner, &turn).await? else {
        return Ok(Vec::new());
    };
    let ids: Vec<String> = thinkus_knowledge_manager::turns::extracted_ids(&turn.tags)
        .map(str::to_string)
        .collect();
    // Whether each was learned from this exchange (said at its time), not an earlier memory
    // the exchange reinforced.
    let at = turn.occurred_at;
    Ok(store
        .get_memories(&owner, &ids)
        .await?
        .into_iter()
        .map(|m| ((m.occurred_at - at).num_seconds().abs() <= 1, m))
        .collect())
}

fn scope(user: &str, session: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: "assistant".into(),
        session_id: (!session.is_empty()).then(|| session.to_string()),
        ..Default::default()
    }
}

pub async fn run(
    mut config: Config,
    data: &Path,
    data_dir: Option<PathBuf>,
    limit: Option<usize>,
    verbose: bool,
) -> anyhow::Result<()> {
    let mut samples = locomo_data::load(data)?;
    if let Some(limit) = limit {
        samples.truncate(limit);
    }
    let (dir, _temp) = state_dir(data_dir)?;
    config.server.data_dir = dir.clone();
    config.server.metrics_addr = None;
    config.knowledge.decay_interval_hours = 0;
    config.server.tenant_rate_per_second = 0.0;
    config.gateway.poll_interval_ms = 10;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let services = ServiceKind::ALL.iter().copied().collect();
    let shutdown = CancellationToken::new();
    let node = crate::node::start(config, services, listener, None, shutdown.clone()).await?;
    thinkus_common::grpc::wait_serving(&node.url(), ServiceKind::Gateway.grpc_name(), Duration::from_secs(60)).await?;
    let channel = tonic::transport::Endpoint::from_shared(node.url())?.connect().await?;
    let client = GatewayGrpcClient::new(thinkus_common::grpc::client_channel(channel, None), 64 << 20);
    let store = node
        .backends
        .store
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the node opened no database"))?;
    let tokens = TokenCounter::default();
    say(format!(
        "tokens: {} conversations from {} through the gateway (state in {})",
        samples.len(),
        data.display(),
        dir.display()
    ));

    let started = Instant::now();
    let mut full_tokens: HashMap<String, usize> = HashMap::new();
    let mut turns = 0usize;
    for sample in &samples {
        let user = format!("locomo-{}", sample.id);
        let mut history = 0usize;
        for session in &sample.sessions {
            for turn in &session.turns {
                let mut message = format!("{}: {}", turn.speaker, turn.text);
                if let Some(caption) = &turn.caption {
                    message.push_str(&format!(" [shared an image: {caption}]"));
                }
                history += tokens.count(&message) + 1;
                client
                    .complete_turn(CompleteRequest {
                        scope: scope(&user, &format!("session_{}", session.number)),
                        user_message: message,
                        request_id: Some(turn.dia_id.clone()),
                        occurred_at: Some(turn.at),
                        ..Default::default()
                    })
                    .await?;
                turns += 1;
            }
        }
        full_tokens.insert(user, history);
    }
    // Wait for the queue to drain.
    for sample in &samples {
        let user = format!("locomo-{}", sample.id);
        loop {
            let jobs = client
                .list_jobs(JobsRequest {
                    scope: scope(&user, ""),
                    status: Some(JobStatus::Pending),
                    limit: 50,
                    offset: 0,
                })
                .await?;
            if jobs.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let replay = started.elapsed();
    say(format!(
        "replayed {turns} turns through CompleteTurn and drained the queue in {:.1}s",
        replay.as_secs_f64()
    ));

    let mut context_tokens: Vec<f64> = Vec::new();
    let mut history_tokens: Vec<f64> = Vec::new();
    let mut latencies: Vec<Duration> = Vec::new();
    let (mut all_in, mut any_in, mut n) = (0usize, 0usize, 0usize);
    // The same, an evidence turn's stand-in memories counting for it.
    let (mut all_with_stand_ins, mut any_with_stand_ins) = (0usize, 0usize);
    // Per LoCoMo category: (questions, all evidence in context).
    let mut per_category: std::collections::BTreeMap<u32, (usize, usize)> = Default::default();
    let mut dia_of: HashMap<String, Option<String>> = HashMap::new();
    for sample in &samples {
        let user = format!("locomo-{}", sample.id);
        for question in sample
            .questions
            .iter()
            .filter(|q| (1..=4).contains(&q.category) && !q.evidence.is_empty())
        {
            let asked = Instant::now();
            let prepared = client
                .prepare_turn(PrepareRequest {
                    scope: scope(&user, "questions"),
                    message: question.question.clone(),
                    recent_messages: vec!["(the conversation continues)".into()],
                    ..Default::default()
                })
                .await?;
            latencies.push(asked.elapsed());
            n += 1;
            context_tokens.push(prepared.tokens_used as f64);
            history_tokens.push(full_tokens.get(&user).copied().unwrap_or(0) as f64);
            let mut found: Vec<String> = Vec::new();
            for item in &prepared.items {
                if !item.included || item.kind != TraceKind::Memory {
                    continue;
                }
                if let Some(dia) = dialogue_id(&*store, &user, &item.id, &mut dia_of).await? {
                    found.push(dia);
                }
            }
            let present = question.evidence.iter().filter(|e| found.contains(e)).count();
            // An evidence turn that gave way to the memories learned from it (they hold what it
            // says, `gateway::service::stand_ins`) is in the context when one of them is.
            let included: Vec<&str> = prepared
                .items
                .iter()
                .filter(|i| i.included && i.kind == TraceKind::Memory)
                .map(|i| i.id.as_str())
                .collect();
            let mut standing_in = 0usize;
            for e in question.evidence.iter().filter(|e| !found.contains(e)) {
                let stand_ins = taught_by(&*store, &user, e).await?;
                if stand_ins.iter().any(|(_, m)| included.contains(&m.id.as_str())) {
                    standing_in += 1;
                }
            }
            if present + standing_in == question.evidence.len() {
                all_with_stand_ins += 1;
            }
            if present + standing_in > 0 {
                any_with_stand_ins += 1;
            }
            let category = per_category.entry(question.category).or_default();
            category.0 += 1;
            if present == question.evidence.len() {
                all_in += 1;
                category.1 += 1;
            } else if verbose {
                let decision = &prepared.decision;
                let memories: Vec<_> = prepared.items.iter().filter(|i| i.kind == TraceKind::Memory).collect();
                let offered = memories.len();
                let included = memories.iter().filter(|i| i.included).count();
                let mut offered_dias = Vec::with_capacity(offered);
                for item in &memories {
                    offered_dias.push(dialogue_id(&*store, &user, &item.id, &mut dia_of).await?);
                }
                // Where each missing evidence turn stood among the memories offered ("-": not
                // retrieved).
                let mut ranks: Vec<String> = Vec::new();
                for e in question.evidence.iter().filter(|e| !found.contains(e)) {
                    let mut rank = match offered_dias.iter().position(|d| d.as_ref() == Some(e)) {
                        Some(at) => format!("{e}@{}", at + 1),
                        None => format!("{e}@-"),
                    };
                    // The memories the turn gives way to: a context that offers one shows it
                    // instead of the turn ("+" included, "-" left out, "?" not offered).
                    for (own, taught) in taught_by(&*store, &user, e).await? {
                        let mark = match memories.iter().find(|i| i.id == taught.id) {
                            Some(item) if item.included => "+",
                            Some(_) => "-",
                            None => "?",
                        };
                        let own = if own { "" } else { " earlier" };
                        rank.push_str(&format!(
                            " [{mark}{}{own}: {:?}]",
                            taught.memory_type.as_str(),
                            taught.summary
                        ));
                    }
                    ranks.push(rank);
                }
                say(format!(
                    "--- [{}] {:?}\n    evidence {:?}, found {present}, missing {}; {included} of {offered} memories in {} tokens; decision {:?}",
                    locomo_data::category_name(question.category),
                    question.question,
                    question.evidence,
                    ranks.join(" "),
                    prepared.tokens_used,
                    (
                        decision.need_memory,
                        decision.retrieval_mode,
                        &decision.memory_types,
                        decision.budget_tokens,
                        &decision.time_range,
                        &decision.reason
                    ),
                ));
            }
            if present > 0 {
                any_in += 1;
            }
        }
    }
    anyhow::ensure!(n > 0, "{} has no questions of categories 1-4", data.display());
    let ratio = |a: usize| a as f64 / n as f64;
    let median_tokens = median(&context_tokens);
    let p95_tokens = quantile(&context_tokens, 0.95);
    let full = median(&history_tokens);
    let p50 = percentile_ms(&latencies, 0.5);
    let p95 = percentile_ms(&latencies, 0.95);
    say(format!(
        "context tokens: median {median_tokens:.0}, p95 {p95_tokens:.0} (budget 2000); full history: median {full:.0} ({:.1}% of it)",
        100.0 * median_tokens / full.max(1.0)
    ));
    say(format!(
        "evidence in context: all evidence {:.3}, some evidence {:.3} ({n} questions)",
        ratio(all_in),
        ratio(any_in)
    ));
    say(format!(
        "with a turn's stand-in memories counting for it: all evidence {:.3}, some evidence {:.3}",
        ratio(all_with_stand_ins),
        ratio(any_with_stand_ins)
    ));
    let category_shares: serde_json::Map<String, serde_json::Value> = per_category
        .iter()
        .map(|(category, (questions, all))| {
            let share = *all as f64 / (*questions).max(1) as f64;
            say(format!(
                "  {:<12} all evidence {share:.3} ({questions} questions)",
                locomo_data::category_name(*category)
            ));
            (
                locomo_data::category_name(*category).to_string(),
                json!((share * 10_000.0).round() / 10_000.0),
            )
        })
        .collect();
    say(format!("PrepareTurn through gRPC: p50 {p50:.1} ms, p95 {p95:.1} ms"));
    node.shutdown().await?;
    let round = |v: f64| (v * 10_000.0).round() / 10_000.0;
    say(json!({
        "median_tokens": median_tokens,
        "p95_tokens": p95_tokens,
        "full_tokens": full,
        "evidence_in_context": round(ratio(all_in)),
        "some_evidence_in_context": round(ratio(any_in)),
        "evidence_in_context_with_stand_ins": round(ratio(all_with_stand_ins)),
        "some_evidence_in_context_with_stand_ins": round(ratio(any_with_stand_ins)),
        "per_category": category_shares,
        "p50_ms": round(p50),
        "p95_ms": round(p95),
        "n": n,
    })
    .to_string());
    Ok(())
}
