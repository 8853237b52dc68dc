//! Tenancy end to end: keys map to a tenant (and optionally restrict its users), every row and
//! vector point carries the tenant, and the same user id in two tenants is two people; the
//! migration gives existing data the default tenant. On SQLite and PostgreSQL.

use thinkus_common::config::{ApiKeyConfig, AuthMode};
use thinkus_proto::artifact::artifact_service_client::ArtifactServiceClient;
use thinkus_proto::artifact::{ArtifactHeader, CreateArtifactRequest, GetArtifactRequest};
use thinkus_proto::common::{MemoryType, Scope};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{GetMemoryRequest, ListMemoriesRequest, MemoryDraft, RememberRequest};
use thinkus_proto::retriever::RecallRequest;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use tonic::Code;

use crate::knowledge::{Backend, Node, start};
use crate::nodes::api_key;
use crate::support::{KeyInterceptor, Keyed};

fn keys() -> Vec<ApiKeyConfig> {
    vec![
        api_key("acme", &["*"], "acme-admin"),
        api_key("acme", &["bob"], "acme-bob-only"),
        api_key("globex", &["alice"], "globex-alice"),
        ApiKeyConfig {
            any_tenant: true,
            ..api_key("platform", &[], "service-key")
        },
    ]
}

fn scope(tenant: &str, user: &str) -> Scope {
    Scope {
        tenant_id: tenant.into(),
        user_id: user.into(),
        role_id: "cto".into(),
        ..Default::default()
    }
}

fn km(node: &Node, key: &'static str) -> KnowledgeManagerServiceClient<Keyed> {
    KnowledgeManagerServiceClient::with_interceptor(node.channel.clone(), KeyInterceptor(key))
}

fn retriever(
    node: &Node,
    key: &'static str,
) -> thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient<Keyed> {
    RetrieverServiceClient::with_interceptor(node.channel.clone(), KeyInterceptor(key))
}

async fn remember(node: &Node, key: &'static str, scope: Scope, content: &str) -> Result<String, tonic::Status> {
    let response = km(node, key)
        .remember(RememberRequest {
            scope: Some(scope),
            memory: Some(MemoryDraft {
                r#type: MemoryType::UserPreference as i32,
                content: content.into(),
                importance: 4,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await?
        .into_inner();
    let memory = response.result.unwrap().memory.unwrap();
    Ok(memory.id)
}

async fn recalled(node: &Node, key: &'static str, scope: Scope, query: &str) -> Result<Vec<String>, tonic::Status> {
    Ok(retriever(node, key)
        .recall(RecallRequest {
            scope: Some(scope),
            query: query.into(),
            budget_tokens: 4000,
            ..Default::default()
        })
        .await?
        .into_inner()
        .catalog
        .into_iter()
        .map(|entry| entry.id)
        .collect())
}

async fn same_user_id_in_two_tenants_is_two_people(backend: Backend) {
    let Some(node) = start(backend, |config| {
        config.auth.mode = AuthMode::ApiKey;
        config.auth.keys = keys();
    })
    .await
    else {
        return;
    };
    // "alice" of acme and "alice" of globex, each written with their tenant's key; the scope
    // names no tenant: a key acts in its own.
    let acme_alice = remember(
        &node,
        "acme-admin",
        scope("", "alice"),
        "我喜欢简约的设计风格，不要太花哨",
    )
    .await
    .expect("acme's admin key writes acme's alice");
    let globex_alice = remember(
        &node,
        "globex-alice",
        scope("", "alice"),
        "我喜欢简约的设计风格，颜色要鲜艳",
    )
    .await
    .expect("globex's key writes globex's alice");
    assert_ne!(
        acme_alice, globex_alice,
        "two people, two memories: no merge across tenants"
    );

    let acme_sees = recalled(&node, "acme-admin", scope("", "alice"), "设计风格")
        .await
        .unwrap();
    assert_eq!(
        acme_sees,
        vec![acme_alice.clone()],
        "acme's alice sees her own memory only"
    );
    let globex_sees = recalled(&node, "globex-alice", scope("", "alice"), "设计风格")
        .await
        .unwrap();
    assert_eq!(globex_sees, vec![globex_alice.clone()], "globex's alice sees hers only");

    // Another tenant's memory id is unknown, not forbidden: existence does not leak.
    let err = km(&node, "globex-alice")
        .get_memory(GetMemoryRequest {
            scope: Some(scope("", "alice")),
            memory_id: acme_alice.clone(),
            all_roles: false,
        })
        .await
        .expect_err("globex cannot read acme's memory by id");
    assert_eq!(err.code(), Code::NotFound);
    let listed = km(&node, "acme-admin")
        .list_memories(ListMemoriesRequest {
            scope: Some(scope("", "alice")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories;
    assert_eq!(listed.len(), 1);
    let memory = &listed[0];
    assert_eq!(memory.id, acme_alice);
    assert_eq!(
        memory.scope.as_ref().map(|s| s.tenant_id.as_str()),
        Some("acme"),
        "responses carry the tenant the server used"
    );

    // A key acts in its own tenant only, and for the users it lists.
    let err = recalled(&node, "acme-admin", scope("globex", "alice"), "设计风格")
        .await
        .expect_err("acme's key may not name globex");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(err.message().contains("globex"), "{}", err.message());
    let err = remember(&node, "acme-bob-only", scope("", "alice"), "something")
        .await
        .expect_err("a key restricted to bob may not act for alice");
    assert_eq!(err.code(), Code::PermissionDenied);
    remember(&node, "acme-bob-only", scope("acme", "bob"), "我喜欢在早上开会")
        .await
        .expect("the restricted key acts for bob, naming its own tenant");

    // A service key acts in the tenant a request names, and in its own when none is named.
    let via_service = recalled(&node, "service-key", scope("globex", "alice"), "设计风格")
        .await
        .unwrap();
    assert_eq!(via_service, vec![globex_alice.clone()]);
    let own = recalled(&node, "service-key", scope("", "alice"), "设计风格")
        .await
        .unwrap();
    assert!(own.is_empty(), "the service key's own tenant has no alice: {own:?}");

    // Artifacts too.
    let mut artifacts = ArtifactServiceClient::with_interceptor(node.channel.clone(), KeyInterceptor("acme-admin"));
    let header = |tenant: &str| ArtifactHeader {
        scope: Some(Scope {
            session_id: "s1".into(),
            ..scope(tenant, "alice")
        }),
        path: "/notes.md".into(),
        ..Default::default()
    };
    let created = artifacts
        .create_artifact(CreateArtifactRequest {
            header: Some(header("")),
            content: b"# Notes\nacme's private notes\n".to_vec(),
        })
        .await
        .expect("acme stores an artifact")
        .into_inner();
    let artifact_id = created.artifact.unwrap().id;
    let mut globex_artifacts =
        ArtifactServiceClient::with_interceptor(node.channel.clone(), KeyInterceptor("globex-alice"));
    let err = globex_artifacts
        .get_artifact(GetArtifactRequest {
            scope: Some(scope("", "alice")),
            artifact_id: artifact_id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("globex's alice cannot read acme's alice's artifact");
    assert_eq!(err.code(), Code::NotFound);
    let duplicate = globex_artifacts
        .create_artifact(CreateArtifactRequest {
            header: Some(header("")),
            content: b"# Notes\nacme's private notes\n".to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        !duplicate.deduplicated,
        "the same bytes of the same user id in another tenant are not deduplicated with acme's"
    );
    node.stop().await;
}

on_both_backends!(same_user_id_in_two_tenants_is_two_people);

/// The first migration's version: a database as the release before tenancy left it.
const BEFORE_TENANCY: i64 = 20261122000001;

/// Rows of every table as the release before tenancy wrote them (no tenant column).
const OLD_ROWS: &[&str] = &[
    "INSERT INTO memories (id, user_id, role_id, project_id, session_id, memory_type, content, summary, importance, \
     confidence, freshness, evidence_count, visibility, status, source, tags, created_at, updated_at, language, \
     occurred_at, external_id) VALUES ('mem_0192aaaa000070008000000000000001', 'alice', 'cto', 'p1', 's1', \
     'constraint', 'The budget is $500', 'The budget is $500', 4, 1.0, 4.0, 1, 'private', 'active', 'user_input', \
     '[]', 1700000000000, 1700000000000, 'en', 1700000000000, 'D1:1')",
    "INSERT INTO memory_changes (id, user_id, memory_id, kind, actor, reason, before_json, after_json, at) VALUES \
     ('chg_old1', 'alice', 'mem_0192aaaa000070008000000000000001', 'create', 'role:cto', 'written', NULL, '{}', \
     1700000000000)",
    "INSERT INTO idempotency (user_id, request_key, response, created_at) VALUES ('alice', 'remember:r1', '{}', \
     1700000000000)",
    "INSERT INTO candidates (id, user_id, role_id, project_id, session_id, draft, reason, score, evidence_count, \
     status, content_key, created_at) VALUES ('cand_old1', 'alice', 'cto', NULL, NULL, '{}', 'low confidence', 0.7, \
     1, 'pending', 'k', 1700000000000)",
    "INSERT INTO user_plans (user_id, plan, updated_at) VALUES ('alice', 'growth', 1700000000000)",
    "INSERT INTO artifacts (id, user_id, role_id, project_id, session_id, mime_type, size_bytes, sha256, blob_key, \
     line_count, kind, language, compact, metadata, created_at) VALUES ('art_old1', 'alice', 'cto', 'p1', 's1', \
     'text/plain', 5, 'abc', 'artifacts/x/abc', 1, 'text', 'en', '{}', '{}', 1700000000000)",
    "INSERT INTO sessions (user_id, session_id, role_id, project_id, message_count, last_message_at, summarized_until, \
     ended, summary_requested) VALUES ('alice', 's1', 'cto', 'p1', 1, 1700000000000, 0, 0, 0)",
    "INSERT INTO session_messages (user_id, session_id, idx, role, speaker, content, created_at) VALUES ('alice', \
     's1', 0, 'user', NULL, 'The budget is $500', 1700000000000)",
    "INSERT INTO session_summaries (id, user_id, role_id, project_id, session_id, goal, constraints, decisions, \
     progress, artifacts, next_actions, risks, open_questions, trajectory_start, trajectory_end, language, engine, \
     created_at, updated_at) VALUES ('sum_old1', 'alice', 'cto', 'p1', 's1', 'plan the launch', '[]', '[]', '[]', \
     '[]', '[]', '[]', '[]', 0, 0, 'en', 'rules', 1700000000000, 1700000000000)",
    "INSERT INTO jobs (id, kind, user_id, session_id, payload, status, attempts, max_attempts, run_after, created_at, \
     updated_at) VALUES ('job_old1', 'learn', 'alice', 's1', '{}', 'succeeded', 1, 3, 1700000000000, 1700000000000, \
     1700000000000)",
];

/// A database written before tenancy, migrated: every row is the default tenant's, read by
/// the new code; the same user id in another tenant sees none of it and can reuse its keys.
async fn existing_rows_join_the_default_tenant(url: &str) {
    use thinkus_backends::filter::MemoryFilter;
    use thinkus_backends::sql::{
        ArtifactStore, CandidateStatus, JobStore, MemoryQuery, MemoryStore, SessionKey, SessionStore, SqlStore,
    };
    use thinkus_common::model::{DEFAULT_TENANT, Message, Owner};

    let old = SqlStore::connect_at_version(url, 2, BEFORE_TENANCY)
        .await
        .expect("the database at the release before tenancy");
    for row in OLD_ROWS {
        old.execute_raw(row).await.unwrap_or_else(|err| panic!("{row}: {err}"));
    }
    old.close().await;

    let store = SqlStore::connect(url, 2).await.expect("migrated");
    let alice = Owner::new(DEFAULT_TENANT, "alice");
    let twin = Owner::new("acme", "alice");
    let memory = store
        .get_memory(&alice, "mem_0192aaaa000070008000000000000001")
        .await
        .unwrap()
        .expect("the memory is the default tenant's");
    assert_eq!(memory.scope.tenant_id, DEFAULT_TENANT);
    assert_eq!(memory.content, "The budget is $500");
    assert_eq!(
        store
            .list_memories(&MemoryQuery::of(MemoryFilter::user(&alice)))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(store.changes(&alice, &memory.id).await.unwrap().len(), 1);
    assert_eq!(
        store.get_idempotent(&alice, "remember:r1").await.unwrap().as_deref(),
        Some("{}")
    );
    assert!(store.get_candidate(&alice, "cand_old1").await.unwrap().is_some());
    assert_eq!(store.get_plan(&alice).await.unwrap().as_deref(), Some("growth"));
    assert!(store.get_artifact(&alice, "art_old1").await.unwrap().is_some());
    assert_eq!(store.get_session(&alice, "s1").await.unwrap().unwrap().message_count, 1);
    assert_eq!(store.get_messages(&alice, "s1", 0, 10).await.unwrap().len(), 1);
    assert!(store.get_summary(&alice, "s1").await.unwrap().is_some());
    assert_eq!(store.list_jobs(&alice, None, None, 10, 0).await.unwrap().len(), 1);
    assert_eq!(store.list_users().await.unwrap(), vec![alice.clone()]);

    // The same user id in another tenant: nothing of the default tenant's, and the keys that
    // hold the user (external ids, request keys, sessions, plans) are free for it.
    assert!(store.get_memory(&twin, &memory.id).await.unwrap().is_none());
    assert!(store.find_external(&twin, &["D1:1".into()]).await.unwrap().is_empty());
    assert!(store.get_idempotent(&twin, "remember:r1").await.unwrap().is_none());
    assert!(
        store
            .list_candidates(&twin, None, None, CandidateStatus::Pending, 10, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.get_plan(&twin).await.unwrap().is_none());
    assert!(store.get_artifact(&twin, "art_old1").await.unwrap().is_none());
    assert!(store.get_summary(&twin, "s1").await.unwrap().is_none());
    assert!(store.list_jobs(&twin, None, None, 10, 0).await.unwrap().is_empty());
    let key = SessionKey {
        tenant_id: twin.tenant_id.clone(),
        user_id: twin.user_id.clone(),
        session_id: "s1".into(),
        role_id: "cto".into(),
        project_id: None,
    };
    let message = Message {
        role: "user".into(),
        content: "another person's session s1".into(),
        speaker: None,
        created_at: chrono::Utc::now(),
        index: 0,
    };
    assert_eq!(
        store.append_messages(&key, &[message]).await.unwrap(),
        (0, 1),
        "the twin's session s1 starts at 0: sessions are keyed by tenant"
    );
    store.set_plan(&twin, "seed").await.unwrap();
    assert_eq!(store.get_plan(&alice).await.unwrap().as_deref(), Some("growth"));
    assert_eq!(
        store.get_messages(&alice, "s1", 0, 10).await.unwrap().len(),
        1,
        "the default tenant's session is untouched"
    );
}

#[tokio::test]
async fn sqlite_migration_gives_existing_rows_the_default_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    existing_rows_join_the_default_tenant(&url).await;
}

#[tokio::test]
async fn postgres_migration_gives_existing_rows_the_default_tenant() {
    let Some(admin) = crate::support::server_from_env("TEST_DATABASE_URL", "PostgreSQL tenancy migration") else {
        return;
    };
    let url = crate::support::fresh_postgres_database(&admin).await;
    existing_rows_join_the_default_tenant(&url).await;
}
