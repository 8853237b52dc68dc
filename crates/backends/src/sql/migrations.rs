//! The schema's migrations, compiled into the binary from `migrations/sqlite/` and
//! `migrations/postgres/`.
//!
//! They are listed here with `include_str!` instead of read by sqlx's `migrate!` macro: that
//! macro made every build compile sqlx and both of its database drivers a second time, for the
//! compiler (issue 21). Each script keeps the version, description and checksum the macro gave
//! it, so databases migrated by earlier releases open unchanged; a test compares this list with
//! the folders as sqlx reads them.

use std::borrow::Cow;

use futures::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

use super::StoreError;
use super::store::{Backend, SqlStore, again_while_busy};

/// One migration: its version and name (the file's name is `<version>_<name>.sql` in both
/// folders) and the SQL of each backend.
struct Script {
    version: i64,
    name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
}

macro_rules! script {
    ($version:literal, $name:literal) => {
        Script {
            version: $version,
            name: $name,
            sqlite: include_str!(concat!(
                "../../migrations/sqlite/",
                stringify!($version),
                "_",
                $name,
                ".sql"
            )),
            postgres: include_str!(concat!(
                "../../migrations/postgres/",
                stringify!($version),
                "_",
                $name,
                ".sql"
            )),
        }
    };
}

/// Every migration, oldest first. A new one is a file in each folder and a line here.
const SCRIPTS: &[Script] = &[
    script!(20261122000001, "initial"),
    script!(20261125000001, "tenancy"),
    script!(20261126000001, "job_results"),
    script!(20261126000002, "job_order"),
    script!(20261127000001, "erasures"),
];

/// The migrations of `backend` up to `upto` (all when `None`), as sqlx's migrator takes them.
fn listed(backend: Backend, upto: Option<i64>) -> Vec<Migration> {
    SCRIPTS
        .iter()
        .filter(|script| upto.is_none_or(|version| script.version <= version))
        .map(|script| {
            let sql = match backend {
                Backend::Sqlite => script.sqlite,
                Backend::Postgres => script.postgres,
            };
            Migration::new(
                script.version,
                Cow::Owned(script.name.replace('_', " ")),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                sql.starts_with("-- no-transaction"),
            )
        })
        .collect()
}

/// A list of migrations as a source for [`Migrator::new`].
#[derive(Debug)]
struct Listed(Vec<Migration>);

impl<'s> MigrationSource<'s> for Listed {
    fn resolve(self) -> BoxFuture<'s, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move { Ok(self.0) })
    }
}

/// The migrator of `backend`'s schema, up to version `upto` (the latest when `None`).
async fn migrator(backend: Backend, upto: Option<i64>) -> Result<Migrator, StoreError> {
    Migrator::new(Listed(listed(backend, upto)))
        .await
        .map_err(|err| StoreError::Backend(format!("migrations: {err}")))
}

impl SqlStore {
    /// Applies every migration not yet applied.
    pub(super) async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = migrator(self.backend, None).await?;
        // PostgreSQL serialises concurrent migrators with an advisory lock; SQLite has none, so
        // when several processes open a fresh database at once, the losers of the race see a
        // rolled-back attempt and retry: by then the winner's migrations are recorded.
        again_while_busy(self.backend == Backend::Sqlite, || migrator.run(&self.pool))
            .await
            .map_err(|err| StoreError::Backend(format!("migrations failed: {err}")))
    }

    /// Applies the migrations up to `version` only: a database as an older release left it.
    #[cfg(any(test, feature = "testing"))]
    pub(super) async fn migrate_to(&self, version: i64) -> Result<(), StoreError> {
        migrator(self.backend, Some(version))
            .await?
            .run(&self.pool)
            .await
            .map_err(|err| StoreError::Backend(format!("migrations failed: {err}")))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// What sqlx's own reading of a folder gives (the same as the `migrate!` macro did).
    async fn from_folder(folder: &str) -> Vec<(i64, String, Vec<u8>, bool)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(folder);
        let migrator = Migrator::new(path.as_path())
            .await
            .expect("the migrations folder reads");
        migrator
            .iter()
            .map(|m| (m.version, m.description.to_string(), m.checksum.to_vec(), m.no_tx))
            .collect()
    }

    fn from_list(backend: Backend) -> Vec<(i64, String, Vec<u8>, bool)> {
        listed(backend, None)
            .iter()
            .map(|m| (m.version, m.description.to_string(), m.checksum.to_vec(), m.no_tx))
            .collect()
    }

    #[tokio::test]
    async fn the_compiled_migrations_are_the_folders_as_sqlx_reads_them() {
        for (backend, folder) in [(Backend::Sqlite, "sqlite"), (Backend::Postgres, "postgres")] {
            let expected = from_folder(folder).await;
            assert!(!expected.is_empty(), "{folder} has migrations");
            assert_eq!(
                from_list(backend),
                expected,
                "a file of migrations/{folder} is missing from SCRIPTS, or SCRIPTS lists one it lacks"
            );
        }
    }

    #[test]
    fn a_version_bound_keeps_the_older_migrations_only() {
        let older = listed(Backend::Sqlite, Some(20261126000001));
        let versions: Vec<i64> = older.iter().map(|m| m.version).collect();
        assert_eq!(versions, [20261122000001, 20261125000001, 20261126000001]);
        assert_eq!(listed(Backend::Postgres, None).len(), SCRIPTS.len());
    }
}
