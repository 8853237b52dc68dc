//! CPU-heavy work off the async workers.
//!
//! Token counting of large texts, artifact compaction, JSONPath and keyword reads and the rule
//! engine on large inputs take milliseconds to seconds of CPU. Run inline, each one stalls an
//! async worker and every request queued on it (two 15 MB tool outputs once froze every
//! tenant for 52 s). [`cpu`] runs such work on tokio's blocking threads, at most one task per
//! core at once: more wait for a turn, no longer than the request's deadline, and are then
//! shed with RESOURCE_EXHAUSTED. Work that has started runs to its end (a thread cannot be
//! interrupted), so every caller also bounds its input; the turn is held until the work ends
//! even when the request that asked for it has given up, so abandoned work still counts.
//!
//! A turn bounds how many tasks run, not how much memory they take: parsing a JSON document
//! builds a tree many times its size. A [`ByteBudget`] bounds the bytes of such inputs worked
//! on at once; a task reserves its input's bytes before it asks for a turn.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;
use crate::limits::{BUSY_RETRY_AFTER, overloaded, overloaded_because};

/// The longest a task waits for a turn when its request has no deadline.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

fn turns() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

static TURNS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(turns())));

/// Tasks running or waiting for a turn, and the number of turns.
pub fn load() -> (usize, usize) {
    let turns = turns();
    (turns - TURNS.available_permits().min(turns), turns)
}

/// Runs `work` on a blocking thread when a turn is free, waiting for one no longer than the
/// current request's deadline (`crate::deadline::remaining`). A panic in `work` is an
/// internal error, not a crash. `what` names the work in errors and metrics.
pub async fn cpu<T, F>(what: &'static str, work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let wait = crate::deadline::remaining().unwrap_or(DEFAULT_WAIT);
    let turn = match tokio::time::timeout(wait, Arc::clone(&TURNS).acquire_owned()).await {
        Ok(Ok(turn)) => turn,
        _ => return Err(overloaded("cpu", BUSY_RETRY_AFTER)),
    };
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        work()
    })
    .await
    .map_err(|err| {
        if err.is_panic() {
            tracing::error!(what, "cpu work panicked");
        }
        ApiError::internal(format!("{what} failed: {err}"))
    })
}

/// Bytes of large inputs worked on at once (a semaphore of bytes, counted in KiB): a task
/// reserves its input's size before it starts and holds it until its work ends, waiting no
/// longer than half its request's time left, then shed with RESOURCE_EXHAUSTED naming the
/// setting.
/// An input larger than the whole budget waits for all of it (it runs alone). Reservations
/// are served in the order they were asked for.
#[derive(Debug, Clone)]
pub struct ByteBudget {
    /// The setting that sizes it, for the caller who is shed.
    key: &'static str,
    kib: u32,
    permits: Arc<Semaphore>,
}

/// A reservation of a [`ByteBudget`]; dropping it gives the bytes back.
#[derive(Debug)]
pub struct Reserved {
    _permit: OwnedSemaphorePermit,
}

impl ByteBudget {
    /// A budget of `bytes` (at least 1 KiB), sized by the setting `key`.
    pub fn new(key: &'static str, bytes: usize) -> Self {
        let kib = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX).max(1);
        Self {
            key,
            kib,
            permits: Arc::new(Semaphore::new(kib as usize)),
        }
    }

    /// Bytes reserved now, and the budget, in KiB.
    pub fn load(&self) -> (usize, usize) {
        let kib = self.kib as usize;
        (kib - self.permits.available_permits().min(kib), kib)
    }

    /// Reserves `bytes` (at most the whole budget) for `what`, waiting for them no longer than
    /// half the time left to the current request's deadline (`crate::deadline::remaining`):
    /// the bytes come back only as earlier work ends, and a request that waited longer would
    /// still have its own work to do when its caller gives up.
    pub async fn reserve(&self, what: &'static str, bytes: usize) -> Result<Reserved, ApiError> {
        let wanted = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.kib);
        let wait = crate::deadline::remaining().map_or(DEFAULT_WAIT, |left| left / 2);
        match tokio::time::timeout(wait, Arc::clone(&self.permits).acquire_many_owned(wanted)).await {
            Ok(Ok(permit)) => Ok(Reserved { _permit: permit }),
            _ => Err(overloaded_because(
                what,
                Some(&format!(
                    "{bytes} bytes wait for {}, {} KiB worked on at once",
                    self.key, self.kib
                )),
                BUSY_RETRY_AFTER,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::error::ErrorCode;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_runs_off_the_async_workers_one_per_core() {
        let on_worker = std::thread::current().id();
        let ran_on = cpu("test", || std::thread::current().id()).await.unwrap();
        assert_ne!(ran_on, on_worker);
        let panicked = cpu("test", || -> u32 { panic!("boom") }).await.unwrap_err();
        assert_eq!(panicked.code, ErrorCode::Internal);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_waits_for_a_turn_no_longer_than_its_deadline() {
        let (_, turns) = load();
        let release = Arc::new(std::sync::Barrier::new(turns + 1));
        let mut busy = Vec::new();
        for _ in 0..turns {
            let release = Arc::clone(&release);
            busy.push(tokio::spawn(cpu("hold", move || {
                release.wait();
            })));
        }
        while load().0 < turns {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let started = Instant::now();
        let shed = crate::deadline::with_deadline(Some(Instant::now() + Duration::from_millis(50)), cpu("late", || 1))
            .await
            .unwrap_err();
        assert_eq!(shed.code, ErrorCode::ResourceExhausted);
        assert!(shed.retry_after.is_some());
        assert!(started.elapsed() < Duration::from_secs(5));
        release.wait();
        for task in busy {
            task.await.unwrap().unwrap();
        }
        assert_eq!(cpu("after", || 2).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn a_byte_budget_holds_inputs_back_until_their_bytes_are_free() {
        let budget = ByteBudget::new("test.bytes_in_flight", 8 * 1024);
        let first = budget.reserve("parse", 5 * 1024).await.unwrap();
        assert_eq!(budget.load(), (5, 8));
        // Another 5 KiB does not fit beside the first: it waits, and past its deadline it is
        // shed naming the setting.
        let shed = crate::deadline::with_deadline(
            Some(Instant::now() + Duration::from_millis(50)),
            budget.reserve("parse", 5 * 1024),
        )
        .await
        .unwrap_err();
        assert_eq!(shed.code, ErrorCode::ResourceExhausted);
        assert!(shed.message.contains("test.bytes_in_flight"), "{}", shed.message);
        assert!(shed.retry_after.is_some());
        // 3 KiB fit; an input larger than the budget waits for all of it.
        let small = budget.reserve("parse", 3 * 1024).await.unwrap();
        assert_eq!(budget.load(), (8, 8));
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.reserve("parse", 100 * 1024).await.map(|_| ()) }
        });
        drop(first);
        assert_eq!(budget.load().0, 3, "the large one does not start beside the small one");
        drop(small);
        waiting.await.unwrap().unwrap();
        assert_eq!(budget.load(), (0, 8), "every byte came back");
    }
}
