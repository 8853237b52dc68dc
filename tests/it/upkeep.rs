//! Paths of the knowledge manager no scenario covered before (issue 17), over gRPC on SQLite
//! and PostgreSQL: the candidate queue's scope checks, MergeMemories, promotion (an insight to a
//! decision, a learning to a pattern, a profile fact to the long-term profile), RESTORE
//! corrections and RunMaintenance (decay and forgetting at a given time), and the sweeps'
//! counters as a `thinkus` process publishes them.

use thinkus_common::convert::timestamp;
use thinkus_proto::common::{Engine, MemoryStatus, MemoryType, Scope};
use thinkus_proto::knowledge::{
    ApproveCandidateRequest, CandidateStatus, CorrectMemoryRequest, CorrectionAction, GetMemoryRequest,
    ListCandidatesRequest, MemoryDraft, MergeMemoriesRequest, PromoteMemoryRequest, RejectCandidateRequest,
    RememberRequest, RunMaintenanceRequest, WriteOutcome, WriteResult,
};
use tonic::Code;

use crate::knowledge::{Backend, Node, start};
use crate::support::{self, free_port};

fn scope(user: &str, role: &str) -> Scope {
    Scope {
        project_id: "shop".into(),
        ..cross_project(user, role)
    }
}

/// A scope without a project: where profile facts live (and wait in the queue).
fn cross_project(user: &str, role: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: role.into(),
        ..Default::default()
    }
}

/// Writes a draft as is (dev mode may bypass admission), without dedup.
async fn write(node: &Node, scope: &Scope, memory_type: MemoryType, content: &str, importance: i32) -> String {
    let result = remember(node, scope, memory_type, content, importance, true).await;
    assert_eq!(result.outcome, WriteOutcome::Created as i32, "{result:?}");
    result.memory.unwrap().id
}

async fn remember(
    node: &Node,
    scope: &Scope,
    memory_type: MemoryType,
    content: &str,
    importance: i32,
    bypass: bool,
) -> WriteResult {
    node.km()
        .remember(RememberRequest {
            scope: Some(scope.clone()),
            memory: Some(MemoryDraft {
                r#type: memory_type as i32,
                content: content.into(),
                importance,
                ..Default::default()
            }),
            bypass_admission: bypass,
            skip_dedup: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap()
}

async fn memory(node: &Node, scope: &Scope, id: &str) -> thinkus_proto::common::Memory {
    node.km()
        .get_memory(GetMemoryRequest {
            scope: Some(scope.clone()),
            memory_id: id.into(),
            all_roles: scope.role_id.is_empty(),
        })
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap()
}

async fn candidates(node: &Node, scope: &Scope, status: CandidateStatus) -> Vec<thinkus_proto::knowledge::Candidate> {
    node.km()
        .list_candidates(ListCandidatesRequest {
            scope: Some(scope.clone()),
            status: status as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .candidates
}

/// A queued candidate is the user's and its role's: another user does not find it, another
/// role may not decide it, and a decided one cannot be decided again.
async fn the_candidate_queue_checks_its_scope(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let cto = cross_project("queue-alice", "cto");
    let queued = remember(
        &node,
        &cto,
        MemoryType::UserPreference,
        "For now I prefer short answers",
        3,
        false,
    )
    .await;
    assert_eq!(queued.outcome, WriteOutcome::Queued as i32, "{queued:?}");
    let second = remember(
        &node,
        &cto,
        MemoryType::UserPreference,
        "For now I prefer meetings after lunch",
        3,
        false,
    )
    .await;
    assert_eq!(second.outcome, WriteOutcome::Queued as i32, "{second:?}");
    let (first_id, second_id) = (queued.candidate_id, second.candidate_id);

    assert_eq!(candidates(&node, &cto, CandidateStatus::Pending).await.len(), 2);
    let cfo = cross_project("queue-alice", "cfo");
    assert!(
        candidates(&node, &cfo, CandidateStatus::Pending).await.is_empty(),
        "another role's queue"
    );
    let bob = cross_project("queue-bob", "cto");
    assert!(candidates(&node, &bob, CandidateStatus::Pending).await.is_empty());

    let approve = |scope: &Scope, id: &str, content: &str| ApproveCandidateRequest {
        scope: Some(scope.clone()),
        candidate_id: id.into(),
        edited_content: content.into(),
    };
    let err = node
        .km()
        .approve_candidate(approve(&bob, &first_id, ""))
        .await
        .expect_err("another user's candidate");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = node
        .km()
        .approve_candidate(approve(&cfo, &first_id, ""))
        .await
        .expect_err("another role's candidate");
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");

    let approved = node
        .km()
        .approve_candidate(approve(&cto, &first_id, "I prefer short answers"))
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert_eq!(approved.outcome, WriteOutcome::Created as i32, "{approved:?}");
    let written = approved.memory.unwrap();
    assert_eq!(
        written.content, "I prefer short answers",
        "the edited content is written"
    );
    node.km()
        .reject_candidate(RejectCandidateRequest {
            scope: Some(cto.clone()),
            candidate_id: second_id.clone(),
            reason: "one-off".into(),
        })
        .await
        .unwrap();
    for id in [&first_id, &second_id] {
        let err = node
            .km()
            .approve_candidate(approve(&cto, id, ""))
            .await
            .expect_err("decided already");
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    }
    assert!(candidates(&node, &cto, CandidateStatus::Pending).await.is_empty());
    let rejected = candidates(&node, &cto, CandidateStatus::Rejected).await;
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0].reason.contains("rejected: one-off"),
        "{}",
        rejected[0].reason
    );
    assert_eq!(candidates(&node, &cto, CandidateStatus::Approved).await.len(), 1);
    node.stop().await;
}

/// MergeMemories writes one memory and marks the sources replaced by it; a RESTORE undoes a
/// suppression; an insight is promoted to a decision once per title.
async fn merge_restore_and_promote(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("upkeep-merge", "cto");
    let a = write(&node, &me, MemoryType::ProjectDecision, "We use Stripe for payments", 4).await;
    let b = write(
        &node,
        &me,
        MemoryType::ProjectDecision,
        "Payments go through Stripe checkout",
        4,
    )
    .await;
    let merged = node
        .km()
        .merge_memories(MergeMemoriesRequest {
            scope: Some(me.clone()),
            memory_ids: vec![a.clone(), b.clone()],
            engine: Engine::Rules as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(merged.status, MemoryStatus::Active as i32);
    assert!(merged.content.contains("Stripe"), "{}", merged.content);
    for source in [&a, &b] {
        let source = memory(&node, &me, source).await;
        assert_eq!(source.status, MemoryStatus::Replaced as i32, "{source:?}");
        assert_eq!(source.superseded_by, merged.id);
    }
    let err = node
        .km()
        .merge_memories(MergeMemoriesRequest {
            scope: Some(me.clone()),
            memory_ids: vec![a.clone(), merged.id.clone()],
            engine: Engine::Rules as i32,
            ..Default::default()
        })
        .await
        .expect_err("a replaced memory is not merged again");
    assert!(
        matches!(err.code(), Code::FailedPrecondition | Code::InvalidArgument),
        "{err:?}"
    );

    let correct = |action: CorrectionAction| CorrectMemoryRequest {
        scope: Some(me.clone()),
        memory_id: merged.id.clone(),
        action: action as i32,
        evidence: "the boss said so".into(),
        ..Default::default()
    };
    node.km()
        .correct_memory(correct(CorrectionAction::Suppress))
        .await
        .unwrap();
    assert_eq!(
        memory(&node, &me, &merged.id).await.status,
        MemoryStatus::Suppressed as i32
    );
    let restored = node
        .km()
        .correct_memory(correct(CorrectionAction::Restore))
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(restored.status, MemoryStatus::Active as i32, "{restored:?}");

    let insight = write(
        &node,
        &me,
        MemoryType::Insight,
        "Most buyers convert on the second visit",
        3,
    )
    .await;
    let promote = || PromoteMemoryRequest {
        scope: Some(me.clone()),
        memory_id: insight.clone(),
        title: "Retarget second visits".into(),
        ..Default::default()
    };
    let decision = node
        .km()
        .promote_memory(promote())
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(decision.r#type, MemoryType::ProjectDecision as i32, "{decision:?}");
    assert!(decision.importance >= 4, "{decision:?}");
    assert!(decision.tags.iter().any(|t| t == "promoted"), "{decision:?}");
    assert!(
        memory(&node, &me, &insight).await.tags.iter().any(|t| t == "promoted"),
        "the insight says it was promoted"
    );
    let err = node
        .km()
        .promote_memory(promote())
        .await
        .expect_err("the same title twice");
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");

    // A learning becomes a pattern; nothing else is promoted, and a learning to nothing but
    // a pattern.
    let learning = write(
        &node,
        &me,
        MemoryType::Learning,
        "Shipping on Fridays caused two weekend incidents",
        3,
    )
    .await;
    let promote_learning = |target: MemoryType, title: &str| PromoteMemoryRequest {
        scope: Some(me.clone()),
        memory_id: learning.clone(),
        target_type: target as i32,
        title: title.into(),
    };
    let err = node
        .km()
        .promote_memory(promote_learning(MemoryType::ProjectDecision, "No Friday releases"))
        .await
        .expect_err("a learning to a decision");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().starts_with("target_type"), "{err:?}");
    let pattern = node
        .km()
        .promote_memory(promote_learning(MemoryType::Unspecified, "No Friday releases"))
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(pattern.r#type, MemoryType::Pattern as i32, "{pattern:?}");
    assert!(pattern.tags.iter().any(|t| t == "promoted"), "{pattern:?}");
    assert!(
        memory(&node, &me, &learning).await.tags.iter().any(|t| t == "promoted"),
        "the learning says it was promoted"
    );
    let err = node
        .km()
        .promote_memory(PromoteMemoryRequest {
            scope: Some(me.clone()),
            memory_id: decision.id.clone(),
            title: "Promote a decision".into(),
            ..Default::default()
        })
        .await
        .expect_err("a decision is not promoted");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().starts_with("memory_id"), "{err:?}");
    node.stop().await;
}

/// A profile fact (cross-project, private to the role that heard it) said often and surely
/// enough becomes long-term: at the third observation it turns global, so the user's other
/// roles read it, with a change record saying why; before, another role does not see it.
async fn a_profile_fact_observed_often_becomes_long_term(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let designer = cross_project("upkeep-profile", "designer");
    let cto = cross_project("upkeep-profile", "cto");
    let learn = |text: &str, request_id: String| {
        let mut km = node.km();
        let request = thinkus_proto::knowledge::LearnFromConversationRequest {
            scope: Some(designer.clone()),
            messages: vec![thinkus_proto::common::Message {
                role: "user".into(),
                content: text.into(),
                ..Default::default()
            }],
            engine: Engine::Rules as i32,
            request_id,
            ..Default::default()
        };
        async move { km.learn_from_conversation(request).await.unwrap().into_inner() }
    };
    let visible_to_cto = || async {
        node.km()
            .list_memories(thinkus_proto::knowledge::ListMemoriesRequest {
                scope: Some(cto.clone()),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .memories
    };
    let sayings = [
        "I prefer a minimalist design style",
        "I like a minimalist design style",
        "My preference is a minimalist design style",
    ];
    let mut results = Vec::new();
    for (i, text) in sayings.iter().enumerate() {
        let learned = learn(text, format!("profile-{i}")).await;
        assert_eq!(learned.results.len(), 1, "{text}: {learned:?}");
        results.push(learned.results[0].clone());
        if i < 2 {
            assert!(
                visible_to_cto().await.is_empty(),
                "after {} observations the preference is still the designer's",
                i + 1
            );
        }
    }
    let memory = results[2].memory.clone().expect("the reinforced memory");
    assert_eq!(memory.evidence_count, 3, "{memory:?}");
    assert_eq!(
        memory.visibility,
        thinkus_proto::common::Visibility::Global as i32,
        "{:?}",
        results[2]
    );
    assert!(results[2].reason.contains("long-term profile"), "{:?}", results[2]);
    let seen: Vec<String> = visible_to_cto().await.into_iter().map(|m| m.id).collect();
    assert_eq!(seen, vec![memory.id.clone()], "the user's other role reads it now");
    let history = node
        .km()
        .get_memory_history(thinkus_proto::knowledge::GetMemoryHistoryRequest {
            scope: Some(designer.clone()),
            memory_id: memory.id.clone(),
            all_roles: false,
        })
        .await
        .unwrap()
        .into_inner()
        .changes;
    let promoted: Vec<_> = history
        .iter()
        .filter(|c| c.kind == thinkus_proto::knowledge::ChangeKind::Promote as i32)
        .collect();
    assert_eq!(promoted.len(), 1, "{history:?}");
    assert_eq!(promoted[0].actor, "system:profile");
    assert!(promoted[0].reason.contains("3 observations"), "{:?}", promoted[0]);
    node.stop().await;
}

/// RunMaintenance at a given time: freshness decays, and old low-value memories are forgotten
/// while important ones stay; only the asked user's memories are touched.
async fn maintenance_decays_and_forgets(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("upkeep-sweep", "cto");
    let other = scope("upkeep-other", "cto");
    let minor = write(&node, &me, MemoryType::ActionItem, "Order coffee beans", 2).await;
    let major = write(&node, &me, MemoryType::Constraint, "The budget must stay under $500", 5).await;
    let others = write(&node, &other, MemoryType::ActionItem, "Order tea", 2).await;
    let fresh = memory(&node, &me, &major).await.freshness;

    let later = chrono::Utc::now() + chrono::Duration::days(400);
    let report = node
        .km()
        .run_maintenance(RunMaintenanceRequest {
            scope: Some(Scope {
                user_id: me.user_id.clone(),
                ..Default::default()
            }),
            decay: true,
            forget: true,
            now: Some(timestamp(later)),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(report.forgotten, 1, "{report:?}");
    assert!(report.decayed >= 1, "{report:?}");
    assert_eq!(memory(&node, &me, &minor).await.status, MemoryStatus::Forgotten as i32);
    let kept = memory(&node, &me, &major).await;
    assert_eq!(kept.status, MemoryStatus::Active as i32);
    assert!(kept.freshness < fresh / 2.0, "{} -> {}", fresh, kept.freshness);
    let untouched = memory(&node, &other, &others).await;
    assert_eq!(untouched.status, MemoryStatus::Active as i32, "another user's memory");
    node.stop().await;
}

/// The value of the counter `name{kind="<kind>"}` in a Prometheus text page (0 when the page
/// has no such series yet).
fn counter(page: &str, name: &str, kind: &str) -> u64 {
    let series = format!("{name}{{kind=\"{kind}\"}} ");
    page.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|value| value.trim().parse().unwrap_or_else(|_| panic!("{series}{value}")))
        .unwrap_or(0)
}

/// The sweeps' counters as a `thinkus` process publishes them on `/metrics` (a process of its
/// own, so that no other test's sweep counts in them): the retention sweep at start counts one
/// sweep and the two old request-id records it purged (not the recent one); one RunMaintenance
/// counts one decay sweep and one forgetting sweep, and as many changes of each as it reports
/// (the scheduled sweep, the same function, counted each twice before; see also
/// `node::tests::a_scheduled_sweep_is_counted_once`).
async fn the_sweeps_are_counted_once(backend: Backend) {
    use thinkus_backends::sql::{IdempotencyRecord, MemoryStore, SqlStore, WriteBatch};
    let dir = tempfile::tempdir().unwrap();
    let database = match backend {
        Backend::Sqlite => format!("sqlite://{}", dir.path().join("thinkus.db").display()),
        Backend::Postgres => {
            let Some(admin) = support::server_from_env("TEST_DATABASE_URL", "sweep counters on PostgreSQL") else {
                return;
            };
            support::fresh_postgres_database(&admin).await
        }
    };
    let user = "sweeps-counted";
    let store = SqlStore::connect(&database, 2).await.expect("open the database");
    for (key, days) in [("old-1", 30), ("old-2", 8), ("recent", 1)] {
        store
            .commit(WriteBatch {
                idempotency: Some(IdempotencyRecord {
                    tenant_id: thinkus_common::model::DEFAULT_TENANT.into(),
                    user_id: user.into(),
                    key: format!("remember:{key}"),
                    response: "{}".into(),
                    created_at: chrono::Utc::now() - chrono::Duration::days(days),
                }),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    store.close().await;

    let metrics_port = free_port();
    let (_child, channel) = crate::durability::serve_with(
        dir.path(),
        Some(&database),
        &[
            format!("server.metrics_addr=127.0.0.1:{metrics_port}"),
            "storage.retention.idempotency_days=7".into(),
            // No scheduled decay sweep: only RunMaintenance sweeps.
            "knowledge.decay_interval_hours=0".into(),
        ],
    )
    .await;
    let scrape = || async {
        reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
            .await
            .expect("scrape /metrics")
            .text()
            .await
            .unwrap()
    };
    let mut page = scrape().await;
    // The sweep at start runs beside the index's reconciliation: within 30 s.
    for _ in 0..300 {
        if counter(&page, "thinkus_sweeps_total", "retention") > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        page = scrape().await;
    }
    let retention = [
        ("thinkus_sweeps_total", "retention"),
        ("thinkus_sweep_changes_total", "idempotency"),
        ("thinkus_sweep_changes_total", "job_payloads"),
        ("thinkus_sweep_changes_total", "session_messages"),
    ]
    .map(|(name, kind)| counter(&page, name, kind));
    assert_eq!(
        retention,
        [1, 2, 0, 0],
        "the retention sweep at start: sweeps, idempotency records, job payloads, session messages purged"
    );

    let mut km =
        thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient::new(channel);
    let me = scope(user, "cto");
    for (memory_type, content, importance) in [
        (MemoryType::ActionItem, "Order coffee beans", 2),
        (MemoryType::Constraint, "The budget must stay under $500", 5),
    ] {
        km.remember(RememberRequest {
            scope: Some(me.clone()),
            memory: Some(MemoryDraft {
                r#type: memory_type as i32,
                content: content.into(),
                importance,
                ..Default::default()
            }),
            bypass_admission: true,
            skip_dedup: true,
            ..Default::default()
        })
        .await
        .expect("remember");
    }
    let sweeps = |page: &str| {
        [
            ("thinkus_sweeps_total", "decay"),
            ("thinkus_sweeps_total", "forget"),
            ("thinkus_sweep_changes_total", "decay"),
            ("thinkus_sweep_changes_total", "forget"),
        ]
        .map(|(name, kind)| counter(page, name, kind))
    };
    let before = sweeps(&scrape().await);
    let report = km
        .run_maintenance(RunMaintenanceRequest {
            scope: Some(Scope {
                user_id: user.into(),
                ..Default::default()
            }),
            decay: true,
            forget: true,
            now: Some(timestamp(chrono::Utc::now() + chrono::Duration::days(400))),
        })
        .await
        .expect("run maintenance")
        .into_inner();
    assert_eq!(report.forgotten, 1, "{report:?}");
    assert!(report.decayed >= 1, "{report:?}");
    let after = sweeps(&scrape().await);
    let counted: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    assert_eq!(
        counted,
        [1, 1, report.decayed as u64, report.forgotten as u64],
        "one RunMaintenance: decay sweeps, forgetting sweeps, memories decayed, memories forgotten"
    );
    support::loud(&format!(
        "sweep counters ({backend:?}, a thinkus process's /metrics): retention at start 1 sweep, 2 of 3 request ids \
         purged; one RunMaintenance 1 decay + 1 forgetting sweep, {} + {} changes = its report",
        report.decayed, report.forgotten
    ));
}

on_both_backends!(
    the_candidate_queue_checks_its_scope,
    merge_restore_and_promote,
    a_profile_fact_observed_often_becomes_long_term,
    maintenance_decays_and_forgets,
    the_sweeps_are_counted_once,
);
