//! The learned layer of extraction: one head on each clause's embedding (multilingual-e5) that
//! says which memory type the clause states, or that it is not a memory. Trained by
//! `thinkus train extract`.
//!
//! The rules cut a message into clauses (sentences, and within a sentence the clauses that each
//! state their own thing), find a confirmation of the assistant's proposal, keep a correction
//! that names a value, and give a clause their candidate where one of their families fires.
//! The head brings recall: a clause the rules leave without a memory gets the head's most
//! likely type when that type's probability reaches the threshold cross-validation chose
//! (`add`). Where the weight file sets them, it also checks the rules' candidates: one is
//! dropped when the head's "not a memory" reaches `veto`, and takes the head's type when the
//! head gives another type at least `retype` (both chosen by nested cross-validation for
//! precision at the adding-only head's recall). A correction that names a value and a
//! confirmed proposal stay the rules' whatever the head says. When the weight file says so
//! (`stacked`), the head also reads what the rules saw in the clause (family, question,
//! hypothetical, hedge, correction, figure). When the file has one (`clause.ngrams`, trained
//! with `thinkus train extract --ngrams`), a second head over the clause's own words (hashed
//! character and word n-grams) takes the file's `clause.ngram_share` of the probabilities.

use serde_json::Value;
use thinkus_backends::embed::{EmbedError, Embedder};
use thinkus_common::model::MemoryType;
use thinkus_learn::ngrams::mix;
use thinkus_learn::{HeadError, HeadFile, Network, NgramHead};

use crate::rules::{self, Reading, Segment};

/// The types the head tells apart, in its label order; its last label is [`NOT_A_MEMORY`].
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
    MemoryType::Fact,
];

pub const NOT_A_MEMORY: &str = "none";

/// The file's name of the clause head over n-grams, and of its share of the probabilities.
pub const NGRAM_HEAD: &str = "clause.ngrams";
pub const NGRAM_SHARE: &str = "clause.ngram_share";

/// The labels of the clause heads: [`TYPES`], then [`NOT_A_MEMORY`].
pub fn labels() -> Vec<String> {
    TYPES
        .iter()
        .map(|t| t.as_str().to_string())
        .chain([NOT_A_MEMORY.to_string()])
        .collect()
}

/// What the head reads besides the embedding when stacked.
pub fn rule_inputs(reading: &Reading) -> Vec<f32> {
    let flag = |b: bool| f32::from(u8::from(b));
    let mut values: Vec<f32> = TYPES.iter().map(|t| flag(reading.family == Some(*t))).collect();
    values.push(flag(reading.family.is_none()));
    values.extend([
        flag(reading.question),
        flag(reading.hypothetical),
        flag(reading.hedged),
        flag(reading.correction),
        flag(reading.figure),
        flag(reading.long_enough),
        flag(reading.candidate.is_some()),
    ]);
    values
}

/// The head's input: the embedding, then the rules' inputs when stacked.
pub fn inputs(embedding: &[f32], reading: &Reading, stacked: bool) -> Vec<f32> {
    let mut values = embedding.to_vec();
    if stacked {
        values.extend(rule_inputs(reading));
    }
    values
}

/// How the head and the rules combine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// A clause without a rule candidate gets the head's most likely type when that type's
    /// probability reaches this.
    pub add: f32,
    /// A rule's candidate is dropped when the head's "not a memory" reaches this ([`OFF`]:
    /// never). A correction that names a value is the rules' alone.
    pub veto: f32,
    /// A rule's candidate takes the head's most likely type when it differs from the rules'
    /// and its probability reaches this ([`OFF`]: never). Not for a correction.
    pub retype: f32,
}

/// A threshold no probability reaches.
pub const OFF: f32 = 1.01;

/// What a policy does with one clause.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Choice {
    /// The rules' candidate.
    Rules,
    /// A candidate of the head's most likely type (an index into [`TYPES`]) with its probability.
    Head(usize, f32),
    /// No candidate.
    Nothing,
}

/// The head's most likely memory type and its probability.
pub fn best_type(probabilities: &[f32]) -> Option<(usize, f32)> {
    probabilities
        .get(..TYPES.len())?
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// The probability of "not a memory" (the label after [`TYPES`]).
pub fn not_a_memory(probabilities: &[f32]) -> f32 {
    probabilities.get(TYPES.len()).copied().unwrap_or(0.0)
}

impl Policy {
    /// The head adds clauses at `add` and leaves the rules' candidates alone.
    pub const fn adding(add: f32) -> Self {
        Self {
            add,
            veto: OFF,
            retype: OFF,
        }
    }

    /// What to do with one clause, given the head's probabilities (one per [`TYPES`], then not
    /// a memory).
    pub fn choose(&self, reading: &Reading, probabilities: &[f32]) -> Choice {
        let best = best_type(probabilities);
        if let Some(candidate) = &reading.candidate {
            if reading.correction {
                return Choice::Rules;
            }
            if not_a_memory(probabilities) >= self.veto {
                return Choice::Nothing;
            }
            return match best {
                Some((t, p)) if p >= self.retype && candidate["type"].as_str() != Some(TYPES[t].as_str()) => {
                    Choice::Head(t, p)
                }
                _ => Choice::Rules,
            };
        }
        // A question that asks to be told states nothing to remember ("rules q: how many hours
        // can a driver do in a day?", "春运一般从哪天开始来着"), whatever words it asks with.
        // Nor is what a piece of work asked for now requires a preference of the user's ("write
        // the invite, don't mention salary"): the rules leave it, and so does the head.
        match best {
            Some((t, _))
                if reading.task_now && matches!(TYPES[t], MemoryType::UserPreference | MemoryType::Feedback) =>
            {
                Choice::Nothing
            }
            Some((t, p)) if reading.long_enough && !reading.asks && p >= self.add => Choice::Head(t, p),
            _ => Choice::Nothing,
        }
    }

    /// The candidate for one clause: the rules' where they give one (unless the head turns it
    /// away or re-types it), else the head's most likely type when it is likely enough, with
    /// that probability as its confidence.
    pub fn candidate(&self, text: &str, reading: &Reading, probabilities: &[f32], role: &str) -> Option<Value> {
        match self.choose(reading, probabilities) {
            Choice::Rules => reading.candidate.clone(),
            Choice::Head(t, p) => Some(rules::candidate_for(TYPES[t], text, f64::from(p), role)),
            Choice::Nothing => None,
        }
    }

    /// Records the policy in a weight file (a threshold that is off is left out).
    pub fn record(&self, file: &mut HeadFile, stacked: bool) {
        file.thresholds.insert("add".into(), self.add);
        for (name, value) in [("veto", self.veto), ("retype", self.retype)] {
            if value < OFF {
                file.thresholds.insert(name.into(), value);
            }
        }
        file.flags.insert("stacked".into(), stacked);
    }

    /// Reads the policy a weight file records.
    pub fn of_file(file: &HeadFile) -> Result<Self, HeadError> {
        Ok(Self {
            add: file
                .threshold("add")
                .ok_or_else(|| HeadError::Unreadable("no \"add\" threshold".into()))?,
            veto: file.threshold("veto").unwrap_or(OFF),
            retype: file.threshold("retype").unwrap_or(OFF),
        })
    }
}

/// The trained head and how it combines with the rules.
#[derive(Debug, Clone)]
pub struct LearnedExtraction {
    /// The embedder whose vectors the head reads, and its prefix ("query" or "passage").
    pub embedder: String,
    pub prefix: String,
    pub dim: usize,
    pub head: Network,
    pub stacked: bool,
    pub policy: Policy,
    /// The head over the clause's n-grams and its share of the probabilities.
    pub ngrams: Option<(NgramHead, f32)>,
}

/// The weight file built into the binary.
pub const BUILTIN: &str = thinkus_learn::builtin::EXTRACT;

impl LearnedExtraction {
    pub fn from_file(file: &HeadFile) -> Result<Self, HeadError> {
        let head = file
            .head("clause")
            .cloned()
            .ok_or_else(|| HeadError::Unreadable("no \"clause\" head".into()))?;
        let expected = labels();
        if head.labels != expected {
            return Err(HeadError::Unreadable("unexpected clause labels".into()));
        }
        let ngrams = match file.ngram_head(NGRAM_HEAD) {
            None => None,
            Some(ngrams) => {
                if ngrams.labels != expected || !ngrams.is_consistent() {
                    return Err(HeadError::Unreadable(format!(
                        "the {NGRAM_HEAD} head does not fit its labels"
                    )));
                }
                let share = file
                    .threshold(NGRAM_SHARE)
                    .filter(|s| (0.0..=1.0).contains(s))
                    .ok_or_else(|| HeadError::Unreadable(format!("{NGRAM_HEAD} without a {NGRAM_SHARE} in [0, 1]")))?;
                Some((ngrams.clone(), share))
            }
        };
        Ok(Self {
            embedder: file.embedder.clone(),
            prefix: file.prefix.clone(),
            dim: file.dim,
            head,
            stacked: file.flag("stacked"),
            policy: Policy::of_file(file)?,
            ngrams,
        })
    }

    pub fn builtin() -> Result<Self, HeadError> {
        Self::from_file(&HeadFile::parse(BUILTIN)?)
    }

    /// Whether an embedder's vectors are the ones the head reads.
    pub fn reads(&self, embedder: &dyn Embedder) -> bool {
        embedder.name() == self.embedder && embedder.dim() == self.dim
    }

    /// The heads' probabilities for one clause: one per [`TYPES`], then not a memory.
    pub fn probabilities(&self, embedding: &[f32], text: &str, reading: &Reading) -> Vec<f32> {
        let probabilities = self.head.predict(&inputs(embedding, reading, self.stacked));
        match &self.ngrams {
            Some((head, share)) => mix(&probabilities, &head.predict(text), *share),
            None => probabilities,
        }
    }

    /// The candidates of a conversation (`input` as [`rules::extract`] takes it): every clause
    /// of the user's messages embedded in one call.
    pub async fn extract(&self, embedder: &dyn Embedder, input: &Value) -> Result<Value, EmbedError> {
        let role = input["role_id"].as_str().unwrap_or("");
        let segments = rules::segments(input);
        let texts: Vec<String> = segments
            .iter()
            .filter_map(|s| match s {
                Segment::Clause { text, .. } => Some(text.clone()),
                Segment::Confirmed { .. } => None,
            })
            .collect();
        let vectors = if texts.is_empty() {
            Vec::new()
        } else if self.prefix == "query" {
            let mut vectors = Vec::with_capacity(texts.len());
            for text in &texts {
                vectors.push(embedder.embed_query(text).await?);
            }
            vectors
        } else {
            embedder.embed_passages(&texts).await?
        };
        let mut vectors = vectors.into_iter();
        let mut out = Vec::new();
        for segment in &segments {
            match segment {
                Segment::Confirmed { candidate, .. } => out.push(candidate.clone()),
                Segment::Clause { text, reading, .. } => {
                    let vector = vectors
                        .next()
                        .ok_or_else(|| EmbedError::BadResponse("fewer vectors than clauses".into()))?;
                    if vector.len() != self.dim {
                        return Err(EmbedError::BadResponse(format!(
                            "a vector of {} values, the head reads {}",
                            vector.len(),
                            self.dim
                        )));
                    }
                    let probabilities = self.probabilities(&vector, text, reading);
                    if let Some(candidate) = self.policy.candidate(text, reading, &probabilities, role) {
                        out.push(candidate);
                    }
                }
            }
        }
        Ok(Value::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy = Policy::adding(0.35);

    /// The head's answer: `p` for the type at `best`, `none` for not a memory.
    fn answer(best: usize, p: f32, none: f32) -> Vec<f32> {
        let mut values = vec![0.0; TYPES.len() + 1];
        values[best] = p;
        values[TYPES.len()] = none;
        values
    }

    fn reading(rules: Option<MemoryType>) -> Reading {
        Reading {
            long_enough: true,
            candidate: rules.map(|t| rules::candidate_for(t, "We use Stripe for payments", 0.9, "pm")),
            ..Reading::default()
        }
    }

    #[test]
    fn an_adding_policy_keeps_the_rules_candidates_whatever_the_head_says() {
        let rules = reading(Some(MemoryType::ProjectDecision));
        let kept = POLICY.candidate("We use Stripe for payments", &rules, &answer(3, 0.9, 0.1), "pm");
        assert_eq!(
            kept.as_ref(),
            rules.candidate.as_ref(),
            "the rules' type, not the head's"
        );
        assert_eq!(
            POLICY.candidate("x", &rules, &answer(3, 0.0, 1.0), "pm"),
            rules.candidate
        );
    }

    #[test]
    fn the_head_adds_a_clause_the_rules_missed_at_its_threshold() {
        let missed = reading(None);
        let text = "Priya owns the vendor shortlist by Friday";
        let added = POLICY
            .candidate(text, &missed, &answer(3, 0.35, 0.2), "pm")
            .expect("added at the threshold");
        assert_eq!(added["type"], TYPES[3].as_str());
        assert_eq!(POLICY.candidate(text, &missed, &answer(3, 0.34, 0.2), "pm"), None);
        let short = Reading {
            long_enough: false,
            ..missed
        };
        assert_eq!(POLICY.candidate("ok", &short, &answer(3, 0.99, 0.0), "pm"), None);
        // A question that asks to be told is not added, however sure the head is.
        let asking = Reading {
            asks: true,
            ..reading(None)
        };
        let question = "rules q: how many hours can a driver do in a day?";
        assert_eq!(POLICY.candidate(question, &asking, &answer(4, 0.99, 0.0), "pm"), None);
        // Nor is what a piece of work asked for now requires, as a preference or feedback; the
        // head's other types (a deadline it sets) still are.
        let task = Reading {
            task_now: true,
            ..reading(None)
        };
        let write = "write the invite for the panel, don't mention salary";
        let at = |t: MemoryType| TYPES.iter().position(|x| *x == t).expect("a type of the head");
        for preference in [MemoryType::UserPreference, MemoryType::Feedback] {
            assert_eq!(
                POLICY.candidate(write, &task, &answer(at(preference), 0.99, 0.0), "pm"),
                None
            );
        }
        assert!(
            POLICY
                .candidate(write, &task, &answer(at(MemoryType::Constraint), 0.99, 0.0), "pm")
                .is_some()
        );
    }

    /// The same reading, worded as a correction ("actually", "改成").
    fn as_correction(reading: &Reading) -> Reading {
        Reading {
            correction: true,
            ..reading.clone()
        }
    }

    /// Whether `policy` keeps the rules' candidate of `reading` as it is.
    fn keeps(policy: Policy, reading: &Reading, probabilities: &[f32]) -> bool {
        policy.candidate("We use Stripe for payments", reading, probabilities, "pm") == reading.candidate
    }

    #[test]
    fn a_veto_turns_a_rule_candidate_away_but_not_a_correction() {
        let policy = Policy { veto: 0.8, ..POLICY };
        let rules = reading(Some(MemoryType::ProjectDecision));
        let text = "We use Stripe for payments";
        assert_eq!(policy.candidate(text, &rules, &answer(0, 0.1, 0.8), "pm"), None);
        assert!(keeps(policy, &rules, &answer(0, 0.2, 0.79)), "below the veto");
        assert!(
            keeps(policy, &as_correction(&rules), &answer(0, 0.0, 1.0)),
            "a correction that names a value is the rules'"
        );
        assert!(keeps(POLICY, &rules, &answer(0, 0.0, 1.0)), "no veto: off");
    }

    #[test]
    fn re_typing_gives_a_rule_candidate_the_heads_type_when_it_is_sure() {
        let policy = Policy { retype: 0.7, ..POLICY };
        let rules = reading(Some(MemoryType::ProjectDecision));
        let retyped = policy
            .candidate("We use Stripe for payments", &rules, &answer(4, 0.7, 0.1), "pm")
            .expect("a candidate");
        assert_eq!(retyped["type"], TYPES[4].as_str());
        assert_eq!(
            retyped["content"],
            rules.candidate.as_ref().expect("the rules'")["content"]
        );
        assert!(keeps(policy, &rules, &answer(4, 0.69, 0.1)), "below the threshold");
        assert!(
            keeps(policy, &as_correction(&rules), &answer(4, 0.99, 0.0)),
            "a correction keeps the rules' type"
        );
    }

    #[test]
    fn an_ngram_head_takes_its_share_of_the_clause_probabilities() {
        let mut file = HeadFile::parse(BUILTIN).expect("the built-in file reads");
        file.ngram_heads.clear();
        file.thresholds.remove(NGRAM_SHARE);
        let alone = LearnedExtraction::from_file(&file).expect("reads without an n-gram head");
        assert!(alone.ngrams.is_none());
        let texts = [
            "Priya owns the vendor shortlist by Friday",
            "哈哈好的",
            "预算上限是五万",
        ];
        let head = thinkus_learn::ngrams::train(
            &texts,
            &[3, TYPES.len(), 4],
            &[1.0; 3],
            labels(),
            &thinkus_learn::ngrams::NgramSettings {
                buckets: 1024,
                steps: 30,
                ..Default::default()
            },
        );
        file.ngram_heads.insert(NGRAM_HEAD.into(), head.clone());
        assert!(
            LearnedExtraction::from_file(&file).is_err(),
            "a head without its share is refused"
        );
        file.thresholds.insert(NGRAM_SHARE.into(), 0.5);
        let with = LearnedExtraction::from_file(&file).expect("reads with the n-gram head");
        let embedding = vec![0.05; with.dim];
        let reading = reading(None);
        for text in texts {
            let (mixed, own) = (
                with.probabilities(&embedding, text, &reading),
                alone.probabilities(&embedding, text, &reading),
            );
            let words = head.predict(text);
            for o in 0..=TYPES.len() {
                assert!((mixed[o] - (own[o] + words[o]) / 2.0).abs() < 1e-6, "{text}: label {o}");
            }
        }
        file.thresholds.insert(NGRAM_SHARE.into(), 1.5);
        assert!(
            LearnedExtraction::from_file(&file).is_err(),
            "a share above 1 is refused"
        );
        let mut wrong = head;
        wrong.labels.swap(0, 1);
        file.thresholds.insert(NGRAM_SHARE.into(), 0.5);
        file.ngram_heads.insert(NGRAM_HEAD.into(), wrong);
        assert!(
            LearnedExtraction::from_file(&file).is_err(),
            "labels in another order are refused"
        );
    }

    #[test]
    fn a_weight_file_without_veto_or_retype_turns_them_off() {
        let mut file = HeadFile::new("extract", "e", "passage", 4);
        Policy::adding(0.4).record(&mut file, true);
        assert!(file.threshold("veto").is_none() && file.threshold("retype").is_none());
        assert_eq!(Policy::of_file(&file).expect("reads"), Policy::adding(0.4));
        let policy = Policy {
            add: 0.4,
            veto: 0.9,
            retype: 0.8,
        };
        policy.record(&mut file, true);
        assert_eq!(Policy::of_file(&file).expect("reads"), policy);
        file.thresholds.remove("add");
        assert!(Policy::of_file(&file).is_err(), "the add threshold is required");
    }
}
