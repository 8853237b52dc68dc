//! The randomized differential test of the one visibility rule (`thinkus_backends::filter`):
//! the same random memories and reads on SQLite, PostgreSQL, qdrant-edge and, when
//! TEST_QDRANT_URL names one, a Qdrant server, each answer compared with the reference
//! predicate. A memory returned that the reference refuses is a leak.

use thinkus_backends::conformance::visibility::{Differential, Tally};
use thinkus_backends::vector::edge::EdgeIndex;
use thinkus_backends::vector::qdrant::QdrantIndex;

use crate::conformance::{postgres_store, sqlite_store};
use crate::support;

/// Memories in the corpus and reads run against each backend (each read is a listing and a
/// count in SQL, a dense and a sparse search in a vector index).
const MEMORIES: usize = 600;
const READS: usize = 2_500;
const SEED: u64 = 0x7e4a_4c17;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_backend_agrees_with_the_reference() {
    let run = Differential::generate(SEED, MEMORIES, READS);
    let mut total = Tally::default();
    let mut report = Vec::new();
    let mut account = |backend: &str, tally: Tally| {
        tally.assert_clean(backend);
        report.push(format!("{backend} {} reads", tally.queries));
        total.add(&tally);
    };

    let (_dir, sqlite) = sqlite_store().await;
    run.load_store(sqlite.as_ref()).await;
    account("sqlite", run.check_store(sqlite.as_ref()).await);

    if let Some(postgres) = postgres_store().await {
        run.load_store(postgres.as_ref()).await;
        account("postgres", run.check_store(postgres.as_ref()).await);
    }

    let dir = tempfile::tempdir().unwrap();
    let edge = EdgeIndex::open(dir.path()).expect("open the edge shard");
    run.load_index(&edge).await;
    account("qdrant-edge", run.check_index(&edge).await);

    match std::env::var("TEST_QDRANT_URL").ok().filter(|u| !u.is_empty()) {
        Some(url) => {
            let qdrant = QdrantIndex::connect(&url).expect("connect to TEST_QDRANT_URL");
            run.load_index(&qdrant).await;
            account("qdrant", run.check_index(&qdrant).await);
        }
        None => support::loud(
            "*** SKIPPED: the visibility differential test did not run against a Qdrant server: \
             set TEST_QDRANT_URL=qdrant://HOST:6334?collection=thinkus_conformance to run it ***",
        ),
    }

    support::loud(&format!(
        "visibility differential (seed {SEED:#x}, {MEMORIES} memories): {} scoped reads ({}), {} leaks, {} misses",
        total.queries,
        report.join(", "),
        total.leaks,
        total.misses
    ));
    assert!(
        total.queries >= 10_000,
        "the differential test runs at least 10,000 scoped reads, ran {}",
        total.queries
    );
}
