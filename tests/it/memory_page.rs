//! The memory page (issue 19) over HTTP, with API keys for two tenants: signing in, what each
//! employee remembers, a recent turn's trace, corrections through forms; CSRF protection,
//! escaped output, the security headers, and another tenant's user or ids answered NOT_FOUND.
//! The same flows in a real browser are in `browser.rs`.

use reqwest::StatusCode;
use reqwest::header::{CONTENT_SECURITY_POLICY, COOKIE, LOCATION, SET_COOKIE};
use thinkus_proto::common::{MemorySource, MemoryStatus, MemoryType, Scope};
use thinkus_proto::gateway::PrepareTurnRequest;
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{GetMemoryRequest, MemoryDraft, RememberRequest};
use thinkus_server::ServiceKind;

use crate::support::KeyInterceptor;
use crate::{nodes, support};

const ACME: &str = "acme-page-key";
const GLOBEX: &str = "globex-page-key";
/// Globex's own "alice": the same user id in another tenant is another person.
const GLOBEX_ALICE: &str = "globex-alice-page-key";

/// A browser-like client: keeps the session cookie, never follows redirects.
pub(crate) struct Visitor {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
    /// The browser's `Accept-Language`.
    accept_language: Option<&'static str>,
}

impl Visitor {
    pub(crate) fn new(base: &str) -> Self {
        Self {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: base.to_string(),
            cookie: None,
            accept_language: None,
        }
    }

    fn keep_cookie(&mut self, response: &reqwest::Response) {
        if let Some(value) = response.headers().get(SET_COOKIE).and_then(|v| v.to_str().ok()) {
            self.cookie = value.split(';').next().map(str::to_string);
        }
    }

    pub(crate) async fn get(&mut self, path: &str) -> (StatusCode, String, reqwest::header::HeaderMap) {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(cookie) = &self.cookie {
            request = request.header(COOKIE, cookie);
        }
        if let Some(language) = self.accept_language {
            request = request.header(reqwest::header::ACCEPT_LANGUAGE, language);
        }
        let response = request.send().await.expect("the page answers");
        self.keep_cookie(&response);
        let status = response.status();
        let headers = response.headers().clone();
        (status, response.text().await.unwrap(), headers)
    }

    /// A download: its status, content type and bytes.
    pub(crate) async fn download(&mut self, path: &str) -> (StatusCode, String, Vec<u8>) {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(cookie) = &self.cookie {
            request = request.header(COOKIE, cookie);
        }
        if let Some(language) = self.accept_language {
            request = request.header(reqwest::header::ACCEPT_LANGUAGE, language);
        }
        let response = request.send().await.expect("the page answers");
        let status = response.status();
        let kind = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (status, kind, response.bytes().await.unwrap().to_vec())
    }

    pub(crate) async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> (StatusCode, String) {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(form));
        if let Some(cookie) = &self.cookie {
            request = request.header(COOKIE, cookie);
        }
        if let Some(language) = self.accept_language {
            request = request.header(reqwest::header::ACCEPT_LANGUAGE, language);
        }
        let response = request.send().await.expect("the page answers");
        self.keep_cookie(&response);
        let status = response.status();
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = response.text().await.unwrap();
        (
            status,
            if status == StatusCode::SEE_OTHER {
                location
            } else {
                body
            },
        )
    }
}

/// An `application/x-www-form-urlencoded` body, as a browser sends a form.
fn form_body(fields: &[(&str, &str)]) -> String {
    let encode = |text: &str| {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => (b as char).to_string(),
                b' ' => "+".to_string(),
                other => format!("%{other:02X}"),
            })
            .collect::<String>()
    };
    fields
        .iter()
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The CSRF token in a page's forms.
pub(crate) fn csrf(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form with a CSRF token") + "name=\"csrf\" value=\"".len();
    html[at..].split('"').next().unwrap().to_string()
}

async fn english_role_page(visitor: &mut Visitor) -> String {
    visitor.get("/u/alice/r/cfo?lang=en").await.1
}

fn english_page_conflict(html: &str) -> bool {
    html.contains("budget: $500 or $800? unconfirmed")
}

fn scope(user: &str, role: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: role.into(),
        project_id: "shop".into(),
        session_id: String::new(),
        tenant_id: String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_safe_and_shows_what_is_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::keyed_config(dir.path(), nodes::two_tenant_keys(ACME, GLOBEX, GLOBEX_ALICE));
    let port = support::free_port();
    config.gateway.ui_listen = format!("127.0.0.1:{port}");
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;
    let mut km = KnowledgeManagerServiceClient::with_interceptor(channel.clone(), KeyInterceptor(ACME));
    let mut bob_km = KnowledgeManagerServiceClient::with_interceptor(channel.clone(), KeyInterceptor(GLOBEX));
    let remember = |scope: Scope, memory_type: MemoryType, content: &str, source: MemorySource| RememberRequest {
        scope: Some(scope),
        memory: Some(MemoryDraft {
            r#type: memory_type as i32,
            content: content.into(),
            source: source as i32,
            ..Default::default()
        }),
        ..Default::default()
    };
    let budget = km
        .remember(remember(
            scope("alice", "cfo"),
            MemoryType::Constraint,
            "这个项目的预算是$500",
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
    // One tag: two or more are HTML noise, which admission keeps out of memory.
    let risk = km
        .remember(remember(
            scope("alice", "cfo"),
            MemoryType::Risk,
            "供应商<script>alert(\"x\")可能延期交货",
            MemorySource::UserInput,
        ))
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert!(risk.memory.is_some(), "{risk:?}");
    km.remember(remember(
        scope("alice", "cfo"),
        MemoryType::Constraint,
        "预算好像改成$800了",
        MemorySource::Inference,
    ))
    .await
    .unwrap();
    let bobs = bob_km
        .remember(remember(
            scope("bob", "cfo"),
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
    // Bob's own pending conflict: another tenant's candidate id for the forms below.
    let bobs_conflict = bob_km
        .remember(remember(
            scope("bob", "cfo"),
            MemoryType::Constraint,
            "I think Bob's budget is $12,000 now",
            MemorySource::Inference,
        ))
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap()
        .candidate_id;
    assert!(bobs_conflict.starts_with("cand_"), "{bobs_conflict}");
    // A turn prepared for cfo: its trace is on the page.
    let mut gateway = GatewayServiceClient::with_interceptor(channel.clone(), KeyInterceptor(ACME));
    gateway
        .prepare_turn(PrepareTurnRequest {
            scope: Some(Scope {
                session_id: "s1".into(),
                ..scope("alice", "cfo")
            }),
            message: "我们之前定的预算是多少？".into(),
            ..Default::default()
        })
        .await
        .unwrap();

    let base = format!("http://127.0.0.1:{port}");
    let mut visitor = Visitor::new(&base);
    // Without a key: to the sign-in form, with a session cookie for its CSRF token.
    let (status, location, _) = visitor.get("/u/alice/r/cfo").await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{location}");
    assert!(visitor.cookie.is_some());
    let (status, login, headers) = visitor.get("/login").await;
    assert_eq!(status, StatusCode::OK);
    let token = csrf(&login);
    assert!(
        headers[CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    assert_eq!(headers["x-frame-options"], "DENY");
    // A sign-in without the form's token is refused, a wrong key too.
    let (status, _) = visitor.post("/login", &[("key", ACME)]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = visitor.post("/login", &[("csrf", &token), ("key", "not-a-key")]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, location) = visitor.post("/login", &[("csrf", &token), ("key", ACME)]).await;
    assert_eq!((status, location.as_str()), (StatusCode::SEE_OTHER, "/"));

    // The role's page: memories by type, escaped; the pending conflict; the recent turn.
    let (status, html, _) = visitor.get("/u/alice/r/cfo").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("cfo 对你的记忆"), "in the user's language: {html}");
    assert!(html.contains("这个项目的预算是$500"));
    assert!(
        html.contains("供应商&lt;script&gt;alert(&quot;x&quot;)可能延期交货"),
        "{html}"
    );
    assert!(!html.contains("<script>alert"), "data never becomes markup");
    assert!(html.contains("预算：$500 还是 $800？待确认"), "{html}");
    assert!(html.contains("我们之前定的预算是多少？"), "the recent turn: {html}");
    let (_, english, _) = visitor.get("/u/alice/r/cfo?lang=en").await;
    assert!(english.contains("What cfo remembers about you"), "{english}");
    let trace_at = html.find("/u/alice/t/trc_").expect("a link to the turn's trace");
    let trace_path: String = html[trace_at..].split('"').next().unwrap().replace("&amp;", "&");
    let (status, trace, _) = visitor.get(&trace_path).await;
    assert_eq!(status, StatusCode::OK);
    assert!(trace.contains(&budget), "the trace names the memory it used: {trace}");
    let items = &trace[trace.find("id=\"trace-items\"").unwrap()..];
    let items = &items[..items.find("</table>").unwrap()];
    assert!(
        items.contains("#conflicts\" title=\"cand_") && items.contains(">预算：$500 还是 $800？待确认</a>"),
        "the pending conflict it asked about, by its question: {items}"
    );
    // Everything the services wrote, in the page's language: the turn's reasons (written in
    // Chinese, the message's language), the conflict's question, dates.
    let cjk = |text: &str| text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
    let reasons = |html: &str| -> Vec<String> {
        let mut found: Vec<String> = html
            .split("<tr class=\"")
            .skip(1)
            .map(|row| {
                let row = &row[..row.find("</tr>").unwrap()];
                let last = row.rfind("<td>").unwrap() + "<td>".len();
                row[last..row.rfind("</td>").unwrap()].to_string()
            })
            .collect();
        let at = html.find("id=\"decision-reason\">").unwrap() + "id=\"decision-reason\">".len();
        found.push(html[at..at + html[at..].find("</p>").unwrap()].to_string());
        found
    };
    let chinese = reasons(&trace);
    assert!(chinese.len() > 1 && chinese.iter().all(|r| cjk(r)), "{chinese:?}");
    let (_, trace_en, _) = visitor.get(&format!("{trace_path}?lang=en")).await;
    let english = reasons(&trace_en);
    assert!(
        english.len() == chinese.len() && english.iter().all(|r| !r.is_empty() && !cjk(r)),
        "{english:?}"
    );
    assert!(
        english.contains(&"Refers to earlier discussion".to_string()),
        "{english:?}"
    );
    assert!(english.iter().any(|r| r.starts_with("relevance ")), "{english:?}");
    assert!(
        english.contains(&"a conflict waiting for the user".to_string()),
        "{english:?}"
    );
    assert!(trace_en.contains(" UTC") && !trace_en.contains("年"), "an English date");
    assert!(
        english_page_conflict(&english_role_page(&mut visitor).await),
        "the conflict asks in English on the English page"
    );

    // Another tenant's user, memory or trace: NOT_FOUND, whatever the id.
    for path in [
        "/u/bob".to_string(),
        "/u/bob/r/cfo".to_string(),
        format!("/u/alice/m/{bobs}"),
        format!("/u/bob/m/{bobs}"),
        "/u/alice/m/mem_0123456789abcdef0123456789abcdef".to_string(),
        "/u/alice/t/trc_0123".to_string(),
        "/nowhere".to_string(),
    ] {
        let (status, body, _) = visitor.get(&path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert!(!body.contains("9,000"));
    }

    // Error pages in the visitor's language: `?lang=`, else the browser's; both when neither.
    let (_, both, _) = visitor.get("/nowhere").await;
    assert!(both.contains("找不到 / Not found"), "{both}");
    visitor.accept_language = Some("zh-CN,zh;q=0.9,en;q=0.8");
    let (status, chinese, _) = visitor.get("/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        chinese.contains("找不到") && !chinese.contains("Not found"),
        "{chinese}"
    );
    let (_, english, _) = visitor.get("/nowhere?lang=en").await;
    assert!(
        english.contains("Not found") && !english.contains("找不到"),
        "{english}"
    );
    let (_, form_page, _) = visitor.get(&format!("/u/alice/m/{budget}")).await;
    let (status, refused) = visitor
        .post(
            &format!("/u/alice/m/{budget}/importance"),
            &[("csrf", &csrf(&form_page)), ("importance", "9")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        refused.contains("importance：必须是 1 到 5"),
        "the service's reason too: {refused}"
    );
    visitor.accept_language = None;

    // A change needs the page's token: without it, or with another session's, nothing changes.
    let (_, memory_page, _) = visitor.get(&format!("/u/alice/m/{budget}")).await;
    let token = csrf(&memory_page);
    let (status, _) = visitor.post(&format!("/u/alice/m/{budget}/suppress"), &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut stranger = Visitor::new(&base);
    let (_, stranger_login, _) = stranger.get("/login").await;
    let stranger_token = csrf(&stranger_login);
    let (status, _) = visitor
        .post(&format!("/u/alice/m/{budget}/suppress"), &[("csrf", &stranger_token)])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = stranger
        .post(&format!("/u/alice/m/{budget}/suppress"), &[("csrf", &stranger_token)])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "signed out: to the sign-in form");
    let read = |km: &mut KnowledgeManagerServiceClient<_>, id: String| {
        let request = GetMemoryRequest {
            scope: Some(Scope {
                user_id: "alice".into(),
                ..Default::default()
            }),
            all_roles: true,
            memory_id: id,
        };
        let mut km = km.clone();
        async move { km.get_memory(request).await.unwrap().into_inner().memory.unwrap() }
    };
    assert_eq!(read(&mut km, budget.clone()).await.status, MemoryStatus::Active as i32);
    // Bob's memory through alice's page: NOT_FOUND, and unchanged.
    let (status, _) = visitor
        .post(&format!("/u/alice/m/{bobs}/suppress"), &[("csrf", &token)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = visitor
        .post(&format!("/u/bob/m/{bobs}/suppress"), &[("csrf", &token)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // With the token: the importance, then a suppression, recorded as the user's.
    let back = format!("/u/alice/m/{budget}?lang=en");
    let (status, location) = visitor
        .post(
            &format!("/u/alice/m/{budget}/importance"),
            &[("csrf", &token), ("importance", "5"), ("back", &back)],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(location, format!("/u/alice/m/{budget}?lang=en&done=importance"));
    assert_eq!(read(&mut km, budget.clone()).await.importance, 5);
    let (status, location) = visitor
        .post(
            &format!("/u/alice/m/{budget}/suppress"),
            &[("csrf", &token), ("back", "https://evil.example/phish")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        location,
        format!("/u/alice/m/{budget}?done=suppressed"),
        "never sent elsewhere"
    );
    assert_eq!(
        read(&mut km, budget.clone()).await.status,
        MemoryStatus::Suppressed as i32
    );
    // Freeze, restore, delete.
    let note = km
        .remember(remember(
            scope("alice", "cfo"),
            MemoryType::ActionItem,
            "周五前把报价单发给财务",
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
    for (action, status) in [("freeze", MemoryStatus::Frozen), ("restore", MemoryStatus::Active)] {
        let (code, location) = visitor
            .post(&format!("/u/alice/m/{note}/{action}"), &[("csrf", &token)])
            .await;
        assert_eq!(code, StatusCode::SEE_OTHER, "{action}: {location}");
        assert_eq!(read(&mut km, note.clone()).await.status, status as i32, "{action}");
    }
    let (code, location) = visitor
        .post(
            &format!("/u/alice/m/{note}/delete"),
            &[("csrf", &token), ("back", "/u/alice/r/cfo")],
        )
        .await;
    assert_eq!(
        (code, location.as_str()),
        (StatusCode::SEE_OTHER, "/u/alice/r/cfo?done=deleted")
    );
    let (code, _, _) = visitor.get(&format!("/u/alice/m/{note}")).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "deleted");
    // Another tenant's candidate or conflict, through every form that takes one: NOT_FOUND,
    // and still pending in its own tenant.
    for path in [
        format!("/u/alice/c/{bobs_conflict}/approve"),
        format!("/u/alice/c/{bobs_conflict}/reject"),
        format!("/u/alice/k/{bobs_conflict}/proposed"),
        format!("/u/alice/k/{bobs_conflict}/current"),
        format!("/u/bob/c/{bobs_conflict}/approve"),
        format!("/u/bob/k/{bobs_conflict}/current"),
    ] {
        let (code, body) = visitor.post(&path, &[("csrf", &token)]).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{path}: {body}");
        assert!(!body.contains("12,000"), "{path}");
    }
    let pending = bob_km
        .list_conflicts(thinkus_proto::knowledge::ListConflictsRequest {
            scope: Some(scope("bob", "")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .conflicts;
    assert_eq!(pending.len(), 1, "bob's conflict is untouched: {pending:?}");
    let (code, _, json) = visitor.download("/u/bob/export.json").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(!String::from_utf8_lossy(&json).contains("9,000"));
    let (_, page, _) = visitor.get(&format!("/u/alice/m/{budget}")).await;
    assert!(
        page.contains("用户 alice"),
        "the history says who, in the page's language: {page}"
    );

    // The export: the Markdown files on a page, and one archive that `tar xf` unpacks and
    // `thinkus memory import` reads back unchanged (a no-op), then with an edited line.
    let (status, exported, _) = visitor.get("/u/alice/export").await;
    assert_eq!(status, StatusCode::OK, "{exported}");
    assert!(exported.contains("data-file=\"BOSS.md\""), "{exported}");
    assert!(exported.contains("供应商&lt;script&gt;"), "escaped: {exported}");
    assert!(exported.contains("href=\"/u/alice/export.json\""), "{exported}");
    // Everything alice owns, as JSON (ExportUser).
    let (status, kind, everything) = visitor.download("/u/alice/export.json").await;
    assert_eq!((status, kind.as_str()), (StatusCode::OK, "application/json"));
    let everything: serde_json::Value = serde_json::from_slice(&everything).unwrap();
    assert_eq!(
        (everything["tenant_id"].as_str(), everything["user_id"].as_str()),
        (Some("acme"), Some("alice"))
    );
    assert!(everything["memories"].to_string().contains("$500"), "{everything}");
    let (status, kind, archive) = visitor.download("/u/alice/export.tar").await;
    assert_eq!((status, kind.as_str()), (StatusCode::OK, "application/x-tar"));
    let unpacked = tempfile::tempdir().unwrap();
    std::fs::write(unpacked.path().join("export.tar"), &archive).unwrap();
    let untar = std::process::Command::new("tar")
        .arg("-xf")
        .arg(unpacked.path().join("export.tar"))
        .arg("-C")
        .arg(unpacked.path())
        .status()
        .unwrap();
    assert!(untar.success());
    let folder = unpacked.path().join("thinkus-memory-alice");
    let files = thinkus_server::memory_cli::read_folder(&folder).unwrap();
    assert!(
        files.iter().any(|f| f.path == ".thinkus-export.json"),
        "the manifest is in the archive"
    );
    let knowledge = thinkus_knowledge_manager::KnowledgeGrpcClient::new(
        thinkus_common::grpc::client_channel(channel.clone(), Some(ACME.into())),
        16 * 1024 * 1024,
    );
    let alice = thinkus_common::model::Scope::new("alice", "cfo").with_tenant("acme");
    use thinkus_knowledge_manager::api::KnowledgeApi as _;
    let report = knowledge
        .import_markdown(alice.clone(), files.clone(), false)
        .await
        .unwrap();
    assert_eq!(
        (report.replaced, report.suppressed, report.created, report.queued),
        (0, 0, 0, 0),
        "an archive read back changes nothing: {report:?}"
    );
    let edited: Vec<_> = files
        .into_iter()
        .map(|mut f| {
            if f.path.ends_with(".md") {
                f.content = f.content.replace("可能延期交货", "可能延期两周交货");
            }
            f
        })
        .collect();
    let report = knowledge.import_markdown(alice, edited, false).await.unwrap();
    assert_eq!(report.replaced, 1, "{report:?}");
    let (status, _, _) = visitor.get("/u/bob/export").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, archive) = visitor.download("/u/bob/export.tar").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!String::from_utf8_lossy(&archive).contains("9,000"));

    // Globex's alice, on her own page: none of acme's alice's memories, turns or ids.
    let mut namesake = Visitor::new(&base);
    let (_, login, _) = namesake.get("/login").await;
    let (status, _) = namesake
        .post("/login", &[("csrf", &csrf(&login)), ("key", GLOBEX_ALICE)])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, theirs, _) = namesake.get("/u/alice/r/cfo").await;
    assert_eq!(status, StatusCode::OK, "{theirs}");
    for acme_only in ["$500", "$800", "供应商", "我们之前定的预算是多少？", "/u/alice/t/trc_"] {
        assert!(!theirs.contains(acme_only), "{acme_only} on globex's page: {theirs}");
    }
    let (status, _, _) = namesake.get(&format!("/u/alice/m/{budget}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = namesake.get(&trace_path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, everything) = namesake.download("/u/alice/export.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !String::from_utf8_lossy(&everything).contains("$500"),
        "globex's alice's JSON export holds her data only"
    );
    let (status, _, archive) = namesake.download("/u/alice/export.tar").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !String::from_utf8_lossy(&archive).contains("$500"),
        "globex's alice exports her own memory only"
    );
    let (_, theirs, _) = namesake.get("/u/alice").await;
    let (status, _) = namesake
        .post(&format!("/u/alice/m/{budget}/restore"), &[("csrf", &csrf(&theirs))])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        read(&mut km, budget.clone()).await.status,
        MemoryStatus::Suppressed as i32
    );

    // Signing out ends the session's access.
    let (status, _) = visitor.post("/logout", &[("csrf", &csrf(&page))]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, _, _) = visitor.get("/u/alice/r/cfo").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    node.shutdown().await.unwrap();
}

/// Two gateway replicas behind one address share `gateway.ui_session_secret`: a person signed
/// in on one is signed in on the other, and a form of one replica's page is accepted by the
/// other. A replica with another secret, a cookie changed in one character, an expired session
/// and a token of another session are refused, and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_sessions_work_across_gateway_replicas() {
    const SECRET: &str = "the-secret-both-replicas-of-this-gateway-share";
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::keyed_config(dir.path(), vec![nodes::api_key("acme", &["alice"], ACME)]);
    config.gateway.ui_session_secret = SECRET.into();
    let all = ServiceKind::ALL.iter().copied().collect();
    let backends = thinkus_server::node::open_backends(&config, &all).await.unwrap();
    // Replica A runs every service; B and C are gateways over A's services.
    let port_a = support::free_port();
    let mut config_a = config.clone();
    config_a.gateway.ui_listen = format!("127.0.0.1:{port_a}");
    let node_a = nodes::start(config_a, &ServiceKind::ALL, Some(backends.clone())).await;
    let mut upstream = config.clone();
    upstream.endpoints.memory_controller = Some(node_a.url());
    upstream.endpoints.knowledge_manager = Some(node_a.url());
    upstream.endpoints.retriever = Some(node_a.url());
    upstream.endpoints.artifact = Some(node_a.url());
    upstream.endpoints.summary = Some(node_a.url());
    let port_b = support::free_port();
    let mut config_b = upstream.clone();
    config_b.gateway.ui_listen = format!("127.0.0.1:{port_b}");
    let node_b = nodes::start(config_b, &[ServiceKind::Gateway], Some(backends.clone())).await;
    let port_c = support::free_port();
    let mut config_c = upstream;
    config_c.gateway.ui_listen = format!("127.0.0.1:{port_c}");
    config_c.gateway.ui_session_secret = "another-gateway-with-a-secret-of-its-own".into();
    let node_c = nodes::start(config_c, &[ServiceKind::Gateway], Some(backends)).await;

    let channel = nodes::channel(&node_a).await;
    let mut km = KnowledgeManagerServiceClient::with_interceptor(channel, KeyInterceptor(ACME));
    let budget = km
        .remember(RememberRequest {
            scope: Some(scope("alice", "cfo")),
            memory: Some(MemoryDraft {
                r#type: MemoryType::Constraint as i32,
                content: "这个项目的预算是$500".into(),
                source: MemorySource::UserInput as i32,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap()
        .memory
        .unwrap()
        .id;
    let importance = |km: &KnowledgeManagerServiceClient<_>| {
        let mut km = km.clone();
        let request = GetMemoryRequest {
            scope: Some(Scope {
                user_id: "alice".into(),
                ..Default::default()
            }),
            all_roles: true,
            memory_id: budget.clone(),
        };
        async move {
            km.get_memory(request)
                .await
                .unwrap()
                .into_inner()
                .memory
                .unwrap()
                .importance
        }
    };
    let (a, b, c) = (
        format!("http://127.0.0.1:{port_a}"),
        format!("http://127.0.0.1:{port_b}"),
        format!("http://127.0.0.1:{port_c}"),
    );

    // Signed in on A.
    let mut on_a = Visitor::new(&a);
    let (_, login, _) = on_a.get("/login").await;
    let (status, _) = on_a.post("/login", &[("csrf", &csrf(&login)), ("key", ACME)]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = on_a.cookie.clone().expect("a session cookie");
    assert!(!cookie.contains(ACME), "the key is sealed: {cookie}");
    let (status, page_a, _) = on_a.get(&format!("/u/alice/m/{budget}")).await;
    assert_eq!(status, StatusCode::OK, "{page_a}");

    // The same browser on B: signed in, the same CSRF token, and A's form is accepted there.
    let mut on_b = Visitor::new(&b);
    on_b.cookie = Some(cookie.clone());
    let (status, page_b, _) = on_b.get(&format!("/u/alice/m/{budget}")).await;
    assert_eq!(status, StatusCode::OK, "B accepts A's session: {page_b}");
    assert!(page_b.contains("这个项目的预算是$500"));
    assert_eq!(csrf(&page_a), csrf(&page_b), "every replica derives the same token");
    let (status, location) = on_b
        .post(
            &format!("/u/alice/m/{budget}/importance"),
            &[("csrf", &csrf(&page_a)), ("importance", "1")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(location.ends_with("done=importance"), "{location}");
    assert_eq!(importance(&km).await, 1, "B made the change A's form asked for");
    let (status, _) = on_a
        .post(
            &format!("/u/alice/m/{budget}/importance"),
            &[("csrf", &csrf(&page_b)), ("importance", "2")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(importance(&km).await, 2, "and A B's");

    // Refused: C (another secret), a cookie changed in one character, an expired session.
    let (name, value) = cookie.split_once('=').unwrap();
    let mut forged = value.to_string().into_bytes();
    let at = forged.len() / 2;
    forged[at] = if forged[at] == b'A' { b'B' } else { b'A' };
    let forged = format!("{name}={}", String::from_utf8(forged).unwrap());
    let keys = thinkus_gateway::ui::session::SessionKeys::new(SECRET.as_bytes());
    let now = chrono::Utc::now().timestamp();
    let sealed = |expires: i64| {
        let session = thinkus_gateway::ui::session::Session {
            expires,
            key: Some(ACME.into()),
            ..thinkus_gateway::ui::session::Session::new(now)
        };
        (format!("{name}={}", keys.seal(&session)), keys.csrf(&session))
    };
    let (expired, expired_token) = sealed(now - 1);
    let (valid, valid_token) = sealed(now + 600);
    for (base, cookie, token, what) in [
        (&c, cookie.clone(), csrf(&page_a), "a replica with another secret"),
        (&a, forged, csrf(&page_a), "a forged cookie"),
        (&b, expired, expired_token, "an expired session"),
    ] {
        let mut visitor = Visitor::new(base);
        visitor.cookie = Some(cookie.clone());
        let (status, location) = visitor
            .post(
                &format!("/u/alice/m/{budget}/importance"),
                &[("csrf", &token), ("importance", "3")],
            )
            .await;
        assert_eq!(
            (status, location.as_str()),
            (StatusCode::SEE_OTHER, "/login"),
            "{what}: to the sign-in form"
        );
        let (status, location, _) = visitor.get(&format!("/u/alice/m/{budget}")).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{what}: {location}");
        assert_ne!(
            visitor.cookie.as_deref(),
            Some(cookie.as_str()),
            "{what}: a new session"
        );
    }
    // The same sealing, not expired, is accepted (the refusal above was the expiry); a token
    // of another session is not.
    let mut visitor = Visitor::new(&b);
    visitor.cookie = Some(valid);
    let (status, _) = visitor
        .post(
            &format!("/u/alice/m/{budget}/importance"),
            &[("csrf", &csrf(&page_a)), ("importance", "3")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "A's token in another session");
    assert_eq!(importance(&km).await, 2, "nothing refused changed anything");
    let (status, _) = visitor
        .post(
            &format!("/u/alice/m/{budget}/importance"),
            &[("csrf", &valid_token), ("importance", "4")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(importance(&km).await, 4);

    for node in [node_c, node_b, node_a] {
        node.shutdown().await.unwrap();
    }
}
