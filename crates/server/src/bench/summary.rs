//! `thinkus bench summary --data FILE`: summarises every session of a LoCoMo file with the
//! built-in rules, through the summary service over a temporary SQLite database, and measures
//! how much of the human-annotated events (`event_summary`) the summaries keep, at what size.
//!
//! - **Summary**: the session's turns are recorded as messages (speaker = the person), a summary
//!   is generated with the rule engine, and rendered as Markdown in English with the largest
//!   budget, exactly as it would be injected into a prompt.
//! - **Coverage**: an event is covered when at least half (≥ 0.5) of its distinct content terms
//!   appear among the content terms of the rendered summary. Content terms are those of
//!   `thinkus_common::text::terms`: words lowercased, stopwords removed, English words
//!   Snowball-stemmed ("attends" and "attended" both give "attend"). Coverage is covered events
//!   over all events of the file (micro average).
//! - **Token ratio**: tokens of the rendered summary over tokens of the session's transcript
//!   (one `Speaker: text` line per turn), with the configured tokenizer, averaged over sessions.
//! - **Time**: the GenerateSummary call (reading the messages, the rules, storing the summary)
//!   plus the rendering, per session; p50 and p95 reported.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use thinkus_backends::llm::RuleEngine;
use thinkus_backends::sql::SqlStore;
use thinkus_common::model::{EngineChoice, Language, Message, Scope};
use thinkus_common::text::term_set;
use thinkus_common::tokens::TokenCounter;
use thinkus_summary::Summarizer;
use thinkus_summary::api::{GenerateRequest, RecordRequest, RenderRequest, SummaryApi};

use super::locomo_data;
use super::stats::percentile_ms;
use super::{say, state_dir};
use crate::config::Config;

/// The share of an event's content terms the summary must hold for the event to be covered.
pub const COVERED_SHARE: f64 = 0.5;

/// Whether a summary covers an event (the rule in the module documentation).
pub fn covers(summary_terms: &HashSet<String>, event: &str) -> bool {
    let event_terms = term_set(event);
    if event_terms.is_empty() {
        return true;
    }
    let found = event_terms.iter().filter(|t| summary_terms.contains(*t)).count();
    found as f64 >= COVERED_SHARE * event_terms.len() as f64
}

/// Runs the bench.
pub async fn run(config: Config, data: &Path, limit: Option<usize>, verbose: bool) -> anyhow::Result<()> {
    let samples = locomo_data::load(data)?;
    let samples: Vec<_> = samples.into_iter().take(limit.unwrap_or(usize::MAX)).collect();
    let (dir, _guard) = state_dir(None)?;
    let url = format!("sqlite://{}", dir.join("summary-bench.db").display());
    let store = Arc::new(SqlStore::connect(&url, 4).await?);
    let tokens = TokenCounter::for_name(&config.tokenizer.encoding)
        .ok_or_else(|| anyhow::anyhow!("tokenizer.encoding: unknown encoding {:?}", config.tokenizer.encoding))?;
    let mut summary_config = config.summary.clone();
    // Sessions are summarised explicitly here; no decision goes anywhere.
    summary_config.auto_update_every = 0;
    summary_config.offer_decisions = false;
    let max_render = summary_config.max_render_tokens;
    let service = Summarizer::new(
        summary_config,
        store.clone(),
        RuleEngine::new(),
        None,
        tokens,
        None,
        None,
    );

    let mut events_total = 0usize;
    let mut events_covered = 0usize;
    let mut ratios: Vec<f64> = Vec::new();
    let mut times: Vec<Duration> = Vec::new();
    for sample in &samples {
        for session in &sample.sessions {
            if session.turns.is_empty() {
                continue;
            }
            let session_id = format!("{}-s{}", sample.id, session.number);
            let scope = Scope::new("bench", "companion").with_session(session_id.clone());
            let messages: Vec<Message> = session
                .turns
                .iter()
                .filter(|t| !t.text.trim().is_empty())
                .map(|t| Message {
                    role: "user".into(),
                    content: t.text.clone(),
                    speaker: Some(t.speaker.clone()),
                    created_at: t.at,
                    index: 0,
                })
                .collect();
            if messages.is_empty() {
                continue;
            }
            let transcript: String = messages
                .iter()
                .map(|m| format!("{}: {}\n", m.speaker.as_deref().unwrap_or_default(), m.content))
                .collect();
            service
                .record(RecordRequest {
                    scope: scope.clone(),
                    messages,
                    phase_completed: false,
                    job_id: None,
                })
                .await?;
            let started = Instant::now();
            let generated = service
                .generate(GenerateRequest {
                    scope: scope.clone(),
                    engine: EngineChoice::Rules,
                    ..Default::default()
                })
                .await?;
            let rendered = service
                .render(RenderRequest {
                    scope: scope.clone(),
                    session_id: session_id.clone(),
                    budget_tokens: Some(max_render),
                    language: Some(Language::En),
                    now: Some(generated.summary.updated_at),
                })
                .await?;
            times.push(started.elapsed());
            let session_tokens = tokens.count(&transcript).max(1);
            ratios.push(f64::from(rendered.tokens) / session_tokens as f64);
            let summary_terms = term_set(&rendered.markdown);
            let mut missed = Vec::new();
            for event in &session.events {
                events_total += 1;
                if covers(&summary_terms, event) {
                    events_covered += 1;
                } else {
                    missed.push(event.clone());
                }
            }
            if verbose && !missed.is_empty() {
                say(format!("--- {session_id}: missed {missed:?}\n{}", rendered.markdown));
            }
        }
    }
    let n = ratios.len();
    let coverage = if events_total == 0 {
        0.0
    } else {
        events_covered as f64 / events_total as f64
    };
    let token_ratio = if n == 0 {
        0.0
    } else {
        ratios.iter().sum::<f64>() / n as f64
    };
    let p50 = percentile_ms(&times, 0.5);
    let p95 = percentile_ms(&times, 0.95);
    say(format!(
        "summary rules on {} ({n} sessions, {events_total} events)",
        data.display()
    ));
    say(format!(
        "event coverage (≥{COVERED_SHARE} of an event's content terms in the summary): {events_covered}/{events_total} = {coverage:.3}"
    ));
    say(format!(
        "summary tokens / session tokens: {token_ratio:.3} (mean over sessions)"
    ));
    say(format!("time per session: p50 {p50:.2} ms, p95 {p95:.2} ms"));
    say(json!({
        "coverage": (coverage * 1000.0).round() / 1000.0,
        "token_ratio": (token_ratio * 1000.0).round() / 1000.0,
        "p50_ms": (p50 * 100.0).round() / 100.0,
        "n": n,
    })
    .to_string());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_counts_stemmed_content_terms() {
        let summary = term_set("Caroline: went to an LGBTQ support group yesterday");
        assert!(covers(&summary, "Caroline attends an LGBTQ support group."));
        assert!(!covers(&summary, "Melanie registers for a pottery class."));
    }
}
