//! [`RetentionStore`] on SQL: purging what the retention settings let go.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::query::{Query, ms};
use super::store::SqlStore;
use super::{RetentionStore, StoreError};

#[async_trait]
impl RetentionStore for SqlStore {
    async fn purge_idempotency(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut q = Query::new("DELETE FROM idempotency WHERE created_at < ?");
        q.int(ms(before));
        self.execute(&q).await
    }

    async fn purge_session_messages(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        // A message without a session row, or past the summary's end, is never purged (the
        // comparison with NULL or a larger index is not true).
        let mut q = Query::new(
            "DELETE FROM session_messages WHERE created_at < ? AND idx <= ( \
               SELECT s.summarized_until FROM sessions s WHERE s.tenant_id = session_messages.tenant_id \
               AND s.user_id = session_messages.user_id AND s.session_id = session_messages.session_id)",
        );
        q.int(ms(before));
        self.execute(&q).await
    }

    async fn purge_job_payloads(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET payload = '' WHERE status IN ('succeeded', 'failed') AND updated_at < ? AND payload <> ''",
        );
        q.int(ms(before));
        self.execute(&q).await
    }
}
