//! Markdown rendering of a summary in the layout of seed 001 section 4.3: a heading with the
//! age, the goal, what was done, decisions, what is pending, risks and artifacts. A summary
//! with no goal, decision, constraint or artifact is a conversation's: what was done and what
//! is planned read as one list of key points (under no heading of its own when nothing else
//! is shown). Items attributed to the same speaker
//! ("Maria: …") share one line per list. Within a budget, sections lose their items least
//! important first: artifacts, risks, constraints, open questions, progress, next steps,
//! decisions; the goal is cut last.

use chrono::{DateTime, Utc};
use thinkus_common::model::{DecisionConfidence, Language};
use thinkus_common::text::is_han;
use thinkus_common::time::relative;
use thinkus_common::tokens::TokenCounter;

use crate::api::SessionSummary;

struct Labels {
    title: &'static str,
    goal: &'static str,
    constraints: &'static str,
    done: &'static str,
    key_points: &'static str,
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
    key_points: "要点",
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
    key_points: "Key points",
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

/// An item without the list marker it was written with ("- ", "* ", "• ", "1. ").
fn without_marker(item: &str) -> &str {
    let trimmed = item.trim_start();
    for marker in ["- ", "* ", "• ", "· "] {
        if let Some(rest) = trimmed.strip_prefix(marker) {
            return rest.trim_start();
        }
    }
    trimmed
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
    let conversation = summary.goal.is_empty()
        && summary.decisions.is_empty()
        && summary.constraints.is_empty()
        && summary.artifacts.is_empty();
    let open_questions = summary.open_questions.iter().map(|q| format!("{q} ({})", l.open));
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
    if conversation {
        // What each participant reported and plans, then what is still open.
        let mut points = summary.progress.clone();
        points.extend(summary.next_actions.iter().cloned());
        // A list alone under the title needs no heading of its own.
        let alone = summary.open_questions.is_empty() && summary.risks.is_empty();
        return vec![
            Section {
                title: if alone { String::new() } else { l.key_points.to_string() },
                items: points,
                cut_order: 4,
            },
            Section {
                title: l.pending.to_string(),
                items: open_questions.collect(),
                cut_order: 3,
            },
            Section {
                title: l.risks.to_string(),
                items: summary.risks.clone(),
                cut_order: 1,
            },
        ];
    }
    let mut pending: Vec<String> = summary.next_actions.clone();
    pending.extend(open_questions);
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

/// The speaker an item is attributed to ("Maria: …", "David：…"), its separator and the rest.
fn attribution(item: &str) -> Option<(&str, &str, &str)> {
    let (at, sep) = [": ", "："]
        .iter()
        .filter_map(|sep| item.find(sep).map(|at| (at, *sep)))
        .min_by_key(|(at, _)| *at)?;
    let speaker = &item[..at];
    let rest = &item[at + sep.len()..];
    let plausible = !speaker.is_empty()
        && speaker.chars().count() <= 24
        && speaker.split_whitespace().count() <= 3
        && speaker.chars().next().is_some_and(|c| c.is_uppercase() || is_han(c))
        && !speaker
            .chars()
            .any(|c| matches!(c, '.' | ',' | '，' | '。' | '(' | '（' | '[' | '*'))
        && !rest.trim().is_empty();
    plausible.then_some((speaker, sep, rest.trim()))
}

/// One line per speaker, in the order they first appear: "Maria: Went to X. Plans Y.";
/// other items stay as they are.
fn by_speaker(items: &[String]) -> Vec<String> {
    let mut lines: Vec<(Option<&str>, &str, Vec<&str>)> = Vec::new();
    for item in items {
        match attribution(item) {
            Some((speaker, sep, rest)) => match lines.iter_mut().find(|(s, _, _)| *s == Some(speaker)) {
                Some((_, _, parts)) => parts.push(rest),
                None => lines.push((Some(speaker), sep, vec![rest])),
            },
            None => lines.push((None, "", vec![item.as_str()])),
        }
    }
    lines
        .into_iter()
        .map(|(speaker, sep, parts)| {
            let mut line = speaker.map(|s| format!("{s}{sep}")).unwrap_or_default();
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    let last = line.chars().last().unwrap_or(' ');
                    if matches!(last, '。' | '！' | '？' | '；') {
                        // Chinese punctuation needs no space.
                    } else if is_han(last) {
                        line.push('；');
                    } else if matches!(last, '.' | '!' | '?' | '…') {
                        line.push(' ');
                    } else {
                        line.push_str(". ");
                    }
                }
                line.push_str(part);
            }
            line
        })
        .collect()
}

fn assemble(head: &str, goal: &str, sections: &[Section], l: &Labels) -> String {
    let mut out = String::from(head);
    if !goal.is_empty() {
        out.push_str(&format!("\n\n**{}**{}{goal}", l.goal, l.sep));
    }
    for section in sections.iter().filter(|s| !s.items.is_empty()) {
        if section.title.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&format!("\n\n**{}**", section.title));
        }
        for item in &by_speaker(&section.items) {
            out.push_str("\n- ");
            // An item taken from a list line keeps no marker of its own ("- - Budget: $2,400").
            out.push_str(without_marker(item));
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

    fn conversation() -> SessionSummary {
        SessionSummary {
            goal: String::new(),
            constraints: vec![],
            decisions: vec![],
            artifacts: vec![],
            risks: vec![],
            open_questions: vec![],
            progress: vec![
                "Maria: Adopted a puppy yesterday.".into(),
                "John: Went to a pottery workshop last Friday".into(),
                "Maria: Named her Coco".into(),
            ],
            next_actions: vec!["John: Planning a trip to the East Coast.".into()],
            ..summary()
        }
    }

    #[test]
    fn a_conversation_reads_as_key_points_by_speaker() {
        let s = conversation();
        let en = markdown(&s, Language::En, 2000, s.updated_at, &TokenCounter::default());
        // The points alone need no heading: the list follows the title.
        assert!(!en.contains("Key points"), "{en}");
        assert!(en.contains("(just now)\n\n- Maria: "), "{en}");
        assert!(!en.contains("Done") && !en.contains("Pending"), "{en}");
        assert!(
            en.contains("- Maria: Adopted a puppy yesterday. Named her Coco\n"),
            "one line per speaker: {en}"
        );
        assert!(
            en.contains("- John: Went to a pottery workshop last Friday. Planning a trip to the East Coast."),
            "{en}"
        );
        let zh = SessionSummary {
            progress: vec!["小李：上周去杭州参加了摄影展".into(), "小王：在准备驾照考试。".into()],
            next_actions: vec!["小李：下个月去北京".into()],
            open_questions: vec!["小王：考试是哪天？".into()],
            ..conversation()
        };
        let zh = markdown(&zh, Language::Zh, 2000, s.updated_at, &TokenCounter::default());
        // Beside another section, the points have their heading.
        assert!(zh.contains("**要点**") && zh.contains("**⏳ 待处理**"), "{zh}");
        assert!(zh.contains("- 小李：上周去杭州参加了摄影展；下个月去北京"), "{zh}");
    }

    #[test]
    fn a_working_summary_keeps_its_sections() {
        let s = SessionSummary {
            progress: vec!["David: Finished the schema".into(), "David: Deployed staging".into()],
            ..summary()
        };
        let en = markdown(&s, Language::En, 2000, s.updated_at, &TokenCounter::default());
        assert!(en.contains("✅ Done") && !en.contains("Key points"), "{en}");
        assert!(en.contains("- David: Finished the schema. Deployed staging"), "{en}");
        // "Budget: $500" is not a speaker's line: it stays as it is.
        assert_eq!(attribution("Budget (max): $500"), None);
    }
}
