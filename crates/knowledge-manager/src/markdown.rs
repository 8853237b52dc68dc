//! Memory as Markdown a person edits in any editor (seed 004 sections 2-4), both ways.
//!
//! An export is a folder:
//! - `BOSS.md`: the standing rules and profile the user gave (cross-project constraints,
//!   feedback, preferences and facts, see `crate::standing`), by type;
//! - `MEMORY.md`: the other cross-project long-term memories, by type;
//! - `projects/<project>.md`: one file per project, its memories by type;
//! - `memory/YYYY-MM-DD.md`: daily logs, the conversation turns of each day (UTC) by session;
//! - `.thinkus-export.json`: the manifest, what each line said when it was exported.
//!
//! Headings and labels are in the user's language. Every memory is one line,
//! `- what it says <!-- mem_… · role · confidence · evidence · dates -->`: the comment holds
//! the stable id (and the importance, which may be edited too). Reading the folder back, an
//! edited line becomes a replace correction, a deleted line a suppression, a new line (under a
//! type's heading) a memory written through admission, each recorded with actor `import`;
//! lines that are as exported change nothing, so an export read back is a no-op.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use regex::Regex;
use serde::{Deserialize, Serialize};
use thinkus_backends::filter::MemoryFilter;
use thinkus_backends::sql::{MemoryOrder, MemoryQuery};
use thinkus_common::ApiError;
use thinkus_common::model::{Language, Memory, MemorySource, MemoryStatus, MemoryType, Scope, Visibility};
use thinkus_common::text::detect_language_of;

use crate::api::{
    CorrectRequest, CorrectionAction, ImportChange, ImportReport, MarkdownFile, MemoryDraft, WriteOutcome,
};
use crate::learn::{Admission, Extracted, admit};
use crate::service::{KnowledgeManager, WriteOptions};
use crate::standing::is_standing;

/// The manifest's path in an export folder.
pub const MANIFEST: &str = ".thinkus-export.json";
/// The actor an import's changes are recorded with.
pub const ACTOR: &str = "import";

/// The memory types of BOSS.md, in the order of its sections.
const BOSS_TYPES: [MemoryType; 4] = [
    MemoryType::Constraint,
    MemoryType::Feedback,
    MemoryType::UserPreference,
    MemoryType::Fact,
];

/// The order of the sections of MEMORY.md and the project files.
const SECTION_ORDER: [MemoryType; 12] = [
    MemoryType::ProjectDecision,
    MemoryType::Constraint,
    MemoryType::DiscussionConclusion,
    MemoryType::ActionItem,
    MemoryType::Risk,
    MemoryType::UserPreference,
    MemoryType::Feedback,
    MemoryType::Fact,
    MemoryType::Insight,
    MemoryType::Issue,
    MemoryType::Learning,
    MemoryType::Pattern,
];

/// A section heading for a type, in each language.
fn heading(memory_type: MemoryType, language: Language) -> &'static str {
    match (memory_type, language) {
        (MemoryType::ProjectDecision, Language::Zh) => "项目决策",
        (MemoryType::UserPreference, Language::Zh) => "偏好",
        (MemoryType::DiscussionConclusion, Language::Zh) => "讨论结论",
        (MemoryType::ActionItem, Language::Zh) => "待办事项",
        (MemoryType::Constraint, Language::Zh) => "规则与约束",
        (MemoryType::Risk, Language::Zh) => "风险",
        (MemoryType::Feedback, Language::Zh) => "反馈",
        (MemoryType::Insight, Language::Zh) => "见解",
        (MemoryType::Issue, Language::Zh) => "问题",
        (MemoryType::Learning, Language::Zh) => "经验",
        (MemoryType::Pattern, Language::Zh) => "模式",
        (MemoryType::Fact, Language::Zh) => "个人信息与事实",
        (MemoryType::ConversationTurn, Language::Zh) => "对话",
        (MemoryType::ProjectDecision, Language::En) => "Decisions",
        (MemoryType::UserPreference, Language::En) => "Preferences",
        (MemoryType::DiscussionConclusion, Language::En) => "Conclusions",
        (MemoryType::ActionItem, Language::En) => "Action items",
        (MemoryType::Constraint, Language::En) => "Rules and constraints",
        (MemoryType::Risk, Language::En) => "Risks",
        (MemoryType::Feedback, Language::En) => "Feedback",
        (MemoryType::Insight, Language::En) => "Insights",
        (MemoryType::Issue, Language::En) => "Issues",
        (MemoryType::Learning, Language::En) => "Learnings",
        (MemoryType::Pattern, Language::En) => "Patterns",
        (MemoryType::Fact, Language::En) => "Facts",
        (MemoryType::ConversationTurn, Language::En) => "Conversation",
    }
}

/// The type a heading names: this module's headings in either language, the types' labels, or
/// their stable names ("project_decision"), case and a trailing count ignored.
fn type_of_heading(text: &str) -> Option<MemoryType> {
    static COUNT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s*[（(]\s*\d+\s*[)）]\s*$").expect("valid regex"));
    let name = COUNT.replace(text.trim(), "").trim().to_lowercase();
    MemoryType::ALL.iter().copied().find(|t| {
        [Language::Zh, Language::En]
            .iter()
            .any(|l| heading(*t, *l).to_lowercase() == name || t.label(*l).to_lowercase() == name)
            || t.as_str() == name
    })
}

/// Where a file sits in an export, from its path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileKind {
    Boss,
    Memory,
    Project(String),
    Daily,
    Other,
}

fn kind_of(path: &str) -> FileKind {
    static DAILY: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^memory/\d{4}-\d{2}-\d{2}\.md$").expect("valid regex"));
    match path {
        "BOSS.md" => FileKind::Boss,
        "MEMORY.md" => FileKind::Memory,
        _ if DAILY.is_match(path) => FileKind::Daily,
        _ => match path.strip_prefix("projects/").and_then(|p| p.strip_suffix(".md")) {
            Some(name) if !name.contains('/') => match decode_name(name) {
                Some(project) => FileKind::Project(project),
                None => FileKind::Other,
            },
            _ => FileKind::Other,
        },
    }
}

/// A project id as a file name: letters and digits of any script, `_`, `-` and (not first) `.`
/// as they are ("课程平台", "shop-v2"), any other character as its `%XX` UTF-8 bytes.
fn encode_name(project: &str) -> String {
    let mut name = String::new();
    for c in project.chars() {
        if c.is_alphanumeric() || matches!(c, '_' | '-') || (c == '.' && !name.is_empty()) {
            name.push(c);
        } else {
            let mut bytes = [0u8; 4];
            for byte in c.encode_utf8(&mut bytes).bytes() {
                name.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    name
}

fn decode_name(name: &str) -> Option<String> {
    let mut bytes = Vec::new();
    let raw = name.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            let hex = name.get(i + 1..i + 3)?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            bytes.push(raw[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).ok().filter(|s| !s.is_empty())
}

/// The manifest of an export: what each memory's line said, so an import tells an edited or
/// deleted line from one that is as exported.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub user_id: String,
    #[serde(default)]
    pub project_id: Option<String>,
    pub language: Language,
    pub exported_at: DateTime<Utc>,
    pub memories: BTreeMap<String, Exported>,
}

/// One exported line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exported {
    pub file: String,
    pub text: String,
    pub importance: u8,
}

const FORMAT: &str = "thinkus-markdown";

/// A memory's line text: its content on one line (line breaks as `<br>`), a turn with its
/// speaker.
fn line_text(memory: &Memory) -> String {
    let content = memory.content.trim().replace("\r\n", "\n").replace('\n', "<br>");
    match (&memory.speaker, memory.memory_type) {
        (Some(speaker), MemoryType::ConversationTurn) => format!("{speaker}: {content}"),
        _ => content,
    }
}

/// The content an edited line holds: `<br>` back to line breaks, a turn's speaker removed.
fn content_of(text: &str, memory: Option<&Memory>) -> String {
    let text = match memory.and_then(|m| m.speaker.as_deref()) {
        Some(speaker) => text
            .strip_prefix(&format!("{speaker}:"))
            .map(str::trim_start)
            .unwrap_or(text),
        None => text,
    };
    text.replace("<br>", "\n").trim().to_string()
}

fn date(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d").to_string()
}

/// The comment after a memory's line: its id first, then what a person wants to know.
fn comment(memory: &Memory, language: Language) -> String {
    if memory.memory_type == MemoryType::ConversationTurn {
        return format!("<!-- {} -->", memory.id);
    }
    match language {
        Language::Zh => format!(
            "<!-- {} · {} · 重要性 {} · 置信度 {:.2} · 证据 {} · {} 记录 · {} 更新 -->",
            memory.id,
            memory.scope.role_id,
            memory.importance,
            memory.confidence,
            memory.evidence_count,
            date(memory.occurred_at),
            date(memory.updated_at)
        ),
        Language::En => format!(
            "<!-- {} · {} · importance {} · confidence {:.2} · evidence {} · recorded {} · updated {} -->",
            memory.id,
            memory.scope.role_id,
            memory.importance,
            memory.confidence,
            memory.evidence_count,
            date(memory.occurred_at),
            date(memory.updated_at)
        ),
    }
}

/// One parsed memory line of a file.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    number: u32,
    text: String,
    id: Option<String>,
    importance: Option<u8>,
    /// The type of the section the line is in.
    section: Option<MemoryType>,
}

/// The memory lines of a Markdown file: list items (`- ` or `* `) outside code fences; other
/// lines (headings, quotes, comments, prose) are not memories.
fn parse(content: &str) -> Vec<Line> {
    static ID: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\bmem_[0-9a-f]{32}\b").expect("valid regex"));
    static IMPORTANCE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?i)(?:重要性|importance)\s*[:：]?\s*([1-5])\b").expect("valid regex"));
    let mut lines = Vec::new();
    let mut section = None;
    let mut fenced = false;
    for (i, raw) in content.lines().enumerate() {
        let trimmed = raw.trim_end();
        if trimmed.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(title) = trimmed.strip_prefix("## ") {
            section = type_of_heading(title);
            continue;
        }
        if trimmed.starts_with('#') {
            section = None;
            continue;
        }
        let Some(item) = trimmed.strip_prefix("- ").or_else(|| trimmed.strip_prefix("* ")) else {
            continue;
        };
        let (text, comment) = match (item.rfind("<!--"), item.ends_with("-->")) {
            (Some(start), true) => (&item[..start], Some(&item[start..])),
            _ => (item, None),
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let id = comment.and_then(|c| ID.find(c)).map(|m| m.as_str().to_string());
        let importance = comment
            .and_then(|c| IMPORTANCE.captures(c))
            .and_then(|c| c[1].parse().ok());
        lines.push(Line {
            number: i as u32 + 1,
            text: text.to_string(),
            id,
            importance,
            section,
        });
    }
    lines
}

/// Every active memory of the user (cross-project and, with a project, that project's; all
/// projects' without).
async fn active_memories(km: &KnowledgeManager, scope: &Scope) -> Result<Vec<Memory>, ApiError> {
    let mut memories = Vec::new();
    let mut offset = 0;
    loop {
        let page = km
            .store
            .list_memories(&MemoryQuery {
                filter: MemoryFilter::user(&scope.owner()),
                order: MemoryOrder::Oldest,
                limit: 1000,
                offset,
                ..Default::default()
            })
            .await?;
        let count = page.len();
        offset += count;
        memories.extend(page.into_iter().filter(|m| {
            scope.project_id.is_none() || m.scope.project_id.is_none() || m.scope.project_id == scope.project_id
        }));
        if count < 1000 {
            break;
        }
    }
    Ok(memories)
}

/// The file a memory is exported to.
fn file_of(memory: &Memory) -> String {
    if memory.memory_type == MemoryType::ConversationTurn {
        return format!("memory/{}.md", date(memory.occurred_at));
    }
    match &memory.scope.project_id {
        Some(project) => format!("projects/{}.md", encode_name(project)),
        None if is_standing(memory) => "BOSS.md".into(),
        None => "MEMORY.md".into(),
    }
}

fn intro(kind: &FileKind, user: &str, language: Language) -> String {
    match (kind, language) {
        (FileKind::Boss, Language::Zh) => format!(
            "# 老板工作手册\n\n> {user} 给所有员工定下的规则、偏好和个人信息。编辑一行即更正这条记忆，删除一行即停用它，\n> 在小标题下新增一行即写入一条新记忆（所有员工可见）。行末注释里是记忆编号，请保留。\n"
        ),
        (FileKind::Boss, Language::En) => format!(
            "# The boss's handbook\n\n> The rules, preferences and personal facts {user} gave every employee. Edit a line to correct\n> that memory, delete it to stop using it, add a line under a heading to write a new memory\n> (seen by every employee). Keep the comment at the end of a line: it holds the memory's id.\n"
        ),
        (FileKind::Memory, Language::Zh) => format!(
            "# 长期记忆\n\n> {user} 跨项目的长期记忆，按类型排列。编辑、删除或在小标题下新增一行，导入时即更正、停用或写入。\n> 可用的小标题：项目决策、讨论结论、待办事项、风险、见解、问题、经验、模式。\n"
        ),
        (FileKind::Memory, Language::En) => format!(
            "# Long-term memory\n\n> What is remembered about {user} across projects, by type. Edit, delete or add a line under a\n> heading: an import corrects, stops using or writes it. Headings: Decisions, Conclusions,\n> Action items, Risks, Insights, Issues, Learnings, Patterns.\n"
        ),
        (FileKind::Project(project), Language::Zh) => format!(
            "# 项目：{project}\n\n> 这个项目的记忆，按类型排列。编辑、删除或在小标题下新增一行（项目内所有员工可见）。\n"
        ),
        (FileKind::Project(project), Language::En) => format!(
            "# Project: {project}\n\n> This project's memories, by type. Edit, delete or add a line under a heading (seen by every\n> employee in the project).\n"
        ),
        (FileKind::Daily | FileKind::Other, _) => String::new(),
    }
}

/// The user's memory as Markdown files.
pub(crate) async fn export(
    km: &KnowledgeManager,
    scope: &Scope,
    language: Option<Language>,
) -> Result<Vec<MarkdownFile>, ApiError> {
    let memories = active_memories(km, scope).await?;
    let language = language.unwrap_or_else(|| {
        let curated: Vec<&str> = memories
            .iter()
            .filter(|m| m.memory_type != MemoryType::ConversationTurn)
            .map(|m| m.content.as_str())
            .collect();
        if curated.is_empty() {
            detect_language_of(memories.iter().map(|m| m.content.as_str()))
        } else {
            detect_language_of(curated)
        }
    });
    let mut by_file: BTreeMap<String, Vec<&Memory>> = BTreeMap::new();
    by_file.entry("BOSS.md".into()).or_default();
    by_file.entry("MEMORY.md".into()).or_default();
    if let Some(project) = &scope.project_id {
        by_file
            .entry(format!("projects/{}.md", encode_name(project)))
            .or_default();
    }
    for memory in &memories {
        by_file.entry(file_of(memory)).or_default().push(memory);
    }
    let mut manifest = Manifest {
        format: FORMAT.into(),
        version: 1,
        user_id: scope.user_id.clone(),
        project_id: scope.project_id.clone(),
        language,
        exported_at: Utc::now(),
        memories: BTreeMap::new(),
    };
    let mut files = Vec::new();
    for (path, memories) in &by_file {
        let kind = kind_of(path);
        let mut out = intro(&kind, &scope.user_id, language);
        let mut line = |out: &mut String, memory: &Memory| {
            let text = line_text(memory);
            out.push_str(&format!("- {text} {}\n", comment(memory, language)));
            manifest.memories.insert(
                memory.id.clone(),
                Exported {
                    file: path.clone(),
                    text,
                    importance: memory.importance,
                },
            );
        };
        if kind == FileKind::Daily {
            let day = path.trim_start_matches("memory/").trim_end_matches(".md");
            out.push_str(&match language {
                Language::Zh => format!("# {day} 工作记忆\n\n> 当天的对话原文，按会话排列（UTC）。删除一行即停用它。\n"),
                Language::En => {
                    format!("# {day} daily log\n\n> What was said that day, by session (UTC). Delete a line to stop using it.\n")
                }
            });
            let mut sessions: BTreeMap<(String, String), Vec<&Memory>> = BTreeMap::new();
            for memory in memories {
                let session = memory.scope.session_id.clone().unwrap_or_default();
                sessions
                    .entry((session, memory.scope.role_id.clone()))
                    .or_default()
                    .push(memory);
            }
            let mut ordered: Vec<_> = sessions.into_iter().collect();
            ordered.sort_by_key(|(_, turns)| turns.iter().map(|m| (m.occurred_at, m.id.clone())).min());
            for ((session, role), mut turns) in ordered {
                turns.sort_by_key(|m| (m.occurred_at, m.id.clone()));
                let time = turns[0].occurred_at.format("%H:%M");
                let project = turns[0]
                    .scope
                    .project_id
                    .as_deref()
                    .map(|p| format!(" · {p}"))
                    .unwrap_or_default();
                let session = if session.is_empty() { "-".to_string() } else { session };
                out.push_str(&format!("\n### {time} · {role} · {session}{project}\n\n"));
                for memory in turns {
                    line(&mut out, memory);
                }
            }
        } else {
            let types: &[MemoryType] = if kind == FileKind::Boss {
                &BOSS_TYPES
            } else {
                &SECTION_ORDER
            };
            for memory_type in types {
                let mut section: Vec<&&Memory> = memories.iter().filter(|m| m.memory_type == *memory_type).collect();
                if section.is_empty() && kind != FileKind::Boss {
                    continue;
                }
                section.sort_by(|a, b| {
                    b.importance
                        .cmp(&a.importance)
                        .then(a.occurred_at.cmp(&b.occurred_at))
                        .then(a.id.cmp(&b.id))
                });
                out.push_str(&format!("\n## {}\n\n", heading(*memory_type, language)));
                for memory in section {
                    line(&mut out, memory);
                }
            }
        }
        files.push(MarkdownFile {
            path: path.clone(),
            content: out,
        });
    }
    files.push(MarkdownFile {
        path: MANIFEST.into(),
        content: serde_json::to_string_pretty(&manifest).map_err(|err| ApiError::internal(err.to_string()))?,
    });
    Ok(files)
}

fn check_path(path: &str, index: usize) -> Result<(), ApiError> {
    let bad = path.is_empty()
        || path.len() > 512
        || path.starts_with('/')
        || path.contains('\\')
        || path
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if bad {
        return Err(ApiError::invalid(
            &format!("files[{index}].path"),
            format!("{path:?} is not a relative path inside the export folder"),
        ));
    }
    Ok(())
}

/// Everything an import decided, before it is applied.
enum Plan {
    Replace {
        memory: Box<Memory>,
        content: String,
    },
    Importance {
        memory: Box<Memory>,
        importance: u8,
    },
    Suppress {
        memory: Box<Memory>,
    },
    Create {
        owner: Scope,
        draft: Box<MemoryDraft>,
        extracted: Box<Extracted>,
    },
    Skip(String),
}

struct Step {
    path: String,
    line: u32,
    memory_id: Option<String>,
    plan: Plan,
}

/// Reads edited Markdown files back (see the module's documentation).
pub(crate) async fn import(
    km: &KnowledgeManager,
    scope: &Scope,
    files: Vec<MarkdownFile>,
    dry_run: bool,
) -> Result<ImportReport, ApiError> {
    let mut manifest: Option<Manifest> = None;
    let mut markdown = Vec::new();
    for (i, file) in files.into_iter().enumerate() {
        check_path(&file.path, i)?;
        if file.path == MANIFEST {
            let read: Manifest = serde_json::from_str(&file.content)
                .map_err(|err| ApiError::invalid(&format!("files[{i}]"), format!("unreadable {MANIFEST}: {err}")))?;
            if read.format != FORMAT {
                return Err(ApiError::invalid(
                    &format!("files[{i}]"),
                    format!("{MANIFEST} is not a {FORMAT} manifest"),
                ));
            }
            if read.user_id != scope.user_id {
                return Err(ApiError::invalid(
                    "scope.user_id",
                    format!(
                        "the files were exported for user {:?}, not {:?}",
                        read.user_id, scope.user_id
                    ),
                ));
            }
            if read.project_id.is_some() && scope.project_id.is_some() && read.project_id != scope.project_id {
                return Err(ApiError::invalid(
                    "scope.project_id",
                    format!(
                        "the files were exported for project {:?}",
                        read.project_id.clone().unwrap_or_default()
                    ),
                ));
            }
            manifest = Some(read);
        } else if file.path.ends_with(".md") {
            markdown.push(file);
        }
    }
    markdown.sort_by(|a, b| a.path.cmp(&b.path));
    let role = if scope.role_id.trim().is_empty() {
        "assistant".to_string()
    } else {
        scope.role_id.clone()
    };

    // The memories the lines name, read once.
    let mut named: BTreeSet<String> = BTreeSet::new();
    let mut parsed = Vec::new();
    for file in &markdown {
        let lines = parse(&file.content);
        named.extend(lines.iter().filter_map(|l| l.id.clone()));
        parsed.push((file.path.clone(), lines));
    }
    let deleted: Vec<String> = match &manifest {
        Some(manifest) => {
            let imported: BTreeSet<&str> = markdown.iter().map(|f| f.path.as_str()).collect();
            manifest
                .memories
                .iter()
                .filter(|(id, exported)| imported.contains(exported.file.as_str()) && !named.contains(*id))
                .map(|(id, _)| id.clone())
                .collect()
        }
        None => Vec::new(),
    };
    let wanted: Vec<String> = named.iter().cloned().chain(deleted.iter().cloned()).collect();
    let mut stored: BTreeMap<String, Memory> = BTreeMap::new();
    for chunk in wanted.chunks(500) {
        for memory in km.store.get_memories(&scope.owner(), chunk).await? {
            stored.insert(memory.id.clone(), memory);
        }
    }

    let mut steps: Vec<Step> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for (path, lines) in &parsed {
        let kind = kind_of(path);
        for line in lines {
            let step = |plan: Plan, memory_id: Option<String>| Step {
                path: path.clone(),
                line: line.number,
                memory_id,
                plan,
            };
            let Some(id) = &line.id else {
                steps.push(step(new_line(km, scope, &role, &kind, line), None));
                continue;
            };
            if !seen.insert(id.clone()) {
                steps.push(step(
                    Plan::Skip("the same memory is on an earlier line".into()),
                    Some(id.clone()),
                ));
                continue;
            }
            let Some(memory) = stored.get(id) else {
                steps.push(step(Plan::Skip(format!("memory {id} not found")), Some(id.clone())));
                continue;
            };
            let exported = manifest.as_ref().and_then(|m| m.memories.get(id));
            let was = exported.map(|e| e.text.clone()).unwrap_or_else(|| line_text(memory));
            let was_importance = exported.map(|e| e.importance).unwrap_or(memory.importance);
            let edited = line.text != was;
            let reweighed = line.importance.filter(|i| *i != was_importance);
            if !edited && reweighed.is_none() {
                continue;
            }
            if memory.status != MemoryStatus::Active {
                steps.push(step(
                    Plan::Skip(format!("memory {id} is {} since the export", memory.status)),
                    Some(id.clone()),
                ));
                continue;
            }
            if edited {
                let content = content_of(&line.text, Some(memory));
                if content.is_empty() {
                    steps.push(step(
                        Plan::Suppress {
                            memory: Box::new(memory.clone()),
                        },
                        Some(id.clone()),
                    ));
                } else {
                    steps.push(step(
                        Plan::Replace {
                            memory: Box::new(memory.clone()),
                            content,
                        },
                        Some(id.clone()),
                    ));
                }
            } else if let Some(importance) = reweighed {
                steps.push(step(
                    Plan::Importance {
                        memory: Box::new(memory.clone()),
                        importance,
                    },
                    Some(id.clone()),
                ));
            }
        }
    }
    for id in &deleted {
        let path = manifest
            .as_ref()
            .and_then(|m| m.memories.get(id))
            .map(|e| e.file.clone())
            .unwrap_or_default();
        let plan = match stored.get(id) {
            Some(memory) if memory.status == MemoryStatus::Active => Plan::Suppress {
                memory: Box::new(memory.clone()),
            },
            Some(memory) => Plan::Skip(format!("memory {id} is {} since the export", memory.status)),
            None => Plan::Skip(format!("memory {id} no longer exists")),
        };
        steps.push(Step {
            path,
            line: 0,
            memory_id: Some(id.clone()),
            plan,
        });
    }

    let mut report = ImportReport {
        lines: parsed.iter().map(|(_, lines)| lines.len() as u32).sum(),
        ..Default::default()
    };
    for step in steps {
        let (action, memory_id, detail) = apply(km, step.plan, step.memory_id, dry_run).await?;
        match action {
            "replace" => report.replaced += 1,
            "importance" => report.replaced += 1,
            "suppress" => report.suppressed += 1,
            "create" => report.created += 1,
            "queue" => report.queued += 1,
            _ => report.skipped += 1,
        }
        report.changes.push(ImportChange {
            action: action.to_string(),
            path: step.path,
            line: step.line,
            memory_id,
            detail,
        });
    }
    Ok(report)
}

/// What a line without an id becomes: a memory of its section's type, through admission.
fn new_line(km: &KnowledgeManager, scope: &Scope, role: &str, kind: &FileKind, line: &Line) -> Plan {
    let (project, visibility) = match kind {
        FileKind::Boss | FileKind::Memory => (None, Visibility::Global),
        FileKind::Project(project) => (Some(project.clone()), Visibility::Project),
        FileKind::Daily => {
            return Plan::Skip(
                "daily logs are what was said: add new memories to BOSS.md, MEMORY.md or a project file".into(),
            );
        }
        FileKind::Other => {
            return Plan::Skip("new lines are read in BOSS.md, MEMORY.md and projects/*.md".into());
        }
    };
    let Some(memory_type) = line.section.filter(|t| *t != MemoryType::ConversationTurn) else {
        return Plan::Skip(
            "a new line needs a type: put it under a heading such as \"## 项目决策\" or \"## Decisions\"".into(),
        );
    };
    let content = content_of(&line.text, None);
    let extracted = Extracted {
        memory_type,
        content: content.clone(),
        summary: None,
        importance: line.importance.unwrap_or(3),
        tags: Vec::new(),
        relevant_role: None,
        project_specific: project.is_some(),
        confidence: 1.0,
    };
    match admit(&km.config, &extracted, &[]).0 {
        Admission::Reject(reason) => Plan::Skip(reason),
        Admission::Queue(_) | Admission::Write => {
            let owner = Scope {
                tenant_id: scope.tenant_id.clone(),
                user_id: scope.user_id.clone(),
                role_id: role.to_string(),
                project_id: project,
                session_id: None,
            };
            let draft = MemoryDraft {
                importance: Some(extracted.importance),
                visibility: Some(visibility),
                source: Some(MemorySource::UserInput),
                confidence: Some(1.0),
                ..MemoryDraft::new(memory_type, content)
            };
            Plan::Create {
                owner,
                draft: Box::new(draft),
                extracted: Box::new(extracted),
            }
        }
    }
}

/// Applies one planned change; returns the action, the memory id and what happened.
async fn apply(
    km: &KnowledgeManager,
    plan: Plan,
    memory_id: Option<String>,
    dry_run: bool,
) -> Result<(&'static str, Option<String>, String), ApiError> {
    let correct = |memory: &Memory, action: CorrectionAction, content: Option<String>, evidence: &str| CorrectRequest {
        scope: Scope {
            tenant_id: memory.scope.tenant_id.clone(),
            user_id: memory.scope.user_id.clone(),
            role_id: String::new(),
            project_id: None,
            session_id: None,
        },
        memory_id: memory.id.clone(),
        action,
        evidence: evidence.to_string(),
        new_content: content,
        new_summary: None,
        request_id: None,
    };
    Ok(match plan {
        Plan::Skip(why) => ("skip", memory_id, why),
        Plan::Replace { memory, content } => {
            if dry_run {
                return Ok(("replace", memory_id, format!("would replace with {content:?}")));
            }
            let request = correct(
                &memory,
                CorrectionAction::Replace,
                Some(content),
                "edited in the Markdown import",
            );
            match crate::upkeep::correct_as(km, request, ACTOR.into()).await {
                Ok(result) => (
                    "replace",
                    memory_id,
                    format!("replaced by {}", result.replacement.map(|m| m.id).unwrap_or_default()),
                ),
                Err(err) if err.code != thinkus_common::ErrorCode::Internal => ("skip", memory_id, err.message),
                Err(err) => return Err(err),
            }
        }
        Plan::Importance { memory, importance } => {
            if dry_run {
                return Ok(("importance", memory_id, format!("would set importance {importance}")));
            }
            let request = correct(
                &memory,
                CorrectionAction::SetImportance(importance),
                None,
                "importance edited in the Markdown import",
            );
            crate::upkeep::correct_as(km, request, ACTOR.into()).await?;
            (
                "importance",
                memory_id,
                format!("importance {} -> {importance}", memory.importance),
            )
        }
        Plan::Suppress { memory } => {
            if dry_run {
                return Ok(("suppress", memory_id, "would suppress".into()));
            }
            let request = correct(
                &memory,
                CorrectionAction::Suppress,
                None,
                "line deleted in the Markdown import",
            );
            crate::upkeep::correct_as(km, request, ACTOR.into()).await?;
            ("suppress", memory_id, "suppressed".into())
        }
        Plan::Create {
            owner,
            draft,
            extracted,
        } => {
            let (admission, score) = admit(&km.config, &extracted, &[]);
            if let Admission::Queue(reason) = admission {
                if dry_run {
                    return Ok(("queue", None, format!("would queue: {reason}")));
                }
                let queued = crate::learn::queue(km, &owner, &extracted, &reason, score, Utc::now()).await?;
                return Ok((
                    "queue",
                    None,
                    format!("queued as {}: {reason}", queued.candidate_id.unwrap_or_default()),
                ));
            }
            if dry_run {
                return Ok(("create", None, "would write".into()));
            }
            let options = WriteOptions {
                actor: ACTOR.into(),
                ..Default::default()
            };
            match km.write(&owner, &draft, options).await {
                Ok(result) => {
                    let id = result.memory.as_ref().map(|m| m.id.clone());
                    let action = match result.outcome {
                        WriteOutcome::Queued => "queue",
                        WriteOutcome::Rejected => "skip",
                        _ => "create",
                    };
                    (
                        action,
                        id.or(result.candidate_id.clone()),
                        format!("{}: {}", result.outcome.as_str(), result.reason),
                    )
                }
                Err(err) if err.code != thinkus_common::ErrorCode::Internal => ("skip", None, err.message),
                Err(err) => return Err(err),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_read_in_both_languages() {
        assert_eq!(type_of_heading("项目决策"), Some(MemoryType::ProjectDecision));
        assert_eq!(type_of_heading("Decisions (3)"), Some(MemoryType::ProjectDecision));
        assert_eq!(type_of_heading("规则与约束（2）"), Some(MemoryType::Constraint));
        assert_eq!(type_of_heading("preference"), Some(MemoryType::UserPreference));
        assert_eq!(type_of_heading("user_preference"), Some(MemoryType::UserPreference));
        assert_eq!(type_of_heading("Something else"), None);
    }

    #[test]
    fn lines_keep_their_id_and_importance() {
        let text = "# T\n\n> - not a memory\n## 风险\n\n- 供应商可能延期 <!-- mem_0123456789abcdef0123456789abcdef · cfo · 重要性 4 · 置信度 0.90 -->\n- 新的一行\n```\n- in a fence\n```\n## Other\n- loose <!-- no id -->\n";
        let lines = parse(text);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0].text, "供应商可能延期");
        assert_eq!(lines[0].id.as_deref(), Some("mem_0123456789abcdef0123456789abcdef"));
        assert_eq!(lines[0].importance, Some(4));
        assert_eq!(lines[0].section, Some(MemoryType::Risk));
        assert_eq!(lines[0].number, 6);
        assert_eq!(lines[1].id, None);
        assert_eq!(lines[1].section, Some(MemoryType::Risk));
        assert_eq!(lines[2].text, "loose");
        assert_eq!(lines[2].section, None);
    }

    #[test]
    fn files_and_names() {
        assert_eq!(kind_of("BOSS.md"), FileKind::Boss);
        assert_eq!(kind_of("memory/2026-11-24.md"), FileKind::Daily);
        assert_eq!(kind_of("projects/shop.md"), FileKind::Project("shop".into()));
        assert_eq!(kind_of("projects/a%2Fb.md"), FileKind::Project("a/b".into()));
        assert_eq!(kind_of("notes/x.md"), FileKind::Other);
        assert_eq!(encode_name("课程平台"), "课程平台");
        assert_eq!(encode_name("a b/c"), "a%20b%2Fc");
        for name in ["shop", "a/b", "课程平台", ".hidden", "v1.2", "100%"] {
            assert_eq!(decode_name(&encode_name(name)).as_deref(), Some(name));
            assert!(!encode_name(name).contains('/'));
        }
        assert!(check_path("../x.md", 0).is_err());
        assert!(check_path("/etc/passwd", 0).is_err());
        assert!(check_path("projects/shop.md", 0).is_ok());
    }

    #[test]
    fn multi_line_contents_and_turns_round_trip() {
        let mut memory = Memory::new(
            Scope::new("u", "cto"),
            MemoryType::ProjectDecision,
            "第一行\n第二行".into(),
            MemorySource::UserInput,
            Utc::now(),
        );
        assert_eq!(line_text(&memory), "第一行<br>第二行");
        assert_eq!(content_of(&line_text(&memory), Some(&memory)), memory.content);
        memory.memory_type = MemoryType::ConversationTurn;
        memory.speaker = Some("user".into());
        memory.content = "we go with Stripe".into();
        assert_eq!(line_text(&memory), "user: we go with Stripe");
        assert_eq!(content_of("user: we go with Adyen", Some(&memory)), "we go with Adyen");
    }
}
