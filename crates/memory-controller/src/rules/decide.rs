//! The decision: need, main signal, types, mode, budget and time range, from the phrase
//! classes, the time phrases and the questions about people.

use chrono::{DateTime, Utc};
use thinkus_common::model::{ControlDecision, Language, MemoryType, NeedMemory, RetrievalMode, TimeRange};
use thinkus_common::text::detect_language;

use super::patterns::{
    ANCHOR, ASIDE, DECISION_SUPPORT, EXTERNAL, FOLLOWUP, FULL_REVIEW, GENERAL, HINT, HISTORY, OVERVIEW, PERSONAL,
    PICKUP, PROJECT_STATE, REMINISCE, SMALL_TALK, SOCIAL, SPECIFIC, TASK, instruction, is_general, own_question,
    types_of,
};
use super::persons::{about_a_past_event, about_a_person, asks_for_a_portrait, asks_for_many};
use super::time::time_range;

/// What the rules are given.
#[derive(Debug, Clone, Default)]
pub struct RuleInput<'a> {
    pub message: &'a str,
    pub message_count: u32,
    pub recent_messages: &'a [String],
    pub project_id: Option<&'a str>,
    pub type_hints: &'a [MemoryType],
    pub now: DateTime<Utc>,
}

fn reason(language: Language, signal: &str) -> String {
    let (zh, en) = match signal {
        "small_talk" => ("寒暄或致谢，不需要记忆", "Small talk, no memory needed"),
        "history_reference" => ("提到了之前的讨论，需要回忆", "Refers to earlier discussion"),
        "project_state" => (
            "询问项目已有的决策或状态",
            "Asks about the project's decisions or state",
        ),
        "personal" => (
            "需要结合用户偏好给出个性化建议",
            "Needs the user's preferences for personal advice",
        ),
        "person" => (
            "问到用户身边某个人的经历或说法，需要回忆",
            "Asks about someone in the user's life: only the history knows",
        ),
        "past_event" => (
            "问到用户经历过的某次具体活动，需要回忆",
            "Asks about a particular past event of the user's: only the history knows",
        ),
        "general_knowledge" => ("通用知识问答，不需要记忆", "General knowledge, no memory needed"),
        "self_contained_task" => (
            "独立的新任务，信息已在消息中",
            "Self-contained task, everything is in the message",
        ),
        "outside_world" => (
            "谈的是外部世界的事，不需要记忆",
            "About the outside world, no memory needed",
        ),
        "self_contained" => (
            "消息本身是完整的，不涉及之前的内容",
            "Self-contained, nothing points at earlier work",
        ),
        "time_phrase" => (
            "提到了时间范围，可能涉及之前的内容",
            "Names a period, may concern earlier work",
        ),
        "new_session" => ("新会话开始，参考上次的进展", "A new session: pick up the last progress"),
        _ => ("无法确定，先看一眼记忆目录", "Unclear: a quick look at the catalog"),
    };
    match language {
        Language::Zh => zh.to_string(),
        Language::En => en.to_string(),
    }
}

/// The rules' decision.
pub fn decide(input: &RuleInput<'_>) -> ControlDecision {
    let message = input.message.trim();
    let language = detect_language(message);
    let mut signals: Vec<String> = Vec::new();
    let time = time_range(message, input.now);
    if let Some((_, signal)) = &time {
        signals.push((*signal).to_string());
    }

    let task = TASK.is_match(message);
    let general = is_general(message);
    let head = instruction(message, task);
    let aside_general = general && ASIDE.is_match(message);

    let need_and_signal = || -> (NeedMemory, &'static str) {
        if SMALL_TALK.is_match(message) || SOCIAL.is_match(message) {
            return (NeedMemory::No, "small_talk");
        }
        let reminiscing = general && REMINISCE.is_match(head) && !ANCHOR.is_match(head);
        if HISTORY.is_match(head) && !aside_general && !reminiscing {
            return (NeedMemory::Yes, "history_reference");
        }
        if input.message_count == 0 && message.chars().count() <= 40 && PICKUP.is_match(message) {
            return (NeedMemory::Yes, "new_session");
        }
        if PROJECT_STATE.is_match(head) {
            return (NeedMemory::Yes, "project_state");
        }
        if PERSONAL.is_match(head) {
            return (NeedMemory::Yes, "personal");
        }
        if about_a_person(head) {
            return (NeedMemory::Yes, "person");
        }
        if about_a_past_event(head) && !EXTERNAL.is_match(message) {
            return (NeedMemory::Yes, "past_event");
        }
        if EXTERNAL.is_match(message) {
            return (NeedMemory::No, "outside_world");
        }
        let anchor = ANCHOR.is_match(head);
        let hint = HINT.is_match(head);
        if (task || general) && !hint && (task || !anchor) {
            return if task {
                (NeedMemory::No, "self_contained_task")
            } else {
                (NeedMemory::No, "general_knowledge")
            };
        }
        if aside_general {
            return (NeedMemory::No, "general_knowledge");
        }
        let past_period = time.as_ref().is_some_and(|(_, signal)| *signal != "time:today");
        if !anchor && !hint && !past_period && !FOLLOWUP.is_match(message) {
            return (NeedMemory::No, "self_contained");
        }
        if time.is_some() {
            (NeedMemory::Maybe, "time_phrase")
        } else {
            (NeedMemory::Maybe, "unclear")
        }
    };
    let (need, main_signal) = need_and_signal();
    signals.insert(0, main_signal.to_string());

    let mut memory_types = if need == NeedMemory::No {
        Vec::new()
    } else {
        types_of(message)
    };
    if main_signal == "personal" && !memory_types.contains(&MemoryType::UserPreference) {
        memory_types.push(MemoryType::UserPreference);
    }
    for hint in input.type_hints {
        if need != NeedMemory::No && !memory_types.contains(hint) {
            memory_types.push(*hint);
        }
    }

    let overview = OVERVIEW.is_match(message) && !SPECIFIC.is_match(message);
    let full_review = FULL_REVIEW.is_match(message);
    let aggregate = asks_for_many(head);
    let retrieval_mode = match need {
        NeedMemory::Yes if !overview => RetrievalMode::Details,
        NeedMemory::Maybe if !overview && (DECISION_SUPPORT.is_match(message) || own_question(head)) => {
            RetrievalMode::Details
        }
        _ => RetrievalMode::Catalog,
    };
    if retrieval_mode == RetrievalMode::Details && need == NeedMemory::Maybe {
        signals.push("decision_support".into());
    }
    let budget_tokens = match (need, retrieval_mode) {
        (NeedMemory::No, _) => 0,
        (NeedMemory::Maybe, RetrievalMode::Catalog) => 300,
        (NeedMemory::Maybe, RetrievalMode::Details) => 600,
        _ if full_review => 2000,
        // Everything someone did of a kind ("what books has she read?", "how many times...")
        // is spread over many conversations: the full-review tier.
        (NeedMemory::Yes, RetrievalMode::Details) if aggregate => 2000,
        // What someone did or said is scattered over many conversations: the top of the deep tier.
        // A portrait of someone draws on all of their history: the full-review tier.
        (NeedMemory::Yes, RetrievalMode::Details) if main_signal == "person" && asks_for_a_portrait(head) => 2000,
        (_, RetrievalMode::Details) if main_signal == "person" => 1500,
        (_, RetrievalMode::Catalog) => 400,
        (_, RetrievalMode::Details) => 1000,
    };
    let time_range = match (need, time) {
        (NeedMemory::No, _) => TimeRange::All,
        (_, Some((range, _))) => range,
        (_, None) => TimeRange::All,
    };
    ControlDecision {
        need_memory: need,
        memory_types,
        retrieval_mode,
        budget_tokens,
        time_range,
        reason: reason(language, main_signal),
        engine: "rules".into(),
        signals,
        language,
    }
}

/// Compiles every rule now, so the first request does not pay for it.
pub fn warm_up() {
    // Messages down every path, so that the patterns local to the rules compile too.
    for message in [
        "warm up",
        "你好！",
        "我们上周定的预算是多少？之前说的方案还用吗？",
        "帮我把2023年5月8日以来的决定都列出来",
        "What did we decide about the budget last week?",
        "What has Melanie painted since October 13, 2023?",
        "How long does Audrey typically walk her dogs for?",
        "What was discussed in the pottery workshop in May?",
        "List every book Caroline has read so far",
        "How do Stripe webhooks work?",
    ] {
        let _ = decide(&RuleInput {
            message,
            message_count: 3,
            now: Utc::now(),
            ..Default::default()
        });
    }
    for pattern in [
        &*SMALL_TALK,
        &*SOCIAL,
        &*ASIDE,
        &*ANCHOR,
        &*EXTERNAL,
        &*FOLLOWUP,
        &*HINT,
        &*OVERVIEW,
        &*SPECIFIC,
        &*DECISION_SUPPORT,
        &*FULL_REVIEW,
        &*PICKUP,
    ] {
        let _ = pattern.is_match("");
    }
    for patterns in [&*HISTORY, &*PROJECT_STATE, &*PERSONAL, &*GENERAL, &*TASK] {
        let _ = patterns.is_match("");
    }
}
