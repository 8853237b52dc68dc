//! The knowledge manager's scenarios (issue 4) over gRPC on an all-in-one node with the real
//! local embedder, on SQLite and on PostgreSQL (TEST_DATABASE_URL, a fresh database per test;
//! skipped loudly without it unless THINKUS_REQUIRE_BACKENDS=1).

use thinkus_proto::common::{Engine, MemoryStatus, MemoryType, Message, RetrievalMode, Scope};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{
    ChangeKind, CorrectMemoryRequest, CorrectionAction, GetMemoryHistoryRequest, GetMemoryRequest, IngestTurnsRequest,
    LearnFromConversationRequest, LearnFromConversationResponse, ListMemoriesRequest, MemoryDraft, RememberRequest,
    SetPlanRequest, Turn, WriteOutcome,
};
use thinkus_proto::retriever::RecallRequest;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use thinkus_server::node::NodeHandle;
use thinkus_server::{Config, ServiceKind};
use tonic::Code;
use tonic::transport::Channel;

use crate::{nodes, support};

#[derive(Debug, Clone, Copy)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

/// A running node on the backend, or `None` when PostgreSQL is not configured (skipped).
pub(crate) struct Node {
    pub(crate) handle: NodeHandle,
    pub(crate) channel: Channel,
    pub(crate) _dir: tempfile::TempDir,
}

pub(crate) async fn start(backend: Backend, adjust: impl FnOnce(&mut Config)) -> Option<Node> {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    if let Backend::Postgres = backend {
        let admin = support::server_from_env("TEST_DATABASE_URL", "knowledge manager on PostgreSQL")?;
        config.storage.database = Some(support::fresh_postgres_database(&admin).await);
    }
    adjust(&mut config);
    let handle = nodes::start(config, &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&handle).await;
    Some(Node {
        handle,
        channel,
        _dir: dir,
    })
}

impl Node {
    pub(crate) fn km(&self) -> KnowledgeManagerServiceClient<Channel> {
        KnowledgeManagerServiceClient::new(self.channel.clone())
    }

    /// The node's `server.data_dir` (its SQLite database, vectors and artifacts by default).
    pub(crate) fn data_dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    pub(crate) async fn stop(self) {
        self.handle.shutdown().await.unwrap();
    }
}

pub(crate) fn scope(user: &str, role: &str, project: Option<&str>) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: role.into(),
        project_id: project.unwrap_or_default().into(),
        session_id: String::new(),
        ..Default::default()
    }
}

fn user_says(text: &str) -> Message {
    Message {
        role: "user".into(),
        content: text.into(),
        ..Default::default()
    }
}

async fn learn(node: &Node, scope: &Scope, text: &str, request_id: &str) -> LearnFromConversationResponse {
    learn_messages(node, scope, vec![user_says(text)], request_id).await
}

/// Learns from messages with the rules.
async fn learn_messages(
    node: &Node,
    scope: &Scope,
    messages: Vec<Message>,
    request_id: &str,
) -> LearnFromConversationResponse {
    node.km()
        .learn_from_conversation(LearnFromConversationRequest {
            scope: Some(scope.clone()),
            messages,
            engine: Engine::Rules as i32,
            request_id: request_id.into(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|err| panic!("learn ({request_id}): {err}"))
        .into_inner()
}

/// The ids and statuses of every memory of a user visible to the scope, in any status.
pub(crate) async fn all_memories(node: &Node, scope: &Scope) -> Vec<thinkus_proto::common::Memory> {
    all_memories_at(&node.channel, scope).await
}

/// Every memory of `scope`, in any status, at the knowledge manager behind `channel`.
pub(crate) async fn all_memories_at(channel: &Channel, scope: &Scope) -> Vec<thinkus_proto::common::Memory> {
    KnowledgeManagerServiceClient::new(channel.clone())
        .list_memories(ListMemoriesRequest {
            scope: Some(scope.clone()),
            all_roles: scope.role_id.is_empty(),
            statuses: vec![
                MemoryStatus::Active as i32,
                MemoryStatus::Suppressed as i32,
                MemoryStatus::Frozen as i32,
                MemoryStatus::Replaced as i32,
                MemoryStatus::Forgotten as i32,
            ],
            ..Default::default()
        })
        .await
        .expect("list memories")
        .into_inner()
        .memories
}

async fn recalled_ids(node: &Node, scope: &Scope, query: &str) -> Vec<String> {
    RetrieverServiceClient::new(node.channel.clone())
        .recall(RecallRequest {
            scope: Some(scope.clone()),
            query: query.into(),
            mode: RetrievalMode::Catalog as i32,
            budget_tokens: 4000,
            ..Default::default()
        })
        .await
        .expect("recall")
        .into_inner()
        .catalog
        .into_iter()
        .map(|e| e.id)
        .collect()
}

/// Turns of a conversation, (speaker, text) each.
fn turns_of(turns: &[(&str, &str)]) -> Vec<Turn> {
    turns
        .iter()
        .map(|(speaker, text)| Turn {
            speaker: speaker.to_string(),
            text: text.to_string(),
            ..Default::default()
        })
        .collect()
}

/// Stores a conversation's turns (speaker, text) in the scope's session; their ids in order.
async fn ingest(node: &Node, scope: &Scope, turns: &[(&str, &str)]) -> Vec<String> {
    let mut session = scope.clone();
    session.session_id = "talk".into();
    node.km()
        .ingest_turns(IngestTurnsRequest {
            scope: Some(session),
            turns: turns_of(turns),
            ..Default::default()
        })
        .await
        .expect("ingest turns")
        .into_inner()
        .memory_ids
}

fn created(response: &LearnFromConversationResponse) -> Vec<&thinkus_proto::common::Memory> {
    response
        .results
        .iter()
        .filter(|r| r.outcome == WriteOutcome::Created as i32 || r.outcome == WriteOutcome::ReplacedOlder as i32)
        .filter_map(|r| r.memory.as_ref())
        .collect()
}

async fn preference_is_recalled(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-pref", "designer", Some("site"));
    let learned = learn(&node, &me, "我喜欢简约的设计风格", "pref-1").await;
    let written = created(&learned);
    assert_eq!(written.len(), 1, "{learned:?}");
    assert_eq!(
        written[0].content, "我喜欢简约的设计风格",
        "stored in the user's language"
    );
    assert_eq!(written[0].r#type, MemoryType::UserPreference as i32);
    let ids = recalled_ids(&node, &me, "设计风格").await;
    assert_eq!(ids.first(), Some(&written[0].id), "recall for 设计风格: {ids:?}");
    node.stop().await;
}

/// A conversation learned from later (a replay, a queue that was behind) dates its memories
/// when it was said, not when it was processed: time filters and "who said it last" read it.
async fn learned_memories_keep_when_it_was_said(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-dated", "cfo", Some("shop"));
    let said_at =
        thinkus_common::convert::timestamp(chrono::DateTime::from_timestamp(1_683_554_160, 0).expect("8 May 2023"));
    let dated = Message {
        created_at: Some(said_at),
        ..user_says("I prefer quarterly budget reviews over monthly ones")
    };
    let learned = learn_messages(&node, &me, vec![dated], "dated-1").await;
    let written = created(&learned);
    assert_eq!(written.len(), 1, "{learned:?}");
    assert_eq!(written[0].occurred_at, Some(said_at), "{:?}", written[0]);
    // Without a time, the message was said now.
    let learned = learn(&node, &me, "我喜欢用表格看现金流", "dated-2").await;
    let written = created(&learned);
    assert_eq!(written.len(), 1, "{learned:?}");
    let at = written[0].occurred_at.expect("occurred_at");
    assert!(at.seconds > 1_700_000_000, "{at:?}");
    node.stop().await;
}

async fn similar_preferences_merge(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    for (user, sayings) in [
        (
            "km-merge-zh",
            [
                "我喜欢简约的设计风格",
                "我比较喜欢简约一点的设计风格",
                "设计风格我喜欢简约的",
            ],
        ),
        (
            "km-merge-en",
            [
                "I prefer a minimalist design style",
                "I like a minimalist design style",
                "My preference is a minimalist design style",
            ],
        ),
    ] {
        let me = scope(user, "designer", None);
        let mut outcomes = Vec::new();
        for (i, text) in sayings.iter().enumerate() {
            let learned = learn(&node, &me, text, &format!("{user}-{i}")).await;
            assert_eq!(learned.results.len(), 1, "{text}: {learned:?}");
            outcomes.push(learned.results[0].outcome);
        }
        assert_eq!(
            outcomes,
            vec![
                WriteOutcome::Created as i32,
                WriteOutcome::Reinforced as i32,
                WriteOutcome::Reinforced as i32
            ],
            "{user}"
        );
        let memories = all_memories(&node, &me).await;
        assert_eq!(memories.len(), 1, "{user}: one memory, {memories:?}");
        assert_eq!(memories[0].evidence_count, 3, "{user}");
        assert_eq!(memories[0].content, sayings[0], "{user}: the first wording is kept");
        let history = node
            .km()
            .get_memory_history(GetMemoryHistoryRequest {
                scope: Some(me.clone()),
                memory_id: memories[0].id.clone(),
                all_roles: false,
            })
            .await
            .unwrap()
            .into_inner()
            .changes;
        let evidence = history.iter().filter(|c| c.kind == ChangeKind::Evidence as i32).count();
        assert_eq!(evidence, 2, "{user}: {history:?}");
    }
    // A different preference of the same kind stays its own memory.
    let me = scope("km-merge-zh", "designer", None);
    let learned = learn(&node, &me, "我喜欢深色模式的界面", "km-merge-zh-dark").await;
    assert_eq!(created(&learned).len(), 1, "{learned:?}");
    node.stop().await;
}

/// Near-duplicates written together still merge: two in one conversation (one embedding
/// batch, written in order) and several sent at once (the write path serialises a user's
/// checks, so each one sees the ones committed before it).
async fn near_duplicates_in_one_batch_merge(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-batch-learn", "designer", None);
    let learned = learn_messages(
        &node,
        &me,
        vec![
            user_says("我喜欢简约的设计风格"),
            user_says("我比较喜欢简约一点的设计风格"),
        ],
        "batch-learn",
    )
    .await;
    let outcomes: Vec<i32> = learned.results.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        vec![WriteOutcome::Created as i32, WriteOutcome::Reinforced as i32],
        "{learned:?}"
    );
    let memories = all_memories(&node, &me).await;
    assert_eq!(memories.len(), 1, "one memory: {memories:?}");
    assert_eq!(memories[0].evidence_count, 2);

    let me = scope("km-batch-remember", "designer", None);
    let sayings = [
        "I prefer a minimalist design style",
        "I like a minimalist design style",
        "My preference is a minimalist design style",
    ];
    let writes = (0..6).map(|i| {
        let mut km = node.km();
        let me = me.clone();
        let content = sayings[i % sayings.len()];
        async move {
            km.remember(RememberRequest {
                scope: Some(me),
                memory: Some(MemoryDraft {
                    r#type: MemoryType::UserPreference as i32,
                    content: content.into(),
                    ..Default::default()
                }),
                request_id: format!("batch-remember-{i}"),
                skip_dedup: false,
                bypass_admission: false,
            })
            .await
            .expect("remember")
            .into_inner()
            .result
            .expect("a result")
            .outcome
        }
    });
    let outcomes = futures::future::join_all(writes).await;
    let created = outcomes.iter().filter(|o| **o == WriteOutcome::Created as i32).count();
    assert_eq!(created, 1, "one created, the rest reinforced: {outcomes:?}");
    let memories = all_memories(&node, &me).await;
    assert_eq!(memories.len(), 1, "one memory: {memories:?}");
    assert_eq!(memories[0].evidence_count, 6);
    // Read after write: the memory is recallable at once.
    let recalled = recalled_ids(&node, &me, "design style").await;
    assert!(recalled.contains(&memories[0].id), "{recalled:?}");
    node.stop().await;
}

async fn budget_correction_replaces(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-budget", "cfo", Some("launch"));
    // The conversation is kept turn by turn, as the gateway does, besides what is learnt.
    let said = ingest(
        &node,
        &me,
        &[
            ("user", "这个项目的预算是$500"),
            ("cfo", "记下了，预算$500。"),
            // A record of more than the budget: it stays when the budget changes.
            ("cfo", "汇总一下：预算$500，开业定在12月8日，外包4个人，房租2.8万。"),
        ],
    )
    .await;
    let first = learn(&node, &me, "这个项目的预算是$500", "budget-1").await;
    let old = created(&first);
    assert_eq!(old.len(), 1, "{first:?}");
    let old_id = old[0].id.clone();
    let correction = ingest(&node, &me, &[("user", "预算改成$800了，不是之前说的$500")]).await;
    let second = learn(&node, &me, "预算改成$800了，不是之前说的$500", "budget-2").await;
    let result = second
        .results
        .iter()
        .find(|r| r.outcome == WriteOutcome::ReplacedOlder as i32)
        .unwrap_or_else(|| panic!("the new budget replaces the old one: {second:?}"));
    let new = result.memory.clone().unwrap();
    assert!(new.content.contains("$800"));
    let mut replaced = result.replaced_ids.clone();
    replaced.sort();
    let mut expected = vec![old_id.clone(), said[0].clone(), said[1].clone()];
    expected.sort();
    assert_eq!(replaced, expected, "the old fact and the turns that said $500 only");
    let memories = all_memories(&node, &me).await;
    let status_of = |id: &str| {
        let memory = memories.iter().find(|m| m.id == id).expect("stored");
        (memory.status, memory.superseded_by.clone())
    };
    for turn in &said[..2] {
        assert_eq!(status_of(turn), (MemoryStatus::Replaced as i32, new.id.clone()));
    }
    assert_eq!(
        status_of(&said[2]),
        (MemoryStatus::Active as i32, String::new()),
        "a turn that states more values than the new memory stays"
    );
    assert_eq!(
        status_of(&correction[0]).0,
        MemoryStatus::Active as i32,
        "the correction itself says $800"
    );

    let stored_old = node
        .km()
        .get_memory(GetMemoryRequest {
            scope: Some(me.clone()),
            memory_id: old_id.clone(),
            all_roles: false,
        })
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(stored_old.status, MemoryStatus::Replaced as i32);
    assert_eq!(stored_old.superseded_by, new.id);

    let ids = recalled_ids(&node, &me, "预算是多少").await;
    assert!(ids.contains(&new.id), "$800 is recalled: {ids:?}");
    assert!(!ids.contains(&old_id), "$500 is not recalled: {ids:?}");

    let history = node
        .km()
        .get_memory_history(GetMemoryHistoryRequest {
            scope: Some(me.clone()),
            memory_id: old_id.clone(),
            all_roles: false,
        })
        .await
        .unwrap()
        .into_inner()
        .changes;
    let kinds: Vec<i32> = history.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        vec![ChangeKind::Create as i32, ChangeKind::Supersede as i32],
        "{history:?}"
    );
    assert!(
        history[1].after_json.contains(&new.id),
        "the chain names the new memory"
    );
    node.stop().await;
}

/// Two budgets of one project are two subjects: the CMO's marketing budget does not replace the
/// renovation budget the CFO was told, while a new renovation figure does; and what is known of
/// the project (a fact without the speaker in it) reaches its other roles, a fact about the
/// speaker does not.
async fn two_budgets_and_the_projects_facts(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let cfo = scope("km-budgets", "cfo", Some("store"));
    let cmo = scope("km-budgets", "cmo", Some("store"));
    let single = |response: &LearnFromConversationResponse| {
        let written = created(response);
        assert_eq!(written.len(), 1, "{response:?}");
        written[0].clone()
    };
    let renovation = single(&learn(&node, &cfo, "装修预算35万，包含水电和墙面", "budgets-1").await);
    let marketing = single(&learn(&node, &cmo, "营销预算给你3万，包含物料和线上投放", "budgets-2").await);
    let status = |memories: &[thinkus_proto::common::Memory], id: &str| {
        memories.iter().find(|m| m.id == id).map(|m| m.status).expect("stored")
    };
    let person = scope("km-budgets", "", Some("store"));
    let memories = all_memories(&node, &person).await;
    assert_eq!(
        status(&memories, &renovation.id),
        MemoryStatus::Active as i32,
        "the marketing budget left the renovation budget alone"
    );
    let raised = learn(&node, &cfo, "装修预算加到42万了", "budgets-3").await;
    assert!(
        raised
            .results
            .iter()
            .any(|r| r.outcome == WriteOutcome::ReplacedOlder as i32 && r.replaced_ids.contains(&renovation.id)),
        "a new renovation figure replaces the old one: {raised:?}"
    );
    let memories = all_memories(&node, &person).await;
    assert_eq!(status(&memories, &marketing.id), MemoryStatus::Active as i32);

    let project_fact = single(&learn(&node, &cfo, "Our company has 40 employees across two stores", "facts-1").await);
    assert_eq!(project_fact.r#type, MemoryType::Fact as i32);
    let personal = single(&learn(&node, &cfo, "I live in Leeds with my two kids", "facts-2").await);
    assert_eq!(personal.r#type, MemoryType::Fact as i32);
    let seen_by_cmo: Vec<String> = all_memories(&node, &cmo).await.into_iter().map(|m| m.id).collect();
    assert!(
        seen_by_cmo.contains(&project_fact.id),
        "the project's fact reaches its CMO"
    );
    assert!(!seen_by_cmo.contains(&personal.id), "the CFO's personal fact does not");
    node.stop().await;
}

/// A choice named inside Chinese ("前端用Next.js") is a value: the new choice replaces it.
async fn a_changed_choice_replaces(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-frontend", "cto", Some("site"));
    let first = learn(&node, &me, "我们决定前端用Next.js", "frontend-1").await;
    let old = created(&first);
    assert_eq!(old.len(), 1, "{first:?}");
    let second = learn(&node, &me, "我们决定前端改用Vue", "frontend-2").await;
    let result = second
        .results
        .iter()
        .find(|r| r.outcome == WriteOutcome::ReplacedOlder as i32)
        .unwrap_or_else(|| panic!("Vue replaces Next.js: {second:?}"));
    assert!(result.memory.as_ref().unwrap().content.contains("Vue"));
    assert!(result.replaced_ids.contains(&old[0].id), "{result:?}");
    let active: Vec<String> = all_memories(&node, &me)
        .await
        .into_iter()
        .filter(|m| m.status == MemoryStatus::Active as i32)
        .map(|m| m.content)
        .collect();
    assert!(!active.iter().any(|c| c.contains("Next.js")), "{active:?}");
    node.stop().await;
}

/// Remembers a draft without dedup (admission bypassed if asked); the memory written.
async fn remembered(
    node: &Node,
    scope: &Scope,
    memory: MemoryDraft,
    request_id: &str,
    bypass_admission: bool,
) -> thinkus_proto::common::Memory {
    node.km()
        .remember(RememberRequest {
            scope: Some(scope.clone()),
            memory: Some(memory),
            request_id: request_id.into(),
            skip_dedup: true,
            bypass_admission,
        })
        .await
        .unwrap_or_else(|err| panic!("remember ({request_id}): {err}"))
        .into_inner()
        .result
        .expect("a write's result")
        .memory
        .expect("the memory written")
}

fn draft(content: &str, importance: i32) -> MemoryDraft {
    MemoryDraft {
        r#type: MemoryType::ProjectDecision as i32,
        content: content.into(),
        importance,
        ..Default::default()
    }
}

async fn quota_cleans_up_then_refuses(backend: Backend) {
    // Every low-value memory counts as old, so the cleanup has something to forget.
    let Some(node) = start(backend, |config| config.knowledge.forget_after_days = 0).await else {
        return;
    };
    let me = scope("km-quota", "pm", Some("crm"));
    node.km()
        .set_plan(SetPlanRequest {
            scope: Some(me.clone()),
            plan: "seed".into(),
        })
        .await
        .expect("set plan");
    let remember = |content: String, importance: i32, request_id: String| {
        let mut km = node.km();
        let me = me.clone();
        async move {
            km.remember(RememberRequest {
                scope: Some(me),
                memory: Some(draft(&content, importance)),
                request_id,
                skip_dedup: true,
                // Importance-1 fillers: below the admission threshold, written as a trusted
                // caller's import would (dev mode may act for every user).
                bypass_admission: importance < 3,
            })
            .await
        }
    };
    for i in 0..50 {
        let importance = if i < 10 { 1 } else { 4 };
        remember(
            format!("第{i}号决定：模块{i}采用方案{i}"),
            importance,
            format!("fill-{i}"),
        )
        .await
        .unwrap_or_else(|err| panic!("write {i} within the quota: {err}"));
    }
    // The 51st write makes room by forgetting the ten low-value ones.
    remember("第50号决定：模块50采用方案50".into(), 4, "fill-50".into())
        .await
        .expect("cleanup makes room");
    let forgotten = node
        .km()
        .list_memories(ListMemoriesRequest {
            scope: Some(me.clone()),
            statuses: vec![MemoryStatus::Forgotten as i32],
            ..Default::default()
        })
        .await
        .expect("list forgotten memories")
        .into_inner()
        .memories;
    assert_eq!(forgotten.len(), 10, "the low-value memories were forgotten");
    assert!(forgotten.iter().all(|m| m.importance == 1), "{forgotten:?}");
    for i in 51..60 {
        remember(format!("第{i}号决定：模块{i}采用方案{i}"), 4, format!("fill-{i}"))
            .await
            .unwrap_or_else(|err| panic!("write {i} after the cleanup: {err}"));
    }
    let refused = remember("第60号决定：模块60采用方案60".into(), 4, "fill-60".into())
        .await
        .expect_err("nothing left to clean up");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("seed") && refused.message().contains("50"),
        "names the plan and the limit: {}",
        refused.message()
    );
    node.stop().await;
}

async fn noise_and_not_memorable_write_nothing(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-noise", "cto", Some("bot"));
    for (i, text) in [
        "工作流执行上下文：当前步骤 2/5，输入参数 {{input.x}}",
        "Step 1: call tool search_web; Step 2: summarize the results",
        "我们决定上线时间，尚未确认",
        "{{input.x}} 的预算必须控制在5万以内",
    ]
    .iter()
    .enumerate()
    {
        let learned = learn(&node, &me, text, &format!("noise-{i}")).await;
        assert!(created(&learned).is_empty(), "{text}: {learned:?}");
    }
    let skipped = node
        .km()
        .learn_from_conversation(LearnFromConversationRequest {
            scope: Some(me.clone()),
            messages: vec![user_says("我们决定用Stripe做支付，预算5万")],
            engine: Engine::Rules as i32,
            not_memorable: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(created(&skipped).is_empty(), "{skipped:?}");
    assert!(all_memories(&node, &me).await.is_empty(), "nothing was stored");
    // The same statement without the mark is stored: the checks above can fail.
    let learned = learn(&node, &me, "我们决定用Stripe做支付，预算5万", "noise-real").await;
    assert!(!created(&learned).is_empty(), "{learned:?}");
    node.stop().await;
}

async fn duplicate_request_is_written_once(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-dup", "cto", Some("api"));
    let first = learn(
        &node,
        &me,
        "We decided to use PostgreSQL for the main database.",
        "same-id",
    )
    .await;
    assert_eq!(created(&first).len(), 1, "{first:?}");
    let second = learn(
        &node,
        &me,
        "We decided to use PostgreSQL for the main database.",
        "same-id",
    )
    .await;
    assert!(
        second
            .results
            .iter()
            .all(|r| r.outcome == WriteOutcome::DuplicateRequest as i32),
        "{second:?}"
    );
    assert_eq!(all_memories(&node, &me).await.len(), 1);
    let history = node
        .km()
        .get_memory_history(GetMemoryHistoryRequest {
            scope: Some(me.clone()),
            memory_id: created(&first)[0].id.clone(),
            all_roles: false,
        })
        .await
        .unwrap()
        .into_inner()
        .changes;
    assert_eq!(history.len(), 1, "no evidence update either: {history:?}");
    node.stop().await;
}

async fn corrections(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-correct", "cmo", Some("brand"));
    let mut ids = Vec::new();
    for (i, content) in ["品牌主色用蓝色", "Launch ads on LinkedIn only", "官网字体用思源黑体"]
        .iter()
        .enumerate()
    {
        let written = remembered(&node, &me, draft(content, 4), &format!("correct-{i}"), false).await;
        ids.push((written.id, written.confidence));
    }
    let correct = |memory_id: String, action: CorrectionAction, new_content: &str| {
        let mut km = node.km();
        let me = me.clone();
        let new_content = new_content.to_string();
        async move {
            km.correct_memory(CorrectMemoryRequest {
                scope: Some(me),
                memory_id,
                action: action as i32,
                evidence: "the user said so".into(),
                new_content,
                ..Default::default()
            })
            .await
            .expect("correct")
            .into_inner()
        }
    };
    let suppressed = correct(ids[0].0.clone(), CorrectionAction::Suppress, "")
        .await
        .memory
        .unwrap();
    assert_eq!(suppressed.status, MemoryStatus::Suppressed as i32);
    assert!(
        (suppressed.confidence - (ids[0].1 - 0.3)).abs() < 1e-6,
        "{suppressed:?}"
    );
    let frozen = correct(ids[1].0.clone(), CorrectionAction::Freeze, "")
        .await
        .memory
        .unwrap();
    assert_eq!(frozen.status, MemoryStatus::Frozen as i32);
    let replaced = correct(ids[2].0.clone(), CorrectionAction::Replace, "官网字体改用苹方").await;
    let (old, new) = (replaced.memory.unwrap(), replaced.replacement.unwrap());
    assert_eq!(old.status, MemoryStatus::Replaced as i32);
    assert_eq!(old.superseded_by, new.id);
    assert_eq!(new.content, "官网字体改用苹方");
    let recalled = recalled_ids(&node, &me, "官网字体").await;
    assert!(
        recalled.contains(&new.id) && !recalled.contains(&old.id),
        "{recalled:?}"
    );
    let recalled = recalled_ids(&node, &me, "品牌主色").await;
    assert!(
        !recalled.contains(&ids[0].0),
        "a suppressed memory is not recalled: {recalled:?}"
    );
    node.stop().await;
}

/// Issue 21: a recall in detail answers before its access statistics are written, and the node
/// writes them by the time it stops: three reads count three and boost three times. Reads are
/// not edits: the memory keeps its version.
async fn reads_are_counted_by_the_time_the_node_stops(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-reads", "cfo", Some("books"));
    let written = remembered(&node, &me, draft("The Q3 marketing budget is $800", 3), "reads-1", true).await;
    let store = node.handle.backends.store.clone().expect("the node's database");
    let owner = thinkus_common::model::Owner::new(thinkus_common::model::DEFAULT_TENANT, "km-reads");
    let stored = |store: std::sync::Arc<thinkus_backends::sql::SqlStore>, id: String| {
        let owner = owner.clone();
        async move {
            thinkus_backends::sql::MemoryStore::get_memory(&*store, &owner, &id)
                .await
                .unwrap()
                .expect("still stored")
        }
    };
    let before = stored(store.clone(), written.id.clone()).await;
    let mut reported = Vec::new();
    for _ in 0..3 {
        let details = support::recalled_in_detail(&node.channel, &me, "marketing budget").await;
        let shown = details.iter().find(|d| d.id == written.id).expect("recalled in detail");
        reported.push(shown.freshness);
    }
    assert!(
        reported.windows(2).all(|w| w[0] <= w[1]) && reported[0] > written.freshness,
        "each read reports the freshness it brings: {} then {reported:?}",
        written.freshness
    );
    node.handle.shutdown().await.unwrap();
    let after = stored(store, written.id.clone()).await;
    assert_eq!(
        after.access_count,
        before.access_count + 3,
        "every read is counted by the stop"
    );
    assert!(after.last_accessed_at.is_some());
    // Three boosts of 0.5 (the default), capped at 5; a read reports the freshness its own
    // access brings to what was written before it, so never more than the stored one.
    let expected = (before.freshness + 1.5).min(5.0);
    assert!(
        (after.freshness - expected).abs() < 1e-9,
        "{} vs {expected}",
        after.freshness
    );
    assert!(reported.iter().all(|f| *f <= after.freshness + 1e-9), "{reported:?}");
    assert_eq!(after.version, before.version, "reads leave the version");
    drop(node._dir);
}

async fn changes_for(node: &Node, reader: &Scope) -> Vec<thinkus_proto::knowledge::ValueChange> {
    node.km()
        .list_value_changes(thinkus_proto::knowledge::ListValueChangesRequest {
            scope: Some(reader.clone()),
            limit: 50,
        })
        .await
        .expect("list value changes")
        .into_inner()
        .changes
}

/// Issue 16: a fact the reader may read, replaced by another role's private fact, is listed
/// among the reader's changes as its old value and the day alone: the new value and the
/// sentence that states it are the private fact's, and stay with its role.
async fn a_fact_replaced_privately_names_no_new_value(backend: Backend) {
    use thinkus_proto::common::Visibility;
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    for (user, said, changed, old, new) in [
        (
            "km-replaced-en",
            "The shop's cloud budget is $3,000 a month.",
            "The shop's cloud budget is $4,200 a month now.",
            "$3,000",
            "$4,200",
        ),
        (
            "km-replaced-zh",
            "商城的云预算是每月3万元。",
            "商城的云预算现在是每月4.2万元。",
            "3万元",
            "4.2万元",
        ),
    ] {
        let remember = |role: &str, content: &str, visibility: Visibility, day: &str| RememberRequest {
            scope: Some(scope(user, role, Some("shop"))),
            memory: Some(MemoryDraft {
                r#type: MemoryType::ProjectDecision as i32,
                content: content.into(),
                visibility: visibility as i32,
                occurred_at: thinkus_common::convert::timestamp_opt(Some(
                    chrono::DateTime::parse_from_rfc3339(&format!("{day}T10:00:00Z"))
                        .unwrap()
                        .to_utc(),
                )),
                ..Default::default()
            }),
            request_id: format!("{user}-{role}"),
            skip_dedup: false,
            bypass_admission: true,
        };
        let first = node
            .km()
            .remember(remember("cto", said, Visibility::Project, "2026-11-02"))
            .await
            .expect("remember")
            .into_inner()
            .result
            .unwrap();
        let second = node
            .km()
            .remember(remember("cfo", changed, Visibility::Private, "2026-11-05"))
            .await
            .expect("remember")
            .into_inner()
            .result
            .unwrap();
        assert_eq!(
            second.replaced_ids,
            vec![first.memory.unwrap().id],
            "{user}: the test needs the cto's fact replaced: {second:?}"
        );
        let own = changes_for(&node, &scope(user, "cfo", Some("shop"))).await;
        assert!(
            own.iter().any(|c| c.old_value == old && c.new_value == new),
            "{user}: {own:?}"
        );
        let other = changes_for(&node, &scope(user, "cto", Some("shop"))).await;
        let change = other
            .iter()
            .find(|c| c.old_value == old)
            .unwrap_or_else(|| panic!("{user}: {other:?}"));
        assert_eq!(
            (
                change.new_value.as_str(),
                change.statement.as_str(),
                change.memory_id.as_str()
            ),
            ("", "", ""),
            "{user}: the cfo's private fact reached the cto: {change:?}"
        );
        assert!(change.changed_at.is_some(), "{change:?}");
    }
    node.stop().await;
}

/// Issue 16: a change of value says which session it was said in and the sentence that says it,
/// so that the next session can start from what changed in the last one.
async fn value_changes_say_where_and_how(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let me = scope("km-changes", "cfo", Some("venue"));
    ingest(
        &node,
        &me,
        &[
            ("user", "The venue deposit is £2,000, due Friday."),
            ("assistant", "Noted."),
            (
                "user",
                "Quick one. We raised the venue deposit from £2,000 to £2,500 after the walkthrough. Parking is included.",
            ),
        ],
    )
    .await;
    let changes = node
        .km()
        .list_value_changes(thinkus_proto::knowledge::ListValueChangesRequest {
            scope: Some(me.clone()),
            limit: 10,
        })
        .await
        .expect("list value changes")
        .into_inner()
        .changes;
    let raised = changes
        .iter()
        .find(|c| c.old_value == "£2,000")
        .unwrap_or_else(|| panic!("{changes:?}"));
    assert_eq!(raised.new_value, "£2,500");
    assert_eq!(raised.session_id, "talk");
    assert_eq!(
        raised.statement,
        "We raised the venue deposit from £2,000 to £2,500 after the walkthrough."
    );
    node.stop().await;
}

/// Issue 16: a reply that carries out the change its message asked for (the new value said in
/// the message or not), or a proposal the message accepted, replaces the old value; a reply to
/// a plain question does not.
async fn a_reply_that_carries_out_a_change_replaces_the_old_value(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    for (user, turns, old, new) in [
        (
            "km-reply-zh",
            vec![
                ("user", "春节通道12月18日上线。"),
                ("assistant", "好的，12月18日上线。"),
                ("user", "上线往后挪一周吧，iOS 来不及"),
                ("assistant", "好，上线改到12月25日（周五）。"),
            ],
            "12月18日",
            "12月25日",
        ),
        (
            "km-reply-en",
            vec![
                ("user", "The lease signing is on 12 March with Fenwick."),
                ("assistant", "Noted: signing on 12 March."),
                ("user", "push the signing a week, legal needs time"),
                ("assistant", "Done: the signing moved to 19 March."),
            ],
            "12 March",
            "19 March",
        ),
        (
            "km-reply-accepted",
            vec![
                ("user", "The offsite budget is $5,000."),
                ("assistant", "Noted: offsite budget $5,000."),
                ("user", "the venue we like is pricier, what would you do?"),
                ("assistant", "I'd raise the budget to cover the venue. Shall I?"),
                ("user", "ok, do that"),
                ("assistant", "Done: the offsite budget is now $6,500."),
            ],
            "$5,000",
            "$6,500",
        ),
        // Accepted, then something more in the same message: the acceptance stands.
        (
            "km-reply-accepted-and-more",
            vec![
                ("user", "The offsite budget is $5,000."),
                ("assistant", "Noted: offsite budget $5,000."),
                ("user", "the venue we like is pricier, what would you do?"),
                ("assistant", "I'd raise the budget to cover the venue. Shall I?"),
                ("user", "yep do that. and keep the catering as it is"),
                ("assistant", "Done: the offsite budget is now $6,500."),
            ],
            "$5,000",
            "$6,500",
        ),
        // The proposal names its figure before it is accepted: the reply carrying it out is
        // read against what was said before the proposal.
        (
            "km-reply-proposed-en",
            vec![
                ("user", "The offsite budget is $5,000."),
                ("assistant", "Noted: offsite budget $5,000."),
                ("user", "the venue we like is pricier, what would you do?"),
                (
                    "assistant",
                    "I'd raise the offsite budget to $6,500 to cover the venue. Shall I?",
                ),
                ("user", "ok, do that"),
                ("assistant", "Done: the offsite budget is $6,500 in the plan."),
            ],
            "$5,000",
            "$6,500",
        ),
        (
            "km-reply-proposed-zh",
            vec![
                ("user", "达人投放预算8万。"),
                ("assistant", "好的，投放预算8万。"),
                ("user", "预算还能加一点，你看怎么调"),
                ("assistant", "建议投放预算加到12万，多出的4万给小红书。"),
                ("user", "好"),
                ("assistant", "好，投放预算按12万执行，投放计划今天更新。"),
            ],
            "8万",
            "12万",
        ),
        // The message states the new value without a verb of change by it; the reply's is
        // read against what was said before the message.
        (
            "km-reply-restated-en",
            vec![
                ("user", "The venue fee is $2,000."),
                ("assistant", "Noted: venue fee $2,000."),
                (
                    "user",
                    "That changed again. Finance ran the numbers overnight: we settle at $2,400.",
                ),
                (
                    "assistant",
                    "Done: I updated the venue fee to $2,400 in the budget sheet.",
                ),
            ],
            "$2,000",
            "$2,400",
        ),
        (
            "km-reply-restated-zh",
            vec![
                ("user", "首发价59元一盒。"),
                ("assistant", "好的，首发价59元。"),
                ("user", "这个又变了。昨晚跟财务算了一遍，毛利扛不住，最后定55元。"),
                ("assistant", "好，首发价改为55元，贴纸也按55元做。"),
            ],
            "59元",
            "55元",
        ),
    ] {
        let me = scope(user, "pm", Some("launch"));
        ingest(&node, &me, &turns).await;
        let changes = changes_for(&node, &me).await;
        assert!(
            changes.iter().any(|c| c.old_value == old && c.new_value == new),
            "{user}: {changes:?}"
        );
        // The same reply to a plain question is not read for values it implies.
        let other = scope(&format!("{user}-asked"), "pm", Some("launch"));
        let reply = turns.last().expect("a reply");
        ingest(
            &node,
            &other,
            &[turns[0], turns[1], ("user", "What do you think?"), *reply],
        )
        .await;
        let changes = changes_for(&node, &other).await;
        assert!(
            !changes.iter().any(|c| c.old_value == old),
            "{user}: a reply to a question changed a value: {changes:?}"
        );
    }
    node.stop().await;
}

/// Issue 16: a change said in another role's private exchange of the same project strikes the
/// old value for a reader who read it, as the old value and the day alone; a value said to
/// that role alone, or outside the project, stays that role's.
async fn a_change_said_privately_reaches_who_read_the_old_value(backend: Backend) {
    use thinkus_proto::common::Visibility;
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let user = "km-private-change";
    let said = |role: &str, project: Option<&str>, visibility: Visibility, turns: &[(&str, &str)]| {
        let mut session = scope(user, role, project);
        session.session_id = format!("{role}-{}", turns.len());
        IngestTurnsRequest {
            scope: Some(session),
            turns: turns_of(turns),
            visibility: visibility as i32,
            ..Default::default()
        }
    };
    for request in [
        said(
            "hr",
            Some("hiring"),
            Visibility::Project,
            &[("user", "Aiko's final panel is on 11 March at 1pm.")],
        ),
        said(
            "cto",
            Some("hiring"),
            Visibility::Private,
            &[
                ("user", "Between us: my side budget for the rig is $9,000."),
                ("assistant", "Noted, $9,000 for the rig."),
                ("user", "push the panel a week, and raise the rig budget to $12,000"),
                ("assistant", "Done: the panel moved to 18 March."),
            ],
        ),
        said(
            "cto",
            None,
            Visibility::Private,
            &[
                ("user", "My sabbatical starts on 2 June."),
                ("user", "I moved my sabbatical to 9 June."),
            ],
        ),
    ] {
        node.km().ingest_turns(request).await.expect("ingest turns");
    }
    let cto = changes_for(&node, &scope(user, "cto", Some("hiring"))).await;
    assert!(
        cto.iter()
            .any(|c| c.old_value == "11 March" && c.new_value == "18 March"),
        "the test needs the cto's change: {cto:?}"
    );
    let hr = changes_for(&node, &scope(user, "hr", Some("hiring"))).await;
    let panel = hr
        .iter()
        .find(|c| c.old_value == "11 March")
        .unwrap_or_else(|| panic!("hr read 11 March: {hr:?}"));
    assert_eq!(
        (
            panel.new_value.as_str(),
            panel.statement.as_str(),
            panel.memory_id.as_str(),
            panel.session_id.as_str()
        ),
        ("", "", "", ""),
        "the cto's private exchange reached hr: {panel:?}"
    );
    assert!(panel.changed_at.is_some());
    assert!(
        !hr.iter()
            .any(|c| c.old_value.contains("9,000") || c.old_value.contains("June")),
        "a value said to the cto alone reached hr: {hr:?}"
    );

    // A new value the reader reads already, in a memory of the project learned from the same
    // message, comes with the change, in that memory's words.
    let at = |seconds: i64| Some(prost_types::Timestamp { seconds, nanos: 0 });
    let t = 1_804_000_000;
    let timed = |request: IngestTurnsRequest, seconds: i64| IngestTurnsRequest {
        turns: request
            .turns
            .into_iter()
            .map(|turn| Turn {
                occurred_at: at(seconds),
                ..turn
            })
            .collect(),
        ..request
    };
    for request in [
        timed(
            said(
                "hr",
                Some("hiring"),
                Visibility::Project,
                &[("user", "The welcome kits: 20,000 samples for the launch.")],
            ),
            t,
        ),
        timed(
            said(
                "sales",
                Some("hiring"),
                Visibility::Private,
                &[(
                    "user",
                    "the kits are too many, cut them from 20,000 samples to 15,000 samples",
                )],
            ),
            t + 3600,
        ),
        timed(
            said(
                "sales",
                Some("hiring"),
                Visibility::Project,
                &[("user", "Welcome kits cut to 15,000 samples.")],
            ),
            t + 3600,
        ),
    ] {
        node.km().ingest_turns(request).await.expect("ingest turns");
    }
    let hr = changes_for(&node, &scope(user, "hr", Some("hiring"))).await;
    let kits = hr
        .iter()
        .find(|c| c.old_value == "20,000 samples")
        .unwrap_or_else(|| panic!("hr read 20,000 samples: {hr:?}"));
    assert_eq!(
        (
            kits.new_value.as_str(),
            kits.statement.as_str(),
            kits.memory_id.as_str()
        ),
        ("15,000 samples", "Welcome kits cut to 15,000 samples.", ""),
        "{kits:?}"
    );
    node.stop().await;
}

on_both_backends!(
    a_change_said_privately_reaches_who_read_the_old_value,
    a_reply_that_carries_out_a_change_replaces_the_old_value,
    a_fact_replaced_privately_names_no_new_value,
    reads_are_counted_by_the_time_the_node_stops,
    value_changes_say_where_and_how,
    preference_is_recalled,
    learned_memories_keep_when_it_was_said,
    similar_preferences_merge,
    near_duplicates_in_one_batch_merge,
    budget_correction_replaces,
    two_budgets_and_the_projects_facts,
    a_changed_choice_replaces,
    quota_cleans_up_then_refuses,
    noise_and_not_memorable_write_nothing,
    duplicate_request_is_written_once,
    corrections,
);
