//! `thinkus train controller`: the memory controller's heads (need, mode, types).
//!
//! Choices, each by cross-validation on the training files (out-of-fold predictions of every
//! line, thresholds searched on them):
//! 1. the embedding's prefix (query, the vector the gateway already sends, unless passage is
//!    better by more than twice the folds' standard error), whether the heads also read the
//!    rules' signal (stacked), and the model (linear or one hidden layer of 32 or 64), per head:
//!    need by the worse of its two ratios against their targets (invalid / 0.10, missed /
//!    0.05), mode by accuracy, types by F2 (a type left out hides its memories; an extra one
//!    only widens the search); the smallest model within one standard error of the best;
//! 2. how heads and rules combine: which rule signals keep their answer (those whose
//!    retrieve-or-not is right on at least a share of the training part of each fold), and
//!    whether the rules' types join the head's.
//!
//! 3. the chosen setting scored with nested thresholds (each fold's chosen on the others), on
//!    these folds and on folds that hold out whole topics (k-means over the vectors); how the
//!    heads are trained (class weights, seeds averaged) by nested figures on the topic folds,
//!    under a landing rule fixed before the figures ([`improves`]); the file's thresholds from
//!    the topic folds' predictions; a diagnosis of the out-of-fold errors by kind of line.
//!
//! Rules alone, heads alone and combined are all printed, per language.

use std::collections::BTreeMap;

use anyhow::Context;
use serde_json::{Value, json};
use thinkus_common::model::{ControlDecision, MemoryType, NeedMemory, RetrievalMode};
use thinkus_e5::Role;
use thinkus_learn::ngrams::{self, NgramHead, NgramSettings};
use thinkus_learn::train::{Targets, train};
use thinkus_learn::{HeadFile, Network, folds};
use thinkus_memory_controller::learned::{self, NEED_LABELS, Policy, Probabilities, TYPES};
use thinkus_memory_controller::rules::{self, RuleInput};

use super::{Embeddings, LOCAL_EMBEDDER, MODELS, Model, TrainArgs, out_of_fold, say, write};
use crate::bench::stats::ratio;

/// One labelled message.
struct Line {
    text: String,
    lang: String,
    need: NeedMemory,
    mode: RetrievalMode,
    types: Vec<MemoryType>,
    message_count: u32,
    recent: Vec<String>,
}

fn parse(text: &str, file: &str) -> anyhow::Result<Vec<Line>> {
    let mut lines = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let at = || format!("{file}:{}", number + 1);
        let item: Value = serde_json::from_str(raw).with_context(at)?;
        let need = match item["need"].as_str() {
            Some("yes") => NeedMemory::Yes,
            Some("no") => NeedMemory::No,
            Some("maybe") => NeedMemory::Maybe,
            other => anyhow::bail!("{}: need {other:?}", at()),
        };
        let context = &item["context"];
        lines.push(Line {
            text: item["text"].as_str().with_context(at)?.to_string(),
            lang: item["lang"].as_str().unwrap_or("?").to_string(),
            need,
            mode: match item["mode"].as_str() {
                Some("details") => RetrievalMode::Details,
                _ => RetrievalMode::Catalog,
            },
            types: item["types"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_str()?.parse().ok())
                .collect(),
            message_count: context["message_count"].as_u64().unwrap_or(5) as u32,
            recent: context["recent_messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect(),
        });
    }
    Ok(lines)
}

impl Line {
    fn input(&self) -> RuleInput<'_> {
        RuleInput {
            message: &self.text,
            message_count: self.message_count,
            recent_messages: &self.recent,
            project_id: Some("train"),
            type_hints: &[],
            now: crate::bench::dataset_now(None).unwrap_or_default(),
            ..Default::default()
        }
    }
}

fn need_class(need: NeedMemory) -> usize {
    match need {
        NeedMemory::Yes => 0,
        NeedMemory::No => 1,
        NeedMemory::Maybe => 2,
    }
}

/// How the heads are trained: with class weights that balance the need classes (and details
/// against catalog) in the training part, and how many seeds' networks are averaged.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Training {
    balanced: bool,
    seeds: u64,
}

impl Training {
    /// The heads as trained before issue 22's second step: one seed, every line weighing 1.
    const PLAIN: Training = Training {
        balanced: false,
        seeds: 1,
    };

    fn name(self) -> String {
        format!(
            "{}, {} seed{}",
            if self.balanced {
                "balanced classes"
            } else {
                "unweighted"
            },
            self.seeds,
            if self.seeds == 1 { "" } else { "s averaged" }
        )
    }

    /// Each sample's weight: 1, or (balanced) n / (classes x the size of its class).
    fn weights(self, classes: &[usize], count: usize) -> Vec<f32> {
        if !self.balanced {
            return vec![1.0; classes.len()];
        }
        let mut sizes = vec![0usize; count];
        for c in classes {
            sizes[*c] += 1;
        }
        let n = classes.len() as f32;
        classes
            .iter()
            .map(|c| n / (count as f32 * sizes[*c].max(1) as f32))
            .collect()
    }

    /// One network per seed, trained with `model`'s settings (seed + 0, 1, ...).
    fn networks(
        self,
        model: Model,
        rows: &[Vec<f32>],
        targets: Targets<'_>,
        weights: &[f32],
        labels: Vec<String>,
    ) -> Vec<Network> {
        (0..self.seeds)
            .map(|k| {
                let mut settings = model.settings();
                settings.seed += k;
                train(rows, targets, weights, labels.clone(), &settings)
            })
            .collect()
    }
}

/// The three heads trained on some lines, each a list of networks whose outputs are averaged.
struct Heads {
    need: Vec<Network>,
    mode: Vec<Network>,
    types: Vec<Network>,
}

/// The heads trained on `train_on`: need with `models[0]`, mode with `models[1]`, types with
/// `models[2]`.
fn fit(lines: &[Line], x: &[Vec<f32>], train_on: &[usize], models: [Model; 3], training: Training) -> Heads {
    let rows: Vec<Vec<f32>> = train_on.iter().map(|i| x[*i].clone()).collect();
    let classes: Vec<usize> = train_on.iter().map(|i| need_class(lines[*i].need)).collect();
    let weights = training.weights(&classes, 3);
    let need = training.networks(
        models[0],
        &rows,
        Targets::Classes(&classes),
        &weights,
        NEED_LABELS.iter().map(|s| s.to_string()).collect(),
    );
    let needing: Vec<usize> = train_on
        .iter()
        .copied()
        .filter(|i| lines[*i].need != NeedMemory::No)
        .collect();
    let rows: Vec<Vec<f32>> = needing.iter().map(|i| x[*i].clone()).collect();
    let details: Vec<Vec<bool>> = needing
        .iter()
        .map(|i| vec![lines[*i].mode == RetrievalMode::Details])
        .collect();
    let detail_classes: Vec<usize> = details.iter().map(|d| usize::from(d[0])).collect();
    let weights = training.weights(&detail_classes, 2);
    let mode = training.networks(
        models[1],
        &rows,
        Targets::Labels(&details),
        &weights,
        vec!["details".into()],
    );
    let types: Vec<Vec<bool>> = needing
        .iter()
        .map(|i| TYPES.iter().map(|t| lines[*i].types.contains(t)).collect())
        .collect();
    let types = training.networks(
        models[2],
        &rows,
        Targets::Labels(&types),
        &vec![1.0; rows.len()],
        TYPES.iter().map(|t| t.as_str().to_string()).collect(),
    );
    Heads { need, mode, types }
}

fn probabilities(heads: &Heads, x: &[f32]) -> Vec<f32> {
    let mut out = learned::average(&heads.need, x);
    out.extend(learned::average(&heads.mode, x));
    out.extend(learned::average(&heads.types, x));
    out
}

fn unpack(values: &[f32]) -> Probabilities {
    Probabilities {
        yes: values[0],
        no: values[1],
        maybe: values[2],
        details: values[3],
        types: values[4..].to_vec(),
    }
}

/// The need head over n-grams trained on `train_on`, with the need classes balanced or not.
fn fit_ngrams(lines: &[Line], train_on: &[usize], l2: f32, training: Training) -> NgramHead {
    let texts: Vec<&str> = train_on.iter().map(|i| lines[*i].text.as_str()).collect();
    let classes: Vec<usize> = train_on.iter().map(|i| need_class(lines[*i].need)).collect();
    let weights = training.weights(&classes, 3);
    ngrams::train(
        &texts,
        &classes,
        &weights,
        NEED_LABELS.iter().map(|s| s.to_string()).collect(),
        &NgramSettings {
            l2,
            ..NgramSettings::default()
        },
    )
}

/// Out-of-fold need probabilities of the n-gram head.
fn ngram_oof(lines: &[Line], folds: &[usize], k: usize, l2: f32, training: Training) -> Vec<Vec<f32>> {
    out_of_fold(folds, k, |train_on, test| {
        let head = fit_ngrams(lines, train_on, l2, training);
        test.iter().map(|i| head.predict(&lines[*i].text)).collect()
    })
}

/// The heads' out-of-fold probabilities with the need part mixed with the n-gram head's
/// out-of-fold ones at a share (none: as they are).
fn with_ngrams(oof: &[Vec<f32>], ngram: Option<(&[Vec<f32>], f32)>) -> Vec<Vec<f32>> {
    oof.iter()
        .enumerate()
        .map(|(i, values)| {
            let mut values = values.clone();
            if let Some((ngram, share)) = ngram {
                let need = learned::mix(&values[..3], &ngram[i], share);
                values[..3].copy_from_slice(&need);
            }
            values
        })
        .collect()
}

/// The L2 penalties tried for the n-gram head (against the mean loss per line), and the
/// shares of the need probabilities it may take.
const NGRAM_L2: [f32; 3] = [3e-5, 1e-5, 3e-6];
const NGRAM_SHARES: [f32; 3] = [0.25, 0.5, 0.75];

/// The bench's figures over some decisions.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    triggered: usize,
    invalid: usize,
    needed: usize,
    missed: usize,
    mode_total: usize,
    mode_right: usize,
    types_expected: usize,
    types_hit: usize,
    types_given: usize,
}

impl Figures {
    fn add(&mut self, line: &Line, decision: &ControlDecision) {
        let triggered = decision.need_memory != NeedMemory::No;
        if triggered {
            self.triggered += 1;
            if line.need == NeedMemory::No {
                self.invalid += 1;
            }
        }
        if line.need == NeedMemory::Yes {
            self.needed += 1;
            if !triggered {
                self.missed += 1;
            }
        }
        if line.need != NeedMemory::No {
            self.mode_total += 1;
            if decision.retrieval_mode == line.mode {
                self.mode_right += 1;
            }
            self.types_expected += line.types.len();
            self.types_hit += line.types.iter().filter(|t| decision.memory_types.contains(t)).count();
            self.types_given += decision.memory_types.len();
        }
    }

    fn invalid(&self) -> f64 {
        ratio(self.invalid, self.triggered, 0.0)
    }

    fn missed(&self) -> f64 {
        ratio(self.missed, self.needed, 0.0)
    }

    /// The worse of the two need ratios against their targets (<= 1 meets both).
    fn need_score(&self) -> f64 {
        (self.invalid() / 0.10).max(self.missed() / 0.05)
    }

    fn mode(&self) -> f64 {
        ratio(self.mode_right, self.mode_total, 0.0)
    }

    fn type_recall(&self) -> f64 {
        ratio(self.types_hit, self.types_expected, 0.0)
    }

    fn type_precision(&self) -> f64 {
        ratio(self.types_hit, self.types_given, 1.0)
    }

    fn f2(&self) -> f64 {
        let (p, r) = (self.type_precision(), self.type_recall());
        if p + r == 0.0 { 0.0 } else { 5.0 * p * r / (4.0 * p + r) }
    }

    fn row(&self) -> String {
        format!(
            "invalid {:.3} missed {:.3} mode {:.3} types R {:.3} P {:.3}",
            self.invalid(),
            self.missed(),
            self.mode(),
            self.type_recall(),
            self.type_precision()
        )
    }

    fn json(&self) -> Value {
        let r = |v: f64| (v * 1000.0).round() / 1000.0;
        json!({
            "invalid": r(self.invalid()),
            "missed": r(self.missed()),
            "mode": r(self.mode()),
            "type_recall": r(self.type_recall()),
            "type_precision": r(self.type_precision()),
        })
    }
}

/// Figures overall and per language.
fn figures(lines: &[Line], decisions: &[ControlDecision]) -> BTreeMap<String, Figures> {
    let mut by: BTreeMap<String, Figures> = BTreeMap::new();
    for (line, decision) in lines.iter().zip(decisions) {
        by.entry("all".into()).or_default().add(line, decision);
        by.entry(line.lang.clone()).or_default().add(line, decision);
    }
    by
}

/// The kept signals of each of `k` folds (see [`kept_signals`]), from its training part; none
/// without a `share`.
fn kept_by_fold(
    lines: &[Line],
    rule: &[ControlDecision],
    fold_of: &[usize],
    k: usize,
    share: Option<f64>,
) -> Vec<Vec<String>> {
    (0..k)
        .map(|f| {
            let on: Vec<usize> = (0..lines.len()).filter(|i| fold_of[*i] != f).collect();
            share.map(|s| kept_signals(lines, rule, &on, s)).unwrap_or_default()
        })
        .collect()
}

/// Rule signals whose retrieve-or-not is right on at least `share` of `on` (and on 10 lines).
fn kept_signals(lines: &[Line], rule: &[ControlDecision], on: &[usize], share: f64) -> Vec<String> {
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for &i in on {
        let signal = rule[i].signals.first().map(String::as_str).unwrap_or("");
        let right = (rule[i].need_memory == NeedMemory::No) == (lines[i].need == NeedMemory::No);
        let entry = counts.entry(signal).or_default();
        entry.0 += usize::from(right);
        entry.1 += 1;
    }
    counts
        .into_iter()
        .filter(|(_, (right, total))| *total >= 10 && *right as f64 >= share * *total as f64)
        .map(|(s, _)| s.to_string())
        .collect()
}

/// How the heads and rules combine, cross-validated: the kept signals of each line's fold.
struct Combination<'a> {
    lines: &'a [Line],
    rule: &'a [ControlDecision],
    oof: &'a [Vec<f32>],
    /// The kept signals of each fold (from its training part).
    kept_by_fold: Vec<Vec<String>>,
    folds: &'a [usize],
}

impl Combination<'_> {
    fn decisions(&self, policy: &Policy) -> Vec<ControlDecision> {
        self.lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                let policy = Policy {
                    kept: self.kept_by_fold[self.folds[i]].clone(),
                    ..policy.clone()
                };
                policy.combine(self.rule[i].clone(), &unpack(&self.oof[i]), &line.input())
            })
            .collect()
    }

    /// The figures of each fold's lines.
    fn by_fold(&self, policy: &Policy, k: usize) -> Vec<Figures> {
        let decisions = self.decisions(policy);
        (0..k)
            .map(|f| {
                let mut figures = Figures::default();
                for (i, line) in self.lines.iter().enumerate() {
                    if self.folds[i] == f {
                        figures.add(line, &decisions[i]);
                    }
                }
                figures
            })
            .collect()
    }

    /// [`Combination::tune`] from `start`, and the tuned policy's figures overall and per
    /// language.
    fn tuned(&self, start: Policy) -> (Policy, BTreeMap<String, Figures>) {
        let (policy, _) = self.tune(start);
        let by = figures(self.lines, &self.decisions(&policy));
        (policy, by)
    }

    /// Thresholds searched in turn: "no" by the need score, details by mode accuracy, types
    /// by F2.
    fn tune(&self, policy: Policy) -> (Policy, Figures) {
        self.tune_on(policy, |_| true)
    }

    /// [`Combination::tune`] on the lines `on` accepts.
    fn tune_on(&self, mut policy: Policy, on: impl Fn(usize) -> bool) -> (Policy, Figures) {
        let overall = |p: &Policy| {
            let decisions = self.decisions(p);
            let mut figures = Figures::default();
            for (i, line) in self.lines.iter().enumerate() {
                if on(i) {
                    figures.add(line, &decisions[i]);
                }
            }
            figures
        };
        let grid = |from: f32, to: f32, step: f32| {
            let n = ((to - from) / step).round() as usize;
            (0..=n).map(move |k| from + step * k as f32)
        };
        let mut best = (f64::MAX, policy.no_threshold);
        for t in grid(0.3, 0.95, 0.025) {
            policy.no_threshold = t;
            let score = overall(&policy).need_score();
            if score < best.0 {
                best = (score, t);
            }
        }
        policy.no_threshold = best.1;
        let mut best = (f64::MIN, policy.details_threshold);
        for t in grid(0.2, 0.8, 0.05) {
            policy.details_threshold = t;
            let accuracy = overall(&policy).mode();
            if accuracy > best.0 {
                best = (accuracy, t);
            }
        }
        policy.details_threshold = best.1;
        let mut best = (f64::MIN, policy.type_threshold);
        for t in grid(0.1, 0.7, 0.05) {
            policy.type_threshold = t;
            let f2 = overall(&policy).f2();
            if f2 > best.0 {
                best = (f2, t);
            }
        }
        policy.type_threshold = best.1;
        let result = overall(&policy);
        (policy, result)
    }
}

impl Combination<'_> {
    /// Nested thresholds: each fold's lines decided with the thresholds tuned on the other
    /// folds' lines only, so no line's figure comes from a threshold chosen on it.
    fn nested(&self, start: &Policy, k: usize) -> Vec<ControlDecision> {
        let mut out: Vec<Option<ControlDecision>> = vec![None; self.lines.len()];
        for f in 0..k {
            let (policy, _) = self.tune_on(start.clone(), |i| self.folds[i] != f);
            for (i, decision) in self.decisions(&policy).into_iter().enumerate() {
                if self.folds[i] == f {
                    out[i] = Some(decision);
                }
            }
        }
        out.into_iter().map(|d| d.expect("every line is in a fold")).collect()
    }
}

/// Where out-of-fold decisions go wrong: for each kind of line (the rules' main signal, the
/// language, whether recent messages came with it), its lines, invalid retrievals (labelled
/// no, retrieved), misses (labelled yes, not retrieved) and mode errors.
fn diagnosis(lines: &[Line], rule: &[ControlDecision], decisions: &[ControlDecision], kept: &[String]) -> Value {
    #[derive(Default)]
    struct Count {
        lines: usize,
        no: usize,
        invalid: usize,
        yes: usize,
        missed: usize,
        modes: usize,
        mode_wrong: usize,
    }
    let mut by: BTreeMap<String, Count> = BTreeMap::new();
    for ((line, rule), decision) in lines.iter().zip(rule).zip(decisions) {
        let signal = rule.signals.first().map(String::as_str).unwrap_or("");
        let signal = signal.split(':').next().unwrap_or("");
        let kinds = [
            format!(
                "signal {signal}{}",
                if kept.iter().any(|k| k == signal) {
                    " (kept)"
                } else {
                    ""
                }
            ),
            format!("language {}", line.lang),
            if line.recent.is_empty() {
                "no recent messages".to_string()
            } else {
                "with recent messages".to_string()
            },
        ];
        for kind in kinds {
            let count = by.entry(kind).or_default();
            count.lines += 1;
            let triggered = decision.need_memory != NeedMemory::No;
            if line.need == NeedMemory::No {
                count.no += 1;
                count.invalid += usize::from(triggered);
            }
            if line.need == NeedMemory::Yes {
                count.yes += 1;
                count.missed += usize::from(!triggered);
            }
            if line.need != NeedMemory::No {
                count.modes += 1;
                count.mode_wrong += usize::from(decision.retrieval_mode != line.mode);
            }
        }
    }
    let mut rows: Vec<(&String, &Count)> = by.iter().collect();
    rows.sort_by_key(|(kind, c)| (std::cmp::Reverse(c.invalid + c.mode_wrong), kind.as_str()));
    say(
        "diagnosis (nested, topic folds): kind | lines | invalid of labelled no | missed of labelled yes | mode errors",
    );
    for (kind, c) in &rows {
        say(format!(
            "  {kind:<40} {:>5} | {:>3} of {:>4} | {:>3} of {:>4} | {:>3} of {:>4}",
            c.lines, c.invalid, c.no, c.missed, c.yes, c.mode_wrong, c.modes
        ));
    }
    Value::Array(
        rows.iter()
            .map(|(kind, c)| {
                json!({"kind": kind, "lines": c.lines, "labelled_no": c.no, "invalid": c.invalid,
                    "labelled_yes": c.yes, "missed": c.missed, "mode_lines": c.modes, "mode_errors": c.mode_wrong})
            })
            .collect(),
    )
}

/// Topics of the folds that hold out whole subjects (k-means over the query vectors): about 70
/// lines each on the training files, fixed before any figure was seen.
const TOPICS: usize = 50;

/// The landing rule, fixed before any option's figures were seen: an option replaces the plain
/// heads only when, by nested cross-validation on topic folds, its need score is at most 0.005
/// worse, its mode and type recall at most 0.005 worse, and either its need score is better by
/// more than 0.01 or its mode by more than 0.01; of those, the lowest need score (then the
/// best mode, then the first listed).
fn improves(option: &Figures, plain: &Figures) -> bool {
    option.need_score() <= plain.need_score() + 0.005
        && option.mode() >= plain.mode() - 0.005
        && option.type_recall() >= plain.type_recall() - 0.005
        && (option.need_score() < plain.need_score() - 0.01 || option.mode() > plain.mode() + 0.01)
}

fn default_policy() -> Policy {
    Policy {
        kept: Vec::new(),
        no_threshold: 0.5,
        details_threshold: 0.5,
        type_threshold: 0.5,
        rule_types: false,
    }
}

fn language_rows(by: &BTreeMap<String, Figures>) -> String {
    by.iter()
        .filter(|(lang, _)| lang.as_str() != "all")
        .map(|(lang, f)| format!("{lang}: {}", f.row()))
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn run(args: &TrainArgs, config: &crate::config::Config) -> anyhow::Result<()> {
    let files = args.read()?;
    let mut lines = Vec::new();
    for (file, text) in &files {
        lines.extend(parse(text, &file.path)?);
    }
    anyhow::ensure!(lines.len() >= 50, "{} lines are too few to train on", lines.len());
    say(format!("controller: {} lines from {} files", lines.len(), files.len()));
    let rule: Vec<ControlDecision> = lines.iter().map(|l| rules::decide(&l.input())).collect();
    let mut embeddings = Embeddings::open(config, &args.cache)?;
    let texts: Vec<String> = lines.iter().map(|l| l.text.clone()).collect();
    let by_prefix: [(&'static str, Vec<Vec<f32>>); 2] = [
        ("query", embeddings.embed(&texts, Role::Query)?),
        ("passage", embeddings.embed(&texts, Role::Passage)?),
    ];
    let dim = embeddings.dim();
    let keys: Vec<String> = texts.iter().map(|t| folds::text_key(t)).collect();
    let languages: Vec<String> = lines.iter().map(|l| l.lang.clone()).collect();
    let groups = folds::groups(&by_prefix[0].1, &keys, &languages, folds::Grouping::DEFAULT);
    let fold_of = folds::assign(&groups, args.folds, 22);
    let group_count = folds::count(&groups);
    say(format!(
        "{} folds over {group_count} groups ({})",
        args.folds,
        folds::Grouping::DEFAULT.describe()
    ));
    let everyone: Vec<usize> = (0..lines.len()).collect();
    let rules_alone = figures(&lines, &rule);
    say(format!(
        "rules alone: {} | {}",
        rules_alone["all"].row(),
        language_rows(&rules_alone)
    ));

    // 1. Prefix, stacking and model, per head.
    let mut table = Vec::new();
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (prefix, vectors) in &by_prefix {
        for stacked in [false, true] {
            let x: Vec<Vec<f32>> = vectors
                .iter()
                .zip(&rule)
                .map(|(v, r)| learned::inputs(v, r, stacked))
                .collect();
            for model in MODELS {
                let started = std::time::Instant::now();
                let oof = out_of_fold(&fold_of, args.folds, |train_on, test| {
                    let heads = fit(&lines, &x, train_on, [model; 3], Training::PLAIN);
                    test.iter().map(|i| probabilities(&heads, &x[*i])).collect()
                });
                let combination = Combination {
                    lines: &lines,
                    rule: &rule,
                    oof: &oof,
                    kept_by_fold: vec![Vec::new(); args.folds],
                    folds: &fold_of,
                };
                let (policy, result) = combination.tune(default_policy());
                let by_fold = combination.by_fold(&policy, args.folds);
                say(format!(
                    "{prefix:<7} stacked={stacked:<5} {:<16} need {:.3} (no >= {:.3}) | {} | F2 {:.3} | {:.0}s",
                    model.name(),
                    result.need_score(),
                    policy.no_threshold,
                    result.row(),
                    result.f2(),
                    started.elapsed().as_secs_f64()
                ));
                table.push(json!({
                    "prefix": prefix, "stacked": stacked, "model": model.name(),
                    "need_score": (result.need_score() * 1000.0).round() / 1000.0,
                    "f2": (result.f2() * 1000.0).round() / 1000.0,
                    "figures": result.json(),
                }));
                outcomes.push(Outcome {
                    prefix,
                    stacked,
                    model,
                    oof,
                    result,
                    by_fold,
                });
            }
        }
    }
    // The prefix: the gateway embeds each message once, as a query, for the retriever; the
    // passage prefix would cost a second embedding per turn, so it is taken only when its best
    // need score beats the query's by more than twice the standard error of their paired
    // per-fold difference.
    let best_of = |prefix: &str| {
        outcomes
            .iter()
            .filter(|o| o.prefix == prefix)
            .min_by(|a, b| a.result.need_score().total_cmp(&b.result.need_score()))
    };
    let (query, passage) = (
        best_of("query").context("no setting")?,
        best_of("passage").context("no setting")?,
    );
    let (mean, spread) = super::paired_difference(
        &query.per_fold(Figures::need_score),
        &passage.per_fold(Figures::need_score),
    );
    let prefix = if mean > 2.0 * spread { "passage" } else { "query" };
    say(format!(
        "prefix: query {:.3} vs passage {:.3}; paired per-fold difference {mean:+.3} +- {spread:.3} (standard error): {prefix}",
        query.result.need_score(),
        passage.result.need_score()
    ));
    let prefix_record = json!({
        "query_need": query.result.need_score(),
        "passage_need": passage.result.need_score(),
        "paired_difference": mean,
        "standard_error": spread,
        "chosen": prefix,
    });
    // Stacking by the need score; then each head's model by the one-standard-error rule over
    // the folds (need score, mode errors, 1 - F2 of the types), the smallest model first.
    let stacked = outcomes
        .iter()
        .filter(|o| o.prefix == prefix)
        .min_by(|a, b| a.result.need_score().total_cmp(&b.result.need_score()))
        .context("no setting")?
        .stacked;
    let same_inputs: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.prefix == prefix && o.stacked == stacked)
        .collect();
    let best_need = smallest_within_noise(&same_inputs, Figures::need_score).context("no setting")?;
    let best_mode = smallest_within_noise(&same_inputs, |f| 1.0 - f.mode()).context("no setting")?;
    let best_types = smallest_within_noise(&same_inputs, |f| 1.0 - f.f2()).context("no setting")?;
    let models = [best_need.model, best_mode.model, best_types.model];
    say(format!(
        "chosen: prefix {prefix}, stacked {stacked}; need {}, mode {}, types {}",
        models[0].name(),
        models[1].name(),
        models[2].name()
    ));
    // The heads on the embedding alone (not stacked), for the comparison below.
    let unstacked = outcomes
        .iter()
        .filter(|o| o.prefix == prefix && !o.stacked)
        .min_by(|a, b| a.result.need_score().total_cmp(&b.result.need_score()))
        .context("no setting")?;
    // The chosen heads' out-of-fold predictions, each from its own setting.
    let oof: Vec<Vec<f32>> = (0..lines.len())
        .map(|i| {
            let mut v = best_need.oof[i][..3].to_vec();
            v.push(best_mode.oof[i][3]);
            v.extend_from_slice(&best_types.oof[i][4..]);
            v
        })
        .collect();

    // 2. How heads and rules combine.
    let mut policies = Vec::new();
    {
        let combination = Combination {
            lines: &lines,
            rule: &rule,
            oof: &unstacked.oof,
            kept_by_fold: vec![Vec::new(); args.folds],
            folds: &fold_of,
        };
        let (_, by) = combination.tuned(default_policy());
        say(format!(
            "{:<60} need {:.3} | {} | {}",
            format!("heads on the embedding alone ({})", unstacked.model.name()),
            by["all"].need_score(),
            by["all"].row(),
            language_rows(&by)
        ));
        policies.push(json!({
            "policy": "heads on the embedding alone",
            "figures": by.iter().map(|(k, f)| (k.clone(), f.json())).collect::<BTreeMap<_, _>>(),
        }));
    }
    type Candidate = ((f64, f64, f64), Option<f64>, Policy, BTreeMap<String, Figures>);
    let mut best: Option<Candidate> = None;
    for share in [None, Some(0.90), Some(0.95), Some(0.98)] {
        for rule_types in [false, true] {
            let combination = Combination {
                lines: &lines,
                rule: &rule,
                oof: &oof,
                kept_by_fold: kept_by_fold(&lines, &rule, &fold_of, args.folds, share),
                folds: &fold_of,
            };
            let (policy, by) = combination.tuned(Policy {
                rule_types,
                ..default_policy()
            });
            let all = by["all"];
            let name = match share {
                None => format!("heads (stacked {stacked}), rule types {rule_types}"),
                Some(s) => format!("heads (stacked {stacked}), rules kept where right >= {s}, rule types {rule_types}"),
            };
            say(format!(
                "{name:<60} need {:.3} | {} | F2 {:.3} | {}",
                all.need_score(),
                all.row(),
                all.f2(),
                language_rows(&by)
            ));
            policies.push(json!({
                "policy": name,
                "kept_share": share,
                "rule_types": rule_types,
                "thresholds": {"need.no": policy.no_threshold, "mode.details": policy.details_threshold, "types": policy.type_threshold},
                "figures": by.iter().map(|(k, f)| (k.clone(), f.json())).collect::<BTreeMap<_, _>>(),
            }));
            let key = (all.need_score(), -all.mode(), -all.f2());
            if best.as_ref().is_none_or(|b| key < b.0) {
                best = Some((key, share, policy, by));
            }
        }
    }
    let (_, share, chosen, chosen_figures) = best.context("no policy")?;
    let kept = share
        .map(|s| kept_signals(&lines, &rule, &everyone, s))
        .unwrap_or_default();
    say(format!(
        "chosen policy on the near-duplicate folds: kept signals {kept:?}, rule types {}, no >= {:.3}, details >= {:.2}, types >= {:.2} (thresholds on all folds)",
        chosen.rule_types, chosen.no_threshold, chosen.details_threshold, chosen.type_threshold
    ));
    let start = Policy {
        rule_types: chosen.rule_types,
        ..default_policy()
    };
    let near_kept = kept_by_fold(&lines, &rule, &fold_of, args.folds, share);
    // With --ngrams, the n-gram need head: its L2 penalty by its need score alone, then its
    // share of the need probabilities beside the chosen heads, both on the near-duplicate folds
    // with the chosen combination; whether it joins the heads at all is decided on the topic
    // folds below.
    let mut ngram_trials = Vec::new();
    let ngram: Option<(f32, f32)> = if args.ngrams {
        // One setting's figures, printed and recorded; its need score.
        let mut trial = |l2: f32, share: f32, ngram: &[Vec<f32>]| {
            let (_, by) = Combination {
                lines: &lines,
                rule: &rule,
                oof: &with_ngrams(&oof, Some((ngram, share))),
                kept_by_fold: near_kept.clone(),
                folds: &fold_of,
            }
            .tuned(start.clone());
            let all = by["all"];
            say(format!(
                "{:<60} need {:.3} | {} | {}",
                format!("n-gram need head, l2 {l2:e}, share {share}"),
                all.need_score(),
                all.row(),
                language_rows(&by)
            ));
            ngram_trials.push(json!({"l2": l2, "share": share, "need_score": (all.need_score() * 1000.0).round() / 1000.0, "figures": all.json()}));
            all.need_score()
        };
        let mut best_l2: Option<(f64, f32, Vec<Vec<f32>>)> = None;
        for l2 in NGRAM_L2 {
            let predicted = ngram_oof(&lines, &fold_of, args.folds, l2, Training::PLAIN);
            let score = trial(l2, 1.0, &predicted);
            if best_l2.as_ref().is_none_or(|b| score < b.0) {
                best_l2 = Some((score, l2, predicted));
            }
        }
        let (_, l2, predicted) = best_l2.context("no n-gram setting")?;
        let mut best_share: Option<(f64, f32)> = None;
        for share in NGRAM_SHARES {
            let score = trial(l2, share, &predicted);
            if best_share.as_ref().is_none_or(|b| score < b.0) {
                best_share = Some((score, share));
            }
        }
        let (_, share) = best_share.context("no n-gram share")?;
        say(format!("n-gram need head: l2 {l2:e}, share {share}"));
        Some((l2, share))
    } else {
        None
    };
    let vectors = &by_prefix.iter().find(|(p, _)| *p == prefix).context("prefix")?.1;
    let x: Vec<Vec<f32>> = vectors
        .iter()
        .zip(&rule)
        .map(|(v, r)| learned::inputs(v, r, stacked))
        .collect();
    let figures_json = |by: &BTreeMap<String, Figures>| -> Value {
        json!(
            by.iter()
                .map(|(k, f)| (k.clone(), f.json()))
                .collect::<BTreeMap<_, _>>()
        )
    };

    // 3. The chosen setting's figures with nested thresholds, on these folds and on folds that
    // hold out whole topics; how the heads are trained (class weights, seeds averaged), chosen
    // on the topic folds by the landing rule (`improves`).
    let nested_near = figures(
        &lines,
        &Combination {
            lines: &lines,
            rule: &rule,
            oof: &oof,
            kept_by_fold: near_kept,
            folds: &fold_of,
        }
        .nested(&start, args.folds),
    );
    say(format!(
        "{:<60} need {:.3} | {} | {}",
        "chosen, nested thresholds, near-duplicate folds",
        nested_near["all"].need_score(),
        nested_near["all"].row(),
        language_rows(&nested_near)
    ));
    let topic_of = folds::topics(vectors, TOPICS, 22, 30);
    let topic_groups = folds::by_topic(&groups, &topic_of);
    let topic_fold_of = folds::assign(&topic_groups, args.folds, 22);
    let topic_count = folds::count(&topic_groups);
    let topic_kept = kept_by_fold(&lines, &rule, &topic_fold_of, args.folds, share);
    say(format!(
        "topic folds: {topic_count} topics (k-means over the query vectors, each near-duplicate group whole), fold sizes {:?}",
        (0..args.folds)
            .map(|f| topic_fold_of.iter().filter(|g| **g == f).count())
            .collect::<Vec<_>>()
    ));
    let trainings = [
        Training::PLAIN,
        Training {
            balanced: true,
            seeds: 1,
        },
        Training {
            balanced: false,
            seeds: 3,
        },
        Training {
            balanced: true,
            seeds: 3,
        },
    ];
    let mut options: Vec<Trial> = Vec::new();
    let mut option_records = Vec::new();
    let topic_ngrams = ngram.map(|(l2, _)| {
        [false, true].map(|balanced| ngram_oof(&lines, &topic_fold_of, args.folds, l2, Training { balanced, seeds: 1 }))
    });
    for training in trainings {
        let started = std::time::Instant::now();
        let heads_oof = out_of_fold(&topic_fold_of, args.folds, |train_on, test| {
            let heads = fit(&lines, &x, train_on, models, training);
            test.iter().map(|i| probabilities(&heads, &x[*i])).collect()
        });
        for with in std::iter::once(None).chain(ngram.map(|(_, share)| Some(share))) {
            let mixed = topic_ngrams
                .as_ref()
                .zip(with)
                .map(|(t, share)| (&t[usize::from(training.balanced)][..], share));
            let oof = with_ngrams(&heads_oof, mixed);
            let name = match with {
                None => training.name(),
                Some(share) => format!("{}, n-gram need head at {share}", training.name()),
            };
            let decisions = Combination {
                lines: &lines,
                rule: &rule,
                oof: &oof,
                kept_by_fold: topic_kept.clone(),
                folds: &topic_fold_of,
            }
            .nested(&start, args.folds);
            let by = figures(&lines, &decisions);
            say(format!(
                "{:<60} need {:.3} | {} | {} | {:.0}s",
                format!("topic folds, nested: {name}"),
                by["all"].need_score(),
                by["all"].row(),
                language_rows(&by),
                started.elapsed().as_secs_f64()
            ));
            option_records.push(json!({
                "training": name,
                "need_score": (by["all"].need_score() * 1000.0).round() / 1000.0,
                "figures": figures_json(&by),
            }));
            options.push(Trial {
                training,
                ngram_share: with,
                oof,
                by,
                decisions,
            });
        }
    }
    let plain = options[0].by["all"];
    let diagnosis = diagnosis(&lines, &rule, &options[0].decisions, &kept);
    let landed = options
        .iter()
        .filter(|o| improves(&o.by["all"], &plain))
        .min_by(|a, b| {
            let (a, b) = (&a.by["all"], &b.by["all"]);
            a.need_score()
                .total_cmp(&b.need_score())
                .then(b.mode().total_cmp(&a.mode()))
        })
        .unwrap_or(&options[0]);
    let training = landed.training;
    let landed_share = landed.ngram_share;
    // The thresholds of the file: tuned on every line's topic-fold prediction of the landed
    // training (the near-duplicate folds' predictions are closer to their lines than new text).
    let (tuned, _) = Combination {
        lines: &lines,
        rule: &rule,
        oof: &landed.oof,
        kept_by_fold: topic_kept.clone(),
        folds: &topic_fold_of,
    }
    .tune(start.clone());
    let policy = Policy { kept, ..tuned };
    say(format!(
        "landed: {}{}; kept signals {:?}, rule types {}, no >= {:.3}, details >= {:.2}, types >= {:.2}",
        training.name(),
        landed_share
            .map(|s| format!(", n-gram need head at {s}"))
            .unwrap_or_default(),
        policy.kept,
        policy.rule_types,
        policy.no_threshold,
        policy.details_threshold,
        policy.type_threshold
    ));

    // 4. The heads on every line.
    let heads = fit(&lines, &x, &everyone, models, training);
    let mut file = HeadFile::new("controller", LOCAL_EMBEDDER, prefix, dim);
    file.command = args.command("controller");
    file.data = files.iter().map(|(f, _)| f.clone()).collect();
    file.data_sha256 = thinkus_learn::file::data_hash(&file.data);
    for (name, networks) in [("need", heads.need), ("mode", heads.mode), ("types", heads.types)] {
        for (k, network) in networks.into_iter().enumerate() {
            file.heads.insert(learned::member_key(name, k), network);
        }
    }
    if let (Some(share), Some((l2, _))) = (landed_share, ngram) {
        file.ngram_heads
            .insert(learned::NGRAM_HEAD.into(), fit_ngrams(&lines, &everyone, l2, training));
        file.thresholds.insert(learned::NGRAM_SHARE.into(), share);
    }
    policy.record(&mut file, stacked);
    file.choices = json!({
        "folds": args.folds,
        "groups": group_count,
        "grouping": format!("{} (query prefix)", folds::Grouping::DEFAULT.describe()),
        "rules_alone": rules_alone.iter().map(|(k, f)| (k.clone(), f.json())).collect::<BTreeMap<_, _>>(),
        "heads": table,
        "prefix": prefix_record,
        "models": {"need": models[0].name(), "mode": models[1].name(), "types": models[2].name()},
        "policies": policies,
        "chosen": figures_json(&chosen_figures),
        "chosen_nested": figures_json(&nested_near),
        "topic_folds": {
            "topics": topic_count,
            "grouping": format!("k-means over the query vectors into {TOPICS} topics, each near-duplicate group whole to its first line's topic"),
            "options": option_records,
            "landing_rule": "an option replaces the plain heads when, nested on topic folds, its need score is at most 0.005 worse, mode and type recall at most 0.005 worse, and need score better by more than 0.01 or mode by more than 0.01; of those the lowest need score",
            "landed": landed.training.name(),
            "thresholds_from": "every line's topic-fold prediction of the landed training",
            "diagnosis": diagnosis,
        },
    });
    if let Some((l2, share)) = ngram {
        file.choices["ngrams"] = json!({
            "features": "hashed character 1-3-grams and word 1-2-grams of the message, 1 + ln(count), inverse document frequency, length 1",
            "buckets": ngrams::BUCKETS,
            "trials": ngram_trials,
            "l2": l2,
            "share": share,
            "landed_share": landed_share,
        });
    }
    write(&file, &args.out_or("controller"), args.dry_run)
}

/// One way of training the heads, cross-validated on the topic folds with nested thresholds.
struct Trial {
    training: Training,
    /// The n-gram need head's share of the need probabilities, when it joins the heads.
    ngram_share: Option<f32>,
    oof: Vec<Vec<f32>>,
    by: BTreeMap<String, Figures>,
    decisions: Vec<ControlDecision>,
}

/// One setting's cross-validation.
struct Outcome {
    prefix: &'static str,
    stacked: bool,
    model: Model,
    oof: Vec<Vec<f32>>,
    result: Figures,
    by_fold: Vec<Figures>,
}

impl Outcome {
    fn per_fold(&self, metric: fn(&Figures) -> f64) -> Vec<f64> {
        self.by_fold.iter().map(metric).collect()
    }
}

/// The one-standard-error rule: of `candidates` (smallest model first), the first whose
/// per-fold `loss` is within one standard error of the best's (paired over the folds), so a
/// bigger head is taken only when it is better by more than the folds' noise.
fn smallest_within_noise<'a>(candidates: &[&'a Outcome], loss: fn(&Figures) -> f64) -> Option<&'a Outcome> {
    let total = |o: &Outcome| o.per_fold(loss).iter().sum::<f64>();
    let best = candidates
        .iter()
        .copied()
        .min_by(|a, b| total(a).total_cmp(&total(b)))?;
    candidates.iter().copied().find(|o| {
        let (mean, spread) = super::paired_difference(&o.per_fold(loss), &best.per_fold(loss));
        mean <= spread
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ngram_heads_share_mixes_need_and_nothing_else() {
        let oof = vec![vec![0.6, 0.3, 0.1, 0.7, 0.2, 0.9], vec![0.1, 0.8, 0.1, 0.4, 0.5, 0.5]];
        assert_eq!(with_ngrams(&oof, None), oof, "without the head, as they are");
        let ngram = vec![vec![0.2, 0.7, 0.1], vec![0.5, 0.4, 0.1]];
        let mixed = with_ngrams(&oof, Some((&ngram, 0.25)));
        for (i, row) in mixed.iter().enumerate() {
            for o in 0..3 {
                let expected = 0.75 * oof[i][o] + 0.25 * ngram[i][o];
                assert!((row[o] - expected).abs() < 1e-6, "line {i} output {o}");
            }
            assert_eq!(row[3..], oof[i][3..], "mode and types are the embedding heads'");
        }
    }

    #[test]
    fn balanced_weights_give_every_class_the_same_total() {
        let classes = [0, 0, 0, 1, 2, 2];
        let balanced = Training {
            balanced: true,
            seeds: 1,
        }
        .weights(&classes, 3);
        let total = |class: usize| -> f32 {
            classes
                .iter()
                .zip(&balanced)
                .filter(|(c, _)| **c == class)
                .map(|(_, w)| w)
                .sum()
        };
        for class in 0..3 {
            assert!((total(class) - 2.0).abs() < 1e-6, "class {class}: {}", total(class));
        }
        // The weights keep the sample count: n in all.
        assert!((balanced.iter().sum::<f32>() - 6.0).abs() < 1e-5);
        assert_eq!(Training::PLAIN.weights(&classes, 3), vec![1.0; 6]);
    }

    /// Figures of 100 lines labelled yes and 100 labelled no, with `invalid` of the
    /// triggered ones labelled no, `missed` of those labelled yes, and `mode_right` of 100.
    fn figures(invalid: usize, missed: usize, mode_right: usize) -> Figures {
        Figures {
            triggered: 100,
            invalid,
            needed: 100,
            missed,
            mode_total: 100,
            mode_right,
            types_expected: 100,
            types_hit: 80,
            types_given: 100,
        }
    }

    #[test]
    fn the_landing_rule_takes_a_clear_gain_with_no_loss_elsewhere() {
        let plain = figures(12, 3, 80);
        assert!((plain.need_score() - 1.2).abs() < 1e-9);
        // The need score better by more than 0.01 (1.2 -> 1.0), the rest held.
        assert!(improves(&figures(10, 3, 80), &plain));
        // Or the mode better by more than 0.01.
        assert!(improves(&figures(12, 3, 82), &plain));
        // Gains within 0.01 are not enough.
        assert!(!improves(&figures(12, 3, 81), &plain));
        assert!(!improves(&plain, &plain));
        // A clear gain does not pay for a loss over 0.005 in another figure.
        assert!(!improves(&figures(10, 3, 79), &plain));
        assert!(
            !improves(&figures(12, 7, 84), &plain),
            "the need score went from 1.2 to 1.4"
        );
        let mut fewer_types = figures(10, 3, 80);
        fewer_types.types_hit = 79;
        assert!(!improves(&fewer_types, &plain));
    }
}
