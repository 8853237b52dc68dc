//! One write chain and quotas that say so (issue 17): every memory passes the same admission
//! unless a trusted caller bypasses it (and the history says so); echoes of the prompt's
//! memories are compared by content; a not-memorable exchange is neither learned nor
//! summarised; a full role makes room in the seed's order before refusing, and a refusal shows
//! in the learn response, the job and the metric. On SQLite and PostgreSQL.

use thinkus_common::config::AuthMode;
use thinkus_proto::common::{Engine, MemoryStatus, MemoryType, Message, Scope};
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;
use thinkus_proto::gateway::{CompleteTurnRequest, JobStatus, ListJobsRequest};
use thinkus_proto::knowledge::{
    CorrectMemoryRequest, CorrectionAction, GetMemoryHistoryRequest, GetQuotaRequest, LearnFromConversationRequest,
    ListMemoriesRequest, MemoryDraft, RememberRequest, SetPlanRequest, WriteOutcome, WriteResult,
};
use tonic::Code;

use crate::knowledge::{Backend, Node, start};
use crate::nodes;
use crate::support::KeyInterceptor;

fn scope(user: &str, role: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: role.into(),
        project_id: "shop".into(),
        session_id: "s1".into(),
        ..Default::default()
    }
}

fn draft(memory_type: MemoryType, content: &str, importance: i32) -> MemoryDraft {
    MemoryDraft {
        r#type: memory_type as i32,
        content: content.into(),
        importance,
        ..Default::default()
    }
}

async fn remember(node: &Node, scope: &Scope, memory: MemoryDraft, bypass: bool) -> Result<WriteResult, tonic::Status> {
    Ok(node
        .km()
        .remember(RememberRequest {
            scope: Some(scope.clone()),
            memory: Some(memory),
            bypass_admission: bypass,
            skip_dedup: true,
            ..Default::default()
        })
        .await?
        .into_inner()
        .result
        .unwrap())
}

fn gateway(node: &Node) -> GatewayServiceClient<tonic::transport::Channel> {
    GatewayServiceClient::new(node.channel.clone())
}

/// Remember, summaries, corrections: the admission of the write chain, and its trusted bypass.
async fn every_write_passes_admission(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("chain-admit", "cto");
    let noise = remember(
        &node,
        &me,
        draft(MemoryType::Constraint, "{{input.budget}} 的预算必须控制在5万以内", 4),
        false,
    )
    .await
    .unwrap();
    assert_eq!(noise.outcome, WriteOutcome::Rejected as i32, "{noise:?}");
    assert!(noise.reason.contains("template placeholder"), "{}", noise.reason);
    assert_eq!(
        noise.draft_type,
        MemoryType::Constraint as i32,
        "a rejection names its draft"
    );
    let temporary = remember(
        &node,
        &me,
        draft(MemoryType::ProjectDecision, "上线时间尚未确认", 4),
        false,
    )
    .await
    .unwrap();
    assert_eq!(temporary.outcome, WriteOutcome::Rejected as i32, "{temporary:?}");
    let minor = remember(&node, &me, draft(MemoryType::ActionItem, "记得买咖啡豆", 1), false)
        .await
        .unwrap();
    assert_eq!(
        minor.outcome,
        WriteOutcome::Rejected as i32,
        "below the threshold: {minor:?}"
    );
    assert!(minor.reason.contains("threshold"), "{}", minor.reason);

    // A trusted caller (dev mode acts for every user) may write it as is; the history says so.
    let bypassed = remember(&node, &me, draft(MemoryType::ActionItem, "记得买咖啡豆", 1), true)
        .await
        .unwrap();
    assert_eq!(bypassed.outcome, WriteOutcome::Created as i32, "{bypassed:?}");
    let id = bypassed.memory.unwrap().id;
    let history = node
        .km()
        .get_memory_history(GetMemoryHistoryRequest {
            scope: Some(me.clone()),
            memory_id: id,
            all_roles: false,
        })
        .await
        .unwrap()
        .into_inner()
        .changes;
    assert!(
        history[0].reason.contains("admission bypassed by key dev"),
        "{:?}",
        history[0].reason
    );

    // A correction's new content is admitted too.
    let budget = remember(&node, &me, draft(MemoryType::Constraint, "项目预算是5万元", 4), false)
        .await
        .unwrap()
        .memory
        .unwrap();
    let err = node
        .km()
        .correct_memory(CorrectMemoryRequest {
            scope: Some(me.clone()),
            memory_id: budget.id.clone(),
            action: CorrectionAction::Replace as i32,
            new_content: "预算待定".into(),
            ..Default::default()
        })
        .await
        .expect_err("a temporary state is not a memory, corrected or not");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().starts_with("new_content"), "{}", err.message());
    node.stop().await;
}

/// A key that may act for one user only may not bypass admission.
async fn only_trusted_keys_bypass_admission(backend: Backend) {
    let Some(node) = start(backend, |config| {
        config.auth.mode = AuthMode::ApiKey;
        config.auth.keys = vec![nodes::api_key("acme", &["alice"], "alice-only")];
    })
    .await
    else {
        return;
    };
    let mut km =
        thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient::with_interceptor(
            node.channel.clone(),
            KeyInterceptor("alice-only"),
        );
    let err = km
        .remember(RememberRequest {
            scope: Some(scope("alice", "cto")),
            memory: Some(draft(MemoryType::ActionItem, "记得买咖啡豆", 1)),
            bypass_admission: true,
            ..Default::default()
        })
        .await
        .expect_err("a user's own key is not trusted to bypass admission");
    assert_eq!(err.code(), Code::PermissionDenied);
    node.stop().await;
}

/// The memories injected into a turn's prompt are passed as ids; a memory learned from the
/// turn that repeats one of them is an echo, compared by content.
async fn echoes_of_injected_memories_are_not_learned(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("chain-echo", "designer");
    let remembered = remember(
        &node,
        &me,
        draft(MemoryType::UserPreference, "我喜欢简约的设计风格，不要太花哨", 4),
        false,
    )
    .await
    .unwrap()
    .memory
    .unwrap();
    let mut client = gateway(&node);
    let turn = |request_id: &str, injected: Vec<String>| CompleteTurnRequest {
        scope: Some(me.clone()),
        user_message: "我喜欢简约的设计风格，不要太花哨。".into(),
        assistant_message: "好的。".into(),
        request_id: request_id.into(),
        injected_memory_ids: injected,
        wait_for_learning: true,
        ..Default::default()
    };
    let echoed = client
        .complete_turn(turn("echo-1", vec![remembered.id.clone()]))
        .await
        .unwrap()
        .into_inner()
        .learning
        .expect("the learning job, waited for");
    assert_eq!(echoed.status, JobStatus::Succeeded as i32, "{echoed:?}");
    let report = echoed.learned.expect("a learn report");

    assert!(report.candidates >= 1, "{report:?}");
    assert_eq!(
        (report.written, report.reinforced),
        (0, 0),
        "an echo of an injected memory writes nothing: {report:?}"
    );
    assert!(report.rejected >= 1, "{report:?}");

    // The same turn without the injected ids is learned (the echo check is what held it back).
    let repeated = client
        .complete_turn(turn("echo-2", Vec::new()))
        .await
        .unwrap()
        .into_inner()
        .learning
        .unwrap()
        .learned
        .unwrap();
    assert_eq!(repeated.rejected, 0, "{repeated:?}");
    assert_eq!(repeated.written + repeated.reinforced, 1, "{repeated:?}");
    node.stop().await;
}

/// A not-memorable exchange is neither learned nor summarised (the summary would offer its
/// decisions to the knowledge manager).
async fn not_memorable_exchanges_are_not_summarised(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("chain-private", "cto");
    let mut client = gateway(&node);
    let completed = client
        .complete_turn(CompleteTurnRequest {
            scope: Some(me.clone()),
            user_message: "工作流执行上下文：我们决定用Stripe做支付".into(),
            assistant_message: "已完成第1步".into(),
            not_memorable: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        completed.job_ids.len(),
        1,
        "the learn job only, no summary job: {completed:?}"
    );
    let memorable = client
        .complete_turn(CompleteTurnRequest {
            scope: Some(me.clone()),
            user_message: "我们决定用Stripe做支付".into(),
            assistant_message: "好的".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(memorable.job_ids.len(), 2, "learn and summarise: {memorable:?}");
    node.stop().await;
}

/// A value said earlier but learned later (two workers, a late import) does not undo the
/// value said after it: it is written already replaced.
async fn an_older_value_learned_late_stays_replaced(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("chain-order", "cfo");
    let learn = |text: &str, seconds_ago: i64, id: &str| LearnFromConversationRequest {
        scope: Some(me.clone()),
        messages: vec![Message {
            role: "user".into(),
            content: text.into(),
            created_at: Some(thinkus_common::convert::timestamp(
                chrono::Utc::now() - chrono::Duration::seconds(seconds_ago),
            )),
            ..Default::default()
        }],
        engine: Engine::Rules as i32,
        request_id: id.into(),
        ..Default::default()
    };
    let later = node
        .km()
        .learn_from_conversation(learn("这个项目的预算是$800。", 60, "later"))
        .await
        .unwrap()
        .into_inner();
    let latest = later.results[0].memory.clone().expect("the $800 budget");
    let earlier = node
        .km()
        .learn_from_conversation(learn("这个项目的预算是$500。", 3600, "earlier"))
        .await
        .unwrap()
        .into_inner();
    let old = earlier.results[0].memory.clone().expect("the $500 budget, written");
    assert_eq!(old.status, MemoryStatus::Replaced as i32, "{old:?}");
    assert_eq!(old.superseded_by, latest.id);
    let active = node
        .km()
        .list_memories(ListMemoriesRequest {
            scope: Some(me.clone()),
            types: vec![MemoryType::Constraint as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories;
    assert_eq!(
        active.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        vec![latest.id.as_str()],
        "the value said last stands"
    );
    node.stop().await;
}

/// The default plan of a self-hosted deployment is unlimited; a plan's full role first forgets
/// old low-value memories, then gives up one less important than the new memory, then refuses,
/// and the refusal shows everywhere.
async fn quotas_make_room_then_refuse_visibly(backend: Backend) {
    let Some(node) = start(backend, |config| {
        config.knowledge.quotas.growth = 3;
    })
    .await
    else {
        return;
    };
    let free = scope("chain-unlimited", "cto");
    let quota = node
        .km()
        .get_quota(GetQuotaRequest {
            scope: Some(free.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((quota.plan.as_str(), quota.limit), ("unlimited", 0), "{quota:?}");

    let me = scope("chain-quota", "cto");
    node.km()
        .set_plan(SetPlanRequest {
            scope: Some(me.clone()),
            plan: "growth".into(),
        })
        .await
        .unwrap();
    let least = remember(&node, &me, draft(MemoryType::Risk, "供应商可能延期交货两周", 3), false)
        .await
        .unwrap()
        .memory
        .unwrap();
    for content in ["我们决定前端用Next.js", "我们决定数据库用PostgreSQL"] {
        remember(&node, &me, draft(MemoryType::ProjectDecision, content, 5), false)
            .await
            .unwrap();
    }
    // Full (3 of 3): a more important memory takes the least valuable one's place.
    let placed = remember(
        &node,
        &me,
        draft(MemoryType::ProjectDecision, "我们决定支付用Stripe", 5),
        false,
    )
    .await
    .expect("the least valuable memory makes room");
    assert_eq!(placed.outcome, WriteOutcome::Created as i32, "{placed:?}");
    assert!(
        placed.reason.contains(&least.id),
        "the write names what it gave up: {}",
        placed.reason
    );
    let forgotten = node
        .km()
        .list_memories(ListMemoriesRequest {
            scope: Some(me.clone()),
            statuses: vec![MemoryStatus::Forgotten as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memories;
    assert_eq!(
        forgotten.iter().map(|m| m.id.clone()).collect::<Vec<_>>(),
        vec![least.id.clone()]
    );

    // Full of importance-5 memories: nothing gives way, the write is refused and says why.
    let err = remember(
        &node,
        &me,
        draft(MemoryType::ProjectDecision, "我们决定部署在AWS东京区", 4),
        false,
    )
    .await
    .expect_err("refused");
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(
        err.message().contains("growth") && err.message().contains('3'),
        "{}",
        err.message()
    );
    let refusals = || {
        thinkus_common::metrics::METRICS
            .quota_refusals
            .with_label_values(&["growth"])
            .get()
    };
    let before = refusals();
    let learned = node
        .km()
        .learn_from_conversation(LearnFromConversationRequest {
            scope: Some(me.clone()),
            messages: vec![Message {
                role: "user".into(),
                content: "我们决定用Redis做缓存，因为团队熟悉它。".into(),
                ..Default::default()
            }],
            engine: Engine::Rules as i32,
            request_id: "quota-learn".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(learned.refused, 1, "{learned:?}");
    let refused = learned
        .results
        .iter()
        .find(|r| r.outcome == WriteOutcome::Refused as i32)
        .unwrap();
    assert!(refused.reason.contains("growth"), "{}", refused.reason);
    assert_eq!(refused.draft_type, MemoryType::ProjectDecision as i32);
    assert!(
        refusals() > before,
        "thinkus_quota_refusals_total{{plan=\"growth\"}} counts it"
    );

    // Through the gateway: the job succeeds, and its report lists the refused memory.
    let completed = gateway(&node)
        .complete_turn(CompleteTurnRequest {
            scope: Some(me.clone()),
            user_message: "我们决定用Kafka做消息队列。".into(),
            assistant_message: "好的。".into(),
            request_id: "quota-turn".into(),
            wait_for_learning: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let job = completed.learning.expect("the learning job");
    assert_eq!(job.status, JobStatus::Succeeded as i32);
    let report = job.learned.clone().expect("its report");
    assert_eq!(report.refused, 1, "{report:?}");
    assert!(report.refusals[0].reason.contains("growth"), "{report:?}");
    assert!(!report.refusals[0].summary.is_empty());
    // ListJobs shows the same.
    let listed = gateway(&node)
        .list_jobs(ListJobsRequest {
            scope: Some(me.clone()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .jobs;
    let again = listed.iter().find(|j| j.id == job.id).unwrap();
    assert_eq!(again.learned, job.learned);
    node.stop().await;
}

on_both_backends!(
    every_write_passes_admission,
    only_trusted_keys_bypass_admission,
    echoes_of_injected_memories_are_not_learned,
    not_memorable_exchanges_are_not_summarised,
    an_older_value_learned_late_stays_replaced,
    quotas_make_room_then_refuse_visibly,
);
