//! The gateway end to end (issue 8): a turn completed through the durable queue is recalled in
//! the next turn's context within budget, with a trace; retries are safe; bad input names the
//! field; tenants are rate limited; queued work survives a restart; failing jobs retry with
//! backoff and stay visible; the REST facade maps codes to HTTP statuses.

use std::time::Duration;

use thinkus_proto::common::Scope;
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;
use thinkus_proto::gateway::{
    CompleteTurnRequest, ConverseRequest, JobStatus, ListJobsRequest, PrepareTurnRequest, PrepareTurnResponse,
    TraceItemKind,
};
use thinkus_server::{Config, ServiceKind};
use tonic::Code;
use tonic::transport::Channel;

use crate::nodes;

fn scope(user: &str, session: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: "cto".into(),
        project_id: "shop".into(),
        session_id: session.into(),
        ..Default::default()
    }
}

fn config(dir: &std::path::Path) -> Config {
    let mut config = nodes::embedded_config(dir);
    config.gateway.poll_interval_ms = 20;
    config
}

/// Completes `exchanges` (what the user said, what the assistant answered) one after the other
/// in `scope`, the n-th with request id `{user}-{n}` and, when `dated`, said at 10:0n on
/// 2026-11-03.
async fn complete_exchanges(
    client: &mut GatewayServiceClient<Channel>,
    scope: Scope,
    exchanges: &[(&str, &str)],
    dated: bool,
) {
    for (n, (user, assistant)) in exchanges.iter().enumerate() {
        client
            .complete_turn(CompleteTurnRequest {
                request_id: format!("{}-{n}", scope.user_id),
                scope: Some(scope.clone()),
                user_message: (*user).into(),
                assistant_message: (*assistant).into(),
                occurred_at: if dated {
                    at(&format!("2026-11-03T10:0{n}:00Z"))
                } else {
                    None
                },
                ..Default::default()
            })
            .await
            .unwrap();
    }
}

/// Waits until every job of `user` has left the queue; returns them.
async fn drained(client: &mut GatewayServiceClient<Channel>, user: &str) -> Vec<thinkus_proto::gateway::Job> {
    for _ in 0..600 {
        let jobs = client
            .list_jobs(ListJobsRequest {
                scope: Some(scope(user, "")),
                ..Default::default()
            })
            .await
            .expect("list jobs")
            .into_inner()
            .jobs;
        let open = jobs
            .iter()
            .any(|j| j.status == JobStatus::Pending as i32 || j.status == JobStatus::Running as i32);
        if !jobs.is_empty() && !open {
            return jobs;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the jobs of {user} did not finish within 30 s");
}

/// The context's last-session section, when it has one.
fn last_session(prepared: &PrepareTurnResponse) -> Option<&thinkus_proto::gateway::ContextSection> {
    prepared
        .sections
        .iter()
        .find(|s| s.kind == thinkus_proto::gateway::SectionKind::LastSession as i32)
}

async fn prepare(
    client: &mut GatewayServiceClient<Channel>,
    user: &str,
    message: &str,
    budget: i32,
) -> PrepareTurnResponse {
    client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope(user, "s2")),
            message: message.into(),
            budget_tokens: budget,
            recent_messages: vec!["好的".into()],
            ..Default::default()
        })
        .await
        .expect("prepare a turn")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_turn_is_in_the_next_context_within_budget() {
    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);

    let turn = CompleteTurnRequest {
        scope: Some(scope("dana", "s1")),
        user_message: "我们决定前端用Next.js，因为团队熟悉React。预算上限是5万元。".into(),
        assistant_message: "好的，我记下了：前端采用Next.js，预算5万元。".into(),
        request_id: "turn-1".into(),
        ..Default::default()
    };
    let first = client.complete_turn(turn.clone()).await.unwrap().into_inner();
    assert!(!first.job_ids.is_empty());
    // A retry of the same turn queues nothing new.
    let again = client.complete_turn(turn.clone()).await.unwrap().into_inner();
    assert_eq!(again.job_ids, first.job_ids);
    let jobs = drained(&mut client, "dana").await;
    assert!(jobs.iter().all(|j| j.status == JobStatus::Succeeded as i32), "{jobs:?}");
    // Even once its jobs have run, a retried turn is not learned twice.
    let late = client.complete_turn(turn).await.unwrap().into_inner();
    assert_eq!(late.job_ids, first.job_ids);
    assert_eq!(drained(&mut client, "dana").await.len(), jobs.len());

    let context = prepare(&mut client, "dana", "我们之前定的前端框架是什么？", 0).await;
    let trace = context.trace.clone().unwrap();
    let decision = trace.decision.unwrap();
    assert_eq!(decision.need_memory, thinkus_proto::common::NeedMemory::Yes as i32);
    assert!(context.context.contains("Next.js"), "{}", context.context);
    assert_eq!(context.budget_tokens, 2000);
    assert!(context.tokens_used > 0 && context.tokens_used <= context.budget_tokens);
    let included: Vec<_> = trace.items.iter().filter(|i| i.included).collect();
    assert!(!included.is_empty());
    assert!(
        included
            .iter()
            .all(|i| i.id.starts_with("mem_") && i.score > 0.0 && !i.reason.is_empty())
    );
    assert!(trace.timings_ms.contains_key("controller") && trace.timings_ms.contains_key("retriever"));

    // A time range in which nothing was recorded (the choice was told now, not in 2019):
    // the whole history is searched instead, and the decision's reason says so.
    let dated = prepare(&mut client, "dana", "2019年3月我们定的前端框架是什么？", 0).await;
    let decision = dated.trace.clone().unwrap().decision.unwrap();
    let range = decision.time_range.unwrap();
    assert!(range.start.is_some() && range.end.is_some(), "{range:?}");
    assert!(dated.context.contains("Next.js"), "{}", dated.context);
    assert!(decision.reason.contains("改为检索全部历史"), "{}", decision.reason);
    // A range that holds the memory is kept as it is.
    assert!(
        !context
            .trace
            .clone()
            .unwrap()
            .decision
            .unwrap()
            .reason
            .contains("全部历史")
    );

    // A tight budget is held, whole entries only.
    let tight = prepare(&mut client, "dana", "我们之前定的前端框架和预算是什么？", 100).await;
    assert!(tight.tokens_used <= 100, "{}", tight.tokens_used);

    // Small talk needs no memory: an empty context.
    let thanks = prepare(&mut client, "dana", "谢谢！", 0).await;
    assert!(thanks.context.is_empty());
    assert_eq!(thanks.tokens_used, 0);

    // Another user sees none of it.
    let other = prepare(&mut client, "erin", "我们之前定的前端框架是什么？", 0).await;
    assert!(!other.context.contains("Next.js"), "{}", other.context);

    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_turns_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);
    let good = PrepareTurnRequest {
        scope: Some(scope("dana", "s1")),
        message: "hello".into(),
        ..Default::default()
    };
    let cases = [
        (
            PrepareTurnRequest {
                message: String::new(),
                ..good.clone()
            },
            "message",
        ),
        (
            PrepareTurnRequest {
                budget_tokens: 50,
                ..good.clone()
            },
            "budget_tokens",
        ),
        (
            PrepareTurnRequest {
                budget_tokens: -5,
                ..good.clone()
            },
            "budget_tokens",
        ),
        (
            PrepareTurnRequest {
                scope: Some(scope("dana", "")),
                ..good.clone()
            },
            "scope.session_id",
        ),
        (
            PrepareTurnRequest {
                message: "x".repeat(40_000),
                ..good.clone()
            },
            "message",
        ),
    ];
    for (request, field) in cases {
        let err = client.prepare_turn(request).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
        assert!(err.message().starts_with(field), "{field}: {}", err.message());
    }
    let err = client
        .complete_turn(CompleteTurnRequest {
            scope: Some(scope("dana", "s1")),
            user_message: String::new(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("user_message"), "{}", err.message());

    // Without an LLM, Converse says which setting is missing.
    let err = client
        .converse(ConverseRequest {
            scope: Some(scope("dana", "s1")),
            message: "hi".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("llm.uri"), "{}", err.message());
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_rate_is_told_when_to_retry() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.server.tenant_rate_per_second = 0.5;
    config.server.tenant_rate_burst = 2.0;
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);
    let request = PrepareTurnRequest {
        scope: Some(scope("dana", "s1")),
        message: "谢谢".into(),
        ..Default::default()
    };
    client.prepare_turn(request.clone()).await.unwrap();
    client.prepare_turn(request.clone()).await.unwrap();
    let err = client.prepare_turn(request).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    let retry_after = err.metadata().get("retry-after").expect("a retry-after hint");
    assert!(!retry_after.to_str().unwrap().is_empty());
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_work_survives_a_restart_and_failures_stay_visible() {
    let dir = tempfile::tempdir().unwrap();
    let mut stopped = config(dir.path());
    stopped.gateway.workers = 0;
    let node = nodes::start(stopped, &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);
    let queued = client
        .complete_turn(CompleteTurnRequest {
            scope: Some(scope("frank", "s1")),
            user_message: "I prefer short bullet-point reports over long essays.".into(),
            assistant_message: "Noted.".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    // A job whose input is broken: it must fail visibly after its retries, not vanish.
    let store = node.backends.store.clone().unwrap();
    let now = chrono::Utc::now();
    let broken = thinkus_backends::sql::JobRecord {
        id: thinkus_common::ids::new_id(thinkus_common::ids::IdKind::Job),
        kind: "learn".into(),
        tenant_id: thinkus_common::model::DEFAULT_TENANT.into(),
        user_id: "frank".into(),
        session_id: Some("s1".into()),
        payload: "{not json".into(),
        status: thinkus_backends::sql::JobStatus::Pending,
        attempts: 0,
        max_attempts: 2,
        last_error: None,
        run_after: now,
        lease_until: None,
        dedupe_key: None,
        created_at: now,
        updated_at: now,
        result: None,
    };
    thinkus_backends::sql::JobStore::enqueue(store.as_ref(), &broken)
        .await
        .unwrap();
    drop(store);
    node.shutdown().await.unwrap();

    let mut running = config(dir.path());
    running.gateway.retry_base_ms = 10;
    let node = nodes::start(running, &ServiceKind::ALL, None).await;
    let mut client_after = GatewayServiceClient::new(nodes::channel(&node).await);
    let jobs = drained(&mut client_after, "frank").await;
    for id in &queued.job_ids {
        let job = jobs
            .iter()
            .find(|j| &j.id == id)
            .expect("the queued job is still there");
        assert_eq!(job.status, JobStatus::Succeeded as i32, "{job:?}");
    }
    let failed = jobs
        .iter()
        .find(|j| j.id == broken.id)
        .expect("the broken job is listed");
    assert_eq!(failed.status, JobStatus::Failed as i32);
    assert_eq!(failed.attempts, 2);
    assert!(failed.last_error.contains("payload"), "{}", failed.last_error);
    drop(client);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rest_facade_validates_and_maps_codes() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    let port = crate::support::free_port();
    config.gateway.rest_listen = format!("127.0.0.1:{port}");
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");

    let decided: serde_json::Value = http
        .post(format!("{base}/api/memory/control"))
        .json(&serde_json::json!({"userId": "gina", "roleId": "cfo", "userMessage": "上次我们定的预算是多少？", "messageCount": 3}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(decided["needMemory"], "yes", "{decided}");

    let missing = http
        .post(format!("{base}/api/memory/retrieve"))
        .json(&serde_json::json!({"userId": "", "roleId": "cfo", "query": "预算"}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 400);
    let body: serde_json::Value = missing.json().await.unwrap();
    assert!(
        body["error"]["message"].as_str().unwrap().starts_with("userId"),
        "{body}"
    );

    let wrong_mode = http
        .post(format!("{base}/api/memory/retrieve"))
        .json(&serde_json::json!({"userId": "gina", "roleId": "cfo", "query": "预算", "mode": "everything"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_mode.status(), 400);

    let written: serde_json::Value = http
        .post(format!("{base}/api/memory/write"))
        .json(
            &serde_json::json!({"userId": "gina", "roleId": "cfo", "projectId": "shop",
            "conversation": "user: 预算上限定为5万元，必须在下个月15号前上线\nassistant: 好的"}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!written["memories"].as_array().unwrap().is_empty(), "{written}");

    let recalled: serde_json::Value = http
        .post(format!("{base}/api/memory/retrieve"))
        .json(&serde_json::json!({"userId": "gina", "roleId": "cfo", "projectId": "shop", "query": "预算是多少", "mode": "details"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(recalled["rendered"].as_str().unwrap().contains("5万"), "{recalled}");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_tool_output_is_offloaded_and_read_back() {
    use thinkus_proto::artifact::artifact_service_client::ArtifactServiceClient;
    use thinkus_proto::artifact::{ReadArtifactRequest, read_artifact_request::Locator};
    use thinkus_proto::gateway::ToolCall;

    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;
    let mut client = GatewayServiceClient::new(channel.clone());
    let log = payment_log("2026-11-20");
    let completed = client
        .complete_turn(CompleteTurnRequest {
            scope: Some(scope("hana", "s1")),
            user_message: "Check the payment service log for errors.".into(),
            assistant_message: "One webhook timed out; details in the log.".into(),
            tool_calls: vec![
                ToolCall {
                    id: "call-1".into(),
                    name: "read_log".into(),
                    output: log.clone(),
                    path: "logs/payment.log".into(),
                    ..Default::default()
                },
                ToolCall {
                    id: "call-2".into(),
                    name: "ping".into(),
                    output: "pong".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let offloaded = &completed.tool_calls[0];
    assert!(offloaded.offloaded);
    assert!(offloaded.artifact_id.starts_with("art_"));
    let compact = offloaded.compact.clone().expect("a compact");
    assert!(compact.tokens > 0 && compact.tokens < 500, "{}", compact.tokens);
    assert!(offloaded.original_tokens > 2 * compact.tokens as i32);
    assert_eq!(offloaded.replacement, compact.rendered);
    assert!(compact.rendered.contains("300"), "{}", compact.rendered);
    // A small output stays in the conversation.
    assert!(!completed.tool_calls[1].offloaded);
    assert_eq!(completed.tool_calls[1].replacement, "pong");

    let read = ArtifactServiceClient::new(channel)
        .read_artifact(ReadArtifactRequest {
            scope: Some(scope("hana", "s1")),
            artifact_id: offloaded.artifact_id.clone(),
            locator: Some(Locator::Lines("135-139".into())),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.content.lines().count(), 5);
    assert!(
        read.content.contains("ERROR payment webhook timed out"),
        "{}",
        read.content
    );
    assert_eq!(read.total_lines, 300);

    // Later in the session, a message about the log gets the compact in its context.
    let prepared = client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope("hana", "s1")),
            message: "Which payment log error should we fix first?".into(),
            recent_messages: vec!["Check the payment service log for errors.".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let trace = prepared.trace.unwrap();
    assert!(
        trace
            .items
            .iter()
            .any(|i| i.id == offloaded.artifact_id && i.included && i.kind == TraceItemKind::Artifact as i32),
        "{:?}",
        trace.items
    );
    assert!(prepared.context.contains(&offloaded.artifact_id));
    assert!(prepared.tokens_used <= prepared.budget_tokens);

    // A later session of the project, with another role, finds it by what it holds; a session
    // of another project does not.
    let ask = |role: &str, project: &str| PrepareTurnRequest {
        scope: Some(Scope {
            role_id: role.into(),
            project_id: project.into(),
            ..scope("hana", "s2")
        }),
        message: "The payment webhook in that log timed out, which order was it?".into(),
        ..Default::default()
    };
    let artifact_included = |prepared: &thinkus_proto::gateway::PrepareTurnResponse| {
        prepared.trace.as_ref().unwrap().items.iter().any(|i| {
            i.id == offloaded.artifact_id
                && i.included
                && i.kind == TraceItemKind::Artifact as i32
                && i.reason.contains("earlier session")
        })
    };
    let later = client.prepare_turn(ask("pm", "shop")).await.unwrap().into_inner();
    assert!(artifact_included(&later), "{:?}", later.trace);
    assert!(later.context.contains(&offloaded.artifact_id), "{}", later.context);
    let elsewhere = client.prepare_turn(ask("pm", "blog")).await.unwrap().into_inner();
    assert!(
        !elsewhere.context.contains(&offloaded.artifact_id),
        "{}",
        elsewhere.context
    );
    node.shutdown().await.unwrap();
}

/// A payment service's log of 300 lines on `day`, one of them an error (line 137).
fn payment_log(day: &str) -> String {
    (1..=300)
        .map(|n| match n {
            137 => format!("{day}T10:00:37Z ERROR payment webhook timed out after 30s (order 1137)\n"),
            n => format!(
                "{day}T10:00:{:02}Z INFO processed order {} in {} ms\n",
                n % 60,
                1000 + n,
                20 + n % 7
            ),
        })
        .collect()
}

/// The trace item of artifact `id` in the context prepared for `message`, and the context.
async fn artifact_item(
    client: &mut GatewayServiceClient<Channel>,
    scope: Scope,
    message: &str,
    before: &str,
    id: &str,
) -> (thinkus_proto::gateway::TraceItem, String) {
    let prepared = client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope),
            message: message.into(),
            recent_messages: vec![before.into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let item = prepared
        .trace
        .unwrap()
        .items
        .into_iter()
        .find(|i| i.kind == TraceItemKind::Artifact as i32 && i.id == id)
        .unwrap_or_else(|| panic!("the artifact is considered for {message}"));
    (item, prepared.context)
}

/// A tool output of the session is shown for a message about it, not for a long message that
/// shares one word with it by chance (`gateway.artifact_min_overlap`), in English and Chinese.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_sharing_one_word_with_a_long_message_is_left_out() {
    use thinkus_proto::gateway::ToolCall;

    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);
    let log: String = (1..=300)
        .map(|n| match n {
            212 => "2026-11-20T10:03:32Z ERROR checkout_test.go: TestCheckoutTotal expected 120 got 118\n".to_string(),
            n => format!(
                "2026-11-20T10:03:{:02}Z INFO compiled package shop/module{n} in {} ms\n",
                n % 60,
                20 + n % 7
            ),
        })
        .collect();
    let cases = [
        (
            "ivy",
            "Run the CI for the checkout branch.",
            "Which checkout test failed in that log?",
            "Write three review comments on this refund handler: the timeout's cancel function is \
             dropped, the cache lookup ignores a missing key, the gateway call has no retry, and \
             the checkout branch name should follow our convention.",
        ),
        (
            "jun",
            "跑一下结账分支的 CI。",
            "checkout 日志里哪个测试失败了？",
            "帮我给这个退款函数写几条代码评审意见：超时的取消函数被丢掉了，缓存查询没处理空值，\
             网关调用没有重试，checkout 分支命名也要按我们的规范来。",
        ),
    ];
    for (user, asked, about, unrelated) in cases {
        let completed = client
            .complete_turn(CompleteTurnRequest {
                scope: Some(scope(user, "s1")),
                user_message: asked.into(),
                assistant_message: "Done.".into(),
                tool_calls: vec![ToolCall {
                    id: "call-1".into(),
                    name: "ci".into(),
                    output: log.clone(),
                    path: "ci/checkout.log".into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let id = completed.tool_calls[0].artifact_id.clone();
        assert!(completed.tool_calls[0].offloaded, "{user}");
        let (shown, context) = artifact_item(&mut client, scope(user, "s1"), about, asked, &id).await;
        assert!(shown.included, "{user}: {shown:?}");
        assert!(context.contains(&id), "{user}: {context}");
        let (left_out, context) = artifact_item(&mut client, scope(user, "s1"), unrelated, asked, &id).await;
        assert!(!left_out.included, "{user}: {left_out:?}");
        assert!(!context.contains(&id), "{user}: {context}");
        assert!(
            left_out.reason.contains("least overlap") || left_out.reason.contains("最低重合度"),
            "{user}: {left_out:?}"
        );
        assert!(
            !left_out.reason.contains("over budget") && !left_out.reason.contains("超出预算"),
            "{user}: {left_out:?}"
        );
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_starts_from_the_last_summary() {
    use thinkus_proto::summary::GenerateSummaryRequest;
    use thinkus_proto::summary::summary_service_client::SummaryServiceClient;

    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;
    let mut client = GatewayServiceClient::new(channel.clone());
    complete_exchanges(
        &mut client,
        scope("ivan", "s1"),
        &[
            ("这次的目标是两周内上线会员积分功能。", "好的，我们先梳理需求。"),
            (
                "我们决定积分规则用消费1元得1分，因为财务算得清楚。",
                "明白，已按这个规则设计。",
            ),
            ("下一步需要设计师出积分页面的设计稿。", "我会跟进设计稿。"),
        ],
        false,
    )
    .await;
    drained(&mut client, "ivan").await;
    SummaryServiceClient::new(channel)
        .generate_summary(GenerateSummaryRequest {
            scope: Some(scope("ivan", "s1")),
            ..Default::default()
        })
        .await
        .expect("summarise the first session");

    // The first message of the next session: the last session's summary comes with it.
    let prepared = client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope("ivan", "s2")),
            message: "我们继续吧".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let last = last_session(&prepared).unwrap_or_else(|| panic!("no last-session section in {:?}", prepared.sections));
    assert!(last.text.contains("积分"), "{}", last.text);
    assert!(prepared.tokens_used <= prepared.budget_tokens);
    node.shutdown().await.unwrap();
}

/// Where the services run for a scenario.
enum Layout {
    AllInOne,
    /// Every service its own server (sharing this process's embedded backends, as the embedded
    /// vector index has one owner); the gateway reaches the others over gRPC.
    Distributed,
}

/// Starts the layout; the gateway's channel and the nodes to shut down.
async fn layout(dir: &std::path::Path, layout: Layout) -> (Channel, Vec<thinkus_server::node::NodeHandle>) {
    let config = config(dir);
    match layout {
        Layout::AllInOne => {
            let node = nodes::start(config, &ServiceKind::ALL, None).await;
            (nodes::channel(&node).await, vec![node])
        }
        Layout::Distributed => {
            let all = ServiceKind::ALL.iter().copied().collect();
            let backends = thinkus_server::node::open_backends(&config, &all).await.unwrap();
            let mut config = config;
            let mut started = Vec::new();
            for kind in [
                ServiceKind::MemoryController,
                ServiceKind::KnowledgeManager,
                ServiceKind::Retriever,
                ServiceKind::Artifact,
                ServiceKind::Summary,
            ] {
                let node = nodes::start(config.clone(), &[kind], Some(backends.clone())).await;
                let url = Some(node.url());
                match kind {
                    ServiceKind::MemoryController => config.endpoints.memory_controller = url,
                    ServiceKind::KnowledgeManager => config.endpoints.knowledge_manager = url,
                    ServiceKind::Retriever => config.endpoints.retriever = url,
                    ServiceKind::Artifact => config.endpoints.artifact = url,
                    _ => config.endpoints.summary = url,
                }
                started.push(node);
            }
            let gateway = nodes::start(config, &[ServiceKind::Gateway], Some(backends)).await;
            let channel = nodes::channel(&gateway).await;
            started.push(gateway);
            (channel, started)
        }
    }
}

/// Two sessions with one executive, in Chinese and in English: a preference and a decision are
/// remembered, the budget is corrected, and the next session's context has the latest truth.
async fn two_sessions(layout_kind: Layout) {
    let dir = tempfile::tempdir().unwrap();
    let (channel, started) = layout(dir.path(), layout_kind).await;
    let mut client = GatewayServiceClient::new(channel);
    let user = "kate";
    let turns = [
        ("s1", "我喜欢简约的设计风格，不要太花哨。", "好的，我会保持简约。"),
        (
            "s1",
            "我们决定支付用Stripe，因为它支持海外卡。",
            "明白，支付方案定为Stripe。",
        ),
        ("s1", "这个项目的预算是$500。", "记下了，预算$500。"),
        ("s1", "预算改成$800了，不是之前说的$500。", "好的，预算更新为$800。"),
        (
            "s1",
            "I prefer short bullet-point reports over long essays.",
            "Got it: short bullet points.",
        ),
        (
            "s1",
            "We'll go with PostgreSQL for the orders database.",
            "Noted: PostgreSQL for orders.",
        ),
    ];
    for (n, (session, user_message, assistant)) in turns.into_iter().enumerate() {
        client
            .complete_turn(CompleteTurnRequest {
                scope: Some(scope(user, session)),
                user_message: user_message.into(),
                assistant_message: assistant.into(),
                request_id: format!("{user}-{n}"),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let jobs = drained(&mut client, user).await;
    assert!(jobs.iter().all(|j| j.status == JobStatus::Succeeded as i32), "{jobs:?}");

    let ask = |message: &'static str| {
        let mut client = client.clone();
        async move {
            client
                .prepare_turn(PrepareTurnRequest {
                    scope: Some(scope(user, "s2")),
                    message: message.into(),
                    recent_messages: vec!["继续".into()],
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let budget = ask("我们之前定的预算是多少？").await;
    assert!(budget.context.contains("$800"), "{}", budget.context);
    assert!(
        !budget.context.contains("预算是$500"),
        "the replaced budget is gone: {}",
        budget.context
    );
    let payment = ask("上次我们定的支付方案是什么？").await;
    assert!(payment.context.contains("Stripe"), "{}", payment.context);
    let style = ask("根据我的偏好，首页设计应该走什么风格？").await;
    assert!(style.context.contains("简约"), "{}", style.context);
    let report = ask("Write this week's report the way I like it.").await;
    assert!(report.context.contains("bullet"), "{}", report.context);
    let database = ask("Which database did we pick for orders?").await;
    assert!(database.context.contains("PostgreSQL"), "{}", database.context);
    for prepared in [&budget, &payment, &style, &report, &database] {
        assert!(prepared.tokens_used <= prepared.budget_tokens);
    }
    for node in started {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_all_in_one() {
    two_sessions(Layout::AllInOne).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_distributed() {
    two_sessions(Layout::Distributed).await;
}

fn at(rfc3339: &str) -> Option<prost_types::Timestamp> {
    thinkus_common::convert::timestamp_opt(Some(chrono::DateTime::parse_from_rfc3339(rfc3339).unwrap().to_utc()))
}

/// Issue 16: a value the user replaced later, in a memory or in a raw turn, by either speaker,
/// in either language, never comes back as current: the context shows the new value, and the
/// old one only struck through with the date it changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_value_is_never_shown_as_current() {
    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);
    let cases = [
        (
            "fay",
            [
                ("The budget for the shop is $500.", "Noted: the budget is $500."),
                (
                    "We raised the shop budget from $500 to $800 after the review.",
                    "Got it, the budget is $800 now.",
                ),
            ],
            "Remind me, what budget did we set for the shop?",
            ("$800", "$500"),
        ),
        (
            "gao",
            [
                ("商城项目的预算是5万元。", "好的，记下了：预算5万元。"),
                ("评审之后预算从5万元提高到8万元了。", "明白，预算现在是8万元。"),
            ],
            "我们之前定的商城预算是多少？",
            ("8万元", "5万元"),
        ),
    ];
    for (user, turns, question, (new, old)) in cases {
        for (n, ((said, answer), day)) in turns.iter().zip(["2026-11-02", "2026-11-05"]).enumerate() {
            client
                .complete_turn(CompleteTurnRequest {
                    scope: Some(scope(user, &format!("s{n}"))),
                    user_message: said.to_string(),
                    assistant_message: answer.to_string(),
                    request_id: format!("{user}-{n}"),
                    occurred_at: at(&format!("{day}T10:00:00Z")),
                    ..Default::default()
                })
                .await
                .unwrap();
        }
        drained(&mut client, user).await;
        let prepared = client
            .prepare_turn(PrepareTurnRequest {
                scope: Some(scope(user, "s9")),
                message: question.into(),
                recent_messages: vec!["ok".into()],
                now: at("2026-11-06T09:00:00Z"),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let context = &prepared.context;
        assert!(context.contains(new), "{user}: the new value is shown: {context}");
        // Every mention of the old value is struck through.
        let mentions = context.matches(old).count();
        let struck = context.matches(&format!("~~{old}~~")).count()
            + context.matches(&format!("from {old}")).count()
            + context.matches(&format!("从{old}")).count();
        assert_eq!(mentions, struck, "{user}: {old} is shown as current in: {context}");
        // The user's words stand once, though the assistant's answer to them is shown too.
        let opening: String = turns[0].0.chars().take(8).collect();
        assert_eq!(context.matches(&opening).count(), 1, "{context}");
        assert!(prepared.tokens_used <= prepared.budget_tokens);
    }
    node.shutdown().await.unwrap();
}

/// Issue 16: a new session an hour after the last one starts from it, although no idle sweep
/// ran: the summary is brought up to date on the spot and dated by the session, not the clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_an_hour_later_continues_the_last_one() {
    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);
    complete_exchanges(
        &mut client,
        scope("hana", "s1"),
        &[
            (
                "The goal this week is to ship the loyalty points feature.",
                "Understood, let's list the requirements first.",
            ),
            (
                "We decided that one dollar spent earns one point, because finance can audit it.",
                "Noted, I designed the rules that way.",
            ),
        ],
        true,
    )
    .await;
    drained(&mut client, "hana").await;
    let prepared = client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope("hana", "s2")),
            message: "Let's continue.".into(),
            now: at("2026-11-03T11:05:00Z"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let last = last_session(&prepared).unwrap_or_else(|| panic!("no last-session section in {:?}", prepared.sections));
    assert!(last.text.contains("point"), "{}", last.text);
    assert!(!last.text.contains("## "), "a section, not a document: {}", last.text);
    // Before that session was held, there was nothing to continue.
    let earlier = client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope("hana", "s0")),
            message: "Let's continue.".into(),
            now: at("2026-11-02T09:00:00Z"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(last_session(&earlier).is_none(), "{:?}", earlier.sections);
    node.shutdown().await.unwrap();
}

/// Issue 16: a role's first session in a project starts from the project's last session of
/// another role, but only from what that session gave the project (its decisions): what the user
/// told the other role privately (a preference, in either language) is in that role's
/// last-session section, and nowhere in the other role's context: not in its last session, nor
/// as the line said before a shared turn of that session, as the memories learned from it stay
/// with that role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_roles_last_session_shows_no_private_matter() {
    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);
    let role = |role: &str, session: &str| Scope {
        role_id: role.into(),
        ..scope("mei", session)
    };
    complete_exchanges(
        &mut client,
        role("cto", "s1"),
        &[
            (
                "我不喜欢长邮件，希望你以后都用中文回复。",
                "好的，我会用中文回复，每次都很简短。",
            ),
            (
                "I hate long emails, so please always keep your replies to me under three lines.",
                "Understood, I'll keep every reply to three lines from now on.",
            ),
            (
                "We decided to move the shop's orders to PostgreSQL, because the team knows it well.",
                "Noted, I will plan the migration to PostgreSQL.",
            ),
        ],
        true,
    )
    .await;
    drained(&mut client, "mei").await;
    let private = ["中文", "长邮件", "简短", "long email", "three lines"];
    let prepare = |role_id: &str, session: &str| PrepareTurnRequest {
        scope: Some(role(role_id, session)),
        message: "我们上次聊到哪了？ Where did we leave off?".into(),
        now: at("2026-11-03T11:05:00Z"),
        budget_tokens: 1200,
        ..Default::default()
    };
    // The role the user told continues its own session with all of it.
    let own = client.prepare_turn(prepare("cto", "s2")).await.unwrap().into_inner();
    let own_last = last_session(&own).unwrap_or_else(|| panic!("no last-session section in {}", own.context));
    assert!(
        private.iter().any(|p| own_last.text.contains(p)) && own_last.text.contains("PostgreSQL"),
        "the test needs the private matter in the summary: {}",
        own_last.text
    );
    // Another role, in its first session of the project, gets the decision and nothing private.
    let other = client.prepare_turn(prepare("cfo", "t1")).await.unwrap().into_inner();
    for said in private {
        assert!(
            !other.context.contains(said),
            "{said:?} reached the cfo: {}",
            other.context
        );
    }
    // The decision is shown once: as a memory of the project, or in the last session's section
    // when no memory above says it.
    assert_eq!(
        other
            .context
            .to_lowercase()
            .matches("move the shop's orders to postgresql")
            .count(),
        1,
        "{}",
        other.context
    );
    // A section left with nothing the context does not already say is not shown as its title alone.
    assert!(
        last_session(&other).is_none_or(|s| s.text.contains("\n- ")),
        "{}",
        other.context
    );
    node.shutdown().await.unwrap();
}

/// Issue 16: the last session's section is rendered to what its cap leaves once headed (the
/// changes said in that session and the values struck in it included), so a small budget gets
/// a shorter summary, never none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_budget_still_gets_the_last_session() {
    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);
    let said = [
        "The goal this week is to ship the loyalty points feature before the holiday sale.",
        "The budget for the loyalty launch is $5,000.",
        "We decided that one dollar spent earns one point, because finance can audit it.",
        "We decided that points expire after twelve months, to keep the liability small.",
        "Change of plan: the loyalty launch budget is now $8,000, not $5,000.",
        "Next, Priya writes the ledger migration and Tom reviews it by Thursday.",
        "The risk is that the POS vendor's API rate limit slows the nightly sync.",
        "We concluded that the mobile app shows the balance, not the history, at launch.",
    ];
    let exchanges: Vec<(&str, &str)> = said
        .iter()
        .map(|user| (*user, "Noted, I will keep that in the plan and follow up on it."))
        .collect();
    complete_exchanges(&mut client, scope("ines", "s1"), &exchanges, true).await;
    drained(&mut client, "ines").await;
    let mut sizes = Vec::new();
    for budget in (160..=600).step_by(8) {
        let prepared = client
            .prepare_turn(PrepareTurnRequest {
                scope: Some(scope("ines", "s2")),
                message: "Let's continue.".into(),
                now: at("2026-11-03T11:05:00Z"),
                budget_tokens: budget,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(prepared.tokens_used <= budget, "{} > {budget}", prepared.tokens_used);
        let last = last_session(&prepared)
            .unwrap_or_else(|| panic!("budget {budget}: no last-session section in {}", prepared.context));
        sizes.push(last.tokens);
    }
    assert!(
        sizes.first() < sizes.last(),
        "the test needs the summary cut at small budgets: {sizes:?}"
    );
    node.shutdown().await.unwrap();
}

/// Issue 16: a session ended by its last turn is continued at once, and what the last session's
/// summary says is not said again among the memories (the README's example).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_session_says_each_thing_once() {
    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);
    for (n, (user, assistant, end)) in [
        (
            "The budget for the shop launch is $500.",
            "Noted: the launch budget is $500.",
            false,
        ),
        (
            "We raised the launch budget from $500 to $800 after the review.",
            "Got it: $800 from now on.",
            true,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        client
            .complete_turn(CompleteTurnRequest {
                scope: Some(scope("lena", "s1")),
                user_message: user.into(),
                assistant_message: assistant.into(),
                request_id: format!("lena-{n}"),
                end_session: end,
                ..Default::default()
            })
            .await
            .unwrap();
    }
    drained(&mut client, "lena").await;
    let prepared = client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope("lena", "s2")),
            message: "What budget did we set for the shop launch?".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let context = &prepared.context;
    assert!(last_session(&prepared).is_some(), "{context}");
    assert!(context.contains("$800"), "{context}");
    assert_eq!(context.matches("We raised the launch budget").count(), 1, "{context}");
    let trace = prepared.trace.unwrap();
    assert!(
        trace
            .items
            .iter()
            .any(|i| !i.included && i.reason.contains("the last session's summary says it")),
        "{:?}",
        trace.items
    );
    node.shutdown().await.unwrap();
}

/// `GatewayGrpcClient` carries a turn both ways through a served gateway without losing a
/// field: the completed turn's tool results (offloaded with its artifact and compact, or kept
/// as it was), its jobs and the learning job it waited for, all in the scope sent; then the
/// next turn's context with the budget asked, its sections, the controller's decision and the
/// trace with each memory's score parts; and the erasure of the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grpc_client_round_trips_prepare_and_complete() {
    use thinkus_backends::sql::JobStatus as Status;
    use thinkus_common::model::{NeedMemory, Owner, Scope as ModelScope};
    use thinkus_gateway::api::{CompleteRequest, JobsRequest, PrepareRequest, SectionKind, ToolCall, TraceKind};
    use thinkus_gateway::{GatewayApi, GatewayGrpcClient};

    let dir = tempfile::tempdir().unwrap();
    let node = nodes::start(config(dir.path()), &ServiceKind::ALL, None).await;
    let channel = thinkus_common::grpc::client_channel(nodes::channel(&node).await, None);
    let client = GatewayGrpcClient::new(channel, 64 << 20);
    let scope = |session: &str| ModelScope {
        user_id: "gwc".into(),
        role_id: "cto".into(),
        project_id: Some("shop".into()),
        session_id: Some(session.into()),
        ..Default::default()
    };

    let rows: String = (0..400)
        .map(|i| format!("row {i}: order {i} shipped to Berlin\n"))
        .collect();
    let completed = client
        .complete_turn(CompleteRequest {
            scope: scope("s1"),
            user_message: "我们决定前端用Next.js，因为团队熟悉React。预算上限是5万元。".into(),
            assistant_message: "好的，我记下了：前端采用Next.js，预算5万元。".into(),
            tool_calls: vec![
                ToolCall {
                    id: "call-1".into(),
                    name: "orders".into(),
                    output: rows,
                    mime_type: "text/plain".into(),
                    path: "/orders.txt".into(),
                },
                ToolCall {
                    id: "call-2".into(),
                    name: "ping".into(),
                    output: "ok".into(),
                    ..Default::default()
                },
            ],
            request_id: Some("gwc-1".into()),
            wait_for_learning: true,
            ..Default::default()
        })
        .await
        .expect("complete a turn through the client");
    let [offloaded, kept] = &completed.tool_calls[..] else {
        panic!("one result per tool call: {:?}", completed.tool_calls);
    };
    assert_eq!((offloaded.id.as_str(), kept.id.as_str()), ("call-1", "call-2"));
    assert!(offloaded.offloaded && offloaded.original_tokens > 500, "{offloaded:?}");
    assert!(
        offloaded
            .artifact_id
            .as_deref()
            .is_some_and(|id| id.starts_with("art_")),
        "{offloaded:?}"
    );
    assert!(
        offloaded.compact.as_ref().is_some_and(|c| c.tokens > 0),
        "{offloaded:?}"
    );
    assert!(!offloaded.replacement.is_empty() && offloaded.replacement.len() < 400 * 30);
    assert!(
        !kept.offloaded && kept.artifact_id.is_none() && kept.compact.is_none(),
        "{kept:?}"
    );
    assert_eq!((kept.replacement.as_str(), kept.original_tokens), ("ok", 1));
    assert!(
        completed.job_ids.len() >= 2,
        "learn and summarize: {:?}",
        completed.job_ids
    );
    let learning = completed.learning.expect("the learning job it waited for");
    assert_eq!(learning.id, completed.job_ids[0]);
    assert_eq!((learning.kind.as_str(), learning.status), ("learn", Status::Succeeded));
    assert_eq!(
        (learning.user_id.as_str(), learning.session_id.as_deref()),
        ("gwc", Some("s1"))
    );
    assert!(learning.result.is_some(), "the learn report comes back: {learning:?}");

    // Every job of the user, in the scope sent, once the queue has drained.
    let mut jobs = Vec::new();
    for _ in 0..600 {
        jobs = client
            .list_jobs(JobsRequest {
                scope: ModelScope {
                    user_id: "gwc".into(),
                    ..Default::default()
                },
                status: None,
                limit: 50,
                offset: 0,
            })
            .await
            .expect("list jobs through the client");
        if jobs
            .iter()
            .all(|j| matches!(j.status, Status::Succeeded | Status::Failed))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(jobs.len(), completed.job_ids.len(), "{jobs:?}");
    assert!(
        jobs.iter()
            .all(|j| j.status == Status::Succeeded && j.session_id.as_deref() == Some("s1")),
        "{jobs:?}"
    );

    let prepared = client
        .prepare_turn(PrepareRequest {
            scope: scope("s2"),
            message: "我们之前定的前端框架是什么？".into(),
            budget_tokens: Some(1500),
            recent_messages: vec!["好的".into()],
            now: None,
        })
        .await
        .expect("prepare a turn through the client");
    assert_eq!(prepared.budget_tokens, 1500);
    assert!(
        prepared.tokens_used > 0 && prepared.tokens_used <= 1500,
        "{}",
        prepared.tokens_used
    );
    assert!(prepared.context.contains("Next.js"), "{}", prepared.context);
    assert!(!prepared.sections.is_empty());
    assert!(
        prepared
            .sections
            .iter()
            .any(|s| s.kind != SectionKind::Standing && s.text.contains("Next.js") && s.tokens > 0),
        "{:?}",
        prepared.sections
    );
    assert_eq!(prepared.decision.need_memory, NeedMemory::Yes);
    assert!(!prepared.decision.reason.is_empty());
    let memory = prepared
        .items
        .iter()
        .find(|i| i.kind == TraceKind::Memory && i.included)
        .expect("an included memory in the trace");
    assert!(
        memory.id.starts_with("mem_") && memory.score > 0.0 && memory.confidence > 0.0,
        "{memory:?}"
    );
    assert!(memory.parts.as_ref().is_some_and(|p| p.score > 0.0), "{memory:?}");
    assert!(
        prepared.timings_ms.contains_key("retriever"),
        "{:?}",
        prepared.timings_ms
    );
    // The scope went across: another user of the same role and project sees none of it.
    let other = client
        .prepare_turn(PrepareRequest {
            scope: ModelScope {
                user_id: "erin".into(),
                ..scope("s2")
            },
            message: "我们之前定的前端框架是什么？".into(),
            ..Default::default()
        })
        .await
        .expect("prepare another user's turn");
    assert!(!other.context.contains("Next.js"), "{}", other.context);

    let erasure = client
        .erase_user(Owner::new(thinkus_common::model::DEFAULT_TENANT, "gwc"), String::new())
        .await
        .expect("erase the user through the client");
    assert!(
        erasure.id.is_some() && erasure.counts.memories > 0 && erasure.counts.artifacts == 1,
        "{erasure:?}"
    );

    node.shutdown().await.unwrap();
}

/// Issue 21: the statements one PrepareTurn sends to the embedded database, for a user with
/// memories, a replaced value, a standing rule, two pending conflicts, a decision another memory
/// names, two sessions (the last one summarised) and a tool output of an earlier session. On SQLite each statement is handed to
/// its connection's worker thread; the turn's path holds to the statements it needs. The turn
/// is prepared in process, so that only its own statements are counted, not the background
/// loops' (job queue, sweeps, health checks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_prepare_turn_runs_few_statements() {
    use thinkus_proto::gateway::ToolCall;
    use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
    use thinkus_proto::knowledge::{MemoryDraft, RememberRequest, WriteOutcome};
    use thinkus_proto::summary::GenerateSummaryRequest;
    use thinkus_proto::summary::summary_service_client::SummaryServiceClient;

    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let node = nodes::start(config.clone(), &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;
    let mut client = GatewayServiceClient::new(channel.clone());
    let user = "quinn";
    let log = payment_log("2026-11-03");
    complete_exchanges(
        &mut client,
        scope(user, "s1"),
        &[
            ("The budget for the shop is $500.", "Noted: the budget is $500."),
            (
                "We decided to use Stripe for payments because it supports Alipay.",
                "Stripe it is.",
            ),
        ],
        true,
    )
    .await;
    let offloaded = client
        .complete_turn(CompleteTurnRequest {
            request_id: format!("{user}-log"),
            scope: Some(scope(user, "s1")),
            user_message: "Check the payment service log for errors.".into(),
            assistant_message: "One payment webhook timed out; details in the log.".into(),
            tool_calls: vec![ToolCall {
                id: "call-1".into(),
                name: "read_log".into(),
                output: log,
                path: "logs/payment.log".into(),
                ..Default::default()
            }],
            occurred_at: at("2026-11-03T10:05:00Z"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let artifact_id = offloaded.tool_calls[0].artifact_id.clone();
    assert!(artifact_id.starts_with("art_"), "{offloaded:?}");
    client
        .complete_turn(CompleteTurnRequest {
            request_id: format!("{user}-raise"),
            scope: Some(scope(user, "s2")),
            user_message: "We raised the shop budget from $500 to $800 after the review.".into(),
            assistant_message: "Got it, the budget is $800 now.".into(),
            occurred_at: at("2026-11-05T10:00:00Z"),
            ..Default::default()
        })
        .await
        .unwrap();
    drained(&mut client, user).await;
    let mut knowledge = KnowledgeManagerServiceClient::new(channel.clone());
    let mut remember = async |scope: Scope, content: &str, draft: MemoryDraft| {
        knowledge
            .remember(RememberRequest {
                scope: Some(scope),
                memory: Some(MemoryDraft {
                    r#type: match draft.r#type {
                        0 => thinkus_proto::common::MemoryType::Constraint as i32,
                        chosen => chosen,
                    },
                    content: content.into(),
                    ..draft
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .result
            .expect("a write result")
    };
    // A standing rule (every role, every project) and two pending conflicts in the project.
    remember(
        Scope {
            project_id: String::new(),
            ..scope(user, "")
        },
        "Always answer in English and keep the replies short",
        MemoryDraft {
            visibility: thinkus_proto::common::Visibility::Global as i32,
            importance: 5,
            ..Default::default()
        },
    )
    .await;
    for (said, guessed) in [
        (
            "The hosting budget for the shop is $50",
            "I think the hosting budget is $80 now",
        ),
        (
            "The marketing budget for the shop is $300",
            "I think the marketing budget is $400 now",
        ),
    ] {
        remember(scope(user, ""), said, MemoryDraft::default()).await;
        let held = remember(
            scope(user, ""),
            guessed,
            MemoryDraft {
                source: thinkus_proto::common::MemorySource::Inference as i32,
                ..Default::default()
            },
        )
        .await;
        assert_eq!(held.outcome, WriteOutcome::Queued as i32, "{held:?}");
    }
    // A decision and a memory that names it as its reason.
    let decision = remember(
        scope(user, ""),
        "We chose Stripe as the shop's payment provider",
        MemoryDraft {
            r#type: thinkus_proto::common::MemoryType::ProjectDecision as i32,
            ..Default::default()
        },
    )
    .await;
    remember(
        scope(user, ""),
        "The payment error in the log was a Stripe webhook timeout: Stripe retries the webhook",
        MemoryDraft {
            r#type: thinkus_proto::common::MemoryType::Issue as i32,
            importance: 5,
            related_decision_ids: vec![decision.memory.expect("written").id],
            ..Default::default()
        },
    )
    .await;
    SummaryServiceClient::new(channel)
        .generate_summary(GenerateSummaryRequest {
            scope: Some(scope(user, "s2")),
            ..Default::default()
        })
        .await
        .expect("summarise the last session");

    // The first turn of a new session: every lookup runs (summary, artifacts, changes,
    // standing rules and conflicts, the recall).
    let gateway = thinkus_server::node::gateway_local(&config, &node.services, &node.apis, &node.backends)
        .expect("the node's gateway");
    let request = thinkus_gateway::api::PrepareRequest {
        scope: thinkus_common::model::Scope::new(user, "cto")
            .with_project("shop")
            .with_session("s3"),
        message: "Why did we pick Stripe, what is the shop budget, and which payment error was in the log?".into(),
        now: Some(
            chrono::DateTime::parse_from_rfc3339("2026-11-06T09:00:00Z")
                .unwrap()
                .to_utc(),
        ),
        ..Default::default()
    };
    let (prepared, statements) = thinkus_backends::sql::statements_of(gateway.prepare(request)).await;
    let prepared = prepared.expect("prepared");
    let listed = statements
        .iter()
        .enumerate()
        .map(|(n, sql)| format!("{:>2}. {sql}", n + 1))
        .collect::<Vec<_>>()
        .join("\n");
    // Every lookup found something, so that every one of them ran its statements.
    let kinds: Vec<_> = prepared.sections.iter().map(|s| s.kind).collect();
    for kind in [
        thinkus_gateway::api::SectionKind::Standing,
        thinkus_gateway::api::SectionKind::LastSession,
        thinkus_gateway::api::SectionKind::Artifacts,
    ] {
        assert!(kinds.contains(&kind), "no {kind:?} section in {:#?}", prepared.sections);
    }
    assert!(prepared.context.contains("$800"), "{}", prepared.context);
    for asked in ["$50 or $80", "$300 or $400"] {
        assert!(prepared.context.contains(asked), "the conflicts: {}", prepared.context);
    }
    assert!(
        prepared.items.iter().any(|i| i.id == artifact_id && i.included),
        "{:#?}",
        prepared.items
    );
    assert_eq!(
        prepared.decision.retrieval_mode,
        thinkus_common::model::RetrievalMode::Details
    );
    assert!(
        statements.len() <= PREPARE_TURN_STATEMENTS,
        "one PrepareTurn ran {} statements, more than {PREPARE_TURN_STATEMENTS}:\n{listed}",
        statements.len()
    );
    node.shutdown().await.unwrap();
}

/// The statements of [`one_prepare_turn_runs_few_statements`]'s turn (docs/benchmarks.md lists
/// them, before and after): the last session with its summary, the artifacts near the session,
/// the memories that state a change of value, the replaced ones with their successors, the
/// standing rules, the pending conflicts, the memories they question, and the recall's
/// candidates. The access statistics of the memories shown are written by the retriever's
/// recorder, off the turn (`crates/retriever/src/access.rs`).
const PREPARE_TURN_STATEMENTS: usize = 8;
