//! Two knowledge-manager replicas writing for the same user at once (issue 17): each replica is
//! a node of its own with its own connection pool to the database, and both use one vector
//! index (what a Qdrant server is to real replicas). The replicas receive, at the same moment,
//! the same fact in two wordings and two values of one subject, round after round. The user's
//! critical section is held in the database (a PostgreSQL advisory lock), so the result is the
//! one a single replica gives: one memory per fact (the second wording reinforces it) and one
//! value of the subject active, the other replaced by it. On SQLite (single-process) the two
//! replicas share the process's store, whose in-process lock is the section.

use std::sync::Arc;

use thinkus_backends::sql::SqlStore;
use thinkus_proto::common::{MemoryStatus, MemoryType, Scope};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{MemoryDraft, RememberRequest, WriteOutcome};
use thinkus_server::ServiceKind;
use tonic::transport::Channel;

use crate::knowledge::{Backend, Node, all_memories};
use crate::{nodes, support};

const ROUNDS: usize = 12;
const USER: &str = "replicated";

fn scope(round: usize) -> Scope {
    Scope {
        user_id: USER.into(),
        role_id: "cto".into(),
        project_id: format!("shop-{round}"),
        ..Default::default()
    }
}

async fn remember(
    mut client: KnowledgeManagerServiceClient<Channel>,
    scope: Scope,
    content: String,
    start: Arc<tokio::sync::Barrier>,
) -> thinkus_proto::knowledge::WriteResult {
    let request = RememberRequest {
        scope: Some(scope),
        memory: Some(MemoryDraft {
            r#type: MemoryType::ProjectDecision as i32,
            content: content.clone(),
            importance: 4,
            ..Default::default()
        }),
        ..Default::default()
    };
    start.wait().await;
    client
        .remember(request)
        .await
        .unwrap_or_else(|err| panic!("remember {content:?}: {err}"))
        .into_inner()
        .result
        .expect("a write result")
}

/// Starts the two replicas: knowledge-manager nodes over their own pools (PostgreSQL) or the
/// process's one store (SQLite), sharing the vector index and the embedder.
async fn replicas(backend: Backend) -> Option<(Node, Node)> {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    if let Backend::Postgres = backend {
        let admin = support::server_from_env("TEST_DATABASE_URL", "knowledge-manager replicas on PostgreSQL")?;
        config.storage.database = Some(support::fresh_postgres_database(&admin).await);
    }
    let services = [ServiceKind::KnowledgeManager];
    let first = thinkus_server::node::open_backends(&config, &services.iter().copied().collect())
        .await
        .expect("open the backends");
    let mut second = first.clone();
    if let Backend::Postgres = backend {
        let url = config.storage.database.clone().unwrap();
        second.store = Some(Arc::new(
            SqlStore::connect(&url, config.storage.database_max_connections.unwrap_or(10))
                .await
                .expect("a second pool"),
        ));
    }
    let a = nodes::start(config.clone(), &services, Some(first)).await;
    let b = nodes::start(config, &services, Some(second)).await;
    let node = |handle, channel, dir| Node {
        handle,
        channel,
        _dir: dir,
    };
    let (channel_a, channel_b) = (nodes::channel(&a).await, nodes::channel(&b).await);
    Some((
        node(a, channel_a, dir),
        node(b, channel_b, tempfile::tempdir().unwrap()),
    ))
}

async fn near_duplicates_and_contradictions_across_replicas(backend: Backend) {
    let Some((a, b)) = replicas(backend).await else {
        return;
    };
    let mut reinforced = 0;
    // Values that replaced the other at once (the rest were written already replaced, when
    // the later-said value committed first).
    let mut replaced = 0;
    let mut duplicated = Vec::new();
    let mut unresolved = Vec::new();
    for round in 0..ROUNDS {
        let start = Arc::new(tokio::sync::Barrier::new(4));
        let writes = [
            (
                a.km(),
                format!("We deploy the storefront {round} on Fridays after the review"),
            ),
            (
                b.km(),
                format!("we deploy the storefront {round} on Fridays after the review."),
            ),
            (a.km(), format!("The launch budget of shop {round} is $500")),
            (b.km(), format!("The launch budget of shop {round} is $800")),
        ];
        let tasks: Vec<_> = writes
            .into_iter()
            .map(|(client, content)| tokio::spawn(remember(client, scope(round), content, start.clone())))
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.expect("the write task"));
        }
        reinforced += results
            .iter()
            .filter(|r| r.outcome == WriteOutcome::Reinforced as i32)
            .count();
        replaced += results
            .iter()
            .filter(|r| r.outcome == WriteOutcome::ReplacedOlder as i32)
            .count();

        let memories = all_memories(&a, &scope(round)).await;
        let active = |needle: &str| {
            memories
                .iter()
                .filter(|m| m.status == MemoryStatus::Active as i32 && m.content.contains(needle))
                .count()
        };
        if active("storefront") != 1 {
            duplicated.push((round, active("storefront")));
        }
        let budgets: Vec<_> = memories.iter().filter(|m| m.content.contains("budget")).collect();
        let winners: Vec<_> = budgets
            .iter()
            .filter(|m| m.status == MemoryStatus::Active as i32)
            .collect();
        let resolved = budgets.len() == 2
            && winners.len() == 1
            && budgets
                .iter()
                .any(|m| m.status == MemoryStatus::Replaced as i32 && m.superseded_by == winners[0].id);
        if !resolved {
            unresolved.push((
                round,
                budgets
                    .iter()
                    .map(|m| format!("{} {:?} superseded_by {:?}", m.content, m.status, m.superseded_by))
                    .collect::<Vec<_>>(),
            ));
        }
    }
    support::loud(&format!(
        "replicas ({backend:?}): {ROUNDS} rounds of 4 concurrent writes over two knowledge managers: \
         {} facts stored twice, {} contradictions unresolved; {reinforced} reinforced, {replaced} replaced",
        duplicated.len(),
        unresolved.len()
    ));
    assert!(
        duplicated.is_empty(),
        "a fact written at once through two replicas is one memory (rounds, active copies): {duplicated:?}"
    );
    assert!(
        unresolved.is_empty(),
        "two values of a subject written at once through two replicas: one active, the other replaced by it: {unresolved:?}"
    );
    assert_eq!(reinforced, ROUNDS, "one wording of each fact reinforced the other");
    // The second replica's node shares the first one's folder: it stops first.
    b.stop().await;
    a.stop().await;
}

on_both_backends!(near_duplicates_and_contradictions_across_replicas);
