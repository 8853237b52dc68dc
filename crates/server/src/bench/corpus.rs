//! A synthetic corpus for the latency and load benches: memories written straight to the store
//! and the vector index (embedding 100,000 memories with e5 would take hours on this machine).
//!
//! The vectors are synthetic but shaped like real ones: a few hundred real sentences are
//! embedded with the configured embedder, and every memory carries one of them with Gaussian
//! noise added and the result normalised, so the index holds as many distinct points as
//! memories, clustered as a user's memories are. The text (for BM25) is the sentence with a few
//! words drawn from a vocabulary. Latency is honest; relevance is not measured with it.

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use thinkus_backends::embed::{Embedder, normalize};
use thinkus_backends::sql::{MemoryStore, SqlStore, WriteBatch};
use thinkus_backends::vector::{Bm25Encoder, IndexedPoint, VectorIndex};
use thinkus_common::model::{Language, Memory, MemorySource, MemoryType, Scope};

pub const ROLE: &str = "assistant";
/// Memories written per store transaction and index upsert.
const BATCH: usize = 1000;
/// Standard deviation of the noise added to each component of a unit vector, relative to
/// 1/sqrt(dim): the noise's norm is about this share of the vector's.
const NOISE: f32 = 0.35;

pub const SUBJECTS: [&str; 20] = [
    "The quarterly budget review",
    "My sister's wedding",
    "The Berlin office move",
    "Our mobile app release",
    "The marathon training plan",
    "The kitchen renovation",
    "The customer onboarding flow",
    "Grandma's birthday dinner",
    "The database migration",
    "The hiring of a designer",
    "Our trip to Kyoto",
    "The pricing page redesign",
    "The vendor contract with Acme",
    "The yoga class schedule",
    "The security audit",
    "My daughter's piano recital",
    "The podcast launch",
    "The garden irrigation",
    "The investor update",
    "The team offsite",
];
pub const PREDICATES: [&str; 16] = [
    "was moved to the second week of March",
    "needs a decision from the finance lead before Friday",
    "should stay under five thousand dollars",
    "went better than expected, everyone was happy",
    "is blocked until the legal review finishes",
    "will use the cheaper option we discussed",
    "has to be finished before the summer holidays",
    "was cancelled because of the weather",
    "depends on the new laptop arriving",
    "is what I want to focus on this month",
    "got great feedback from the early users",
    "should be written up in a short report",
    "reminded me to call the insurance company",
    "made me rethink how we plan weekends",
    "is where we met the new neighbours",
    "takes more time than I thought it would",
];
pub const VOCABULARY: [&str; 24] = [
    "alpha", "harbor", "violet", "ledger", "copper", "meadow", "signal", "quartz", "lantern", "orbit", "saffron",
    "tundra", "willow", "ember", "falcon", "glacier", "mosaic", "nectar", "pebble", "ripple", "summit", "timber",
    "velvet", "zephyr",
];
pub const QUESTIONS: [&str; 8] = [
    "What did we decide about {s}?",
    "When is {s} happening?",
    "Anything I said about {s} and the budget?",
    "Remind me what happened with {s}",
    "Who was involved in {s}?",
    "What was the problem with {s}?",
    "How did {s} go in the end?",
    "Is {s} still blocked?",
];
pub const TYPES: [MemoryType; 6] = [
    MemoryType::ProjectDecision,
    MemoryType::UserPreference,
    MemoryType::DiscussionConclusion,
    MemoryType::ActionItem,
    MemoryType::Constraint,
    MemoryType::Insight,
];

/// A small deterministic generator (xorshift64*), so runs are comparable.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box-Muller).
    pub fn gaussian(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }
}

/// The real sentences every memory is a variation of.
pub fn sentences() -> Vec<String> {
    SUBJECTS
        .iter()
        .flat_map(|s| PREDICATES.iter().map(move |p| format!("{s} {p}.")))
        .collect()
}

/// The sentences' embeddings, as passages.
pub async fn embed_sentences(embedder: &dyn Embedder, sentences: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
    let mut bases = Vec::with_capacity(sentences.len());
    let progress = crate::progress::Progress::new("embedding the base sentences", Some(sentences.len() as u64));
    for chunk in sentences.chunks(32) {
        bases.extend(embedder.embed_passages(chunk).await?);
        progress.inc(chunk.len() as u64);
    }
    progress.finish();
    Ok(bases)
}

/// A question about the `q`-th subject, distinct for every `q` (no cache can answer it).
pub fn question(q: usize) -> String {
    let subject = SUBJECTS[q % SUBJECTS.len()].to_lowercase();
    let template = QUESTIONS[(q / SUBJECTS.len()) % QUESTIONS.len()];
    let round = q / (SUBJECTS.len() * QUESTIONS.len());
    let mut text = template.replace("{s}", &subject);
    if round > 0 {
        text.push_str(&format!(" ({})", VOCABULARY[round % VOCABULARY.len()]));
    }
    if round >= VOCABULARY.len() {
        text.push_str(&format!(" #{q}"));
    }
    text
}

/// Writes `memories` synthetic memories, memory `k` in `scope_of(k)` (its tenant, user and
/// role), to the store and the index, in transactions of a thousand.
pub async fn write(
    store: &Arc<SqlStore>,
    vectors: &Arc<dyn VectorIndex>,
    sentences: &[String],
    bases: &[Vec<f32>],
    memories: usize,
    scope_of: impl Fn(usize) -> Scope,
) -> anyhow::Result<()> {
    let dim = bases.first().map_or(0, Vec::len);
    let bm25 = Bm25Encoder::default();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ memories as u64);
    let sigma = NOISE / (dim.max(1) as f32).sqrt();
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
    let progress = crate::progress::Progress::new("writing the corpus", Some(memories as u64));
    let mut i = 0;
    while i < memories {
        let end = (i + BATCH).min(memories);
        let mut inserts = Vec::with_capacity(end - i);
        let mut points = Vec::with_capacity(end - i);
        for k in i..end {
            let base = rng.below(sentences.len());
            let words: Vec<&str> = (0..3).map(|_| VOCABULARY[rng.below(VOCABULARY.len())]).collect();
            let content = format!("{} ({}, note {k})", sentences[base], words.join(" "));
            let memory = synthetic_memory(
                scope_of(k),
                content,
                TYPES[k % TYPES.len()],
                at + chrono::Duration::minutes(k as i64),
            );
            let mut dense: Vec<f32> = bases[base].iter().map(|v| v + sigma * rng.gaussian()).collect();
            normalize(&mut dense);
            points.push(IndexedPoint::from_memory(
                &memory,
                dense,
                bm25.document(&memory.index_text()),
            ));
            inserts.push(memory);
        }
        store
            .commit(WriteBatch {
                inserts,
                ..Default::default()
            })
            .await?;
        vectors.upsert(points).await?;
        progress.inc((end - i) as u64);
        i = end;
    }
    progress.finish();
    Ok(())
}

fn synthetic_memory(scope: Scope, content: String, memory_type: MemoryType, at: chrono::DateTime<Utc>) -> Memory {
    Memory {
        language: Language::En,
        ..Memory::new(scope, memory_type, content, MemorySource::Conversation, at)
    }
}
