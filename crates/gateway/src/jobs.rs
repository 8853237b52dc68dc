//! The background workers: take due jobs from the durable queue, run them, retry failures with
//! exponential backoff, and fail a job for good after `max_attempts` runs. A job whose worker
//! died (its lease ran out) goes back to the queue, so a crash loses no queued work.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use thinkus_backends::sql::{JobRecord, StoreError};
use thinkus_common::metrics::METRICS;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::service::{Gateway, LEARN_JOB, SUMMARIZE_JOB};

/// The delay before the next run of a job that failed `attempts` times.
pub fn backoff(attempts: u32, base_ms: u64, max_ms: u64) -> Duration {
    let exponent = attempts.saturating_sub(1).min(30);
    Duration::from_millis(base_ms.saturating_mul(1u64 << exponent).min(max_ms))
}

/// Starts the workers and the queue gauge; they stop when `shutdown` is cancelled.
pub fn spawn_workers(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Vec<JoinHandle<()>> {
    let mut handles: Vec<JoinHandle<()>> = (0..gateway.config().workers)
        .map(|n| tokio::spawn(work(gateway.clone(), n, shutdown.clone())))
        .collect();
    handles.push(tokio::spawn(watch_queue(gateway, shutdown)));
    handles
}

/// Takes and runs one due job, if any. Returns whether there was one.
pub async fn run_once(gateway: &Gateway) -> anyhow::Result<bool> {
    let config = gateway.config();
    let now = Utc::now();
    let lease = chrono::Duration::seconds(config.lease_seconds as i64);
    let Some(job) = gateway
        .jobs
        .claim(&[LEARN_JOB, SUMMARIZE_JOB], now, now + lease)
        .await?
    else {
        return Ok(false);
    };
    let outcome = tokio::time::timeout(Duration::from_secs(config.lease_seconds), gateway.run_job(&job)).await;
    let (result, error) = match outcome {
        Ok(Ok(result)) => (result, None),
        Ok(Err(err)) => (None, Some(err.message)),
        Err(_) => (None, Some(format!("timed out after {} s", config.lease_seconds))),
    };
    finish(gateway, &job, result.as_deref(), error).await?;
    Ok(true)
}

async fn finish(gateway: &Gateway, job: &JobRecord, result: Option<&str>, error: Option<String>) -> anyhow::Result<()> {
    let config = gateway.config();
    let now = Utc::now();
    // An erasure of the job's user deleted it while it ran (its writes were refused): nothing
    // to record, the user's data is gone with it.
    let erased = |err: &StoreError| matches!(err, StoreError::NotFound(_));
    match error {
        None => {
            if let Err(err) = gateway.jobs.complete_job(&job.id, now, result).await {
                if !erased(&err) {
                    return Err(err.into());
                }
                tracing::info!(job = %job.id, kind = %job.kind, "the job's user was erased while it ran");
                return Ok(());
            }
            METRICS.job_runs.with_label_values(&[&job.kind, "succeeded"]).inc();
            tracing::debug!(job = %job.id, kind = %job.kind, "job done");
        }
        Some(error) => {
            // `attempts` already counts this run.
            let retry_at = (job.attempts < job.max_attempts.max(1)).then(|| {
                now + chrono::Duration::from_std(backoff(job.attempts, config.retry_base_ms, config.retry_max_ms))
                    .unwrap_or_default()
            });
            let outcome = if retry_at.is_some() { "retried" } else { "failed" };
            METRICS.job_runs.with_label_values(&[&job.kind, outcome]).inc();
            tracing::warn!(job = %job.id, kind = %job.kind, attempts = job.attempts, %error, outcome, "job failed");
            if let Err(err) = gateway.jobs.fail_job(&job.id, &error, now, retry_at).await {
                if !erased(&err) {
                    return Err(err.into());
                }
                tracing::info!(job = %job.id, kind = %job.kind, "the job's user was erased while it ran");
            }
        }
    }
    Ok(())
}

async fn work(gateway: Arc<Gateway>, number: usize, shutdown: CancellationToken) {
    let idle = Duration::from_millis(gateway.config().poll_interval_ms.max(10));
    loop {
        if shutdown.is_cancelled() {
            return;
        }
        let busy = match run_once(&gateway).await {
            Ok(busy) => busy,
            Err(err) => {
                tracing::error!(worker = number, %err, "the job queue does not answer");
                false
            }
        };
        if !busy {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(idle) => {}
            }
        }
    }
}

/// Returns jobs of dead workers to the queue and publishes the queue's depth.
async fn watch_queue(gateway: Arc<Gateway>, shutdown: CancellationToken) {
    loop {
        match gateway.jobs.requeue_expired(Utc::now()).await {
            Ok(0) => {}
            Ok(requeued) => tracing::warn!(requeued, "jobs of a stopped worker went back to the queue"),
            Err(err) => tracing::error!(%err, "the job queue does not answer"),
        }
        if let Ok(counts) = gateway.jobs.job_counts().await {
            for (kind, status, count) in counts {
                METRICS
                    .queue_depth
                    .with_label_values(&[&kind, status.as_str()])
                    .set(count as i64);
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(1, 2000, 300_000), Duration::from_secs(2));
        assert_eq!(backoff(2, 2000, 300_000), Duration::from_secs(4));
        assert_eq!(backoff(4, 2000, 300_000), Duration::from_secs(16));
        assert_eq!(backoff(40, 2000, 300_000), Duration::from_secs(300));
    }
}
