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

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::limits::{BUSY_RETRY_AFTER, overloaded};

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
}
