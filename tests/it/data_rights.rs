//! Data rights (issue 17) over gRPC and REST on SQLite and PostgreSQL: deleting a memory removes
//! its content from its history too (the records of who changed what, when and why stay);
//! ExportUser gives everything a user owns as one JSON document and EraseUser removes it all
//! (rows, vector points, blobs) leaving a record without content; a node runs the retention
//! sweep on its schedule, and says NOT_SERVING while a backend is lost.

use chrono::{Duration, Utc};
use serde_json::Value;
use thinkus_backends::sql::{IdempotencyRecord, MemoryStore, WriteBatch};
use thinkus_common::config::{ApiKeyConfig, AuthMode};
use thinkus_common::model::{DEFAULT_TENANT, Owner};
use thinkus_proto::common::{Engine, MemorySource, MemoryType, Scope};
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;
use thinkus_proto::gateway::{CompleteTurnRequest, EraseUserRequest as GatewayEraseUserRequest, ToolCall};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{
    ChangeKind, CorrectMemoryRequest, CorrectionAction, DeleteMemoryRequest, ExportUserRequest,
    GetMemoryHistoryRequest, GetMemoryRequest, ListCandidatesRequest, ListMemoriesRequest, MemoryDraft,
    RememberRequest, SetPlanRequest, WriteOutcome,
};
use thinkus_proto::retriever::RecallRequest;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use thinkus_proto::summary::GenerateSummaryRequest;
use thinkus_proto::summary::summary_service_client::SummaryServiceClient;
use tonic::Code;

use crate::knowledge::{Backend, Node, start};
use crate::support;
use crate::support::{KeyInterceptor, Keyed};

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
            all_roles: false,
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
            all_roles: false,
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

on_both_backends!(
    deleting_a_memory_scrubs_its_history,
    the_node_sweeps_old_records,
    exporting_and_erasing_a_user,
    an_empty_role_reads_no_private_memory,
    an_erasure_stops_the_users_running_and_queued_jobs,
    an_erasure_drops_a_running_summary_jobs_messages,
    the_cli_exports_and_erases_a_user,
    a_lost_backend_is_not_serving,
    an_erasure_drops_a_summary_being_written
);

/// Role privacy: an empty role_id is no wildcard over the roles' private memories. GetMemory,
/// ListMemories and GetMemoryHistory answer INVALID_ARGUMENT naming scope.role_id unless the
/// caller asks for the person's view (all_roles); another role reads none of them.
async fn an_empty_role_reads_no_private_memory(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let user = "rights-roles";
    let as_role = |role: &str| Scope {
        user_id: user.into(),
        role_id: role.into(),
        project_id: "shop".into(),
        ..Default::default()
    };
    let remember = |role: &str, content: &str| {
        let scope = as_role(role);
        let content = content.to_string();
        let mut km = node.km();
        async move {
            km.remember(RememberRequest {
                scope: Some(scope),
                memory: Some(MemoryDraft {
                    r#type: MemoryType::ProjectDecision as i32,
                    content,
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
        }
    };
    let payroll = remember("cfo", "Payroll runs on the 25th through Gusto").await;
    assert_eq!(payroll.visibility, thinkus_proto::common::Visibility::Private as i32);
    let stack = remember("cto", "The storefront runs on Rust and PostgreSQL").await;
    let get = |scope: Scope, all_roles: bool, id: String| {
        let mut km = node.km();
        async move {
            km.get_memory(GetMemoryRequest {
                scope: Some(scope),
                memory_id: id,
                all_roles,
            })
            .await
            .map(|r| r.into_inner().memory.unwrap().id)
        }
    };
    let list = |scope: Scope, all_roles: bool| {
        let mut km = node.km();
        async move {
            km.list_memories(ListMemoriesRequest {
                scope: Some(scope),
                all_roles,
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner().memories.into_iter().map(|m| m.id).collect::<Vec<_>>())
        }
    };
    let history = |scope: Scope, all_roles: bool, id: String| {
        let mut km = node.km();
        async move {
            km.get_memory_history(GetMemoryHistoryRequest {
                scope: Some(scope),
                memory_id: id,
                all_roles,
            })
            .await
            .map(|r| r.into_inner().changes.len())
        }
    };

    // No role: refused, naming the field, by all three reads.
    let no_role = as_role("");
    for err in [
        get(no_role.clone(), false, payroll.id.clone())
            .await
            .expect_err("no role"),
        list(no_role.clone(), false).await.expect_err("no role"),
        history(no_role.clone(), false, payroll.id.clone())
            .await
            .expect_err("no role"),
    ] {
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().starts_with("scope.role_id"), "{}", err.message());
    }
    // Another role reads its own and what is shared, not the cfo's private memory.
    let cto = as_role("cto");
    let err = get(cto.clone(), false, payroll.id.clone())
        .await
        .expect_err("private to the cfo");
    assert_eq!(err.code(), Code::NotFound);
    let err = history(cto.clone(), false, payroll.id.clone())
        .await
        .expect_err("private to the cfo");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(list(cto.clone(), false).await.unwrap(), vec![stack.id.clone()]);
    // The owner role does.
    assert_eq!(
        get(as_role("cfo"), false, payroll.id.clone()).await.unwrap(),
        payroll.id
    );
    assert_eq!(list(as_role("cfo"), false).await.unwrap(), vec![payroll.id.clone()]);
    // The person's view, asked for explicitly, reads every role's.
    assert_eq!(
        get(no_role.clone(), true, payroll.id.clone()).await.unwrap(),
        payroll.id
    );
    assert_eq!(history(no_role.clone(), true, payroll.id.clone()).await.unwrap(), 1);
    let mut everything = list(no_role.clone(), true).await.unwrap();
    everything.sort();
    let mut both = vec![payroll.id.clone(), stack.id.clone()];
    both.sort();
    assert_eq!(everything, both);
    // It names no role.
    let err = list(cto, true).await.expect_err("a role and all_roles");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("all_roles"), "{}", err.message());
    node.stop().await;
}

/// Whether the node's health says `want` for the whole server ("") and the knowledge manager
/// within 30 s (a node that serves checks its backends every 10 s; a database connection
/// waits up to 10 s).
async fn health_becomes(node: &Node, want: tonic_health::pb::health_check_response::ServingStatus) -> bool {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let mut health = HealthClient::new(node.channel.clone());
    for _ in 0..300 {
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

/// A node reports NOT_SERVING (gRPC health) while a backend does not answer, and SERVING again
/// once it does. On SQLite the lost backend is the node's artifact folder (replaced by a file);
/// on PostgreSQL it is the database itself: the test's database refuses connections and the
/// node's are ended (the server other tests use stays up).
async fn a_lost_backend_is_not_serving(backend: Backend) {
    use sqlx::Connection;
    use tonic_health::pb::health_check_response::ServingStatus;

    let mut database = None;
    let Some(node) = start(backend, |config| database = config.storage.database.clone()).await else {
        return;
    };
    assert!(health_becomes(&node, ServingStatus::Serving).await, "serving at start");
    let folder = node.data_dir().join("artifacts");
    // On PostgreSQL: a connection to the server and the name of the node's database.
    let mut admin = None;
    match backend {
        Backend::Sqlite => {
            std::fs::remove_dir_all(&folder).unwrap();
            std::fs::write(&folder, b"not a folder").unwrap();
        }
        Backend::Postgres => {
            let url = std::env::var("TEST_DATABASE_URL").expect("the node runs on PostgreSQL");
            let name = database
                .as_deref()
                .and_then(|url| url.rsplit_once('/'))
                .map(|(_, name)| name.to_string())
                .expect("the node's database URL");
            let (connection, name) = admin.insert((sqlx::PgConnection::connect(&url).await.expect("connect"), name));
            sqlx::query(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
                .execute(&mut *connection)
                .await
                .unwrap();
            // The connections the node's pool holds end: its next check has to connect.
            sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
                .bind(&*name)
                .execute(&mut *connection)
                .await
                .unwrap();
        }
    }
    assert!(
        health_becomes(&node, ServingStatus::NotServing).await,
        "NOT_SERVING within 30 s of losing the {}",
        match backend {
            Backend::Sqlite => "artifact folder",
            Backend::Postgres => "database",
        }
    );
    match admin.as_mut() {
        None => std::fs::remove_file(&folder).unwrap(),
        Some((connection, name)) => {
            sqlx::query(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
                .execute(&mut *connection)
                .await
                .unwrap();
        }
    }
    assert!(
        health_becomes(&node, ServingStatus::Serving).await,
        "SERVING again once the backend answers"
    );
    node.stop().await;
}

const ACME_ADMIN: &str = "rights-acme-admin";
const GLOBEX_ALICE: &str = "rights-globex-alice";

fn rights_keys() -> Vec<ApiKeyConfig> {
    let key = |tenant: &str, users: &[&str], secret: &str| ApiKeyConfig {
        tenant: tenant.into(),
        users: users.iter().map(|u| u.to_string()).collect(),
        key_sha256: thinkus_common::auth::key_sha256_hex(secret),
        ..Default::default()
    };
    vec![key("acme", &["*"], ACME_ADMIN), key("globex", &["alice"], GLOBEX_ALICE)]
}

/// A user of the key's own tenant, as a role in the "shop" project.
fn own(user: &str, role: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: role.into(),
        project_id: "shop".into(),
        ..Default::default()
    }
}

fn keyed_km(node: &Node, key: &'static str) -> KnowledgeManagerServiceClient<Keyed> {
    KnowledgeManagerServiceClient::with_interceptor(node.channel.clone(), KeyInterceptor(key))
}

fn keyed_gateway(node: &Node, key: &'static str) -> GatewayServiceClient<Keyed> {
    GatewayServiceClient::with_interceptor(node.channel.clone(), KeyInterceptor(key))
}

async fn write(
    node: &Node,
    key: &'static str,
    scope: Scope,
    memory_type: MemoryType,
    content: &str,
    draft: MemoryDraft,
) -> thinkus_proto::knowledge::WriteResult {
    keyed_km(node, key)
        .remember(RememberRequest {
            scope: Some(scope),
            memory: Some(MemoryDraft {
                r#type: memory_type as i32,
                content: content.into(),
                importance: 4,
                ..draft
            }),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|err| panic!("remember {content:?}: {err}"))
        .into_inner()
        .result
        .unwrap()
}

/// One turn through the gateway, with a tool output large enough to become an artifact; waits
/// for its learn job.
async fn turn(node: &Node, key: &'static str, scope: Scope, said: &str, tool_output: &str) {
    let completed = keyed_gateway(node, key)
        .complete_turn(CompleteTurnRequest {
            scope: Some(scope),
            user_message: said.into(),
            assistant_message: "Noted, I will keep that in mind.".into(),
            tool_calls: vec![ToolCall {
                id: "call-1".into(),
                name: "quarterly_report".into(),
                output: tool_output.into(),
                ..Default::default()
            }],
            wait_for_learning: true,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|err| panic!("complete turn {said:?}: {err}"))
        .into_inner();
    assert!(
        completed.tool_calls.iter().any(|c| !c.artifact_id.is_empty()),
        "the tool output became an artifact: {completed:?}"
    );
}

/// Waits until every job of the user finished (the turn's summarize job records its messages).
async fn jobs_done(node: &Node, key: &'static str, user: &str) {
    use thinkus_proto::gateway::{JobStatus, ListJobsRequest};
    for _ in 0..300 {
        let jobs = keyed_gateway(node, key)
            .list_jobs(ListJobsRequest {
                scope: Some(own(user, "")),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .jobs;
        let busy = jobs
            .iter()
            .any(|job| job.status == JobStatus::Pending as i32 || job.status == JobStatus::Running as i32);
        if !jobs.is_empty() && !busy {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the jobs of {user} did not finish within 30 s");
}

/// ExportUser over gRPC: the streamed pieces, parsed.
async fn export(node: &Node, key: &'static str, user: &str) -> Result<Value, tonic::Status> {
    let mut stream = keyed_km(node, key)
        .export_user(ExportUserRequest {
            scope: Some(own(user, "")),
        })
        .await?
        .into_inner();
    let mut bytes = Vec::new();
    let mut pieces = 0;
    while let Some(piece) = stream.message().await? {
        pieces += 1;
        bytes.extend_from_slice(&piece.chunk);
    }
    assert!(pieces >= 1, "an export is at least one piece");
    Ok(serde_json::from_slice(&bytes).expect("the pieces are one JSON document"))
}

fn ids(document: &Value, list: &str) -> Vec<String> {
    document[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} is a list: {document}"))
        .iter()
        .map(|item| item["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Rows of an owner in a table, counted by SQL of the test's own.
async fn rows(store: &thinkus_backends::sql::SqlStore, table: &str, owner: &Owner) -> i64 {
    store
        .count_raw(&format!(
            "SELECT COUNT(*) FROM {table} WHERE tenant_id = '{}' AND user_id = '{}'",
            owner.tenant_id, owner.user_id
        ))
        .await
        .unwrap_or_else(|err| panic!("count {table}: {err}"))
}

const TABLES: [&str; 10] = [
    "memories",
    "memory_changes",
    "candidates",
    "idempotency",
    "user_plans",
    "artifacts",
    "sessions",
    "session_messages",
    "session_summaries",
    "jobs",
];

/// Everything acme's "alice" owns is exported, then erased: nothing of hers is listable,
/// recallable or left in any table, blob or vector point; a record without content says that
/// it happened; globex's "alice" (the same user id in another tenant) and acme's "bob" keep
/// everything. Erasing again answers zero counts.
async fn exporting_and_erasing_a_user(backend: Backend) {
    let port = support::free_port();
    let Some(node) = start(backend, |config| {
        config.auth.mode = AuthMode::ApiKey;
        config.auth.keys = rights_keys();
        config.gateway.rest_listen = format!("127.0.0.1:{port}");
    })
    .await
    else {
        return;
    };
    let rest = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let store = node.handle.backends.store.clone().expect("the database");
    let blobs = node.handle.backends.blobs.clone().expect("the blob store");
    let vectors = node.handle.backends.vectors.clone().expect("the vector index");
    let acme_alice = Owner::new("acme", "alice");
    let globex_alice = Owner::new("globex", "alice");
    let acme_bob = Owner::new("acme", "bob");

    // Acme's alice: memories of two roles (one under a request id), one deleted, a candidate,
    // a pending conflict, a plan, a turn (messages, an artifact, a learn job) and a summary.
    let secret = "The Lumen Labs acquisition budget is 4.2 million dollars";
    let kept = keyed_km(&node, ACME_ADMIN)
        .remember(RememberRequest {
            scope: Some(own("alice", "cto")),
            memory: Some(MemoryDraft {
                r#type: MemoryType::ProjectDecision as i32,
                content: secret.into(),
                importance: 4,
                ..Default::default()
            }),
            request_id: "rights-request-1".into(),
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
    let private = write(
        &node,
        ACME_ADMIN,
        own("alice", "cfo"),
        MemoryType::ProjectDecision,
        "Payroll for the Lumen team runs on the 25th through Gusto",
        MemoryDraft::default(),
    )
    .await
    .memory
    .unwrap()
    .id;
    let gone = write(
        &node,
        ACME_ADMIN,
        own("alice", "cto"),
        MemoryType::ProjectDecision,
        "The Lumen office moves to Harbour Street in May",
        MemoryDraft::default(),
    )
    .await
    .memory
    .unwrap()
    .id;
    keyed_km(&node, ACME_ADMIN)
        .delete_memory(DeleteMemoryRequest {
            scope: Some(own("alice", "cto")),
            memory_id: gone.clone(),
            reason: "moved already".into(),
        })
        .await
        .unwrap();
    // A preference outside any project, said without much confidence: queued.
    let queued = write(
        &node,
        ACME_ADMIN,
        Scope {
            project_id: String::new(),
            ..own("alice", "cto")
        },
        MemoryType::UserPreference,
        "I prefer dark mode for the Lumen dashboards",
        MemoryDraft {
            confidence: 0.6,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(queued.outcome, WriteOutcome::Queued as i32, "{queued:?}");
    let budget = write(
        &node,
        ACME_ADMIN,
        own("alice", "cfo"),
        MemoryType::Constraint,
        "The budget for the Lumen launch is $500",
        MemoryDraft::default(),
    )
    .await
    .memory
    .unwrap()
    .id;
    let conflict = write(
        &node,
        ACME_ADMIN,
        own("alice", "cfo"),
        MemoryType::Constraint,
        "I think the budget for the Lumen launch is $800 now",
        MemoryDraft {
            source: MemorySource::Inference as i32,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(conflict.outcome, WriteOutcome::Queued as i32, "{conflict:?}");
    keyed_km(&node, ACME_ADMIN)
        .set_plan(SetPlanRequest {
            scope: Some(own("alice", "")),
            plan: "growth".into(),
        })
        .await
        .unwrap();
    let report = "Lumen quarterly report: revenue by region and product line. ".repeat(120);
    let session = Scope {
        session_id: "rights-s1".into(),
        ..own("alice", "cto")
    };
    turn(
        &node,
        ACME_ADMIN,
        session.clone(),
        "We decided to launch the Lumen beta on the third of March.",
        &report,
    )
    .await;
    jobs_done(&node, ACME_ADMIN, "alice").await;
    SummaryServiceClient::with_interceptor(node.channel.clone(), KeyInterceptor(ACME_ADMIN))
        .generate_summary(GenerateSummaryRequest {
            scope: Some(session.clone()),
            engine: Engine::Rules as i32,
            ..Default::default()
        })
        .await
        .expect("the session is summarised");

    // The same user id in globex, and acme's bob: theirs must survive the erasure.
    let theirs = write(
        &node,
        GLOBEX_ALICE,
        own("alice", "cto"),
        MemoryType::ProjectDecision,
        "Globex ships its catalogue app in June",
        MemoryDraft::default(),
    )
    .await
    .memory
    .unwrap()
    .id;
    turn(
        &node,
        GLOBEX_ALICE,
        Scope {
            session_id: "rights-s1".into(),
            ..own("alice", "cto")
        },
        "We decided to print the catalogue on recycled paper.",
        &"Globex print run: pages, paper stock and delivery dates. ".repeat(120),
    )
    .await;
    jobs_done(&node, GLOBEX_ALICE, "alice").await;
    let bobs = write(
        &node,
        ACME_ADMIN,
        own("bob", "cto"),
        MemoryType::ProjectDecision,
        "Bob's team deploys the storefront on Fridays",
        MemoryDraft::default(),
    )
    .await
    .memory
    .unwrap()
    .id;

    // ExportUser: everything of acme's alice, nothing of anyone else.
    let document = export(&node, ACME_ADMIN, "alice").await.unwrap();
    assert_eq!(document["format"], "thinkus.user-export");
    assert_eq!(document["version"], 1);
    assert_eq!(document["tenant_id"], "acme");
    assert_eq!(document["user_id"], "alice");
    assert_eq!(document["plan"], "growth");
    let memories = ids(&document, "memories");
    for id in [&kept, &private, &budget] {
        assert!(memories.contains(id), "{id} exported: {memories:?}");
    }
    assert!(!memories.contains(&gone), "a deleted memory is not exported as one");
    let first = &document["memories"].as_array().unwrap()[memories.iter().position(|id| id == &kept).unwrap()];
    assert_eq!(first["content"], secret);
    assert_eq!(first["history"][0]["kind"], "create", "{first}");
    assert_eq!(first["history"][0]["after"]["content"], secret, "{first}");
    let deleted = document["deleted_memories"].as_array().unwrap();
    let deleted_history = deleted
        .iter()
        .find(|d| d["memory_id"] == gone.as_str())
        .unwrap_or_else(|| panic!("the deleted memory's history is exported: {deleted:?}"));
    assert!(
        !deleted_history.to_string().contains("Harbour"),
        "a deleted memory's history keeps no content: {deleted_history}"
    );
    let candidates = ids(&document, "candidates");
    assert!(candidates.contains(&queued.candidate_id), "{candidates:?}");
    assert!(candidates.contains(&conflict.candidate_id), "{candidates:?}");
    let conflicts = document["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert_eq!(conflicts[0]["candidate_id"], conflict.candidate_id.as_str());
    assert_eq!(conflicts[0]["current_memory_ids"][0], budget.as_str());
    let sessions = document["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(
        sessions[0]["messages"].to_string().contains("launch the Lumen beta"),
        "{sessions:?}"
    );
    assert_eq!(document["summaries"].as_array().unwrap().len(), 1, "{document}");
    let artifacts = document["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    assert_eq!(artifacts[0]["tool_call_id"], "call-1");
    assert!(
        document["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|job| job["kind"] == "learn"),
        "{}",
        document["jobs"]
    );
    assert!(
        document["request_ids"].to_string().contains("rights-request-1"),
        "{}",
        document["request_ids"]
    );
    let text = document.to_string();
    for foreign in ["Globex", "catalogue", "storefront", theirs.as_str(), bobs.as_str()] {
        assert!(!text.contains(foreign), "acme's alice's export holds {foreign:?}");
    }
    // Over REST, the same document.
    let response = http
        .get(format!("{rest}/api/user/export?userId=alice"))
        .bearer_auth(ACME_ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let over_rest: Value = response.json().await.unwrap();
    assert_eq!(ids(&over_rest, "memories"), memories);
    assert_eq!(ids(&over_rest, "candidates"), candidates);

    // Globex's alice sees hers only; naming acme is refused; an unknown user has nothing.
    let hers = export(&node, GLOBEX_ALICE, "alice").await.unwrap();
    assert_eq!(hers["tenant_id"], "globex");
    assert_eq!(ids(&hers, "memories").first(), Some(&theirs));
    assert!(
        !hers.to_string().contains("Lumen"),
        "globex's alice sees acme's data: {hers}"
    );
    let err = keyed_km(&node, GLOBEX_ALICE)
        .export_user(ExportUserRequest {
            scope: Some(Scope {
                tenant_id: "acme".into(),
                ..own("alice", "")
            }),
        })
        .await
        .expect_err("globex's key may not name acme");
    assert_eq!(err.code(), Code::PermissionDenied);
    let nobody = export(&node, ACME_ADMIN, "nobody").await.unwrap();
    assert_eq!(nobody["counts"]["memories"], 0);
    assert!(nobody["memories"].as_array().unwrap().is_empty());

    // What survives must be the same after the erasure.
    let globex_before = store.owner_records(&globex_alice).await.unwrap();
    let bob_before = store.owner_records(&acme_bob).await.unwrap();
    let globex_points = vectors.count(Some(&globex_alice)).await.unwrap();
    assert!(globex_points > 0 && !globex_before.artifacts.is_empty());
    let blob_keys: Vec<String> = store
        .owner_records(&acme_alice)
        .await
        .unwrap()
        .artifacts
        .iter()
        .map(|a| a.blob_key.clone())
        .collect();
    for key in &blob_keys {
        assert!(blobs.size(key).await.unwrap().is_some(), "blob {key} stored");
    }
    assert!(vectors.count(Some(&acme_alice)).await.unwrap() > 0);

    // EraseUser through the gateway.
    let erased = keyed_gateway(&node, ACME_ADMIN)
        .erase_user(GatewayEraseUserRequest {
            scope: Some(own("alice", "")),
        })
        .await
        .unwrap()
        .into_inner();
    let counts = erased.counts.unwrap();
    assert!(erased.erasure_id.starts_with("era_"), "{erased:?}");
    assert!(counts.memories >= 4, "{counts:?}");
    assert!(counts.changes >= counts.memories, "{counts:?}");
    assert_eq!(counts.candidates, 2, "{counts:?}");
    assert_eq!(counts.plans, 1, "{counts:?}");
    assert_eq!(counts.artifacts, 1, "{counts:?}");
    assert_eq!(counts.sessions, 1, "{counts:?}");
    assert!(counts.session_messages >= 2, "{counts:?}");
    assert_eq!(counts.summaries, 1, "{counts:?}");
    assert!(counts.jobs >= 1, "{counts:?}");
    assert!(counts.idempotency >= 1, "{counts:?}");
    assert!(counts.vectors >= 3, "{counts:?}");

    // Nothing of hers in any table, blob or point.
    for table in TABLES {
        assert_eq!(
            rows(&store, table, &acme_alice).await,
            0,
            "rows of acme's alice left in {table}"
        );
    }
    for key in &blob_keys {
        assert_eq!(blobs.size(key).await.unwrap(), None, "blob {key} left");
    }
    assert_eq!(vectors.count(Some(&acme_alice)).await.unwrap(), 0, "vector points left");
    // Nor through any API.
    let km = || keyed_km(&node, ACME_ADMIN);
    for id in [&kept, &private] {
        let err = km()
            .get_memory(GetMemoryRequest {
                scope: Some(own("alice", "")),
                memory_id: id.clone(),
                all_roles: true,
            })
            .await
            .expect_err("erased");
        assert_eq!(err.code(), Code::NotFound);
        let err = km()
            .get_memory_history(GetMemoryHistoryRequest {
                scope: Some(own("alice", "")),
                memory_id: id.clone(),
                all_roles: true,
            })
            .await
            .expect_err("erased");
        assert_eq!(err.code(), Code::NotFound);
    }
    let listed = km()
        .list_memories(ListMemoriesRequest {
            scope: Some(own("alice", "cto")),
            statuses: vec![
                thinkus_proto::common::MemoryStatus::Active as i32,
                thinkus_proto::common::MemoryStatus::Replaced as i32,
            ],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories;
    assert!(listed.is_empty(), "{listed:?}");
    let recalled = RetrieverServiceClient::with_interceptor(node.channel.clone(), KeyInterceptor(ACME_ADMIN))
        .recall(RecallRequest {
            scope: Some(own("alice", "cto")),
            query: "Lumen budget acquisition launch".into(),
            budget_tokens: 4000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .catalog;
    assert!(recalled.is_empty(), "{recalled:?}");
    let candidates = km()
        .list_candidates(ListCandidatesRequest {
            scope: Some(own("alice", "")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .candidates;
    assert!(candidates.is_empty(), "{candidates:?}");
    let after = export(&node, ACME_ADMIN, "alice").await.unwrap();
    for list in [
        "memories",
        "deleted_memories",
        "candidates",
        "sessions",
        "summaries",
        "artifacts",
        "jobs",
        "request_ids",
    ] {
        assert!(after[list].as_array().unwrap().is_empty(), "{list} left: {after}");
    }
    assert_eq!(after["plan"], Value::Null);

    // The record: who, when, how many; none of what she said.
    let record = &after["erasures"].as_array().unwrap()[..];
    assert_eq!(record.len(), 1, "{record:?}");
    assert_eq!(record[0]["id"], erased.erasure_id.as_str());
    assert!(
        record[0]["actor"].as_str().unwrap().ends_with("of tenant acme"),
        "{record:?}"
    );
    assert_eq!(record[0]["counts"]["memories"], counts.memories);
    assert_eq!(rows(&store, "erasures", &acme_alice).await, 1);
    for said in ["Lumen", "Gusto", "budget", "March"] {
        assert!(!record[0].to_string().contains(said), "the record holds {said:?}");
    }

    // Everyone else keeps everything.
    let globex_after = store.owner_records(&globex_alice).await.unwrap();
    assert_eq!(globex_after.memories, globex_before.memories);
    assert_eq!(globex_after.artifacts, globex_before.artifacts);
    assert_eq!(globex_after.messages, globex_before.messages);
    assert_eq!(vectors.count(Some(&globex_alice)).await.unwrap(), globex_points);
    for artifact in &globex_after.artifacts {
        assert!(blobs.size(&artifact.blob_key).await.unwrap().is_some());
    }
    assert_eq!(
        store.owner_records(&acme_bob).await.unwrap().memories,
        bob_before.memories
    );
    keyed_km(&node, GLOBEX_ALICE)
        .get_memory(GetMemoryRequest {
            scope: Some(own("alice", "cto")),
            memory_id: theirs,
            all_roles: false,
        })
        .await
        .expect("globex's alice keeps her memory");
    km().get_memory(GetMemoryRequest {
        scope: Some(own("bob", "cto")),
        memory_id: bobs,
        all_roles: false,
    })
    .await
    .expect("acme's bob keeps his memory");

    // Erasing again, over REST: OK, nothing erased, nothing recorded.
    let response = http
        .post(format!("{rest}/api/user/erase"))
        .bearer_auth(ACME_ADMIN)
        .json(&serde_json::json!({"userId": "alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let again: Value = response.json().await.unwrap();
    assert_eq!(again["erasureId"], Value::Null, "{again}");
    for (name, count) in again["counts"].as_object().unwrap() {
        assert_eq!(count, 0, "{name} erased again: {again}");
    }
    assert_eq!(
        rows(&store, "erasures", &acme_alice).await,
        1,
        "a no-op erasure records nothing"
    );
    // Globex's key cannot erase acme's alice.
    let response = http
        .post(format!("{rest}/api/user/erase"))
        .bearer_auth(GLOBEX_ALICE)
        .json(&serde_json::json!({"userId": "alice", "tenantId": "acme"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::FORBIDDEN);
    // The index flushes when its last handle goes: before the node's folder does.
    drop((store, blobs, vectors));
    node.stop().await;
}

/// An embedder that holds the passages naming `marker` until released, and says when one waits:
/// the test stops a learn job in the middle of its run.
#[derive(Debug)]
struct HeldEmbedder {
    inner: std::sync::Arc<dyn thinkus_backends::embed::Embedder>,
    marker: &'static str,
    waiting: std::sync::Arc<tokio::sync::Notify>,
    release: tokio::sync::watch::Receiver<bool>,
}

#[async_trait::async_trait]
impl thinkus_backends::embed::Embedder for HeldEmbedder {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, thinkus_backends::embed::EmbedError> {
        self.inner.embed_query(text).await
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, thinkus_backends::embed::EmbedError> {
        if texts.iter().any(|t| t.contains(self.marker)) && !*self.release.borrow() {
            self.waiting.notify_one();
            let mut release = self.release.clone();
            let _ = release.wait_for(|released| *released).await;
        }
        self.inner.embed_passages(texts).await
    }
}

/// EraseUser while a learn job of the user runs (held mid-extraction) and more of her jobs wait
/// in the queue: the queued ones are gone with her data, and the running one's writes, which
/// come after the erasure, are refused, so nothing of hers is in any table or vector point
/// afterwards. The worker goes on with other users' jobs.
async fn an_erasure_stops_the_users_running_and_queued_jobs(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::nodes::embedded_config(dir.path());
    if let Backend::Postgres = backend {
        let Some(admin) = support::server_from_env("TEST_DATABASE_URL", "erasure during a running job on PostgreSQL")
        else {
            return;
        };
        config.storage.database = Some(support::fresh_postgres_database(&admin).await);
    }
    config.auth.mode = AuthMode::ApiKey;
    config.auth.keys = rights_keys();
    // One worker: alice's jobs run one after another, and bob's after hers.
    config.gateway.workers = 1;
    config.gateway.poll_interval_ms = 20;
    config.gateway.learn_wait_ms = 60_000;
    let mut backends =
        thinkus_server::node::open_backends(&config, &thinkus_server::ServiceKind::ALL.iter().copied().collect())
            .await
            .expect("open the backends");
    let waiting = std::sync::Arc::new(tokio::sync::Notify::new());
    let (release, released) = tokio::sync::watch::channel(false);
    backends.embedder = Some(std::sync::Arc::new(HeldEmbedder {
        inner: backends.embedder.clone().expect("the embedder"),
        marker: "Zanzibar",
        waiting: waiting.clone(),
        release: released,
    }));
    let store = backends.store.clone().expect("the database");
    let vectors = backends.vectors.clone().expect("the vector index");
    let handle = crate::nodes::start(config, &thinkus_server::ServiceKind::ALL, Some(backends)).await;
    let node = Node {
        channel: crate::nodes::channel(&handle).await,
        handle,
        _dir: dir,
    };
    let alice = Owner::new("acme", "alice");
    let session = Scope {
        session_id: "erase-race".into(),
        ..own("alice", "cto")
    };
    let complete = |said: &'static str, request_id: &'static str| {
        let mut gateway = keyed_gateway(&node, ACME_ADMIN);
        let scope = session.clone();
        async move {
            gateway
                .complete_turn(CompleteTurnRequest {
                    scope: Some(scope),
                    user_message: said.into(),
                    assistant_message: "Noted.".into(),
                    request_id: request_id.into(),
                    ..Default::default()
                })
                .await
                .unwrap_or_else(|err| panic!("complete turn {said:?}: {err}"))
                .into_inner()
        }
    };
    // The first turn's learn job is taken by the worker and held while it extracts; the second
    // turn's jobs (and the first's summary) wait in the queue behind it.
    let held = waiting.notified();
    complete("We decided the Zanzibar launch budget is $900,000.", "erase-race-1").await;
    tokio::time::timeout(std::time::Duration::from_secs(60), held)
        .await
        .expect("the worker runs alice's learn job");
    complete(
        "We decided the Zanzibar launch moves to the 14th of May.",
        "erase-race-2",
    )
    .await;
    assert!(rows(&store, "jobs", &alice).await >= 3, "alice's jobs are queued");

    let erased = keyed_gateway(&node, ACME_ADMIN)
        .erase_user(GatewayEraseUserRequest {
            scope: Some(own("alice", "")),
        })
        .await
        .expect("erase alice while her job runs")
        .into_inner();
    assert!(erased.counts.unwrap().jobs >= 3, "{erased:?}");

    // The held job goes on after the erasure; bob's turn, taken after it by the one worker,
    // says when it has finished.
    release.send(true).unwrap();
    let bobs = keyed_gateway(&node, ACME_ADMIN)
        .complete_turn(CompleteTurnRequest {
            scope: Some(Scope {
                session_id: "erase-race-bob".into(),
                ..own("bob", "cto")
            }),
            user_message: "We decided the storefront deploys on Fridays.".into(),
            assistant_message: "Noted.".into(),
            wait_for_learning: true,
            ..Default::default()
        })
        .await
        .expect("bob's turn")
        .into_inner();
    let learning = bobs.learning.expect("bob's learn job");
    assert_eq!(
        learning.status,
        thinkus_proto::gateway::JobStatus::Succeeded as i32,
        "the worker goes on after an erased job: {learning:?}"
    );
    for table in TABLES {
        assert_eq!(
            rows(&store, table, &alice).await,
            0,
            "alice's job wrote rows into {table} after her erasure"
        );
    }
    assert_eq!(
        vectors.count(Some(&alice)).await.unwrap(),
        0,
        "alice's job indexed points after her erasure"
    );
    assert!(
        rows(&store, "memories", &Owner::new("acme", "bob")).await > 0,
        "bob's turn was learned"
    );
    // The index is the node's: let it go before the node removes its folder.
    drop(vectors);
    node.stop().await;
}

/// Runs `thinkus memory …` against the node; (success, stdout, stderr).
async fn cli(node: &Node, args: &[&str]) -> (bool, String, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_thinkus"));
    command.arg("memory").args(["--addr", &node.handle.url()]).args(args);
    let output = tokio::task::spawn_blocking(move || command.output().expect("run thinkus memory"))
        .await
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `thinkus memory export-user` writes the user's document to a file; `erase-user` refuses
/// without --yes, erases with it (through the gateway), and says so; the next export is empty
/// but for the erasure's record, a second erasure finds nothing, and another user keeps hers.
async fn the_cli_exports_and_erases_a_user(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let remember = |user: &'static str, content: &'static str| {
        let mut km = node.km();
        async move {
            km.remember(RememberRequest {
                scope: Some(own(user, "cto")),
                memory: Some(MemoryDraft {
                    r#type: MemoryType::ProjectDecision as i32,
                    content: content.into(),
                    importance: 4,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .result
            .unwrap()
            .memory
            .unwrap()
            .id
        }
    };
    let hers = remember("cli-alice", "The Orion rollout starts in the Lisbon office").await;
    let bobs = remember("cli-bob", "The Vega rollout starts in the Oslo office").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("alice.json");
    let path = file.to_str().unwrap();
    let exported = |path: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap() };

    let (ok, out, err) = cli(&node, &["export-user", "-u", "cli-alice", "-o", path]).await;
    assert!(ok, "export-user: {out} {err}");
    let document = exported(path);
    assert_eq!(document["user_id"], "cli-alice");
    assert_eq!(ids(&document, "memories"), vec![hers.clone()]);
    assert!(!document.to_string().contains("Vega"), "another user's memory exported");

    let (ok, _, err) = cli(&node, &["erase-user", "-u", "cli-alice"]).await;
    assert!(!ok && err.contains("--yes"), "erase-user without --yes refuses: {err}");
    assert_eq!(
        ids(&export(&node, ACME_ADMIN, "cli-alice").await.unwrap(), "memories"),
        vec![hers]
    );

    let (ok, out, err) = cli(&node, &["erase-user", "-u", "cli-alice", "--yes"]).await;
    assert!(ok, "erase-user --yes: {out} {err}");
    assert!(out.contains("cli-alice: erased 1 memories"), "{out}");
    let (ok, out, err) = cli(&node, &["export-user", "-u", "cli-alice", "-o", path]).await;
    assert!(ok, "export-user after the erasure: {out} {err}");
    let document = exported(path);
    assert!(ids(&document, "memories").is_empty(), "{document}");
    assert_eq!(document["erasures"].as_array().map(Vec::len), Some(1), "{document}");
    let (ok, out, _) = cli(&node, &["erase-user", "-u", "cli-alice", "--yes"]).await;
    assert!(ok && out.contains("nothing left to erase"), "{out}");

    let (ok, out, err) = cli(&node, &["export-user", "-u", "cli-bob", "-o", path]).await;
    assert!(ok, "{out} {err}");
    assert_eq!(ids(&exported(path), "memories"), vec![bobs]);
    node.stop().await;
}

/// The summary port of a gateway that holds `record` until released, then records through the
/// real summary service: the test stops a summary job in the middle of its run.
struct HeldSummaries {
    inner: std::sync::Arc<dyn thinkus_gateway::extras::SummaryPort>,
    waiting: std::sync::Arc<tokio::sync::Notify>,
    release: tokio::sync::watch::Receiver<bool>,
}

#[async_trait::async_trait]
impl thinkus_gateway::extras::SummaryPort for HeldSummaries {
    async fn last_summary(
        &self,
        scope: &thinkus_common::model::Scope,
        budget_tokens: u32,
        language: thinkus_common::model::Language,
        now: chrono::DateTime<Utc>,
    ) -> Result<Option<thinkus_gateway::extras::LastSummary>, thinkus_common::ApiError> {
        self.inner.last_summary(scope, budget_tokens, language, now).await
    }

    async fn record(
        &self,
        scope: &thinkus_common::model::Scope,
        messages: Vec<thinkus_common::model::Message>,
        job_id: Option<&str>,
    ) -> Result<(), thinkus_common::ApiError> {
        self.waiting.notify_one();
        let mut release = self.release.clone();
        let _ = release.wait_for(|released| *released).await;
        self.inner.record(scope, messages, job_id).await
    }

    async fn end(&self, scope: &thinkus_common::model::Scope) -> Result<(), thinkus_common::ApiError> {
        self.inner.end(scope).await
    }
}

/// EraseUser while the summary job of the user's turn runs (held before it records the turn's
/// messages): the messages it brings after the erasure are dropped, so no session or message of
/// hers is left, and the worker finishes the job without an error.
async fn an_erasure_drops_a_running_summary_jobs_messages(backend: Backend) {
    use std::sync::Arc;
    // The node runs no job: the gateway built here does, one at a time.
    let Some(node) = start(backend, |config| config.gateway.workers = 0).await else {
        return;
    };
    let apis = &node.handle.apis;
    let waiting = Arc::new(tokio::sync::Notify::new());
    let (release, released) = tokio::sync::watch::channel(false);
    let gateway = Arc::new(thinkus_gateway::Gateway::new(
        thinkus_gateway::GatewayConfig::default(),
        thinkus_gateway::Upstreams {
            controller: apis.controller.clone().unwrap(),
            retriever: apis.retriever.clone().unwrap(),
            knowledge: apis.knowledge.clone().unwrap(),
            artifacts: None,
            summaries: Some(Arc::new(HeldSummaries {
                inner: Arc::new(thinkus_gateway::adapters::Summaries(apis.summary.clone().unwrap())),
                waiting: waiting.clone(),
                release: released,
            })),
            embedder: node.handle.backends.embedder.clone(),
            artifact_api: None,
            summary_api: None,
            addresses: thinkus_gateway::UpstreamAddresses::default(),
        },
        node.handle.backends.store.clone().unwrap(),
        node.handle.backends.tokens,
        None,
    ));
    let store = node.handle.backends.store.clone().unwrap();
    let vectors = node.handle.backends.vectors.clone().unwrap();
    let alice = Owner::new(DEFAULT_TENANT, "summary-alice");
    gateway
        .complete(thinkus_gateway::api::CompleteRequest {
            scope: thinkus_common::model::Scope {
                tenant_id: DEFAULT_TENANT.into(),
                user_id: alice.user_id.clone(),
                role_id: "cto".into(),
                project_id: Some("shop".into()),
                session_id: Some("summary-race".into()),
            },
            user_message: "We decided the Kestrel launch budget is $700,000.".into(),
            assistant_message: "Noted.".into(),
            request_id: Some("summary-race-1".into()),
            ..Default::default()
        })
        .await
        .expect("complete the turn");
    // The learn job runs, then the summary job is held before it records.
    let held = waiting.notified();
    let worker = {
        let gateway = gateway.clone();
        tokio::spawn(async move {
            while thinkus_gateway::jobs::run_once(&gateway)
                .await
                .expect("the queue answers")
            {}
        })
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), held)
        .await
        .expect("the worker runs alice's summary job");
    assert!(rows(&store, "memories", &alice).await > 0, "the learn job ran first");

    let erased = gateway.erase(&alice, "test").await.expect("erase alice");
    assert!(erased.counts.jobs >= 1, "{erased:?}");
    release.send(true).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(60), worker)
        .await
        .expect("the worker finishes")
        .expect("the worker does not fail");
    for table in TABLES {
        assert_eq!(
            rows(&store, table, &alice).await,
            0,
            "alice's summary job wrote rows into {table} after her erasure"
        );
    }
    assert_eq!(vectors.count(Some(&alice)).await.unwrap(), 0);
    // A decision the session's summary would offer now is refused: the session is gone.
    let offered = node
        .km()
        .remember(RememberRequest {
            scope: Some(Scope {
                user_id: alice.user_id.clone(),
                role_id: "cto".into(),
                project_id: "shop".into(),
                session_id: "summary-race".into(),
                ..Default::default()
            }),
            memory: Some(MemoryDraft {
                r#type: MemoryType::ProjectDecision as i32,
                content: "The Kestrel launch budget is $700,000".into(),
                source: MemorySource::Summary as i32,
                importance: 4,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect_err("a decision of an erased session's summary");
    assert_eq!(offered.code(), Code::FailedPrecondition, "{offered:?}");
    assert!(offered.message().contains("summary-race"), "{offered:?}");
    assert_eq!(rows(&store, "memories", &alice).await, 0);
    // The index is the node's: let it go before the node removes its folder.
    drop(vectors);
    drop(gateway);
    node.stop().await;
}

/// The summary engine of [`an_erasure_drops_a_summary_being_written`]: the rules, each call held
/// until the test lets it go.
#[derive(Debug)]
struct HeldEngine {
    rules: thinkus_backends::llm::RuleEngine,
    waiting: std::sync::Arc<tokio::sync::Notify>,
    release: tokio::sync::watch::Receiver<bool>,
}

#[async_trait::async_trait]
impl thinkus_backends::llm::LanguageModel for HeldEngine {
    fn name(&self) -> String {
        "held rules".into()
    }

    fn is_builtin(&self) -> bool {
        self.rules.is_builtin()
    }

    async fn complete(
        &self,
        request: thinkus_backends::llm::CompletionRequest,
    ) -> Result<thinkus_backends::llm::Completion, thinkus_backends::llm::LlmError> {
        self.waiting.notify_one();
        let mut release = self.release.clone();
        let _ = release.wait_for(|released| *released).await;
        self.rules.complete(request).await
    }
}

/// EraseUser while a summary update of the user's session runs (held in its engine, after it
/// read the messages): the summary it would store afterwards is refused (FAILED_PRECONDITION
/// naming the session), so neither the summary nor the decision it would offer outlives the
/// erasure.
async fn an_erasure_drops_a_summary_being_written(backend: Backend) {
    use std::sync::Arc;
    use thinkus_summary::SummaryApi;
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let store = node.handle.backends.store.clone().unwrap();
    let waiting = Arc::new(tokio::sync::Notify::new());
    let (release, released) = tokio::sync::watch::channel(false);
    let rules = thinkus_backends::llm::RuleEngine::new();
    let summaries = Arc::new(thinkus_summary::Summarizer::new(
        thinkus_summary::SummaryConfig::default(),
        store.clone(),
        rules.clone(),
        Some(Arc::new(HeldEngine {
            rules,
            waiting: waiting.clone(),
            release: released,
        })),
        node.handle.backends.tokens,
        None,
        node.handle.apis.knowledge.clone(),
    ));
    let alice = Owner::new(DEFAULT_TENANT, "summary-update-alice");
    let session = thinkus_common::model::Scope {
        tenant_id: DEFAULT_TENANT.into(),
        user_id: alice.user_id.clone(),
        role_id: "cto".into(),
        project_id: Some("shop".into()),
        session_id: Some("summary-update".into()),
    };
    let said = |role: &str, content: &str| thinkus_common::model::Message {
        role: role.into(),
        content: content.into(),
        speaker: None,
        created_at: Utc::now(),
        index: 0,
    };
    summaries
        .record(thinkus_summary::api::RecordRequest {
            scope: session.clone(),
            messages: vec![
                said("user", "We decided the Kestrel launch budget is $700,000."),
                said("assistant", "Noted: the Kestrel launch budget is $700,000."),
            ],
            phase_completed: false,
            job_id: None,
        })
        .await
        .expect("record the session's messages");
    let held = waiting.notified();
    let update = {
        let summaries = summaries.clone();
        let session = session.clone();
        tokio::spawn(async move {
            summaries
                .generate(thinkus_summary::api::GenerateRequest {
                    scope: session,
                    messages: Vec::new(),
                    trajectory_start: None,
                    trajectory_end: None,
                    engine: thinkus_common::model::EngineChoice::Configured,
                })
                .await
        })
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), held)
        .await
        .expect("the update reaches its engine");
    assert_eq!(rows(&store, "session_messages", &alice).await, 2);

    let erased = GatewayServiceClient::new(node.channel.clone())
        .erase_user(GatewayEraseUserRequest {
            scope: Some(Scope {
                user_id: alice.user_id.clone(),
                ..Default::default()
            }),
        })
        .await
        .expect("erase alice")
        .into_inner();
    let counts = erased.counts.expect("the erasure's counts");
    assert_eq!((counts.sessions, counts.session_messages), (1, 2), "{counts:?}");
    release.send(true).unwrap();
    let err = tokio::time::timeout(std::time::Duration::from_secs(60), update)
        .await
        .expect("the update ends")
        .expect("the update task")
        .expect_err("a summary of an erased session");
    assert_eq!(err.code, thinkus_common::ErrorCode::FailedPrecondition, "{err:?}");
    assert!(err.message.contains("summary-update"), "{err:?}");
    for table in TABLES {
        assert_eq!(
            rows(&store, table, &alice).await,
            0,
            "the summary update wrote rows into {table} after alice's erasure"
        );
    }
    // It holds the node's knowledge manager, and so its index: let it go before the node
    // removes its folder.
    drop(summaries);
    node.stop().await;
}
