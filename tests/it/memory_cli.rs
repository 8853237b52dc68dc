//! `thinkus memory …`, the command line for people (issue 19), as a person runs it against a
//! node with API keys of two tenants: human tables by default and JSON with `--json`; list,
//! show, history, correct, suppress, delete, the pending conflicts, the candidate queue
//! (approve, reject), export and import. Another tenant's memory is NOT_FOUND. The database is
//! read afterwards through gRPC.

use serde_json::Value;
use thinkus_proto::common::{MemorySource, MemoryStatus, MemoryType, Scope};
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{GetMemoryRequest, MemoryDraft, RememberRequest};
use thinkus_server::ServiceKind;

use crate::nodes;
use crate::support::KeyInterceptor;

const ACME: &str = "acme-cli-key";
const GLOBEX: &str = "globex-cli-key";

/// Runs `thinkus memory --addr URL --api-key KEY ARGS…`: whether it succeeded, its output and
/// its errors.
async fn thinkus(url: &str, key: &str, args: &[&str]) -> (bool, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_thinkus"))
        .args(["memory", "--addr", url, "--api-key", key])
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .expect("thinkus runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Like [`thinkus`], and it must succeed.
async fn ok(url: &str, key: &str, args: &[&str]) -> String {
    let (success, out, err) = thinkus(url, key, args).await;
    assert!(success, "thinkus memory {args:?} failed:\n{out}\n{err}");
    out
}

async fn json(url: &str, key: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let out = ok(url, key, &args).await;
    serde_json::from_str(&out).unwrap_or_else(|err| panic!("{args:?}: {err}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_fixes_memory_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = nodes::keyed_config(
        dir.path(),
        vec![
            nodes::api_key("acme", &["alice"], ACME),
            nodes::api_key("globex", &["bob"], GLOBEX),
        ],
    );
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let url = node.url();
    let channel = nodes::channel(&node).await;
    let mut km = KnowledgeManagerServiceClient::with_interceptor(channel.clone(), KeyInterceptor(ACME));
    let mut bob_km = KnowledgeManagerServiceClient::with_interceptor(channel, KeyInterceptor(GLOBEX));
    let remember = |user: &str, memory_type: MemoryType, content: &str, source: MemorySource| RememberRequest {
        scope: Some(Scope {
            user_id: user.into(),
            role_id: "cfo".into(),
            project_id: "shop".into(),
            ..Default::default()
        }),
        memory: Some(MemoryDraft {
            r#type: memory_type as i32,
            content: content.into(),
            source: source as i32,
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut ids = Vec::new();
    for (memory_type, content) in [
        (MemoryType::Constraint, "这个项目的预算是$500"),
        (MemoryType::Risk, "供应商可能延期交货"),
        (MemoryType::ActionItem, "周五前把报价单发给财务"),
    ] {
        let written = km
            .remember(remember("alice", memory_type, content, MemorySource::UserInput))
            .await
            .unwrap()
            .into_inner()
            .result
            .unwrap();
        ids.push(written.memory.unwrap().id);
    }
    let (budget, risk, task) = (ids[0].clone(), ids[1].clone(), ids[2].clone());
    let bobs = bob_km
        .remember(remember(
            "bob",
            MemoryType::Constraint,
            "Bob's budget is $9,000",
            MemorySource::UserInput,
        ))
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap()
        .memory
        .unwrap()
        .id;

    // List: a table, and the same as JSON.
    let table = ok(&url, ACME, &["list", "-u", "alice"]).await;
    assert!(
        table.contains("content") && table.contains("这个项目的预算是$500") && table.contains("3 memories"),
        "{table}"
    );
    let listed = json(&url, ACME, &["list", "-u", "alice"]).await;
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    assert!(!table.contains("9,000"));

    // Show, correct, then the history says who and why.
    let shown = ok(&url, ACME, &["show", "-u", "alice", &budget]).await;
    assert!(
        shown.contains(&budget) && shown.contains("这个项目的预算是$500"),
        "{shown}"
    );
    let corrected = ok(
        &url,
        ACME,
        &[
            "correct",
            "-u",
            "alice",
            &budget,
            "--content",
            "这个项目的预算是$800",
            "--evidence",
            "老板确认",
        ],
    )
    .await;
    let replacement = corrected
        .split_whitespace()
        .find(|w| w.starts_with("mem_") && *w != budget)
        .unwrap_or_else(|| panic!("{corrected}"))
        .to_string();
    let history = json(&url, ACME, &["history", "-u", "alice", &budget]).await;
    let last = history.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["actor"], "user:alice", "{history}");
    assert!(last["reason"].as_str().unwrap().contains("老板确认"), "{history}");

    // Suppress and delete.
    let suppressed = ok(&url, ACME, &["suppress", "-u", "alice", &risk]).await;
    assert!(suppressed.contains("suppressed"), "{suppressed}");
    let deleted = ok(&url, ACME, &["delete", "-u", "alice", &task, "--reason", "已完成"]).await;
    assert!(deleted.contains("deleted"), "{deleted}");

    // A pending conflict (an executive's guess) and a candidate (a time-sensitive BOSS.md line
    // read back by an import of the exported folder).
    km.remember(remember(
        "alice",
        MemoryType::Constraint,
        "预算好像改成$900了",
        MemorySource::Inference,
    ))
    .await
    .unwrap();
    let conflicts = ok(&url, ACME, &["conflicts", "-u", "alice"]).await;
    assert!(conflicts.contains("$800 还是 $900"), "{conflicts}");
    let folder = tempfile::tempdir().unwrap();
    let exported = folder.path().join("alice");
    ok(&url, ACME, &["export", "-u", "alice", exported.to_str().unwrap()]).await;
    let boss = exported.join("BOSS.md");
    let text = std::fs::read_to_string(&boss).unwrap();
    assert!(text.contains("## 偏好\n\n"), "{text}");
    std::fs::write(
        &boss,
        text.replace("## 偏好\n\n", "## 偏好\n\n- 这周我想每天早上收到一份简报\n"),
    )
    .unwrap();
    let imported = ok(&url, ACME, &["import", exported.to_str().unwrap()]).await;
    assert!(imported.contains("1 queued"), "{imported}");
    let queue = ok(&url, ACME, &["candidates", "list", "-u", "alice"]).await;
    assert!(
        queue.contains("这周我想每天早上收到一份简报") && queue.contains("预算好像改成$900了"),
        "{queue}"
    );
    let pending = json(&url, ACME, &["candidates", "list", "-u", "alice"]).await;
    let id_of = |content: &str| {
        pending
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["content"] == content)
            .unwrap_or_else(|| panic!("{content} in {pending}"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (briefing, guess) = (id_of("这周我想每天早上收到一份简报"), id_of("预算好像改成$900了"));
    ok(&url, ACME, &["candidates", "approve", "-u", "alice", &briefing]).await;
    ok(
        &url,
        ACME,
        &["candidates", "reject", "-u", "alice", &guess, "--reason", "预算是$800"],
    )
    .await;
    let left = json(&url, ACME, &["candidates", "list", "-u", "alice"]).await;
    assert_eq!(left, serde_json::json!([]), "the queue is empty");

    // Another tenant's memory: NOT_FOUND through every command, and unchanged.
    for args in [
        vec!["show", "-u", "alice", &bobs],
        vec!["history", "-u", "alice", &bobs],
        vec!["suppress", "-u", "alice", &bobs],
        vec!["delete", "-u", "alice", &bobs],
        vec!["correct", "-u", "alice", &bobs, "--content", "$1"],
    ] {
        let (success, out, err) = thinkus(&url, ACME, &args).await;
        assert!(!success, "{args:?}: {out}");
        assert!(err.to_lowercase().contains("not found"), "{args:?}: {err}");
        assert!(!out.contains("9,000") && !err.contains("9,000"), "{args:?}");
    }
    let (success, _, err) = thinkus(&url, ACME, &["list", "-u", "bob"]).await;
    assert!(!success && err.contains("may not act for user"), "{err}");
    let theirs = ok(&url, GLOBEX, &["show", "-u", "bob", &bobs]).await;
    assert!(theirs.contains("Bob's budget is $9,000"), "{theirs}");

    // The database afterwards.
    let read = |id: &str| GetMemoryRequest {
        scope: Some(Scope {
            user_id: "alice".into(),
            ..Default::default()
        }),
        all_roles: true,
        memory_id: id.into(),
    };
    let status = |memory: thinkus_proto::common::Memory| (memory.status, memory.superseded_by, memory.content);
    let old = km.get_memory(read(&budget)).await.unwrap().into_inner().memory.unwrap();
    assert_eq!(
        status(old),
        (
            MemoryStatus::Replaced as i32,
            replacement.clone(),
            "这个项目的预算是$500".into()
        )
    );
    let new = km
        .get_memory(read(&replacement))
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(
        (new.status, new.content.as_str()),
        (MemoryStatus::Active as i32, "这个项目的预算是$800"),
        "the guess was rejected: the corrected value stands"
    );
    let risk = km.get_memory(read(&risk)).await.unwrap().into_inner().memory.unwrap();
    assert_eq!(risk.status, MemoryStatus::Suppressed as i32);
    assert_eq!(
        km.get_memory(read(&task)).await.unwrap_err().code(),
        tonic::Code::NotFound
    );
    let memories = json(&url, ACME, &["list", "-u", "alice"]).await;
    assert!(
        memories
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["content"] == "这周我想每天早上收到一份简报" && m["status"] == "active"),
        "the approved candidate is a memory: {memories}"
    );
    assert!(!memories.to_string().contains("$900"), "{memories}");
    let bobs = bob_km
        .get_memory(GetMemoryRequest {
            scope: Some(Scope {
                user_id: "bob".into(),
                ..Default::default()
            }),
            all_roles: true,
            memory_id: bobs,
        })
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(bobs.status, MemoryStatus::Active as i32);
    node.shutdown().await.unwrap();
}
