//! [`ArtifactStore`] on SQL: artifact records (their blobs are the blob store's).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_common::model::Owner;

use super::query::{ARTIFACT_COLUMNS, Arg, Query, ms};
use super::rows::artifact_from_row;
use super::store::SqlStore;
use super::{ArtifactRecord, ArtifactStore, StoreError};

#[async_trait]
impl ArtifactStore for SqlStore {
    async fn insert_artifact(&self, a: &ArtifactRecord) -> Result<(), StoreError> {
        let mut q = Query::new(&format!(
            "INSERT INTO artifacts ({ARTIFACT_COLUMNS}) VALUES ({})",
            vec!["?"; 20].join(", ")
        ));
        q.text(a.id.clone())
            .text(a.tenant_id.clone())
            .text(a.user_id.clone())
            .arg(Arg::OptText(a.role_id.clone()))
            .arg(Arg::OptText(a.project_id.clone()))
            .text(a.session_id.clone())
            .arg(Arg::OptText(a.tool_call_id.clone()))
            .arg(Arg::OptText(a.tool_name.clone()))
            .text(a.mime_type.clone())
            .int(a.size_bytes as i64)
            .text(a.sha256.clone())
            .text(a.blob_key.clone())
            .arg(Arg::OptText(a.path.clone()))
            .int(a.line_count as i64)
            .text(a.kind.clone())
            .text(a.language.clone())
            .text(a.compact.clone())
            .text(a.metadata.clone())
            .int(ms(a.created_at))
            .arg(Arg::OptInt(a.expires_at.map(ms)));
        self.execute(&q).await?;
        Ok(())
    }

    async fn get_artifact(&self, owner: &Owner, id: &str) -> Result<Option<ArtifactRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ? AND id = ?"
        ));
        q.owner(owner).text(id);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(artifact_from_row)
            .transpose()
    }

    async fn find_artifact(
        &self,
        owner: &Owner,
        session_id: &str,
        sha256: &str,
    ) -> Result<Option<ArtifactRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ? AND session_id = ? AND sha256 = ? \
             ORDER BY created_at ASC LIMIT 1"
        ));
        q.owner(owner).text(session_id).text(sha256);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(artifact_from_row)
            .transpose()
    }

    async fn list_artifacts(
        &self,
        owner: &Owner,
        session_id: Option<&str>,
        project_id: Option<&str>,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ?"
        ));
        q.owner(owner);
        if let Some(session) = session_id {
            q.push(" AND session_id = ?").text(session);
        }
        if let Some(project) = project_id {
            q.push(" AND project_id = ?").text(project);
        }
        q.push(" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
            .int(limit as i64)
            .int(offset as i64);
        self.fetch_all(&q).await?.iter().map(artifact_from_row).collect()
    }

    async fn list_artifacts_near(
        &self,
        owner: &Owner,
        session_id: &str,
        project_id: &str,
        limit: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        // UNION drops the session's rows that the project's newest hold too.
        let mut q = Query::new(&format!(
            "SELECT * FROM (SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ? \
             AND session_id = ? AND project_id = ? ORDER BY created_at DESC, id DESC LIMIT ?) AS this_session \
             UNION SELECT * FROM (SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ? \
             AND project_id = ? ORDER BY created_at DESC, id DESC LIMIT ?) AS this_project \
             ORDER BY created_at DESC, id DESC"
        ));
        q.owner(owner)
            .text(session_id)
            .text(project_id)
            .int(limit as i64)
            .owner(owner)
            .text(project_id)
            .int(limit as i64);
        self.fetch_all(&q).await?.iter().map(artifact_from_row).collect()
    }

    async fn delete_artifact(&self, owner: &Owner, id: &str) -> Result<Option<ArtifactRecord>, StoreError> {
        let Some(record) = self.get_artifact(owner, id).await? else {
            return Ok(None);
        };
        let mut q = Query::new("DELETE FROM artifacts WHERE tenant_id = ? AND user_id = ? AND id = ?");
        q.owner(owner).text(id);
        if self.execute(&q).await? == 0 {
            return Ok(None);
        }
        Ok(Some(record))
    }

    async fn count_blob_refs(&self, blob_key: &str) -> Result<u64, StoreError> {
        let mut q = Query::new("SELECT COUNT(*) FROM artifacts WHERE blob_key = ?");
        q.text(blob_key);
        self.count(&q).await
    }

    async fn expired_artifacts(
        &self,
        now: DateTime<Utc>,
        owner: Option<&Owner>,
        limit: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE expires_at IS NOT NULL AND expires_at <= ?"
        ));
        q.int(ms(now));
        if let Some(owner) = owner {
            q.push(" AND tenant_id = ? AND user_id = ?").owner(owner);
        }
        q.push(" ORDER BY expires_at ASC LIMIT ?").int(limit as i64);
        self.fetch_all(&q).await?.iter().map(artifact_from_row).collect()
    }
}
