//! A linear head over a message's own words: hashed character 1-3-grams and word 1-2-grams,
//! each count taken as `1 + ln(count)`, weighed by its inverse document frequency on the
//! training texts, the vector scaled to length 1; a softmax over the classes.
//!
//! It reads what an embedding blurs: the exact function words and punctuation of a request
//! ("what was", "吗", a trailing "?") whatever the topic, where the embedding carries the topic
//! first. No word list: every n-gram of the training texts has a weight, learned. Character
//! n-grams read Chinese without a segmenter; word n-grams read English across spellings of
//! its spaces.
//!
//! Training is deterministic: full-batch Adam on the weighted mean cross-entropy plus an L2
//! penalty, every sum taken in index order, so the same data and settings give the same bits.

use serde::{Deserialize, Serialize};

use crate::network::{Output, activate};

/// The hashed feature space of the built-in heads: 65,536 buckets. In cross-validation on the
/// controller's training files, 2^14 buckets lost 0.12 of need score to collisions, 2^18 and
/// 2^20 gained at most 0.02 for a file 4 to 16 times larger (docs/benchmarks.md).
pub const BUCKETS: usize = 1 << 16;

/// A head over hashed n-grams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NgramHead {
    /// One name per output (softmax).
    pub labels: Vec<String>,
    pub buckets: usize,
    /// Per bucket: the inverse document frequency on the training texts.
    #[serde(with = "crate::floats")]
    pub idf: Vec<f32>,
    /// Bucket-major: `weights[bucket * outputs + output]`.
    #[serde(with = "crate::floats")]
    pub weights: Vec<f32>,
    #[serde(with = "crate::floats")]
    pub bias: Vec<f32>,
}

/// How an n-gram head is trained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NgramSettings {
    pub buckets: usize,
    /// L2 penalty on the weights (not the biases), against the mean loss per sample.
    pub l2: f32,
    /// Full-batch steps.
    pub steps: usize,
    /// Adam's rate at the first step, falling linearly to a tenth of it.
    pub learning_rate: f32,
}

impl Default for NgramSettings {
    fn default() -> Self {
        Self {
            buckets: BUCKETS,
            l2: 1e-5,
            steps: 300,
            learning_rate: 0.1,
        }
    }
}

/// FNV-1a over a kind byte and the gram's UTF-8: the same bucket on every platform.
fn bucket(kind: u8, gram: &str, buckets: usize) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in std::iter::once(kind).chain(gram.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % buckets as u64) as u32
}

/// The text as the n-grams read it: lower case, every run of whitespace one space, a space at
/// each end so a gram can mark where the text starts and stops.
fn normalised(text: &str) -> Vec<char> {
    let mut chars = vec![' '];
    for c in text.chars().flat_map(char::to_lowercase) {
        let c = if c.is_whitespace() { ' ' } else { c };
        if !(c == ' ' && chars.last() == Some(&' ')) {
            chars.push(c);
        }
    }
    if chars.last() != Some(&' ') {
        chars.push(' ');
    }
    chars
}

/// Each bucket a text's n-grams fall in, with `1 + ln(count)`, sorted by bucket.
fn counts(text: &str, buckets: usize) -> Vec<(u32, f32)> {
    let chars = normalised(text);
    let mut hits: Vec<u32> = Vec::with_capacity(chars.len() * 5);
    let mut gram = String::new();
    for n in 1..=3 {
        for window in chars.windows(n) {
            if n == 1 && window[0] == ' ' {
                continue;
            }
            gram.clear();
            gram.extend(window);
            hits.push(bucket(b'c', &gram, buckets));
        }
    }
    let text: String = chars.iter().collect();
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    for word in &words {
        hits.push(bucket(b'w', word, buckets));
    }
    for pair in words.windows(2) {
        gram.clear();
        gram.push_str(pair[0]);
        gram.push(' ');
        gram.push_str(pair[1]);
        hits.push(bucket(b'w', &gram, buckets));
    }
    hits.sort_unstable();
    hits.chunk_by(|a, b| a == b)
        .map(|run| (run[0], 1.0 + (run.len() as f32).ln()))
        .collect()
}

/// The inverse document frequency of each bucket over some texts' counts:
/// `ln((1 + n) / (1 + df)) + 1`, so a bucket no text has weighs the most and every weight is
/// at least 1.
fn inverse_frequency(texts: &[Vec<(u32, f32)>], buckets: usize) -> Vec<f32> {
    let mut df = vec![0u32; buckets];
    for counts in texts {
        for (b, _) in counts {
            df[*b as usize] += 1;
        }
    }
    let n = texts.len() as f64;
    df.iter()
        .map(|d| (((1.0 + n) / (1.0 + f64::from(*d))).ln() + 1.0) as f32)
        .collect()
}

/// Counts weighed by `idf` and scaled to length 1.
fn weighed(counts: &[(u32, f32)], idf: &[f32]) -> Vec<(u32, f32)> {
    let mut out: Vec<(u32, f32)> = counts.iter().map(|(b, c)| (*b, c * idf[*b as usize])).collect();
    let norm = out.iter().map(|(_, v)| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        out.iter_mut().for_each(|(_, v)| *v /= norm);
    }
    out
}

impl NgramHead {
    /// Whether the shapes agree.
    pub fn is_consistent(&self) -> bool {
        let outputs = self.labels.len();
        outputs > 0
            && self.buckets > 0
            && self.idf.len() == self.buckets
            && self.weights.len() == self.buckets * outputs
            && self.bias.len() == outputs
    }

    fn logits(&self, x: &[(u32, f32)]) -> Vec<f32> {
        let outputs = self.labels.len();
        let mut z = self.bias.clone();
        for (b, v) in x {
            let row = &self.weights[*b as usize * outputs..(*b as usize + 1) * outputs];
            for (zo, w) in z.iter_mut().zip(row) {
                *zo += w * v;
            }
        }
        z
    }

    /// The probabilities of the labels for a text.
    pub fn predict(&self, text: &str) -> Vec<f32> {
        let mut z = self.logits(&weighed(&counts(text, self.buckets), &self.idf));
        activate(Output::Softmax, &mut z);
        z
    }
}

/// An embedding head's probabilities mixed with an n-gram head's over the same labels: `share`
/// of the latter.
pub fn mix(embedding: &[f32], ngrams: &[f32], share: f32) -> Vec<f32> {
    embedding
        .iter()
        .zip(ngrams)
        .map(|(e, n)| (1.0 - share) * e + share * n)
        .collect()
}

/// Trains a head on texts with one class each and a weight per text. Panics when the shapes
/// disagree: the callers build them.
pub fn train(
    texts: &[&str],
    classes: &[usize],
    sample_weights: &[f32],
    labels: Vec<String>,
    settings: &NgramSettings,
) -> NgramHead {
    let n = texts.len();
    assert!(n > 0, "no training samples");
    assert_eq!(classes.len(), n, "one class per sample");
    assert_eq!(sample_weights.len(), n, "one weight per sample");
    let outputs = labels.len();
    assert!(classes.iter().all(|c| *c < outputs), "a class per label");
    let buckets = settings.buckets;
    let raw: Vec<Vec<(u32, f32)>> = texts.iter().map(|t| counts(t, buckets)).collect();
    let idf = inverse_frequency(&raw, buckets);
    let xs: Vec<Vec<(u32, f32)>> = raw.iter().map(|c| weighed(c, &idf)).collect();
    let total: f32 = sample_weights.iter().sum();
    assert!(total > 0.0, "some sample weighs more than zero");

    let mut head = NgramHead {
        labels,
        buckets,
        idf,
        weights: vec![0.0; buckets * outputs],
        bias: vec![0.0; outputs],
    };
    // Only buckets some training text has can move; the others keep weight 0.
    let mut used = vec![false; buckets];
    for x in &xs {
        for (b, _) in x {
            used[*b as usize] = true;
        }
    }
    let used: Vec<usize> = (0..buckets).filter(|b| used[*b]).collect();
    let mut gradient = vec![0f32; buckets * outputs];
    let mut bias_gradient = vec![0f32; outputs];
    let mut moments = (vec![0f32; buckets * outputs], vec![0f32; buckets * outputs]);
    let mut bias_moments = (vec![0f32; outputs], vec![0f32; outputs]);
    for step in 1..=settings.steps.max(1) {
        for b in &used {
            gradient[b * outputs..(b + 1) * outputs]
                .iter_mut()
                .for_each(|g| *g = 0.0);
        }
        bias_gradient.iter_mut().for_each(|g| *g = 0.0);
        for (i, x) in xs.iter().enumerate() {
            let share = sample_weights[i] / total;
            if share == 0.0 {
                continue;
            }
            let mut z = head.logits(x);
            activate(Output::Softmax, &mut z);
            for (o, p) in z.iter().enumerate() {
                let d = (p - if classes[i] == o { 1.0 } else { 0.0 }) * share;
                bias_gradient[o] += d;
                for (b, v) in x {
                    gradient[*b as usize * outputs + o] += d * v;
                }
            }
        }
        let rate = settings.learning_rate * (1.0 - 0.9 * (step - 1) as f32 / settings.steps.max(1) as f32);
        let t = step.min(i32::MAX as usize) as i32;
        for b in &used {
            let range = b * outputs..(b + 1) * outputs;
            for k in range.clone() {
                gradient[k] += settings.l2 * head.weights[k];
            }
            crate::train::adam(
                &mut head.weights[range.clone()],
                &gradient[range.clone()],
                &mut moments.0[range.clone()],
                &mut moments.1[range],
                rate,
                t,
            );
        }
        crate::train::adam(
            &mut head.bias,
            &bias_gradient,
            &mut bias_moments.0,
            &mut bias_moments.1,
            rate,
            t,
        );
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_characters_and_words_in_one_space() {
        let small = 1 << 20;
        let a = counts("What was  the Budget?", small);
        let b = counts("what was the budget?", small);
        assert_eq!(a, b, "case and runs of whitespace do not matter");
        // A repeated gram counts 1 + ln(count): "a" three times in "a a a".
        let repeated = counts("a a a", small);
        let a_bucket = bucket(b'c', "a", small);
        let value = repeated.iter().find(|(b, _)| *b == a_bucket).unwrap().1;
        assert!((value - (1.0 + 3f32.ln())).abs() < 1e-6);
        // Chinese reads by characters; a Han run is one word.
        let zh = counts("预算是多少", small);
        assert!(zh.iter().any(|(b, _)| *b == bucket(b'c', "预算", small)));
        assert!(zh.iter().any(|(b, _)| *b == bucket(b'w', "预算是多少", small)));
        // Word pairs, and the ends of the text.
        let en = counts("the budget", small);
        assert!(en.iter().any(|(b, _)| *b == bucket(b'w', "the budget", small)));
        assert!(en.iter().any(|(b, _)| *b == bucket(b'c', " th", small)));
        assert!(en.windows(2).all(|w| w[0].0 < w[1].0), "sorted, one entry per bucket");
        assert!(counts("", small).is_empty());
    }

    #[test]
    fn weighed_features_have_length_one_and_rare_grams_weigh_more() {
        let texts = [counts("alpha beta", BUCKETS), counts("alpha gamma", BUCKETS)];
        let idf = inverse_frequency(&texts, BUCKETS);
        let alpha = bucket(b'w', "alpha", BUCKETS) as usize;
        let beta = bucket(b'w', "beta", BUCKETS) as usize;
        assert!(idf[beta] > idf[alpha]);
        let x = weighed(&texts[0], &idf);
        let norm: f32 = x.iter().map(|(_, v)| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-5);
    }

    fn toy() -> (Vec<&'static str>, Vec<usize>) {
        let texts = vec![
            "what did we decide about the vendor",
            "what was the budget we agreed",
            "remind me what I said about the launch",
            "上次我们定的预算是多少",
            "我之前说过用哪个数据库",
            "what is a p99 latency",
            "explain how TLS works",
            "what does GDPR require",
            "什么是增长黑客",
            "解释一下什么是毛利率",
        ];
        (texts, vec![0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    }

    #[test]
    fn training_is_deterministic_and_learns_the_classes() {
        let (texts, classes) = toy();
        let settings = NgramSettings {
            buckets: 1 << 12,
            steps: 200,
            ..NgramSettings::default()
        };
        let labels = vec!["history".to_string(), "general".to_string()];
        let head = train(&texts, &classes, &[1.0; 10], labels.clone(), &settings);
        let again = train(&texts, &classes, &[1.0; 10], labels, &settings);
        assert_eq!(head, again, "the same data and settings give the same bits");
        assert!(head.is_consistent());
        for (text, class) in texts.iter().zip(&classes) {
            let p = head.predict(text);
            assert!(p[*class] > 0.8, "{text}: {p:?}");
            assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
        // A text it never saw, sharing the history texts' words.
        let p = head.predict("what did we decide about the budget");
        assert!(p[0] > p[1], "{p:?}");
        // A weight of zero removes a sample's pull: with every history text but one at zero,
        // that one text still decides its class.
        let mut weights = vec![1.0; 10];
        weights[1..5].iter_mut().for_each(|w| *w = 0.0);
        let head = train(&texts, &classes, &weights, vec!["h".into(), "g".into()], &settings);
        assert!(head.predict(texts[0])[0] > 0.5);
    }

    #[test]
    fn a_stronger_penalty_keeps_the_weights_smaller() {
        let (texts, classes) = toy();
        let labels = || vec!["history".to_string(), "general".to_string()];
        let weak = NgramSettings {
            buckets: 1 << 12,
            l2: 1e-6,
            ..NgramSettings::default()
        };
        let strong = NgramSettings { l2: 1e-1, ..weak };
        let size = |h: &NgramHead| h.weights.iter().map(|w| w * w).sum::<f32>();
        let weak = train(&texts, &classes, &[1.0; 10], labels(), &weak);
        let strong = train(&texts, &classes, &[1.0; 10], labels(), &strong);
        assert!(
            size(&strong) < size(&weak) / 2.0,
            "{} vs {}",
            size(&strong),
            size(&weak)
        );
    }
}
