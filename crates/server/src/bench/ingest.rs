//! `thinkus bench ingest`: end-to-end write throughput of the knowledge manager on the embedded
//! defaults (SQLite, the local vector index, the configured embedder) in a temporary folder.
//! Every memory goes through the whole write pipeline (validation, embedding, contradiction
//! and duplicate checks, quota, the relational commit with its history and idempotency record,
//! the vector index), sent by several concurrent writers as the gateway's turns would be.
//! The corpus is synthetic but varied: Chinese and English statements of every memory type,
//! built from subjects, values and phrasings so that few of them are near duplicates.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use thinkus_common::model::{DEFAULT_TENANT, MemoryType, Owner, Scope};
use thinkus_knowledge_manager::KnowledgeManager;
use thinkus_knowledge_manager::api::{KnowledgeApi, MemoryDraft, RememberRequest, WriteOutcome};

use super::stats::percentile_ms;
use super::{say, state_dir};
use crate::config::Config;
use crate::services::ServiceKind;

/// Concurrent writers (sessions of different users writing at once).
const WRITERS: usize = 8;
const USERS: usize = 4;
const ROLES: [&str; 5] = ["cto", "cfo", "cmo", "designer", "pm"];

const ZH: [(MemoryType, &str); 8] = [
    (MemoryType::ProjectDecision, "{p}项目决定用{t}做{a}，原因是团队更熟悉"),
    (MemoryType::Constraint, "{p}的{a}预算不超过{n}万元，{m}月底之前交付"),
    (MemoryType::UserPreference, "做{a}的时候我更喜欢{t}的方案，文档要{s}"),
    (MemoryType::ActionItem, "下周一之前把{p}的{a}评审材料发给{who}"),
    (MemoryType::Risk, "{p}的{a}依赖{t}，第{n}周可能会延期"),
    (MemoryType::Insight, "{p}上线后{a}的转化率提升了{n}%，主要来自{who}渠道"),
    (
        MemoryType::DiscussionConclusion,
        "讨论下来，{p}的{a}先用{t}，{m}月再评估",
    ),
    (MemoryType::Feedback, "{who}觉得{p}的{a}方案写得{s}，下次保持"),
];
const EN: [(MemoryType, &str); 8] = [
    (
        MemoryType::ProjectDecision,
        "For {p} we'll go with {t} for the {a}, since the team knows it",
    ),
    (
        MemoryType::Constraint,
        "The {a} budget for {p} is capped at ${n}k and must ship by month {m}",
    ),
    (
        MemoryType::UserPreference,
        "When working on the {a} I prefer {t}, and reports should be {s}",
    ),
    (
        MemoryType::ActionItem,
        "Send the {a} review notes for {p} to {who} before Monday",
    ),
    (MemoryType::Risk, "The {a} of {p} depends on {t}; week {n} might slip"),
    (
        MemoryType::Insight,
        "After launch, {p} {a} conversion rose {n}% mostly from {who}",
    ),
    (
        MemoryType::DiscussionConclusion,
        "We agreed {p} keeps {t} for the {a} and revisits it in month {m}",
    ),
    (
        MemoryType::Feedback,
        "{who} said the {a} write-up for {p} was {s}; keep that",
    ),
];
const PROJECTS_ZH: [&str; 7] = ["学而", "小蜜蜂", "云栖", "青鸟", "木棉", "星图", "知行"];
const PROJECTS_EN: [&str; 7] = [
    "Brightlane",
    "Lumo",
    "Northwind",
    "Petal",
    "Quarry",
    "Tidepool",
    "Orbit",
];
const AREAS_ZH: [&str; 9] = [
    "支付",
    "登录",
    "数据看板",
    "招聘流程",
    "定价页",
    "消息推送",
    "客服系统",
    "财务报表",
    "品牌视觉",
];
const AREAS_EN: [&str; 9] = [
    "payments",
    "sign-in",
    "dashboard",
    "hiring funnel",
    "pricing page",
    "notifications",
    "support desk",
    "ledger",
    "brand kit",
];
const TECH: [&str; 8] = [
    "PostgreSQL",
    "Stripe",
    "Next.js",
    "Figma",
    "Kafka",
    "Supabase",
    "Flutter",
    "Redis",
];
const STYLES_ZH: [&str; 5] = ["简洁", "结构清楚", "有数据支撑", "一页纸", "图表为主"];
const STYLES_EN: [&str; 5] = ["short", "well structured", "backed by data", "one page", "chart-first"];
const WHO_ZH: [&str; 5] = ["张总", "李雷", "设计组", "投资人", "小红书"];
const WHO_EN: [&str; 5] = ["Dana", "the board", "Priya", "our investors", "LinkedIn"];

/// The i-th statement of the corpus.
fn statement(i: usize) -> (MemoryType, String) {
    let zh = i.is_multiple_of(2);
    let k = i / 2;
    let (memory_type, template) = if zh { ZH[k % ZH.len()] } else { EN[k % EN.len()] };
    let pick = |items: &[&'static str], salt: usize| items[(k / 8 + salt * (k % 5 + 1)) % items.len()];
    let text = template
        .replace("{p}", pick(if zh { &PROJECTS_ZH } else { &PROJECTS_EN }, 1))
        .replace("{a}", pick(if zh { &AREAS_ZH } else { &AREAS_EN }, 2))
        .replace("{t}", pick(&TECH, 3))
        .replace("{s}", pick(if zh { &STYLES_ZH } else { &STYLES_EN }, 4))
        .replace("{who}", pick(if zh { &WHO_ZH } else { &WHO_EN }, 5))
        .replace("{n}", &(5 + (k * 7) % 90).to_string())
        .replace("{m}", &(1 + k % 12).to_string());
    (memory_type, text)
}

pub async fn run(mut config: Config, n: usize, data_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let (dir, _temp) = state_dir(data_dir)?;
    config.server.data_dir = dir.clone();
    let services = [ServiceKind::KnowledgeManager].into_iter().collect();
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
    let embedder_name = embedder.name().to_string();
    let km = Arc::new(KnowledgeManager::new(
        config.knowledge.clone(),
        store,
        vectors,
        embedder,
        backends.rules.clone(),
        None,
    ));
    for user in 0..USERS {
        // Unlimited quota: the bench measures writing, not the quota's refusals.
        km.set_plan(
            Owner::new(DEFAULT_TENANT, format!("bench-user-{user}")),
            "enterprise".into(),
        )
        .await?;
    }
    say(format!(
        "ingest: {n} memories, {WRITERS} concurrent writers, state in {}, embedder {embedder_name}",
        dir.display()
    ));
    // Warm the embedder (model load) outside the measurement.
    km.remember(RememberRequest {
        scope: Scope::new("bench-warmup", "pm"),
        draft: MemoryDraft::new(MemoryType::Fact, "warm-up statement for the embedder"),
        request_id: None,
        skip_dedup: true,
        admission_bypassed_by: None,
    })
    .await?;

    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let progress = crate::progress::Progress::new("ingest", Some(n as u64));
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        let km = km.clone();
        let next = next.clone();
        let progress = progress.clone();
        writers.push(tokio::spawn(async move {
            let mut latencies: Vec<Duration> = Vec::new();
            let mut outcomes: Vec<WriteOutcome> = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let (memory_type, content) = statement(i);
                let scope = Scope::new(format!("bench-user-{}", i % USERS), ROLES[(i / USERS) % ROLES.len()])
                    .with_project(format!("project-{}", i % 3));
                let request = RememberRequest {
                    scope,
                    draft: MemoryDraft::new(memory_type, content),
                    request_id: Some(format!("bench-{i}")),
                    skip_dedup: false,
                    admission_bypassed_by: None,
                };
                let sent = Instant::now();
                let result = km.remember(request).await?;
                latencies.push(sent.elapsed());
                progress.inc(1);
                outcomes.push(result.outcome);
            }
            anyhow::Ok((latencies, outcomes))
        }));
    }
    let mut latencies = Vec::with_capacity(n);
    let mut outcomes = Vec::with_capacity(n);
    for writer in writers {
        let (l, o) = writer.await??;
        latencies.extend(l);
        outcomes.extend(o);
    }
    progress.finish();
    let elapsed = started.elapsed().as_secs_f64();
    let count = |outcome: WriteOutcome| outcomes.iter().filter(|o| **o == outcome).count();
    let per_s = n as f64 / elapsed.max(f64::EPSILON);
    let (p50, p95) = (percentile_ms(&latencies, 0.5), percentile_ms(&latencies, 0.95));
    say(format!(
        "{n} writes in {elapsed:.2}s: {per_s:.1} memories/s; latency p50 {p50:.1} ms, p95 {p95:.1} ms"
    ));
    say(format!(
        "outcomes: created {}, reinforced {}, replaced an older value {}; target >= 100 memories/s",
        count(WriteOutcome::Created),
        count(WriteOutcome::Reinforced),
        count(WriteOutcome::ReplacedOlder)
    ));
    say(json!({
        "memories_per_s": (per_s * 10.0).round() / 10.0,
        "n": n,
        "p50_ms": (p50 * 10.0).round() / 10.0,
        "p95_ms": (p95 * 10.0).round() / 10.0,
    })
    .to_string());
    Ok(())
}
