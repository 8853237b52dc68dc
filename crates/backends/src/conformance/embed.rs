//! The conformance suite of [`Embedder`], one function per behaviour (the test binary stamps
//! each into its own test per embedder). The ranking checks that need a model which understands
//! meaning (real models, not the hashed n-grams) are stamped for those embedders only.

use crate::embed::{Embedder, cosine};

fn assert_unit(vector: &[f32], what: &str) {
    let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "{what}: expected a unit vector, norm {norm}");
}

/// The passages the suite embeds: a design preference, a tax filing, a deployment decision and
/// a budget correction, in Chinese and English.
fn passages() -> Vec<String> {
    vec![
        "我喜欢简约的设计风格".into(),
        "The quarterly tax filing is due in April".into(),
        "We decided to deploy the web app on Vercel".into(),
        "预算改成$800了，不是之前说的$500".into(),
    ]
}

async fn embedded_passages(embedder: &dyn Embedder) -> Vec<Vec<f32>> {
    embedder.embed_passages(&passages()).await.expect("embed passages")
}

/// An embedder has a name and a useful dimension.
pub async fn an_embedder_names_itself_and_a_useful_dimension(embedder: &dyn Embedder) {
    let dim = embedder.dim();
    assert!(dim >= 8, "a useful dimension, got {dim}");
    assert!(!embedder.name().is_empty());
}

/// A query embeds as a unit vector of the embedder's dimension.
pub async fn a_query_is_a_unit_vector_of_the_dimension(embedder: &dyn Embedder) {
    let dim = embedder.dim();
    let query = embedder.embed_query("设计风格").await.expect("embed a Chinese query");
    assert_eq!(query.len(), dim);
    assert_unit(&query, "query");
}

/// Passages embed as one unit vector each, in order.
pub async fn passages_are_unit_vectors_in_order(embedder: &dyn Embedder) {
    let dim = embedder.dim();
    let passages = passages();
    let vectors = embedder.embed_passages(&passages).await.expect("embed passages");
    assert_eq!(vectors.len(), passages.len(), "one vector per passage, in order");
    for (vector, text) in vectors.iter().zip(&passages) {
        assert_eq!(vector.len(), dim);
        assert_unit(vector, text);
    }
}

/// A batch gives what single calls give; an empty batch gives nothing.
pub async fn a_batch_gives_what_single_calls_give(embedder: &dyn Embedder) {
    let passages = passages();
    let vectors = embedded_passages(embedder).await;
    let single = embedder.embed_passages(&passages[2..3]).await.unwrap();
    assert!(
        cosine(&single[0], &vectors[2]) > 0.99,
        "batch and single embeddings agree"
    );
    assert!(embedder.embed_passages(&[]).await.unwrap().is_empty());
}

/// Related texts rank above unrelated ones, in both languages.
pub async fn related_texts_rank_above_unrelated_ones(embedder: &dyn Embedder) {
    let vectors = embedded_passages(embedder).await;
    let query = embedder.embed_query("设计风格").await.expect("embed a Chinese query");
    assert!(
        cosine(&query, &vectors[0]) > cosine(&query, &vectors[1]),
        "设计风格 is closer to the design preference than to the tax filing"
    );
    let deploy = embedder.embed_query("where do we deploy the web app").await.unwrap();
    assert!(cosine(&deploy, &vectors[2]) > cosine(&deploy, &vectors[1]));
}

/// A model that understands meaning ranks related texts first across languages and without
/// shared words (not expected of the hashed n-grams).
pub async fn meaning_ranks_across_languages_and_words(embedder: &dyn Embedder) {
    let vectors = embedded_passages(embedder).await;
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

/// Odd inputs do not fail.
pub async fn odd_inputs_embed(embedder: &dyn Embedder) {
    let odd = embedder
        .embed_passages(&["".into(), "🙂🙂".into(), "The meeting ran long. ".repeat(150)])
        .await
        .expect("empty, emoji-only and very long texts embed");
    assert_eq!(odd.len(), 3);
}
