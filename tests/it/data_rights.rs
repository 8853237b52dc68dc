//! Data rights (issue 17) over gRPC on SQLite and PostgreSQL: deleting a memory removes its
//! content from its history too (the records of who changed what, when and why stay); a node
//! runs the retention sweep on its schedule, and says NOT_SERVING while a backend is lost.

use chrono::{Duration, Utc};
use thinkus_backends::sql::{IdempotencyRecord, MemoryStore, WriteBatch};
use thinkus_common::model::{DEFAULT_TENANT, Owner};
use thinkus_proto::common::{MemoryType, Scope};
use thinkus_proto::knowledge::{
    ChangeKind, CorrectMemoryRequest, CorrectionAction, DeleteMemoryRequest, GetMemoryHistoryRequest, GetMemoryRequest,
    MemoryDraft, RememberRequest, WriteOutcome,
};
use tonic::Code;

use crate::knowledge::{Backend, Node, start};

fn scope(user: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: "cto".into(),
        project_id: "shop".into(),
        ..Default::default()
    }
}

async fn history(node: &Node, scope: &Scope, memory_id: &str) -> Vec<thinkus_proto::knowledge::MemoryChange> {
    node.km()
        .get_memory_history(GetMemoryHistoryRequest {
            scope: Some(scope.clone()),
            memory_id: memory_id.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .changes
}

async fn deleting_a_memory_scrubs_its_history(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("rights-scrub");
    let secret = "The acquisition budget for Lumen Labs is 4.2 million dollars";
    let written = node
        .km()
        .remember(RememberRequest {
            scope: Some(me.clone()),
            memory: Some(MemoryDraft {
                r#type: MemoryType::ProjectDecision as i32,
                content: secret.into(),
                importance: 4,
                ..Default::default()
            }),
            skip_dedup: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert_eq!(written.outcome, WriteOutcome::Created as i32, "{written:?}");
    let id = written.memory.unwrap().id;
    // Another memory of the same user, whose history must keep its content.
    let other = node
        .km()
        .remember(RememberRequest {
            scope: Some(me.clone()),
            memory: Some(MemoryDraft {
                r#type: MemoryType::ProjectDecision as i32,
                content: "The shop launches on the first of March".into(),
                importance: 4,
                ..Default::default()
            }),
            skip_dedup: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap()
        .memory
        .unwrap()
        .id;
    node.km()
        .correct_memory(CorrectMemoryRequest {
            scope: Some(me.clone()),
            memory_id: id.clone(),
            action: CorrectionAction::SetImportance as i32,
            importance: 5,
            evidence: "it decides the quarter".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let before = history(&node, &me, &id).await;
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(
        before.iter().any(|c| c.after_json.contains("Lumen Labs")),
        "a live memory's history holds its content: {before:?}"
    );

    node.km()
        .delete_memory(DeleteMemoryRequest {
            scope: Some(me.clone()),
            memory_id: id.clone(),
            reason: "no longer relevant".into(),
        })
        .await
        .unwrap();
    let err = node
        .km()
        .get_memory(GetMemoryRequest {
            scope: Some(me.clone()),
            memory_id: id.clone(),
        })
        .await
        .expect_err("deleted");
    assert_eq!(err.code(), Code::NotFound);

    let after = history(&node, &me, &id).await;
    assert_eq!(
        after.iter().map(|c| c.kind).collect::<Vec<_>>(),
        vec![
            ChangeKind::Create as i32,
            ChangeKind::Correction as i32,
            ChangeKind::Delete as i32
        ],
        "the records stay"
    );
    assert_eq!(after[2].reason, "no longer relevant");
    for change in &after {
        assert!(
            change.before_json.is_empty() && change.after_json.is_empty(),
            "content left in the history of a deleted memory: {change:?}"
        );
        assert!(!format!("{change:?}").contains("Lumen"), "{change:?}");
    }
    assert!(
        history(&node, &me, &other)
            .await
            .iter()
            .any(|c| c.after_json.contains("first of March")),
        "other memories keep their history"
    );
    node.stop().await;
}

/// A node sweeps on `storage.retention.sweep_interval_secs`: an idempotency record older than
/// `idempotency_days` goes, a recent one (a Remember's) stays and still answers its retry.
async fn the_node_sweeps_old_records(backend: Backend) {
    let Some(node) = start(backend, |config| {
        config.storage.retention.idempotency_days = 1;
        config.storage.retention.sweep_interval_secs = 1;
    })
    .await
    else {
        return;
    };
    let store = node.handle.backends.store.clone().expect("the node opens the database");
    let me = scope("rights-retention");
    let owner = Owner::new(DEFAULT_TENANT, "rights-retention");
    store
        .commit(WriteBatch {
            idempotency: Some(IdempotencyRecord {
                tenant_id: owner.tenant_id.clone(),
                user_id: owner.user_id.clone(),
                key: "remember:two-days-ago".into(),
                response: "{}".into(),
                created_at: Utc::now() - Duration::days(2),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let remember = || RememberRequest {
        scope: Some(me.clone()),
        memory: Some(MemoryDraft {
            r#type: MemoryType::ProjectDecision as i32,
            content: "We ship the beta to ten customers first".into(),
            importance: 4,
            ..Default::default()
        }),
        request_id: "today".into(),
        skip_dedup: true,
        ..Default::default()
    };
    let first = node
        .km()
        .remember(remember())
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    let mut swept = false;
    for _ in 0..100 {
        if store
            .get_idempotent(&owner, "remember:two-days-ago")
            .await
            .unwrap()
            .is_none()
        {
            swept = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(swept, "the old idempotency record is still there after 10 s");
    let retried = node
        .km()
        .remember(remember())
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert_eq!(
        retried.memory.map(|m| m.id),
        first.memory.map(|m| m.id),
        "a recent request id still answers its retry"
    );
    node.stop().await;
}

macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Postgres).await;
                }
            )*
        }
    };
}

on_both_backends!(deleting_a_memory_scrubs_its_history, the_node_sweeps_old_records);

/// Whether the node's health says `want` for the whole server ("") and the knowledge manager
/// within 15 s.
async fn health_becomes(node: &Node, want: tonic_health::pb::health_check_response::ServingStatus) -> bool {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let mut health = HealthClient::new(node.channel.clone());
    for _ in 0..150 {
        let mut all = true;
        for service in ["", "thinkus.knowledge.v1.KnowledgeManagerService"] {
            let status = health
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .unwrap()
                .into_inner()
                .status;
            all &= status == want as i32;
        }
        if all {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

/// A node reports NOT_SERVING (gRPC health) while a backend does not answer, here its artifact
/// folder (replaced by a file), and SERVING again once it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_backend_is_not_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;

    let Some(node) = start(Backend::Sqlite, |_| {}).await else {
        return;
    };
    let folder = node.data_dir().join("artifacts");
    assert!(health_becomes(&node, ServingStatus::Serving).await, "serving at start");
    std::fs::remove_dir_all(&folder).unwrap();
    std::fs::write(&folder, b"not a folder").unwrap();
    assert!(
        health_becomes(&node, ServingStatus::NotServing).await,
        "NOT_SERVING within 15 s of losing the artifact folder"
    );
    std::fs::remove_file(&folder).unwrap();
    assert!(
        health_becomes(&node, ServingStatus::Serving).await,
        "SERVING again once the folder can be written"
    );
    node.stop().await;
}
