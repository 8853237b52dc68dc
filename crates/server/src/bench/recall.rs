//! `thinkus bench recall`: recall latency at scale. A node running the retriever is started in
//! process on a temporary folder; the corpus is written straight to the store and the vector
//! index (embedding 100,000 memories with e5 would take hours on this machine), then queries
//! go through `RetrieverService/Recall` over gRPC (the query embedding included) and, apart,
//! straight to the vector index with the query vectors computed beforehand (the search alone:
//! the dense and BM25 searches, run together as the retriever runs them).
//!
//! The corpus vectors are synthetic but shaped like real ones ([`super::corpus`]): perturbed
//! embeddings of real sentences. Latency is honest; relevance is not measured here.
//!
//! By default two corpora are measured, one after the other: 10,000 memories in one user's
//! namespace, and 100,000 across 100 users (each query then searches one user's 1,000 among
//! all). `--memories N --users U` measures one corpus of that shape instead.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;
use thinkus_backends::sql::MemoryStore;
use thinkus_backends::vector::{Bm25Encoder, MemoryFilter, Reader};
use thinkus_common::model::{DEFAULT_TENANT, MemoryStatus, Owner, Scope};
use thinkus_proto::retriever::RecallRequest;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use tokio_util::sync::CancellationToken;

use super::corpus::{self, ROLE};
use super::stats::{percentile_ms, rss_mb};
use super::{say, state_dir};
use crate::config::Config;
use crate::services::ServiceKind;

/// Queries run first and not counted (caches, lazy initialisation).
const WARMUP: usize = 10;

/// One corpus shape to measure.
#[derive(Debug, Clone, Copy)]
struct Shape {
    memories: usize,
    users: usize,
}

/// Figures of one corpus.
struct Figures {
    shape: Shape,
    p50: f64,
    p95: f64,
    search_p50: f64,
    search_p95: f64,
    /// The query embedding alone, in this process.
    embed_p50: f64,
    /// Reading the candidates' rows from the store.
    read_p50: f64,
    n: usize,
    /// This process's resident memory after the queries, and its peak so far, in MB: the
    /// retriever (SQLite, the vector index) and the bench's own small state.
    rss_mb: f64,
    peak_rss_mb: f64,
    /// Memories written per second.
    write_rate: f64,
}

pub async fn run(config: Config, memories: Option<usize>, users: Option<usize>, queries: usize) -> anyhow::Result<()> {
    anyhow::ensure!(queries > 0, "--queries must be at least 1");
    let shapes = match (memories, users) {
        (None, None) => vec![
            Shape {
                memories: 10_000,
                users: 1,
            },
            Shape {
                memories: 100_000,
                users: 100,
            },
        ],
        (memories, users) => vec![Shape {
            memories: memories.unwrap_or(10_000),
            users: users.unwrap_or(1),
        }],
    };
    for shape in &shapes {
        anyhow::ensure!(
            shape.users > 0 && shape.memories >= shape.users,
            "--memories must be at least --users (and --users at least 1)"
        );
    }
    say(
        "recall: synthetic corpus (perturbed e5 vectors of real sentences, written straight to the store \
         and the vector index); queries are real text embedded by the retriever",
    );
    let mut all = Vec::new();
    for shape in shapes {
        all.push(measure(config.clone(), shape, queries).await?);
    }
    let round = |v: f64| (v * 100.0).round() / 100.0;
    let runs: Vec<serde_json::Value> = all
        .iter()
        .map(|f| {
            json!({
                "memories": f.shape.memories,
                "users": f.shape.users,
                "p50_ms": round(f.p50),
                "p95_ms": round(f.p95),
                "search_p50_ms": round(f.search_p50),
                "search_p95_ms": round(f.search_p95),
                "embed_p50_ms": round(f.embed_p50),
                "read_p50_ms": round(f.read_p50),
                "n": f.n,
                "rss_mb": f.rss_mb.round(),
                "peak_rss_mb": f.peak_rss_mb.round(),
                "write_per_s": f.write_rate.round(),
            })
        })
        .collect();
    // The headline is the worst corpus on each figure.
    let worst = |get: fn(&Figures) -> f64| round(all.iter().map(get).fold(0.0, f64::max));
    say(json!({
        "p50_ms": worst(|f| f.p50),
        "p95_ms": worst(|f| f.p95),
        "search_p50_ms": worst(|f| f.search_p50),
        "search_p95_ms": worst(|f| f.search_p95),
        "embed_p50_ms": worst(|f| f.embed_p50),
        "read_p50_ms": worst(|f| f.read_p50),
        "peak_rss_mb": worst(|f| f.peak_rss_mb),
        "n": all.iter().map(|f| f.n).sum::<usize>(),
        "synthetic_vectors": true,
        "runs": runs,
    })
    .to_string());
    Ok(())
}

async fn measure(mut config: Config, shape: Shape, queries: usize) -> anyhow::Result<Figures> {
    let (dir, _temp) = state_dir(None)?;
    config.server.data_dir = dir.clone();
    config.server.metrics_addr = None;
    let candidates = config.retriever.candidates.max(1);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let services: BTreeSet<ServiceKind> = [ServiceKind::Retriever].into_iter().collect();
    let shutdown = CancellationToken::new();
    let node = crate::node::start(config, services, listener, None, shutdown.clone()).await?;
    thinkus_common::grpc::wait_serving(&node.url(), ServiceKind::Retriever.grpc_name(), Duration::from_secs(60))
        .await?;
    let store = node
        .backends
        .store
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the node opened no database"))?;
    let vectors = node
        .backends
        .vectors
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the node opened no vector index"))?;
    let embedder = node
        .backends
        .embedder
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the node has no embedder"))?;
    let dim = embedder.dim();
    vectors.ensure_ready(dim).await?;

    // The real sentences, embedded once.
    let started = Instant::now();
    let sentences = corpus::sentences();
    let bases = corpus::embed_sentences(embedder.as_ref(), &sentences).await?;
    say(format!(
        "{} memories, {} users: embedded {} base sentences in {:.1}s",
        shape.memories,
        shape.users,
        sentences.len(),
        started.elapsed().as_secs_f64()
    ));

    // The corpus.
    let started = Instant::now();
    let user_of = |i: usize| format!("recall-user-{:03}", i % shape.users);
    corpus::write(&store, &vectors, &sentences, &bases, shape.memories, |k| {
        Scope::new(user_of(k), ROLE)
    })
    .await?;
    let write_rate = shape.memories as f64 / started.elapsed().as_secs_f64().max(1e-3);
    say(format!(
        "wrote {} memories to the store and the index in {:.1}s ({write_rate:.0}/s)",
        shape.memories,
        started.elapsed().as_secs_f64()
    ));

    // The queries: distinct texts (no cache can answer them), spread over the users.
    let texts: Vec<(String, String)> = (0..queries + WARMUP)
        .map(|q| (user_of(q * 7 + 3), corpus::question(q)))
        .collect();

    // Through gRPC, the query embedding included.
    let channel = tonic::transport::Endpoint::from_shared(node.url())?.connect().await?;
    let mut client = RetrieverServiceClient::new(channel);
    let mut latencies = Vec::with_capacity(queries);
    let mut returned = 0usize;
    let progress = crate::progress::Progress::new("recalls", Some(texts.len() as u64));
    for (q, (user, text)) in texts.iter().enumerate() {
        let asked = Instant::now();
        let response = client
            .recall(RecallRequest {
                scope: Some(thinkus_proto::common::Scope {
                    user_id: user.clone(),
                    role_id: ROLE.into(),
                    ..Default::default()
                }),
                query: text.clone(),
                limit: 10,
                ..Default::default()
            })
            .await?
            .into_inner();
        if q >= WARMUP {
            latencies.push(asked.elapsed());
            returned += response.catalog.len();
        }
        progress.inc(1);
    }
    progress.finish();
    anyhow::ensure!(returned > 0, "no recall returned anything: the corpus was not found");

    // The search alone: the same queries' vectors, computed beforehand, straight to the index.
    // The query embedding alone is timed on the text with a trailing space (the same tokens):
    // the texts themselves are in the cache of recent queries since the recalls above.
    let bm25 = Bm25Encoder::default();
    let mut query_vectors = Vec::with_capacity(texts.len());
    let mut embeddings = Vec::with_capacity(queries);
    for (q, (_, text)) in texts.iter().enumerate() {
        let asked = Instant::now();
        let dense = embedder.embed_query(&format!("{text} ")).await?;
        if q >= WARMUP {
            embeddings.push(asked.elapsed());
        }
        query_vectors.push((dense, bm25.query(text)));
    }
    let mut searches = Vec::with_capacity(queries);
    let mut reads = Vec::with_capacity(queries);
    for (q, ((user, _), (dense, sparse))) in texts.iter().zip(&query_vectors).enumerate() {
        let filter = MemoryFilter {
            reader: Some(Reader {
                role_id: ROLE.into(),
                project_id: None,
                layers: Default::default(),
            }),
            statuses: vec![MemoryStatus::Active],
            ..MemoryFilter::user(&Owner::new(DEFAULT_TENANT, user.clone()))
        };
        let asked = Instant::now();
        let (dense_hits, sparse_hits) = futures::try_join!(
            vectors.search_dense(dense, &filter, candidates),
            vectors.search_sparse(sparse, &filter, candidates)
        )?;
        let searched = asked.elapsed();
        // Then the candidates' rows, as the retriever reads them.
        let mut ids: Vec<String> = dense_hits.iter().chain(&sparse_hits).map(|h| h.id.clone()).collect();
        ids.sort();
        ids.dedup();
        let read = Instant::now();
        let rows = store
            .get_memories(&Owner::new(DEFAULT_TENANT, user.clone()), &ids)
            .await?;
        if q >= WARMUP {
            searches.push(searched);
            reads.push(read.elapsed());
            anyhow::ensure!(!dense_hits.is_empty(), "the dense search found nothing for {user}");
            anyhow::ensure!(rows.len() == ids.len(), "candidates missing from the store");
        }
    }

    let (rss_mb, peak_rss_mb) = rss_mb("self");
    let figures = Figures {
        shape,
        p50: percentile_ms(&latencies, 0.5),
        p95: percentile_ms(&latencies, 0.95),
        search_p50: percentile_ms(&searches, 0.5),
        search_p95: percentile_ms(&searches, 0.95),
        embed_p50: percentile_ms(&embeddings, 0.5),
        read_p50: percentile_ms(&reads, 0.5),
        n: latencies.len(),
        rss_mb,
        peak_rss_mb,
        write_rate,
    };
    say(format!(
        "recall through gRPC (query embedding included): p50 {:.1} ms, p95 {:.1} ms; \
         search alone (dense + BM25, {candidates} candidates each): p50 {:.2} ms, p95 {:.2} ms; \
         query embedding alone: p50 {:.1} ms; reading the candidates from the store: p50 {:.2} ms ({} queries); \
         RSS {:.0} MB (peak {:.0} MB)",
        figures.p50,
        figures.p95,
        figures.search_p50,
        figures.search_p95,
        figures.embed_p50,
        figures.read_p50,
        figures.n,
        figures.rss_mb,
        figures.peak_rss_mb
    ));
    node.shutdown().await?;
    Ok(figures)
}
