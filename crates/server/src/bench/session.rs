//! `thinkus bench session`: scripted employee sessions through the gateway. Each scenario of the
//! file (datasets/sessions/README.md) is one user talking with several roles over several
//! sessions and days; every turn is recorded through `CompleteTurn` at its scripted time, and a
//! turn that carries a check is first asked through `PrepareTurn` (with the session's earlier
//! messages and the scripted `now`) and its context scored:
//! - needed: every needed fact is in the context (any of its spellings), shown as current;
//! - stale: a value replaced earlier in the scenario shows as current (a value the context marks
//!   as replaced, struck through, does not count);
//! - forbidden: another role's private matter shows at all.
//!
//! The learn and summary jobs of each turn are drained before the next check, so the figures
//! do not depend on the machine's speed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::{DateTime, FixedOffset, Utc};
use serde::Deserialize;
use serde_json::json;
use thinkus_backends::sql::JobStatus;
use thinkus_common::model::Scope;
use thinkus_gateway::api::{CompleteRequest, JobsRequest, PrepareRequest, ToolCall};
use thinkus_gateway::context::{contains_value, current_text};
use thinkus_gateway::{GatewayApi, GatewayGrpcClient};
use tokio_util::sync::CancellationToken;

use super::stats::{median, percentile_ms};
use super::{say, state_dir};
use crate::config::Config;
use crate::services::ServiceKind;

/// How many of the session's earlier messages go with a prepared turn, as an employee core
/// would send them.
const RECENT_MESSAGES: usize = 6;

#[derive(Debug, Deserialize)]
struct ScenarioFile {
    scenarios: Vec<Scenario>,
}

#[derive(Debug, Deserialize)]
struct Scenario {
    id: String,
    lang: String,
    #[serde(default)]
    domain: String,
    user: String,
    sessions: Vec<ScriptedSession>,
}

#[derive(Debug, Deserialize)]
struct ScriptedSession {
    id: String,
    role: String,
    project: Option<String>,
    start: DateTime<FixedOffset>,
    turns: Vec<ScriptedTurn>,
}

#[derive(Debug, Deserialize)]
struct ScriptedTurn {
    user: String,
    #[serde(default)]
    assistant: String,
    gap_minutes: Option<f64>,
    #[serde(default)]
    tools: Vec<ScriptedTool>,
    check: Option<Check>,
}

#[derive(Debug, Deserialize)]
struct ScriptedTool {
    name: String,
    #[serde(default)]
    mime_type: String,
    output: String,
    #[serde(default)]
    pad_lines: usize,
}

#[derive(Debug, Deserialize)]
struct Check {
    #[serde(default)]
    needed: Vec<Vec<String>>,
    #[serde(default)]
    stale: Vec<String>,
    #[serde(default)]
    forbidden: Vec<String>,
    #[serde(default)]
    note: String,
}

/// What one check found.
#[derive(Debug, Default)]
struct Scored {
    /// Needed facts missing from the context (their first spelling).
    missing: Vec<String>,
    /// Stale values shown as current.
    stale: Vec<String>,
    /// Forbidden strings shown.
    forbidden: Vec<String>,
}

/// Scores one context against a check.
fn score(context: &str, check: &Check) -> Scored {
    let current = current_text(context);
    Scored {
        missing: check
            .needed
            .iter()
            .filter(|spellings| !spellings.iter().any(|s| contains_value(&current, s)))
            .filter_map(|spellings| spellings.first().cloned())
            .collect(),
        stale: check
            .stale
            .iter()
            .filter(|value| contains_value(&current, value))
            .cloned()
            .collect(),
        forbidden: check
            .forbidden
            .iter()
            .filter(|value| contains_value(context, value))
            .cloned()
            .collect(),
    }
}

/// Generic build-log lines put before a scripted tool output (`pad_lines`), the same on every
/// run.
fn filler(lines: usize) -> String {
    const STEPS: [&str; 8] = [
        "Compiling",
        "Checking",
        "Downloading",
        "Running build script for",
        "Linking",
        "Resolving",
        "Fresh",
        "Generating bindings for",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = String::with_capacity(lines * 64);
    for i in 0..lines {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let step = STEPS[(state >> 33) as usize % STEPS.len()];
        let module = (state >> 17) % 640;
        let millis = (state >> 40) % 900 + 3;
        out.push_str(&format!(
            "[{:02}:{:02}:{:02}] {step} module_{module} v0.{}.{} ({millis} ms)\n",
            9 + i / 3600 % 12,
            i / 60 % 60,
            i % 60,
            module % 9,
            module % 13
        ));
    }
    out
}

/// Waits until the user has no pending or running job.
async fn drain(client: &GatewayGrpcClient, user: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut busy = false;
        for status in [JobStatus::Pending, JobStatus::Running] {
            let jobs = client
                .list_jobs(JobsRequest {
                    scope: Scope {
                        user_id: user.into(),
                        ..Default::default()
                    },
                    status: Some(status),
                    limit: 50,
                    offset: 0,
                })
                .await?;
            busy |= !jobs.is_empty();
        }
        if !busy {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the jobs of {user} did not finish within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Figures of a group of checks.
#[derive(Debug, Default)]
struct Tally {
    needed: (usize, usize),
    stale: (usize, usize),
    forbidden: (usize, usize),
    tokens: Vec<f64>,
    lean_tokens: Vec<f64>,
}

impl Tally {
    fn add(&mut self, check: &Check, scored: &Scored, tokens: f64) {
        if !check.needed.is_empty() {
            self.needed.0 += 1;
            self.needed.1 += usize::from(scored.missing.is_empty());
        } else {
            self.lean_tokens.push(tokens);
        }
        if !check.stale.is_empty() {
            self.stale.0 += 1;
            self.stale.1 += usize::from(!scored.stale.is_empty());
        }
        if !check.forbidden.is_empty() {
            self.forbidden.0 += 1;
            self.forbidden.1 += usize::from(!scored.forbidden.is_empty());
        }
        self.tokens.push(tokens);
    }

    fn needed_ratio(&self) -> f64 {
        self.needed.1 as f64 / self.needed.0.max(1) as f64
    }

    fn stale_ratio(&self) -> f64 {
        self.stale.1 as f64 / self.stale.0.max(1) as f64
    }

    fn line(&self, label: &str) -> String {
        format!(
            "{label:<10} needed {}/{} = {:.3}, stale {}/{} = {:.3}, forbidden shown {}/{}, context tokens median {:.0} (no memory needed: {:.0}), n {}",
            self.needed.1,
            self.needed.0,
            self.needed_ratio(),
            self.stale.1,
            self.stale.0,
            self.stale_ratio(),
            self.forbidden.1,
            self.forbidden.0,
            median(&self.tokens),
            median(&self.lean_tokens),
            self.tokens.len()
        )
    }
}

pub async fn run(
    mut config: Config,
    data: &Path,
    data_dir: Option<PathBuf>,
    only: Option<String>,
    verbose: bool,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(data).with_context(|| format!("cannot read {}", data.display()))?;
    let file: ScenarioFile =
        serde_json::from_str(&text).with_context(|| format!("{} is not a scenario file", data.display()))?;
    let scenarios: Vec<&Scenario> = file
        .scenarios
        .iter()
        .filter(|s| only.as_deref().is_none_or(|id| s.id == id))
        .collect();
    anyhow::ensure!(!scenarios.is_empty(), "{} holds no scenario to run", data.display());

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
    say(format!(
        "session: {} scenarios from {} through the gateway (state in {})",
        scenarios.len(),
        data.display(),
        dir.display()
    ));

    let started = Instant::now();
    let mut all = Tally::default();
    let mut by_lang: BTreeMap<String, Tally> = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut turns = 0usize;
    for scenario in &scenarios {
        let mut tally = Tally::default();
        for session in &scenario.sessions {
            let scope = Scope {
                user_id: scenario.user.clone(),
                role_id: session.role.clone(),
                project_id: session.project.clone(),
                session_id: Some(format!("{}-{}", scenario.id, session.id)),
                ..Default::default()
            };
            let mut at: DateTime<Utc> = session.start.with_timezone(&Utc);
            let mut recent: Vec<String> = Vec::new();
            for (index, turn) in session.turns.iter().enumerate() {
                if index > 0 {
                    let minutes = turn.gap_minutes.unwrap_or(2.0);
                    at += chrono::Duration::milliseconds((minutes * 60_000.0) as i64);
                }
                if let Some(check) = &turn.check {
                    drain(&client, &scenario.user).await?;
                    let asked = Instant::now();
                    let prepared = client
                        .prepare_turn(PrepareRequest {
                            scope: scope.clone(),
                            message: turn.user.clone(),
                            recent_messages: recent[recent.len().saturating_sub(RECENT_MESSAGES)..].to_vec(),
                            now: Some(at),
                            ..Default::default()
                        })
                        .await
                        .with_context(|| format!("PrepareTurn of {} {} turn {}", scenario.id, session.id, index + 1))?;
                    latencies.push(asked.elapsed());
                    let scored = score(&prepared.context, check);
                    let tokens = f64::from(prepared.tokens_used);
                    tally.add(check, &scored, tokens);
                    all.add(check, &scored, tokens);
                    by_lang
                        .entry(scenario.lang.clone())
                        .or_default()
                        .add(check, &scored, tokens);
                    let failed = !scored.missing.is_empty() || !scored.stale.is_empty() || !scored.forbidden.is_empty();
                    if verbose {
                        let turn_id = format!("{} {} turn {}", scenario.id, session.id, index + 1);
                        let decision = &prepared.decision;
                        let decision = (decision.need_memory, decision.retrieval_mode, &decision.reason);
                        let tokens = prepared.tokens_used;
                        if failed {
                            say(format!(
                                "--- {turn_id} ({}): {:?}\n    missing {:?}, stale {:?}, forbidden {:?}; {tokens} tokens; decision {decision:?}\n{}",
                                check.note,
                                turn.user,
                                scored.missing,
                                scored.stale,
                                scored.forbidden,
                                indent(&prepared.context)
                            ));
                            // What was weighed and why it was left out, for the needed value
                            // that is missing: its id can be looked up in `--data-dir`.
                            for item in prepared.items.iter().take(40) {
                                let parts = item.parts.as_ref().map_or(String::new(), |p| {
                                    format!(
                                        " relevance {:.2} dense {:.3} keyword {:.2}",
                                        p.relevance, p.dense_similarity, p.keyword_score
                                    )
                                });
                                say(format!(
                                    "    {} {:?} {}{parts}: {}",
                                    if item.included { "+" } else { "-" },
                                    item.kind,
                                    item.id,
                                    item.reason
                                ));
                            }
                        } else {
                            say(format!(
                                "ok {turn_id}: {} needed, {tokens} tokens; decision {decision:?}",
                                check.needed.len()
                            ));
                        }
                    }
                }
                let tool_calls = turn
                    .tools
                    .iter()
                    .enumerate()
                    .map(|(i, tool)| ToolCall {
                        id: format!("call-{}-{}", index + 1, i + 1),
                        name: tool.name.clone(),
                        output: format!("{}{}", filler(tool.pad_lines), tool.output),
                        mime_type: tool.mime_type.clone(),
                        path: String::new(),
                    })
                    .collect();
                client
                    .complete_turn(CompleteRequest {
                        scope: scope.clone(),
                        user_message: turn.user.clone(),
                        assistant_message: turn.assistant.clone(),
                        tool_calls,
                        request_id: Some(format!("{}:{}:{}", scenario.id, session.id, index + 1)),
                        occurred_at: Some(at),
                        ..Default::default()
                    })
                    .await
                    .with_context(|| format!("CompleteTurn of {} {} turn {}", scenario.id, session.id, index + 1))?;
                turns += 1;
                recent.push(turn.user.clone());
                if !turn.assistant.trim().is_empty() {
                    recent.push(turn.assistant.clone());
                }
            }
        }
        say(tally.line(&format!("{} ({}, {})", scenario.id, scenario.lang, scenario.domain)));
    }
    anyhow::ensure!(!all.tokens.is_empty(), "{} has no checks", data.display());
    for (lang, tally) in &by_lang {
        say(tally.line(lang));
    }
    say(all.line("all"));
    let p50 = percentile_ms(&latencies, 0.5);
    let p95 = percentile_ms(&latencies, 0.95);
    say(format!(
        "{turns} turns in {:.1}s; PrepareTurn through gRPC: p50 {p50:.1} ms, p95 {p95:.1} ms",
        started.elapsed().as_secs_f64()
    ));
    node.shutdown().await?;
    let round = |v: f64| (v * 10_000.0).round() / 10_000.0;
    let per_language: serde_json::Map<String, serde_json::Value> = by_lang
        .iter()
        .map(|(lang, t)| {
            (
                lang.clone(),
                json!({"needed_ratio": round(t.needed_ratio()), "stale_ratio": round(t.stale_ratio()), "n": t.tokens.len()}),
            )
        })
        .collect();
    say(json!({
        "needed_ratio": round(all.needed_ratio()),
        "stale_ratio": round(all.stale_ratio()),
        "forbidden_shown": all.forbidden.1,
        "median_tokens": median(&all.tokens),
        "median_tokens_no_memory_needed": median(&all.lean_tokens),
        "p50_ms": round(p50),
        "p95_ms": round(p95),
        "per_language": per_language,
        "n": all.tokens.len(),
    })
    .to_string());
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("      | {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(needed: &[&[&str]], stale: &[&str], forbidden: &[&str]) -> Check {
        Check {
            needed: needed
                .iter()
                .map(|f| f.iter().map(|s| s.to_string()).collect())
                .collect(),
            stale: stale.iter().map(|s| s.to_string()).collect(),
            forbidden: forbidden.iter().map(|s| s.to_string()).collect(),
            note: String::new(),
        }
    }

    #[test]
    fn a_struck_value_is_history_and_a_plain_one_is_current() {
        let context = "## Other\n- The budget is now $800\n- ~~The budget is $500~~ (replaced 3 Nov)\n";
        let scored = score(context, &check(&[&["$800"]], &["$500"], &[]));
        assert!(scored.missing.is_empty());
        assert!(scored.stale.is_empty());
        let scored = score("- The budget is $500\n", &check(&[&["$800"]], &["$500"], &[]));
        assert_eq!(scored.missing, vec!["$800"]);
        assert_eq!(scored.stale, vec!["$500"]);
    }

    #[test]
    fn values_match_whole_and_any_spelling_counts() {
        let scored = score(
            "- 预算上调到$5000，截止3月20日\n",
            &check(&[&["$500"], &["March 20", "3月20日"]], &[], &[]),
        );
        assert_eq!(scored.missing, vec!["$500"], "$500 is not in $5000");
        let scored = score("- Blood Pressure  is high\n", &check(&[], &[], &["blood pressure"]));
        assert_eq!(scored.forbidden, vec!["blood pressure"]);
    }

    #[test]
    fn filler_is_the_same_every_time() {
        assert_eq!(filler(50), filler(50));
        assert_eq!(filler(3000).lines().count(), 3000);
    }
}
