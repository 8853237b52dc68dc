//! `thinkus bench controller`: the rule engine on a labelled JSONL file (see datasets/). Prints
//! the confusion matrix of need, the invalid-retrieval ratio (share of triggered retrievals
//! whose label says memory was not needed; yes and maybe both trigger), the missed ratio (label
//! yes, decision no), mode accuracy (over lines the label says need memory), time-range and
//! type agreement, and the decision latency.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use serde_json::{Value, json};
use thinkus_backends::llm::RuleEngine;
use thinkus_common::model::{EngineChoice, MemoryType, NeedMemory, RetrievalMode, Scope, TimeRange};
use thinkus_memory_controller::api::{ControllerApi, DecideRequest};
use thinkus_memory_controller::{ControllerConfig, MemoryController};

use super::say;
use super::stats::percentile_ms;

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

pub async fn run(data: &Path, now: DateTime<Utc>, verbose: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(data).with_context(|| format!("cannot read {}", data.display()))?;
    let controller = MemoryController::new(ControllerConfig::default(), RuleEngine::new(), None);
    let mut confusion = [[0usize; 3]; 3];
    let (mut mode_total, mut mode_right) = (0usize, 0usize);
    let (mut range_total, mut range_right) = (0usize, 0usize);
    let (mut type_total, mut type_hit) = (0usize, 0usize);
    let mut latencies = Vec::new();
    let mut n = 0;
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let item: Value = serde_json::from_str(line).with_context(|| format!("line {}: not JSON", number + 1))?;
        let message = item["text"]
            .as_str()
            .with_context(|| format!("line {}: no text", number + 1))?;
        let label =
            parse_need(item["need"].as_str().unwrap_or_default()).with_context(|| format!("line {}", number + 1))?;
        let context = &item["context"];
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
            ..Default::default()
        };
        let started = Instant::now();
        let decision = controller.decide(request).await?;
        latencies.push(started.elapsed());
        n += 1;
        confusion[need_index(label)][need_index(decision.need_memory)] += 1;
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
            mode_total += 1;
            let expected = match item["mode"].as_str() {
                Some("details") => RetrievalMode::Details,
                _ => RetrievalMode::Catalog,
            };
            if expected == decision.retrieval_mode {
                mode_right += 1;
            } else if verbose {
                say(format!(
                    "mode {expected:?} -> {:?} (need {label:?} -> {:?}): {message}",
                    decision.retrieval_mode, decision.need_memory
                ));
            }
            range_total += 1;
            if range_matches(decision.time_range, &item["time_range"]) {
                range_right += 1;
            }
            for expected in item["types"].as_array().into_iter().flatten() {
                if let Some(t) = expected.as_str().and_then(|t| t.parse::<MemoryType>().ok()) {
                    type_total += 1;
                    if decision.memory_types.contains(&t) {
                        type_hit += 1;
                    }
                }
            }
        }
    }
    anyhow::ensure!(n > 0, "{} has no labelled lines", data.display());

    let triggered: usize = (0..3).map(|label| confusion[label][0] + confusion[label][2]).sum();
    let invalid = confusion[1][0] + confusion[1][2];
    let needed = confusion[0].iter().sum::<usize>();
    let missed = confusion[0][1];
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    say(format!("controller rules on {} ({n} messages)", data.display()));
    say("confusion (rows: label, columns: decision)");
    say(format!("{:>10} {:>6} {:>6} {:>6}", "", "yes", "no", "maybe"));
    for (name, row) in ["yes", "no", "maybe"].iter().zip(confusion) {
        say(format!("{name:>10} {:>6} {:>6} {:>6}", row[0], row[1], row[2]));
    }
    let invalid_ratio = ratio(invalid, triggered);
    let missed_ratio = ratio(missed, needed);
    let mode_accuracy = ratio(mode_right, mode_total);
    let p50 = percentile_ms(&latencies, 0.5) * 1000.0;
    let p99 = percentile_ms(&latencies, 0.99) * 1000.0;
    say(format!(
        "invalid retrievals: {invalid}/{triggered} = {invalid_ratio:.3} (target <= 0.10)"
    ));
    say(format!(
        "missed: {missed}/{needed} = {missed_ratio:.3} (target <= 0.05)"
    ));
    say(format!("mode accuracy: {mode_right}/{mode_total} = {mode_accuracy:.3}"));
    say(format!(
        "time range agreement: {range_right}/{range_total} = {:.3}; type recall: {type_hit}/{type_total} = {:.3}",
        ratio(range_right, range_total),
        ratio(type_hit, type_total)
    ));
    say(format!(
        "decision latency: p50 {p50:.0} us, p99 {p99:.0} us (target p99 <= 1000 us)"
    ));
    let round = |v: f64| (v * 10_000.0).round() / 10_000.0;
    say(json!({
        "invalid_ratio": round(invalid_ratio),
        "missed_ratio": round(missed_ratio),
        "mode_accuracy": round(mode_accuracy),
        "time_range_agreement": round(ratio(range_right, range_total)),
        "type_recall": round(ratio(type_hit, type_total)),
        "p50_us": p50.round(),
        "p99_us": p99.round(),
        "n": n,
    })
    .to_string());
    Ok(())
}
