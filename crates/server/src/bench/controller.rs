//! `thinkus bench controller`: the built-in engine (the rules and the learned heads, or with
//! `--rules-only` the rules alone) on a labelled JSONL file (see datasets/). Prints, overall and
//! per language, the confusion matrix of need, the invalid-retrieval ratio (share of triggered
//! retrievals whose label says memory was not needed; yes and maybe both trigger), the missed
//! ratio (label yes, decision no), mode accuracy (over lines the label says need memory),
//! time-range and type agreement (recall of the labelled types, and the share of decided types
//! that were labelled), and the decision latency. Each message is embedded before its decision
//! is timed (the gateway embeds it once per turn for the retriever too): the embedding's
//! latency is reported apart.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use serde_json::{Value, json};
use thinkus_backends::llm::RuleEngine;
use thinkus_common::model::{EngineChoice, MemoryType, NeedMemory, QueryEmbedding, RetrievalMode, Scope, TimeRange};
use thinkus_memory_controller::api::{ControllerApi, DecideRequest};
use thinkus_memory_controller::learned::Learned;
use thinkus_memory_controller::{ControllerConfig, MemoryController};

use super::say;
use super::stats::percentile_ms;
use crate::config::Config;

fn need_index(need: NeedMemory) -> usize {
    match need {
        NeedMemory::Yes => 0,
        NeedMemory::No => 1,
        NeedMemory::Maybe => 2,
    }
}

fn parse_need(text: &str) -> anyhow::Result<NeedMemory> {
    match text {
        "yes" => Ok(NeedMemory::Yes),
        "no" => Ok(NeedMemory::No),
        "maybe" => Ok(NeedMemory::Maybe),
        other => anyhow::bail!("unknown need {other:?}"),
    }
}

fn day(text: &str) -> Option<DateTime<Utc>> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .map(|d| Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default()))
}

/// Whether a decided range matches a label: "all" and the presets by name; explicit dates when
/// the decided range covers the labelled days (its end may be inclusive or exclusive), since a
/// range around the named day still finds what was said about it.
fn range_matches(decided: TimeRange, label: &Value) -> bool {
    match (decided, label) {
        (TimeRange::All, Value::String(s)) => s == "all",
        (TimeRange::Last7Days, Value::String(s)) => s == "last_7_days",
        (TimeRange::Last30Days, Value::String(s)) => s == "last_30_days",
        (TimeRange::Between { start, end }, Value::Object(range)) => {
            let label_start = range.get("start").and_then(|v| v.as_str()).and_then(day);
            let label_end = range.get("end").and_then(|v| v.as_str()).and_then(day);
            let starts_before = match (start, label_start) {
                (None, _) => true,
                (Some(start), Some(label)) => start.date_naive() <= label.date_naive(),
                (Some(_), None) => false,
            };
            let ends_after = match (end, label_end.or(label_start)) {
                (None, _) => true,
                (Some(end), Some(label)) => end.date_naive() >= label.date_naive(),
                (Some(_), None) => false,
            };
            starts_before && ends_after
        }
        _ => false,
    }
}

/// The figures of some lines (one language, or all).
#[derive(Debug, Default, Clone)]
struct Tally {
    n: usize,
    confusion: [[usize; 3]; 3],
    mode_total: usize,
    mode_right: usize,
    range_total: usize,
    range_right: usize,
    type_total: usize,
    type_hit: usize,
    type_given: usize,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

impl Tally {
    fn invalid(&self) -> f64 {
        let c = &self.confusion;
        let triggered: usize = (0..3).map(|label| c[label][0] + c[label][2]).sum();
        ratio(c[1][0] + c[1][2], triggered)
    }

    fn missed(&self) -> f64 {
        ratio(self.confusion[0][1], self.confusion[0].iter().sum())
    }

    fn json(&self) -> Value {
        let round = |v: f64| (v * 10_000.0).round() / 10_000.0;
        json!({
            "invalid_ratio": round(self.invalid()),
            "missed_ratio": round(self.missed()),
            "mode_accuracy": round(ratio(self.mode_right, self.mode_total)),
            "time_range_agreement": round(ratio(self.range_right, self.range_total)),
            "type_recall": round(ratio(self.type_hit, self.type_total)),
            "type_precision": round(if self.type_given == 0 { 1.0 } else { ratio(self.type_hit, self.type_given) }),
            "n": self.n,
        })
    }

    fn row(&self, name: &str) -> String {
        format!(
            "{name:<8} {:>5} {:>8.3} {:>7.3} {:>6.3} {:>6.3} {:>8.3} {:>7.3}",
            self.n,
            self.invalid(),
            self.missed(),
            ratio(self.mode_right, self.mode_total),
            ratio(self.range_right, self.range_total),
            ratio(self.type_hit, self.type_total),
            if self.type_given == 0 {
                1.0
            } else {
                ratio(self.type_hit, self.type_given)
            },
        )
    }
}

/// One labelled line.
struct Item {
    number: usize,
    lang: String,
    value: Value,
    message: String,
}

pub async fn run(
    config: Config,
    data: &Path,
    now: DateTime<Utc>,
    verbose: bool,
    rules_only: bool,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(data).with_context(|| format!("cannot read {}", data.display()))?;
    let mut items = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).with_context(|| format!("line {}: not JSON", number + 1))?;
        let message = value["text"]
            .as_str()
            .with_context(|| format!("line {}: no text", number + 1))?
            .to_string();
        items.push(Item {
            number: number + 1,
            lang: value["lang"].as_str().unwrap_or("?").to_string(),
            value,
            message,
        });
    }
    anyhow::ensure!(!items.is_empty(), "{} has no labelled lines", data.display());
    let controller = MemoryController::new(ControllerConfig::default(), RuleEngine::new(), None);
    let mut embedding_times: Vec<Duration> = Vec::new();
    let mut vectors: HashMap<String, Vec<f32>> = HashMap::new();
    let mut embedder_name = String::new();
    let (controller, engine) = if rules_only {
        (controller, "rules")
    } else {
        let learned = Learned::builtin().context("the controller's built-in weight file")?;
        let embedder = thinkus_backends::open_embedder(&config.embedder, &config.server.models_dir)?;
        anyhow::ensure!(
            embedder.name() == learned.embedder,
            "embedder.uri: the learned heads read {} vectors, not {} (or pass --rules-only)",
            learned.embedder,
            embedder.name()
        );
        anyhow::ensure!(
            learned.prefix == "query",
            "the heads read {} vectors; the gateway sends the controller query vectors",
            learned.prefix
        );
        // Each message embedded as the gateway does (once, as a query), sent with the request.
        embedder_name = embedder.name();
        for item in &items {
            if vectors.contains_key(&item.message) {
                continue;
            }
            let started = Instant::now();
            let vector = embedder.embed_query(&item.message).await?;
            embedding_times.push(started.elapsed());
            vectors.insert(item.message.clone(), vector);
        }
        (controller.with_learned(learned, None), "rules + learned heads")
    };
    let mut by_lang: BTreeMap<String, Tally> = BTreeMap::new();
    let mut latencies = Vec::new();
    for item in &items {
        let number = item.number;
        let message = item.message.as_str();
        let item_value = &item.value;
        let label =
            parse_need(item_value["need"].as_str().unwrap_or_default()).with_context(|| format!("line {number}"))?;
        let context = &item_value["context"];
        let recent: Vec<String> = context["recent_messages"]
            .as_array()
            .map(|v| v.iter().filter_map(|m| m.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let request = DecideRequest {
            scope: Scope::new("bench", "assistant").with_project("bench-project"),
            message: message.to_string(),
            message_count: context["message_count"].as_u64().unwrap_or(5) as u32,
            recent_messages: recent,
            engine: EngineChoice::Rules,
            now: Some(now),
            query_embedding: vectors.get(message).map(|values| QueryEmbedding {
                model: embedder_name.clone(),
                values: values.clone(),
            }),
            ..Default::default()
        };
        let started = Instant::now();
        let decision = controller.decide(request).await?;
        latencies.push(started.elapsed());
        let mut tally = Tally {
            n: 1,
            ..Default::default()
        };
        tally.confusion[need_index(label)][need_index(decision.need_memory)] += 1;
        let wrong_need = match label {
            NeedMemory::No => decision.need_memory != NeedMemory::No,
            _ => decision.need_memory == NeedMemory::No,
        };
        if verbose && wrong_need {
            say(format!(
                "need {:?} -> {:?}: {message} ({})",
                label, decision.need_memory, decision.reason
            ));
        }
        if label != NeedMemory::No {
            tally.mode_total = 1;
            let expected = match item_value["mode"].as_str() {
                Some("details") => RetrievalMode::Details,
                _ => RetrievalMode::Catalog,
            };
            if expected == decision.retrieval_mode {
                tally.mode_right = 1;
            } else if verbose {
                say(format!(
                    "mode {expected:?} -> {:?} (need {label:?} -> {:?}): {message}",
                    decision.retrieval_mode, decision.need_memory
                ));
            }
            tally.range_total = 1;
            if range_matches(decision.time_range, &item_value["time_range"]) {
                tally.range_right = 1;
            }
            tally.type_given = decision.memory_types.len();
            for expected in item_value["types"].as_array().into_iter().flatten() {
                if let Some(t) = expected.as_str().and_then(|t| t.parse::<MemoryType>().ok()) {
                    tally.type_total += 1;
                    if decision.memory_types.contains(&t) {
                        tally.type_hit += 1;
                    }
                }
            }
        }
        for key in ["all".to_string(), item.lang.clone()] {
            let entry = by_lang.entry(key).or_default();
            entry.n += tally.n;
            for (row, add) in entry.confusion.iter_mut().zip(tally.confusion) {
                for (cell, a) in row.iter_mut().zip(add) {
                    *cell += a;
                }
            }
            entry.mode_total += tally.mode_total;
            entry.mode_right += tally.mode_right;
            entry.range_total += tally.range_total;
            entry.range_right += tally.range_right;
            entry.type_total += tally.type_total;
            entry.type_hit += tally.type_hit;
            entry.type_given += tally.type_given;
        }
    }
    let all = by_lang.get("all").cloned().unwrap_or_default();
    say(format!(
        "controller ({engine}) on {} ({} messages)",
        data.display(),
        all.n
    ));
    say("confusion (rows: label, columns: decision)");
    say(format!("{:>10} {:>6} {:>6} {:>6}", "", "yes", "no", "maybe"));
    for (name, row) in ["yes", "no", "maybe"].iter().zip(all.confusion) {
        say(format!("{name:>10} {:>6} {:>6} {:>6}", row[0], row[1], row[2]));
    }
    say(format!(
        "{:<8} {:>5} {:>8} {:>7} {:>6} {:>6} {:>8} {:>7}",
        "lang", "n", "invalid", "missed", "mode", "range", "types_R", "types_P"
    ));
    for (lang, tally) in by_lang.iter().filter(|(l, _)| l.as_str() != "all") {
        say(tally.row(lang));
    }
    say(all.row("overall"));
    say("targets: invalid <= 0.10, missed <= 0.05, mode >= 0.85, type recall >= 0.7");
    let p50 = percentile_ms(&latencies, 0.5) * 1000.0;
    let p99 = percentile_ms(&latencies, 0.99) * 1000.0;
    say(format!(
        "decision latency: p50 {p50:.0} us, p99 {p99:.0} us (target p99 <= 1000 us; the embedding excluded)"
    ));
    let embed_p50 = percentile_ms(&embedding_times, 0.5);
    if !embedding_times.is_empty() {
        say(format!(
            "message embedding (once per turn, shared with the retriever): p50 {embed_p50:.1} ms"
        ));
    }
    let mut figures = all.json();
    figures["engine"] = json!(engine);
    figures["p50_us"] = json!(p50.round());
    figures["p99_us"] = json!(p99.round());
    figures["embedding_p50_ms"] = json!((embed_p50 * 10.0).round() / 10.0);
    figures["by_language"] = json!(
        by_lang
            .iter()
            .filter(|(l, _)| l.as_str() != "all")
            .map(|(l, t)| (l.clone(), t.json()))
            .collect::<BTreeMap<_, _>>()
    );
    say(figures.to_string());
    Ok(())
}
