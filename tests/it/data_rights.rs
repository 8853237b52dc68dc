//! Data rights (issue 17) over gRPC on SQLite and PostgreSQL: deleting a memory removes its
//! content from its history too (the records of who changed what, when and why stay).

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

on_both_backends!(deleting_a_memory_scrubs_its_history);
