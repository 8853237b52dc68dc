//! The memory page in a real browser (issue 19): headless Chromium, driven over the Chrome
//! DevTools protocol, signs in, lists what an employee remembers, searches, corrects a memory,
//! approves a candidate, resolves a conflict and downloads the export by clicking the page's
//! own links and forms; the database is checked afterwards and the next PrepareTurn shows the
//! fix. Screenshots of the
//! pages in Chinese and English are written to `target/tmp/memory-page/` (the path is printed).
//!
//! Chromium is Debian's `chromium` package (`scripts/test.sh` installs it, with a CJK font, when
//! missing); `THINKUS_CHROMIUM` names another binary. Without one the test fails when backends
//! are required (`make test`) and is skipped loudly otherwise.
//!
//! The protocol client is a few dozen lines over one WebSocket (RFC 6455: text frames, masked
//! from the client), one command at a time: the test needs nothing more.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use thinkus_common::model::Scope as DomainScope;
use thinkus_knowledge_manager::KnowledgeGrpcClient;
use thinkus_knowledge_manager::api::{KnowledgeApi, MarkdownFile};
use thinkus_proto::common::{MemorySource, MemoryStatus, MemoryType, Scope, Visibility};
use thinkus_proto::gateway::PrepareTurnRequest;
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{GetMemoryHistoryRequest, ListMemoriesRequest, MemoryDraft, RememberRequest};
use thinkus_server::ServiceKind;
use thinkus_summary::SummaryGrpcClient;
use thinkus_summary::api::{GenerateRequest, SummaryApi};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::support::KeyInterceptor;
use crate::{nodes, support};

const KEY: &str = "browser-test-key";

/// The Chromium binary, or `None` (said loudly, or a failure when backends are required).
fn chromium() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("THINKUS_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH")
                .map(|paths| {
                    std::env::split_paths(&paths)
                        .map(|dir| dir.join(name))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
                .into_iter()
                .find(|path| path.is_file())
        });
    if found.is_none() {
        if support::backends_required() {
            panic!(
                "no Chromium to drive: apt-get install -y chromium fonts-wqy-zenhei (scripts/test.sh does it), or set THINKUS_CHROMIUM"
            );
        }
        support::loud(
            "*** SKIPPED: the memory page's browser test did not run: no chromium (apt-get install -y chromium) ***",
        );
    }
    found
}

/// A Chrome DevTools protocol connection to one page.
struct Cdp {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    next_id: u64,
    session: Option<String>,
}

impl Cdp {
    /// Connects to the browser's WebSocket endpoint (`ws://host:port/path`).
    async fn connect(url: &str) -> Self {
        let rest = url.strip_prefix("ws://").expect("a ws:// endpoint");
        let (host, path) = rest.split_once('/').expect("a path");
        let stream = TcpStream::connect(host).await.expect("connect to the browser");
        stream.set_nodelay(true).ok();
        let (read, mut writer) = stream.into_split();
        let key = base64::engine::general_purpose::STANDARD.encode(uuid::Uuid::new_v4().as_bytes());
        let request = format!(
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        writer.write_all(request.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(read);
        let mut status = String::new();
        reader.read_line(&mut status).await.unwrap();
        assert!(
            status.starts_with("HTTP/1.1 101"),
            "the browser refused the WebSocket: {status}"
        );
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await.unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        Self {
            reader,
            writer,
            next_id: 0,
            session: None,
        }
    }

    async fn send_frame(&mut self, opcode: u8, payload: &[u8]) {
        let mut frame = vec![0x80 | opcode];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n < 65_536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let mask: [u8; 4] = uuid::Uuid::new_v4().as_bytes()[..4].try_into().unwrap();
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.writer.write_all(&frame).await.unwrap();
    }

    /// The next text message (fragments joined; pings answered).
    async fn receive(&mut self) -> Value {
        let mut message = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.reader
                .read_exact(&mut head)
                .await
                .expect("a frame from the browser");
            let fin = head[0] & 0x80 != 0;
            let opcode = head[0] & 0x0f;
            let len = match head[1] & 0x7f {
                126 => {
                    let mut n = [0u8; 2];
                    self.reader.read_exact(&mut n).await.unwrap();
                    u16::from_be_bytes(n) as usize
                }
                127 => {
                    let mut n = [0u8; 8];
                    self.reader.read_exact(&mut n).await.unwrap();
                    u64::from_be_bytes(n) as usize
                }
                n => n as usize,
            };
            let mut payload = vec![0u8; len];
            self.reader.read_exact(&mut payload).await.unwrap();
            match opcode {
                0x9 => self.send_frame(0xA, &payload).await,
                0x8 => panic!("the browser closed the connection"),
                _ => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return serde_json::from_slice(&message).expect("JSON from the browser");
                    }
                }
            }
        }
    }

    /// Sends a command (to the attached page when there is one) and waits for its answer.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        match self.try_call(method, params).await {
            Ok(result) => result,
            Err(error) => panic!("{method}: {error}"),
        }
    }

    /// Like [`Self::call`], with the browser's error as an `Err` (a page going away while a
    /// check runs is not a failure).
    async fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut command = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            command["sessionId"] = json!(session);
        }
        self.send_frame(0x1, command.to_string().as_bytes()).await;
        loop {
            let message = self.receive().await;
            if message["id"].as_u64() == Some(id) {
                return match message.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(message["result"].clone()),
                };
            }
        }
    }

    /// Evaluates JavaScript in the page; its value.
    async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("{expression}: {exception}");
        }
        result["result"]["value"].clone()
    }

    /// Waits until `condition` is true in the page.
    async fn wait_for(&mut self, condition: &str, what: &str) {
        let check = format!("(() => {{ try {{ return !!({condition}); }} catch (e) {{ return false; }} }})()");
        for _ in 0..200 {
            let answer = self
                .try_call("Runtime.evaluate", json!({"expression": check, "returnByValue": true}))
                .await;
            if answer.is_ok_and(|r| r["result"]["value"] == json!(true)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(75)).await;
        }
        let url = self.eval("location.href").await;
        let text = self
            .eval("document.body ? document.body.innerText.slice(0, 2000) : ''")
            .await;
        panic!("{what}: not seen within 15 s on {url}\n{text}");
    }

    /// Runs `action` (which leaves the page: a navigation, a form submitted) and waits for the
    /// next page to load.
    async fn leave(&mut self, action: &str, what: &str) {
        self.eval("window.__stay = true").await;
        self.eval(action).await;
        self.wait_for("!window.__stay && document.readyState === 'complete'", what)
            .await;
    }

    async fn open(&mut self, url: &str) {
        self.eval("window.__stay = true").await;
        self.call("Page.navigate", json!({"url": url})).await;
        self.wait_for("!window.__stay && document.readyState === 'complete'", url)
            .await;
    }

    /// Clicks the first element matching `selector` whose text contains `text` (a real click
    /// event on the element; forms submit as a person's click would).
    async fn click(&mut self, selector: &str, text: &str, what: &str) {
        let action = format!(
            "(() => {{ const el = [...document.querySelectorAll({sel})].find(e => e.textContent.includes({text})); \
             if (!el) throw new Error('no ' + {sel} + ' with ' + {text}); el.click(); }})()",
            sel = json!(selector),
            text = json!(text)
        );
        self.leave(&action, what).await;
    }

    async fn text(&mut self, selector: &str) -> String {
        self.eval(&format!(
            "(document.querySelector({}) || {{innerText: ''}}).innerText",
            json!(selector)
        ))
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// A screenshot of the whole page.
    async fn screenshot(&mut self, path: &Path) {
        let metrics = self.call("Page.getLayoutMetrics", json!({})).await;
        let height = metrics["cssContentSize"]["height"]
            .as_f64()
            .unwrap_or(900.0)
            .clamp(600.0, 6000.0);
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true,
                       "clip": {"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1}}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("image data"))
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(path, png).unwrap();
    }
}

/// Starts headless Chromium; its process (killed when dropped) and DevTools endpoint.
async fn launch(binary: &Path, profile: &Path) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--window-size=1280,900",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start chromium");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let endpoint = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(at) = line.find("ws://") {
                return line[at..].trim().to_string();
            }
        }
        panic!("chromium exited without a DevTools endpoint");
    })
    .await
    .expect("chromium's DevTools endpoint within 30 s");
    // Keep reading its stderr so that it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, endpoint)
}

fn scope(user: &str, role: &str, project: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: role.into(),
        project_id: project.into(),
        session_id: String::new(),
        tenant_id: String::new(),
    }
}

/// What a user's employees remember before the browser opens the page: memories of several
/// types, a pending conflict, a candidate, a session summary and a prepared turn.
struct Seeded {
    deadline: String,
    budget: String,
}

async fn seed(node: &thinkus_server::node::NodeHandle, zh: bool) -> Seeded {
    let channel = nodes::channel(node).await;
    let mut km = KnowledgeManagerServiceClient::with_interceptor(channel.clone(), KeyInterceptor(KEY));
    let (user, project) = if zh {
        ("wang", "课程平台")
    } else {
        ("maria", "shop")
    };
    let mut remember = async |role: &str,
                              project: &str,
                              memory_type: MemoryType,
                              content: &str,
                              source: MemorySource,
                              visibility: Visibility,
                              importance: i32| {
        km.remember(RememberRequest {
            scope: Some(scope(user, role, project)),
            memory: Some(MemoryDraft {
                r#type: memory_type as i32,
                content: content.into(),
                source: source as i32,
                visibility: visibility as i32,
                importance,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|err| panic!("{content}: {err}"))
        .into_inner()
        .result
        .and_then(|r| r.memory)
        .map(|m| m.id)
        .unwrap_or_default()
    };
    use MemorySource::{Inference, UserInput};
    use MemoryType::*;
    use Visibility::{Global, Private, Project as Shared};
    let texts: [&str; 9] = if zh {
        [
            "我喜欢简约的设计风格，不要太花哨",
            "所有报告都用中文，结论先行",
            "这个项目的预算是$500",
            "上线时间是3月1日",
            "支付方案选择Stripe，因为团队用过",
            "讲师可能无法按时交付课程视频",
            "每周五下午给老板发一次进度周报",
            "预算好像改成$800了",
            "这周我想每天早上收到一份简报",
        ]
    } else {
        [
            "I prefer a minimalist design style, nothing flashy",
            "Every report starts with its conclusion",
            "The budget for the shop launch is $500",
            "The shop launches on March 1",
            "We go with Stripe for payments because the team knows it",
            "The supplier may deliver the hardware late",
            "Send the boss a progress report every Friday afternoon",
            "I think the budget is $800 now",
            "For now I want a short briefing every morning",
        ]
    };
    remember("designer", "", UserPreference, texts[0], UserInput, Global, 4).await;
    remember("assistant", "", Constraint, texts[1], UserInput, Global, 5).await;
    let budget = remember("cfo", project, Constraint, texts[2], UserInput, Shared, 5).await;
    let deadline = remember("cfo", project, Constraint, texts[3], UserInput, Shared, 4).await;
    remember("cto", project, ProjectDecision, texts[4], UserInput, Shared, 4).await;
    remember("cfo", project, Risk, texts[5], UserInput, Private, 3).await;
    remember("cfo", "", ActionItem, texts[6], UserInput, Private, 3).await;
    // An executive's guess that contradicts the budget: held as a conflict.
    remember("cfo", project, Constraint, texts[7], Inference, Shared, 5).await;
    // A new BOSS.md line with time-sensitive wording: queued for approval.
    let knowledge = KnowledgeGrpcClient::new(
        thinkus_common::grpc::client_channel(channel.clone(), Some(KEY.into())),
        16 * 1024 * 1024,
    );
    let who = DomainScope {
        user_id: user.into(),
        role_id: "cfo".into(),
        ..Default::default()
    }
    .with_tenant("acme");
    let mut files = knowledge.export_markdown(who.clone(), None).await.unwrap();
    let heading = if zh { "## 偏好\n\n" } else { "## Preferences\n\n" };
    for file in files.iter_mut().filter(|f| f.path == "BOSS.md") {
        *file = MarkdownFile {
            path: file.path.clone(),
            content: file.content.replace(heading, &format!("{heading}- {}\n", texts[8])),
        };
    }
    let report = knowledge.import_markdown(who, files, false).await.unwrap();
    assert_eq!(report.queued, 1, "{report:?}");
    // The last session's summary.
    let summaries = SummaryGrpcClient::new(
        thinkus_common::grpc::client_channel(channel.clone(), Some(KEY.into())),
        16 * 1024 * 1024,
    );
    let said = |role: &str, content: &str| thinkus_common::model::Message {
        role: role.into(),
        content: content.into(),
        speaker: None,
        created_at: chrono::Utc::now(),
        index: 0,
    };
    let messages = if zh {
        vec![
            said("user", "我们今天讨论课程平台的技术方案和预算。"),
            said("user", "我们决定前端用Next.js，支付用Stripe。"),
            said("assistant", "好的。下一步我来写技术方案文档，周五前给你。"),
        ]
    } else {
        vec![
            said("user", "Today we plan the shop's launch and its budget."),
            said(
                "user",
                "We decided to use Next.js for the frontend and Stripe for payments.",
            ),
            said("assistant", "Noted. Next I will write the technical plan by Friday."),
        ]
    };
    summaries
        .generate(GenerateRequest {
            scope: DomainScope {
                user_id: user.into(),
                role_id: "cfo".into(),
                project_id: Some(project.into()),
                tenant_id: "acme".into(),
                session_id: Some("s1".into()),
            },
            messages,
            ..Default::default()
        })
        .await
        .unwrap();
    Seeded { deadline, budget }
}

/// A run of Chinese characters, or an English word (four letters or more).
const CJK: &str = "/[\\u4e00-\\u9fff]/";
const LATIN: &str = "/[A-Za-z]{4,}/";

/// How many reasons of the trace on the page (the decision's and each item's) match `pattern`.
async fn reasons_with(cdp: &mut Cdp, pattern: &str) -> Value {
    cdp.eval(&format!(
        "[document.querySelector('#decision-reason'), ...document.querySelectorAll('#trace-items tr td:last-child')]\
         .filter(e => e && {pattern}.test(e.textContent)).length"
    ))
    .await
}

async fn prepare(node: &thinkus_server::node::NodeHandle, user: &str, project: &str, message: &str) -> String {
    let mut gateway = GatewayServiceClient::with_interceptor(nodes::channel(node).await, KeyInterceptor(KEY));
    gateway
        .prepare_turn(PrepareTurnRequest {
            scope: Some(Scope {
                session_id: "s2".into(),
                ..scope(user, "cfo", project)
            }),
            message: message.into(),
            recent_messages: vec!["…".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .context
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_fixes_memory_in_a_real_browser() {
    let Some(binary) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::keyed_config(dir.path(), vec![nodes::api_key("acme", &["wang", "maria"], KEY)]);
    let port = support::free_port();
    config.gateway.ui_listen = format!("127.0.0.1:{port}");
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let wang = seed(&node, true).await;
    let maria = seed(&node, false).await;
    prepare(&node, "wang", "课程平台", "我们之前定的预算是多少？").await;
    prepare(&node, "maria", "shop", "What budget did we agree on?").await;

    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("memory-page");
    std::fs::create_dir_all(&shots).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let (_chromium, endpoint) = launch(&binary, profile.path()).await;
    let mut cdp = Cdp::connect(&endpoint).await;
    let target = cdp.call("Target.createTarget", json!({"url": "about:blank"})).await;
    let attached = cdp
        .call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        )
        .await;
    cdp.session = attached["sessionId"].as_str().map(str::to_string);
    cdp.call("Page.enable", json!({})).await;
    cdp.call("Runtime.enable", json!({})).await;
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    let base = format!("http://127.0.0.1:{port}");

    // Sign in with the key, on the page's own form.
    cdp.open(&format!("{base}/u/wang/r/cfo")).await;
    assert!(
        cdp.eval("location.pathname").await == json!("/login"),
        "to the sign-in form"
    );
    cdp.eval(&format!(
        "document.querySelector('input[name=key]').value = {}",
        json!(KEY)
    ))
    .await;
    cdp.click("form[action='/login'] button", "", "signing in").await;
    assert_eq!(cdp.eval("location.pathname").await, json!("/"));

    // List: what cfo remembers, in Chinese.
    cdp.open(&format!("{base}/u/wang/r/cfo")).await;
    let title = cdp.text("#title").await;
    assert_eq!(title, "cfo 对你的记忆");
    let listed = cdp.text("#memories").await;
    for expected in [
        "这个项目的预算是$500",
        "上线时间是3月1日",
        "所有报告都用中文，结论先行",
        "规则与约束",
    ] {
        assert!(listed.contains(expected), "{expected} in {listed}");
    }
    assert!(cdp.text("#conflicts").await.contains("预算：$500 还是 $800？待确认"));
    let candidates = cdp.text("#candidates").await;
    assert!(candidates.contains("这周我想每天早上收到一份简报"), "{candidates}");
    assert!(
        candidates.contains("排队原因: 个人信息里有随时间变化的说法"),
        "why it waits, in Chinese: {candidates}"
    );
    assert!(
        cdp.text("#last-session").await.contains("Next.js"),
        "{}",
        cdp.text("#last-session").await
    );
    assert!(cdp.text("#recent-turns").await.contains("我们之前定的预算是多少？"));
    cdp.screenshot(&shots.join("zh-role.png")).await;

    // Search.
    cdp.eval("document.querySelector('#search input[name=q]').value = '上线时间'")
        .await;
    cdp.click("#search button", "", "searching").await;
    let results = cdp.text("#results").await;
    assert!(results.contains("上线时间是3月1日"), "{results}");
    cdp.screenshot(&shots.join("zh-search.png")).await;

    // Correct a memory: its page, the form, save.
    cdp.click(
        &format!("#results li[data-memory='{}'] a", wang.deadline),
        "详情",
        "opening the memory",
    )
    .await;
    cdp.eval("document.querySelector('#correct textarea').value = '上线时间改到3月15日'")
        .await;
    cdp.eval("document.querySelector('#correct input[name=evidence]').value = '老板确认延期两周'")
        .await;
    cdp.click("#correct button", "保存更正", "saving the correction").await;
    assert!(cdp.text("#flash").await.contains("已更正"));
    assert_eq!(cdp.text("#memory-content").await, "上线时间改到3月15日");
    let history = cdp.text("#history").await;
    assert!(
        history.contains("用户 wang") && history.contains("替换了 mem_") && history.contains("年"),
        "who, why and when, in Chinese: {history}"
    );
    assert!(!history.contains("user:") && !history.contains("replaces"), "{history}");
    cdp.screenshot(&shots.join("zh-memory.png")).await;

    // Approve the candidate, then confirm the new budget, on the role's page.
    cdp.open(&format!("{base}/u/wang/r/cfo")).await;
    cdp.click("#candidates button[value=approve]", "批准", "approving")
        .await;
    assert!(cdp.text("#flash").await.contains("已批准"));
    assert!(!cdp.text("#candidates").await.contains("这周我想每天早上收到一份简报"));
    cdp.click("#conflicts button.keep", "确认 预算好像改成$800了", "confirming $800")
        .await;
    assert!(cdp.text("#flash").await.contains("已确认"));
    assert!(cdp.text("#conflicts").await.contains("没有待确认的冲突"));

    // The trace of the recent turn: which memories its context used, and why.
    cdp.click("#recent-turns a", "我们之前定的预算是多少？", "opening the turn")
        .await;
    let items = cdp.text("#trace-items").await;
    assert!(
        items.contains("这个项目的预算是$500"),
        "the memory by what it says: {items}"
    );
    let decided = cdp.text(".meta").await;
    assert!(
        decided.contains("需要记忆: 需要") && decided.contains("模式: 详情"),
        "in Chinese: {decided}"
    );
    let linked = cdp
        .eval("[...document.querySelectorAll('#trace-items a')].map(a => a.getAttribute('href')).join(' ')")
        .await;
    assert!(linked.as_str().unwrap().contains(&wang.budget), "{linked}");
    assert_eq!(reasons_with(&mut cdp, LATIN).await, json!(0), "every reason in Chinese");
    cdp.screenshot(&shots.join("zh-trace.png")).await;
    // The same turn on the English page: the reasons the gateway and the controller wrote
    // in Chinese read in English.
    let turn = cdp.eval("location.pathname").await;
    cdp.open(&format!("{base}{}?lang=en", turn.as_str().unwrap())).await;
    assert_eq!(
        cdp.eval("document.querySelectorAll('#trace-items tr').length > 1")
            .await,
        json!(true)
    );
    assert_eq!(reasons_with(&mut cdp, CJK).await, json!(0), "every reason in English");
    let reason = cdp.text("#decision-reason").await;
    assert!(
        !reason.is_empty() && !reason.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
        "{reason}"
    );
    cdp.screenshot(&shots.join("en-trace-of-a-chinese-turn.png")).await;

    // Export: the user's page links to the Markdown files, which hold the fix; the archive
    // downloads as a tar (unpacking and importing it is checked in memory_page.rs).
    cdp.open(&format!("{base}/u/wang")).await;
    cdp.click("#export", "导出为 Markdown", "opening the export").await;
    let files = cdp.text("#files").await;
    assert!(
        files.contains("BOSS.md") && files.contains("projects/课程平台.md"),
        "{files}"
    );
    cdp.eval("document.querySelectorAll('#files details').forEach(d => d.open = true)")
        .await;
    let files = cdp.text("#files").await;
    assert!(
        files.contains("上线时间改到3月15日") && !files.contains("上线时间是3月1日"),
        "{files}"
    );
    cdp.screenshot(&shots.join("zh-export.png")).await;
    // A real download: the browser saves the archive where it is told.
    let downloads = tempfile::tempdir().unwrap();
    let page_session = cdp.session.take();
    cdp.call(
        "Browser.setDownloadBehavior",
        json!({"behavior": "allow", "downloadPath": downloads.path()}),
    )
    .await;
    cdp.session = page_session;
    cdp.eval("document.querySelector('#download').click()").await;
    let saved = downloads.path().join("thinkus-memory-wang.tar");
    for _ in 0..200 {
        if saved.is_file() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(75)).await;
    }
    let archive = std::fs::read(&saved).expect("the archive downloaded");
    assert_eq!(&archive[257..262], b"ustar");
    assert!(String::from_utf8_lossy(&archive).contains("上线时间改到3月15日"));

    // English: another user's page in their language, and the same flow's main steps.
    cdp.open(&format!("{base}/u/maria/r/cfo")).await;
    assert_eq!(cdp.text("#title").await, "What cfo remembers about you");
    assert!(
        cdp.text("#conflicts")
            .await
            .contains("budget: $500 or $800? unconfirmed")
    );
    let candidates = cdp.text("#candidates").await;
    assert!(
        candidates.contains("queued because: profile fact with time-sensitive wording"),
        "{candidates}"
    );
    cdp.screenshot(&shots.join("en-role.png")).await;
    cdp.eval("document.querySelector('#search input[name=q]').value = 'launch date'")
        .await;
    cdp.click("#search button", "", "searching").await;
    assert!(cdp.text("#results").await.contains("The shop launches on March 1"));
    cdp.screenshot(&shots.join("en-search.png")).await;
    cdp.click(
        &format!("#results li[data-memory='{}'] a", maria.deadline),
        "Details",
        "opening the memory",
    )
    .await;
    cdp.eval("document.querySelector('#correct textarea').value = 'The shop launches on March 15'")
        .await;
    cdp.click("#correct button", "Save the correction", "saving the correction")
        .await;
    assert_eq!(cdp.text("#memory-content").await, "The shop launches on March 15");
    let history = cdp.text("#history").await;
    assert!(
        history.contains("user:maria") && history.contains("replaces mem_") && history.contains("UTC"),
        "{history}"
    );
    cdp.screenshot(&shots.join("en-memory.png")).await;
    cdp.open(&format!("{base}/u/maria/r/cfo")).await;
    cdp.click("#candidates button[value=approve]", "Approve", "approving")
        .await;
    cdp.click(
        "#conflicts button.keep",
        "Confirm The budget for the shop launch is $500",
        "keeping $500",
    )
    .await;
    assert!(cdp.text("#conflicts").await.contains("No conflict to confirm."));
    cdp.click("#recent-turns a", "What budget did we agree on?", "opening the turn")
        .await;
    assert_eq!(reasons_with(&mut cdp, CJK).await, json!(0), "every reason in English");
    cdp.screenshot(&shots.join("en-trace.png")).await;
    // And on the Chinese page, in Chinese.
    let turn = cdp.eval("location.pathname").await;
    cdp.open(&format!("{base}{}?lang=zh", turn.as_str().unwrap())).await;
    assert_eq!(reasons_with(&mut cdp, LATIN).await, json!(0), "every reason in Chinese");
    let reason = cdp.text("#decision-reason").await;
    assert!(
        reason.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
        "{reason}"
    );
    cdp.screenshot(&shots.join("zh-trace-of-an-english-turn.png")).await;
    // Conflicts and candidates follow the page too.
    cdp.open(&format!("{base}/u/maria/r/cfo?lang=zh")).await;
    assert!(cdp.text("#conflicts").await.contains("没有待确认的冲突"));

    // The database afterwards.
    let mut km = KnowledgeManagerServiceClient::with_interceptor(nodes::channel(&node).await, KeyInterceptor(KEY));
    let all = |user: &str| ListMemoriesRequest {
        scope: Some(Scope {
            user_id: user.into(),
            ..Default::default()
        }),
        all_roles: true,
        statuses: (1..=5).collect(),
        ..Default::default()
    };
    let memories = km.list_memories(all("wang")).await.unwrap().into_inner().memories;
    let by_content = |content: &str| {
        memories
            .iter()
            .find(|m| m.content == content)
            .unwrap_or_else(|| panic!("{content}"))
    };
    let old = by_content("上线时间是3月1日");
    assert_eq!(old.status, MemoryStatus::Replaced as i32);
    assert_eq!(old.superseded_by, by_content("上线时间改到3月15日").id);
    assert_eq!(by_content("这个项目的预算是$500").status, MemoryStatus::Replaced as i32);
    assert_eq!(by_content("预算好像改成$800了").status, MemoryStatus::Active as i32);
    assert_eq!(
        by_content("这周我想每天早上收到一份简报").status,
        MemoryStatus::Active as i32
    );
    let changes = km
        .get_memory_history(GetMemoryHistoryRequest {
            scope: Some(Scope {
                user_id: "wang".into(),
                ..Default::default()
            }),
            all_roles: true,
            memory_id: wang.budget.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .changes;
    assert_eq!(changes.last().unwrap().actor, "user:wang", "{changes:?}");
    let memories = km.list_memories(all("maria")).await.unwrap().into_inner().memories;
    let kept = memories.iter().find(|m| m.id == maria.budget).unwrap();
    assert_eq!((kept.status, kept.confidence), (MemoryStatus::Active as i32, 1.0));

    // The next turn's context shows the fix.
    let context = prepare(&node, "wang", "课程平台", "上线时间是哪天？").await;
    assert!(context.contains("上线时间改到3月15日"), "{context}");
    // A replaced value may be shown as history, struck through; never as current.
    let current: String = context.split("~~").step_by(2).collect();
    assert!(!current.contains("上线时间是3月1日"), "{context}");

    support::loud(&format!(
        "memory page screenshots (zh-*.png, en-*.png): {}",
        shots.display()
    ));
    node.shutdown().await.unwrap();
}
