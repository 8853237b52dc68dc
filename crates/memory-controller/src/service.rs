//! The memory controller: the built-in engine (the rules, with the learned heads over the
//! message's embedding when they are loaded and a vector is at hand), or the LLM with the
//! design's prompt and strict parsing, falling back to the design's conservative default on
//! any failure.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use serde_json::{Value, json};
use thinkus_backends::embed::Embedder;
use thinkus_backends::llm::{CompletionRequest, LanguageModel, LlmTask, RuleEngine, RuleHandler};
use thinkus_common::ApiError;
use thinkus_common::model::{ControlDecision, EngineChoice, MemoryType, NeedMemory, RetrievalMode, TimeRange};
use thinkus_common::text::detect_language;

use crate::api::{ControllerApi, DecideRequest};
use crate::config::{BudgetTiers, ControllerConfig};
use crate::learned::Learned;
use crate::rules::{self, RuleInput};

/// The controller.
pub struct MemoryController {
    config: ControllerConfig,
    rules: RuleEngine,
    llm: Option<Arc<dyn LanguageModel>>,
    learned: Option<Learned>,
    /// Embeds a message that comes without a vector the heads can read.
    embedder: Option<Arc<dyn Embedder>>,
}

/// The design's prompt (seed 000 section 3.1), with the context the caller gives.
pub fn prompt(request: &DecideRequest) -> String {
    let recent = if request.recent_messages.is_empty() {
        "无".to_string()
    } else {
        request
            .recent_messages
            .iter()
            .rev()
            .take(5)
            .rev()
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ")
    };
    format!(
        r#"分析用户消息，决定是否需要检索记忆。

用户消息: "{message}"

当前上下文:
- 项目ID: {project}
- 高管: {role}
- 会话消息数: {count}
- 最近消息: {recent}

判断规则:
1. 如果用户提到"之前"/"上次"/"我说过"等历史引用 → 需要记忆
2. 如果涉及项目历史决策 → 需要记忆
3. 如果需要个性化建议 → 需要记忆
4. 如果是通用问答或明确的新任务 → 不需要记忆

返回JSON (不要任何其他内容):
{{
  "need_memory": "yes|no|maybe",
  "memory_types": ["project_decision", "user_preference"],
  "retrieval_mode": "catalog|details",
  "budget_tokens": 500,
  "time_range": "last_7_days|last_30_days|all",
  "notes": "简短说明原因（用用户的语言）"
}}"#,
        message = request.message.replace('"', "\\\""),
        project = request.scope.project_id.as_deref().unwrap_or("无"),
        role = request.scope.role_id,
        count = request.message_count,
    )
}

fn time_range_json(range: TimeRange) -> Value {
    match range {
        TimeRange::Last7Days => json!("last_7_days"),
        TimeRange::Last30Days => json!("last_30_days"),
        TimeRange::All => json!("all"),
        TimeRange::Between { start, end } => json!({
            "start": start.map(|t| t.to_rfc3339()),
            "end": end.map(|t| t.to_rfc3339()),
        }),
    }
}

/// The rules' answer in the JSON the prompt asks for.
fn rules_answer(input: &Value, budgets: BudgetTiers) -> Result<String, thinkus_backends::llm::LlmError> {
    let message = input["message"].as_str().unwrap_or_default();
    let recent: Vec<String> = input["recent_messages"]
        .as_array()
        .map(|v| v.iter().filter_map(|m| m.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let hints: Vec<MemoryType> = input["type_hints"]
        .as_array()
        .map(|v| v.iter().filter_map(|t| t.as_str()?.parse().ok()).collect())
        .unwrap_or_default();
    let now = input["now"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(Utc::now);
    let decision = rules::decide(&RuleInput {
        message,
        message_count: input["message_count"].as_u64().unwrap_or(0) as u32,
        recent_messages: &recent,
        project_id: input["project_id"].as_str(),
        type_hints: &hints,
        now,
        budgets,
    });
    let need = match decision.need_memory {
        NeedMemory::Yes => "yes",
        NeedMemory::No => "no",
        NeedMemory::Maybe => "maybe",
    };
    let mode = match decision.retrieval_mode {
        RetrievalMode::Catalog => "catalog",
        RetrievalMode::Details => "details",
    };
    Ok(json!({
        "need_memory": need,
        "memory_types": decision.memory_types.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        "retrieval_mode": mode,
        "budget_tokens": decision.budget_tokens,
        "time_range": time_range_json(decision.time_range),
        "notes": decision.reason,
        "signals": decision.signals,
    })
    .to_string())
}

/// Parses a decision strictly: every field must be present and valid, or nothing is taken.
pub fn parse_decision(text: &str) -> Result<ControlDecision, String> {
    let value = thinkus_backends::llm::json::extract_json(text).ok_or("no JSON object in the answer")?;
    let need = match value["need_memory"].as_str() {
        Some("yes") => NeedMemory::Yes,
        Some("no") => NeedMemory::No,
        Some("maybe") => NeedMemory::Maybe,
        other => return Err(format!("need_memory is {other:?}")),
    };
    let memory_types = value["memory_types"]
        .as_array()
        .ok_or("memory_types is not a list")?
        .iter()
        .map(|t| {
            t.as_str()
                .and_then(|s| s.parse::<MemoryType>().ok())
                .ok_or_else(|| format!("unknown memory type {t}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let retrieval_mode = match value["retrieval_mode"].as_str() {
        Some("catalog") => RetrievalMode::Catalog,
        Some("details") => RetrievalMode::Details,
        other => return Err(format!("retrieval_mode is {other:?}")),
    };
    let budget_tokens = value["budget_tokens"]
        .as_u64()
        .filter(|b| *b <= 32_000)
        .ok_or("budget_tokens is not an integer within 0-32000")? as u32;
    let time_range = match &value["time_range"] {
        Value::String(s) if s == "last_7_days" => TimeRange::Last7Days,
        Value::String(s) if s == "last_30_days" => TimeRange::Last30Days,
        Value::String(s) if s == "all" => TimeRange::All,
        Value::Object(range) => {
            let bound = |key: &str| -> Result<Option<DateTime<Utc>>, String> {
                match range.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => DateTime::parse_from_rfc3339(s)
                        .map(|t| t.with_timezone(&Utc))
                        .or_else(|_| {
                            NaiveDate::parse_from_str(s, "%Y-%m-%d")
                                .map(|d| Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default()))
                        })
                        .map(Some)
                        .map_err(|_| format!("time_range.{key} is not a date: {s}")),
                    Some(other) => Err(format!("time_range.{key} is {other}")),
                }
            };
            let (start, end) = (bound("start")?, bound("end")?);
            if let (Some(s), Some(e)) = (start, end)
                && e < s
            {
                return Err("time_range ends before it starts".into());
            }
            TimeRange::Between { start, end }
        }
        other => return Err(format!("time_range is {other}")),
    };
    let reason = value["notes"].as_str().unwrap_or_default().trim().to_string();
    let signals = value["signals"]
        .as_array()
        .map(|s| s.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    Ok(ControlDecision {
        need_memory: need,
        memory_types,
        retrieval_mode,
        budget_tokens,
        time_range,
        reason,
        engine: String::new(),
        signals,
        language: thinkus_common::model::Language::En,
    })
}

/// The design's conservative default when the LLM fails (seed 000 parseResponse).
pub fn conservative_default(language: thinkus_common::model::Language, why: &str) -> ControlDecision {
    let reason = match language {
        thinkus_common::model::Language::Zh => format!("判断失败，使用保守默认值（{why}）"),
        thinkus_common::model::Language::En => format!("Decision failed, using the conservative default ({why})"),
    };
    ControlDecision {
        need_memory: NeedMemory::Maybe,
        memory_types: Vec::new(),
        retrieval_mode: RetrievalMode::Catalog,
        budget_tokens: 300,
        time_range: TimeRange::Last30Days,
        reason,
        engine: "default".into(),
        signals: vec!["llm_failure".into()],
        language,
    }
}

impl MemoryController {
    pub fn new(config: ControllerConfig, rules: RuleEngine, llm: Option<Arc<dyn LanguageModel>>) -> Self {
        let budgets = config.budgets;
        let handler: Arc<dyn RuleHandler> = Arc::new(move |input: &Value| rules_answer(input, budgets));
        rules.register(LlmTask::Decide, handler);
        // Compiles the rule patterns now rather than on the first message.
        rules::warm_up();
        Self {
            config,
            rules,
            llm,
            learned: None,
            embedder: None,
        }
    }

    /// Adds the learned heads to the built-in engine. Without an embedder, they read only the
    /// vectors callers send; with one, a message that comes without is embedded here.
    pub fn with_learned(mut self, learned: Learned, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.learned = Some(learned);
        self.embedder = embedder;
        self
    }

    /// Whether the learned heads are loaded.
    pub fn is_learned(&self) -> bool {
        self.learned.is_some()
    }

    /// The vector the heads read for a message: the one given when it comes from their
    /// embedder with their prefix, else the controller's own embedding of the message, else
    /// none (the rules decide alone).
    async fn vector(&self, learned: &Learned, message: &str, given: Option<(&str, &[f32])>) -> Option<Vec<f32>> {
        if let Some((model, values)) = given
            && learned.prefix == "query"
            && learned.reads(model, values)
        {
            return Some(values.to_vec());
        }
        let embedder = self.embedder.as_ref().filter(|e| e.name() == learned.embedder)?;
        let embedded = if learned.prefix == "query" {
            embedder.embed_query(message).await
        } else {
            embedder
                .embed_passages(&[message.to_string()])
                .await
                .map(|mut v| v.pop().unwrap_or_default())
        };
        match embedded {
            Ok(values) if learned.reads(&learned.embedder, &values) => Some(values),
            Ok(_) => None,
            Err(err) => {
                tracing::warn!(%err, "the message could not be embedded; the rules decide alone");
                None
            }
        }
    }

    /// The built-in engine with the learned heads, when they are loaded and a vector is at
    /// hand; `None` otherwise.
    async fn learned_decision(
        &self,
        request: &DecideRequest,
        now: chrono::DateTime<Utc>,
        given: Option<(&str, &[f32])>,
    ) -> Option<ControlDecision> {
        let learned = self.learned.as_ref()?;
        let vector = self.vector(learned, &request.message, given).await?;
        let recent: Vec<String> = request.recent_messages.iter().rev().take(20).rev().cloned().collect();
        let input = RuleInput {
            message: &request.message,
            message_count: request.message_count,
            recent_messages: &recent,
            project_id: request.scope.project_id.as_deref(),
            type_hints: &request.type_hints,
            now,
            budgets: self.config.budgets,
        };
        Some(learned.decide(&vector, &input))
    }

    fn validate(&self, request: &DecideRequest) -> Result<(), ApiError> {
        if request.message.trim().is_empty() {
            return Err(ApiError::invalid("message", "is empty"));
        }
        if request.message.len() > self.config.max_message_bytes {
            return Err(ApiError::invalid(
                "message",
                format!("longer than {} bytes", self.config.max_message_bytes),
            ));
        }
        if request.message_count > 1_000_000 {
            return Err(ApiError::invalid(
                "message_count",
                format!(
                    "{} is not a plausible session length (at most 1000000)",
                    request.message_count
                ),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl ControllerApi for MemoryController {
    async fn decide(&self, request: DecideRequest) -> Result<ControlDecision, ApiError> {
        self.validate(&request)?;
        let language = detect_language(&request.message);
        let now = request.now.unwrap_or_else(Utc::now);
        let builtin = match (request.engine, &self.llm) {
            (EngineChoice::Rules, _) | (EngineChoice::Configured, None) => true,
            (EngineChoice::Configured, Some(_)) => !self.config.use_llm,
            (EngineChoice::Llm, _) => false,
        };
        let given = request
            .query_embedding
            .as_ref()
            .map(|e| (e.model.as_str(), e.values.as_slice()));
        if builtin && let Some(mut decision) = self.learned_decision(&request, now, given).await {
            decision.language = language;
            return Ok(decision);
        }
        let (engine, name): (Arc<dyn LanguageModel>, &str) = match (request.engine, &self.llm) {
            (EngineChoice::Llm, None) => {
                return Err(ApiError::failed_precondition(
                    "engine: no LLM is configured (set llm.provider)",
                ));
            }
            (EngineChoice::Llm, Some(llm)) => (llm.clone(), "llm"),
            (EngineChoice::Configured, Some(llm)) if self.config.use_llm => (llm.clone(), "llm"),
            _ => (Arc::new(self.rules.clone()), "rules"),
        };
        let input = json!({
            "message": request.message,
            "message_count": request.message_count,
            "recent_messages": request.recent_messages.iter().rev().take(20).rev().collect::<Vec<_>>(),
            "project_id": request.scope.project_id,
            "type_hints": request.type_hints.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
            "now": now.to_rfc3339(),
        });
        let mut call = CompletionRequest::task(LlmTask::Decide, prompt(&request), input);
        call.max_tokens = 200;
        call.fast = true;
        let answer = tokio::time::timeout(
            Duration::from_millis(self.config.llm_timeout_ms.max(1)),
            engine.complete(call),
        )
        .await;
        let text = match answer {
            Ok(Ok(completion)) => completion.text,
            Ok(Err(err)) => {
                thinkus_common::metrics::METRICS
                    .llm_failures
                    .with_label_values(&["decide"])
                    .inc();
                tracing::warn!(%err, "the decision engine failed; using the conservative default");
                return Ok(conservative_default(language, &err.to_string()));
            }
            Err(_) => {
                thinkus_common::metrics::METRICS
                    .llm_failures
                    .with_label_values(&["decide"])
                    .inc();
                tracing::warn!(
                    timeout_ms = self.config.llm_timeout_ms,
                    "the decision engine timed out; using the conservative default"
                );
                return Ok(conservative_default(language, "timeout"));
            }
        };
        match parse_decision(&text) {
            Ok(mut decision) => {
                decision.engine = name.into();
                decision.language = language;
                if decision.reason.is_empty() {
                    decision.reason = conservative_default(language, "").reason;
                }
                Ok(decision)
            }
            Err(why) => {
                thinkus_common::metrics::METRICS
                    .llm_failures
                    .with_label_values(&["decide"])
                    .inc();
                tracing::warn!(%why, answer = %text.chars().take(200).collect::<String>(), "unusable decision; using the conservative default");
                Ok(conservative_default(language, &why))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use thinkus_backends::llm::{Completion, LlmError};

    use super::*;

    #[test]
    fn strict_parsing() {
        let good = r#"{"need_memory":"yes","memory_types":["project_decision"],"retrieval_mode":"details","budget_tokens":800,"time_range":"last_7_days","notes":"历史决策"}"#;
        let d = parse_decision(good).unwrap();
        assert_eq!(d.need_memory, NeedMemory::Yes);
        assert_eq!(d.budget_tokens, 800);
        assert!(
            parse_decision(&format!("```json\n{good}\n```")).is_ok(),
            "fenced JSON is fine"
        );
        assert!(parse_decision(r#"{"need_memory":"perhaps"}"#).is_err());
        assert!(
            parse_decision(&good.replace("project_decision", "vibes")).is_err(),
            "unknown type"
        );
        assert!(parse_decision(&good.replace("800", "\"lots\"")).is_err());
        assert!(parse_decision("sure, you need memory").is_err());
    }

    /// A language model that answers with fixed text, fails, or never answers in time.
    #[derive(Debug)]
    enum FakeModel {
        Answer(&'static str),
        Fail,
        Hang,
    }

    #[async_trait]
    impl LanguageModel for FakeModel {
        fn name(&self) -> String {
            "fake".into()
        }

        async fn complete(&self, _request: CompletionRequest) -> Result<Completion, LlmError> {
            match self {
                Self::Answer(text) => Ok(Completion {
                    text: (*text).to_string(),
                    model: "fake".into(),
                    input_tokens: 0,
                    output_tokens: 0,
                }),
                Self::Fail => Err(LlmError::Timeout),
                Self::Hang => {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    Err(LlmError::Timeout)
                }
            }
        }
    }

    const GOOD: &str = r#"{"need_memory":"yes","memory_types":["project_decision"],"retrieval_mode":"details","budget_tokens":800,"time_range":"last_7_days","notes":"refers to last week's decision"}"#;

    fn failures() -> u64 {
        thinkus_common::metrics::METRICS
            .llm_failures
            .with_label_values(&["decide"])
            .get()
    }

    async fn decide_with(model: FakeModel) -> ControlDecision {
        let config = ControllerConfig {
            use_llm: true,
            llm_timeout_ms: 50,
            ..Default::default()
        };
        let controller = MemoryController::new(config, RuleEngine::new(), Some(Arc::new(model)));
        controller
            .decide(DecideRequest {
                message: "What did we decide last week about the database?".into(),
                message_count: 4,
                ..Default::default()
            })
            .await
            .expect("the controller answers")
    }

    fn assert_conservative(decision: &ControlDecision) {
        assert_eq!(decision.need_memory, NeedMemory::Maybe);
        assert_eq!(decision.retrieval_mode, RetrievalMode::Catalog);
        assert_eq!(decision.budget_tokens, 300);
        assert_eq!(decision.time_range, TimeRange::Last30Days);
        assert_eq!(decision.engine, "default");
    }

    #[tokio::test]
    async fn the_llm_engine_takes_good_json() {
        let decision = decide_with(FakeModel::Answer(GOOD)).await;
        assert_eq!(decision.engine, "llm");
        assert_eq!(decision.need_memory, NeedMemory::Yes);
        assert_eq!(decision.memory_types, vec![MemoryType::ProjectDecision]);
        assert_eq!(decision.retrieval_mode, RetrievalMode::Details);
        assert_eq!(decision.budget_tokens, 800);
        assert_eq!(decision.time_range, TimeRange::Last7Days);
    }

    #[tokio::test]
    async fn the_llm_engine_takes_fenced_json() {
        let fenced = Box::leak(format!("Here you go:\n```json\n{GOOD}\n```").into_boxed_str());
        let decision = decide_with(FakeModel::Answer(fenced)).await;
        assert_eq!(decision.engine, "llm");
        assert_eq!(decision.budget_tokens, 800);
    }

    #[tokio::test]
    async fn garbage_errors_and_timeouts_fall_back_and_are_counted() {
        for model in [
            FakeModel::Answer("I think you should probably look at memory, yes"),
            FakeModel::Answer(r#"{"need_memory":"definitely"}"#),
            FakeModel::Fail,
            FakeModel::Hang,
        ] {
            let label = format!("{model:?}");
            let before = failures();
            let decision = decide_with(model).await;
            assert_conservative(&decision);
            // The counter is process-wide and other tests may bump it too.
            assert!(failures() > before, "{label}: the failure is counted");
        }
    }

    #[test]
    fn the_default_is_conservative() {
        let d = conservative_default(thinkus_common::model::Language::Zh, "timeout");
        assert_eq!(d.need_memory, NeedMemory::Maybe);
        assert_eq!(d.retrieval_mode, RetrievalMode::Catalog);
        assert_eq!(d.budget_tokens, 300);
        assert_eq!(d.time_range, TimeRange::Last30Days);
        assert_eq!(d.engine, "default");
    }
}
