//! The merge of a fresh summary into the previous one: near-duplicates, replaced decisions,
//! outdated values, answered questions.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use thinkus_common::text::{is_han, pattern, term_jaccard, term_set};
use thinkus_knowledge_manager::subject;

use crate::api::SummaryContent;
use crate::salience::{self, capitalised};

use super::choose::jaccard;

pub(super) fn same_item(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim()) || term_jaccard(a, b) >= 0.6
}

/// What is left of a constraint or decision once a newer statement has changed what it said
/// about a subject ("预算是$500，必须在2周内完成" after "预算调整到$800" keeps "必须在2周内完成"):
/// a clause goes when it is about the newer statement's subject (`subject::detect`) and states
/// other values (`subject::values_differ`). A clause about two subjects ("the budget is $500
/// and the deadline is March 3") loses only its part about the changed one. `None` when
/// nothing is left.
pub(super) fn without_outdated(item: &str, newer: &str) -> Option<String> {
    static CLAUSE: LazyLock<Regex> = LazyLock::new(|| pattern(r"[，,;；]\s*"));
    static AND: LazyLock<Regex> = LazyLock::new(|| pattern(r"\s+and\s+|并且|而且|同时"));
    let Some(changed) = subject::detect(newer) else {
        return Some(item.to_string());
    };
    let outdated = |part: &str| subject::detect(part) == Some(changed) && subject::values_differ(part, newer);
    // Each clause with the separator after it. A comma between digits is a thousands
    // separator ("£5,200"), not the end of a clause.
    let pieces = |text: &str, regex: &Regex| -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut start = 0;
        for found in regex.find_iter(text) {
            let digit_before = text[..found.start()]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_digit());
            let digit_after = text[found.start()..].chars().nth(1).is_some_and(|c| c.is_ascii_digit());
            if found.as_str() == "," && digit_before && digit_after {
                continue;
            }
            out.push((text[start..found.start()].to_string(), found.as_str().to_string()));
            start = found.end();
        }
        out.push((text[start..].to_string(), String::new()));
        out
    };
    let mut kept: Vec<(String, String)> = Vec::new();
    let mut changed_any = false;
    for (clause, sep) in pieces(item, &CLAUSE) {
        if !outdated(&clause) {
            kept.push((clause, sep));
            continue;
        }
        changed_any = true;
        let parts = pieces(&clause, &AND);
        let subjects: HashSet<&str> = parts.iter().filter_map(|(p, _)| subject::detect(p)).collect();
        if subjects.len() < 2 {
            continue;
        }
        let rest: Vec<String> = parts
            .into_iter()
            .filter(|(p, _)| !outdated(p))
            .map(|(p, _)| p)
            .collect();
        let joiner = if rest.iter().any(|p| p.chars().any(is_han)) {
            "，"
        } else {
            " and "
        };
        kept.push((rest.join(joiner), sep));
    }
    if !changed_any {
        return Some(item.to_string());
    }
    let text: String = kept.iter().map(|(clause, sep)| format!("{clause}{sep}")).collect();
    let text = text.trim().trim_end_matches(['，', ',', ';', '；', ' ']);
    if salience::content_words(text) == 0 {
        return None;
    }
    Some(salience::with_stop_of(capitalised(text), item))
}

/// Whether a newer statement outdates any part of an item ([`without_outdated`]).
pub(super) fn outdates(newer: &str, item: &str) -> bool {
    without_outdated(item, newer).as_deref() != Some(item)
}

/// The items that a newer one leaves as they were or in part (see [`without_outdated`]).
pub(super) fn drop_outdated(items: Vec<String>, newer: &str) -> Vec<String> {
    items
        .into_iter()
        .filter_map(|item| without_outdated(&item, newer))
        .collect()
}

/// Appends the new items of a list, dropping near-duplicates, keeping the newest `max`.
pub(super) fn merge_list(old: Vec<String>, new: Vec<String>, max: usize) -> Vec<String> {
    let mut items: Vec<(String, HashSet<String>)> = old
        .into_iter()
        .map(|item| {
            let terms = term_set(&item);
            (item, terms)
        })
        .collect();
    for item in new {
        if item.trim().is_empty() {
            continue;
        }
        let terms = term_set(&item);
        if let Some(pos) = items
            .iter()
            .position(|(o, t)| o.trim().eq_ignore_ascii_case(item.trim()) || jaccard(t, &terms) >= 0.6)
        {
            // The newer wording wins and moves to the end (it is the most recent state).
            items.remove(pos);
        }
        items.push((item, terms));
    }
    let excess = items.len().saturating_sub(max);
    items.drain(..excess);
    items.into_iter().map(|(item, _)| item).collect()
}

/// Merges new content into a summary: the deterministic merge both engines' results go
/// through (an LLM's complete answer merges into nothing but itself).
pub fn merge(previous: SummaryContent, fresh: SummaryContent, max_items: usize) -> SummaryContent {
    // A newer statement about a subject outdates what was said of it before, in either
    // section: "预算调整到$800" ends "预算是$500" ("a user whose budget changed expects the
    // old figure gone").
    let mut decisions = previous.decisions;
    let mut constraints = previous.constraints;
    for decision in &fresh.decisions {
        decisions.retain(|d| {
            !(same_item(&d.what, &decision.what)
                || term_jaccard(&d.what, &decision.what) >= 0.5
                || outdates(&decision.what, &d.what))
        });
        constraints = drop_outdated(constraints, &decision.what);
        decisions.push(decision.clone());
    }
    for constraint in &fresh.constraints {
        constraints = drop_outdated(constraints, constraint);
        decisions.retain(|d| !outdates(constraint, &d.what));
        constraints = merge_list(constraints, vec![constraint.clone()], usize::MAX);
    }
    let excess = decisions.len().saturating_sub(max_items);
    decisions.drain(..excess);
    let excess = constraints.len().saturating_sub(max_items);
    constraints.drain(..excess);
    let mut open_questions = merge_list(previous.open_questions, fresh.open_questions, max_items);
    // A decision taken on a question closes it.
    open_questions.retain(|q| !fresh.decisions.iter().any(|d| term_jaccard(q, &d.what) >= 0.4));
    let mut artifacts = previous.artifacts;
    for artifact in fresh.artifacts {
        match artifacts.iter_mut().find(|a| a.reference == artifact.reference) {
            Some(existing) => {
                if existing.locator.is_empty() {
                    existing.locator = artifact.locator;
                }
                if existing.desc.is_empty() {
                    existing.desc = artifact.desc;
                }
            }
            None => artifacts.push(artifact),
        }
    }
    let excess = artifacts.len().saturating_sub(max_items * 2);
    artifacts.drain(..excess);
    let progress = merge_list(previous.progress, fresh.progress, max_items);
    // Next steps that were since done are no longer next.
    let fresh_next = fresh.next_actions.clone();
    let mut next_actions = merge_list(previous.next_actions, fresh.next_actions, max_items);
    let done: Vec<HashSet<String>> = progress.iter().map(|p| term_set(p)).collect();
    next_actions.retain(|n| {
        let next = term_set(n);
        !done.iter().any(|p| jaccard(&next, p) >= 0.6) || fresh_next.contains(n)
    });
    SummaryContent {
        goal: if fresh.goal.is_empty() {
            previous.goal
        } else {
            fresh.goal
        },
        constraints,
        decisions,
        progress,
        artifacts,
        next_actions,
        risks: merge_list(previous.risks, fresh.risks, max_items),
        open_questions,
    }
}
