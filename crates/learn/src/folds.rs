//! Cross-validation folds that keep near-identical samples together: two lines that say the
//! same thing in other words must not sit one in the training part and one in the test part, or
//! the test measures memory rather than generalisation.

use crate::rng::SplitMix;

/// Union-find over sample indices.
struct Sets(Vec<usize>);

impl Sets {
    fn find(&mut self, i: usize) -> usize {
        let mut root = i;
        while self.0[root] != root {
            root = self.0[root];
        }
        let mut at = i;
        while self.0[at] != root {
            let next = self.0[at];
            self.0[at] = root;
            at = next;
        }
        root
    }

    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            let (low, high) = if a < b { (a, b) } else { (b, a) };
            self.0[high] = low;
        }
    }
}

/// When two samples count as one for the folds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grouping {
    /// Two samples of one language whose cosine is at least this (paraphrases).
    pub same_language: f32,
    /// Two samples of different languages that are each other's nearest neighbour in the other
    /// language, with at least this cosine (translations: a zh/en pair scores 0.80-0.90 on
    /// multilingual-e5-small, below any paraphrase threshold of one language).
    pub mutual_translation: f32,
    /// Two samples of different languages whose cosine is at least this, nearest or not.
    pub cross_language: f32,
}

impl Grouping {
    /// The settings the training commands use (on the query-prefixed vectors).
    pub const DEFAULT: Grouping = Grouping {
        same_language: 0.95,
        mutual_translation: 0.80,
        cross_language: 0.88,
    };

    /// How the grouping is described in a weight file.
    pub fn describe(&self) -> String {
        format!(
            "the same text, or cosine >= {} in one language, or each other's nearest line in the other language with cosine >= {} (translations), or cosine >= {} across languages",
            self.same_language, self.mutual_translation, self.cross_language
        )
    }
}

/// A group id per sample: samples that are near-identical in one language or translations of
/// each other (see [`Grouping`]), or whose `keys` are equal (e.g. the text with case, spaces and
/// punctuation removed), share a group, transitively. `vectors` are unit length. Group ids are
/// the smallest index of the group.
pub fn groups(vectors: &[Vec<f32>], keys: &[String], languages: &[String], grouping: Grouping) -> Vec<usize> {
    let n = vectors.len();
    let dot = |i: usize, j: usize| -> f32 { vectors[i].iter().zip(&vectors[j]).map(|(a, b)| a * b).sum() };
    let mut sets = Sets((0..n).collect());
    let mut first_of_key = std::collections::HashMap::new();
    for (i, key) in keys.iter().enumerate() {
        if let Some(&j) = first_of_key.get(key.as_str()) {
            sets.join(i, j);
        } else {
            first_of_key.insert(key.as_str(), i);
        }
    }
    // Each sample's nearest sample in another language, and their cosine.
    let mut nearest: Vec<Option<(usize, f32)>> = vec![None; n];
    for i in 0..n {
        for j in i + 1..n {
            let cosine = dot(i, j);
            if languages[i] == languages[j] {
                if cosine >= grouping.same_language {
                    sets.join(i, j);
                }
                continue;
            }
            if cosine >= grouping.cross_language {
                sets.join(i, j);
            }
            for (a, b) in [(i, j), (j, i)] {
                if nearest[a].is_none_or(|(_, best)| cosine > best) {
                    nearest[a] = Some((b, cosine));
                }
            }
        }
    }
    for i in 0..n {
        if let Some((j, cosine)) = nearest[i]
            && cosine >= grouping.mutual_translation
            && nearest[j].is_some_and(|(k, _)| k == i)
        {
            sets.join(i, j);
        }
    }
    (0..n).map(|i| sets.find(i)).collect()
}

/// A fold in `0..k` per sample, whole groups at a time: groups in an order drawn from the seed,
/// the largest first, each to the fold with the fewest samples so far.
pub fn assign(groups: &[usize], k: usize, seed: u64) -> Vec<usize> {
    let k = k.max(1);
    let mut members: std::collections::BTreeMap<usize, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        members.entry(*g).or_default().push(i);
    }
    let mut order: Vec<Vec<usize>> = members.into_values().collect();
    SplitMix::new(seed).shuffle(&mut order);
    // Stable: equal sizes keep the drawn order.
    order.sort_by_key(|m| std::cmp::Reverse(m.len()));
    let mut sizes = vec![0usize; k];
    let mut fold = vec![0usize; groups.len()];
    for group in order {
        let smallest = (0..k).min_by_key(|f| (sizes[*f], *f)).unwrap_or(0);
        sizes[smallest] += group.len();
        for i in group {
            fold[i] = smallest;
        }
    }
    fold
}

/// The text as a duplicate key: lowercase letters, digits and ideographs only.
pub fn text_key(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_duplicates_share_a_fold() {
        let v = |x: f32, y: f32| {
            let n = (x * x + y * y).sqrt();
            vec![x / n, y / n]
        };
        let vectors = vec![v(1.0, 0.0), v(0.0, 1.0), v(1.0, 0.01), v(0.6, 0.8), v(-1.0, 0.0)];
        let keys: Vec<String> = ["a", "b", "c", "d", "B!"].iter().map(|k| text_key(k)).collect();
        let languages = vec![String::from("en"); 5];
        let grouping = Grouping {
            same_language: 0.99,
            ..Grouping::DEFAULT
        };
        let groups = groups(&vectors, &keys, &languages, grouping);
        assert_eq!(groups, vec![0, 1, 0, 3, 1], "0~2 by cosine, 1~4 by key");
        let folds = assign(&groups, 2, 1);
        assert_eq!(folds[0], folds[2]);
        assert_eq!(folds[1], folds[4]);
        assert_eq!(folds, assign(&groups, 2, 1), "deterministic");
    }

    #[test]
    fn translations_share_a_group_across_languages() {
        let v = |x: f32, y: f32, z: f32| {
            let n = (x * x + y * y + z * z).sqrt();
            vec![x / n, y / n, z / n]
        };
        // 0 (zh) and 1 (en) are each other's nearest in the other language at cosine ~0.85;
        // 2 (en) is not 0's nearest; 3 (zh) and 4 (en) are far from everything.
        let vectors = vec![
            v(1.0, 0.62, 0.0),
            v(1.0, 0.0, 0.0),
            v(1.0, -0.9, 0.0),
            v(0.0, 0.0, 1.0),
            v(0.0, 1.0, 0.3),
        ];
        let keys: Vec<String> = (0..5).map(|i| i.to_string()).collect();
        let languages: Vec<String> = ["zh", "en", "en", "zh", "en"].iter().map(|s| s.to_string()).collect();
        let grouping = Grouping::DEFAULT;
        let groups = groups(&vectors, &keys, &languages, grouping);
        assert_eq!(groups[0], groups[1], "a mutual pair above 0.80");
        assert_ne!(groups[0], groups[2], "not the nearest");
        assert_ne!(groups[3], groups[4], "far apart");
        assert_eq!(groups[2], 2);
        // One language: the same vectors do not join below the paraphrase threshold.
        let one: Vec<String> = vec!["en".into(); 5];
        let alone = super::groups(&vectors, &keys, &one, grouping);
        assert_ne!(alone[0], alone[1]);
    }
}
