//! [`SessionStore`] on SQL: sessions, their messages and their summaries.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use thinkus_common::model::{Message, Owner};

use super::query::{Arg, Query, json, ms};
use super::rows::{backend_error, message_from_row, session_from_columns, session_from_row, summary_from_row};
use super::store::SqlStore;
use super::{SessionKey, SessionRecord, SessionStore, StoreError, SummaryRecord};

/// The columns of a session row.
const SESSION_COLUMNS: [&str; 10] = [
    "tenant_id",
    "user_id",
    "session_id",
    "role_id",
    "project_id",
    "message_count",
    "last_message_at",
    "summarized_until",
    "ended",
    "summary_requested",
];

#[async_trait]
impl SessionStore for SqlStore {
    async fn append_messages(&self, key: &SessionKey, messages: &[Message]) -> Result<(u32, u32), StoreError> {
        if messages.is_empty() {
            return Err(StoreError::Invalid("no messages to append".into()));
        }
        let _guard = self.lock_writes().await;
        let mut tx = self.begin().await?;
        let result: Result<(u32, u32), StoreError> = async {
            let latest = messages.iter().map(|m| m.created_at).max().unwrap_or_else(Utc::now);
            let mut insert = Query::new(
                "INSERT INTO sessions (tenant_id, user_id, session_id, role_id, project_id, message_count, last_message_at, summarized_until, ended, summary_requested) \
                 VALUES (?, ?, ?, ?, ?, 0, ?, -1, 0, 0) ON CONFLICT (tenant_id, user_id, session_id) DO NOTHING",
            );
            insert
                .owner(&key.owner())
                .text(key.session_id.clone())
                .text(key.role_id.clone())
                .arg(Arg::OptText(key.project_id.clone()))
                .int(ms(latest));
            self.tx_execute(&mut tx, &insert).await?;
            let mut read = Query::new(&format!(
                "SELECT message_count FROM sessions WHERE tenant_id = ? AND user_id = ? AND session_id = ?{}",
                self.for_update()
            ));
            read.owner(&key.owner()).text(key.session_id.clone());
            let count = self
                .tx_fetch_optional(&mut tx, &read)
                .await?
                .ok_or_else(|| StoreError::Backend("the session row vanished".into()))?
                .try_get::<i64, _>(0)
                .map_err(backend_error)?;
            let first = count.max(0) as u32;
            for (i, message) in messages.iter().enumerate() {
                let mut q = Query::new(
                    "INSERT INTO session_messages (tenant_id, user_id, session_id, idx, role, speaker, content, created_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                );
                q.owner(&key.owner())
                    .text(key.session_id.clone())
                    .int(i64::from(first) + i as i64)
                    .text(message.role.clone())
                    .arg(Arg::OptText(message.speaker.clone()))
                    .text(message.content.clone())
                    .int(ms(message.created_at));
                self.tx_execute(&mut tx, &q).await?;
            }
            let total = first + messages.len() as u32;
            let mut update = Query::new(
                "UPDATE sessions SET message_count = ?, last_message_at = ?, ended = 0 WHERE tenant_id = ? AND user_id = ? AND session_id = ?",
            );
            update
                .int(i64::from(total))
                .int(ms(latest))
                .owner(&key.owner())
                .text(key.session_id.clone());
            self.tx_execute(&mut tx, &update).await?;
            Ok((first, total))
        }
        .await;
        match result {
            Ok(value) => {
                self.commit(tx).await?;
                Ok(value)
            }
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        }
    }

    async fn get_messages(
        &self,
        owner: &Owner,
        session_id: &str,
        from: u32,
        to: u32,
    ) -> Result<Vec<Message>, StoreError> {
        let mut q = Query::new(
            "SELECT idx, role, speaker, content, created_at FROM session_messages \
             WHERE tenant_id = ? AND user_id = ? AND session_id = ? AND idx >= ? AND idx <= ? ORDER BY idx ASC",
        );
        q.owner(owner).text(session_id).int(i64::from(from)).int(i64::from(to));
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| message_from_row(row, session_id))
            .collect()
    }

    async fn get_session(&self, owner: &Owner, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let mut q = Query::new("SELECT * FROM sessions WHERE tenant_id = ? AND user_id = ? AND session_id = ?");
        q.owner(owner).text(session_id);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(session_from_row)
            .transpose()
    }

    async fn flag_session(
        &self,
        owner: &Owner,
        session_id: &str,
        ended: Option<bool>,
        summary_requested: Option<bool>,
    ) -> Result<(), StoreError> {
        let mut sets = Vec::new();
        let mut q = Query::default();
        if let Some(ended) = ended {
            sets.push("ended = ?");
            q.args.push(Arg::Int(i64::from(ended)));
        }
        if let Some(requested) = summary_requested {
            sets.push("summary_requested = ?");
            q.args.push(Arg::Int(i64::from(requested)));
        }
        if sets.is_empty() {
            return Ok(());
        }
        q.sql = format!(
            "UPDATE sessions SET {} WHERE tenant_id = ? AND user_id = ? AND session_id = ?",
            sets.join(", ")
        );
        q.owner(owner).text(session_id);
        if self.execute(&q).await? == 0 {
            return Err(StoreError::NotFound(format!("session {session_id:?}")));
        }
        Ok(())
    }

    async fn sessions_to_summarize(
        &self,
        idle_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        let mut q = Query::new(
            "SELECT * FROM sessions WHERE message_count - 1 > summarized_until \
             AND (summary_requested = 1 OR ended = 1 OR last_message_at < ?) ORDER BY last_message_at ASC LIMIT ?",
        );
        q.int(ms(idle_before)).int(limit as i64);
        self.fetch_all(&q).await?.iter().map(session_from_row).collect()
    }

    async fn last_session_with_summary(
        &self,
        owner: &Owner,
        project_id: Option<&str>,
        role_id: Option<&str>,
        exclude_session: Option<&str>,
        until: DateTime<Utc>,
    ) -> Result<Option<(SessionRecord, Option<SummaryRecord>)>, StoreError> {
        // The summary's columns as they are, the session's prefixed: both tables name their
        // owner, session, role and project.
        let session: Vec<String> = SESSION_COLUMNS
            .iter()
            .map(|c| format!("s.{c} AS session_{c}"))
            .collect();
        let mut q = Query::new(&format!(
            "SELECT ss.*, {} FROM sessions s LEFT JOIN session_summaries ss \
             ON ss.tenant_id = s.tenant_id AND ss.user_id = s.user_id AND ss.session_id = s.session_id \
             WHERE s.tenant_id = ? AND s.user_id = ?",
            session.join(", ")
        ));
        q.owner(owner);
        match project_id {
            Some(project) => q.push(" AND s.project_id = ?").text(project),
            None => q.push(" AND s.project_id IS NULL"),
        };
        if let Some(role) = role_id {
            q.push(" AND s.role_id = ?").text(role);
        }
        if let Some(session) = exclude_session {
            q.push(" AND s.session_id <> ?").text(session);
        }
        q.push(" AND s.last_message_at <= ? ORDER BY s.last_message_at DESC, s.session_id DESC LIMIT 1")
            .int(ms(until));
        let Some(row) = self.fetch_optional(&q).await? else {
            return Ok(None);
        };
        let summary = match row.try_get::<Option<String>, _>("id").map_err(backend_error)? {
            Some(_) => Some(summary_from_row(&row)?),
            None => None,
        };
        Ok(Some((session_from_columns(&row, "session_")?, summary)))
    }

    async fn put_summary(&self, s: &SummaryRecord, expected_end: Option<i32>) -> Result<(), StoreError> {
        let _guard = self.lock_writes().await;
        let mut tx = self.begin().await?;
        let result: Result<(), StoreError> = async {
            if let Some(expected) = expected_end {
                let mut read = Query::new(&format!(
                    "SELECT trajectory_end FROM session_summaries WHERE tenant_id = ? AND user_id = ? AND session_id = ?{}",
                    self.for_update()
                ));
                read.owner(&s.owner()).text(s.session_id.clone());
                let current = self
                    .tx_fetch_optional(&mut tx, &read)
                    .await?
                    .map(|row| row.try_get::<i64, _>(0).map_err(backend_error))
                    .transpose()?
                    .map(|v| v as i32)
                    .unwrap_or(-1);
                if current != expected {
                    return Err(StoreError::Conflict(format!(
                        "summary of session {:?} moved from message {expected} to {current}",
                        s.session_id
                    )));
                }
            }
            let mut q = Query::new(
                "INSERT INTO session_summaries (id, tenant_id, user_id, role_id, project_id, session_id, goal, constraints, decisions, progress, artifacts, next_actions, risks, open_questions, trajectory_start, trajectory_end, language, engine, created_at, updated_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (tenant_id, user_id, session_id) DO UPDATE SET role_id = excluded.role_id, project_id = excluded.project_id, goal = excluded.goal, \
                 constraints = excluded.constraints, decisions = excluded.decisions, progress = excluded.progress, artifacts = excluded.artifacts, \
                 next_actions = excluded.next_actions, risks = excluded.risks, open_questions = excluded.open_questions, \
                 trajectory_start = excluded.trajectory_start, trajectory_end = excluded.trajectory_end, language = excluded.language, \
                 engine = excluded.engine, updated_at = excluded.updated_at",
            );
            q.text(s.id.clone())
                .text(s.tenant_id.clone())
                .text(s.user_id.clone())
                .text(s.role_id.clone())
                .arg(Arg::OptText(s.project_id.clone()))
                .text(s.session_id.clone())
                .text(s.goal.clone())
                .text(json(&s.constraints))
                .text(json(&s.decisions))
                .text(json(&s.progress))
                .text(json(&s.artifacts))
                .text(json(&s.next_actions))
                .text(json(&s.risks))
                .text(json(&s.open_questions))
                .int(i64::from(s.trajectory_start))
                .int(i64::from(s.trajectory_end))
                .text(s.language.clone())
                .text(s.engine.clone())
                .int(ms(s.created_at))
                .int(ms(s.updated_at));
            self.tx_execute(&mut tx, &q).await?;
            let mut session = Query::new(
                "UPDATE sessions SET summarized_until = ?, summary_requested = 0 \
                 WHERE tenant_id = ? AND user_id = ? AND session_id = ? AND summarized_until < ?",
            );
            session
                .int(i64::from(s.trajectory_end))
                .owner(&s.owner())
                .text(s.session_id.clone())
                .int(i64::from(s.trajectory_end));
            self.tx_execute(&mut tx, &session).await?;
            Ok(())
        }
        .await;
        match result {
            Ok(()) => self.commit(tx).await,
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        }
    }

    async fn get_summary(&self, owner: &Owner, session_id: &str) -> Result<Option<SummaryRecord>, StoreError> {
        let mut q =
            Query::new("SELECT * FROM session_summaries WHERE tenant_id = ? AND user_id = ? AND session_id = ?");
        q.owner(owner).text(session_id);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(summary_from_row)
            .transpose()
    }

    async fn list_summaries(
        &self,
        owner: &Owner,
        project_id: Option<&str>,
        exclude_role: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SummaryRecord>, StoreError> {
        let mut q = Query::new("SELECT * FROM session_summaries WHERE tenant_id = ? AND user_id = ?");
        q.owner(owner);
        if let Some(project) = project_id {
            q.push(" AND project_id = ?").text(project);
        }
        if let Some(role) = exclude_role {
            q.push(" AND role_id <> ?").text(role);
        }
        q.push(" ORDER BY updated_at DESC, id DESC LIMIT ?").int(limit as i64);
        self.fetch_all(&q).await?.iter().map(summary_from_row).collect()
    }
}
