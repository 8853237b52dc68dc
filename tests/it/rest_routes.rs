//! The REST routes of issue 19 end to end, with API keys for two tenants: artifacts (store,
//! every locator, compact), session summaries (generate, get, list), the candidate queue,
//! pending conflicts, a memory's history, the standing context, Markdown export and import.
//! Every route answers another tenant's id NOT_FOUND and another tenant's user PERMISSION_DENIED.

use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{Value, json};
use thinkus_server::ServiceKind;

use crate::support::KeyInterceptor;
use crate::{nodes, support};

const ACME: &str = "acme-key";
const GLOBEX: &str = "globex-key";
/// Globex's own "alice": the same user id in another tenant is another person.
const GLOBEX_ALICE: &str = "globex-alice-key";

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn send(&self, key: &str, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let response = request.bearer_auth(key).send().await.expect("the facade answers");
        let status = response.status();
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    async fn get(&self, key: &str, path: &str) -> (StatusCode, Value) {
        self.send(key, self.http.get(format!("{}{path}", self.base))).await
    }

    async fn post(&self, key: &str, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(key, self.http.post(format!("{}{path}", self.base)).json(&body))
            .await
    }

    /// A call that must succeed; its body.
    async fn ok(&self, key: &str, method: &str, path: &str, body: Value) -> Value {
        let (status, answer) = match method {
            "GET" => self.get(key, path).await,
            _ => self.post(key, path, body).await,
        };
        assert_eq!(status, StatusCode::OK, "{method} {path}: {answer}");
        answer
    }
}

fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routes_people_and_tools_use() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::keyed_config(dir.path(), nodes::two_tenant_keys(ACME, GLOBEX, GLOBEX_ALICE));
    let port = support::free_port();
    config.gateway.rest_listen = format!("127.0.0.1:{port}");
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let api = Api {
        http: reqwest::Client::new(),
        base: format!("http://127.0.0.1:{port}"),
    };

    // Artifacts: store, read by every locator, compact.
    let report =
        json!({"items": [{"name": "payments", "status": "failing"}, {"name": "search", "status": "ok"}], "total": 2});
    let stored = api
        .ok(
            ACME,
            "POST",
            "/api/artifacts",
            json!({"userId": "alice", "sessionId": "s1", "projectId": "shop", "toolCallId": "call-1",
                   "toolName": "health_check", "path": "reports/health.json", "content": serde_json::to_string_pretty(&report).unwrap(),
                   "metadata": {"source": "ci", "attempt": 2}}),
        )
        .await;
    let artifact = stored["artifact"]["id"].as_str().expect("an id").to_string();
    assert_eq!(stored["artifact"]["kind"], "json", "{stored}");
    assert_eq!(stored["artifact"]["metadata"]["attempt"], "2");
    assert!(
        stored["compact"]["rendered"].as_str().unwrap().contains(&artifact),
        "{stored}"
    );
    let whole = api
        .ok(
            ACME,
            "GET",
            &format!("/api/artifacts/{artifact}?userId=alice"),
            Value::Null,
        )
        .await;
    assert!(whole["content"].as_str().unwrap().contains("\"payments\""), "{whole}");
    let lines = api
        .ok(
            ACME,
            "GET",
            &format!("/api/artifacts/{artifact}?userId=alice&lines=1-2"),
            Value::Null,
        )
        .await;
    assert_eq!(
        (lines["start"].as_u64(), lines["end"].as_u64()),
        (Some(1), Some(2)),
        "{lines}"
    );
    let matched = api
        .ok(
            ACME,
            "GET",
            &format!("/api/artifacts/{artifact}?userId=alice&jsonPath=%24.items%5B0%5D.status"),
            Value::Null,
        )
        .await;
    assert!(matched["content"].as_str().unwrap().contains("failing"), "{matched}");
    let found = api
        .ok(
            ACME,
            "GET",
            &format!("/api/artifacts/{artifact}?userId=alice&search=search"),
            Value::Null,
        )
        .await;
    assert!(found["matches"].as_u64().unwrap() >= 1, "{found}");
    let bytes = api
        .ok(
            ACME,
            "GET",
            &format!("/api/artifacts/{artifact}?userId=alice&bytes=0-1"),
            Value::Null,
        )
        .await;
    assert_eq!(bytes["content"], "{", "{bytes}");
    let compact = api
        .ok(
            ACME,
            "GET",
            &format!("/api/artifacts/{artifact}/compact?userId=alice&lang=zh"),
            Value::Null,
        )
        .await;
    assert_eq!(compact["compact"]["language"], "zh", "{compact}");
    assert_eq!(compact["artifact"]["path"], "reports/health.json");
    let binary = api
        .ok(
            ACME,
            "POST",
            "/api/artifacts",
            json!({"userId": "alice", "sessionId": "s1", "mimeType": "application/octet-stream",
                   "contentBase64": base64::engine::general_purpose::STANDARD.encode([0u8, 159, 146, 150])}),
        )
        .await;
    let binary_id = binary["artifact"]["id"].as_str().unwrap();
    let read = api
        .ok(
            ACME,
            "GET",
            &format!("/api/artifacts/{binary_id}?userId=alice"),
            Value::Null,
        )
        .await;
    assert_eq!(
        read["dataBase64"],
        base64::engine::general_purpose::STANDARD.encode([0u8, 159, 146, 150]),
        "{read}"
    );
    let (status, body) = api
        .get(
            ACME,
            &format!("/api/artifacts/{artifact}?userId=alice&lines=1-2&search=x"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = api
        .get(ACME, &format!("/api/artifacts/{artifact}?userId=alice&lines=9-2"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_message(&body).starts_with("lines"), "{body}");
    let (status, body) = api
        .post(ACME, "/api/artifacts", json!({"userId": "alice", "sessionId": "s1"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_message(&body).starts_with("content"), "{body}");

    // Session summaries: generate, get, list.
    let summarized = api
        .ok(
            ACME,
            "POST",
            "/api/session/summary",
            json!({"userId": "alice", "roleId": "cto", "projectId": "shop", "sessionId": "s1", "messages": [
                {"role": "user", "content": "我们今天讨论商城的技术方案。"},
                {"role": "user", "content": "我们决定前端用Next.js，支付用Stripe。"},
                {"role": "assistant", "content": "好的，前端Next.js，支付Stripe。下一步我来写技术方案文档。"}
            ]}),
        )
        .await;
    let summary_id = summarized["summary"]["id"].as_str().expect("a summary").to_string();
    assert_eq!(summarized["messagesRead"], 3, "{summarized}");
    let text = summarized["summary"].to_string();
    assert!(text.contains("Next.js"), "{summarized}");
    let got = api
        .ok(
            ACME,
            "GET",
            "/api/session/summary/s1?userId=alice&render=true",
            Value::Null,
        )
        .await;
    assert_eq!(got["summary"]["id"], summary_id.as_str());
    assert!(
        got["rendered"]["markdown"].as_str().unwrap().contains("Next.js"),
        "{got}"
    );
    let listed = api
        .ok(
            ACME,
            "GET",
            "/api/session/summaries?userId=alice&projectId=shop&limit=5",
            Value::Null,
        )
        .await;
    assert_eq!(listed["summaries"][0]["id"], summary_id.as_str(), "{listed}");
    let (status, body) = api
        .post(
            ACME,
            "/api/session/summary",
            json!({"userId": "alice", "sessionId": "s2", "messages": [{"role": "boss", "content": "x"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_message(&body).starts_with("messages[0].role"), "{body}");

    // Memories: a sure value, an unsure one held as a conflict, a line queued by admission.
    let files = api
        .ok(ACME, "GET", "/api/memory/export?userId=alice&lang=en", Value::Null)
        .await;
    let mut files: Vec<Value> = files["files"].as_array().unwrap().clone();
    for file in &mut files {
        if file["path"] == "BOSS.md" {
            let content = file["content"].as_str().unwrap().replace(
                "## Rules and constraints\n\n",
                "## Rules and constraints\n\n- Every report ends with a list of risks\n",
            );
            let content = content.replace(
                "## Preferences\n\n",
                "## Preferences\n\n- For now I prefer short answers\n",
            );
            file["content"] = Value::String(content);
        }
    }
    let imported = api
        .ok(
            ACME,
            "POST",
            "/api/memory/import",
            json!({"userId": "alice", "roleId": "cto", "files": files}),
        )
        .await;
    assert_eq!(
        (imported["created"].as_u64(), imported["queued"].as_u64()),
        (Some(1), Some(1)),
        "{imported}"
    );
    let rule_id = imported["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["action"] == "create")
        .and_then(|c| c["memoryId"].as_str())
        .expect("the new rule")
        .to_string();
    let history = api
        .ok(
            ACME,
            "GET",
            &format!("/api/memory/{rule_id}/history?userId=alice&allRoles=true"),
            Value::Null,
        )
        .await;
    assert_eq!(history["changes"][0]["actor"], "import", "{history}");
    assert_eq!(history["changes"][0]["kind"], "create");
    // No role and no person's view: an empty role is no wildcard (issue 17, role privacy).
    let (status, answer) = api
        .get(ACME, &format!("/api/memory/{rule_id}/history?userId=alice"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(error_message(&answer).starts_with("roleId"), "{answer}");
    let standing = api
        .ok(ACME, "GET", "/api/memory/standing?userId=alice&roleId=cfo", Value::Null)
        .await;
    assert_eq!(
        standing["rules"][0]["id"],
        rule_id.as_str(),
        "a BOSS.md line reaches every role: {standing}"
    );

    let candidates = api
        .ok(
            ACME,
            "GET",
            "/api/memory/candidates?userId=alice&roleId=cto",
            Value::Null,
        )
        .await;
    let queued = candidates["candidates"].as_array().unwrap();
    assert_eq!(queued.len(), 1, "{candidates}");
    assert_eq!(queued[0]["content"], "For now I prefer short answers");
    let candidate = queued[0]["id"].as_str().unwrap().to_string();
    let approved = api
        .ok(
            ACME,
            "POST",
            &format!("/api/memory/candidates/{candidate}/approve"),
            json!({"userId": "alice", "editedContent": "I prefer short answers"}),
        )
        .await;
    assert_eq!(
        approved["result"]["memory"]["content"], "I prefer short answers",
        "{approved}"
    );
    let (status, _) = api
        .post(
            ACME,
            &format!("/api/memory/candidates/{candidate}/reject"),
            json!({"userId": "alice"}),
        )
        .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "already approved");

    let mut km =
        thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient::with_interceptor(
            nodes::channel(&node).await,
            KeyInterceptor(ACME),
        );
    let remember =
        |content: &str, source: thinkus_proto::common::MemorySource| thinkus_proto::knowledge::RememberRequest {
            scope: Some(thinkus_proto::common::Scope {
                user_id: "alice".into(),
                role_id: "cfo".into(),
                project_id: "shop".into(),
                session_id: String::new(),
                tenant_id: String::new(),
            }),
            memory: Some(thinkus_proto::knowledge::MemoryDraft {
                r#type: thinkus_proto::common::MemoryType::Constraint as i32,
                content: content.into(),
                source: source as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
    use thinkus_proto::common::MemorySource;
    km.remember(remember("The shop budget is $500", MemorySource::UserInput))
        .await
        .unwrap();
    km.remember(remember("I think the shop budget is $800 now", MemorySource::Inference))
        .await
        .unwrap();
    let conflicts = api
        .ok(
            ACME,
            "GET",
            "/api/memory/conflicts?userId=alice&roleId=cfo&projectId=shop",
            Value::Null,
        )
        .await;
    assert_eq!(
        conflicts["conflicts"][0]["question"], "budget: $500 or $800? unconfirmed",
        "{conflicts}"
    );
    let conflict = conflicts["conflicts"][0]["id"].as_str().unwrap().to_string();
    let (status, body) = api
        .post(
            ACME,
            &format!("/api/memory/conflicts/{conflict}/resolve"),
            json!({"userId": "alice", "keep": "both"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_message(&body).starts_with("keep"), "{body}");

    // Another tenant: its ids are NOT_FOUND for acme's user, its user is PERMISSION_DENIED.
    let theirs = api
        .ok(
            GLOBEX,
            "POST",
            "/api/artifacts",
            json!({"userId": "bob", "sessionId": "b1", "content": "bob's notes"}),
        )
        .await;
    let their_artifact = theirs["artifact"]["id"].as_str().unwrap().to_string();
    api.ok(
        GLOBEX,
        "POST",
        "/api/session/summary",
        json!({"userId": "bob", "roleId": "cto", "sessionId": "b1", "messages": [{"role": "user", "content": "We decided to use Go for the backend."}]}),
    )
    .await;
    let their_files = api
        .ok(GLOBEX, "GET", "/api/memory/export?userId=bob", Value::Null)
        .await;
    let mut their_files: Vec<Value> = their_files["files"].as_array().unwrap().clone();
    for file in &mut their_files {
        if file["path"] == "BOSS.md" {
            let content = file["content"]
                .as_str()
                .unwrap()
                .replace("## Feedback\n\n", "## Feedback\n\n- Reports are too long\n")
                .replace("## Preferences\n\n", "## Preferences\n\n- For now I prefer email\n");
            file["content"] = Value::String(content);
        }
    }
    let their_import = api
        .ok(
            GLOBEX,
            "POST",
            "/api/memory/import",
            json!({"userId": "bob", "files": their_files}),
        )
        .await;
    let their_memory = their_import["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["action"] == "create")
        .and_then(|c| c["memoryId"].as_str())
        .expect("bob's memory")
        .to_string();
    let their_candidate = api
        .ok(GLOBEX, "GET", "/api/memory/candidates?userId=bob", Value::Null)
        .await["candidates"][0]["id"]
        .as_str()
        .expect("bob's candidate")
        .to_string();
    let not_found = [
        (
            "GET",
            format!("/api/artifacts/{their_artifact}?userId=alice"),
            Value::Null,
        ),
        (
            "GET",
            format!("/api/artifacts/{their_artifact}/compact?userId=alice"),
            Value::Null,
        ),
        ("GET", "/api/session/summary/b1?userId=alice".to_string(), Value::Null),
        (
            "GET",
            format!("/api/memory/{their_memory}/history?userId=alice&allRoles=true"),
            Value::Null,
        ),
        (
            "POST",
            format!("/api/memory/candidates/{their_candidate}/approve"),
            json!({"userId": "alice"}),
        ),
        (
            "POST",
            format!("/api/memory/candidates/{their_candidate}/reject"),
            json!({"userId": "alice"}),
        ),
        (
            "POST",
            format!("/api/memory/conflicts/{their_candidate}/resolve"),
            json!({"userId": "alice", "keep": "current"}),
        ),
    ];
    for (method, path, body) in &not_found {
        let (status, answer) = match *method {
            "GET" => api.get(ACME, path).await,
            _ => api.post(ACME, path, body.clone()).await,
        };
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {answer}");
    }
    let forbidden = [
        ("GET", format!("/api/artifacts/{their_artifact}?userId=bob")),
        ("GET", "/api/session/summaries?userId=bob".to_string()),
        ("GET", "/api/memory/candidates?userId=bob".to_string()),
        ("GET", "/api/memory/conflicts?userId=bob".to_string()),
        (
            "GET",
            format!("/api/memory/{their_memory}/history?userId=bob&allRoles=true"),
        ),
        ("GET", "/api/memory/export?userId=bob".to_string()),
        ("GET", "/api/memory/standing?userId=bob&roleId=cto".to_string()),
    ];
    for (_, path) in &forbidden {
        let (status, answer) = api.get(ACME, path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "GET {path}: {answer}");
    }
    let (status, _) = api
        .post(
            ACME,
            &format!("/api/memory/candidates/{their_candidate}/approve"),
            json!({"userId": "bob"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Without a key: UNAUTHENTICATED.
    let response = api
        .http
        .get(format!("{}/api/memory/candidates?userId=alice", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    // Bob's own data is still there and his.
    let (status, _) = api
        .get(GLOBEX, &format!("/api/artifacts/{their_artifact}?userId=bob"))
        .await;
    assert_eq!(status, StatusCode::OK);

    // The same user id in another tenant: globex's alice reaches none of acme's alice's data,
    // and a tenant key may not name another tenant.
    for path in [
        format!("/api/artifacts/{artifact}?userId=alice"),
        format!("/api/memory/{rule_id}/history?userId=alice&allRoles=true"),
        "/api/session/summary/s1?userId=alice".to_string(),
    ] {
        let (status, answer) = api.get(GLOBEX_ALICE, &path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "GET {path}: {answer}");
    }
    let (status, answer) = api
        .post(
            GLOBEX_ALICE,
            &format!("/api/memory/conflicts/{conflict}/resolve"),
            json!({"userId": "alice", "keep": "proposed"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    for path in [
        "/api/memory/candidates?userId=alice",
        "/api/memory/conflicts?userId=alice",
        "/api/session/summaries?userId=alice",
    ] {
        let listed = api.ok(GLOBEX_ALICE, "GET", path, Value::Null).await;
        let items = listed.as_object().unwrap().values().next().unwrap();
        assert_eq!(items.as_array().map(Vec::len), Some(0), "GET {path}: {listed}");
    }
    let exported = api
        .ok(GLOBEX_ALICE, "GET", "/api/memory/export?userId=alice", Value::Null)
        .await;
    assert!(!exported.to_string().contains(&rule_id), "{exported}");
    let (status, answer) = api
        .get(GLOBEX_ALICE, "/api/memory/candidates?userId=alice&tenantId=acme")
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");

    // Resolving alice's conflict now keeps the new value.
    let resolved = api
        .ok(
            ACME,
            "POST",
            &format!("/api/memory/conflicts/{conflict}/resolve"),
            json!({"userId": "alice", "keep": "proposed", "reason": "confirmed by the CFO"}),
        )
        .await;
    assert!(
        resolved["kept"]["content"].as_str().unwrap().contains("$800"),
        "{resolved}"
    );
    assert_eq!(resolved["replacedIds"].as_array().unwrap().len(), 1);
    node.shutdown().await.unwrap();
}
