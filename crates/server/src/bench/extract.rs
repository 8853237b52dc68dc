//! `thinkus bench extract`: the knowledge manager's built-in extraction on a labelled JSONL file
//! (datasets/extract.jsonl, format in datasets/README.md). Each utterance goes through the
//! path `learn` takes with the built-in engine: the learned clause head over the clauses'
//! embeddings with the rules (or, with `--rules-only`, the rule engine with the knowledge
//! manager's rules registered answering `LlmTask::Extract`), the answer is parsed by
//! `parse_candidates` and every candidate passes `admit` with the default configuration. What
//! admission would write counts as stored (the candidate queue is not). The time per message
//! (the embedding of its clauses included) is reported.
//!
//! An extracted memory matches an expected one when the types are equal and every keyword occurs
//! in its content (case-insensitive). Precision = matched stored memories / stored memories on
//! lines that expect something; recall = matched expected items / expected items; junk_ratio =
//! share of `expected: []` lines where something was stored. Stored memories of noise lines
//! count against the junk ratio only. The same precision and recall with the type left out
//! ("any type": the content holds the keywords) are printed beside them, so that a miss of
//! the content and a type other than the labeller's are told apart; the targets are on the
//! typed figures.
//!
//! Earlier messages (`context`) precede the utterance, alternating with the assistant's turn
//! just before it; what the context alone yields was learned when it was said, so it is not
//! counted again.
//!
//! `--verbose` lists every line the rules got wrong: what was expected, what was stored, and
//! the candidates admission turned away with its reason.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use chrono::Utc;
use serde_json::{Value, json};
use thinkus_backends::embed::Embedder;
use thinkus_backends::llm::{LanguageModel, RuleEngine};
use thinkus_common::model::Message;
use thinkus_knowledge_manager::KnowledgeConfig;
use thinkus_knowledge_manager::learn::{Admission, Extracted, admit, extraction_call, parse_candidates};
use thinkus_knowledge_manager::learned::LearnedExtraction;

use super::say;
use super::stats::{percentile_ms, ratio};
use crate::config::Config;

/// Counts for one language (or overall). `thinkus train extract` scores its choices with it
/// too, so that its figures are the bench's.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Score {
    pub lines: usize,
    pub stored: usize,
    pub stored_matched: usize,
    pub expected: usize,
    pub expected_found: usize,
    pub noise_lines: usize,
    pub noise_stored: usize,
    /// Memories stored from lines labelled "store nothing".
    pub noise_memories: usize,
    /// Stored memories holding an expected item's keywords, whatever their type.
    pub stored_content_matched: usize,
    /// Expected items whose keywords a stored memory holds, whatever its type.
    pub expected_content_found: usize,
}

impl Score {
    /// One line's counts: what was stored against what the line expects.
    pub fn of_line(expected: &[Expected], stored: &[Extracted]) -> Self {
        let mut score = Score {
            lines: 1,
            ..Default::default()
        };
        if expected.is_empty() {
            score.noise_lines = 1;
            score.noise_stored = usize::from(!stored.is_empty());
            score.noise_memories = stored.len();
        } else {
            score.stored = stored.len();
            score.stored_matched = stored.iter().filter(|s| expected.iter().any(|e| e.matches(s))).count();
            score.expected = expected.len();
            score.expected_found = expected.iter().filter(|e| stored.iter().any(|s| e.matches(s))).count();
            score.stored_content_matched = stored
                .iter()
                .filter(|s| expected.iter().any(|e| e.held_in(&s.content)))
                .count();
            score.expected_content_found = expected
                .iter()
                .filter(|e| stored.iter().any(|s| e.held_in(&s.content)))
                .count();
        }
        score
    }

    pub fn add(&mut self, other: &Score) {
        self.lines += other.lines;
        self.stored += other.stored;
        self.stored_matched += other.stored_matched;
        self.expected += other.expected;
        self.expected_found += other.expected_found;
        self.noise_lines += other.noise_lines;
        self.noise_stored += other.noise_stored;
        self.noise_memories += other.noise_memories;
        self.stored_content_matched += other.stored_content_matched;
        self.expected_content_found += other.expected_content_found;
    }

    pub fn precision(&self) -> f64 {
        ratio(self.stored_matched, self.stored, 1.0)
    }

    pub fn recall(&self) -> f64 {
        ratio(self.expected_found, self.expected, 1.0)
    }

    pub fn junk_ratio(&self) -> f64 {
        ratio(self.noise_stored, self.noise_lines, 0.0)
    }

    /// Precision with the type left out: what was stored holds what was expected, whichever of
    /// the twelve types it was given. The gap to [`Score::precision`] is the typing's.
    pub fn content_precision(&self) -> f64 {
        ratio(self.stored_content_matched, self.stored, 1.0)
    }

    /// Recall with the type left out.
    pub fn content_recall(&self) -> f64 {
        ratio(self.expected_content_found, self.expected, 1.0)
    }

    /// Precision counting the memories stored from noise lines as wrong too.
    pub fn precision_with_noise(&self) -> f64 {
        ratio(self.stored_matched, self.stored + self.noise_memories, 1.0)
    }
}

/// An expected memory: its type and the keywords its content must hold.
pub(crate) struct Expected {
    pub memory_type: String,
    pub keywords: Vec<String>,
}

impl Expected {
    /// An item of one type and one keyword.
    #[cfg(test)]
    pub fn one(memory_type: &str, keyword: &str) -> Self {
        Self {
            memory_type: memory_type.into(),
            keywords: vec![keyword.into()],
        }
    }

    /// Whether `text` holds every keyword (case-insensitive).
    pub fn held_in(&self, text: &str) -> bool {
        let text = text.to_lowercase();
        self.keywords.iter().all(|k| text.contains(&k.to_lowercase()))
    }

    pub fn matches(&self, stored: &Extracted) -> bool {
        stored.memory_type.as_str() == self.memory_type && self.held_in(&stored.content)
    }
}

/// One line of a labelled extraction file (format in datasets/README.md).
pub(crate) struct Labelled {
    pub lang: String,
    pub utterance: String,
    /// The earlier messages, alternating, ending with the assistant's turn before the utterance.
    pub context: Vec<String>,
    pub expected: Vec<Expected>,
}

impl Labelled {
    pub fn parse(line: &str) -> anyhow::Result<Self> {
        let item: Value = serde_json::from_str(line).context("not JSON")?;
        let strings = |value: &Value| -> Vec<String> {
            value
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        Ok(Self {
            lang: item["lang"].as_str().unwrap_or("?").to_string(),
            utterance: item["text"].as_str().context("no text")?.to_string(),
            context: strings(&item["context"]),
            expected: item["expected"]
                .as_array()
                .context("no expected list")?
                .iter()
                .map(|e| Expected {
                    memory_type: e["type"].as_str().unwrap_or_default().to_string(),
                    keywords: strings(&e["keywords"]),
                })
                .collect(),
        })
    }

    /// The conversation as `learn` gets it: the context, then the utterance.
    pub fn messages(&self) -> Vec<Message> {
        let message = |role: &str, content: &str, index: usize| Message {
            role: role.to_string(),
            content: content.to_string(),
            speaker: None,
            created_at: Utc::now(),
            index: index as u32,
        };
        let turns = self.context.len();
        self.context
            .iter()
            .enumerate()
            .map(|(i, content)| {
                let role = if (turns - i) % 2 == 1 { "assistant" } else { "user" };
                message(role, content, i)
            })
            .chain([message("user", &self.utterance, turns)])
            .collect()
    }
}

/// What the rules and admission would store from a conversation, and what admission turned
/// away (with its decision, for `--verbose`).
async fn stored(
    engine: &RuleEngine,
    learned: Option<&(LearnedExtraction, std::sync::Arc<dyn Embedder>)>,
    config: &KnowledgeConfig,
    messages: &[Message],
) -> anyhow::Result<(Vec<Extracted>, Vec<(Extracted, Admission)>)> {
    if messages.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let call = extraction_call(messages, "pm", Some("bench"));
    let answer = match learned {
        Some((learned, embedder)) => learned
            .extract(embedder.as_ref(), &call.input)
            .await
            .map_err(|err| anyhow::anyhow!("learned extraction failed: {err}"))?
            .to_string(),
        None => {
            engine
                .complete(call)
                .await
                .map_err(|err| anyhow::anyhow!("rule extraction failed: {err}"))?
                .text
        }
    };
    let mut written = Vec::new();
    let mut turned_away = Vec::new();
    for candidate in parse_candidates(&answer) {
        match admit(config, &candidate, &[]).0 {
            Admission::Write => written.push(candidate),
            other => turned_away.push((candidate, other)),
        }
    }
    Ok((written, turned_away))
}

pub async fn run(config: Config, data: &Path, verbose: bool, rules_only: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(data).with_context(|| format!("cannot read {}", data.display()))?;
    let engine = RuleEngine::new();
    thinkus_knowledge_manager::rules::register(&engine);
    let learned = if rules_only {
        None
    } else {
        let learned = LearnedExtraction::builtin().context("the knowledge manager's built-in weight file")?;
        let embedder = thinkus_backends::open_embedder(&config.embedder, &config.server.models_dir)?;
        anyhow::ensure!(
            learned.reads(embedder.as_ref()),
            "embedder.uri: the learned head reads {} vectors, not {} (or pass --rules-only)",
            learned.embedder,
            embedder.name()
        );
        Some((learned, embedder))
    };
    let engine_name = if rules_only {
        "rules"
    } else {
        "rules + learned clause head"
    };
    let mut times = Vec::new();
    let config = KnowledgeConfig::default();
    let learned = learned.as_ref();
    let mut by_lang: BTreeMap<String, Score> = BTreeMap::new();
    let started = std::time::Instant::now();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let labelled = Labelled::parse(line).with_context(|| format!("line {}", number + 1))?;
        let mut messages = labelled.messages();
        let said = messages.pop().context("the utterance")?;
        let (earlier, _) = stored(&engine, learned, &config, &messages).await?;
        messages.push(said);
        let timed = std::time::Instant::now();
        let (mut found, turned_away) = stored(&engine, learned, &config, &messages).await?;
        if labelled.context.is_empty() {
            times.push(timed.elapsed());
        }
        found.retain(|c| !earlier.iter().any(|e| e.content == c.content));

        let (expected, utterance) = (&labelled.expected, &labelled.utterance);
        let score = Score::of_line(expected, &found);
        let wrong =
            score.noise_stored > 0 || score.stored_matched < score.stored || score.expected_found < score.expected;
        if verbose && wrong {
            let want: Vec<String> = expected
                .iter()
                .map(|e| format!("{}{:?}", e.memory_type, e.keywords))
                .collect();
            let got: Vec<String> = found
                .iter()
                .map(|f| format!("{}:{}", f.memory_type.as_str(), f.content))
                .collect();
            say(format!(
                "line {}: {utterance}\n  expected {want:?}\n  stored   {got:?}",
                number + 1
            ));
            for (candidate, decision) in &turned_away {
                say(format!(
                    "  not written {}:{} ({decision:?})",
                    candidate.memory_type.as_str(),
                    candidate.content
                ));
            }
        }
        by_lang.entry(labelled.lang.clone()).or_default().add(&score);
    }
    // One row of the table per language, then the whole set.
    let row = |label: &str, score: &Score| {
        format!(
            "{label:<8} {:>6} {:>10.3} {:>8.3} {:>11.3} {:>7} {:>20.3} {:>17.3}",
            score.lines,
            score.precision(),
            score.recall(),
            score.junk_ratio(),
            score.stored,
            score.content_precision(),
            score.content_recall()
        )
    };
    let mut overall = Score::default();
    say(format!(
        "{:<8} {:>6} {:>10} {:>8} {:>11} {:>7} {:>20} {:>17}",
        "lang", "lines", "precision", "recall", "junk_ratio", "stored", "precision (any type)", "recall (any type)"
    ));
    for (lang, score) in &by_lang {
        overall.add(score);
        say(row(lang, score));
    }
    say(row("overall", &overall));
    say(format!(
        "{} lines in {:.2}s ({engine_name}); targets: precision >= 0.9, recall >= 0.8, junk_ratio <= 0.02, in each language",
        overall.lines,
        started.elapsed().as_secs_f64()
    ));
    let p50 = percentile_ms(&times, 0.5);
    say(format!(
        "extraction and admission per message (lines without context, embedding included): p50 {p50:.1} ms, p95 {:.1} ms (target p50 <= 30 ms)",
        percentile_ms(&times, 0.95)
    ));
    let round = |v: f64| (v * 10_000.0).round() / 10_000.0;
    say(json!({
        "engine": engine_name,
        "precision": round(overall.precision()),
        "recall": round(overall.recall()),
        "junk_ratio": round(overall.junk_ratio()),
        "content_precision": round(overall.content_precision()),
        "content_recall": round(overall.content_recall()),
        "p50_ms": (p50 * 10.0).round() / 10.0,
        "n": overall.lines,
        "by_language": by_lang.iter().map(|(lang, s)| (lang.clone(), json!({
            "precision": round(s.precision()),
            "recall": round(s.recall()),
            "junk_ratio": round(s.junk_ratio()),
            "content_precision": round(s.content_precision()),
            "content_recall": round(s.content_recall()),
            "n": s.lines,
        }))).collect::<BTreeMap<_, _>>(),
    })
    .to_string());
    Ok(())
}

#[cfg(test)]
mod tests {
    use thinkus_common::model::MemoryType;

    use super::*;

    fn stored(memory_type: MemoryType, content: &str) -> Extracted {
        Extracted {
            memory_type,
            content: content.into(),
            summary: None,
            importance: 3,
            tags: Vec::new(),
            relevant_role: None,
            project_specific: false,
            confidence: 1.0,
        }
    }

    #[test]
    fn a_memory_of_another_type_counts_for_the_content_only() {
        let want = [Expected::one("fact", "两万八"), Expected::one("constraint", "两万五")];
        let got = [
            stored(MemoryType::Constraint, "租金一个月两万八 押三付三"),
            stored(MemoryType::Constraint, "价位两万五以内"),
            stored(MemoryType::Issue, "明天还要改bug"),
        ];
        let score = Score::of_line(&want, &got);
        assert_eq!((score.stored_matched, score.expected_found), (1, 1), "typed");
        assert_eq!(
            (score.stored_content_matched, score.expected_content_found),
            (2, 2),
            "any type"
        );
        assert!((score.precision() - 1.0 / 3.0).abs() < 1e-9 && (score.content_precision() - 2.0 / 3.0).abs() < 1e-9);
        assert!((score.recall() - 0.5).abs() < 1e-9 && (score.content_recall() - 1.0).abs() < 1e-9);
        // A noise line's memories count against the junk ratio alone.
        let noise = Score::of_line(&[], &got);
        assert_eq!(
            (noise.stored, noise.stored_content_matched, noise.noise_memories),
            (0, 0, 3)
        );
    }
}
