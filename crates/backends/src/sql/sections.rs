//! [`OwnerSections`](super::OwnerSections) on SQL: one writer of an owner at a time, in this
//! process (striped locks) and across processes (PostgreSQL advisory transaction locks).

use async_trait::async_trait;
use thinkus_common::model::Owner;

use super::StoreError;
use super::query::{Query, arguments};
use super::rows::backend_error;
use super::store::{Backend, OWNER_LOCK_CLASS, OWNER_STRIPES, SqlStore, owner_lock_key};

#[async_trait]
impl super::OwnerSections for SqlStore {
    async fn lock_owner(&self, owner: &Owner) -> Result<super::OwnerLock, StoreError> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        owner.hash(&mut hasher);
        let stripe = self.owner_stripes[hasher.finish() as usize % OWNER_STRIPES].clone();
        // In-process first: this process's writers of one owner wait here, not on connections.
        let mut held: Vec<Box<dyn Send>> = vec![Box::new(stripe.lock_owned().await)];
        if self.backend == Backend::Postgres {
            let seat = self
                .owner_seats
                .clone()
                .acquire_owned()
                .await
                .map_err(|err| StoreError::Unavailable(err.to_string()))?;
            let mut tx = self.begin().await?;
            self.tx_execute(&mut tx, &Query::new("SET LOCAL lock_timeout = '30s'"))
                .await?;
            // The owner's key: a hash PostgreSQL computes, the same in every process. The lock
            // function returns `void`, which the `Any` driver cannot read: select a 1 beside it.
            let mut lock =
                Query::new("SELECT 1 FROM (SELECT pg_advisory_xact_lock(CAST(? AS INTEGER), hashtext(?))) AS locked");
            lock.int(OWNER_LOCK_CLASS).text(owner_lock_key(owner));
            super::watch::note(&lock.sql);
            let sql = self.sql(&lock.sql);
            let args = arguments(&lock.args)?;
            sqlx::query_with(&sql, args)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|err| match err {
                    sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03") => StoreError::Unavailable(
                        format!("the write lock of user {:?} was held for more than 30 s", owner.user_id),
                    ),
                    other => backend_error(other),
                })?;
            // Dropped in this order: the transaction (its rollback releases the lock), then the seat.
            held.push(Box::new(seat));
            held.push(Box::new(tx));
            held.reverse();
        }
        Ok(super::OwnerLock::new(held))
    }

    async fn job_exists(&self, owner: &Owner, id: &str) -> Result<bool, StoreError> {
        let mut q = Query::new("SELECT COUNT(*) FROM jobs WHERE id = ? AND tenant_id = ? AND user_id = ?");
        q.text(id).owner(owner);
        Ok(self.count(&q).await? > 0)
    }

    async fn session_exists(&self, owner: &Owner, id: &str) -> Result<bool, StoreError> {
        let mut q = Query::new("SELECT COUNT(*) FROM sessions WHERE tenant_id = ? AND user_id = ? AND session_id = ?");
        q.owner(owner).text(id);
        Ok(self.count(&q).await? > 0)
    }
}
