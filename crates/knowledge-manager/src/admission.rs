//! Admission (seed 000 evaluateCandidate, seed 004 section 10): noise filters, the score, and
//! what a stable profile fact needs before it becomes long-term.

use std::sync::LazyLock;

use regex::Regex;
use thinkus_common::model::{MemoryType, Scope};
use thinkus_common::text::{char_count, pattern, term_jaccard};

use crate::api::MemoryDraft;
use crate::config::KnowledgeConfig;

/// A candidate as an engine proposed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    pub memory_type: MemoryType,
    pub content: String,
    pub summary: Option<String>,
    pub importance: u8,
    pub tags: Vec<String>,
    pub relevant_role: Option<String>,
    pub project_specific: bool,
    pub confidence: f64,
}

impl Extracted {
    /// A draft as admission sees it: the write chain admits every memory, explicit ones too,
    /// with the draft's own importance and confidence (3 and 1.0 when unset).
    pub fn of(scope: &Scope, draft: &MemoryDraft) -> Self {
        Self {
            memory_type: draft.memory_type,
            content: draft.content.clone(),
            summary: draft.summary.clone(),
            importance: draft.importance.unwrap_or(3),
            tags: draft.tags.clone(),
            relevant_role: None,
            project_specific: scope.project_id.is_some(),
            confidence: draft.confidence.unwrap_or(1.0),
        }
    }
}

/// What admission decides for an extracted candidate.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Not a memory (noise, too long, a low score); the reason says why.
    Reject(String),
    /// Worth keeping but waiting for a person's approval in the candidate queue.
    Queue(String),
    /// Written through the write pipeline.
    Write,
}

/// Admission of one candidate (seed 000 evaluateCandidate; seed 004 sections 9 and 10): the
/// noise filters, the length limit, the score threshold and the profile rules. Returns the
/// decision and the score. The bench (`thinkus bench extract`) scores exactly this function.
pub fn admit(config: &KnowledgeConfig, candidate: &Extracted, injected: &[String]) -> (Admission, f64) {
    let score = score(candidate.memory_type, candidate.importance, candidate.confidence);
    if let Some(reason) = noise(&candidate.content, injected) {
        return (Admission::Reject(reason.into()), score);
    }
    if char_count(&candidate.content) > config.max_content_chars {
        return (Admission::Reject("too long to be a memory".into()), score);
    }
    if score < config.admission_threshold {
        return (
            Admission::Reject(format!(
                "score {score:.2} below the admission threshold {:.2}",
                config.admission_threshold
            )),
            score,
        );
    }
    if is_profile(candidate.memory_type) && !candidate.project_specific {
        // Stable profile facts: cross-project, for the owning role; long-term (global) only
        // once confidence and evidence reach the thresholds (see `promote_profile`).
        if time_sensitive(&candidate.content) {
            return (
                Admission::Queue("profile fact with time-sensitive wording".into()),
                score,
            );
        }
        if candidate.confidence < 0.65 {
            return (
                Admission::Queue(format!(
                    "profile fact with low confidence ({:.2})",
                    candidate.confidence
                )),
                score,
            );
        }
    }
    (Admission::Write, score)
}

/// Why a candidate is noise, or `None` when it is not.
pub fn noise(content: &str, injected: &[String]) -> Option<&'static str> {
    static SCAFFOLDING: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)(工作流执行上下文|当前步骤|输入参数|前序步骤结果|步骤\s*\d+\s*/\s*\d+|workflow (execution )?context|current step|input parameters|previous step result|step \d+ ?(of|/) ?\d+)",
        )
    });
    static PLACEHOLDER: LazyLock<Regex> =
        LazyLock::new(|| pattern(r"\{\{[^}]*\}\}|\$\{[^}]*\}|<%[^%]*%>|\[\[[A-Za-z_.]+\]\]"));
    static TEMPORARY: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)(尚未确认|尚未指定|尚未决定|待确认|待定|还没(确定|决定|想好)|未定|\btbd\b|\btbc\b|to be (decided|confirmed|determined)|not (decided|confirmed) yet|pending confirmation|undecided)",
        )
    });
    static PROCESS: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)^\s*(让我先|我先(来)?|我来(帮你)?(查|看|处理)|正在(处理|查询|生成|调用)|已完成(第|步骤)|工具调用|调用工具|let me (first |now )?(check|look|search|think|start)|i('ll| will) (now |first )?(start|begin|look|check|search|run)|working on it|done\.?$|tool call|calling tool|executing step)",
        )
    });
    static HTML: LazyLock<Regex> = LazyLock::new(|| pattern(r"</?[a-zA-Z][a-zA-Z0-9]*(\s[^<>]*)?>"));
    static URL: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?i)\b(https?://|www\.)\S+"));

    let text = content.trim();
    if SCAFFOLDING.is_match(text) {
        return Some("noise: workflow scaffolding");
    }
    if PLACEHOLDER.is_match(text) {
        return Some("noise: template placeholder");
    }
    if TEMPORARY.is_match(text) {
        return Some("noise: temporary or unconfirmed state");
    }
    if PROCESS.is_match(text) {
        return Some("noise: assistant process talk");
    }
    if (text.starts_with('{') || text.starts_with('[')) && serde_json::from_str::<serde_json::Value>(text).is_ok() {
        return Some("noise: raw JSON");
    }
    if HTML.find_iter(text).count() >= 2 {
        return Some("noise: HTML");
    }
    let url_chars: usize = URL.find_iter(text).map(|m| m.as_str().len()).sum();
    if url_chars > 0 && url_chars * 2 >= text.len() {
        return Some("noise: URL");
    }
    if injected.iter().any(|m| {
        let m = m.trim();
        !m.is_empty() && (m.contains(text) || text.contains(m) || term_jaccard(m, text) >= 0.8)
    }) {
        return Some("noise: echoes a memory that was in the prompt");
    }
    None
}

/// The admission score from 0 to 1 (seed 000 evaluateCandidate): importance / 5, plus 0.2
/// for preferences the user states and 0.1 for decisions. An engine's low confidence (below
/// 0.5) scales it down: a guess is not admitted on importance alone.
pub fn score(memory_type: MemoryType, importance: u8, confidence: f64) -> f64 {
    let mut score = f64::from(importance) / 5.0;
    match memory_type {
        MemoryType::UserPreference => score += 0.2,
        MemoryType::ProjectDecision => score += 0.1,
        _ => {}
    }
    score.min(1.0) * (confidence.clamp(0.0, 1.0) / 0.5).min(1.0)
}

/// Stable profile information: preferences, communication style, stack, personal facts.
pub fn is_profile(memory_type: MemoryType) -> bool {
    matches!(memory_type, MemoryType::UserPreference | MemoryType::Fact)
}

/// Time-sensitive wording that keeps a statement out of the long-term profile (seed 004:
/// "今天/本次/刚刚/具体日期").
pub fn time_sensitive(content: &str) -> bool {
    static TIME: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)(今天|明天|昨天|今晚|本次|这次|这一次|刚刚|刚才|现在|目前|暂时|这周|本周|这个月|\d{4}[-/年]\d{1,2}|\d{1,2}月\d{1,2}[日号]|\btoday\b|\btomorrow\b|\byesterday\b|\btonight\b|\bright now\b|\bthis time\b|\bfor now\b|\bthis week\b|\bcurrently\b|\btemporarily\b|\bat the moment\b)",
        )
    });
    TIME.is_match(content)
}

/// The normalised content of a candidate, to count repeated observations of it.
pub fn content_key(content: &str) -> String {
    let mut terms: Vec<String> = thinkus_common::text::terms(content);
    terms.sort();
    terms.dedup();
    terms.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_families() {
        // "TBD" glued to ideographs: no Unicode word boundary there, an ASCII one.
        assert_eq!(noise("价格还是TBD", &[]), Some("noise: temporary or unconfirmed state"));
        assert_eq!(
            noise("工作流执行上下文：当前步骤 3", &[]),
            Some("noise: workflow scaffolding")
        );
        assert_eq!(
            noise("{{input.topic}} 的分析报告", &[]),
            Some("noise: template placeholder")
        );
        assert_eq!(
            noise("上线时间尚未确认", &[]),
            Some("noise: temporary or unconfirmed state")
        );
        assert_eq!(
            noise("Pricing is TBD", &[]),
            Some("noise: temporary or unconfirmed state")
        );
        assert_eq!(noise("让我先查一下资料", &[]), Some("noise: assistant process talk"));
        assert_eq!(noise("{\"a\": 1, \"b\": [2]}", &[]), Some("noise: raw JSON"));
        assert_eq!(noise("<div><p>hello</p></div>", &[]), Some("noise: HTML"));
        assert_eq!(noise("https://example.com/a/very/long/path", &[]), Some("noise: URL"));
        assert_eq!(
            noise("我喜欢简约的设计风格", &["用户偏好：我喜欢简约的设计风格".into()]),
            Some("noise: echoes a memory that was in the prompt")
        );
        assert_eq!(noise("我们决定用Stripe做支付", &[]), None);
    }

    #[test]
    fn scores_follow_the_design() {
        assert!(score(MemoryType::UserPreference, 4, 0.9) >= 0.6);
        assert!(score(MemoryType::ActionItem, 3, 0.9) >= 0.6);
        assert!(score(MemoryType::ActionItem, 2, 0.9) < 0.6);
        assert!(
            score(MemoryType::ProjectDecision, 4, 0.3) < 0.6,
            "a guess is not admitted"
        );
    }

    #[test]
    fn time_sensitive_wording() {
        assert!(time_sensitive("我今天想吃辣的"));
        assert!(time_sensitive("For now I prefer email"));
        assert!(!time_sensitive("我喜欢简约的设计风格"));
    }
}
