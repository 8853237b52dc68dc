//! The choice of sentences within a length budget.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use thinkus_common::text::{char_count, pattern};

use crate::salience::{TermStats, choice};

use super::sentence::Candidate;

/// The items worth their place within `budget` characters, in the order they were said: the
/// most valuable first (its score, the session's topic words it adds, less what it repeats);
/// one worth less than [`choice::THRESHOLD`] is left out unless a pattern family named it,
/// and a section takes at most `max_items` (its most valuable, not its first).
pub(super) fn choose<'a>(
    candidates: &'a [Candidate],
    budget: usize,
    max_items: usize,
    stats: &TermStats,
) -> Vec<&'a Candidate> {
    // Terms as numbers: the values are computed many times over.
    let mut ids: HashMap<&str, usize> = HashMap::new();
    let mut numbered = |terms: &'a HashSet<String>| -> Vec<usize> {
        terms
            .iter()
            .map(|t| {
                let next = ids.len();
                *ids.entry(t.as_str()).or_insert(next)
            })
            .collect()
    };
    struct Choice<'a> {
        candidate: &'a Candidate,
        terms: Vec<usize>,
        /// Topic terms and what each adds.
        topic: Vec<(usize, f64)>,
    }
    let mut pool: Vec<Choice> = candidates
        .iter()
        .map(|candidate| Choice {
            candidate,
            terms: numbered(&candidate.terms),
            topic: Vec::new(),
        })
        .collect();
    for choice in &mut pool {
        choice.topic = choice
            .candidate
            .topic
            .iter()
            .map(|t| (ids[t.as_str()], stats.weight(t)))
            .collect();
    }
    let mut said = vec![false; ids.len()];
    let mut topics = vec![false; ids.len()];
    let value = |choice: &Choice, said: &[bool], topics: &[bool]| {
        let new = choice.terms.iter().filter(|t| !said[**t]).count();
        let repeated = 1.0 - new as f64 / choice.terms.len().max(1) as f64;
        let continues = new >= 2 && choice.topic.iter().any(|(t, _)| topics[*t]);
        let adds: f64 = choice.topic.iter().filter(|(t, _)| !said[*t]).map(|(_, w)| w).sum();
        choice.candidate.score - choice::REDUNDANCY * 3.0 * repeated
            + if continues { choice::CONTINUES_TOPIC } else { 0.0 }
            + adds
    };
    let mut kept: Vec<&Candidate> = Vec::new();
    let mut used = 0usize;
    while !pool.is_empty() {
        let (index, best) = pool
            .iter()
            .enumerate()
            .map(|(i, c)| (i, value(c, &said, &topics)))
            .max_by(|(ia, a), (ib, b)| {
                a.total_cmp(b)
                    .then(pool[*ib].candidate.order.cmp(&pool[*ia].candidate.order))
            })
            .expect("a non-empty pool");
        let choice = pool.swap_remove(index);
        let candidate = choice.candidate;
        if best < choice::THRESHOLD && !candidate.certain {
            continue;
        }
        let cost = candidate_chars(candidate);
        if used + cost > budget && !kept.is_empty() {
            continue;
        }
        if kept
            .iter()
            .filter(|k| k.kind.section() == candidate.kind.section())
            .count()
            >= max_items
        {
            continue;
        }
        if kept
            .iter()
            .any(|k| k.kind == candidate.kind && jaccard(&k.terms, &candidate.terms) >= 0.6)
        {
            continue;
        }
        used += cost;
        for term in &choice.terms {
            said[*term] = true;
        }
        for (term, _) in &choice.topic {
            topics[*term] = true;
        }
        kept.push(candidate);
    }
    kept.sort_by_key(|c| c.order);
    kept
}

/// The Jaccard similarity of two term sets (what [`term_jaccard`] computes from texts).
pub(super) fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = a.intersection(b).count() as f64;
    shared / ((a.len() + b.len()) as f64 - shared)
}

/// What the text says an artifact is: the clause mentioning it, without the reference and
/// the words pointing at it ("技术方案文档在 ART-001" -> "技术方案文档").
pub(super) fn artifact_context(text: &str, reference: &str) -> String {
    static POINTER: LazyLock<Regex> =
        LazyLock::new(|| pattern(r"(?i)(\s|在|是|见|于|:|：|\(|（)+$|^(\s|:|：)+|\b(see|in|at|is|are|under|for)\s*$"));
    let clause = text
        .split(['，', ',', '；', ';', '。', '\n'])
        .find(|c| c.contains(reference))
        .unwrap_or_default()
        .replace(reference, "");
    let mut desc = clause.trim().to_string();
    for _ in 0..3 {
        let next = POINTER.replace_all(&desc, "").trim().to_string();
        if next == desc {
            break;
        }
        desc = next;
    }
    desc.trim_end_matches(['.', '!', '?', '。']).to_string()
}

pub(super) fn candidate_chars(candidate: &Candidate) -> usize {
    match &candidate.decision {
        Some(d) => char_count(&d.what) + char_count(&d.why) + char_count(&d.who) + 4,
        None => char_count(&candidate.text),
    }
}
