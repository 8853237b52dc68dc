//! [`MemoryStore`] on SQL: memories, their history, candidates, idempotency records, plans and a
//! user's records for export and erasure.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use thinkus_common::model::{Memory, MemoryStatus, Owner};
use tracing::Instrument;

use super::query::{ARTIFACT_COLUMNS, Arg, JOB_COLUMNS, MEMORY_COLUMNS, Query, json, memory_where, ms};
use super::rows::{
    artifact_from_row, backend_error, candidate_from_row, change_from_row, erasure_from_row, job_from_row,
    memory_from_row, message_from_row, parse_enum, session_from_row, summary_from_row,
};
use super::store::SqlStore;
use super::{
    Candidate, CandidateStatus, Change, ErasureCounts, ErasureRecord, MemoryOrder, MemoryQuery, MemoryStore,
    OwnerRecords, StoreError, WriteBatch,
};

#[async_trait]
impl MemoryStore for SqlStore {
    async fn commit(&self, batch: WriteBatch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        if self.group.is_some() {
            return self.group_commit(batch).await;
        }
        let span = tracing::info_span!("db.commit", db.system = self.backend_name(), otel.kind = "client");
        let started = std::time::Instant::now();
        let mut tx = self.begin().instrument(span.clone()).await?;
        let result = self.apply(&mut tx, &batch).instrument(span).await;
        let outcome = match result {
            Ok(()) => self.commit(tx).await,
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        };
        thinkus_common::metrics::METRICS
            .backend_latency
            .with_label_values(&[self.backend_name(), "commit"])
            .observe(started.elapsed().as_secs_f64());
        outcome
    }

    async fn get_memory(&self, owner: &Owner, id: &str) -> Result<Option<Memory>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = ? AND user_id = ? AND id = ?"
        ));
        q.owner(owner).text(id);
        self.fetch_optional(&q).await?.as_ref().map(memory_from_row).transpose()
    }

    async fn get_memories(&self, owner: &Owner, ids: &[String]) -> Result<Vec<Memory>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = std::collections::HashMap::new();
        for chunk in ids.chunks(500) {
            let mut q = Query::new(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE {} = ? AND",
                self.owner_of_ids()
            ));
            q.owner(owner);
            q.push_in("id", chunk.iter().cloned());
            for row in self.fetch_all(&q).await? {
                let memory = memory_from_row(&row)?;
                found.insert(memory.id.clone(), memory);
            }
        }
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    async fn find_external(&self, owner: &Owner, external_ids: &[String]) -> Result<Vec<(String, String)>, StoreError> {
        let mut out = Vec::new();
        for chunk in external_ids.chunks(500) {
            let mut q = Query::new("SELECT external_id, id FROM memories WHERE tenant_id = ? AND user_id = ? AND");
            q.owner(owner);
            q.push_in("external_id", chunk.iter().cloned());
            for row in self.fetch_all(&q).await? {
                out.push((
                    row.try_get::<String, _>(0).map_err(backend_error)?,
                    row.try_get::<String, _>(1).map_err(backend_error)?,
                ));
            }
        }
        Ok(out)
    }

    async fn list_memories(&self, query: &MemoryQuery) -> Result<Vec<Memory>, StoreError> {
        let mut q = Query::new("");
        push_listing(&mut q, query);
        self.fetch_all(&q).await?.iter().map(memory_from_row).collect()
    }

    async fn list_memories_and_successors(
        &self,
        query: &MemoryQuery,
    ) -> Result<(Vec<Memory>, Vec<Memory>), StoreError> {
        // The listing once, as a common table; each row says which part it is of, the listed
        // ones first and in their order.
        let mut q = Query::new("WITH listed AS (");
        push_listing(&mut q, query);
        q.push(&format!(
            ") SELECT * FROM (SELECT 'listed' AS part, {MEMORY_COLUMNS} FROM listed UNION ALL \
             SELECT 'successor' AS part, {MEMORY_COLUMNS} FROM memories WHERE {} = ? \
             AND id IN (SELECT superseded_by FROM listed)) AS found ORDER BY part,{}",
            self.owner_of_ids(),
            order_of(query.order)
        ));
        q.owner(&query.filter.owner());
        let (mut listed, mut successors) = (Vec::new(), Vec::new());
        for row in self.fetch_all(&q).await? {
            let part: String = row.try_get("part").map_err(backend_error)?;
            match part.as_str() {
                "listed" => listed.push(memory_from_row(&row)?),
                _ => successors.push(memory_from_row(&row)?),
            }
        }
        Ok((listed, successors))
    }

    async fn count_memories(&self, query: &MemoryQuery) -> Result<u64, StoreError> {
        let mut q = Query::new("SELECT COUNT(*) FROM memories");
        memory_where(&mut q, query);
        self.count(&q).await
    }

    async fn record_access(
        &self,
        owner: &Owner,
        ids: &[String],
        at: DateTime<Utc>,
        boost: f64,
        cap: f64,
    ) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut q = Query::new(&format!(
            "UPDATE memories SET last_accessed_at = ?, access_count = access_count + 1, \
             freshness = CASE WHEN freshness + ? > ? THEN ? ELSE freshness + ? END \
             WHERE {} = ? AND",
            self.owner_of_ids()
        ));
        q.int(ms(at))
            .arg(Arg::Float(boost))
            .arg(Arg::Float(cap))
            .arg(Arg::Float(cap))
            .arg(Arg::Float(boost))
            .owner(owner);
        q.push_in("id", ids.iter().cloned());
        self.execute(&q).await
    }

    async fn changes(&self, owner: &Owner, memory_id: &str) -> Result<Vec<Change>, StoreError> {
        let mut q = Query::new(
            "SELECT id, tenant_id, user_id, memory_id, kind, actor, reason, before_json, after_json, at FROM memory_changes \
             WHERE tenant_id = ? AND user_id = ? AND memory_id = ? ORDER BY at ASC, id ASC",
        );
        q.owner(owner).text(memory_id);
        self.fetch_all(&q).await?.iter().map(change_from_row).collect()
    }

    async fn get_idempotent(&self, owner: &Owner, key: &str) -> Result<Option<String>, StoreError> {
        let mut q =
            Query::new("SELECT response FROM idempotency WHERE tenant_id = ? AND user_id = ? AND request_key = ?");
        q.owner(owner).text(key);
        self.fetch_optional(&q)
            .await?
            .map(|row| row.try_get::<String, _>(0).map_err(backend_error))
            .transpose()
    }

    async fn get_candidate(&self, owner: &Owner, id: &str) -> Result<Option<Candidate>, StoreError> {
        let mut q = Query::new("SELECT * FROM candidates WHERE tenant_id = ? AND user_id = ? AND id = ?");
        q.owner(owner).text(id);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(candidate_from_row)
            .transpose()
    }

    async fn list_candidates(
        &self,
        owner: &Owner,
        role_id: Option<&str>,
        project_id: Option<&str>,
        status: CandidateStatus,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<Candidate>, StoreError> {
        let mut q = Query::new("SELECT * FROM candidates WHERE tenant_id = ? AND user_id = ? AND status = ?");
        q.owner(owner).text(status.as_str());
        if let Some(role) = role_id {
            q.push(" AND role_id = ?").text(role);
        }
        if let Some(project) = project_id {
            q.push(" AND project_id = ?").text(project);
        }
        q.push(" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
            .int(limit as i64)
            .int(offset as i64);
        self.fetch_all(&q).await?.iter().map(candidate_from_row).collect()
    }

    async fn find_pending_candidate(&self, owner: &Owner, content_key: &str) -> Result<Option<Candidate>, StoreError> {
        let mut q = Query::new(
            "SELECT * FROM candidates WHERE tenant_id = ? AND user_id = ? AND content_key = ? AND status = 'pending' \
             ORDER BY created_at ASC LIMIT 1",
        );
        q.owner(owner).text(content_key);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(candidate_from_row)
            .transpose()
    }

    async fn get_plan(&self, owner: &Owner) -> Result<Option<String>, StoreError> {
        let mut q = Query::new("SELECT plan FROM user_plans WHERE tenant_id = ? AND user_id = ?");
        q.owner(owner);
        self.fetch_optional(&q)
            .await?
            .map(|row| row.try_get::<String, _>(0).map_err(backend_error))
            .transpose()
    }

    async fn set_plan(&self, owner: &Owner, plan: &str) -> Result<(), StoreError> {
        let mut q = Query::new(
            "INSERT INTO user_plans (tenant_id, user_id, plan, updated_at) VALUES (?, ?, ?, ?) \
             ON CONFLICT (tenant_id, user_id) DO UPDATE SET plan = excluded.plan, updated_at = excluded.updated_at",
        );
        q.owner(owner).text(plan).int(ms(Utc::now()));
        self.execute(&q).await?;
        Ok(())
    }

    async fn count_by_status(&self) -> Result<Vec<(MemoryStatus, u64)>, StoreError> {
        let q = Query::new("SELECT status, COUNT(*) FROM memories GROUP BY status");
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| {
                let status: String = row.try_get(0).map_err(backend_error)?;
                let count: i64 = row.try_get(1).map_err(backend_error)?;
                Ok((parse_enum::<MemoryStatus>("status", &status)?, count.max(0) as u64))
            })
            .collect()
    }

    async fn list_users(&self) -> Result<Vec<Owner>, StoreError> {
        let q = Query::new("SELECT DISTINCT tenant_id, user_id FROM memories ORDER BY tenant_id, user_id");
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| {
                Ok(Owner::new(
                    row.try_get::<String, _>(0).map_err(backend_error)?,
                    row.try_get::<String, _>(1).map_err(backend_error)?,
                ))
            })
            .collect()
    }

    async fn list_roles(&self, owner: &Owner) -> Result<Vec<String>, StoreError> {
        let mut q = Query::new(
            "SELECT role_id FROM memories WHERE tenant_id = ? AND user_id = ? \
             UNION SELECT role_id FROM candidates WHERE tenant_id = ? AND user_id = ? ORDER BY 1",
        );
        q.owner(owner).owner(owner);
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| row.try_get::<String, _>(0).map_err(backend_error))
            .collect()
    }

    async fn owner_records(&self, owner: &Owner) -> Result<OwnerRecords, StoreError> {
        let select = |sql: &str| {
            let mut q = Query::new(sql);
            q.owner(owner);
            q
        };
        let memories = self
            .fetch_all(&select(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC"
            )))
            .await?
            .iter()
            .map(memory_from_row)
            .collect::<Result<_, _>>()?;
        let changes = self
            .fetch_all(&select(
                "SELECT id, tenant_id, user_id, memory_id, kind, actor, reason, before_json, after_json, at \
                 FROM memory_changes WHERE tenant_id = ? AND user_id = ? ORDER BY at ASC, id ASC",
            ))
            .await?
            .iter()
            .map(change_from_row)
            .collect::<Result<_, _>>()?;
        let candidates = self
            .fetch_all(&select(
                "SELECT * FROM candidates WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC",
            ))
            .await?
            .iter()
            .map(candidate_from_row)
            .collect::<Result<_, _>>()?;
        let plan = self.get_plan(owner).await?;
        let sessions = self
            .fetch_all(&select(
                "SELECT * FROM sessions WHERE tenant_id = ? AND user_id = ? ORDER BY last_message_at ASC, session_id ASC",
            ))
            .await?
            .iter()
            .map(session_from_row)
            .collect::<Result<_, _>>()?;
        let messages = self
            .fetch_all(&select(
                "SELECT session_id, idx, role, speaker, content, created_at FROM session_messages \
                 WHERE tenant_id = ? AND user_id = ? ORDER BY session_id ASC, idx ASC",
            ))
            .await?
            .iter()
            .map(|row| {
                let session_id = row.try_get::<String, _>("session_id").map_err(backend_error)?;
                let message = message_from_row(row, &session_id)?;
                Ok((session_id, message))
            })
            .collect::<Result<_, StoreError>>()?;
        let summaries = self
            .fetch_all(&select(
                "SELECT * FROM session_summaries WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC",
            ))
            .await?
            .iter()
            .map(summary_from_row)
            .collect::<Result<_, _>>()?;
        let artifacts = self
            .fetch_all(&select(&format!(
                "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC"
            )))
            .await?
            .iter()
            .map(artifact_from_row)
            .collect::<Result<_, _>>()?;
        let jobs = self
            .fetch_all(&select(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC"
            )))
            .await?
            .iter()
            .map(job_from_row)
            .collect::<Result<_, _>>()?;
        let request_keys = self
            .fetch_all(&select(
                "SELECT request_key FROM idempotency WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, request_key ASC",
            ))
            .await?
            .iter()
            .map(|row| row.try_get::<String, _>(0).map_err(backend_error))
            .collect::<Result<_, _>>()?;
        let erasures = self
            .fetch_all(&select(
                "SELECT id, tenant_id, user_id, actor, at, counts FROM erasures \
                 WHERE tenant_id = ? AND user_id = ? ORDER BY at ASC, id ASC",
            ))
            .await?
            .iter()
            .map(erasure_from_row)
            .collect::<Result<_, _>>()?;
        Ok(OwnerRecords {
            memories,
            changes,
            candidates,
            plan,
            sessions,
            messages,
            summaries,
            artifacts,
            jobs,
            request_keys,
            erasures,
        })
    }

    async fn erase_owner(&self, owner: &Owner, erasure: ErasureRecord) -> Result<ErasureCounts, StoreError> {
        let _guard = self.lock_writes().await;
        let mut tx = self.begin().await?;
        let result: Result<ErasureCounts, StoreError> = async {
            let mut artifacts = Query::new("SELECT COUNT(*) FROM artifacts WHERE tenant_id = ? AND user_id = ?");
            artifacts.owner(owner);
            let left = self
                .tx_fetch_optional(&mut tx, &artifacts)
                .await?
                .map(|row| row.try_get::<i64, _>(0).map_err(backend_error))
                .transpose()?
                .unwrap_or(0);
            if left > 0 {
                return Err(StoreError::Conflict(format!(
                    "user {:?} of tenant {:?} still has {left} artifacts: the artifact service removes them and their blobs first",
                    owner.user_id, owner.tenant_id
                )));
            }
            let mut counts = erasure.counts;
            for (table, count) in [
                ("memories", &mut counts.memories),
                ("memory_changes", &mut counts.changes),
                ("candidates", &mut counts.candidates),
                ("idempotency", &mut counts.idempotency),
                ("user_plans", &mut counts.plans),
                ("session_messages", &mut counts.session_messages),
                ("sessions", &mut counts.sessions),
                ("session_summaries", &mut counts.summaries),
                ("jobs", &mut counts.jobs),
            ] {
                let mut q = Query::new(&format!("DELETE FROM {table} WHERE tenant_id = ? AND user_id = ?"));
                q.owner(owner);
                *count += self.tx_execute(&mut tx, &q).await?;
            }
            // Nothing removed anywhere (a repeated erasure): nothing to record.
            if counts.total() > 0 {
                let mut q = Query::new(
                    "INSERT INTO erasures (id, tenant_id, user_id, actor, at, counts) VALUES (?, ?, ?, ?, ?, ?)",
                );
                q.text(erasure.id.clone())
                    .owner(owner)
                    .text(erasure.actor.clone())
                    .int(ms(erasure.at))
                    .text(json(&counts));
                self.tx_execute(&mut tx, &q).await?;
            }
            Ok(counts)
        }
        .await;
        match result {
            Ok(counts) => {
                self.commit(tx).await?;
                Ok(counts)
            }
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        }
    }
}

/// The columns a memory listing is ordered by, without `ORDER BY`.
fn order_of(order: MemoryOrder) -> &'static str {
    match order {
        MemoryOrder::Newest => " occurred_at DESC, id DESC",
        MemoryOrder::Oldest => " occurred_at ASC, id ASC",
        MemoryOrder::LeastValuable => " importance ASC, access_count ASC, created_at ASC, id ASC",
    }
}

/// A memory listing's `SELECT`: its conditions, order and page.
fn push_listing(q: &mut Query, query: &MemoryQuery) {
    q.push(&format!("SELECT {MEMORY_COLUMNS} FROM memories"));
    memory_where(q, query);
    q.push(" ORDER BY").push(order_of(query.order));
    if query.limit > 0 {
        q.push(" LIMIT ? OFFSET ?")
            .int(query.limit as i64)
            .int(query.offset as i64);
    }
}
