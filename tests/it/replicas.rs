//! Two knowledge-manager replicas writing for the same user at once (issue 17).
//!
//! In one process: each replica is a node of its own with its own connection pool to the
//! database, and both use one vector index (what a Qdrant server is to real replicas). The
//! replicas receive, at the same moment, the same fact in two wordings and two values of one
//! subject, round after round. The user's critical section is held in the database (a
//! PostgreSQL advisory lock), so the result is the one a single replica gives: one memory per
//! fact (the second wording reinforces it) and one value of the subject active, the other
//! replaced by it. On SQLite (single-process) the two replicas share the process's store, whose
//! in-process lock is the section.
//!
//! In two processes (PostgreSQL): two `thinkus` processes over one database. The test first
//! holds the user's advisory lock itself and sees both processes' writes wait for it in the
//! database; then the processes receive two values of a subject at the same moment, round
//! after round.

use std::sync::Arc;
use std::time::Duration;

use thinkus_backends::sql::{OWNER_LOCK_CLASS, SqlStore, owner_lock_key};
use thinkus_common::model::{DEFAULT_TENANT, Owner};
use thinkus_proto::common::{Memory, MemoryStatus, MemoryType, Scope};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{MemoryDraft, RememberRequest, WriteOutcome};
use thinkus_server::ServiceKind;
use tonic::transport::Channel;

use crate::knowledge::{Backend, Node, all_memories, all_memories_at};
use crate::{durability, nodes, support};

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

/// The two budgets of a round, described, unless exactly one is active and the other is
/// replaced by it.
fn unresolved_budgets(memories: &[Memory]) -> Option<Vec<String>> {
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
    (!resolved).then(|| {
        budgets
            .iter()
            .map(|m| format!("{} {:?} superseded_by {:?}", m.content, m.status, m.superseded_by))
            .collect()
    })
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
        if let Some(budgets) = unresolved_budgets(&memories) {
            unresolved.push((round, budgets));
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

/// Two `thinkus` processes over one PostgreSQL database, written to for one user at once
/// (PostgreSQL only: SQLite is single-process, one replica). Each process has its own
/// qdrant-edge folder, so the near-duplicate half, which needs the vector index replicas
/// share (Qdrant), stays with the in-process test above; contradictions are found in the
/// database and run here.
///
/// First the test holds the user's advisory lock itself (the key the runbook names) and
/// writes a value through each process: both writes must wait for it in the database (two
/// waiters in `pg_locks`, neither answered) until the test lets go. A section held only in
/// each process would let both through at once. Then the two values of a subject reach the
/// two processes at the same moment, round after round: each round ends with one active and
/// the other replaced by it, as on one process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_serialise_a_users_writes_in_the_database() {
    use sqlx::Connection;
    let Some(admin) = support::server_from_env("TEST_DATABASE_URL", "knowledge-manager processes on PostgreSQL") else {
        return;
    };
    let database = support::fresh_postgres_database(&admin).await;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let (_a, a) = durability::serve(dirs[0].path(), Some(&database)).await;
    let (_b, b) = durability::serve(dirs[1].path(), Some(&database)).await;
    let km = |channel: &Channel| KnowledgeManagerServiceClient::new(channel.clone());

    // The user's lock, held here: both processes' writes wait for it in the database.
    let mut db = sqlx::PgConnection::connect(&database).await.expect("connect");
    let mut held = db.begin().await.expect("begin");
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind(OWNER_LOCK_CLASS as i32)
        .bind(owner_lock_key(&Owner::new(DEFAULT_TENANT, USER)))
        .execute(&mut *held)
        .await
        .expect("take the user's lock");
    let start = Arc::new(tokio::sync::Barrier::new(2));
    let held_scope = scope(ROUNDS);
    let writes = [
        tokio::spawn(remember(
            km(&a),
            held_scope.clone(),
            format!("The launch budget of shop {ROUNDS} is $500"),
            start.clone(),
        )),
        tokio::spawn(remember(
            km(&b),
            held_scope.clone(),
            format!("The launch budget of shop {ROUNDS} is $800"),
            start,
        )),
    ];
    let waiters = format!(
        "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = {OWNER_LOCK_CLASS} \
         AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    );
    let mut waiting = 0;
    // Well within the 30 s a section waits before it gives up.
    for _ in 0..150 {
        waiting = sqlx::query_scalar::<_, i64>(&waiters)
            .fetch_one(&mut *held)
            .await
            .expect("read pg_locks");
        if waiting == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answered = writes.iter().filter(|w| w.is_finished()).count();
    assert_eq!(
        (waiting, answered),
        (2, 0),
        "while the test holds the user's lock, both processes' writes wait for it in the database \
         (waiters in pg_locks, writes answered)"
    );
    held.commit().await.expect("let go of the user's lock");
    for write in writes {
        write.await.expect("the write task");
    }
    if let Some(budgets) = unresolved_budgets(&all_memories_at(&a, &held_scope).await) {
        panic!("two values written through two processes after the lock was let go: {budgets:?}");
    }

    let mut unresolved = Vec::new();
    for round in 0..ROUNDS {
        let start = Arc::new(tokio::sync::Barrier::new(2));
        let writes = [
            (&a, format!("The launch budget of shop {round} is $500")),
            (&b, format!("The launch budget of shop {round} is $800")),
        ]
        .map(|(channel, content)| tokio::spawn(remember(km(channel), scope(round), content, start.clone())));
        for write in writes {
            write.await.expect("the write task");
        }
        if let Some(budgets) = unresolved_budgets(&all_memories_at(&b, &scope(round)).await) {
            unresolved.push((round, budgets));
        }
    }
    support::loud(&format!(
        "replicas (two processes, PostgreSQL): both writes waited for the test's hold of the user's lock; \
         {ROUNDS} rounds of two values of a subject written at once through two processes: {} unresolved",
        unresolved.len()
    ));
    assert!(
        unresolved.is_empty(),
        "two values of a subject written at once through two processes: one active, the other replaced by it: {unresolved:?}"
    );
}
