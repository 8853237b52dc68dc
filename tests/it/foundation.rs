//! The first slice end to end (issue 2): memories written over gRPC are recalled over gRPC
//! from real backends, each scope seeing exactly what it may; in one process and as separate
//! servers; bad input is refused naming the field and changes nothing.

use std::collections::BTreeSet;

use thinkus_proto::common::{MemoryType, RetrievalMode, Scope, Visibility};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{ListMemoriesRequest, MemoryDraft, RememberRequest};
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use thinkus_proto::retriever::{GetDetailsRequest, RecallRequest};
use thinkus_server::ServiceKind;
use tonic::Code;
use tonic::transport::Channel;

use crate::nodes;

fn scope(user: &str, role: &str, project: Option<&str>) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: role.into(),
        project_id: project.unwrap_or_default().into(),
        session_id: String::new(),
        ..Default::default()
    }
}

struct Seed {
    name: &'static str,
    user: &'static str,
    role: &'static str,
    project: Option<&'static str>,
    visibility: Visibility,
    memory_type: MemoryType,
    content: &'static str,
}

const SEEDS: &[Seed] = &[
    Seed {
        name: "a1",
        user: "alice",
        role: "cto",
        project: Some("p1"),
        visibility: Visibility::Private,
        memory_type: MemoryType::ProjectDecision,
        content: "技术方案：前端用Next.js，数据库用MongoDB",
    },
    Seed {
        name: "a2",
        user: "alice",
        role: "cfo",
        project: Some("p1"),
        visibility: Visibility::Project,
        memory_type: MemoryType::Constraint,
        content: "The budget for the course platform is $800",
    },
    Seed {
        name: "a3",
        user: "alice",
        role: "cfo",
        project: Some("p1"),
        visibility: Visibility::Private,
        memory_type: MemoryType::Risk,
        content: "Stripe fees may eat the margin on cheap courses",
    },
    Seed {
        name: "a4",
        user: "alice",
        role: "cto",
        project: None,
        visibility: Visibility::Private,
        memory_type: MemoryType::UserPreference,
        content: "我喜欢简约的设计风格",
    },
    Seed {
        name: "a5",
        user: "alice",
        role: "cfo",
        project: Some("p2"),
        visibility: Visibility::Global,
        memory_type: MemoryType::UserPreference,
        content: "The user wants weekly written reports, not calls",
    },
    Seed {
        name: "a6",
        user: "alice",
        role: "cto",
        project: Some("p2"),
        visibility: Visibility::Private,
        memory_type: MemoryType::ProjectDecision,
        content: "项目二的前端改用Vue",
    },
    Seed {
        name: "b1",
        user: "bob",
        role: "cto",
        project: Some("p1"),
        visibility: Visibility::Project,
        memory_type: MemoryType::ProjectDecision,
        content: "Bob's shop runs on Django and PostgreSQL",
    },
    Seed {
        name: "b2",
        user: "bob",
        role: "cto",
        project: None,
        visibility: Visibility::Private,
        memory_type: MemoryType::UserPreference,
        content: "鲍勃喜欢深色主题",
    },
];

/// Writes the seeds; returns (name, id) pairs.
async fn write_seeds(channel: Channel, run: &str) -> Vec<(&'static str, String)> {
    let mut km = KnowledgeManagerServiceClient::new(channel);
    let mut ids = Vec::new();
    for seed in SEEDS {
        let user = format!("{}-{run}", seed.user);
        let response = km
            .remember(RememberRequest {
                scope: Some(scope(&user, seed.role, seed.project)),
                memory: Some(MemoryDraft {
                    r#type: seed.memory_type as i32,
                    content: seed.content.into(),
                    importance: 4,
                    visibility: seed.visibility as i32,
                    ..Default::default()
                }),
                request_id: format!("seed-{}", seed.name),
                skip_dedup: true,
                bypass_admission: false,
            })
            .await
            .unwrap_or_else(|err| panic!("remember {}: {err}", seed.name))
            .into_inner();
        let memory = response.result.unwrap().memory.expect("the memory is returned");
        assert_eq!(memory.content, seed.content, "stored in the user's language, unchanged");
        ids.push((seed.name, memory.id));
    }
    ids
}

async fn recalled(channel: Channel, scope: Scope, query: &str) -> BTreeSet<String> {
    let mut retriever = RetrieverServiceClient::new(channel);
    let response = retriever
        .recall(RecallRequest {
            scope: Some(scope),
            query: query.into(),
            mode: RetrievalMode::Catalog as i32,
            budget_tokens: 4000,
            ..Default::default()
        })
        .await
        .expect("recall")
        .into_inner();
    assert!(response.tokens_used <= response.budget_tokens);
    assert_eq!(response.tokenizer, "cl100k_base");
    response.catalog.into_iter().map(|e| e.id).collect()
}

fn names(ids: &[(&'static str, String)], wanted: &[&str]) -> BTreeSet<String> {
    ids.iter()
        .filter(|(name, _)| wanted.contains(name))
        .map(|(_, id)| id.clone())
        .collect()
}

/// Every scope recalls exactly what it may see, in Chinese and in English.
async fn scopes_see_exactly_their_memories(write: Channel, read: Channel) {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let ids = write_seeds(write.clone(), &run).await;
    let alice = format!("alice-{run}");
    let bob = format!("bob-{run}");
    let cases: Vec<(Scope, Vec<&str>)> = vec![
        (scope(&alice, "cto", Some("p1")), vec!["a1", "a2", "a4", "a5"]),
        (scope(&alice, "cfo", Some("p1")), vec!["a2", "a3", "a5"]),
        (scope(&alice, "cto", Some("p2")), vec!["a4", "a5", "a6"]),
        (scope(&alice, "cfo", None), vec!["a5"]),
        (scope(&bob, "cto", Some("p1")), vec!["b1", "b2"]),
        (scope(&bob, "cfo", Some("p1")), vec!["b1"]),
    ];
    for query in ["技术方案和设计风格", "budget, reports and the frontend"] {
        for (scope, expected) in &cases {
            let got = recalled(read.clone(), scope.clone(), query).await;
            assert_eq!(
                got,
                names(&ids, expected),
                "{}/{}/{} with {query:?} sees exactly {expected:?}",
                scope.user_id,
                scope.role_id,
                scope.project_id
            );
        }
    }

    // The best match comes first, in both languages.
    let mut retriever = RetrieverServiceClient::new(read.clone());
    for (query, best) in [
        ("设计风格", "a4"),
        ("what is the budget", "a2"),
        ("前端框架用什么", "a1"),
    ] {
        let response = retriever
            .recall(RecallRequest {
                scope: Some(scope(&alice, "cto", Some("p1"))),
                query: query.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let first = &response.catalog.first().expect("something is recalled").id;
        assert_eq!(
            first,
            &names(&ids, &[best]).into_iter().next().unwrap(),
            "{query:?} ranks {best} first"
        );
    }

    // Details of a visible memory; another role's private memory does not exist for this scope.
    let a3 = names(&ids, &["a3"]).into_iter().next().unwrap();
    let a1 = names(&ids, &["a1"]).into_iter().next().unwrap();
    let details = retriever
        .get_details(GetDetailsRequest {
            scope: Some(scope(&alice, "cto", Some("p1"))),
            ids: vec![a1.clone()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(details.details[0].content, "技术方案：前端用Next.js，数据库用MongoDB");
    let err = retriever
        .get_details(GetDetailsRequest {
            scope: Some(scope(&alice, "cto", Some("p1"))),
            ids: vec![a3.clone()],
            ..Default::default()
        })
        .await
        .expect_err("the cfo's private memory is not visible to the cto");
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains(&a3), "{}", err.message());
    let err = retriever
        .get_details(GetDetailsRequest {
            scope: Some(scope(&bob, "cto", Some("p1"))),
            ids: vec![a1],
            ..Default::default()
        })
        .await
        .expect_err("another tenant's memory does not exist");
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_in_one_scopes_see_exactly_their_memories() {
    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(nodes::embedded_config(dir.path()), &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;
    scopes_see_exactly_their_memories(channel.clone(), channel).await;
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_servers_scopes_see_exactly_their_memories() {
    let dir = tempfile::tempdir().unwrap();
    let config = nodes::embedded_config(dir.path());
    let services: BTreeSet<ServiceKind> = [ServiceKind::KnowledgeManager, ServiceKind::Retriever]
        .into_iter()
        .collect();
    // The embedded index has one owner: both servers share the backends this process opened.
    let backends = thinkus_server::node::open_backends(&config, &services).await.unwrap();
    let knowledge = nodes::start(config.clone(), &[ServiceKind::KnowledgeManager], Some(backends.clone())).await;
    let retriever = nodes::start(config, &[ServiceKind::Retriever], Some(backends)).await;
    assert_ne!(knowledge.addr, retriever.addr);
    let write = nodes::channel(&knowledge).await;
    let read = nodes::channel(&retriever).await;
    // Each server serves only its own service.
    let err = RetrieverServiceClient::new(write.clone())
        .recall(RecallRequest::default())
        .await
        .expect_err("the knowledge server does not serve recall");
    assert_eq!(err.code(), Code::Unimplemented);
    scopes_see_exactly_their_memories(write, read).await;
    knowledge.shutdown().await.unwrap();
    retriever.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_names_the_field_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(nodes::embedded_config(dir.path()), &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;
    let mut km = KnowledgeManagerServiceClient::new(channel.clone());
    let user = scope("carol", "cto", Some("p1"));
    let good = MemoryDraft {
        r#type: MemoryType::Constraint as i32,
        content: "预算是$500".into(),
        importance: 4,
        ..Default::default()
    };
    km.remember(RememberRequest {
        scope: Some(user.clone()),
        memory: Some(good.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    let count = |mut km: KnowledgeManagerServiceClient<Channel>, user: Scope| async move {
        km.list_memories(ListMemoriesRequest {
            all_roles: user.role_id.is_empty(),
            scope: Some(user),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories
    };
    let before = count(km.clone(), user.clone()).await;

    let cases: Vec<(RememberRequest, &str)> = vec![
        (
            RememberRequest {
                scope: Some(user.clone()),
                memory: Some(MemoryDraft {
                    content: "  ".into(),
                    ..good.clone()
                }),
                ..Default::default()
            },
            "memory.content",
        ),
        (
            RememberRequest {
                scope: Some(user.clone()),
                memory: Some(MemoryDraft {
                    content: "长".repeat(20_000),
                    ..good.clone()
                }),
                ..Default::default()
            },
            "memory.content",
        ),
        (
            RememberRequest {
                scope: Some(user.clone()),
                memory: Some(MemoryDraft {
                    r#type: 99,
                    ..good.clone()
                }),
                ..Default::default()
            },
            "memory.type",
        ),
        (
            RememberRequest {
                scope: Some(user.clone()),
                memory: Some(MemoryDraft {
                    importance: 7,
                    ..good.clone()
                }),
                ..Default::default()
            },
            "memory.importance",
        ),
        (
            RememberRequest {
                scope: Some(Scope {
                    user_id: String::new(),
                    ..user.clone()
                }),
                memory: Some(good.clone()),
                ..Default::default()
            },
            "scope.user_id",
        ),
        (
            RememberRequest {
                scope: Some(user.clone()),
                memory: Some(MemoryDraft {
                    related_decision_ids: vec!["mem_not-an-id".into()],
                    ..good.clone()
                }),
                ..Default::default()
            },
            "memory.related_decision_ids[0]",
        ),
    ];
    for (request, field) in cases {
        let err = km.remember(request).await.expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {}", err.message());
        assert!(
            err.message().starts_with(field),
            "the message names {field}: {}",
            err.message()
        );
    }
    let mut retriever = RetrieverServiceClient::new(channel);
    let err = retriever
        .get_details(GetDetailsRequest {
            scope: Some(user.clone()),
            ids: vec!["mem_123".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("ids[0]"), "{}", err.message());
    let unknown = format!("mem_{}", uuid::Uuid::now_v7().simple());
    let err = retriever
        .get_details(GetDetailsRequest {
            scope: Some(user.clone()),
            ids: vec![unknown.clone()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains(&unknown));
    for (request, field) in [
        (
            RecallRequest {
                scope: Some(user.clone()),
                query: "x".into(),
                budget_tokens: -5,
                ..Default::default()
            },
            "budget_tokens",
        ),
        (
            RecallRequest {
                scope: Some(user.clone()),
                query: "x".into(),
                budget_tokens: 10_000_000,
                ..Default::default()
            },
            "budget_tokens",
        ),
        (
            RecallRequest {
                scope: Some(user.clone()),
                query: "x".into(),
                types: vec![42],
                ..Default::default()
            },
            "types[0]",
        ),
        (
            RecallRequest {
                scope: Some(user.clone()),
                query: String::new(),
                ..Default::default()
            },
            "query",
        ),
    ] {
        let err = retriever.recall(request).await.expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {}", err.message());
        assert!(
            err.message().starts_with(field),
            "the message names {field}: {}",
            err.message()
        );
    }

    let after = count(km, user).await;
    assert_eq!(before, after, "rejected requests changed nothing");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_keep_tenants_apart() {
    use crate::support::KeyInterceptor;

    let dir = tempfile::tempdir().unwrap();
    let config = nodes::keyed_config(
        dir.path(),
        vec![
            nodes::api_key("acme", &["alice"], "acme-key"),
            nodes::api_key("globex", &["bob"], "globex-key"),
        ],
    );
    let node = nodes::start(config, &[ServiceKind::KnowledgeManager, ServiceKind::Retriever], None).await;
    let channel = nodes::channel(&node).await;
    let mut alice_km = KnowledgeManagerServiceClient::with_interceptor(channel.clone(), KeyInterceptor("acme-key"));
    alice_km
        .remember(RememberRequest {
            scope: Some(scope("alice", "cto", None)),
            memory: Some(MemoryDraft {
                r#type: MemoryType::UserPreference as i32,
                content: "I prefer concise weekly reports".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("alice's key writes alice's memories");
    let mut alice_recall = RetrieverServiceClient::with_interceptor(channel.clone(), KeyInterceptor("acme-key"));
    let err = alice_recall
        .recall(RecallRequest {
            scope: Some(scope("bob", "cto", None)),
            query: "reports".into(),
            ..Default::default()
        })
        .await
        .expect_err("alice's key may not read bob's memories");
    assert_eq!(err.code(), Code::PermissionDenied);
    let mut bob_recall = RetrieverServiceClient::with_interceptor(channel.clone(), KeyInterceptor("globex-key"));
    let response = bob_recall
        .recall(RecallRequest {
            scope: Some(scope("bob", "cto", None)),
            query: "reports".into(),
            ..Default::default()
        })
        .await
        .expect("bob reads his own, empty, memories")
        .into_inner();
    assert!(response.catalog.is_empty(), "bob sees nothing of alice's");
    let err = RetrieverServiceClient::new(channel)
        .recall(RecallRequest {
            scope: Some(scope("alice", "cto", None)),
            query: "reports".into(),
            ..Default::default()
        })
        .await
        .expect_err("no key");
    assert_eq!(
        err.code(),
        Code::Unauthenticated,
        "api_key mode has no loopback exemption"
    );
    node.shutdown().await.unwrap();
}
