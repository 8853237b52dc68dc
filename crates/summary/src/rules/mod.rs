//! The built-in summary rules, registered in the rule engine for [`LlmTask::Summarize`]. They
//! answer in the JSON the LLM prompt asks for (the complete, merged summary), so both engines
//! share one parser.
//!
//! The rules read the new messages sentence by sentence. Greetings, interjections, vocatives
//! and lead-ins ("by the way", "对了") are stripped; questions that are not open questions,
//! small talk and reactions to the other party ("That's so cool!", "You're so dedicated",
//! "太厉害了") are dropped. Each remaining sentence is classified by the first pattern family
//! that matches, in this order: decisions (with their reasons, who made them and how settled
//! they are), constraints, risks, open questions, completed work, next steps; a sentence of
//! no family is a key point (something a participant reported). A sentence of the opening
//! messages stating what the session is for becomes the goal when none is known yet. A short
//! confirmation ("好，就这么定了", "sounds good, let's do that") answering the other party's
//! proposal turns it into a decision. Artifacts are attached by reference: the session's
//! stored artifacts, and `art_…` / `ART-…` references mentioned in the text.
//!
//! A session with no goal, decision or artifact is a conversation: its sentences are weighed
//! by what they report alone, and its risks and constraints read as key points. In a working
//! session each family adds its weight, and of the key points only reported events (done
//! work) are kept, as progress.
//!
//! Kept sentences are shortened ([`salience::compress`]: no hedges, no verdict tails, no
//! questions tacked on) and attributed to a named speaker. Which are kept is a greedy choice
//! under a length budget: each sentence is worth its salience ([`salience::salience`]:
//! reported events, plans, dates, names, numbers, content, the session's opening; not
//! reactions, not reminiscences), its family's weight in a working session, and the
//! session's topic words it adds (words the session keeps using or opened with), less what it
//! repeats of the sentences already chosen. The most valuable is taken first, until the new
//! items reach `max_share` of the characters read (but at least `min_chars`), so a summary
//! stays a fraction of its session; a sentence worth less than a threshold is left out unless
//! a family named it, and a section takes its `max_items` most valuable. The result is merged
//! into the previous summary: near-duplicates (term Jaccard ≥ 0.6) are dropped, a newer
//! decision on the same subject replaces the older one, a constraint or decision that states
//! other values for a subject (the budget, the deadline, the frontend…) outdates the clauses
//! that said otherwise ("预算调整到$800" ends "预算是$500"), open questions answered by a new
//! decision are closed, and each section keeps its newest `max_items`.
//!
//! By concern: `input.rs` holds what the rules are given, `sentence.rs` the pattern families
//! and what a sentence becomes, `choose.rs` the choice under the budget, `merge.rs` the merge
//! into the previous summary; `summarize` here reads the messages with them.

mod choose;
mod input;
mod merge;
mod sentence;

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use regex::Regex;
use serde_json::Value;
use thinkus_backends::llm::{LlmError, LlmTask, RuleEngine, RuleHandler};
use thinkus_common::model::{ArtifactRef, Decision, DecisionConfidence, Language};
use thinkus_common::text::{char_count, detect_language, pattern, sentences, summarize_to, term_set};

use crate::api::SummaryContent;
use crate::salience::{self, Position, TermStats, choice};

use choose::{artifact_context, choose};
pub use input::{RuleMessage, RulesInput};
pub use merge::merge;
use merge::{drop_outdated, outdates};
use sentence::{
    ARTIFACT_REF, CHITCHAT, CONFIRMATION, Candidate, Kind, OPEN_QUESTION, PROPOSAL, REACTION, any_match, attributed,
    classify, clean, decision_of, goal_of, is_question, proposed, tables_as_rows, who,
};

/// Registers the summary rules.
pub fn register(engine: &RuleEngine) {
    let handler: Arc<dyn RuleHandler> = Arc::new(|input: &Value| {
        let input: RulesInput = serde_json::from_value(input.clone())
            .map_err(|err| LlmError::BadResponse(format!("summary input: {err}")))?;
        serde_json::to_string(&summarize(&input)).map_err(|err| LlmError::BadResponse(err.to_string()))
    });
    engine.register(LlmTask::Summarize, handler);
}

/// The summary of the previous content and the new messages.
pub fn summarize(input: &RulesInput) -> SummaryContent {
    let max_items = input.max_items.max(1);
    let speakers: HashSet<String> = input
        .messages
        .iter()
        .filter_map(|m| m.speaker.as_deref())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let name_terms: HashSet<String> = speakers.iter().flat_map(|s| term_set(s)).collect();
    // Each message's sentences, cleaned, with their content terms.
    let read: Vec<Vec<(String, String, HashSet<String>)>> = input
        .messages
        .iter()
        .map(|message| {
            sentences(&tables_as_rows(&message.content))
                .into_iter()
                .map(|raw| {
                    let cleaned = clean(&raw);
                    let content = term_set(&cleaned);
                    (raw, cleaned, content)
                })
                .collect()
        })
        .collect();
    let stats = TermStats::of(read.iter().map(|message| {
        message
            .iter()
            .flat_map(|(_, _, content)| content.iter().cloned())
            .collect::<HashSet<String>>()
    }));
    let mut candidates: Vec<Candidate> = Vec::new();
    // The last proposal: who made it, what it was, in which message.
    let mut last_proposal: Option<(String, String, usize)> = None;
    let mut chars_read = 0usize;
    let mut mentioned: Vec<(String, String)> = Vec::new();
    let mut after_question = false;
    // A confirmed proposal is a decision of the one who confirmed it.
    let confirmed = |proposal: String, who: String| {
        let proposal = proposed(&proposal);
        // Its reason, if it gave one, is the decision's; confirmed, it is settled.
        let decision = Decision {
            confidence: DecisionConfidence::High,
            ..decision_of(&proposal, None, who)
        };
        let score = salience::salience(&proposal, &term_set(&proposal), &speakers, Position::default()).score;
        Candidate::new(Kind::Decision, proposal, Some(decision), score, &name_terms)
    };
    for (message_index, (message, read)) in input.messages.iter().zip(&read).enumerate() {
        chars_read += char_count(&message.content);
        let user_authored = message.role == "user";
        let speaker = who(message);
        for found in ARTIFACT_REF.find_iter(&message.content) {
            if !mentioned.iter().any(|(r, _)| r == found.as_str()) {
                mentioned.push((
                    found.as_str().to_string(),
                    artifact_context(&message.content, found.as_str()),
                ));
            }
        }
        let mut first_of_message = true;
        for (i, (raw, sentence, content)) in read.iter().enumerate() {
            let term_count = content.len();
            let short = term_count < 2;
            // "好，就这么定了" is short but decides.
            if CONFIRMATION.is_match(raw.trim())
                && term_count <= 4
                && let Some((proposer, proposal, at)) = last_proposal.take()
                && proposer != speaker
                && at + 1 == message_index
            {
                candidates.push(confirmed(proposal, speaker.clone()));
                continue;
            }
            if short {
                continue;
            }
            // "I finished another pot - want to see it?" reports; only its question goes.
            let statement = is_question(sentence)
                .then(|| salience::statement_head(sentence))
                .flatten()
                .filter(|_| !any_match(&OPEN_QUESTION, sentence));
            let sentence = statement.as_ref().unwrap_or(sentence);
            if PROPOSAL.is_match(sentence) && !is_question(sentence) {
                last_proposal = Some((speaker.clone(), sentence.clone(), message_index));
            }
            let kind = match classify(sentence, user_authored) {
                Some(kind) => kind,
                None if is_question(sentence) || CHITCHAT.is_match(sentence) => continue,
                None => Kind::Point,
            };
            if matches!(kind, Kind::Progress | Kind::Next | Kind::Point) && REACTION.is_match(sentence) {
                continue;
            }
            let position = Position {
                message: message_index,
                messages: input.messages.len(),
                first_of_message,
                after_question,
            };
            first_of_message = false;
            let head_terms = statement.as_ref().map(|head| term_set(head));
            let content = head_terms.as_ref().unwrap_or(content);
            let salience = salience::salience(sentence, content, &speakers, position);
            if kind == Kind::Point {
                // Not worth shortening when even all its words new could not make it worth
                // its place.
                let best: f64 = salience::topic_of(content, &name_terms)
                    .iter()
                    .map(|t| stats.weight(t))
                    .sum();
                if salience.score + best + choice::CONTINUES_TOPIC < choice::THRESHOLD {
                    continue;
                }
            }
            let decision = (kind == Kind::Decision).then(|| {
                let next = read.get(i + 1).map(|(_, cleaned, _)| cleaned.as_str());
                decision_of(sentence, next, speaker.clone())
            });
            let text = match (&decision, kind) {
                (Some(d), _) => d.what.clone(),
                (None, Kind::Question) => attributed(message, sentence, 140),
                (None, _) => attributed(message, &salience::compress(sentence), 140),
            };
            let mut candidate = Candidate::new(kind, text, decision, salience.score, &name_terms);
            candidate.event = salience.event;
            candidates.push(candidate);
        }
        after_question = read.last().is_some_and(|(raw, _, _)| is_question(raw.trim()));
    }
    for (order, candidate) in candidates.iter_mut().enumerate() {
        candidate.order = order;
    }

    let previous = input.previous.clone().unwrap_or_default();
    let goal = if previous.goal.is_empty() {
        goal_of(&input.messages)
    } else {
        None
    };
    let conversation = previous.goal.is_empty()
        && goal.is_none()
        && previous.decisions.is_empty()
        && previous.constraints.is_empty()
        && input.artifacts.is_empty()
        && mentioned.is_empty()
        && !candidates.iter().any(|c| c.kind == Kind::Decision);
    if conversation {
        // What each participant reported, ranked by what it says rather than by family; a
        // chat's "must" is rarely a constraint, but a worry stays a risk.
        for candidate in &mut candidates {
            if candidate.kind == Kind::Constraint {
                candidate.kind = Kind::Point;
            }
        }
    } else {
        // A working session's key points are its done work.
        candidates.retain(|c| c.kind != Kind::Point || c.event);
        for candidate in &mut candidates {
            candidate.score += candidate.kind.weight();
            candidate.certain = candidate.kind != Kind::Point;
        }
    }

    let budget = (((chars_read as f64) * input.max_share).ceil() as usize).max(input.min_chars);
    let kept = choose(&candidates, budget, max_items, &stats);

    let mut fresh = SummaryContent::default();
    // In the order said, so a later constraint or decision outdates an earlier one of the other
    // section here (the merge below sees each section on its own).
    for candidate in kept {
        match candidate.kind {
            Kind::Decision => {
                for decision in candidate.decision.iter().filter(|d| !d.what.is_empty()) {
                    fresh.constraints = drop_outdated(std::mem::take(&mut fresh.constraints), &decision.what);
                    fresh.decisions.push(decision.clone());
                }
            }
            Kind::Constraint => {
                let newer = &candidate.text;
                fresh.decisions.retain(|d| !outdates(newer, &d.what));
                fresh.constraints.push(newer.clone());
            }
            Kind::Risk => fresh.risks.push(candidate.text.clone()),
            Kind::Question => fresh.open_questions.push(candidate.text.clone()),
            Kind::Progress | Kind::Point => fresh.progress.push(candidate.text.clone()),
            Kind::Next => fresh.next_actions.push(candidate.text.clone()),
        }
    }
    if let Some(goal) = goal {
        fresh.goal = goal;
    }
    for known in &input.artifacts {
        fresh.artifacts.push(known.clone());
    }
    for (reference, context) in mentioned {
        if !fresh.artifacts.iter().any(|a| a.reference == reference) {
            fresh.artifacts.push(ArtifactRef {
                reference,
                locator: String::new(),
                desc: summarize_to(&context, 60),
            });
        }
    }
    merge(previous, fresh, max_items)
}

/// The language the user writes in: their messages, or all messages when none is the user's.
pub fn language_of(messages: &[RuleMessage]) -> Language {
    let user: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == "user")
        .map(|m| m.content.as_str())
        .collect();
    let texts: Vec<&str> = if user.is_empty() {
        messages.iter().map(|m| m.content.as_str()).collect()
    } else {
        user
    };
    thinkus_common::text::detect_language_of(texts)
}

/// Whether a message asks for a summary ("总结一下", "summarize").
pub fn asks_for_summary(text: &str) -> bool {
    static ASK: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)总结一下|总结下|做个总结|做一下总结|帮我总结|小结一下|概括一下|回顾一下|梳理一下|\b(summari[sz]e|sum (it |this |things )?up|recap|give me a summary|a quick summary|wrap up what we)\b",
        )
    });
    ASK.is_match(text)
}

/// True for text in Chinese.
pub fn is_chinese(text: &str) -> bool {
    detect_language(text) == Language::Zh
}

#[cfg(test)]
mod tests;
