//! Markdown rendering of a summary in the layout of seed 001 section 4.3: a heading with the
//! age, the goal, what was done, decisions, what is pending, risks and artifacts. Within a
//! budget, sections lose their items least important first: artifacts, risks, constraints,
//! open questions, progress, next steps, decisions; the goal is cut last.

use chrono::{DateTime, Utc};
use thinkus_common::model::{DecisionConfidence, Language};
use thinkus_common::time::relative;
use thinkus_common::tokens::TokenCounter;

use crate::api::SessionSummary;

struct Labels {
    title: &'static str,
    goal: &'static str,
    constraints: &'static str,
    done: &'static str,
    decisions: &'static str,
    pending: &'static str,
    risks: &'static str,
    artifacts: &'static str,
    why: &'static str,
    high: &'static str,
    medium: &'static str,
    low: &'static str,
    open: &'static str,
    sep: &'static str,
}

const ZH: Labels = Labels {
    title: "📋 上次会话摘要",
    goal: "目标",
    constraints: "约束",
    done: "✅ 已完成",
    decisions: "🧭 决策",
    pending: "⏳ 待处理",
    risks: "⚠️ 风险",
    artifacts: "📎 产物",
    why: "理由",
    high: "确定",
    medium: "基本确定",
    low: "暂定",
    open: "待确认",
    sep: "：",
};

const EN: Labels = Labels {
    title: "📋 Last session summary",
    goal: "Goal",
    constraints: "Constraints",
    done: "✅ Done",
    decisions: "🧭 Decisions",
    pending: "⏳ Pending",
    risks: "⚠️ Risks",
    artifacts: "📎 Artifacts",
    why: "why",
    high: "firm",
    medium: "agreed",
    low: "tentative",
    open: "open",
    sep: ": ",
};

/// The sections in the order they are shown; their `cut_order` says which loses items first.
struct Section {
    title: String,
    items: Vec<String>,
    cut_order: u8,
}

fn sections(summary: &SessionSummary, l: &Labels) -> Vec<Section> {
    let decisions = summary
        .decisions
        .iter()
        .map(|d| {
            let confidence = match d.confidence {
                DecisionConfidence::High => l.high,
                DecisionConfidence::Medium => l.medium,
                DecisionConfidence::Low => l.low,
            };
            let mut parts = Vec::new();
            if !d.why.is_empty() {
                parts.push(format!("{}{}{}", l.why, l.sep, d.why));
            }
            if !d.who.is_empty() {
                parts.push(d.who.clone());
            }
            parts.push(confidence.to_string());
            format!("{} ({})", d.what, parts.join("; "))
        })
        .collect();
    let mut pending: Vec<String> = summary.next_actions.clone();
    pending.extend(summary.open_questions.iter().map(|q| format!("{q} ({})", l.open)));
    let artifacts = summary
        .artifacts
        .iter()
        .map(|a| {
            let name = if a.desc.is_empty() {
                a.reference.as_str()
            } else {
                a.desc.as_str()
            };
            if a.locator.is_empty() {
                format!("{name} [{}]", a.reference)
            } else {
                format!("{name} [{}] `{}`", a.reference, a.locator)
            }
        })
        .collect();
    vec![
        Section {
            title: l.constraints.to_string(),
            items: summary.constraints.clone(),
            cut_order: 2,
        },
        Section {
            title: l.done.to_string(),
            items: summary.progress.clone(),
            cut_order: 4,
        },
        Section {
            title: l.decisions.to_string(),
            items: decisions,
            cut_order: 6,
        },
        Section {
            title: l.pending.to_string(),
            items: pending,
            cut_order: 5,
        },
        Section {
            title: l.risks.to_string(),
            items: summary.risks.clone(),
            cut_order: 1,
        },
        Section {
            title: l.artifacts.to_string(),
            items: artifacts,
            cut_order: 0,
        },
    ]
}

fn assemble(head: &str, goal: &str, sections: &[Section], l: &Labels) -> String {
    let mut out = String::from(head);
    if !goal.is_empty() {
        out.push_str(&format!("\n\n**{}**{}{goal}", l.goal, l.sep));
    }
    for section in sections.iter().filter(|s| !s.items.is_empty()) {
        out.push_str(&format!("\n\n**{}**", section.title));
        for item in &section.items {
            out.push_str("\n- ");
            out.push_str(item);
        }
    }
    out
}

/// Renders a summary within `budget` tokens.
pub fn markdown(
    summary: &SessionSummary,
    language: Language,
    budget: u32,
    now: DateTime<Utc>,
    tokens: &TokenCounter,
) -> String {
    let l = match language {
        Language::Zh => &ZH,
        Language::En => &EN,
    };
    let head = format!("## {} ({})", l.title, relative(summary.updated_at, now, language));
    let mut sections = sections(summary, l);
    let budget = budget as usize;
    loop {
        let text = assemble(&head, &summary.goal, &sections, l);
        if tokens.count(&text) <= budget {
            return text;
        }
        // Drop the last item of the least important section that still has one.
        let victim = sections
            .iter_mut()
            .filter(|s| !s.items.is_empty())
            .min_by_key(|s| s.cut_order);
        match victim {
            Some(section) => {
                section.items.pop();
            }
            None => return tokens.truncate(&text, budget),
        }
    }
}

#[cfg(test)]
mod tests {
    use thinkus_common::model::{ArtifactRef, Decision, Scope};

    use super::*;

    fn summary() -> SessionSummary {
        let at = DateTime::parse_from_rfc3339("2026-01-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        SessionSummary {
            id: "sum_1".into(),
            scope: Scope::new("u", "cto").with_session("s"),
            goal: "讨论课程平台的技术方案".into(),
            constraints: vec!["预算$500".into()],
            decisions: vec![Decision {
                what: "选择Next.js + MongoDB架构".into(),
                why: "用户熟悉React".into(),
                who: "David (CTO)".into(),
                confidence: DecisionConfidence::High,
            }],
            progress: vec!["完成需求分析".into(), "确定技术方案".into()],
            artifacts: vec![ArtifactRef {
                reference: "ART-001".into(),
                locator: "/docs/tech-spec.md".into(),
                desc: "技术方案文档".into(),
            }],
            next_actions: vec!["Elena完成其他页面设计".into()],
            risks: vec!["视频版权问题".into()],
            open_questions: vec!["是否需要多语言？".into()],
            trajectory_start: 0,
            trajectory_end: 9,
            language: Language::Zh,
            engine: "rules".into(),
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn renders_every_section_in_the_language_asked() {
        let s = summary();
        let now = s.updated_at + chrono::Duration::hours(2);
        let zh = markdown(&s, Language::Zh, 2000, now, &TokenCounter::default());
        assert!(zh.contains("上次会话摘要"), "{zh}");
        assert!(zh.contains("2小时前") || zh.contains("2 小时前"), "{zh}");
        for part in [
            "目标",
            "✅ 已完成",
            "⏳ 待处理",
            "📎 产物",
            "理由：用户熟悉React",
            "`/docs/tech-spec.md`",
        ] {
            assert!(zh.contains(part), "{part} missing in {zh}");
        }
        let en = markdown(&s, Language::En, 2000, now, &TokenCounter::default());
        assert!(en.contains("**Goal**: 讨论课程平台"), "{en}");
        assert!(en.contains("⏳ Pending"), "{en}");
    }

    #[test]
    fn stays_within_the_budget_dropping_the_least_important_first() {
        let s = summary();
        let tokens = TokenCounter::default();
        let full = markdown(&s, Language::Zh, 2000, s.updated_at, &tokens);
        let budget = (tokens.count(&full) - 10) as u32;
        let cut = markdown(&s, Language::Zh, budget, s.updated_at, &tokens);
        assert!(tokens.count(&cut) as u32 <= budget, "{cut}");
        assert!(!cut.contains("产物"), "artifacts go first: {cut}");
        assert!(cut.contains("决策"), "{cut}");
        let tiny = markdown(&s, Language::Zh, 12, s.updated_at, &tokens);
        assert!(tokens.count(&tiny) <= 12, "{tiny}");
    }
}
