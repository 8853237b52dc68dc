//! The cross-service test binary: the conformance suites of every backend against every
//! implementation, and the end-to-end scenarios. One binary keeps link time down.

/// Stamps each named scenario `async fn name(backend: knowledge::Backend)` of the module into two
/// tests, `sqlite::name` and `postgres::name` (the latter skipped loudly without PostgreSQL).
/// Defined before the modules so that every one of them can use it.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(crate::knowledge::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(crate::knowledge::Backend::Postgres).await;
                }
            )*
        }
    };
}

mod artifact;
mod browser;
mod capacity;
mod conflicts;
mod conformance;
mod crash;
mod data_rights;
mod dedup_calibration;
mod degraded;
mod durability;
mod embed_once;
mod foundation;
mod fuzz;
mod gateway;
mod hardening;
mod knowledge;
mod learned;
mod learned_extract;
mod llm_learning;
mod markdown;
mod memory_cli;
mod memory_page;
mod nodes;
mod rebuild_index;
mod replicas;
mod rest_routes;
mod summary;
mod support;
mod tenancy;
mod tls;
mod tracing;
mod upkeep;
mod visibility;
mod write_chain;
