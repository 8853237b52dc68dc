//! Memory people can correct (issue 19) through the knowledge manager's gRPC API, on SQLite and
//! PostgreSQL: pending conflicts (an unsure new value waits beside the old one until a person
//! chooses; a sure correction still replaces at once), the standing rules and profile of a
//! role, importance a person adjusts, and the roles of a user.

use thinkus_proto::common::{MemorySource, MemoryStatus, MemoryType, Scope, Visibility};
use thinkus_proto::knowledge::{
    CandidateStatus, ChangeKind, ConflictChoice, CorrectMemoryRequest, CorrectionAction, GetMemoryHistoryRequest,
    GetMemoryRequest, GetStandingRequest, ListCandidatesRequest, ListConflictsRequest, ListRolesRequest, MemoryDraft,
    RememberRequest, ResolveConflictRequest, WriteOutcome, WriteResult,
};
use tonic::Code;

use crate::knowledge::{Backend, Node, scope, start};

async fn remember(
    node: &Node,
    scope: &Scope,
    memory_type: MemoryType,
    content: &str,
    draft: MemoryDraft,
) -> WriteResult {
    node.km()
        .remember(RememberRequest {
            scope: Some(scope.clone()),
            memory: Some(MemoryDraft {
                r#type: memory_type as i32,
                content: content.into(),
                ..draft
            }),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|err| panic!("remember {content:?}: {err}"))
        .into_inner()
        .result
        .expect("a result")
}

async fn memory(node: &Node, user: &str, id: &str) -> thinkus_proto::common::Memory {
    node.km()
        .get_memory(GetMemoryRequest {
            scope: Some(scope(user, "", None)),
            memory_id: id.into(),
            all_roles: true,
        })
        .await
        .unwrap_or_else(|err| panic!("get {id}: {err}"))
        .into_inner()
        .memory
        .expect("a memory")
}

async fn history(node: &Node, user: &str, id: &str) -> Vec<thinkus_proto::knowledge::MemoryChange> {
    node.km()
        .get_memory_history(GetMemoryHistoryRequest {
            scope: Some(scope(user, "", None)),
            memory_id: id.into(),
            all_roles: true,
        })
        .await
        .unwrap()
        .into_inner()
        .changes
}

async fn conflicts(node: &Node, scope: &Scope) -> Vec<thinkus_proto::knowledge::Conflict> {
    node.km()
        .list_conflicts(ListConflictsRequest {
            scope: Some(scope.clone()),
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .conflicts
}

fn inferred() -> MemoryDraft {
    MemoryDraft {
        source: MemorySource::Inference as i32,
        ..Default::default()
    }
}

fn unsure(confidence: f64) -> MemoryDraft {
    MemoryDraft {
        source: MemorySource::Discussion as i32,
        confidence,
        ..Default::default()
    }
}

/// An inferred or unsure value is held beside the sure one; a person keeps the new one, and the
/// history says who chose (English).
async fn unsure_values_wait_for_a_person(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let user = "conflict-en";
    let cfo = scope(user, "cfo", Some("shop"));
    let old = remember(
        &node,
        &cfo,
        MemoryType::Constraint,
        "The budget for the shop launch is $500",
        MemoryDraft::default(),
    )
    .await;
    let old_id = old.memory.expect("written").id;

    // An executive's inference contradicts it: held, not written.
    let held = remember(
        &node,
        &cfo,
        MemoryType::Constraint,
        "I think the budget is $800 now",
        inferred(),
    )
    .await;
    assert_eq!(held.outcome, WriteOutcome::Queued as i32, "{held:?}");
    assert!(held.reason.starts_with("pending conflict"), "{held:?}");
    assert!(held.memory.is_none());
    assert_eq!(memory(&node, user, &old_id).await.status, MemoryStatus::Active as i32);
    // Said again: the same conflict, one more observation.
    let again = remember(
        &node,
        &cfo,
        MemoryType::Constraint,
        "I think the budget is $800 now",
        inferred(),
    )
    .await;
    assert_eq!(again.candidate_id, held.candidate_id);

    let listed = conflicts(&node, &cfo).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, held.candidate_id);
    assert_eq!(listed[0].question, "budget: $500 or $800? unconfirmed");
    assert_eq!(listed[0].evidence_count, 2);
    assert_eq!(listed[0].current.len(), 1);
    assert_eq!(listed[0].current[0].id, old_id);
    // Another role of the user does not see it; the candidate queue shows what it contradicts.
    assert!(conflicts(&node, &scope(user, "cto", Some("shop"))).await.is_empty());
    let queued = node
        .km()
        .list_candidates(ListCandidatesRequest {
            scope: Some(cfo.clone()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .candidates;
    assert_eq!(queued[0].conflicts_with, vec![old_id.clone()]);
    // The role's standing context asks about it.
    let standing = node
        .km()
        .get_standing(GetStandingRequest {
            scope: Some(cfo.clone()),
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(standing.conflicts.len(), 1);

    // Another user's conflict id is not found, whatever the caller asks.
    let err = node
        .km()
        .resolve_conflict(ResolveConflictRequest {
            scope: Some(scope("someone-else", "", None)),
            conflict_id: held.candidate_id.clone(),
            keep: ConflictChoice::Proposed as i32,
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    let err = node
        .km()
        .resolve_conflict(ResolveConflictRequest {
            scope: Some(scope(user, "", None)),
            conflict_id: held.candidate_id.clone(),
            keep: ConflictChoice::Unspecified as i32,
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(err.message().starts_with("keep"), "{err}");

    // The person keeps the new value.
    let resolved = node
        .km()
        .resolve_conflict(ResolveConflictRequest {
            scope: Some(scope(user, "", None)),
            conflict_id: held.candidate_id.clone(),
            keep: ConflictChoice::Proposed as i32,
            reason: "the board approved $800".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let kept = resolved.kept.clone().expect("kept");
    assert!(kept.content.contains("$800"), "{kept:?}");
    assert_eq!(kept.confidence, 1.0);
    assert!(resolved.replaced_ids.contains(&old_id), "{resolved:?}");
    let old = memory(&node, user, &old_id).await;
    assert_eq!(old.status, MemoryStatus::Replaced as i32);
    assert_eq!(old.superseded_by, kept.id);
    let changes = history(&node, user, &old_id).await;
    let chosen = changes.last().expect("a change");
    assert_eq!(chosen.kind, ChangeKind::Correction as i32);
    assert_eq!(chosen.actor, "user:conflict-en");
    assert!(
        chosen.reason.contains("resolved by user:conflict-en") && chosen.reason.contains("the board approved $800"),
        "{chosen:?}"
    );
    assert!(conflicts(&node, &cfo).await.is_empty());
    // Resolved once: a second time is refused.
    let err = node
        .km()
        .resolve_conflict(ResolveConflictRequest {
            scope: Some(scope(user, "", None)),
            conflict_id: held.candidate_id.clone(),
            keep: ConflictChoice::Current as i32,
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");

    // A sure, explicit correction still replaces at once.
    let sure = remember(
        &node,
        &cfo,
        MemoryType::Constraint,
        "Actually the budget is now $900",
        MemoryDraft::default(),
    )
    .await;
    assert_eq!(sure.outcome, WriteOutcome::ReplacedOlder as i32, "{sure:?}");
    assert_eq!(sure.replaced_ids, vec![kept.id.clone()]);
    node.stop().await;
}

/// Chinese: an unsure value held, the person keeps the current one (confirmed), and a sure
/// correction settles a conflict still open.
async fn keeping_the_current_value(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let user = "conflict-zh";
    let cfo = scope(user, "cfo", Some("课程平台"));
    let old = remember(
        &node,
        &cfo,
        MemoryType::Constraint,
        "这个项目的预算是$500",
        MemoryDraft {
            confidence: 0.9,
            ..Default::default()
        },
    )
    .await;
    let old_id = old.memory.expect("written").id;
    let held = remember(&node, &cfo, MemoryType::Constraint, "预算好像改成$800了", unsure(0.6)).await;
    assert_eq!(held.outcome, WriteOutcome::Queued as i32, "{held:?}");
    let listed = conflicts(&node, &scope(user, "", None)).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].question, "预算：$500 还是 $800？待确认");

    let resolved = node
        .km()
        .resolve_conflict(ResolveConflictRequest {
            scope: Some(scope(user, "", None)),
            conflict_id: held.candidate_id.clone(),
            keep: ConflictChoice::Current as i32,
            reason: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let kept = resolved.kept.clone().expect("kept");
    assert_eq!(kept.id, old_id);
    assert_eq!(kept.confidence, 1.0, "a person confirmed it");
    assert!(resolved.replaced_ids.is_empty());
    let changes = history(&node, user, &old_id).await;
    assert_eq!(changes.last().unwrap().actor, "user:conflict-zh");
    assert!(changes.last().unwrap().reason.contains("kept over"), "{changes:?}");
    let rejected = node
        .km()
        .list_candidates(ListCandidatesRequest {
            scope: Some(scope(user, "", None)),
            status: CandidateStatus::Rejected as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .candidates;
    assert_eq!(rejected.len(), 1);
    assert!(conflicts(&node, &cfo).await.is_empty());

    // Held again, then a sure correction answers the question: the conflict is settled.
    let held = remember(&node, &cfo, MemoryType::Constraint, "预算可能要提高到$700", unsure(0.5)).await;
    assert_eq!(held.outcome, WriteOutcome::Queued as i32, "{held:?}");
    assert_eq!(conflicts(&node, &cfo).await.len(), 1);
    let sure = remember(
        &node,
        &cfo,
        MemoryType::Constraint,
        "预算确定改成$750了，不是之前说的$500",
        MemoryDraft::default(),
    )
    .await;
    assert_eq!(sure.outcome, WriteOutcome::ReplacedOlder as i32, "{sure:?}");
    assert!(conflicts(&node, &cfo).await.is_empty(), "settled by the sure value");
    node.stop().await;
}

/// With the hold turned off, every contradiction replaces, as before.
async fn holding_can_be_turned_off(backend: Backend) {
    let Some(node) = start(backend, |config| {
        config.knowledge.conflict_min_confidence = 0.0;
        config.knowledge.conflict_on_inference = false;
    })
    .await
    else {
        return;
    };
    let cfo = scope("conflict-off", "cfo", Some("shop"));
    remember(
        &node,
        &cfo,
        MemoryType::Constraint,
        "The budget is $500",
        MemoryDraft::default(),
    )
    .await;
    let replaced = remember(
        &node,
        &cfo,
        MemoryType::Constraint,
        "I think the budget is $800 now",
        inferred(),
    )
    .await;
    assert_eq!(replaced.outcome, WriteOutcome::ReplacedOlder as i32, "{replaced:?}");
    assert!(conflicts(&node, &cfo).await.is_empty());
    node.stop().await;
}

/// A role's standing context: its rules and profile across projects (own and shared), never
/// another role's private ones, a project's or a guess; importance a person adjusts; the roles
/// of a user.
async fn standing_rules_importance_and_roles(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let user = "standing";
    let global = |importance| MemoryDraft {
        visibility: Visibility::Global as i32,
        importance,
        ..Default::default()
    };
    let rule = remember(
        &node,
        &scope(user, "assistant", None),
        MemoryType::Constraint,
        "所有回复都用中文，不要用表情符号",
        global(5),
    )
    .await;
    let style = remember(
        &node,
        &scope(user, "designer", None),
        MemoryType::UserPreference,
        "我喜欢简约的设计风格",
        global(4),
    )
    .await;
    let private = remember(
        &node,
        &scope(user, "designer", None),
        MemoryType::UserPreference,
        "我喜欢深色模式的界面",
        MemoryDraft::default(),
    )
    .await;
    let project = remember(
        &node,
        &scope(user, "cto", Some("shop")),
        MemoryType::Constraint,
        "商城项目必须在两周内上线",
        global(5),
    )
    .await;
    let guess = remember(
        &node,
        &scope(user, "cto", None),
        MemoryType::Fact,
        "用户可能住在上海",
        MemoryDraft {
            visibility: Visibility::Global as i32,
            ..inferred()
        },
    )
    .await;
    let own = remember(
        &node,
        &scope(user, "cto", None),
        MemoryType::Fact,
        "用户是一名前端工程师出身的创业者",
        MemoryDraft::default(),
    )
    .await;
    let id = |r: &WriteResult| r.memory.as_ref().expect("written").id.clone();

    let standing = node
        .km()
        .get_standing(GetStandingRequest {
            scope: Some(scope(user, "cto", Some("shop"))),
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let rules: Vec<String> = standing.rules.iter().map(|m| m.id.clone()).collect();
    let profile: Vec<String> = standing.profile.iter().map(|m| m.id.clone()).collect();
    assert_eq!(rules, vec![id(&rule)], "{standing:?}");
    assert_eq!(
        profile,
        vec![id(&style), id(&own)],
        "most important first: {standing:?}"
    );
    for left_out in [id(&private), id(&project)] {
        assert!(!rules.contains(&left_out) && !profile.contains(&left_out));
    }
    assert!(
        guess.memory.is_none() || !profile.contains(&id(&guess)),
        "a guess is not profile"
    );
    assert_eq!(standing.language, "zh");
    let err = node
        .km()
        .get_standing(GetStandingRequest {
            scope: Some(scope(user, "", None)),
            limit: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // A person raises a memory's importance: freshness follows, the history says by whom.
    let corrected = node
        .km()
        .correct_memory(CorrectMemoryRequest {
            scope: Some(scope(user, "", None)),
            memory_id: id(&own),
            action: CorrectionAction::SetImportance as i32,
            importance: 5,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memory
        .expect("the memory");
    assert_eq!(corrected.importance, 5);
    assert!((corrected.freshness - 5.0).abs() < 0.01, "{corrected:?}");
    let changes = history(&node, user, &id(&own)).await;
    assert!(
        changes.last().unwrap().reason.starts_with("set importance: 3 -> 5"),
        "{changes:?}"
    );
    let err = node
        .km()
        .correct_memory(CorrectMemoryRequest {
            scope: Some(scope(user, "", None)),
            memory_id: id(&own),
            action: CorrectionAction::SetImportance as i32,
            importance: 9,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("importance"), "{err}");

    let roles = node
        .km()
        .list_roles(ListRolesRequest {
            scope: Some(scope(user, "", None)),
        })
        .await
        .unwrap()
        .into_inner()
        .role_ids;
    assert_eq!(roles, vec!["assistant", "cto", "designer"]);
    node.stop().await;
}

on_both_backends!(
    unsure_values_wait_for_a_person,
    keeping_the_current_value,
    holding_can_be_turned_off,
    standing_rules_importance_and_roles,
);
