//! The learned layer over the rules: three heads on the message's embedding (multilingual-e5,
//! the same vector the retriever searches with), trained by `thinkus train controller`:
//! - `need`: yes, no or maybe (softmax);
//! - `mode`: details rather than catalog, for messages that need memory (sigmoid);
//! - `types`: which memory types to look at (one sigmoid per type);
//! - `need.ngrams` (when the file has it): need again, from the message's own words (hashed
//!   character and word n-grams), its probabilities mixed with the embedding head's at the
//!   file's `need.ngram_share`.
//!
//! How they combine with the rules (each choice made by cross-validation on the training data,
//! recorded in the weight file): the rules' answer stands for the signals precise enough on
//! the training data (`kept_rules`: small talk, history references...); elsewhere the head
//! decides need, mode and types. When the file says so (`stacked`), the heads also read the
//! rules' signal as inputs. What stays with the rules whatever the heads say: time ranges
//! (dates are structure, not meaning) and the budget tiers.

use thinkus_common::model::{ControlDecision, Language, MemoryType, NeedMemory, RetrievalMode, TimeRange};
use thinkus_learn::{HeadError, HeadFile, Network, NgramHead};

use crate::rules::{self, RuleInput, Signal};

/// The `need` heads' labels, in their output order.
pub const NEED_LABELS: [&str; 3] = ["yes", "no", "maybe"];

/// The types the `types` head scores, in its label order.
pub const TYPES: &[MemoryType] = &[
    MemoryType::ProjectDecision,
    MemoryType::UserPreference,
    MemoryType::DiscussionConclusion,
    MemoryType::ActionItem,
    MemoryType::Constraint,
    MemoryType::Risk,
    MemoryType::Feedback,
    MemoryType::Insight,
    MemoryType::Issue,
    MemoryType::Learning,
    MemoryType::Pattern,
];

/// What the heads read besides the embedding when stacked: the rules' main signal (one-hot),
/// whether they chose details, and whether the message names a period.
pub fn rule_inputs(rule: &ControlDecision) -> Vec<f32> {
    let main = rule.signals.first().map(String::as_str).unwrap_or("unclear");
    let mut values: Vec<f32> = Signal::ALL
        .iter()
        .map(|s| f32::from(u8::from(s.as_str() == main)))
        .collect();
    values.push(f32::from(u8::from(rule.retrieval_mode == RetrievalMode::Details)));
    values.push(f32::from(u8::from(rule.signals.iter().any(|s| s.starts_with("time:")))));
    values
}

/// A head's input: the embedding, then the rules' inputs when stacked.
pub fn inputs(embedding: &[f32], rule: &ControlDecision, stacked: bool) -> Vec<f32> {
    let mut values = embedding.to_vec();
    if stacked {
        values.extend(rule_inputs(rule));
    }
    values
}

/// What the heads say about one message.
#[derive(Debug, Clone, PartialEq)]
pub struct Probabilities {
    pub yes: f32,
    pub no: f32,
    pub maybe: f32,
    /// Details rather than catalog.
    pub details: f32,
    /// Per type of [`TYPES`].
    pub types: Vec<f32>,
}

/// How the heads and the rules combine, and the heads' thresholds.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Rule signals whose need stands as the rules decide it.
    pub kept: Vec<String>,
    /// "no" when its probability is at least this.
    pub no_threshold: f32,
    /// Details when its probability is at least this.
    pub details_threshold: f32,
    /// A type is looked at when its probability is at least this.
    pub type_threshold: f32,
    /// The rules' types are added to the head's.
    pub rule_types: bool,
}

/// The trained heads and how they combine with the rules.
#[derive(Debug, Clone)]
pub struct Learned {
    /// The embedder whose vectors the heads read, and its prefix ("query" or "passage").
    pub embedder: String,
    pub prefix: String,
    pub dim: usize,
    /// Each head's networks, their outputs averaged: one per seed the trainer averaged (the
    /// file's "need", "need.2", "need.3", ...).
    pub need: Vec<Network>,
    pub mode: Vec<Network>,
    pub types: Vec<Network>,
    /// The need head over the message's n-grams, and its share of the need probabilities.
    pub ngrams: Option<(NgramHead, f32)>,
    /// The heads read the rules' signal too.
    pub stacked: bool,
    pub policy: Policy,
}

/// The weight file built into the binary.
pub const BUILTIN: &str = thinkus_learn::builtin::CONTROLLER;

impl Learned {
    /// The heads of a weight file.
    pub fn from_file(file: &HeadFile) -> Result<Self, HeadError> {
        let head = |name: &str| {
            let first = file
                .head(name)
                .cloned()
                .ok_or_else(|| HeadError::Unreadable(format!("no {name:?} head")))?;
            let mut members = vec![first];
            while let Some(next) = file.head(&member_key(name, members.len())) {
                members.push(next.clone());
            }
            Ok::<_, HeadError>(members)
        };
        let threshold = |name: &str| {
            file.threshold(name)
                .ok_or_else(|| HeadError::Unreadable(format!("no {name:?} threshold")))
        };
        let learned = Self {
            embedder: file.embedder.clone(),
            prefix: file.prefix.clone(),
            dim: file.dim,
            need: head("need")?,
            mode: head("mode")?,
            types: head("types")?,
            ngrams: match file.ngram_head(NGRAM_HEAD) {
                None => None,
                Some(head) => Some((head.clone(), threshold(NGRAM_SHARE)?)),
            },
            stacked: file.flag("stacked"),
            policy: Policy {
                kept: file.kept_rules.clone(),
                no_threshold: threshold("need.no")?,
                details_threshold: threshold("mode.details")?,
                type_threshold: threshold("types")?,
                rule_types: file.flag("rule_types"),
            },
        };
        if learned.need.iter().any(|n| n.labels != NEED_LABELS) || learned.mode.iter().any(|n| n.labels != ["details"])
        {
            return Err(HeadError::Unreadable("unexpected need or mode labels".into()));
        }
        if learned
            .ngrams
            .as_ref()
            .is_some_and(|(head, share)| head.labels != NEED_LABELS || !(0.0..=1.0).contains(share))
        {
            return Err(HeadError::Unreadable("unexpected n-gram need head".into()));
        }
        if learned.types.iter().any(|n| n.labels.len() != TYPES.len()) {
            return Err(HeadError::Unreadable("unexpected type labels".into()));
        }
        Ok(learned)
    }

    /// The weight file built into the binary.
    pub fn builtin() -> Result<Self, HeadError> {
        Self::from_file(&HeadFile::parse(BUILTIN)?)
    }

    /// Whether a vector can be read by these heads: from their embedder, of their width.
    pub fn reads(&self, model: &str, vector: &[f32]) -> bool {
        model == self.embedder && vector.len() == self.dim
    }

    /// The heads' probabilities for a message whose rule decision is `rule`.
    pub fn probabilities(&self, embedding: &[f32], message: &str, rule: &ControlDecision) -> Probabilities {
        let x = inputs(embedding, rule, self.stacked);
        let mut need = average(&self.need, &x);
        if let Some((head, share)) = &self.ngrams {
            need = mix(&need, &head.predict(message), *share);
        }
        Probabilities {
            yes: need[0],
            no: need[1],
            maybe: need[2],
            details: average(&self.mode, &x)[0],
            types: average(&self.types, &x),
        }
    }

    /// The rules, then the heads on `embedding`.
    pub fn decide(&self, embedding: &[f32], input: &RuleInput<'_>) -> ControlDecision {
        let rule = rules::decide(input);
        let p = self.probabilities(embedding, input.message, &rule);
        self.policy.combine(rule, &p, input)
    }
}

impl Policy {
    /// The decision: the rules' where their signal is kept, the heads' elsewhere; time ranges
    /// and budget tiers from the rules.
    pub fn combine(&self, rule: ControlDecision, p: &Probabilities, input: &RuleInput<'_>) -> ControlDecision {
        let signal = rule.signals.first().cloned().unwrap_or_default();
        let need = if self.kept.contains(&signal) {
            rule.need_memory
        } else if p.no >= self.no_threshold {
            NeedMemory::No
        } else if p.yes >= p.maybe {
            NeedMemory::Yes
        } else {
            NeedMemory::Maybe
        };
        let mode = if need != NeedMemory::No && p.details >= self.details_threshold {
            RetrievalMode::Details
        } else {
            RetrievalMode::Catalog
        };
        let mut memory_types: Vec<MemoryType> = Vec::new();
        if need != NeedMemory::No {
            let mut scored: Vec<(MemoryType, f32)> = TYPES
                .iter()
                .copied()
                .zip(p.types.iter().copied())
                .filter(|(_, v)| *v >= self.type_threshold)
                .collect();
            scored.sort_by(|a, b| b.1.total_cmp(&a.1));
            memory_types.extend(scored.into_iter().map(|(t, _)| t));
            let from_rules = rule
                .memory_types
                .iter()
                .filter(|t| self.rule_types || input.type_hints.contains(t));
            for t in from_rules {
                if !memory_types.contains(t) {
                    memory_types.push(*t);
                }
            }
        }
        let same = need == rule.need_memory && mode == rule.retrieval_mode;
        let budget_tokens = match (need, mode) {
            _ if same => rule.budget_tokens,
            (NeedMemory::No, _) => 0,
            (NeedMemory::Maybe, RetrievalMode::Catalog) => input.budgets.glance,
            (NeedMemory::Maybe, RetrievalMode::Details) => input.budgets.unsure_details,
            (NeedMemory::Yes, RetrievalMode::Catalog) => input.budgets.catalog,
            (NeedMemory::Yes, RetrievalMode::Details) => input.budgets.details,
        };
        let time_range = match need {
            NeedMemory::No => TimeRange::All,
            _ if rule.need_memory != NeedMemory::No => rule.time_range,
            _ => rules::time_range(input.message, input.now)
                .map(|(range, _)| range)
                .unwrap_or(TimeRange::All),
        };
        let mut signals = rule.signals.clone();
        signals.push("learned".into());
        let reason = if need == rule.need_memory {
            rule.reason.clone()
        } else {
            signals.push(format!("learned:{}", need_name(need)));
            learned_reason(rule.language, need, p)
        };
        ControlDecision {
            need_memory: need,
            memory_types,
            retrieval_mode: mode,
            budget_tokens,
            time_range,
            reason,
            engine: "learned".into(),
            signals,
            language: rule.language,
        }
    }

    /// Records the policy in a weight file.
    pub fn record(&self, file: &mut HeadFile, stacked: bool) {
        file.kept_rules = self.kept.clone();
        file.thresholds.insert("need.no".into(), self.no_threshold);
        file.thresholds.insert("mode.details".into(), self.details_threshold);
        file.thresholds.insert("types".into(), self.type_threshold);
        file.flags.insert("stacked".into(), stacked);
        file.flags.insert("rule_types".into(), self.rule_types);
    }
}

/// The file's name of the need head over n-grams, and of its share of the need probabilities.
pub const NGRAM_HEAD: &str = "need.ngrams";
pub const NGRAM_SHARE: &str = "need.ngram_share";

pub use thinkus_learn::ngrams::mix;

/// The key of a head's `k`-th network (from 0) in a weight file: "need", then "need.2",
/// "need.3", ... for the seeds averaged.
pub fn member_key(head: &str, k: usize) -> String {
    if k == 0 {
        head.to_string()
    } else {
        format!("{head}.{}", k + 1)
    }
}

/// The mean of some networks' outputs on `x`.
pub fn average(networks: &[Network], x: &[f32]) -> Vec<f32> {
    let mut sum: Vec<f32> = Vec::new();
    for network in networks {
        let out = network.predict(x);
        if sum.is_empty() {
            sum = out;
        } else {
            for (s, v) in sum.iter_mut().zip(out) {
                *s += v;
            }
        }
    }
    let n = networks.len().max(1) as f32;
    sum.iter().map(|s| s / n).collect()
}

fn need_name(need: NeedMemory) -> &'static str {
    match need {
        NeedMemory::Yes => "yes",
        NeedMemory::No => "no",
        NeedMemory::Maybe => "maybe",
    }
}

fn learned_reason(language: Language, need: NeedMemory, p: &Probabilities) -> String {
    match (language, need) {
        (Language::Zh, NeedMemory::Yes) => format!("学到的判断：很可能涉及之前的内容（{:.2}）", p.yes),
        (Language::Zh, NeedMemory::Maybe) => format!("学到的判断：记忆可能有帮助（{:.2}）", p.maybe),
        (Language::Zh, NeedMemory::No) => format!("学到的判断：不需要记忆（{:.2}）", p.no),
        (Language::En, NeedMemory::Yes) => format!("Learned: likely about earlier work ({:.2})", p.yes),
        (Language::En, NeedMemory::Maybe) => format!("Learned: memory may help ({:.2})", p.maybe),
        (Language::En, NeedMemory::No) => format!("Learned: no memory needed ({:.2})", p.no),
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    #[test]
    fn the_builtin_heads_keep_signals_the_rules_give() {
        let learned = Learned::builtin().expect("the built-in weight file reads");
        assert!(!learned.policy.kept.is_empty());
        for kept in &learned.policy.kept {
            assert!(
                Signal::ALL.iter().any(|s| s.as_str() == kept),
                "{kept} is no signal of the rules"
            );
        }
    }

    #[test]
    fn the_builtin_heads_read_query_vectors_of_the_local_embedder() {
        let learned = Learned::builtin().expect("the built-in weight file reads");
        assert_eq!(learned.embedder, "multilingual-e5-small-q4");
        assert_eq!(learned.prefix, "query", "the vector the gateway sends");
        assert_eq!(learned.dim, 384);
        assert!(learned.reads("multilingual-e5-small-q4", &[0.0; 384]));
        assert!(!learned.reads("hash-384", &[0.0; 384]));
        assert!(!learned.reads("multilingual-e5-small-q4", &[0.0; 12]));
    }

    fn probabilities(yes: f32, no: f32, maybe: f32) -> Probabilities {
        Probabilities {
            yes,
            no,
            maybe,
            details: 0.9,
            types: vec![0.0; TYPES.len()],
        }
    }

    #[test]
    fn the_rules_keep_dates_and_the_heads_decide_need_mode_and_types() {
        let policy = Policy {
            kept: vec!["small_talk".into()],
            no_threshold: 0.6,
            details_threshold: 0.5,
            type_threshold: 0.3,
            rule_types: true,
        };
        let now = Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap();
        let input = |message: &'static str| RuleInput {
            message,
            message_count: 5,
            recent_messages: &[],
            project_id: Some("p"),
            type_hints: &[],
            now,
            ..Default::default()
        };
        // The rules say no, the head yes: the period the message names still comes from the
        // rules; the budget follows the head's need and mode.
        let message = "what did the vendor quote yesterday";
        let mut rule = rules::decide(&input(message));
        rule.need_memory = NeedMemory::No;
        rule.signals = vec!["general_knowledge".into()];
        let mut p = probabilities(0.8, 0.1, 0.1);
        p.types[TYPES.iter().position(|t| *t == MemoryType::Constraint).unwrap()] = 0.7;
        let decision = policy.combine(rule, &p, &input(message));
        assert_eq!(decision.need_memory, NeedMemory::Yes);
        assert_eq!(decision.retrieval_mode, RetrievalMode::Details);
        assert_eq!(decision.budget_tokens, 1000);
        assert!(
            matches!(decision.time_range, TimeRange::Between { .. }),
            "{:?}",
            decision.time_range
        );
        assert_eq!(decision.memory_types.first(), Some(&MemoryType::Constraint));
        assert_eq!(decision.engine, "learned");
        assert!(decision.signals.iter().any(|s| s == "learned:yes"));
        // A kept signal's need stands whatever the head says.
        let mut rule = rules::decide(&input("hi there"));
        rule.need_memory = NeedMemory::No;
        rule.signals = vec!["small_talk".into()];
        let decision = policy.combine(rule, &probabilities(0.9, 0.05, 0.05), &input("hi there"));
        assert_eq!(decision.need_memory, NeedMemory::No);
        assert_eq!(decision.budget_tokens, 0);
        assert!(decision.memory_types.is_empty());
        // "no" wins at its threshold, even when yes is the larger of the other two.
        let decision = policy.combine(
            rules::decide(&input("what is a p99")),
            &probabilities(0.35, 0.6, 0.05),
            &input("what is a p99"),
        );
        assert_eq!(decision.need_memory, NeedMemory::No);
    }

    #[test]
    fn an_ngram_head_takes_its_share_of_the_need_probabilities() {
        let mut file = HeadFile::parse(BUILTIN).expect("the built-in weight file reads");
        file.ngram_heads.clear();
        file.thresholds.remove(NGRAM_SHARE);
        let without = Learned::from_file(&file).expect("the heads read");
        assert!(without.ngrams.is_none());
        // A head over n-grams that reads "what did we" as yes and "what is" as no.
        let texts = [
            "what did we pick",
            "what did we say",
            "what did we agree",
            "what is a cache",
            "what is tls",
            "what is rust",
        ];
        let head = thinkus_learn::ngrams::train(
            &texts,
            &[0, 0, 0, 1, 1, 1],
            &[1.0; 6],
            vec!["yes".into(), "no".into(), "maybe".into()],
            &thinkus_learn::ngrams::NgramSettings {
                buckets: 1 << 12,
                ..Default::default()
            },
        );
        file.ngram_heads.insert(NGRAM_HEAD.into(), head.clone());
        assert!(
            Learned::from_file(&file).is_err(),
            "a head without its share is refused"
        );
        file.thresholds.insert(NGRAM_SHARE.into(), 0.5);
        let with = Learned::from_file(&file).expect("the heads read");
        let embedding: Vec<f32> = (0..384).map(|i| ((i * 5 % 11) as f32 - 5.0) / 30.0).collect();
        for message in ["what did we pick for the cache", "what is a p99"] {
            let rule = rules::decide(&RuleInput {
                message,
                message_count: 5,
                ..Default::default()
            });
            let alone = without.probabilities(&embedding, message, &rule);
            let mixed = with.probabilities(&embedding, message, &rule);
            let words = head.predict(message);
            assert!((mixed.no - (alone.no + words[1]) / 2.0).abs() < 1e-6, "{message}");
            assert!((mixed.yes - (alone.yes + words[0]) / 2.0).abs() < 1e-6, "{message}");
            assert_eq!(mixed.details, alone.details, "mode is the embedding's alone");
        }
        let rule = rules::decide(&RuleInput {
            message: "x",
            ..Default::default()
        });
        assert!(
            with.probabilities(&embedding, "what did we pick for the cache", &rule)
                .yes
                > with.probabilities(&embedding, "what is a p99", &rule).yes,
            "the same vector, other words: the n-gram head moves need"
        );
        // A share outside 0..=1 is refused.
        file.thresholds.insert(NGRAM_SHARE.into(), 1.5);
        assert!(Learned::from_file(&file).is_err());
    }

    #[test]
    fn a_head_of_several_seeds_averages_their_outputs() {
        let mut file = HeadFile::parse(BUILTIN).expect("the built-in weight file reads");
        // One network per head, then a second need network; no n-gram head.
        file.heads.retain(|name, _| !name.contains('.'));
        file.ngram_heads.clear();
        let one = Learned::from_file(&file).expect("the heads read");
        assert_eq!(one.need.len(), 1);
        let mut other = file.head("need").expect("a need head").clone();
        let last = other.layers.last_mut().expect("a layer");
        last.bias[1] -= 40.0;
        file.heads.insert("need.2".into(), other.clone());
        let two = Learned::from_file(&file).expect("the heads read");
        assert_eq!(two.need.len(), 2, "need and need.2");
        assert_eq!(two.mode.len(), 1);
        let embedding: Vec<f32> = (0..384).map(|i| ((i * 7 % 13) as f32 - 6.0) / 40.0).collect();
        let rule = rules::decide(&RuleInput {
            message: "what did we decide about the vendor",
            message_count: 5,
            ..Default::default()
        });
        let x = inputs(&embedding, &rule, one.stacked);
        let alone = one.probabilities(&embedding, "what did we decide about the vendor", &rule);
        let averaged = two.probabilities(&embedding, "what did we decide about the vendor", &rule);
        let expected = (alone.no + other.predict(&x)[1]) / 2.0;
        assert!((averaged.no - expected).abs() < 1e-6, "{} vs {expected}", averaged.no);
        assert!(
            averaged.no < alone.no - 0.01,
            "the second network says no less often: {} vs {}",
            averaged.no,
            alone.no
        );
        assert_eq!(averaged.details, alone.details);
        // A member whose labels differ is refused.
        other.labels = vec!["a".into(), "b".into(), "c".into()];
        file.heads.insert("need.2".into(), other);
        assert!(Learned::from_file(&file).is_err());
    }
}
