//! `thinkus train extract`: the knowledge manager's clause head (a memory type, or not a
//! memory), and how it joins the rules.
//!
//! Each line's utterance is cut into clauses by the rules (as extraction does); a clause's label
//! is the type of the first expected memory whose keywords it all holds, else "none". The
//! engine is scored the way `thinkus bench extract` scores it: every line's candidates go
//! through `admit`, then precision, recall and junk ratio per language. The rules keep their
//! candidates (and so their precision); the head adds one for a clause the rules leave empty
//! when its most likely type's probability reaches `add`. Choices, by cross-validation (folds
//! by line, near-identical lines and translations together):
//! 1. prefix (passage / query), stacking (the head also reads what the rules saw) and model:
//!    the highest recall among the thresholds whose precision is at least the rules' alone,
//!    as the bench counts it and with the memories stored from noise lines counted as wrong,
//!    the threshold searched on the out-of-fold predictions of every line (so these figures
//!    are slightly optimistic);
//! 2. for the chosen setting, nested cross-validation: in each fold, the threshold is chosen
//!    on the other folds' inner out-of-fold predictions (heads trained without the fold), then
//!    scored on the fold. That is the figure the weight file reports; its threshold is the
//!    one chosen on every line's out-of-fold predictions.
//!
//! Lines with earlier messages are scored on their last message only (the bench also reads the
//! earlier ones, and discounts what they alone yield).

use std::collections::BTreeMap;

use anyhow::Context;
use serde_json::{Value, json};
use thinkus_e5::Role;
use thinkus_knowledge_manager::KnowledgeConfig;
use thinkus_knowledge_manager::learn::{Admission, Extracted, admit, extraction_call, parse_candidates};
use thinkus_knowledge_manager::learned::{self, NOT_A_MEMORY, Policy, TYPES};
use thinkus_knowledge_manager::rules::{self, Segment};
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
    segment: usize,
    text: String,
    label: usize,
}

fn parse(text: &str, file: &str) -> anyhow::Result<Vec<Line>> {
    let mut lines = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let labelled = Labelled::parse(raw).with_context(|| format!("{file}:{}", number + 1))?;
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

/// The clause's label: the type of the first expected memory whose keywords it holds.
fn label_of(text: &str, expected: &[Expected]) -> usize {
    expected
        .iter()
        .find(|e| e.held_in(text))
        .and_then(|e| TYPES.iter().position(|x| x.as_str() == e.memory_type))
        .unwrap_or(TYPES.len())
}

/// The trainer's views of the bench's counts.
trait Figures {
    fn row(&self) -> String;
    fn json(&self) -> Value;
}

impl Figures for Score {
    fn row(&self) -> String {
        format!(
            "P {:.3} R {:.3} junk {:.3}",
            self.precision(),
            self.recall(),
            self.junk_ratio()
        )
    }

    fn json(&self) -> Value {
        let r = |v: f64| (v * 1000.0).round() / 1000.0;
        json!({"precision": r(self.precision()), "recall": r(self.recall()), "junk": r(self.junk_ratio())})
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

/// Scores, overall ("all") and per language.
type ByLanguage = BTreeMap<String, Score>;

/// The thresholds searched: the head adds a clause at one of these.
const ADDS: [f32; 14] = [
    0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95,
];

/// The policy under which the head adds nothing (the rules alone).
const RULES_ONLY: Policy = Policy { add: 1.01 };

struct Evaluation<'a> {
    lines: &'a [Line],
    clauses: &'a [Clause],
    /// Per line, its clauses' indices by segment.
    clause_of: &'a [BTreeMap<usize, usize>],
    /// The head's probabilities per clause (those of the lines scored).
    predictions: &'a [Vec<f32>],
    config: KnowledgeConfig,
}

impl Evaluation<'_> {
    /// The scores of the lines `only` selects under `policy`.
    fn score(&self, policy: Policy, only: &dyn Fn(usize) -> bool) -> ByLanguage {
        let mut by = ByLanguage::new();
        for (l, line) in self.lines.iter().enumerate() {
            if !only(l) {
                continue;
            }
            let mut candidates = Vec::new();
            for (s, segment) in line.segments.iter().enumerate() {
                match segment {
                    Segment::Confirmed { candidate, .. } => candidates.push(candidate.clone()),
                    Segment::Clause { text, reading, .. } => {
                        let Some(&c) = self.clause_of[l].get(&s) else { continue };
                        debug_assert_eq!(self.clauses[c].text, *text);
                        if let Some(candidate) = policy.candidate(text, reading, &self.predictions[c], "pm") {
                            candidates.push(candidate);
                        }
                    }
                }
            }
            let score = score_line(line, candidates, &self.config);
            by.entry("all".into()).or_default().add(&score);
            by.entry(line.lang.clone()).or_default().add(&score);
        }
        by
    }

    /// On the lines `only` selects, the threshold with the highest recall among those whose
    /// precision is at least the rules' alone, both as the bench counts it and with the
    /// memories stored from noise lines counted as wrong (so the head's additions keep the
    /// junk ratio in check too); ties: the higher precision; the rules alone when none is.
    fn tune(&self, only: &dyn Fn(usize) -> bool) -> (Policy, ByLanguage) {
        let rules = self.score(RULES_ONLY, only)["all"];
        let mut best = (RULES_ONLY, self.score(RULES_ONLY, only));
        for add in ADDS {
            let policy = Policy { add };
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
}

fn language_rows(by: &ByLanguage) -> String {
    by.iter()
        .filter(|(l, _)| l.as_str() != "all")
        .map(|(l, s)| format!("{l}: {}", s.row()))
        .collect::<Vec<_>>()
        .join("; ")
}

fn describe(policy: Policy) -> String {
    format!("add {:.2}", policy.add)
}

fn figures(by: &ByLanguage) -> BTreeMap<String, Value> {
    by.iter().map(|(k, s)| (k.clone(), s.json())).collect()
}

pub fn run(args: &TrainArgs, config: &crate::config::Config) -> anyhow::Result<()> {
    let files = args.read()?;
    let mut lines = Vec::new();
    for (file, text) in &files {
        lines.extend(parse(text, &file.path)?);
    }
    anyhow::ensure!(lines.len() >= 50, "{} lines are too few to train on", lines.len());
    let mut clauses = Vec::new();
    let mut clause_of = vec![BTreeMap::new(); lines.len()];
    for (l, line) in lines.iter().enumerate() {
        for (s, segment) in line.segments.iter().enumerate() {
            if let Segment::Clause { text, .. } = segment {
                clause_of[l].insert(s, clauses.len());
                clauses.push(Clause {
                    line: l,
                    segment: s,
                    text: text.clone(),
                    label: label_of(text, &line.expected),
                });
            }
        }
    }
    // How many expected memories a clause can hold at all (all keywords in one clause).
    let expected: usize = lines.iter().map(|l| l.expected.len()).sum();
    let reachable: usize = lines
        .iter()
        .enumerate()
        .map(|(l, line)| {
            line.expected
                .iter()
                .filter(|e| clause_of[l].values().any(|c| e.held_in(&clauses[*c].text)))
                .count()
        })
        .sum();
    let positives = clauses.iter().filter(|c| c.label < TYPES.len()).count();
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
    let mut group_ids = groups.clone();
    group_ids.sort_unstable();
    group_ids.dedup();
    say(format!(
        "{} folds over {} groups of lines ({})",
        args.folds,
        group_ids.len(),
        folds::Grouping::DEFAULT.describe()
    ));

    let knowledge = KnowledgeConfig::default();
    // The rules alone, as the bench runs them.
    let mut rules_alone = ByLanguage::new();
    for line in &lines {
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

    let labels: Vec<String> = TYPES
        .iter()
        .map(|t| t.as_str().to_string())
        .chain([NOT_A_MEMORY.to_string()])
        .collect();
    let classes: Vec<usize> = clauses.iter().map(|c| c.label).collect();
    let fit = |x: &[Vec<f32>], on: &[usize], model: Model| {
        let rows: Vec<Vec<f32>> = on.iter().map(|i| x[*i].clone()).collect();
        let targets: Vec<usize> = on.iter().map(|i| classes[*i]).collect();
        train(
            &rows,
            Targets::Classes(&targets),
            &vec![1.0; rows.len()],
            labels.clone(),
            &model.settings(),
        )
    };
    let reading_of = |c: &Clause| match &lines[c.line].segments[c.segment] {
        Segment::Clause { reading, .. } => reading.clone(),
        Segment::Confirmed { .. } => unreachable!("clauses are clause segments"),
    };
    let readings: Vec<_> = clauses.iter().map(reading_of).collect();
    let everyone = |_: usize| true;

    // 1. Prefix, stacking and model.
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
                .zip(&readings)
                .map(|(v, r)| learned::inputs(v, r, stacked))
                .collect();
            for model in MODELS {
                let started = std::time::Instant::now();
                let oof = out_of_fold(&clause_fold, args.folds, |on, test| {
                    let head = fit(&x, on, model);
                    test.iter().map(|i| head.predict(&x[*i])).collect()
                });
                let evaluation = Evaluation {
                    lines: &lines,
                    clauses: &clauses,
                    clause_of: &clause_of,
                    predictions: &oof,
                    config: knowledge.clone(),
                };
                let (policy, by) = evaluation.tune(&everyone);
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
        .zip(&readings)
        .map(|(v, r)| learned::inputs(v, r, stacked))
        .collect();

    // 2. Nested cross-validation of the thresholds: in each fold, chosen on the other folds'
    //    inner out-of-fold predictions, scored on the fold.
    let started = std::time::Instant::now();
    let mut nested = ByLanguage::new();
    let mut nested_rules = ByLanguage::new();
    let mut per_fold = Vec::new();
    for f in 0..args.folds {
        let inner = out_of_fold(&clause_fold, args.folds, |on, test| {
            if test.first().is_none_or(|i| clause_fold[*i] == f) {
                return vec![Vec::new(); test.len()];
            }
            let on: Vec<usize> = on.iter().copied().filter(|i| clause_fold[*i] != f).collect();
            let head = fit(&x, &on, model);
            test.iter().map(|i| head.predict(&x[*i])).collect()
        });
        let inner_evaluation = Evaluation {
            lines: &lines,
            clauses: &clauses,
            clause_of: &clause_of,
            predictions: &inner,
            config: knowledge.clone(),
        };
        let (policy, _) = inner_evaluation.tune(&|l| line_fold[l] != f);
        let outer = Evaluation {
            lines: &lines,
            clauses: &clauses,
            clause_of: &clause_of,
            predictions: &chosen.oof,
            config: knowledge.clone(),
        };
        let in_fold = |l: usize| line_fold[l] == f;
        let by = outer.score(policy, &in_fold);
        let rules = outer.score(RULES_ONLY, &in_fold);
        say(format!(
            "  fold {f}: {} | {} (rules alone {})",
            describe(policy),
            by["all"].row(),
            rules["all"].row()
        ));
        per_fold.push(json!({"add": policy.add, "figures": figures(&by), "rules_alone": figures(&rules)}));
        for (k, s) in &by {
            nested.entry(k.clone()).or_default().add(s);
        }
        for (k, s) in &rules {
            nested_rules.entry(k.clone()).or_default().add(s);
        }
    }
    say(format!(
        "nested cross-validation, rules + head: {} | {} | {:.0}s",
        nested["all"].row(),
        language_rows(&nested),
        started.elapsed().as_secs_f64()
    ));
    say(format!(
        "nested cross-validation, rules alone:  {} | {}",
        nested_rules["all"].row(),
        language_rows(&nested_rules)
    ));
    let policy = chosen.policy;
    say(format!(
        "chosen thresholds (every line's out-of-fold predictions): {}",
        describe(policy)
    ));

    // 3. The head on every clause.
    let all: Vec<usize> = (0..clauses.len()).collect();
    let head = fit(&x, &all, model);
    let mut file = HeadFile::new("extract", LOCAL_EMBEDDER, prefix, dim);
    file.command = args.command("extract");
    file.data = files.iter().map(|(f, _)| f.clone()).collect();
    file.data_sha256 = thinkus_learn::file::data_hash(&file.data);
    file.heads.insert("clause".into(), head);
    policy.record(&mut file, stacked);
    file.choices = json!({
        "folds": args.folds,
        "groups": group_ids.len(),
        "clauses": clauses.len(),
        "reachable": {"expected": expected, "within_one_clause": reachable},
        "rules_alone": figures(&rules_alone),
        "thresholds": "the highest recall with precision at least the rules' alone, with and without the memories stored from noise lines counted as wrong",
        "heads": table,
        "prefix": {"passage_recall": passage.by["all"].recall(), "query_recall": query.by["all"].recall(), "paired_difference": mean, "standard_error": spread, "chosen": prefix},
        "model": model.name(),
        "stacked": stacked,
        "nested": {"rules_and_head": figures(&nested), "rules_alone": figures(&nested_rules), "folds": per_fold},
        "chosen": figures(&chosen.by),
    });
    write(&file, &args.out_or("extract"), args.dry_run)
}
