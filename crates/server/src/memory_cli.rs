//! `thinkus memory …`: what a person types to see and fix what the employees remember. Human
//! tables by default, `--json` for scripts; export and import of Markdown memory folders.

use std::path::{Component, Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use thinkus_backends::sql::{CandidateStatus, Change};
use thinkus_common::model::{Language, Memory, MemoryStatus, MemoryType, Scope};
use thinkus_gateway::{GatewayApi, GatewayGrpcClient};
use thinkus_knowledge_manager::KnowledgeGrpcClient;
use thinkus_knowledge_manager::api::{
    CandidateView, Conflict, ConflictChoice, CorrectRequest, CorrectionAction, ImportReport, KnowledgeApi, ListRequest,
    MarkdownFile,
};
use thinkus_knowledge_manager::markdown::MANIFEST;

use crate::connection::Connection;
use crate::progress::{Progress, during};

/// Whose memories: a user, narrowed to a role and a project when given.
#[derive(Debug, Clone, Args)]
pub struct Whose {
    /// The tenant; the key's own when omitted (only a service key may name another).
    #[arg(long, default_value = "")]
    pub tenant: String,
    /// The user.
    #[arg(long, short = 'u')]
    pub user: String,
    /// Only what this role (AI employee) sees.
    #[arg(long, short = 'r')]
    pub role: Option<String>,
    /// Only this project (and the cross-project memories).
    #[arg(long, short = 'p')]
    pub project: Option<String>,
}

impl Whose {
    fn scope(&self) -> Scope {
        Scope {
            tenant_id: self.tenant.clone(),
            user_id: self.user.clone(),
            role_id: self.role.clone().unwrap_or_default(),
            project_id: self.project.clone(),
            session_id: None,
        }
    }

    /// The user alone: corrections are made by the person, for any of the user's roles.
    fn person(&self) -> Scope {
        Scope {
            tenant_id: self.tenant.clone(),
            user_id: self.user.clone(),
            ..Scope::default()
        }
    }
}

/// `thinkus memory …`.
#[derive(Debug, Args)]
pub struct MemoryArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: MemoryCommand,
}

/// What to do with memories.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Lists memories (active ones unless --status says otherwise), newest first.
    List {
        #[command(flatten)]
        whose: Whose,
        /// Only these types (repeatable).
        #[arg(long = "type", short = 't')]
        types: Vec<MemoryType>,
        /// Only these statuses (repeatable): active, suppressed, frozen, replaced, forgotten.
        #[arg(long = "status")]
        statuses: Vec<MemoryStatus>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Shows memories in full, with their history.
    Show {
        #[command(flatten)]
        whose: Whose,
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Shows the history of a memory, oldest first.
    History {
        #[command(flatten)]
        whose: Whose,
        id: String,
    },
    /// Replaces a memory with corrected content (the old one is kept as history).
    Correct {
        #[command(flatten)]
        whose: Whose,
        id: String,
        /// The corrected content (`--content`: `-c` is the global `--config`).
        #[arg(long)]
        content: String,
        /// Why, recorded in the history.
        #[arg(long, default_value = "")]
        evidence: String,
    },
    /// Suppresses a memory: kept, not recalled.
    Suppress {
        #[command(flatten)]
        whose: Whose,
        id: String,
        #[arg(long, default_value = "")]
        evidence: String,
    },
    /// Freezes a memory: set aside until restored.
    Freeze {
        #[command(flatten)]
        whose: Whose,
        id: String,
        #[arg(long, default_value = "")]
        evidence: String,
    },
    /// Restores a suppressed or frozen memory.
    Restore {
        #[command(flatten)]
        whose: Whose,
        id: String,
        #[arg(long, default_value = "")]
        evidence: String,
    },
    /// Sets a memory's importance (1-5).
    Importance {
        #[command(flatten)]
        whose: Whose,
        id: String,
        #[arg(value_parser = clap::value_parser!(u8).range(1..=5))]
        importance: u8,
    },
    /// Deletes a memory for good (its history stays).
    Delete {
        #[command(flatten)]
        whose: Whose,
        id: String,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// The candidate queue: list, approve, reject.
    Candidates {
        #[command(subcommand)]
        task: CandidateTask,
    },
    /// Pending conflicts: a new value waiting beside the one it contradicts.
    Conflicts {
        #[command(flatten)]
        whose: Whose,
    },
    /// Resolves a pending conflict.
    Resolve {
        #[command(flatten)]
        whose: Whose,
        id: String,
        /// Which value to keep.
        #[arg(long)]
        keep: Keep,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Writes the user's memory as Markdown files into DIR (BOSS.md, MEMORY.md, projects/,
    /// memory/ daily logs and the manifest an import reads).
    Export {
        #[command(flatten)]
        whose: Whose,
        /// zh or en; the user's language when omitted.
        #[arg(long)]
        lang: Option<Language>,
        dir: PathBuf,
    },
    /// Writes everything the user owns as one JSON document: memories (every status) with
    /// their history, candidates and pending conflicts, sessions with their messages,
    /// summaries, artifacts' metadata, jobs (ExportUser).
    ExportUser {
        /// The tenant; the key's own when omitted (only a service key may name another).
        #[arg(long, default_value = "")]
        tenant: String,
        /// The user.
        #[arg(long, short = 'u')]
        user: String,
        /// The file to write; standard output when omitted.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Erases everything the user owns: memories, their history and vector points, artifacts
    /// and their blobs, candidates, sessions, messages, summaries, jobs, idempotency records
    /// (EraseUser, through the gateway at --addr). A record without content says who erased
    /// how much, and when. Cannot be undone.
    EraseUser {
        /// The tenant; the key's own when omitted (only a service key may name another).
        #[arg(long, default_value = "")]
        tenant: String,
        /// The user.
        #[arg(long, short = 'u')]
        user: String,
        /// Confirms the erasure (required: it cannot be undone).
        #[arg(long)]
        yes: bool,
    },
    /// Reads an edited export folder back: edited lines are corrections, deleted lines
    /// suppressions, new lines new memories (admission applies).
    Import {
        /// The user; the one the folder was exported for when omitted.
        #[arg(long, short = 'u')]
        user: Option<String>,
        /// The role new lines are written for (assistant when omitted).
        #[arg(long, short = 'r')]
        role: Option<String>,
        /// Report what would change without changing anything.
        #[arg(long)]
        dry_run: bool,
        dir: PathBuf,
    },
}

/// What to do with candidates.
#[derive(Debug, Subcommand)]
pub enum CandidateTask {
    /// Lists candidates (pending unless --status says otherwise).
    List {
        #[command(flatten)]
        whose: Whose,
        #[arg(long, default_value = "pending")]
        status: CandidateStatusArg,
    },
    /// Approves a candidate: it is written as a memory.
    Approve {
        #[command(flatten)]
        whose: Whose,
        id: String,
        /// Write this instead of the candidate's content.
        #[arg(long)]
        content: Option<String>,
    },
    /// Rejects a candidate.
    Reject {
        #[command(flatten)]
        whose: Whose,
        id: String,
        #[arg(long, default_value = "")]
        reason: String,
    },
}

/// A candidate status on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CandidateStatusArg {
    Pending,
    Approved,
    Rejected,
}

/// The side of a conflict to keep.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Keep {
    /// The value remembered before.
    Current,
    /// The new value.
    Proposed,
}

/// Prints a line; a closed pipe (`thinkus memory list | head`) is not an error.
fn out(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    out(&serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Display columns of a text: ideographs and full-width forms take two.
fn width(text: &str) -> usize {
    text.chars()
        .map(|c| {
            if thinkus_common::text::is_han(c)
                || ('\u{3000}'..='\u{303F}').contains(&c)
                || ('\u{FF00}'..='\u{FFEF}').contains(&c)
            {
                2
            } else {
                1
            }
        })
        .sum()
}

/// `text` on one line, cut to `max` columns with an ellipsis.
fn cell(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if width(&flat) <= max {
        return flat;
    }
    let mut cut = String::new();
    for c in flat.chars() {
        if width(&cut) + width(&c.to_string()) > max.saturating_sub(1) {
            break;
        }
        cut.push(c);
    }
    cut.push('…');
    cut
}

/// A table with a header, columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| width(h)).collect();
    for row in rows {
        for (i, value) in row.iter().enumerate() {
            widths[i] = widths[i].max(width(value));
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i + 1 == cells.len() {
                    c.to_string()
                } else {
                    format!("{c}{}", " ".repeat(widths[i] - width(c)))
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut lines = vec![line(header.to_vec())];
    for row in rows {
        lines.push(line(row.iter().map(String::as_str).collect()));
    }
    lines.join("\n")
}

fn memory_rows(memories: &[Memory]) -> String {
    let rows: Vec<Vec<String>> = memories
        .iter()
        .map(|m| {
            vec![
                m.id.clone(),
                m.memory_type.as_str().to_string(),
                m.scope.role_id.clone(),
                m.scope.project_id.clone().unwrap_or_else(|| "-".into()),
                m.importance.to_string(),
                format!("{:.2}", m.confidence),
                m.evidence_count.to_string(),
                m.status.as_str().to_string(),
                m.occurred_at.format("%Y-%m-%d").to_string(),
                cell(&m.content, 60),
            ]
        })
        .collect();
    table(
        &[
            "id", "type", "role", "project", "imp", "conf", "evid", "status", "date", "content",
        ],
        &rows,
    )
}

fn change_json(change: &Change) -> serde_json::Value {
    json!({
        "id": change.id, "memoryId": change.memory_id, "kind": change.kind.as_str(), "actor": change.actor,
        "reason": change.reason, "at": change.at,
    })
}

fn change_rows(changes: &[Change]) -> String {
    let rows: Vec<Vec<String>> = changes
        .iter()
        .map(|c| {
            vec![
                c.at.format("%Y-%m-%d %H:%M:%S").to_string(),
                c.kind.as_str().to_string(),
                c.actor.clone(),
                cell(&c.reason, 90),
            ]
        })
        .collect();
    table(&["at", "kind", "actor", "reason"], &rows)
}

fn candidate_json(c: &CandidateView) -> serde_json::Value {
    json!({
        "id": c.id, "userId": c.scope.user_id, "roleId": c.scope.role_id, "projectId": c.scope.project_id,
        "type": c.draft.memory_type.as_str(), "content": c.draft.content, "reason": c.reason, "score": c.score,
        "evidenceCount": c.evidence_count, "status": c.status.as_str(), "createdAt": c.created_at,
        "memoryId": c.memory_id, "conflictsWith": c.conflicts_with,
    })
}

fn conflict_json(c: &Conflict) -> serde_json::Value {
    json!({
        "id": c.id, "roleId": c.scope.role_id, "projectId": c.scope.project_id, "subject": c.subject,
        "question": c.question, "current": c.current.iter().map(|m| json!({"id": m.id, "content": m.content})).collect::<Vec<_>>(),
        "proposed": c.proposed.content, "reason": c.reason, "evidenceCount": c.evidence_count, "createdAt": c.created_at,
    })
}

fn report_json(report: &ImportReport) -> serde_json::Value {
    serde_json::to_value(report).unwrap_or_default()
}

fn connect(connection: &Connection) -> anyhow::Result<KnowledgeGrpcClient> {
    Ok(KnowledgeGrpcClient::new(connection.channel()?, 64 * 1024 * 1024))
}

/// The gateway at the connection's address (the all-in-one process serves it too).
fn connect_gateway(connection: &Connection) -> anyhow::Result<GatewayGrpcClient> {
    Ok(GatewayGrpcClient::new(connection.channel()?, 64 * 1024 * 1024))
}

/// "12 memories, 30 history records, …" of an export document.
fn export_counts(document: &serde_json::Value) -> String {
    let count = |key: &str| document["counts"][key].as_u64().unwrap_or(0);
    format!(
        "{} memories, {} history records, {} candidates, {} sessions ({} messages), {} summaries, {} artifacts, {} jobs",
        count("memories"),
        count("changes"),
        count("candidates"),
        count("sessions"),
        count("session_messages"),
        count("summaries"),
        count("artifacts"),
        count("jobs")
    )
}

pub async fn run(args: MemoryArgs) -> anyhow::Result<()> {
    let km = connect(&args.connection)?;
    let json = args.json;
    let correction =
        |whose: &Whose, id: &str, action: CorrectionAction, evidence: &str, content: Option<String>| CorrectRequest {
            scope: whose.person(),
            memory_id: id.to_string(),
            action,
            evidence: evidence.to_string(),
            new_content: content,
            new_summary: None,
            request_id: None,
        };
    match args.command {
        MemoryCommand::List {
            whose,
            types,
            statuses,
            limit,
        } => {
            let memories = km
                .list_memories(ListRequest {
                    scope: whose.scope(),
                    types,
                    statuses,
                    limit,
                    offset: 0,
                })
                .await?;
            if json {
                return print_json(&serde_json::to_value(&memories)?);
            }
            out(&memory_rows(&memories));
            out(&format!("{} memories", memories.len()));
        }
        MemoryCommand::Show { whose, ids } => {
            let mut shown = Vec::new();
            for id in ids {
                let memory = km.get_memory(whose.scope(), id.clone()).await?;
                let history = km.history(whose.scope(), id).await?;
                shown.push((memory, history));
            }
            if json {
                return print_json(&json!(
                    shown
                        .iter()
                        .map(|(m, h)| json!({"memory": m, "history": h.iter().map(change_json).collect::<Vec<_>>()}))
                        .collect::<Vec<_>>()
                ));
            }
            for (memory, history) in shown {
                out(&format!("{} · {} · {}", memory.id, memory.memory_type, memory.status));
                out(&format!(
                    "  role {} · project {} · visibility {} · source {}",
                    memory.scope.role_id,
                    memory.scope.project_id.as_deref().unwrap_or("-"),
                    memory.visibility,
                    memory.source
                ));
                out(&format!(
                    "  importance {} · confidence {:.2} · freshness {:.2} · evidence {} · read {} times",
                    memory.importance, memory.confidence, memory.freshness, memory.evidence_count, memory.access_count
                ));
                out(&format!(
                    "  said {} · stored {} · changed {}{}",
                    memory.occurred_at.format("%Y-%m-%d %H:%M"),
                    memory.created_at.format("%Y-%m-%d %H:%M"),
                    memory.updated_at.format("%Y-%m-%d %H:%M"),
                    memory
                        .superseded_by
                        .as_ref()
                        .map(|s| format!(" · replaced by {s}"))
                        .unwrap_or_default()
                ));
                out(&format!("\n  {}\n", memory.content.replace('\n', "\n  ")));
                out(&change_rows(&history));
                out("");
            }
        }
        MemoryCommand::History { whose, id } => {
            let history = km.history(whose.scope(), id).await?;
            if json {
                return print_json(&json!(history.iter().map(change_json).collect::<Vec<_>>()));
            }
            out(&change_rows(&history));
        }
        MemoryCommand::Correct {
            whose,
            id,
            content,
            evidence,
        } => {
            let result = km
                .correct(correction(
                    &whose,
                    &id,
                    CorrectionAction::Replace,
                    &evidence,
                    Some(content),
                ))
                .await?;
            if json {
                return print_json(&serde_json::to_value(&result)?);
            }
            let replacement = result.replacement.map(|m| m.id).unwrap_or_default();
            out(&format!("{id} replaced by {replacement}"));
        }
        MemoryCommand::Suppress { whose, id, evidence } => {
            corrected(
                &km,
                correction(&whose, &id, CorrectionAction::Suppress, &evidence, None),
                json,
            )
            .await?;
        }
        MemoryCommand::Freeze { whose, id, evidence } => {
            corrected(
                &km,
                correction(&whose, &id, CorrectionAction::Freeze, &evidence, None),
                json,
            )
            .await?;
        }
        MemoryCommand::Restore { whose, id, evidence } => {
            corrected(
                &km,
                correction(&whose, &id, CorrectionAction::Restore, &evidence, None),
                json,
            )
            .await?;
        }
        MemoryCommand::Importance { whose, id, importance } => {
            let action = CorrectionAction::SetImportance(importance);
            corrected(&km, correction(&whose, &id, action, "", None), json).await?;
        }
        MemoryCommand::Delete { whose, id, reason } => {
            km.delete(whose.person(), id.clone(), reason).await?;
            if json {
                return print_json(&json!({"deleted": id}));
            }
            out(&format!("{id} deleted"));
        }
        MemoryCommand::Candidates { task } => candidates(&km, task, json).await?,
        MemoryCommand::Conflicts { whose } => {
            let conflicts = km.list_conflicts(whose.scope(), 200).await?;
            if json {
                return print_json(&json!(conflicts.iter().map(conflict_json).collect::<Vec<_>>()));
            }
            let rows: Vec<Vec<String>> = conflicts
                .iter()
                .map(|c| {
                    vec![
                        c.id.clone(),
                        c.scope.role_id.clone(),
                        c.scope.project_id.clone().unwrap_or_else(|| "-".into()),
                        c.evidence_count.to_string(),
                        cell(&c.question, 70),
                    ]
                })
                .collect();
            out(&table(&["id", "role", "project", "seen", "question"], &rows));
        }
        MemoryCommand::Resolve {
            whose,
            id,
            keep,
            reason,
        } => {
            let keep = match keep {
                Keep::Current => ConflictChoice::Current,
                Keep::Proposed => ConflictChoice::Proposed,
            };
            let resolution = km.resolve_conflict(whose.person(), id.clone(), keep, reason).await?;
            if json {
                return print_json(&json!({"kept": resolution.kept, "replacedIds": resolution.replaced_ids}));
            }
            out(&format!(
                "{id}: kept {} ({})",
                resolution.kept.id,
                cell(&resolution.kept.content, 60)
            ));
        }
        MemoryCommand::Export { whose, lang, dir } => {
            let scope = Scope {
                role_id: String::new(),
                ..whose.scope()
            };
            let files = during("exporting", km.export_markdown(scope, lang)).await?;
            let written = write_folder(&dir, &files)?;
            if json {
                return print_json(&json!({"dir": dir, "files": written}));
            }
            out(&format!("{} files written to {}", written.len(), dir.display()));
        }
        MemoryCommand::ExportUser { tenant, user, output } => {
            let owner = thinkus_common::model::Owner::new(tenant, user);
            let document = during("exporting", km.export_user(owner)).await?;
            let text = serde_json::to_string_pretty(&document)?;
            match output {
                Some(path) => {
                    std::fs::write(&path, format!("{text}\n"))
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    if json {
                        return print_json(&json!({"file": path, "counts": document["counts"]}));
                    }
                    out(&format!("{}: {}", path.display(), export_counts(&document)));
                }
                None => out(&text),
            }
        }
        MemoryCommand::EraseUser { tenant, user, yes } => {
            anyhow::ensure!(
                yes,
                "erasing user {user:?} removes everything it owns and cannot be undone: add --yes"
            );
            let gateway = connect_gateway(&args.connection)?;
            // The gateway names who erased from this connection's key, not from the actor.
            let owner = thinkus_common::model::Owner::new(tenant, user.clone());
            let erasure = during("erasing", gateway.erase_user(owner, String::new()))
                .await
                .map_err(|err| anyhow::anyhow!("{}: {}", err.code.grpc_code(), err.message))?;
            let counts = erasure.counts;
            let erasure_id = erasure.id.unwrap_or_default();
            if json {
                return print_json(&json!({"erasureId": erasure_id, "counts": counts}));
            }
            if erasure_id.is_empty() {
                out(&format!("{user}: nothing left to erase"));
            } else {
                out(&format!(
                    "{user}: erased {} memories, {} history records, {} vector points, {} artifacts, {} candidates, \
                     {} sessions ({} messages), {} summaries, {} jobs, {} request ids, {} plans (record {})",
                    counts.memories,
                    counts.changes,
                    counts.vectors,
                    counts.artifacts,
                    counts.candidates,
                    counts.sessions,
                    counts.session_messages,
                    counts.summaries,
                    counts.jobs,
                    counts.idempotency,
                    counts.plans,
                    erasure_id
                ));
            }
        }
        MemoryCommand::Import {
            user,
            role,
            dry_run,
            dir,
        } => {
            let files = read_folder(&dir)?;
            let user = match user {
                Some(user) => user,
                None => exported_user(&files)
                    .with_context(|| format!("--user: {} holds no {MANIFEST} naming the user", dir.display()))?,
            };
            let scope = Scope {
                // The key's own tenant.
                tenant_id: String::new(),
                user_id: user,
                role_id: role.unwrap_or_default(),
                ..Scope::default()
            };
            let report = during("importing", km.import_markdown(scope, files, dry_run)).await?;
            if json {
                return print_json(&report_json(&report));
            }
            let rows: Vec<Vec<String>> = report
                .changes
                .iter()
                .map(|c| {
                    vec![
                        c.action.clone(),
                        if c.line == 0 {
                            c.path.clone()
                        } else {
                            format!("{}:{}", c.path, c.line)
                        },
                        c.memory_id.clone().unwrap_or_else(|| "-".into()),
                        cell(&c.detail, 70),
                    ]
                })
                .collect();
            if !rows.is_empty() {
                out(&table(&["action", "where", "memory", "detail"], &rows));
            }
            out(&format!(
                "{}{} lines: {} replaced, {} suppressed, {} created, {} queued, {} skipped",
                if dry_run { "dry run: " } else { "" },
                report.lines,
                report.replaced,
                report.suppressed,
                report.created,
                report.queued,
                report.skipped
            ));
        }
    }
    Ok(())
}

async fn corrected(km: &KnowledgeGrpcClient, request: CorrectRequest, json: bool) -> anyhow::Result<()> {
    let action = request.action;
    let result = km.correct(request).await?;
    if json {
        return print_json(&serde_json::to_value(&result)?);
    }
    out(&format!(
        "{}: {} · {} · importance {} · confidence {:.2}",
        result.memory.id,
        action.as_str(),
        result.memory.status,
        result.memory.importance,
        result.memory.confidence
    ));
    Ok(())
}

async fn candidates(km: &KnowledgeGrpcClient, task: CandidateTask, json: bool) -> anyhow::Result<()> {
    match task {
        CandidateTask::List { whose, status } => {
            let status = match status {
                CandidateStatusArg::Pending => CandidateStatus::Pending,
                CandidateStatusArg::Approved => CandidateStatus::Approved,
                CandidateStatusArg::Rejected => CandidateStatus::Rejected,
            };
            let listed = km.list_candidates(whose.scope(), status, 200, 0).await?;
            if json {
                return print_json(&json!(listed.iter().map(candidate_json).collect::<Vec<_>>()));
            }
            let rows: Vec<Vec<String>> = listed
                .iter()
                .map(|c| {
                    vec![
                        c.id.clone(),
                        c.draft.memory_type.as_str().to_string(),
                        c.scope.role_id.clone(),
                        c.evidence_count.to_string(),
                        format!("{:.2}", c.score),
                        cell(&c.reason, 40),
                        cell(&c.draft.content, 50),
                    ]
                })
                .collect();
            out(&table(
                &["id", "type", "role", "seen", "score", "why queued", "content"],
                &rows,
            ));
        }
        CandidateTask::Approve { whose, id, content } => {
            let result = km.approve_candidate(whose.person(), id.clone(), content).await?;
            if json {
                return print_json(&serde_json::to_value(&result)?);
            }
            let memory = result.memory.as_ref().map(|m| m.id.as_str()).unwrap_or("-");
            out(&format!(
                "{id}: {} {memory} ({})",
                result.outcome.as_str(),
                result.reason
            ));
        }
        CandidateTask::Reject { whose, id, reason } => {
            km.reject_candidate(whose.person(), id.clone(), reason).await?;
            if json {
                return print_json(&json!({"rejected": id}));
            }
            out(&format!("{id} rejected"));
        }
    }
    Ok(())
}

/// The user an export folder was made for, from its manifest.
fn exported_user(files: &[MarkdownFile]) -> Option<String> {
    let manifest = files.iter().find(|f| f.path == MANIFEST)?;
    let value: serde_json::Value = serde_json::from_str(&manifest.content).ok()?;
    value["user_id"].as_str().map(str::to_string)
}

/// A file's path inside the folder, checked to stay inside it.
fn inside(dir: &Path, relative: &str) -> anyhow::Result<PathBuf> {
    let path = Path::new(relative);
    anyhow::ensure!(
        !relative.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_))),
        "the server sent a file outside the export folder: {relative:?}"
    );
    Ok(dir.join(path))
}

/// Writes an export into `dir`; returns the paths written.
pub fn write_folder(dir: &Path, files: &[MarkdownFile]) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let progress = Progress::new("writing", Some(files.len() as u64));
    let mut written = Vec::new();
    for file in files {
        let path = inside(dir, &file.path)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, &file.content).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(file.path.clone());
        progress.inc(1);
    }
    progress.finish();
    Ok(written)
}

/// Reads an export folder: its Markdown files (hidden folders left out) and the manifest.
pub fn read_folder(dir: &Path) -> anyhow::Result<Vec<MarkdownFile>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.path());
        for entry in entries {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            if entry.file_type()?.is_dir() {
                if !name.starts_with('.') {
                    walk(root, &path, out)?;
                }
            } else if name.ends_with(".md") || (dir == root && name == MANIFEST) {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut paths = Vec::new();
    walk(dir, dir, &mut paths)?;
    let progress = Progress::new("reading", Some(paths.len() as u64));
    let mut files = Vec::new();
    for path in paths {
        let relative = path
            .strip_prefix(dir)?
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect::<Vec<_>>()
            .join("/");
        let content =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read {} as UTF-8", path.display()))?;
        files.push(MarkdownFile {
            path: relative,
            content,
        });
        progress.inc(1);
    }
    progress.finish();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_line_up_chinese_and_english() {
        let text = table(
            &["id", "content"],
            &[
                vec!["mem_1".into(), "预算是$500".into()],
                vec!["mem_22".into(), "budget".into()],
            ],
        );
        assert_eq!(text, "id      content\nmem_1   预算是$500\nmem_22  budget");
        assert_eq!(width("预算是$500"), 10);
        assert_eq!(cell("我喜欢简约的设计风格，不要太花哨", 10), "我喜欢简…");
        assert_eq!(cell("a\nb  c", 10), "a b c");
    }

    #[test]
    fn folders_round_trip_and_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![
            MarkdownFile {
                path: "BOSS.md".into(),
                content: "# x\n".into(),
            },
            MarkdownFile {
                path: "projects/课程平台.md".into(),
                content: "- 预算\n".into(),
            },
            MarkdownFile {
                path: MANIFEST.into(),
                content: "{\"user_id\": \"alice\"}".into(),
            },
        ];
        write_folder(dir.path(), &files).unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/x.md"), "no").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "no").unwrap();
        let mut read = read_folder(dir.path()).unwrap();
        read.sort_by(|a, b| a.path.cmp(&b.path));
        let mut expected = files.clone();
        expected.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(read, expected);
        assert_eq!(exported_user(&read).as_deref(), Some("alice"));
        let outside = vec![MarkdownFile {
            path: "../evil.md".into(),
            content: String::new(),
        }];
        assert!(write_folder(dir.path(), &outside).is_err());
    }
}
