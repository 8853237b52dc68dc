//! Access statistics, written off the read's path.
//!
//! Every recall that shows memories in detail marks them read (last access, access count,
//! freshness). The reader does not wait for that write: it hands the ids to one recorder task,
//! which writes what gathered while the previous write ran as few statements, one user at a
//! time. One writer instead of one per recall also spares an embedded database's single write
//! lock. The recorder stops with the node, after writing what it was handed; a retriever whose
//! recorder is not running (a bench, a test, the node stopping) writes in the read's path.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use thinkus_backends::sql::MemoryStore;
use thinkus_common::model::Owner;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Reads handed to the recorder and not written yet, at most; a reader past it waits.
const QUEUED_READS: usize = 4096;

/// One read: which memories an owner was shown, and when.
#[derive(Debug)]
struct Read {
    owner: Owner,
    ids: Vec<String>,
    at: DateTime<Utc>,
}

/// Marks memories read, in the background once [`AccessRecorder::run`] runs.
pub(crate) struct AccessRecorder {
    store: Arc<dyn MemoryStore>,
    boost: f64,
    cap: f64,
    queue: OnceLock<mpsc::Sender<Read>>,
}

impl AccessRecorder {
    pub(crate) fn new(store: Arc<dyn MemoryStore>, boost: f64, cap: f64) -> Self {
        Self {
            store,
            boost,
            cap,
            queue: OnceLock::new(),
        }
    }

    /// The freshness a memory has once this access is written.
    pub(crate) fn boosted(&self, freshness: f64) -> f64 {
        if freshness + self.boost > self.cap {
            self.cap
        } else {
            freshness + self.boost
        }
    }

    /// Marks `ids` read by `owner` at `at`: handed to the recorder when it runs, else written
    /// now. A failed write is logged; the read it belongs to succeeded.
    pub(crate) async fn record(&self, owner: &Owner, ids: Vec<String>, at: DateTime<Utc>) {
        let read = Read {
            owner: owner.clone(),
            ids,
            at,
        };
        let read = match self.queue.get() {
            Some(queue) => match queue.send(read).await {
                Ok(()) => return,
                // The recorder has stopped: the read is written here.
                Err(mpsc::error::SendError(read)) => read,
            },
            None => read,
        };
        self.write(&read.owner, &read.ids, read.at).await;
    }

    /// Writes the reads handed to it until `shutdown`, then what is left. Runs once per
    /// retriever; a second call returns at once.
    pub(crate) async fn run(&self, shutdown: CancellationToken) {
        let (sender, mut queue) = mpsc::channel(QUEUED_READS);
        if self.queue.set(sender).is_err() {
            return;
        }
        let mut reads = Vec::new();
        loop {
            let received = tokio::select! {
                biased;
                received = queue.recv_many(&mut reads, QUEUED_READS) => received,
                _ = shutdown.cancelled() => break,
            };
            if received == 0 {
                return;
            }
            self.write_all(std::mem::take(&mut reads)).await;
        }
        self.drain(queue).await;
    }

    /// Closes the queue (readers still running write their own from now on) and writes what
    /// was handed over.
    async fn drain(&self, mut queue: mpsc::Receiver<Read>) {
        queue.close();
        let mut reads = Vec::new();
        while queue.recv_many(&mut reads, QUEUED_READS).await > 0 {
            self.write_all(std::mem::take(&mut reads)).await;
        }
    }

    /// Writes many reads: per owner, one statement per round of repeats (a memory read three
    /// times since the last write is counted by three statements, each at the owner's latest
    /// read time).
    async fn write_all(&self, reads: Vec<Read>) {
        let mut by_owner: HashMap<Owner, (DateTime<Utc>, HashMap<String, usize>)> = HashMap::new();
        for read in reads {
            let (at, counts) = by_owner.entry(read.owner).or_insert((read.at, HashMap::new()));
            *at = (*at).max(read.at);
            for id in read.ids {
                *counts.entry(id).or_insert(0) += 1;
            }
        }
        for (owner, (at, counts)) in by_owner {
            let rounds = counts.values().copied().max().unwrap_or(0);
            for round in 1..=rounds {
                let ids: Vec<String> = counts
                    .iter()
                    .filter(|(_, count)| **count >= round)
                    .map(|(id, _)| id.clone())
                    .collect();
                self.write(&owner, &ids, at).await;
            }
        }
    }

    async fn write(&self, owner: &Owner, ids: &[String], at: DateTime<Utc>) {
        if let Err(err) = self.store.record_access(owner, ids, at, self.boost, self.cap).await {
            tracing::warn!(%err, user_id = %owner.user_id, memories = ids.len(), "access statistics were not recorded");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::Connection;
    use thinkus_backends::conformance::sql::memory;
    use thinkus_backends::sql::{SqlStore, WriteBatch};
    use thinkus_common::model::MemoryType;

    use super::*;

    async fn store_with(dir: &std::path::Path, owner: &Owner, n: usize) -> (String, Arc<SqlStore>, Vec<String>) {
        let url = format!("sqlite://{}", dir.join("access.db").display());
        let store = Arc::new(SqlStore::connect(&url, 2).await.unwrap());
        let memories: Vec<_> = (0..n)
            .map(|i| memory(owner, "cto", None, MemoryType::Fact, &format!("fact {i}")))
            .collect();
        let ids = memories.iter().map(|m| m.id.clone()).collect();
        store
            .commit(WriteBatch {
                inserts: memories,
                ..Default::default()
            })
            .await
            .unwrap();
        (url, store, ids)
    }

    async fn counts(store: &SqlStore, owner: &Owner, ids: &[String]) -> Vec<(u64, f64)> {
        let read = store.get_memories(owner, ids).await.unwrap();
        read.iter().map(|m| (m.access_count, m.freshness)).collect()
    }

    #[tokio::test]
    async fn a_read_does_not_wait_for_its_statistics_and_they_are_written_by_the_stop() {
        let dir = tempfile::tempdir().unwrap();
        let owner = Owner::new("t", "u");
        let (url, store, ids) = store_with(dir.path(), &owner, 1).await;
        let before = counts(&store, &owner, &ids).await;
        let recorder = Arc::new(AccessRecorder::new(store.clone(), 0.5, 5.0));
        let stop = CancellationToken::new();
        let running = tokio::spawn({
            let (recorder, stop) = (recorder.clone(), stop.clone());
            async move { recorder.run(stop).await }
        });
        while recorder.queue.get().is_none() {
            tokio::task::yield_now().await;
        }
        // Another connection holds the database's write lock: a write now waits for it.
        let mut holder = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("BEGIN IMMEDIATE").execute(&mut holder).await.unwrap();
        tokio::time::timeout(
            Duration::from_secs(30),
            recorder.record(&owner, ids.clone(), Utc::now()),
        )
        .await
        .expect("the read is answered while the write waits");
        assert_eq!(counts(&store, &owner, &ids).await, before, "not written yet");
        sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
        stop.cancel();
        running.await.unwrap();
        let (count, freshness) = counts(&store, &owner, &ids).await[0];
        assert_eq!(count, before[0].0 + 1, "written by the time the recorder stops");
        assert_eq!(freshness, recorder.boosted(before[0].1));
    }

    #[tokio::test]
    async fn reads_handed_over_together_count_each_repeat_and_keep_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let owner = Owner::new("t", "u");
        let other = Owner::new("t", "other");
        let (_url, store, ids) = store_with(dir.path(), &owner, 2).await;
        let before = counts(&store, &owner, &ids).await;
        let recorder = AccessRecorder::new(store.clone(), 2.0, 5.0);
        // Handed over before the recorder reads its queue: written as one batch.
        let (sender, queue) = mpsc::channel(QUEUED_READS);
        recorder.queue.set(sender).unwrap();
        for read in [vec![ids[0].clone()], ids.clone(), vec![ids[0].clone()]] {
            recorder.record(&owner, read, Utc::now()).await;
        }
        // Another user's read of the same ids changes nothing of this user's.
        recorder.record(&other, ids.clone(), Utc::now()).await;
        assert_eq!(counts(&store, &owner, &ids).await, before, "not written yet");
        recorder.drain(queue).await;
        let read = counts(&store, &owner, &ids).await;
        assert_eq!((read[0].0, read[1].0), (before[0].0 + 3, before[1].0 + 1));
        assert_eq!(read[0].1, 5.0, "three boosts of 2 are capped at 5");
        assert_eq!(read[1].1, recorder.boosted(before[1].1));
    }

    #[tokio::test]
    async fn without_a_running_recorder_a_read_writes_its_own_statistics() {
        let dir = tempfile::tempdir().unwrap();
        let owner = Owner::new("t", "u");
        let (_url, store, ids) = store_with(dir.path(), &owner, 1).await;
        let before = counts(&store, &owner, &ids).await;
        let recorder = AccessRecorder::new(store.clone(), 0.5, 5.0);
        recorder.record(&owner, ids.clone(), Utc::now()).await;
        assert_eq!(counts(&store, &owner, &ids).await[0].0, before[0].0 + 1);
    }
}
