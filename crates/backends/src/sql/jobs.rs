//! [`JobStore`] on SQL: the durable job queue (claims with leases, retries, results).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use thinkus_common::model::Owner;

use super::query::{Arg, JOB_COLUMNS, Query, arguments, ms};
use super::rows::{backend_error, job_from_row, parse_enum};
use super::store::{Backend, SqlStore};
use super::{JobRecord, JobStatus, JobStore, StoreError};

#[async_trait]
impl JobStore for SqlStore {
    async fn enqueue(&self, job: &JobRecord) -> Result<String, StoreError> {
        if let Some(key) = &job.dedupe_key {
            let mut q = Query::new("SELECT id FROM jobs WHERE dedupe_key = ? AND status IN ('pending', 'running')");
            q.text(key.clone());
            if let Some(row) = self.fetch_optional(&q).await? {
                return row.try_get::<String, _>(0).map_err(backend_error);
            }
        }
        let mut q = Query::new(&format!(
            "INSERT INTO jobs ({JOB_COLUMNS}) VALUES ({})",
            vec!["?"; 16].join(", ")
        ));
        q.text(job.id.clone())
            .text(job.kind.clone())
            .text(job.tenant_id.clone())
            .text(job.user_id.clone())
            .arg(Arg::OptText(job.session_id.clone()))
            .text(job.payload.clone())
            .text(job.status.as_str())
            .int(i64::from(job.attempts))
            .int(i64::from(job.max_attempts))
            .arg(Arg::OptText(job.last_error.clone()))
            .int(ms(job.run_after))
            .arg(Arg::OptInt(job.lease_until.map(ms)))
            .arg(Arg::OptText(job.dedupe_key.clone()))
            .int(ms(job.created_at))
            .int(ms(job.updated_at))
            .arg(Arg::OptText(job.result.clone()));
        match self.execute(&q).await {
            Ok(_) => Ok(job.id.clone()),
            // Lost a race on the dedupe key: the winner's job does the work.
            Err(StoreError::AlreadyExists(_)) if job.dedupe_key.is_some() => {
                let mut q = Query::new("SELECT id FROM jobs WHERE dedupe_key = ? AND status IN ('pending', 'running')");
                q.text(job.dedupe_key.clone().unwrap_or_default());
                match self.fetch_optional(&q).await? {
                    Some(row) => row.try_get::<String, _>(0).map_err(backend_error),
                    None => Err(StoreError::Conflict("dedupe key released concurrently".into())),
                }
            }
            Err(err) => Err(err),
        }
    }

    async fn claim(
        &self,
        kinds: &[&str],
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<JobRecord>, StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, updated_at = ? WHERE id = (SELECT id FROM jobs j WHERE status = 'pending' AND run_after <= ? AND",
        );
        q.int(ms(lease_until)).int(ms(now)).int(ms(now));
        q.push_in("kind", kinds.iter().map(|k| k.to_string()));
        // A user's jobs of one kind run in the order they were queued: what the user said last is
        // learned last, whichever worker or replica is free first.
        q.push(
            " AND NOT EXISTS (SELECT 1 FROM jobs e WHERE e.tenant_id = j.tenant_id AND e.user_id = j.user_id \
             AND e.kind = j.kind AND e.status IN ('pending', 'running') \
             AND (e.created_at < j.created_at OR (e.created_at = j.created_at AND e.id < j.id)))",
        );
        // Tenants take turns: the job of the tenant with the fewest jobs running goes first, so a
        // tenant's backlog (a bulk import over many users) does not hold another tenant's fresh
        // job until all of it has run; among equals, the oldest due job.
        q.push(
            " ORDER BY (SELECT COUNT(*) FROM jobs r WHERE r.tenant_id = j.tenant_id AND r.status = 'running') ASC, \
             run_after ASC, id ASC LIMIT 1",
        );
        if self.backend == Backend::Postgres {
            q.push(" FOR UPDATE SKIP LOCKED");
        }
        q.push(&format!(") AND status = 'pending' RETURNING {JOB_COLUMNS}"));
        let _guard = self.lock_writes().await;
        super::watch::note(&q.sql);
        let sql = self.sql(&q.sql);
        let args = arguments(&q.args)?;
        let row = sqlx::query_with(&sql, args)
            .fetch_optional(&self.pool)
            .await
            .map_err(backend_error)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn complete_job(&self, id: &str, now: DateTime<Utc>, result: Option<&str>) -> Result<(), StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET status = 'succeeded', lease_until = NULL, last_error = NULL, updated_at = ?, result = ? WHERE id = ?",
        );
        q.int(ms(now)).arg(Arg::OptText(result.map(str::to_string))).text(id);
        if self.execute(&q).await? == 0 {
            return Err(StoreError::NotFound(format!("job {id:?}")));
        }
        Ok(())
    }

    async fn fail_job(
        &self,
        id: &str,
        error: &str,
        now: DateTime<Utc>,
        retry_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        let error: String = error.chars().take(2000).collect();
        let mut q = match retry_at {
            Some(at) => {
                let mut q = Query::new(
                    "UPDATE jobs SET status = 'pending', lease_until = NULL, last_error = ?, run_after = ?, updated_at = ? WHERE id = ?",
                );
                q.text(error).int(ms(at)).int(ms(now));
                q
            }
            None => {
                let mut q = Query::new(
                    "UPDATE jobs SET status = 'failed', lease_until = NULL, last_error = ?, updated_at = ? WHERE id = ?",
                );
                q.text(error).int(ms(now));
                q
            }
        };
        q.text(id);
        if self.execute(&q).await? == 0 {
            return Err(StoreError::NotFound(format!("job {id:?}")));
        }
        Ok(())
    }

    async fn job_progress(
        &self,
        id: &str,
        progress: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET result = ?, lease_until = ?, updated_at = ? WHERE id = ? AND status = 'running'",
        );
        q.text(progress.to_string()).int(ms(lease_until)).int(ms(now)).text(id);
        Ok(self.execute(&q).await? > 0)
    }

    async fn requeue_expired(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET status = 'pending', lease_until = NULL, last_error = 'lease expired: the worker stopped', updated_at = ? \
             WHERE status = 'running' AND lease_until IS NOT NULL AND lease_until < ?",
        );
        q.int(ms(now)).int(ms(now));
        self.execute(&q).await
    }

    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let mut q = Query::new(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?"));
        q.text(id);
        self.fetch_optional(&q).await?.as_ref().map(job_from_row).transpose()
    }

    async fn list_jobs(
        &self,
        owner: &Owner,
        session_id: Option<&str>,
        status: Option<JobStatus>,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = ? AND user_id = ?"
        ));
        q.owner(owner);
        if let Some(session) = session_id {
            q.push(" AND session_id = ?").text(session);
        }
        if let Some(status) = status {
            q.push(" AND status = ?").text(status.as_str());
        }
        q.push(" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
            .int(limit as i64)
            .int(offset as i64);
        self.fetch_all(&q).await?.iter().map(job_from_row).collect()
    }

    async fn job_counts(&self) -> Result<Vec<(String, JobStatus, u64)>, StoreError> {
        let q = Query::new("SELECT kind, status, COUNT(*) FROM jobs GROUP BY kind, status");
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| {
                let kind: String = row.try_get(0).map_err(backend_error)?;
                let status: String = row.try_get(1).map_err(backend_error)?;
                let count: i64 = row.try_get(2).map_err(backend_error)?;
                Ok((kind, parse_enum::<JobStatus>("status", &status)?, count.max(0) as u64))
            })
            .collect()
    }
}
