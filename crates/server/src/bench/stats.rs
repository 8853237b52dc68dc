//! Small statistics for the benches.

use std::time::Duration;

/// The q-quantile (0-1) of durations, in milliseconds (nearest rank).
pub fn percentile_ms(samples: &[Duration], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut sorted: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// A figure rounded to a tenth, as the benches print milliseconds and megabytes.
pub fn tenth(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// (resident, peak resident) memory of a process in MB, from /proc (`self` for this one); 0
/// where /proc is not there.
pub fn rss_mb(process: &str) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{process}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The median of values.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// The q-quantile of values (nearest rank).
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Recall at k: the share of relevant items in the top k.
pub fn recall_at(ranked: &[String], relevant: &[String], k: usize) -> f64 {
    if relevant.is_empty() {
        return 0.0;
    }
    let top = &ranked[..ranked.len().min(k)];
    relevant.iter().filter(|r| top.contains(r)).count() as f64 / relevant.len() as f64
}

/// nDCG at k with binary relevance.
pub fn ndcg_at(ranked: &[String], relevant: &[String], k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .filter(|(_, id)| relevant.contains(id))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let ideal: f64 = (0..relevant.len().min(k)).map(|i| 1.0 / ((i + 2) as f64).log2()).sum();
    if ideal == 0.0 { 0.0 } else { dcg / ideal }
}

/// `part / whole`, or `empty` when there is no whole.
pub fn ratio(part: usize, whole: usize, empty: f64) -> f64 {
    if whole == 0 { empty } else { part as f64 / whole as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn retrieval_measures() {
        let ranked = ids(&["a", "b", "c", "d"]);
        assert_eq!(recall_at(&ranked, &ids(&["b", "z"]), 1), 0.0);
        assert_eq!(recall_at(&ranked, &ids(&["b", "z"]), 5), 0.5);
        assert!((ndcg_at(&ranked, &ids(&["a"]), 10) - 1.0).abs() < 1e-9);
        let second = ndcg_at(&ranked, &ids(&["b"]), 10);
        assert!((second - 1.0 / 3f64.log2()).abs() < 1e-9);
    }

    #[test]
    fn percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&samples, 0.5), 50.0);
        assert_eq!(percentile_ms(&samples, 0.95), 95.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }
}
