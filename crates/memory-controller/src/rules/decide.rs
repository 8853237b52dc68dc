//! The decision: need, main signal, types, mode, budget and time range, from the phrase
//! classes, the time phrases and the questions about people.

use chrono::{DateTime, Utc};
use thinkus_common::model::{ControlDecision, MemoryType, NeedMemory, RetrievalMode, TimeRange};
use thinkus_common::text::detect_language;

use crate::config::BudgetTiers;

use super::patterns::{
    ANCHOR, ASIDE, DECISION_SUPPORT, EXTERNAL, FOLLOWUP, FULL_REVIEW, GENERAL, HINT, HISTORY, OVERVIEW, PERSONAL,
    PICKUP, PROJECT_STATE, REMINISCE, SMALL_TALK, SOCIAL, SPECIFIC, TASK, instruction, is_general, own_question,
    types_of,
};
use super::persons::{about_a_past_event, about_a_person, asks_for_a_portrait, asks_for_many};
use super::signal::{DECISION_SUPPORT as DECISION_SUPPORT_SIGNAL, Signal, TimeSignal};
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
    /// The token budget of each tier.
    pub budgets: BudgetTiers,
}

/// The rules' decision.
pub fn decide(input: &RuleInput<'_>) -> ControlDecision {
    let message = input.message.trim();
    let language = detect_language(message);
    let mut signals: Vec<String> = Vec::new();
    let time = time_range(message, input.now);
    if let Some((_, signal)) = &time {
        signals.push(signal.as_str().to_string());
    }

    let task = TASK.is_match(message);
    let general = is_general(message);
    let head = instruction(message, task);
    let aside_general = general && ASIDE.is_match(message);

    let need_and_signal = || -> (NeedMemory, Signal) {
        if SMALL_TALK.is_match(message) || SOCIAL.is_match(message) {
            return (NeedMemory::No, Signal::SmallTalk);
        }
        let reminiscing = general && REMINISCE.is_match(head) && !ANCHOR.is_match(head);
        if HISTORY.is_match(head) && !aside_general && !reminiscing {
            return (NeedMemory::Yes, Signal::HistoryReference);
        }
        if input.message_count == 0 && message.chars().count() <= 40 && PICKUP.is_match(message) {
            return (NeedMemory::Yes, Signal::NewSession);
        }
        if PROJECT_STATE.is_match(head) {
            return (NeedMemory::Yes, Signal::ProjectState);
        }
        if PERSONAL.is_match(head) {
            return (NeedMemory::Yes, Signal::Personal);
        }
        if about_a_person(head) {
            return (NeedMemory::Yes, Signal::Person);
        }
        if about_a_past_event(head) && !EXTERNAL.is_match(message) {
            return (NeedMemory::Yes, Signal::PastEvent);
        }
        if EXTERNAL.is_match(message) {
            return (NeedMemory::No, Signal::OutsideWorld);
        }
        let anchor = ANCHOR.is_match(head);
        let hint = HINT.is_match(head);
        if (task || general) && !hint && (task || !anchor) {
            return if task {
                (NeedMemory::No, Signal::SelfContainedTask)
            } else {
                (NeedMemory::No, Signal::GeneralKnowledge)
            };
        }
        if aside_general {
            return (NeedMemory::No, Signal::GeneralKnowledge);
        }
        let past_period = time.as_ref().is_some_and(|(_, signal)| *signal != TimeSignal::Today);
        if !anchor && !hint && !past_period && !FOLLOWUP.is_match(message) {
            return (NeedMemory::No, Signal::SelfContained);
        }
        if time.is_some() {
            (NeedMemory::Maybe, Signal::TimePhrase)
        } else {
            (NeedMemory::Maybe, Signal::Unclear)
        }
    };
    let (need, main_signal) = need_and_signal();
    signals.insert(0, main_signal.as_str().to_string());

    let mut memory_types = if need == NeedMemory::No {
        Vec::new()
    } else {
        types_of(message)
    };
    if main_signal == Signal::Personal && !memory_types.contains(&MemoryType::UserPreference) {
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
        signals.push(DECISION_SUPPORT_SIGNAL.into());
    }
    let tiers = &input.budgets;
    let budget_tokens = match (need, retrieval_mode) {
        (NeedMemory::No, _) => 0,
        (NeedMemory::Maybe, RetrievalMode::Catalog) => tiers.glance,
        (NeedMemory::Maybe, RetrievalMode::Details) => tiers.unsure_details,
        _ if full_review => tiers.full_review,
        // Everything someone did of a kind ("what books has she read?", "how many times...")
        // is spread over many conversations: the full-review tier.
        (NeedMemory::Yes, RetrievalMode::Details) if aggregate => tiers.full_review,
        // What someone did or said is scattered over many conversations: the top of the deep tier.
        // A portrait of someone draws on all of their history: the full-review tier.
        (NeedMemory::Yes, RetrievalMode::Details) if main_signal == Signal::Person && asks_for_a_portrait(head) => {
            tiers.full_review
        }
        (_, RetrievalMode::Details) if main_signal == Signal::Person => tiers.person,
        (_, RetrievalMode::Catalog) => tiers.catalog,
        (_, RetrievalMode::Details) => tiers.details,
    };
    // The recall's period is the one the message asks about: in a message of several sentences
    // that asks something, a time phrase of a statement ("Dara has had the van out since
    // yesterday … how many vans did we land on?") tells of something else, and held to it the
    // recall would miss what the question is about.
    let asked_time = match asking_sentences(message) {
        Some(asked) => time_range(&asked, input.now),
        None => time,
    };
    let time_range = match (need, asked_time) {
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
        reason: main_signal.reason(language),
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

/// The sentences of a message of several sentences that ask
/// ([`thinkus_common::text::ends_as_question`]), joined; none for a single sentence or a message where no
/// sentence asks, which is read whole.
fn asking_sentences(message: &str) -> Option<String> {
    let sentences = thinkus_common::text::sentences(message);
    if sentences.len() < 2 {
        return None;
    }
    let asking: Vec<&str> = sentences
        .iter()
        .map(String::as_str)
        .filter(|s| thinkus_common::text::ends_as_question(s))
        .collect();
    (!asking.is_empty()).then(|| asking.join(" "))
}
