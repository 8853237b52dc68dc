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

/// A group id per sample: samples whose unit vectors have a cosine of at least `threshold`,
/// or whose `keys` are equal (e.g. the text with case, spaces and punctuation removed), share a
/// group, transitively. Group ids are the smallest index of the group.
pub fn near_duplicate_groups(vectors: &[Vec<f32>], keys: &[String], threshold: f32) -> Vec<usize> {
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
    for i in 0..n {
        for j in i + 1..n {
            let mut dot = 0.0;
            for (a, b) in vectors[i].iter().zip(&vectors[j]) {
                dot += a * b;
            }
            if dot >= threshold {
                sets.join(i, j);
            }
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
        let groups = near_duplicate_groups(&vectors, &keys, 0.99);
        assert_eq!(groups, vec![0, 1, 0, 3, 1], "0~2 by cosine, 1~4 by key");
        let folds = assign(&groups, 2, 1);
        assert_eq!(folds[0], folds[2]);
        assert_eq!(folds[1], folds[4]);
        assert_eq!(folds, assign(&groups, 2, 1), "deterministic");
    }
}
