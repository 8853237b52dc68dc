//! `thinkus train extract`: the knowledge manager's clause head (a memory type, or not a
//! memory), and how it joins the rules.
//!
//! Each line's utterance is cut into clauses by the rules (as extraction does); a clause's label
//! is the type of the expected memory whose keywords it holds, else "none" (a clause holding the
//! keywords of several expected memories of different types is one row per type, each weighted
//! by its share, when cross-validation favours that over the first one's type). The engine is
//! scored the way `thinkus bench extract` scores it: every line's candidates go through
//! `admit`, then precision, recall and junk ratio per language. Choices, by cross-validation
//! (folds by line, near-identical lines and translations together):
//! 1. prefix (passage / query), stacking (the head also reads what the rules saw) and model,
//!    with the head only adding clauses the rules leave empty: the highest recall among the
//!    thresholds whose precision is at least the rules' alone, as the bench counts it and with
//!    the memories stored from noise lines counted as wrong, the threshold searched on the
//!    out-of-fold predictions of every line (so these figures are slightly optimistic);
//! 2. a diagnosis of that setting's out-of-fold errors (what is stored wrongly, what is missed
//!    and why);
//! 3. for the chosen setting, each labelling and each way of joining the rules (the head only
//!    adds; it may also turn a rule's candidate away when "not a memory" is likely enough
//!    (`veto`); it may re-type one (`retype`); both), scored by nested cross-validation: in each
//!    fold, the thresholds are chosen on the other folds' inner out-of-fold predictions (heads
//!    trained without the fold), then scored on the fold. Where the head does more than add,
//!    the thresholds chosen are those with the highest precision (memories stored from noise
//!    lines counted as wrong) among those whose recall is at least the adding-only one's on
//!    the same lines. The landed combination is the one with the highest nested precision
//!    (noise counted) whose nested recall is within `RECALL_MARGIN` of the adding-only head's
//!    with the first labelling; its thresholds are then chosen on every line's out-of-fold
//!    predictions, and the head is trained on every clause.
//!
//! Lines with earlier messages are scored on their last message only (the bench also reads the
//! earlier ones, and discounts what they alone yield).

use std::collections::BTreeMap;

use anyhow::Context;
use serde_json::{Value, json};
use thinkus_e5::Role;
use thinkus_knowledge_manager::KnowledgeConfig;
use thinkus_knowledge_manager::learn::{Admission, Extracted, admit, extraction_call, parse_candidates};
use thinkus_knowledge_manager::learned::{self, Choice, OFF, Policy, TYPES};
use thinkus_knowledge_manager::rules::{self, Reading, Segment};
use thinkus_learn::ngrams::{self, NgramHead, NgramSettings};
use thinkus_learn::train::{Targets, train};
use thinkus_learn::{HeadFile, folds};

use super::{Embeddings, LOCAL_EMBEDDER, MODELS, Model, TrainArgs, out_of_fold, paired_difference, say, write};
use crate::bench::extract::{Expected, Labelled, Score};

/// One labelled utterance.
struct Line {
    lang: String,
    expected: Vec<Expected>,
    /// The utterance's segments (the rules' reading of its last message).
    segments: Vec<Segment>,
    utterance: String,
}

/// One clause to classify.
struct Clause {
    line: usize,
    text: String,
    /// The types of the expected memories whose keywords it holds (distinct, in the line's
    /// order); empty: not a memory.
    types: Vec<usize>,
}

/// How a clause's training rows are labelled.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Labelling {
    /// The type of the first expected memory whose keywords it holds.
    First,
    /// One row per type of the expected memories whose keywords it holds, each weighted by
    /// its share.
    Shared,
}

impl Labelling {
    fn name(self) -> &'static str {
        match self {
            Labelling::First => "first",
            Labelling::Shared => "shared",
        }
    }

    /// A clause's rows: (class, weight).
    fn rows(self, clause: &Clause) -> Vec<(usize, f32)> {
        match (self, clause.types.as_slice()) {
            (_, []) => vec![(TYPES.len(), 1.0)],
            (Labelling::First, [first, ..]) => vec![(*first, 1.0)],
            (Labelling::Shared, types) => {
                let share = 1.0 / types.len() as f32;
                types.iter().map(|t| (*t, share)).collect()
            }
        }
    }
}

/// The training rows of the clauses `on` under a labelling, one per class a clause takes:
/// the clause's `input`, its class and its weight.
fn labelled_rows<T>(
    clauses: &[Clause],
    on: &[usize],
    labelling: Labelling,
    input: impl Fn(usize) -> T,
) -> (Vec<T>, Vec<usize>, Vec<f32>) {
    let mut rows = (Vec::new(), Vec::new(), Vec::new());
    for i in on {
        for (class, weight) in labelling.rows(&clauses[*i]) {
            rows.0.push(input(*i));
            rows.1.push(class);
            rows.2.push(weight);
        }
    }
    rows
}

/// How the head joins the rules.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Joining {
    /// It adds clauses the rules leave empty.
    Adds,
    /// It also turns a rule's candidate away.
    Vetoes,
    /// It also re-types a rule's candidate.
    Retypes,
    /// Both.
    VetoesAndRetypes,
}

impl Joining {
    const ALL: [Joining; 4] = [
        Joining::Adds,
        Joining::Vetoes,
        Joining::Retypes,
        Joining::VetoesAndRetypes,
    ];

    fn name(self) -> &'static str {
        match self {
            Joining::Adds => "adds",
            Joining::Vetoes => "adds + veto",
            Joining::Retypes => "adds + retype",
            Joining::VetoesAndRetypes => "adds + veto + retype",
        }
    }

    fn vetoes(self) -> &'static [f32] {
        match self {
            Joining::Vetoes | Joining::VetoesAndRetypes => &VETOES,
            _ => &[OFF],
        }
    }

    fn retypes(self) -> &'static [f32] {
        match self {
            Joining::Retypes | Joining::VetoesAndRetypes => &RETYPES,
            _ => &[OFF],
        }
    }
}

/// Nested recall may fall this much below the adding-only head's for a combination that is
/// more precise to be landed (13 of 2,662 expected memories).
const RECALL_MARGIN: f64 = 0.005;

fn parse(text: &str, file: &str) -> anyhow::Result<Vec<Line>> {
    let mut lines = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let labelled = Labelled::parse(raw).with_context(|| format!("{file}:{}", number + 1))?;
        anyhow::ensure!(
            labelled.expected.len() <= 64,
            "{file}:{}: more than 64 expected memories",
            number + 1
        );
        // As the bench builds the conversation.
        let messages = labelled.messages();
        let input = extraction_call(&messages, "pm", Some("bench")).input;
        let last = messages.len() - 1;
        let segments = rules::segments(&input)
            .into_iter()
            .filter(|s| s.message() == last)
            .collect();
        lines.push(Line {
            lang: labelled.lang,
            expected: labelled.expected,
            segments,
            utterance: labelled.utterance,
        });
    }
    Ok(lines)
}

/// The types of the expected memories whose keywords `text` holds, distinct, in order.
fn types_in(text: &str, expected: &[Expected]) -> Vec<usize> {
    let mut types = Vec::new();
    for e in expected.iter().filter(|e| e.held_in(text)) {
        if let Some(t) = TYPES.iter().position(|x| x.as_str() == e.memory_type)
            && !types.contains(&t)
        {
            types.push(t);
        }
    }
    types
}

/// The trainer's views of the bench's counts.
trait Figures {
    fn row(&self) -> String;
    fn json(&self) -> Value;
}

impl Figures for Score {
    fn row(&self) -> String {
        format!(
            "P {:.3} R {:.3} junk {:.3} (P with noise {:.3})",
            self.precision(),
            self.recall(),
            self.junk_ratio(),
            self.precision_with_noise()
        )
    }

    fn json(&self) -> Value {
        let r = |v: f64| (v * 1000.0).round() / 1000.0;
        json!({"precision": r(self.precision()), "recall": r(self.recall()), "junk": r(self.junk_ratio()), "precision_with_noise": r(self.precision_with_noise())})
    }
}

/// What admission writes of a line's candidates, scored as the bench scores it.
fn score_line(line: &Line, candidates: Vec<Value>, config: &KnowledgeConfig) -> Score {
    let stored: Vec<Extracted> = parse_candidates(&Value::Array(candidates).to_string())
        .into_iter()
        .filter(|c| admit(config, c, &[]).0 == Admission::Write)
        .collect();
    Score::of_line(&line.expected, &stored)
}

/// One candidate as admission and the bench see it.
#[derive(Debug, Clone, Copy, Default)]
struct Hit {
    /// Admission writes it.
    written: bool,
    /// The expected memories of its line it matches (type and keywords), one bit each.
    matched: u64,
    /// Those whose keywords its content holds, whatever the type.
    held: u64,
}

impl Hit {
    fn of(candidate: &Value, expected: &[Expected], config: &KnowledgeConfig) -> Option<Hit> {
        let parsed = parse_candidates(&Value::Array(vec![candidate.clone()]).to_string());
        let stored = parsed.first()?;
        let mut hit = Hit {
            written: admit(config, stored, &[]).0 == Admission::Write,
            ..Hit::default()
        };
        for (i, e) in expected.iter().enumerate() {
            if e.matches(stored) {
                hit.matched |= 1 << i;
            }
            if e.held_in(&stored.content) {
                hit.held |= 1 << i;
            }
        }
        Some(hit)
    }
}

/// A line's score from the candidates it gave, as [`Score::of_line`] counts them.
fn score_of(expected: usize, hits: &[Hit]) -> Score {
    let written: Vec<&Hit> = hits.iter().filter(|h| h.written).collect();
    let mut score = Score {
        lines: 1,
        ..Score::default()
    };
    if expected == 0 {
        score.noise_lines = 1;
        score.noise_stored = usize::from(!written.is_empty());
        score.noise_memories = written.len();
    } else {
        score.stored = written.len();
        score.stored_matched = written.iter().filter(|h| h.matched != 0).count();
        score.expected = expected;
        score.expected_found = written.iter().fold(0u64, |all, h| all | h.matched).count_ones() as usize;
    }
    score
}

/// Scores, overall ("all") and per language.
type ByLanguage = BTreeMap<String, Score>;

/// The thresholds searched: the head adds a clause at one of these. (0.15 to 0.25 were tried
/// when the n-gram head at a share of 0.5 took 0.30 in every fold: no figure moved.)
const ADDS: [f32; 14] = [
    0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95,
];

/// The veto thresholds searched (and off).
const VETOES: [f32; 7] = [0.50, 0.60, 0.70, 0.80, 0.90, 0.95, OFF];

/// The re-typing thresholds searched (and off).
const RETYPES: [f32; 7] = [0.50, 0.60, 0.70, 0.80, 0.90, 0.95, OFF];

/// The policy under which the head adds nothing (the rules alone).
const RULES_ONLY: Policy = Policy::adding(OFF);

/// What the lines give under one set of the head's predictions.
struct Evaluation<'a> {
    lines: &'a [Line],
    /// Per line, its clauses' indices.
    clauses_of: &'a [Vec<usize>],
    readings: &'a [Reading],
    /// The rules' candidate of each clause, and the confirmations of each line.
    rule_hits: &'a [Option<Hit>],
    confirmed: &'a [Vec<Hit>],
    /// The head's probabilities per clause (empty for clauses not predicted).
    predictions: &'a [Vec<f32>],
    /// The head's most likely type's candidate, per clause.
    head_hits: Vec<Option<Hit>>,
}

impl<'a> Evaluation<'a> {
    fn new(data: &'a Data, predictions: &'a [Vec<f32>], config: &KnowledgeConfig) -> Self {
        let head_hits = data
            .clauses
            .iter()
            .zip(predictions)
            .map(|(clause, p)| {
                let (t, probability) = learned::best_type(p)?;
                let candidate = rules::candidate_for(TYPES[t], &clause.text, f64::from(probability), "pm");
                Hit::of(&candidate, &data.lines[clause.line].expected, config)
            })
            .collect();
        Self {
            lines: &data.lines,
            clauses_of: &data.clauses_of,
            readings: &data.readings,
            rule_hits: &data.rule_hits,
            confirmed: &data.confirmed,
            predictions,
            head_hits,
        }
    }

    /// A line's candidates under `policy`, with each clause's choice.
    fn hits(&self, policy: Policy, l: usize) -> Vec<(Option<usize>, Choice, Option<Hit>)> {
        let mut out: Vec<_> = self.confirmed[l]
            .iter()
            .map(|h| (None, Choice::Rules, Some(*h)))
            .collect();
        for &c in &self.clauses_of[l] {
            let choice = policy.choose(&self.readings[c], &self.predictions[c]);
            let hit = match choice {
                Choice::Rules => self.rule_hits[c],
                Choice::Head(..) => self.head_hits[c],
                Choice::Nothing => None,
            };
            out.push((Some(c), choice, hit));
        }
        out
    }

    /// The scores of the lines `only` selects under `policy`.
    fn score(&self, policy: Policy, only: &dyn Fn(usize) -> bool) -> ByLanguage {
        let mut by = ByLanguage::new();
        for (l, line) in self.lines.iter().enumerate() {
            if !only(l) {
                continue;
            }
            let hits: Vec<Hit> = self.hits(policy, l).into_iter().filter_map(|(_, _, h)| h).collect();
            let score = score_of(line.expected.len(), &hits);
            by.entry("all".into()).or_default().add(&score);
            by.entry(line.lang.clone()).or_default().add(&score);
        }
        by
    }

    /// On the lines `only` selects, the threshold with the highest recall among those whose
    /// precision is at least the rules' alone, both as the bench counts it and with the
    /// memories stored from noise lines counted as wrong (so the head's additions keep the
    /// junk ratio in check too); ties: the higher precision; the rules alone when none is.
    fn tune_adding(&self, only: &dyn Fn(usize) -> bool) -> (Policy, ByLanguage) {
        let rules = self.score(RULES_ONLY, only)["all"];
        let mut best = (RULES_ONLY, self.score(RULES_ONLY, only));
        for add in ADDS {
            let policy = Policy::adding(add);
            let by = self.score(policy, only);
            let all = by["all"];
            if all.precision() < rules.precision() || all.precision_with_noise() < rules.precision_with_noise() {
                continue;
            }
            let current = best.1["all"];
            if (all.recall(), all.precision()) > (current.recall(), current.precision()) {
                best = (policy, by);
            }
        }
        best
    }

    /// The thresholds of `joining` on the lines `only` selects: for the adding-only head, as
    /// [`Self::tune_adding`]; otherwise the highest precision with the memories stored from
    /// noise lines counted as wrong (ties: the higher recall) among the thresholds whose
    /// recall is at least the adding-only head's and whose precision is at least the rules'.
    fn tune(&self, joining: Joining, only: &dyn Fn(usize) -> bool) -> (Policy, ByLanguage) {
        let adding = self.tune_adding(only);
        if joining == Joining::Adds {
            return adding;
        }
        let rules = self.score(RULES_ONLY, only)["all"];
        let floor = adding.1["all"].recall();
        let mut best = adding;
        for add in ADDS {
            for &veto in joining.vetoes() {
                for &retype in joining.retypes() {
                    let policy = Policy { add, veto, retype };
                    let by = self.score(policy, only);
                    let all = by["all"];
                    if all.recall() < floor
                        || all.precision() < rules.precision()
                        || all.precision_with_noise() < rules.precision_with_noise()
                    {
                        continue;
                    }
                    let current = best.1["all"];
                    if (all.precision_with_noise(), all.recall()) > (current.precision_with_noise(), current.recall()) {
                        best = (policy, by);
                    }
                }
            }
        }
        best
    }
}

/// The lines, their clauses and what the rules give, shared by every evaluation.
struct Data {
    lines: Vec<Line>,
    clauses: Vec<Clause>,
    clauses_of: Vec<Vec<usize>>,
    readings: Vec<Reading>,
    rule_hits: Vec<Option<Hit>>,
    confirmed: Vec<Vec<Hit>>,
}

fn language_rows(by: &ByLanguage) -> String {
    by.iter()
        .filter(|(l, _)| l.as_str() != "all")
        .map(|(l, s)| format!("{l}: {}", s.row()))
        .collect::<Vec<_>>()
        .join("; ")
}

fn describe(policy: Policy) -> String {
    let mut text = format!("add {:.2}", policy.add);
    if policy.veto < OFF {
        text.push_str(&format!(", veto {:.2}", policy.veto));
    }
    if policy.retype < OFF {
        text.push_str(&format!(", retype {:.2}", policy.retype));
    }
    text
}

fn figures(by: &ByLanguage) -> BTreeMap<String, Value> {
    by.iter().map(|(k, s)| (k.clone(), s.json())).collect()
}

/// The most expected memories of a line that its clauses can give, one candidate per clause
/// (a clause can give one it holds the keywords of): a matching, by augmenting paths.
fn ceiling(holds: &[Vec<usize>], expected: usize) -> usize {
    fn augment(c: usize, holds: &[Vec<usize>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
        for &e in &holds[c] {
            if seen[e] {
                continue;
            }
            seen[e] = true;
            if owner[e].is_none_or(|other| augment(other, holds, seen, owner)) {
                owner[e] = Some(c);
                return true;
            }
        }
        false
    }
    let mut owner = vec![None; expected];
    (0..holds.len())
        .filter(|c| augment(*c, holds, &mut vec![false; expected], &mut owner))
        .count()
}

/// Where the errors of the head's out-of-fold predictions under `policy` come from: the
/// labels (what one clause can hold), what is stored wrongly and what is missed, and why.
fn diagnose(data: &Data, evaluation: &Evaluation, policy: Policy) -> Value {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut add = |key: &'static str, n: usize| *counts.entry(key).or_default() += n;
    for (l, line) in data.lines.iter().enumerate() {
        let expecting = !line.expected.is_empty();
        let clauses = &data.clauses_of[l];
        // The labels.
        let holds: Vec<Vec<usize>> = clauses
            .iter()
            .map(|&c| {
                (0..line.expected.len())
                    .filter(|e| line.expected[*e].held_in(&data.clauses[c].text))
                    .collect()
            })
            .collect();
        add("expected", line.expected.len());
        add(
            "recall ceiling (one memory per clause)",
            ceiling(&holds, line.expected.len()),
        );
        for (&c, held) in clauses.iter().zip(&holds) {
            let clause = &data.clauses[c];
            if held.len() >= 2 {
                add("clauses holding several expected memories", 1);
                if clause.types.len() >= 2 {
                    add("clauses holding several expected memories of different types", 1);
                }
            }
            if expecting && held.is_empty() {
                add("clauses of expecting lines labelled none", 1);
                let text = clause.text.to_lowercase();
                if line
                    .expected
                    .iter()
                    .any(|e| e.keywords.iter().any(|k| text.contains(&k.to_lowercase())))
                {
                    add("  of which hold part of an expected memory's keywords", 1);
                }
                if data.readings[c].candidate.is_some() {
                    add("  of which the rules give a candidate", 1);
                }
            }
        }
        // What is stored.
        let hits = evaluation.hits(policy, l);
        for (_, choice, hit) in &hits {
            let Some(hit) = hit.filter(|h| h.written) else { continue };
            let source = matches!(choice, Choice::Rules);
            if !expecting {
                add(
                    if source {
                        "noise lines: stored by the rules"
                    } else {
                        "noise lines: stored by the head"
                    },
                    1,
                );
            } else if hit.matched != 0 {
                add(
                    if source {
                        "stored right by the rules"
                    } else {
                        "stored right by the head"
                    },
                    1,
                );
            } else if hit.held != 0 {
                add(
                    if source {
                        "stored with the wrong type by the rules"
                    } else {
                        "stored with the wrong type by the head"
                    },
                    1,
                );
            } else {
                add(
                    if source {
                        "stored, unrelated to what is expected, by the rules"
                    } else {
                        "stored, unrelated to what is expected, by the head"
                    },
                    1,
                );
            }
        }
        if !expecting && hits.iter().any(|(_, _, h)| h.is_some_and(|h| h.written)) {
            add("noise lines with something stored", 1);
        }
        if !expecting {
            add("noise lines", 1);
        }
        // What is missed, and why.
        let found = hits
            .iter()
            .filter_map(|(_, _, h)| h.filter(|h| h.written))
            .fold(0u64, |all, h| all | h.matched);
        for e in 0..line.expected.len() {
            if found & (1 << e) != 0 {
                continue;
            }
            let bit = 1u64 << e;
            let holds_it = |c: usize| clauses.iter().zip(&holds).any(|(x, held)| *x == c && held.contains(&e));
            let at: Vec<&(Option<usize>, Choice, Option<Hit>)> =
                hits.iter().filter(|(c, _, _)| c.is_some_and(holds_it)).collect();
            let why = if at
                .iter()
                .any(|(_, _, h)| h.is_some_and(|h| h.written && h.matched != 0))
            {
                "missed: its clause stored another expected memory (one memory per clause)"
            } else if at
                .iter()
                .any(|(_, _, h)| h.is_some_and(|h| h.written && h.held & bit != 0))
            {
                "missed: its clause stored with another type"
            } else if at
                .iter()
                .any(|(_, _, h)| h.is_some_and(|h| !h.written && h.matched & bit != 0))
            {
                "missed: admission turned the right candidate away"
            } else if at.iter().any(|(_, _, h)| h.is_some_and(|h| !h.written)) {
                "missed: admission turned a wrong candidate away"
            } else if at.iter().any(|(_, choice, _)| *choice == Choice::Nothing) {
                if at
                    .iter()
                    .any(|(c, _, _)| c.is_some_and(|c| data.readings[c].candidate.is_some()))
                {
                    "missed: the head turned the rules' candidate away"
                } else {
                    "missed: no candidate (the head below its threshold, or too short)"
                }
            } else {
                "missed: within no clause of the last message"
            };
            add(why, 1);
        }
    }
    for (key, n) in &counts {
        say(format!("  {key}: {n}"));
    }
    json!(counts)
}

/// A model fitted on some rows (the first slice) and answering for others (the second).
type Fit<'a> = dyn Fn(&[usize], &[usize]) -> Vec<Vec<f32>> + Sync + 'a;

/// The shares of the probabilities the n-gram head may take (`--ngrams`).
const NGRAM_SHARES: [f32; 4] = [0.0, 0.25, 0.5, 0.75];

/// The L2 penalties tried for the n-gram head (against the mean loss per clause).
const NGRAM_L2: [f32; 4] = [1e-5, 1e-4, 1e-3, 1e-2];

/// The mean negative log probability of each row's class (rows without predictions left out).
fn log_loss(predictions: &[Vec<f32>], class: impl Fn(usize) -> usize) -> f64 {
    let (sum, n) = predictions
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .fold((0.0, 0usize), |(sum, n), (i, p)| {
            (sum - f64::from(p[class(i)].max(1e-7)).ln(), n + 1)
        });
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// How much the n-gram head must add, by nested cross-validation, to be landed: the sum of
/// precision (noise counted) and recall at least this much above the run without it.
const NGRAM_GAIN: f64 = 0.01;

/// Neither precision (noise counted) nor recall may fall more than this, overall, nor in
/// either language by more than [`NGRAM_LANGUAGE_LOSS`].
const NGRAM_LOSS: f64 = 0.005;
const NGRAM_LANGUAGE_LOSS: f64 = 0.02;

/// The landing rule of the n-gram head, fixed before its first run (2026-12-03): among the
/// runs with it that lose neither precision (noise counted) nor recall against the landed run
/// without it (by [`NGRAM_LOSS`] overall, [`NGRAM_LANGUAGE_LOSS`] in a language), the one with
/// the highest sum of the two, if that sum gains at least [`NGRAM_GAIN`].
fn ngram_landing<'a, R>(
    without: &'a R,
    with: impl Iterator<Item = &'a R>,
    by: impl Fn(&R) -> &ByLanguage,
) -> Option<&'a R> {
    let sum = |s: &Score| s.precision_with_noise() + s.recall();
    let base = by(without);
    with.filter(|r| {
        by(r).iter().all(|(language, s)| {
            let loss = if language == "all" {
                NGRAM_LOSS
            } else {
                NGRAM_LANGUAGE_LOSS
            };
            base.get(language).is_none_or(|b| {
                s.precision_with_noise() >= b.precision_with_noise() - loss && s.recall() >= b.recall() - loss
            })
        })
    })
    .filter(|r| sum(&by(r)["all"]) >= sum(&base["all"]) + NGRAM_GAIN)
    .max_by(|a, b| {
        sum(&by(a)["all"])
            .partial_cmp(&sum(&by(b)["all"]))
            .unwrap_or(std::cmp::Ordering::Equal)
    })
}

/// Out-of-fold probabilities with the n-gram head's mixed in at a share (rows without
/// predictions stay empty).
fn mixed(oof: &[Vec<f32>], ngram: Option<&[Vec<f32>]>, share: f32) -> Vec<Vec<f32>> {
    match ngram {
        Some(ngram) if share > 0.0 => oof
            .iter()
            .zip(ngram)
            .map(|(e, n)| {
                if e.is_empty() {
                    Vec::new()
                } else {
                    ngrams::mix(e, n, share)
                }
            })
            .collect(),
        _ => oof.to_vec(),
    }
}

/// A record with the n-gram head's share when it has one (a file trained without the head
/// reads as before it existed).
fn with_share_field(mut record: Value, share: f32) -> Value {
    if share > 0.0 {
        record["ngram_share"] = json!(share);
    }
    record
}

fn with_share(share: f32) -> String {
    if share > 0.0 {
        format!(", n-grams {share}")
    } else {
        String::new()
    }
}

pub fn run(args: &TrainArgs, config: &crate::config::Config) -> anyhow::Result<()> {
    let files = args.read()?;
    let mut lines = Vec::new();
    for (file, text) in &files {
        lines.extend(parse(text, &file.path)?);
    }
    anyhow::ensure!(lines.len() >= 50, "{} lines are too few to train on", lines.len());
    let knowledge = KnowledgeConfig::default();
    let mut clauses = Vec::new();
    let mut clauses_of = vec![Vec::new(); lines.len()];
    let mut readings = Vec::new();
    let mut rule_hits = Vec::new();
    let mut confirmed = vec![Vec::new(); lines.len()];
    for (l, line) in lines.iter().enumerate() {
        for segment in &line.segments {
            match segment {
                Segment::Clause { text, reading, .. } => {
                    clauses_of[l].push(clauses.len());
                    clauses.push(Clause {
                        line: l,
                        text: text.clone(),
                        types: types_in(text, &line.expected),
                    });
                    readings.push(reading.clone());
                    rule_hits.push(
                        reading
                            .candidate
                            .as_ref()
                            .and_then(|c| Hit::of(c, &line.expected, &knowledge)),
                    );
                }
                Segment::Confirmed { candidate, .. } => {
                    confirmed[l].extend(Hit::of(candidate, &line.expected, &knowledge));
                }
            }
        }
    }
    let data = Data {
        lines,
        clauses,
        clauses_of,
        readings,
        rule_hits,
        confirmed,
    };
    let (lines, clauses) = (&data.lines, &data.clauses);
    // How many expected memories a clause can hold at all (all keywords in one clause).
    let expected: usize = lines.iter().map(|l| l.expected.len()).sum();
    let reachable: usize = lines
        .iter()
        .enumerate()
        .map(|(l, line)| {
            line.expected
                .iter()
                .filter(|e| data.clauses_of[l].iter().any(|c| e.held_in(&clauses[*c].text)))
                .count()
        })
        .sum();
    let positives = clauses.iter().filter(|c| !c.types.is_empty()).count();
    say(format!(
        "extract: {} lines from {} files, {} clauses ({positives} state a memory); {reachable} of {expected} expected memories lie within one clause",
        lines.len(),
        files.len(),
        clauses.len()
    ));

    let mut embeddings = Embeddings::open(config, &args.cache)?;
    let texts: Vec<String> = clauses.iter().map(|c| c.text.clone()).collect();
    let by_prefix: [(&'static str, Vec<Vec<f32>>); 2] = [
        ("passage", embeddings.embed(&texts, Role::Passage)?),
        ("query", embeddings.embed(&texts, Role::Query)?),
    ];
    let utterances: Vec<String> = lines.iter().map(|l| l.utterance.clone()).collect();
    let line_vectors = embeddings.embed(&utterances, Role::Query)?;
    let dim = embeddings.dim();
    let keys: Vec<String> = utterances.iter().map(|t| folds::text_key(t)).collect();
    let languages: Vec<String> = lines.iter().map(|l| l.lang.clone()).collect();
    let groups = folds::groups(&line_vectors, &keys, &languages, folds::Grouping::DEFAULT);
    let line_fold = folds::assign(&groups, args.folds, 22);
    let clause_fold: Vec<usize> = clauses.iter().map(|c| line_fold[c.line]).collect();
    say(format!(
        "{} folds over {} groups of lines ({})",
        args.folds,
        folds::count(&groups),
        folds::Grouping::DEFAULT.describe()
    ));

    // The rules alone, as the bench runs them; the trainer's own counting must agree.
    let mut rules_alone = ByLanguage::new();
    for line in lines {
        let candidates: Vec<Value> = line
            .segments
            .iter()
            .filter_map(Segment::rule_candidate)
            .cloned()
            .collect();
        let score = score_line(line, candidates, &knowledge);
        rules_alone.entry("all".into()).or_default().add(&score);
        rules_alone.entry(line.lang.clone()).or_default().add(&score);
    }
    say(format!(
        "rules alone: {} | {}",
        rules_alone["all"].row(),
        language_rows(&rules_alone)
    ));
    let no_predictions = vec![Vec::new(); clauses.len()];
    let counted = Evaluation::new(&data, &no_predictions, &knowledge).score(RULES_ONLY, &|_| true)["all"];
    let bench = rules_alone["all"];
    anyhow::ensure!(
        (
            counted.stored,
            counted.stored_matched,
            counted.expected_found,
            counted.noise_memories
        ) == (
            bench.stored,
            bench.stored_matched,
            bench.expected_found,
            bench.noise_memories
        ),
        "the trainer counts the rules alone otherwise than the bench: {} against {}",
        counted.row(),
        bench.row()
    );

    let labels = learned::labels();
    let fit = |x: &[Vec<f32>], on: &[usize], model: Model, labelling: Labelling| {
        let (rows, targets, weights) = labelled_rows(clauses, on, labelling, |i| x[i].clone());
        train(
            &rows,
            Targets::Classes(&targets),
            &weights,
            labels.clone(),
            &model.settings(),
        )
    };
    let everyone = |_: usize| true;

    // 1. Prefix, stacking and model (the first labelling, the head adding only).
    struct Outcome {
        prefix: &'static str,
        stacked: bool,
        model: Model,
        oof: Vec<Vec<f32>>,
        policy: Policy,
        by: ByLanguage,
        by_fold: Vec<f64>,
    }
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut table = Vec::new();
    for (prefix, vectors) in &by_prefix {
        for stacked in [false, true] {
            let x: Vec<Vec<f32>> = vectors
                .iter()
                .zip(&data.readings)
                .map(|(v, r)| learned::inputs(v, r, stacked))
                .collect();
            for model in MODELS {
                let started = std::time::Instant::now();
                let oof = out_of_fold(&clause_fold, args.folds, |on, test| {
                    let head = fit(&x, on, model, Labelling::First);
                    test.iter().map(|i| head.predict(&x[*i])).collect()
                });
                let evaluation = Evaluation::new(&data, &oof, &knowledge);
                let (policy, by) = evaluation.tune_adding(&everyone);
                let by_fold: Vec<f64> = (0..args.folds)
                    .map(|f| evaluation.score(policy, &|l| line_fold[l] == f)["all"].recall())
                    .collect();
                say(format!(
                    "{prefix:<7} stacked={stacked:<5} {:<16} {} | {} | {} | {:.0}s",
                    model.name(),
                    describe(policy),
                    by["all"].row(),
                    language_rows(&by),
                    started.elapsed().as_secs_f64()
                ));
                table.push(json!({
                    "prefix": prefix, "stacked": stacked, "model": model.name(),
                    "add": policy.add, "figures": figures(&by),
                }));
                outcomes.push(Outcome {
                    prefix,
                    stacked,
                    model,
                    oof,
                    policy,
                    by,
                    by_fold,
                });
            }
        }
    }
    // The clauses are embedded in one batch as passages; the query prefix (one call per
    // clause) is taken only when its best recall beats the passage's by more than twice the
    // standard error of the paired per-fold difference.
    let best_of = |prefix: &str| {
        outcomes.iter().filter(|o| o.prefix == prefix).max_by(|a, b| {
            (a.by["all"].recall(), a.by["all"].precision())
                .partial_cmp(&(b.by["all"].recall(), b.by["all"].precision()))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    };
    let (passage, query) = (
        best_of("passage").context("no setting")?,
        best_of("query").context("no setting")?,
    );
    let (mean, spread) = paired_difference(&query.by_fold, &passage.by_fold);
    let prefix = if mean > 2.0 * spread { "query" } else { "passage" };
    say(format!(
        "prefix: recall passage {:.3} vs query {:.3}; paired per-fold difference (query - passage) {mean:+.3} +- {spread:.3}: {prefix}",
        passage.by["all"].recall(),
        query.by["all"].recall()
    ));
    let chosen = best_of(prefix).context("no setting")?;
    let (stacked, model) = (chosen.stacked, chosen.model);
    say(format!(
        "chosen: prefix {prefix}, stacked {stacked}, {} ({})",
        model.name(),
        describe(chosen.policy)
    ));
    let vectors = &by_prefix.iter().find(|(p, _)| *p == prefix).context("prefix")?.1;
    let x: Vec<Vec<f32>> = vectors
        .iter()
        .zip(&data.readings)
        .map(|(v, r)| learned::inputs(v, r, stacked))
        .collect();

    // 2. Where the chosen setting's out-of-fold errors come from.
    say(format!(
        "diagnosis of the out-of-fold predictions ({}):",
        describe(chosen.policy)
    ));
    let diagnosis = diagnose(&data, &Evaluation::new(&data, &chosen.oof, &knowledge), chosen.policy);

    // 3. Each labelling and way of joining the rules, by nested cross-validation: in each fold,
    //    the thresholds chosen on the other folds' inner out-of-fold predictions, scored on the
    //    fold.
    struct Nested {
        labelling: Labelling,
        joining: Joining,
        /// The n-gram head's share of the probabilities (0: the embedding head alone).
        share: f32,
        by: ByLanguage,
        per_fold: Vec<Value>,
    }
    // With --ngrams, the first labelling's runs again with the n-gram head's out-of-fold
    // probabilities mixed in at each share, its inner ones for the inner folds.
    let fit_ngrams = |on: &[usize], l2: f32| -> NgramHead {
        let (texts, targets, weights) = labelled_rows(clauses, on, Labelling::First, |i| clauses[i].text.as_str());
        let settings = NgramSettings {
            l2,
            ..NgramSettings::default()
        };
        ngrams::train(&texts, &targets, &weights, labels.clone(), &settings)
    };
    // Its L2 penalty: the lowest out-of-fold log loss of the first labels (a head too sure of
    // itself outvotes the embedding head whatever its share).
    let ngram_l2 = if args.ngrams {
        let mut losses = Vec::new();
        for l2 in NGRAM_L2 {
            let oof = out_of_fold(&clause_fold, args.folds, |on, test| {
                let head = fit_ngrams(on, l2);
                test.iter().map(|i| head.predict(&clauses[*i].text)).collect()
            });
            let loss = log_loss(&oof, |i| Labelling::First.rows(&clauses[i])[0].0);
            say(format!("n-gram head, L2 {l2:e}: out-of-fold log loss {loss:.4}"));
            losses.push((l2, loss));
        }
        losses
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(NgramSettings::default().l2, |(l2, _)| *l2)
    } else {
        NgramSettings::default().l2
    };
    let ngram_predict = |on: &[usize], test: &[usize]| {
        let head = fit_ngrams(on, ngram_l2);
        test.iter().map(|i| head.predict(&clauses[*i].text)).collect::<Vec<_>>()
    };
    let shares: &[f32] = if args.ngrams { &NGRAM_SHARES } else { &[0.0] };
    let mut nested_runs: Vec<Nested> = Vec::new();
    let mut oof_of: Vec<(Labelling, f32, Vec<Vec<f32>>)> = Vec::new();
    let mut nested_rules = ByLanguage::new();
    for labelling in [Labelling::First, Labelling::Shared] {
        let started = std::time::Instant::now();
        let oof = if labelling == Labelling::First {
            chosen.oof.clone()
        } else {
            out_of_fold(&clause_fold, args.folds, |on, test| {
                let head = fit(&x, on, model, labelling);
                test.iter().map(|i| head.predict(&x[*i])).collect()
            })
        };
        let shares = if labelling == Labelling::First { shares } else { &[0.0] };
        let ngram_oof = (shares.len() > 1).then(|| out_of_fold(&clause_fold, args.folds, ngram_predict));
        let outers: Vec<(f32, Vec<Vec<f32>>)> = shares
            .iter()
            .map(|share| (*share, mixed(&oof, ngram_oof.as_deref(), *share)))
            .collect();
        let mut runs: Vec<Nested> = shares
            .iter()
            .flat_map(|share| {
                Joining::ALL.iter().map(move |joining| Nested {
                    labelling,
                    joining: *joining,
                    share: *share,
                    by: ByLanguage::new(),
                    per_fold: Vec::new(),
                })
            })
            .collect();
        let rules_outer = Evaluation::new(&data, &oof, &knowledge);
        let outer_evaluations: Vec<(f32, Evaluation)> = outers
            .iter()
            .map(|(share, outer)| (*share, Evaluation::new(&data, outer, &knowledge)))
            .collect();
        for f in 0..args.folds {
            let inner_of = |predict: &Fit| {
                out_of_fold(&clause_fold, args.folds, |on, test| {
                    if test.first().is_none_or(|i| clause_fold[*i] == f) {
                        return vec![Vec::new(); test.len()];
                    }
                    let on: Vec<usize> = on.iter().copied().filter(|i| clause_fold[*i] != f).collect();
                    predict(&on, test)
                })
            };
            let inner = inner_of(&|on, test| {
                let head = fit(&x, on, model, labelling);
                test.iter().map(|i| head.predict(&x[*i])).collect()
            });
            let ngram_inner = (shares.len() > 1).then(|| inner_of(&ngram_predict));
            let in_fold = |l: usize| line_fold[l] == f;
            if labelling == Labelling::First {
                for (k, s) in &rules_outer.score(RULES_ONLY, &in_fold) {
                    nested_rules.entry(k.clone()).or_default().add(s);
                }
            }
            for (share, outer) in &outer_evaluations {
                let inner = mixed(&inner, ngram_inner.as_deref(), *share);
                let inner_evaluation = Evaluation::new(&data, &inner, &knowledge);
                for run in runs.iter_mut().filter(|r| r.share == *share) {
                    let (policy, _) = inner_evaluation.tune(run.joining, &|l| line_fold[l] != f);
                    let by = outer.score(policy, &in_fold);
                    say(format!(
                        "  {} labels, {}{}, fold {f}: {} | {}",
                        labelling.name(),
                        run.joining.name(),
                        with_share(run.share),
                        describe(policy),
                        by["all"].row()
                    ));
                    run.per_fold.push(json!({"add": policy.add, "veto": (policy.veto < OFF).then_some(policy.veto), "retype": (policy.retype < OFF).then_some(policy.retype), "figures": figures(&by)}));
                    for (k, s) in &by {
                        run.by.entry(k.clone()).or_default().add(s);
                    }
                }
            }
        }
        for run in &runs {
            say(format!(
                "nested cross-validation, {} labels, {}{}: {} | {} | {:.0}s",
                labelling.name(),
                run.joining.name(),
                with_share(run.share),
                run.by["all"].row(),
                language_rows(&run.by),
                started.elapsed().as_secs_f64()
            ));
        }
        nested_runs.extend(runs);
        oof_of.extend(outers.into_iter().map(|(share, oof)| (labelling, share, oof)));
    }
    say(format!(
        "nested cross-validation, rules alone: {} | {}",
        nested_rules["all"].row(),
        language_rows(&nested_rules)
    ));
    let baseline = nested_runs
        .iter()
        .find(|r| r.labelling == Labelling::First && r.joining == Joining::Adds && r.share == 0.0)
        .context("the adding-only run")?;
    let floor = baseline.by["all"].recall() - RECALL_MARGIN;
    // Without the n-gram head: the highest nested precision (noise counted) among the runs
    // whose recall is within the margin of the adding-only head's.
    let most_precise = |share: &dyn Fn(f32) -> bool| {
        nested_runs
            .iter()
            .filter(|r| share(r.share) && r.by["all"].recall() >= floor)
            .max_by(|a, b| {
                (a.by["all"].precision_with_noise(), a.by["all"].recall())
                    .partial_cmp(&(b.by["all"].precision_with_noise(), b.by["all"].recall()))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    };
    let without = most_precise(&|s| s == 0.0).unwrap_or(baseline);
    let with = ngram_landing(without, nested_runs.iter().filter(|r| r.share > 0.0), |r: &Nested| {
        &r.by
    });
    let landed = with.unwrap_or(without);
    let oof = &oof_of
        .iter()
        .find(|(l, s, _)| *l == landed.labelling && *s == landed.share)
        .context("the landed labelling")?
        .2;
    let (policy, by) = Evaluation::new(&data, oof, &knowledge).tune(landed.joining, &everyone);
    say(format!(
        "landed: {} labels, {}{} (nested recall at least {floor:.3}, the highest nested precision with noise{}); thresholds on every line's out-of-fold predictions: {} | {}",
        landed.labelling.name(),
        landed.joining.name(),
        with_share(landed.share),
        if args.ngrams {
            "; with the n-gram head by its landing rule"
        } else {
            ""
        },
        describe(policy),
        by["all"].row()
    ));

    // 4. The head on every clause.
    let all: Vec<usize> = (0..clauses.len()).collect();
    let head = fit(&x, &all, model, landed.labelling);
    let mut file = HeadFile::new("extract", LOCAL_EMBEDDER, prefix, dim);
    file.command = args.command("extract");
    file.data = files.iter().map(|(f, _)| f.clone()).collect();
    file.data_sha256 = thinkus_learn::file::data_hash(&file.data);
    file.heads.insert("clause".into(), head);
    policy.record(&mut file, stacked);
    if landed.share > 0.0 {
        file.ngram_heads
            .insert(learned::NGRAM_HEAD.into(), fit_ngrams(&all, ngram_l2));
        file.thresholds.insert(learned::NGRAM_SHARE.into(), landed.share);
    }
    file.choices = json!({
        "folds": args.folds,
        "groups": folds::count(&groups),
        "clauses": clauses.len(),
        "reachable": {"expected": expected, "within_one_clause": reachable},
        "rules_alone": figures(&rules_alone),
        "thresholds": "adding only: the highest recall with precision at least the rules' alone, with and without the memories stored from noise lines counted as wrong; with a veto or re-typing: the highest precision with noise lines counted among those with recall at least the adding-only head's",
        "heads": table,
        "prefix": {"passage_recall": passage.by["all"].recall(), "query_recall": query.by["all"].recall(), "paired_difference": mean, "standard_error": spread, "chosen": prefix},
        "model": model.name(),
        "stacked": stacked,
        "diagnosis": diagnosis,
        "nested": {
            "rules_alone": figures(&nested_rules),
            "runs": nested_runs.iter().map(|r| with_share_field(json!({
                "labels": r.labelling.name(), "joining": r.joining.name(),
                "figures": figures(&r.by), "folds": r.per_fold,
            }), r.share)).collect::<Vec<_>>(),
            "recall_margin": RECALL_MARGIN,
            "landed": with_share_field(json!({"labels": landed.labelling.name(), "joining": landed.joining.name(), "figures": figures(&landed.by)}), landed.share),
        },
        "chosen": figures(&by),
    });
    if args.ngrams {
        file.choices["ngrams"] = json!({
            "buckets": ngrams::BUCKETS,
            "l2": ngram_l2,
            "l2_by": "the lowest out-of-fold log loss",
            "shares": NGRAM_SHARES,
        });
    }
    write(&file, &args.out_or("extract"), args.dry_run)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures of one run: precision (noise counted) and recall, per language and overall.
    fn run_of(en: (usize, usize, usize, usize), zh: (usize, usize, usize, usize)) -> ByLanguage {
        let score = |(stored, matched, expected, found): (usize, usize, usize, usize)| Score {
            stored,
            stored_matched: matched,
            expected,
            expected_found: found,
            ..Score::default()
        };
        let (en, zh) = (score(en), score(zh));
        let mut all = en;
        all.add(&zh);
        [("all", all), ("en", en), ("zh", zh)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    #[test]
    fn the_ngram_head_lands_only_when_it_gains_and_no_language_loses() {
        let without = run_of((100, 80, 200, 100), (100, 75, 200, 96));
        fn by(r: &ByLanguage) -> &ByLanguage {
            r
        }
        // Recall up by 0.02 in both languages, precision as it was: taken.
        let better = run_of((104, 84, 200, 104), (104, 79, 200, 100));
        assert!(std::ptr::eq(
            ngram_landing(&without, [&better].into_iter(), by).expect("taken"),
            &better
        ));
        // The same gain overall, from English alone, Chinese recall down by 0.025: not taken.
        let one_sided = run_of((120, 100, 200, 120), (95, 70, 200, 91));
        assert!(ngram_landing(&without, [&one_sided].into_iter(), by).is_none());
        // Too small a gain: not taken.
        let same = run_of((100, 80, 200, 100), (100, 75, 200, 97));
        assert!(ngram_landing(&without, [&same].into_iter(), by).is_none());
        // Of two that qualify, the one with the higher sum.
        let best = run_of((104, 86, 200, 106), (104, 80, 200, 102));
        assert!(std::ptr::eq(
            ngram_landing(&without, [&better, &best].into_iter(), by).expect("taken"),
            &best
        ));
    }

    #[test]
    fn mixing_keeps_rows_without_predictions_empty() {
        let oof = vec![vec![0.8, 0.2], Vec::new()];
        let ngram = vec![vec![0.4, 0.6], vec![0.5, 0.5]];
        assert_eq!(mixed(&oof, Some(&ngram), 0.0), oof, "share 0: as they are");
        assert_eq!(mixed(&oof, None, 0.5), oof, "no head: as they are");
        let half = mixed(&oof, Some(&ngram), 0.5);
        assert!((half[0][0] - 0.6).abs() < 1e-6 && (half[0][1] - 0.4).abs() < 1e-6);
        assert!(half[1].is_empty(), "an inner fold's own rows stay without predictions");
    }

    #[test]
    fn one_clause_gives_one_of_the_memories_it_holds() {
        // Clause 0 holds both memories, clause 1 only the first: both can be given.
        assert_eq!(ceiling(&[vec![0, 1], vec![0]], 2), 2);
        // One clause holding two memories gives one of them.
        assert_eq!(ceiling(&[vec![0, 1]], 2), 1);
        assert_eq!(ceiling(&[vec![], vec![1]], 2), 1);
    }

    #[test]
    fn the_trainer_counts_a_line_as_the_bench_does() {
        let config = KnowledgeConfig::default();
        let line = [Expected::one("constraint", "5万"), Expected::one("action_item", "小王")];
        let candidates = [
            rules::candidate_for(
                thinkus_common::model::MemoryType::Constraint,
                "预算5万，小王负责",
                0.9,
                "pm",
            ),
            rules::candidate_for(thinkus_common::model::MemoryType::Risk, "小王可能会离职", 0.9, "pm"),
            rules::candidate_for(
                thinkus_common::model::MemoryType::Fact,
                "天气不错，适合出门走走",
                0.9,
                "pm",
            ),
            // A placeholder: admission turns it away.
            rules::candidate_for(
                thinkus_common::model::MemoryType::Constraint,
                "{{client}}的预算5万",
                0.9,
                "pm",
            ),
        ];
        let hits: Vec<Hit> = candidates
            .iter()
            .map(|c| Hit::of(c, &line, &config).expect("a candidate"))
            .collect();
        assert_eq!(hits[0].matched, 0b01);
        assert_eq!(hits[0].held, 0b11, "it holds both memories' keywords");
        assert_eq!(
            (hits[1].matched, hits[1].held),
            (0, 0b10),
            "the second memory's words, another type"
        );
        assert!(
            !hits[3].written && hits[3].matched == 0b01,
            "turned away, though it matches"
        );
        let stored: Vec<Extracted> = parse_candidates(&Value::Array(candidates.to_vec()).to_string())
            .into_iter()
            .filter(|c| admit(&config, c, &[]).0 == Admission::Write)
            .collect();
        for (expected, hits) in [(&line[..], &hits[..]), (&[][..], &hits[..])] {
            let bench = Score::of_line(expected, &stored);
            let trainer = score_of(expected.len(), hits);
            assert_eq!(
                (
                    trainer.stored,
                    trainer.stored_matched,
                    trainer.expected,
                    trainer.expected_found
                ),
                (bench.stored, bench.stored_matched, bench.expected, bench.expected_found)
            );
            assert_eq!(
                (trainer.noise_lines, trainer.noise_stored, trainer.noise_memories),
                (bench.noise_lines, bench.noise_stored, bench.noise_memories)
            );
        }
    }
}
