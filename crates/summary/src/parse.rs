//! Reading a summary answer: the JSON object is found however it is wrapped (fences, prose, a
//! cut-off answer whose complete fields are kept), and every field is read on its own, so a
//! malformed field loses only itself. A field the answer does not carry keeps its previous
//! value.

use serde_json::{Map, Value};
use thinkus_backends::llm::json::extract_json;
use thinkus_common::model::{ArtifactRef, Decision, DecisionConfidence};

use crate::api::SummaryContent;

/// The fields an answer carried; `None` for those it did not (or that were unreadable).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedSummary {
    pub goal: Option<String>,
    pub constraints: Option<Vec<String>>,
    pub decisions: Option<Vec<Decision>>,
    pub progress: Option<Vec<String>>,
    pub artifacts: Option<Vec<ArtifactRef>>,
    pub next_actions: Option<Vec<String>>,
    pub risks: Option<Vec<String>>,
    pub open_questions: Option<Vec<String>>,
}

impl ParsedSummary {
    /// How many fields were read.
    pub fn fields(&self) -> usize {
        [
            self.goal.is_some(),
            self.constraints.is_some(),
            self.decisions.is_some(),
            self.progress.is_some(),
            self.artifacts.is_some(),
            self.next_actions.is_some(),
            self.risks.is_some(),
            self.open_questions.is_some(),
        ]
        .into_iter()
        .filter(|b| *b)
        .count()
    }

    /// The answer over the previous content: what it did not carry is kept.
    pub fn over(self, previous: SummaryContent) -> SummaryContent {
        SummaryContent {
            goal: self.goal.unwrap_or(previous.goal),
            constraints: self.constraints.unwrap_or(previous.constraints),
            decisions: self.decisions.unwrap_or(previous.decisions),
            progress: self.progress.unwrap_or(previous.progress),
            artifacts: self.artifacts.unwrap_or(previous.artifacts),
            next_actions: self.next_actions.unwrap_or(previous.next_actions),
            risks: self.risks.unwrap_or(previous.risks),
            open_questions: self.open_questions.unwrap_or(previous.open_questions),
        }
    }
}

/// Reads an answer; `None` when it holds no summary object at all.
pub fn parse(text: &str) -> Option<ParsedSummary> {
    let value = match extract_json(text) {
        Some(Value::Object(map)) => Value::Object(map),
        Some(Value::Array(items)) => items.into_iter().find(Value::is_object)?,
        _ => repair_truncated_object(text)?,
    };
    let map = value.as_object()?;
    let parsed = ParsedSummary {
        goal: field(map, &["goal"]).and_then(|v| v.as_str().map(|s| s.trim().to_string())),
        constraints: field(map, &["constraints"]).and_then(strings),
        decisions: field(map, &["decisions"]).and_then(decisions),
        progress: field(map, &["progress"]).and_then(strings),
        artifacts: field(map, &["artifacts"]).and_then(artifacts),
        next_actions: field(map, &["next_actions", "nextActions"]).and_then(strings),
        risks: field(map, &["risks"]).and_then(strings),
        open_questions: field(map, &["open_questions", "openQuestions"]).and_then(strings),
    };
    (parsed.fields() > 0).then_some(parsed)
}

fn field<'a>(map: &'a Map<String, Value>, names: &[&str]) -> Option<&'a Value> {
    names.iter().find_map(|n| map.get(*n)).filter(|v| !v.is_null())
}

fn strings(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string))
                .collect(),
        ),
        Value::String(s) if !s.trim().is_empty() => Some(vec![s.trim().to_string()]),
        _ => None,
    }
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default()
        .to_string()
}

fn decisions(value: &Value) -> Option<Vec<Decision>> {
    let items = value.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|item| match item {
                Value::String(what) if !what.trim().is_empty() => Some(Decision {
                    what: what.trim().to_string(),
                    why: String::new(),
                    who: String::new(),
                    confidence: DecisionConfidence::Medium,
                }),
                Value::Object(_) => {
                    let what = text(item, "what");
                    (!what.is_empty()).then(|| Decision {
                        what,
                        why: text(item, "why"),
                        who: text(item, "who"),
                        confidence: match text(item, "confidence").to_lowercase().as_str() {
                            "high" | "高" => DecisionConfidence::High,
                            "low" | "低" => DecisionConfidence::Low,
                            _ => DecisionConfidence::Medium,
                        },
                    })
                }
                _ => None,
            })
            .collect(),
    )
}

fn artifacts(value: &Value) -> Option<Vec<ArtifactRef>> {
    let items = value.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|item| match item {
                Value::String(reference) if !reference.trim().is_empty() => Some(ArtifactRef {
                    reference: reference.trim().to_string(),
                    ..Default::default()
                }),
                Value::Object(_) => {
                    let reference = text(item, "ref");
                    (!reference.is_empty()).then(|| ArtifactRef {
                        reference,
                        locator: text(item, "locator"),
                        desc: text(item, "desc"),
                    })
                }
                _ => None,
            })
            .collect(),
    )
}

/// The complete top-level fields of an object cut off mid-way (a model that ran out of
/// tokens): the text up to the last comma between two top-level fields, closed.
fn repair_truncated_object(text: &str) -> Option<Value> {
    let start = text.find('{')?;
    let body = &text[start..];
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    let mut last_field_end = None;
    for (i, c) in body.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 1 => last_field_end = Some(i),
            _ => {}
        }
    }
    let end = last_field_end?;
    serde_json::from_str::<Value>(&format!("{}}}", &body[..end]))
        .ok()
        .filter(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fenced_answers() {
        let parsed = parse(
            "Here it is:\n```json\n{\"goal\": \"plan\", \"decisions\": [{\"what\": \"use Go\", \"why\": \"speed\", \"who\": \"cto\", \"confidence\": \"high\"}, {\"why\": \"no what\"}], \"risks\": \"one risk\"}\n```",
        )
        .expect("parsed");
        assert_eq!(parsed.goal.as_deref(), Some("plan"));
        let decisions = parsed.decisions.clone().unwrap();
        assert_eq!(decisions.len(), 1);
        assert_eq!(decisions[0].confidence, DecisionConfidence::High);
        assert_eq!(parsed.risks, Some(vec!["one risk".to_string()]));
        assert_eq!(parsed.progress, None);
    }

    #[test]
    fn keeps_complete_fields_of_a_cut_answer() {
        let parsed = parse("{\"goal\": \"ship v2\", \"progress\": [\"done A\"], \"next_actions\": [\"do B\", \"do")
            .expect("partial answer kept");
        assert_eq!(parsed.goal.as_deref(), Some("ship v2"));
        assert_eq!(parsed.progress, Some(vec!["done A".to_string()]));
        assert_eq!(parsed.next_actions, None);
        let previous = SummaryContent {
            next_actions: vec!["old step".into()],
            ..Default::default()
        };
        assert_eq!(parsed.over(previous).next_actions, vec!["old step".to_string()]);
    }

    #[test]
    fn refuses_answers_without_a_summary() {
        assert!(parse("I cannot help with that.").is_none());
        assert!(parse("{\"unrelated\": 1}").is_none());
        assert!(parse("<html>").is_none());
    }
}
