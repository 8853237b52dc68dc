//! Reading LoCoMo files (Maharana et al., 2024): conversations in sessions, each with a date,
//! and questions with the dialogue turns that answer them. The format is described in
//! shared/bench/locomo/README.md; any file of that format is accepted.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use anyhow::Context;
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use serde_json::Value;

/// One turn of a conversation.
#[derive(Debug, Clone)]
pub struct Turn {
    pub dia_id: String,
    pub speaker: String,
    pub text: String,
    pub caption: Option<String>,
    pub at: DateTime<Utc>,
}

/// One session: its number, its date and its turns in order.
#[derive(Debug, Clone)]
pub struct Session {
    pub number: u32,
    pub date: DateTime<Utc>,
    pub turns: Vec<Turn>,
    /// The human-annotated events of the session (event_summary), when present.
    pub events: Vec<String>,
}

/// The name of a LoCoMo question category (1-4; 5, adversarial, is never scored).
pub fn category_name(category: u32) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "unknown",
    }
}

/// A question about a conversation.
#[derive(Debug, Clone)]
pub struct Question {
    pub question: String,
    pub category: u32,
    /// Evidence turn ids that exist in the conversation.
    pub evidence: Vec<String>,
}

/// One sample: a conversation and its questions.
#[derive(Debug, Clone)]
pub struct Sample {
    pub id: String,
    pub speakers: (String, String),
    pub sessions: Vec<Session>,
    pub questions: Vec<Question>,
}

impl Sample {
    pub fn turns(&self) -> impl Iterator<Item = &Turn> {
        self.sessions.iter().flat_map(|s| s.turns.iter())
    }
}

/// "1:56 pm on 8 May, 2023" and the few variants the files contain.
pub fn parse_date(text: &str) -> Option<DateTime<Utc>> {
    let cleaned = text.trim().replace("  ", " ");
    for format in [
        "%I:%M %p on %d %B, %Y",
        "%I:%M %p on %d %b, %Y",
        "%I:%M %p on %B %d, %Y",
        "%H:%M on %d %B, %Y",
    ] {
        if let Ok(parsed) = NaiveDateTime::parse_from_str(&cleaned, format) {
            return Some(Utc.from_utc_datetime(&parsed));
        }
    }
    None
}

/// Splits and repairs evidence ids ("D8:6; D9:17", "D:11:26") and keeps those that exist.
pub fn normalize_evidence(raw: &[Value], known: &HashSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for value in raw {
        let Some(text) = value.as_str() else { continue };
        for part in text.split([';', ',', ' ']) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let repaired = part.replacen("D:", "D", 1);
            if known.contains(&repaired) && !out.contains(&repaired) {
                out.push(repaired);
            }
        }
    }
    out
}

/// Reads a LoCoMo file.
pub fn load(path: &Path) -> anyhow::Result<Vec<Sample>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let items = value
        .as_array()
        .with_context(|| format!("{}: expected a JSON list of samples", path.display()))?;
    let mut samples = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let id = item["sample_id"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("sample-{index}"));
        let conversation = &item["conversation"];
        let speakers = (
            conversation["speaker_a"].as_str().unwrap_or("A").to_string(),
            conversation["speaker_b"].as_str().unwrap_or("B").to_string(),
        );
        let mut by_number: BTreeMap<u32, Session> = BTreeMap::new();
        if let Some(map) = conversation.as_object() {
            for (key, value) in map {
                let Some(number) = key.strip_prefix("session_").and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                let Some(turns) = value.as_array() else { continue };
                let date_text = conversation[format!("session_{number}_date_time")]
                    .as_str()
                    .unwrap_or_default();
                let date = parse_date(date_text).unwrap_or_else(|| {
                    // An unreadable date keeps the sessions in order.
                    Utc.timestamp_opt(1_600_000_000 + i64::from(number) * 86_400, 0)
                        .single()
                        .unwrap_or_default()
                });
                let turns = turns
                    .iter()
                    .enumerate()
                    .filter_map(|(i, turn)| {
                        Some(Turn {
                            dia_id: turn["dia_id"].as_str()?.to_string(),
                            speaker: turn["speaker"].as_str().unwrap_or("?").to_string(),
                            text: turn["text"].as_str().unwrap_or_default().to_string(),
                            caption: turn["blip_caption"]
                                .as_str()
                                .map(str::to_string)
                                .filter(|c| !c.is_empty()),
                            // Turns of a session keep their order a second apart.
                            at: date + chrono::Duration::seconds(i as i64),
                        })
                    })
                    .collect();
                let events = item["event_summary"][format!("events_session_{number}")]
                    .as_object()
                    .map(|speakers| {
                        speakers
                            .values()
                            .filter_map(|v| v.as_array())
                            .flatten()
                            .filter_map(|e| e.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                by_number.insert(
                    number,
                    Session {
                        number,
                        date,
                        turns,
                        events,
                    },
                );
            }
        }
        let sessions: Vec<Session> = by_number.into_values().collect();
        let known: HashSet<String> = sessions
            .iter()
            .flat_map(|s| s.turns.iter().map(|t| t.dia_id.clone()))
            .collect();
        let questions = item["qa"]
            .as_array()
            .map(|qa| {
                qa.iter()
                    .filter_map(|q| {
                        Some(Question {
                            question: q["question"].as_str()?.to_string(),
                            category: q["category"].as_u64()? as u32,
                            evidence: normalize_evidence(
                                q["evidence"].as_array().map(Vec::as_slice).unwrap_or(&[]),
                                &known,
                            ),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        samples.push(Sample {
            id,
            speakers,
            sessions,
            questions,
        });
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse() {
        let d = parse_date("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(d.to_rfc3339(), "2023-05-08T13:56:00+00:00");
        assert!(parse_date("10:37 am on 27 June, 2023").is_some());
        assert!(parse_date("garbage").is_none());
    }

    #[test]
    fn evidence_is_repaired() {
        let known: HashSet<String> = ["D8:6", "D9:17", "D11:26", "D1:3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let raw = vec![
            Value::from("D8:6; D9:17"),
            Value::from("D:11:26"),
            Value::from("D99:1"),
            Value::from("D1:3"),
        ];
        assert_eq!(
            normalize_evidence(&raw, &known),
            vec!["D8:6", "D9:17", "D11:26", "D1:3"]
        );
    }
}
