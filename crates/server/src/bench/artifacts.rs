//! `thinkus bench artifacts --data DIR`: stores every file under DIR as an artifact on the
//! embedded backends (SQLite and a local blob folder in a temporary folder) and prints the
//! compact's tokens against the full content's (median and total reduction, overall and for
//! outputs over 2,000 tokens), then the latency of partial reads on a generated 10 MB log.
//! Target: >= 90% token reduction for outputs over 2,000 tokens, partial read p99 <= 5 ms.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;
use thinkus_artifact::api::{ArtifactApi, Locator, NewArtifact, ReadRequest};
use thinkus_artifact::{ArtifactConfig, ArtifactService};
use thinkus_backends::blob::local::LocalBlobStore;
use thinkus_backends::sql::SqlStore;
use thinkus_common::model::Scope;
use thinkus_common::tokens::TokenCounter;

use super::stats::{median, percentile_ms};
use super::{say, state_dir};
use crate::config::Config;

/// Outputs above this many tokens are the ones the target is about.
const LARGE_TOKENS: usize = 2000;
/// The size of the generated artifact partial reads are timed on.
const BIG_BYTES: usize = 10 * 1024 * 1024;
/// Timed reads per locator.
const READS: usize = 1000;

/// Every regular file under `dir`, sorted, leaving out hidden folders and build output.
fn files_under(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = std::fs::read_dir(&folder).with_context(|| format!("cannot read {}", folder.display()))?;
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "node_modules" {
                    pending.push(entry.path());
                }
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A deterministic 10 MB log with levels, timestamps and some multi-byte text.
fn generated_log() -> Vec<u8> {
    let levels = ["INFO", "INFO", "INFO", "DEBUG", "WARN", "INFO", "ERROR", "INFO"];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = String::with_capacity(BIG_BYTES + 256);
    let mut n: u64 = 0;
    while out.len() < BIG_BYTES {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let level = levels[(state % levels.len() as u64) as usize];
        let seconds = n / 10;
        out.push_str(&format!(
            "2026-11-22T{:02}:{:02}:{:02}.{:03}Z {level} worker-{} request {} handled in {} ms 用户请求已处理\n",
            (seconds / 3600) % 24,
            (seconds / 60) % 60,
            seconds % 60,
            n % 1000,
            state % 16,
            state >> 40,
            state % 997
        ));
        n += 1;
    }
    out.into_bytes()
}

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound.max(1)
    }
}

fn percent(x: f64) -> f64 {
    (x * 1000.0).round() / 10.0
}

pub async fn run(config: Config, data: &Path, data_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let (dir, _temp) = state_dir(data_dir)?;
    let store = Arc::new(SqlStore::connect(&format!("sqlite://{}", dir.join("bench.db").display()), 4).await?);
    let blobs = Arc::new(LocalBlobStore::open(&dir.join("blobs")).await?);
    let tokens = TokenCounter::for_name(&config.tokenizer.encoding)
        .with_context(|| format!("tokenizer.encoding: unknown {:?}", config.tokenizer.encoding))?;
    // Structural compacts only: the figures must not depend on a remote model.
    let artifact_config = ArtifactConfig {
        llm_summaries: false,
        purge_interval_secs: 0,
        ..config.artifact.clone()
    };
    let service = ArtifactService::new(artifact_config, store, blobs, None, tokens);
    let scope = Scope::new("bench", "cto").with_session("bench-session");

    let files = files_under(data)?;
    anyhow::ensure!(!files.is_empty(), "no file under {}", data.display());
    let mut ratios = Vec::new();
    let mut large_ratios = Vec::new();
    let (mut full_total, mut compact_total) = (0usize, 0usize);
    let (mut large_full, mut large_compact) = (0usize, 0usize);
    let mut max_compact = 0u32;
    let mut skipped = 0usize;
    let mut largest: Vec<(usize, u32, String)> = Vec::new();
    let started = Instant::now();
    for file in &files {
        let content = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let relative = file.strip_prefix(data).unwrap_or(file).display().to_string();
        let Ok(text) = std::str::from_utf8(&content) else {
            skipped += 1;
            continue;
        };
        if text.trim().is_empty() || content.len() as u64 > service.config().max_bytes {
            skipped += 1;
            continue;
        }
        let full = tokens.count(text);
        let header = NewArtifact {
            scope: scope.clone(),
            tool_name: Some("bench".into()),
            path: Some(format!("/{relative}")),
            ..Default::default()
        };
        let stored = service
            .create(header, Bytes::from(content))
            .await
            .map_err(|err| anyhow::anyhow!("{relative}: {err}"))?;
        let compact = stored.compact.tokens as usize;
        max_compact = max_compact.max(stored.compact.tokens);
        full_total += full;
        compact_total += compact;
        let reduction = 1.0 - compact as f64 / full.max(1) as f64;
        ratios.push(reduction);
        if full > LARGE_TOKENS {
            large_ratios.push(reduction);
            large_full += full;
            large_compact += compact;
            largest.push((full, stored.compact.tokens, relative));
        }
    }
    let store_seconds = started.elapsed().as_secs_f64();
    let stored_count = ratios.len();
    largest.sort_by_key(|item| std::cmp::Reverse(item.0));
    say(format!(
        "stored {stored_count} files from {} in {store_seconds:.1} s ({skipped} binary or empty skipped)",
        data.display()
    ));
    say(format!(
        "all outputs:      full {full_total} tokens, compacts {compact_total} tokens, total reduction {:.1}%, median {:.1}%, largest compact {max_compact} tokens",
        percent(1.0 - compact_total as f64 / full_total.max(1) as f64),
        percent(median(&ratios))
    ));
    let large_total = 1.0 - large_compact as f64 / large_full.max(1) as f64;
    let large_min = large_ratios.iter().copied().fold(f64::INFINITY, f64::min);
    say(format!(
        "over {LARGE_TOKENS} tokens: {} outputs, full {large_full} tokens, compacts {large_compact} tokens, total reduction {:.1}%, median {:.1}%, worst {:.1}%",
        large_ratios.len(),
        percent(large_total),
        percent(median(&large_ratios)),
        percent(if large_ratios.is_empty() { 0.0 } else { large_min })
    ));
    for (full, compact, path) in largest.iter().take(5) {
        say(format!("  {path}: {full} -> {compact} tokens"));
    }

    // Partial reads on a generated 10 MB log, uploaded in 1 MiB chunks.
    let log = generated_log();
    let log_bytes = log.len() as u64;
    let chunks: Vec<Result<Bytes, thinkus_common::ApiError>> =
        log.chunks(1024 * 1024).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    let upload_started = Instant::now();
    let stored = service
        .upload(
            NewArtifact {
                scope: Scope {
                    session_id: Some("bench-big".into()),
                    ..scope.clone()
                },
                path: Some("/var/log/generated.log".into()),
                ..Default::default()
            },
            futures::stream::iter(chunks).boxed(),
        )
        .await
        .map_err(|err| anyhow::anyhow!("the 10 MB upload: {err}"))?;
    let upload_ms = upload_started.elapsed().as_secs_f64() * 1000.0;
    let big_full_tokens = tokens.count(&String::from_utf8_lossy(&log));
    let lines = stored.artifact.line_count;
    say(format!(
        "10 MB log: {lines} lines, uploaded in {upload_ms:.0} ms, compact {} tokens vs {big_full_tokens} full",
        stored.compact.tokens
    ));
    let id = stored.artifact.id.clone();
    let read = |locator: Locator| ReadRequest {
        scope: scope.clone(),
        artifact_id: id.clone(),
        locator,
        max_bytes: None,
    };
    let cold_started = Instant::now();
    service
        .read(read(Locator::Lines {
            start: 1,
            end: Some(50),
        }))
        .await
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    let cold_ms = cold_started.elapsed().as_secs_f64() * 1000.0;
    let mut random = Lcg(42);
    let mut line_times: Vec<Duration> = Vec::with_capacity(READS);
    let mut byte_times: Vec<Duration> = Vec::with_capacity(READS);
    for _ in 0..READS {
        let start = 1 + random.below(lines.saturating_sub(50).max(1));
        let begun = Instant::now();
        let result = service
            .read(read(Locator::Lines {
                start,
                end: Some(start + 49),
            }))
            .await
            .map_err(|err| anyhow::anyhow!("{err}"))?;
        line_times.push(begun.elapsed());
        anyhow::ensure!(
            result.end == start + 49,
            "a line read returned {}-{}",
            result.start,
            result.end
        );
        let start = random.below(log_bytes - 4096);
        let begun = Instant::now();
        service
            .read(read(Locator::Bytes {
                start,
                end: Some(start + 4096),
            }))
            .await
            .map_err(|err| anyhow::anyhow!("{err}"))?;
        byte_times.push(begun.elapsed());
    }
    let mut search_times = Vec::new();
    for keyword in ["worker-7 request 1", "ERROR", "用户请求", "absent-keyword"] {
        let begun = Instant::now();
        service
            .read(read(Locator::Search(keyword.into())))
            .await
            .map_err(|err| anyhow::anyhow!("{err}"))?;
        search_times.push(begun.elapsed());
    }
    let all: Vec<Duration> = line_times.iter().chain(&byte_times).copied().collect();
    let (p50, p99) = (percentile_ms(&all, 0.5), percentile_ms(&all, 0.99));
    say(format!(
        "partial reads ({} lines \"a-(a+49)\" + {} bytes 4 KiB): p50 {p50:.3} ms, p99 {p99:.3} ms; lines p99 {:.3} ms, bytes p99 {:.3} ms; first (cold) read {cold_ms:.1} ms",
        READS,
        READS,
        percentile_ms(&line_times, 0.99),
        percentile_ms(&byte_times, 0.99)
    ));
    say(format!(
        "keyword search over 10 MB: p50 {:.1} ms, max {:.1} ms",
        percentile_ms(&search_times, 0.5),
        percentile_ms(&search_times, 1.0)
    ));
    let reduction_ok = !large_ratios.is_empty() && large_total >= 0.9;
    let latency_ok = p99 <= 5.0;
    say(format!(
        "target: >= 90% reduction over {LARGE_TOKENS} tokens: {}; partial read p99 <= 5 ms: {}",
        if reduction_ok { "met" } else { "NOT met" },
        if latency_ok { "met" } else { "NOT met" }
    ));
    say(json!({
        "bench": "artifacts",
        "data": data.display().to_string(),
        "files": stored_count,
        "skipped": skipped,
        "full_tokens": full_total,
        "compact_tokens": compact_total,
        "total_reduction": 1.0 - compact_total as f64 / full_total.max(1) as f64,
        "median_reduction": median(&ratios),
        "max_compact_tokens": max_compact,
        "large_outputs": large_ratios.len(),
        "large_full_tokens": large_full,
        "large_compact_tokens": large_compact,
        "large_total_reduction": large_total,
        "large_median_reduction": median(&large_ratios),
        "large_worst_reduction": if large_ratios.is_empty() { 0.0 } else { large_min },
        "big_artifact_bytes": log_bytes,
        "big_artifact_compact_tokens": stored.compact.tokens,
        "big_artifact_full_tokens": big_full_tokens,
        "read_p50_ms": p50,
        "read_p99_ms": p99,
        "lines_read_p99_ms": percentile_ms(&line_times, 0.99),
        "bytes_read_p99_ms": percentile_ms(&byte_times, 0.99),
        "cold_read_ms": cold_ms,
        "search_p50_ms": percentile_ms(&search_times, 0.5),
        "reduction_target_met": reduction_ok,
        "latency_target_met": latency_ok,
    })
    .to_string());
    Ok(())
}
