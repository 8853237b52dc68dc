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
            let cosine = dot(&vectors[i], &vectors[j]);
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

/// The dot product: the cosine of two unit vectors.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Topics: spherical k-means over unit `vectors` into `k` clusters (k-means++ start drawn from
/// the seed, then `rounds` rounds of assigning each sample to its nearest centre by cosine and
/// renormalising the centres). A topic in `0..k` per sample, the same for the same inputs.
/// Folds over topics (see [`by_topic`]) hold out whole subjects, not only near-duplicates.
pub fn topics(vectors: &[Vec<f32>], k: usize, seed: u64, rounds: usize) -> Vec<usize> {
    let n = vectors.len();
    if n == 0 {
        return Vec::new();
    }
    let k = k.clamp(1, n);
    let mut rng = SplitMix::new(seed);
    let mut centres: Vec<Vec<f32>> = vec![vectors[rng.below(n)].clone()];
    // Each sample's squared distance to its nearest centre so far (2 - 2 cos on unit vectors).
    let mut distance: Vec<f32> = vectors
        .iter()
        .map(|v| (2.0 - 2.0 * dot(v, &centres[0])).max(0.0))
        .collect();
    while centres.len() < k {
        let total: f32 = distance.iter().sum();
        let next = if total <= 0.0 {
            rng.below(n)
        } else {
            let mut target = rng.unit() * total;
            let mut chosen = n - 1;
            for (i, d) in distance.iter().enumerate() {
                if target < *d {
                    chosen = i;
                    break;
                }
                target -= d;
            }
            chosen
        };
        centres.push(vectors[next].clone());
        for (i, v) in vectors.iter().enumerate() {
            distance[i] = distance[i].min((2.0 - 2.0 * dot(v, &vectors[next])).max(0.0));
        }
    }
    let nearest = |centres: &[Vec<f32>], v: &[f32]| -> usize {
        let mut best = (f32::MIN, 0);
        for (c, centre) in centres.iter().enumerate() {
            let cosine = dot(v, centre);
            if cosine > best.0 {
                best = (cosine, c);
            }
        }
        best.1
    };
    let mut topic: Vec<usize> = vectors.iter().map(|v| nearest(&centres, v)).collect();
    for _ in 0..rounds {
        let dim = vectors[0].len();
        let mut sums = vec![vec![0.0f32; dim]; k];
        for (v, t) in vectors.iter().zip(&topic) {
            for (s, x) in sums[*t].iter_mut().zip(v) {
                *s += x;
            }
        }
        for (centre, sum) in centres.iter_mut().zip(sums) {
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
            // An emptied cluster keeps its centre.
            if norm > 0.0 {
                *centre = sum.iter().map(|x| x / norm).collect();
            }
        }
        let next: Vec<usize> = vectors.iter().map(|v| nearest(&centres, v)).collect();
        if next == topic {
            break;
        }
        topic = next;
    }
    topic
}

/// How many distinct groups (or topics) `ids` names.
pub fn count(ids: &[usize]) -> usize {
    ids.iter().collect::<std::collections::BTreeSet<_>>().len()
}

/// Groups joined by topic: each group (see [`groups`]) goes whole to the topic of its first
/// sample, so a paraphrase or translation never sits in another topic than its group.
pub fn by_topic(groups: &[usize], topics: &[usize]) -> Vec<usize> {
    groups.iter().map(|g| topics[*g]).collect()
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

    /// `xs` scaled to unit length.
    fn unit(xs: &[f32]) -> Vec<f32> {
        let n = xs.iter().map(|x| x * x).sum::<f32>().sqrt();
        xs.iter().map(|x| x / n).collect()
    }

    #[test]
    fn near_duplicates_share_a_fold() {
        let v = |x: f32, y: f32| unit(&[x, y]);
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
        let v = |x: f32, y: f32, z: f32| unit(&[x, y, z]);
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

    #[test]
    fn topics_hold_out_whole_subjects() {
        let v = |x: f32, y: f32, z: f32| unit(&[x, y, z]);
        // Three subjects, three samples each, no two of them near-duplicates.
        let vectors = vec![
            v(1.0, 0.1, 0.0),
            v(1.0, -0.1, 0.1),
            v(1.0, 0.0, -0.1),
            v(0.1, 1.0, 0.0),
            v(-0.1, 1.0, 0.1),
            v(0.0, 1.0, -0.1),
            v(0.0, 0.1, 1.0),
            v(0.1, -0.1, 1.0),
            v(-0.1, 0.0, 1.0),
        ];
        let found = topics(&vectors, 3, 7, 10);
        for subject in found.chunks(3) {
            assert!(subject.iter().all(|t| *t == subject[0]), "{found:?}");
        }
        assert_ne!(found[0], found[3]);
        assert_ne!(found[0], found[6]);
        assert_ne!(found[3], found[6]);
        assert_eq!(found, topics(&vectors, 3, 7, 10), "deterministic");
        // A group goes whole to its first sample's topic.
        let groups = vec![0, 0, 2, 3, 4, 5, 6, 7, 0];
        let joined = by_topic(&groups, &found);
        assert_eq!(joined[8], found[0]);
        assert!(topics(&[], 3, 7, 10).is_empty());
        assert_eq!(count(&found), 3);
        assert_eq!(count(&[5, 1, 5, 2, 1]), 3);
        assert_eq!(count(&[]), 0);
    }
}
