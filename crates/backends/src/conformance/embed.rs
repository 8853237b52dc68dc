//! The conformance suite of [`Embedder`].

use crate::embed::{Embedder, cosine};

fn assert_unit(vector: &[f32], what: &str) {
    let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "{what}: expected a unit vector, norm {norm}");
}

/// The suite of [`Embedder`]. `semantic` says whether the model understands meaning (real
/// models) or only shared surface (the hashed n-grams): the ranking checks differ.
pub async fn embedder_suite(embedder: &dyn Embedder, semantic: bool) {
    let dim = embedder.dim();
    assert!(dim >= 8, "a useful dimension, got {dim}");
    assert!(!embedder.name().is_empty());

    let query = embedder.embed_query("设计风格").await.expect("embed a Chinese query");
    assert_eq!(query.len(), dim);
    assert_unit(&query, "query");

    let passages: Vec<String> = vec![
        "我喜欢简约的设计风格".into(),
        "The quarterly tax filing is due in April".into(),
        "We decided to deploy the web app on Vercel".into(),
        "预算改成$800了，不是之前说的$500".into(),
    ];
    let vectors = embedder.embed_passages(&passages).await.expect("embed passages");
    assert_eq!(vectors.len(), passages.len(), "one vector per passage, in order");
    for (vector, text) in vectors.iter().zip(&passages) {
        assert_eq!(vector.len(), dim);
        assert_unit(vector, text);
    }

    // A batch gives what single calls give.
    let single = embedder.embed_passages(&passages[2..3]).await.unwrap();
    assert!(
        cosine(&single[0], &vectors[2]) > 0.99,
        "batch and single embeddings agree"
    );
    assert!(embedder.embed_passages(&[]).await.unwrap().is_empty());

    // Related texts rank above unrelated ones, in both languages.
    assert!(
        cosine(&query, &vectors[0]) > cosine(&query, &vectors[1]),
        "设计风格 is closer to the design preference than to the tax filing"
    );
    let deploy = embedder.embed_query("where do we deploy the web app").await.unwrap();
    assert!(cosine(&deploy, &vectors[2]) > cosine(&deploy, &vectors[1]));
    if semantic {
        // Across languages and without shared words.
        let budget = embedder.embed_query("What is the budget?").await.unwrap();
        assert!(
            cosine(&budget, &vectors[3]) > cosine(&budget, &vectors[0]),
            "an English question about the budget finds the Chinese budget correction"
        );
        let hosting = embedder
            .embed_query("which hosting provider did we choose")
            .await
            .unwrap();
        assert!(cosine(&hosting, &vectors[2]) > cosine(&hosting, &vectors[1]));
    }

    // Odd inputs do not fail.
    let odd = embedder
        .embed_passages(&["".into(), "🙂🙂".into(), "The meeting ran long. ".repeat(150)])
        .await
        .expect("empty, emoji-only and very long texts embed");
    assert_eq!(odd.len(), 3);
}
