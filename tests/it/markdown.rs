//! Markdown memory both ways (issue 19) over the knowledge manager's streaming RPCs, on SQLite
//! and PostgreSQL, in English and Chinese: an export read back changes nothing; an edited line
//! is a replace correction, a deleted line a suppression, a new line a memory written through
//! admission, an edited importance a priority change, each recorded with actor "import".

use thinkus_common::model::Scope as DomainScope;
use thinkus_knowledge_manager::KnowledgeGrpcClient;
use thinkus_knowledge_manager::api::{ImportReport, KnowledgeApi, MarkdownFile};
use thinkus_proto::common::{MemoryStatus, MemoryType, Scope, Visibility};
use thinkus_proto::knowledge::{ChangeKind, IngestTurnsRequest, MemoryDraft, RememberRequest, Turn};
use tonic::Code;

use crate::knowledge::{Backend, Node, all_memories, scope, start};

async fn remember(
    node: &Node,
    scope: &Scope,
    memory_type: MemoryType,
    content: &str,
    visibility: Visibility,
) -> String {
    node.km()
        .remember(RememberRequest {
            scope: Some(scope.clone()),
            memory: Some(MemoryDraft {
                r#type: memory_type as i32,
                content: content.into(),
                visibility: visibility as i32,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|err| panic!("remember {content:?}: {err}"))
        .into_inner()
        .result
        .and_then(|r| r.memory)
        .expect("written")
        .id
}

/// The knowledge manager's client over the node's gRPC channel (what `thinkus memory` uses).
fn client(node: &Node) -> KnowledgeGrpcClient {
    let channel = thinkus_common::grpc::client_channel(node.channel.clone(), None);
    KnowledgeGrpcClient::new(channel, 16 * 1024 * 1024)
}

fn user_scope(user: &str) -> DomainScope {
    DomainScope {
        user_id: user.into(),
        ..Default::default()
    }
}

fn file<'a>(files: &'a [MarkdownFile], path: &str) -> &'a str {
    &files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("no {path} in {:?}", files.iter().map(|f| &f.path).collect::<Vec<_>>()))
        .content
}

fn edit(files: &mut [MarkdownFile], path: &str, change: impl FnOnce(&str) -> String) {
    let file = files.iter_mut().find(|f| f.path == path).expect("the file");
    file.content = change(&file.content);
}

/// Every memory of the user with the number of changes in its history.
async fn state(node: &Node, user: &str) -> Vec<(String, i32, usize)> {
    let mut out = Vec::new();
    for memory in all_memories(node, &scope(user, "", None)).await {
        let changes = node
            .km()
            .get_memory_history(thinkus_proto::knowledge::GetMemoryHistoryRequest {
                scope: Some(scope(user, "", None)),
                memory_id: memory.id.clone(),
                all_roles: true,
            })
            .await
            .unwrap()
            .into_inner()
            .changes
            .len();
        out.push((memory.id, memory.status, changes));
    }
    out.sort();
    out
}

fn nothing_changed(report: &ImportReport) {
    assert_eq!(
        (
            report.replaced,
            report.suppressed,
            report.created,
            report.queued,
            report.skipped
        ),
        (0, 0, 0, 0, 0),
        "{report:?}"
    );
    assert!(report.changes.is_empty(), "{report:?}");
}

async fn english_round_trip(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let user = "md-en";
    let boss_rule = remember(
        &node,
        &scope(user, "assistant", None),
        MemoryType::Constraint,
        "Always reply in English and keep answers short",
        Visibility::Global,
    )
    .await;
    let preference = remember(
        &node,
        &scope(user, "designer", None),
        MemoryType::UserPreference,
        "I prefer a minimalist design style",
        Visibility::Global,
    )
    .await;
    let risk = remember(
        &node,
        &scope(user, "cfo", None),
        MemoryType::Risk,
        "The supplier may deliver the hardware late",
        Visibility::Private,
    )
    .await;
    let decision = remember(
        &node,
        &scope(user, "cto", Some("shop")),
        MemoryType::ProjectDecision,
        "We go with Stripe for payments\nbecause the team knows it",
        Visibility::Project,
    )
    .await;
    node.km()
        .ingest_turns(IngestTurnsRequest {
            scope: Some(Scope {
                session_id: "s1".into(),
                ..scope(user, "cto", Some("shop"))
            }),
            turns: vec![
                Turn {
                    speaker: "user".into(),
                    text: "Can we launch the shop in two weeks?".into(),
                    ..Default::default()
                },
                Turn {
                    speaker: "assistant".into(),
                    text: "Yes, if we keep the scope small.".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        })
        .await
        .unwrap();

    let km = client(&node);
    let files = km.export_markdown(user_scope(user), None).await.unwrap();
    let boss = file(&files, "BOSS.md");
    assert!(boss.starts_with("# The boss's handbook"), "{boss}");
    assert!(
        boss.contains("## Rules and constraints\n\n- Always reply in English and keep answers short <!-- "),
        "{boss}"
    );
    assert!(
        boss.contains(&format!(
            "<!-- {boss_rule} · assistant · importance 3 · confidence 1.00 · evidence 1 · recorded "
        )),
        "{boss}"
    );
    assert!(boss.contains("## Preferences") && boss.contains(&preference), "{boss}");
    let long_term = file(&files, "MEMORY.md");
    assert!(
        long_term.contains("## Risks") && long_term.contains(&risk),
        "{long_term}"
    );
    let shop = file(&files, "projects/shop.md");
    assert!(
        shop.contains("## Decisions\n\n- We go with Stripe for payments<br>because the team knows it <!-- "),
        "{shop}"
    );
    let day = files
        .iter()
        .find(|f| f.path.starts_with("memory/"))
        .expect("a daily log");
    assert!(
        day.content
            .contains("- user: Can we launch the shop in two weeks? <!-- mem_"),
        "{}",
        day.content
    );
    assert!(day.content.contains(" · cto · s1 · shop"), "{}", day.content);
    assert!(files.iter().any(|f| f.path == ".thinkus-export.json"));

    // As exported: nothing changes, not even the history.
    let before = state(&node, user).await;
    let report = km
        .import_markdown(user_scope(user), files.clone(), false)
        .await
        .unwrap();
    nothing_changed(&report);
    assert!(report.lines >= 6, "{report:?}");
    assert_eq!(state(&node, user).await, before);

    // Edited, deleted, added, reweighed.
    let mut edited = files.clone();
    edit(&mut edited, "projects/shop.md", |c| {
        c.replace(
            "We go with Stripe for payments<br>because",
            "We go with Adyen for payments<br>because",
        )
        .replace("## Decisions\n\n", "## Decisions\n\n- We ship the shop on Vercel\n")
    });
    edit(&mut edited, "MEMORY.md", |c| {
        c.lines()
            .filter(|l| !l.contains(&risk))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    edit(&mut edited, "BOSS.md", |c| {
        c.replace(
            &format!("{preference} · designer · importance 3"),
            &format!("{preference} · designer · importance 5"),
        )
    });
    // A dry run says what would happen and changes nothing.
    let dry = km
        .import_markdown(user_scope(user), edited.clone(), true)
        .await
        .unwrap();
    assert_eq!((dry.replaced, dry.suppressed, dry.created), (2, 1, 1), "{dry:?}");
    assert_eq!(state(&node, user).await, before);

    let report = km
        .import_markdown(user_scope(user), edited.clone(), false)
        .await
        .unwrap();
    assert_eq!(
        (report.replaced, report.suppressed, report.created, report.skipped),
        (2, 1, 1, 0),
        "{report:?}"
    );
    let memories = all_memories(&node, &scope(user, "", None)).await;
    let by_id = |id: &str| memories.iter().find(|m| m.id == id).expect("the memory").clone();
    let old = by_id(&decision);
    assert_eq!(old.status, MemoryStatus::Replaced as i32);
    let successor = by_id(&old.superseded_by);
    assert_eq!(
        successor.content,
        "We go with Adyen for payments\nbecause the team knows it"
    );
    assert_eq!(successor.scope.as_ref().unwrap().project_id, "shop");
    assert_eq!(by_id(&risk).status, MemoryStatus::Suppressed as i32);
    assert_eq!(by_id(&preference).importance, 5);
    let added = memories
        .iter()
        .find(|m| m.content == "We ship the shop on Vercel")
        .expect("the new line is a memory");
    assert_eq!(added.r#type, MemoryType::ProjectDecision as i32);
    assert_eq!(added.visibility, Visibility::Project as i32);
    for id in [&decision, &risk, &preference, &added.id] {
        let changes = node
            .km()
            .get_memory_history(thinkus_proto::knowledge::GetMemoryHistoryRequest {
                scope: Some(scope(user, "", None)),
                memory_id: id.clone(),
                all_roles: true,
            })
            .await
            .unwrap()
            .into_inner()
            .changes;
        let last = changes.last().expect("a change");
        assert_eq!(last.actor, "import", "{id}: {changes:?}");
        assert!(
            [ChangeKind::Correction as i32, ChangeKind::Create as i32].contains(&last.kind),
            "{changes:?}"
        );
    }

    // The new export, read back, changes nothing again.
    let files = km.export_markdown(user_scope(user), None).await.unwrap();
    assert!(file(&files, "projects/shop.md").contains("Adyen"));
    assert!(
        !file(&files, "MEMORY.md").contains(&risk),
        "suppressed memories are not exported"
    );
    let before = state(&node, user).await;
    nothing_changed(&km.import_markdown(user_scope(user), files, false).await.unwrap());
    assert_eq!(state(&node, user).await, before);

    // Files of another user, or paths outside the folder, are refused.
    let others = km.export_markdown(user_scope(user), None).await.unwrap();
    let err = km
        .import_markdown(user_scope("md-someone-else"), others, false)
        .await
        .unwrap_err();
    assert_eq!(err.code, thinkus_common::ErrorCode::InvalidArgument, "{err:?}");
    let err = km
        .import_markdown(
            user_scope(user),
            vec![MarkdownFile {
                path: "../BOSS.md".into(),
                content: String::new(),
            }],
            false,
        )
        .await
        .unwrap_err();
    assert!(err.message.starts_with("files[0].path"), "{err:?}");
    // Over gRPC, an import must start with its header.
    let err = node
        .km()
        .import_memory(futures::stream::iter(vec![
            thinkus_proto::knowledge::ImportMemoryRequest {
                item: Some(thinkus_proto::knowledge::import_memory_request::Item::File(
                    thinkus_proto::knowledge::MemoryFile::default(),
                )),
            },
        ]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    node.stop().await;
}

async fn chinese_round_trip(backend: Backend) {
    let Some(node) = start(backend, |_| {}).await else {
        return;
    };
    let user = "md-zh";
    let rule = remember(
        &node,
        &scope(user, "assistant", None),
        MemoryType::Constraint,
        "所有回复都用中文",
        Visibility::Global,
    )
    .await;
    let budget = remember(
        &node,
        &scope(user, "cfo", Some("课程平台")),
        MemoryType::Constraint,
        "课程平台的预算是5万元",
        Visibility::Project,
    )
    .await;
    let km = client(&node);
    // Only the project (and the cross-project memory).
    let files = km
        .export_markdown(
            DomainScope {
                project_id: Some("课程平台".into()),
                ..user_scope(user)
            },
            None,
        )
        .await
        .unwrap();
    let boss = file(&files, "BOSS.md");
    assert!(boss.starts_with("# 老板工作手册"), "{boss}");
    assert!(
        boss.contains(&format!(
            "- 所有回复都用中文 <!-- {rule} · assistant · 重要性 3 · 置信度 1.00 · 证据 1 · "
        )),
        "{boss}"
    );
    let project_path = "projects/课程平台.md";
    let project = file(&files, project_path);
    assert!(project.starts_with("# 项目：课程平台"), "{project}");
    assert!(
        project.contains("## 规则与约束\n\n- 课程平台的预算是5万元 <!-- "),
        "{project}"
    );

    let before = state(&node, user).await;
    nothing_changed(
        &km.import_markdown(user_scope(user), files.clone(), false)
            .await
            .unwrap(),
    );
    assert_eq!(state(&node, user).await, before);

    let mut edited = files.clone();
    edit(&mut edited, project_path, |c| {
        c.replace("课程平台的预算是5万元", "课程平台的预算是8万元").replace(
            "## 规则与约束\n\n",
            "## 规则与约束\n\n## 风险\n\n- 讲师可能无法按时交付课程视频\n",
        )
    });
    edit(&mut edited, "BOSS.md", |c| {
        c.replace("## 偏好\n\n", "## 偏好\n\n- {{input.topic}} 的报告\n")
    });
    let report = km.import_markdown(user_scope(user), edited, false).await.unwrap();
    assert_eq!(
        (report.replaced, report.created, report.skipped),
        (1, 1, 1),
        "{report:?}"
    );
    let skipped = report.changes.iter().find(|c| c.action == "skip").unwrap();
    assert_eq!(
        skipped.detail, "noise: template placeholder",
        "admission applies: {report:?}"
    );
    let memories = all_memories(&node, &scope(user, "", None)).await;
    let old = memories.iter().find(|m| m.id == budget).unwrap();
    let successor = memories.iter().find(|m| m.id == old.superseded_by).unwrap();
    assert_eq!(successor.content, "课程平台的预算是8万元");
    assert!(
        memories
            .iter()
            .any(|m| m.content == "讲师可能无法按时交付课程视频" && m.r#type == MemoryType::Risk as i32)
    );

    let files = km
        .export_markdown(
            DomainScope {
                project_id: Some("课程平台".into()),
                ..user_scope(user)
            },
            None,
        )
        .await
        .unwrap();
    let before = state(&node, user).await;
    nothing_changed(&km.import_markdown(user_scope(user), files, false).await.unwrap());
    assert_eq!(state(&node, user).await, before);
    node.stop().await;
}

on_both_backends!(english_round_trip, chinese_round_trip);
