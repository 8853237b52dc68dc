//! The client commands: what a person types to remember, recall and inspect memories, and the
//! administrative tasks.

use std::io::Read;
use thinkus_backends::sql::JobStatus;

use clap::{Args, Subcommand};
use thinkus_common::model::{MemoryStatus, MemoryType, Owner, RetrievalMode, Scope, Visibility};
use thinkus_knowledge_manager::KnowledgeGrpcClient;
use thinkus_knowledge_manager::api::{KnowledgeApi, MemoryDraft, Owners, RememberRequest};
use thinkus_retriever::RetrieverGrpcClient;
use thinkus_retriever::api::{DetailsRequest, RecallRequest, RetrieverApi};

use crate::config::Config;
use crate::connection::Connection;

/// Who the memory belongs to.
#[derive(Debug, Clone, Args)]
pub struct ScopeArgs {
    /// The tenant; the key's own when omitted (only a service key may name another).
    #[arg(long, default_value = "")]
    pub tenant: String,
    /// The user.
    #[arg(long, short = 'u')]
    pub user: String,
    /// The role (AI executive).
    #[arg(long, short = 'r', default_value = "assistant")]
    pub role: String,
    /// The project; omit for cross-project memories.
    #[arg(long, short = 'p')]
    pub project: Option<String>,
    /// The session.
    #[arg(long)]
    pub session: Option<String>,
}

impl ScopeArgs {
    fn scope(&self) -> Scope {
        Scope {
            tenant_id: self.tenant.clone(),
            user_id: self.user.clone(),
            role_id: self.role.clone(),
            project_id: self.project.clone(),
            session_id: self.session.clone(),
        }
    }
}

/// `thinkus remember`.
#[derive(Debug, Clone, Args)]
pub struct RememberArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// The memory type.
    #[arg(long, short = 't', default_value = "discussion_conclusion")]
    pub r#type: MemoryType,
    /// Importance 1-5.
    #[arg(long, short = 'i')]
    pub importance: Option<u8>,
    /// private, project or global.
    #[arg(long)]
    pub visibility: Option<Visibility>,
    /// Tags (repeatable).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// A summary (derived from the content when omitted).
    #[arg(long)]
    pub summary: Option<String>,
    /// Write without admission (noise filters, score threshold); needs a key that may act for
    /// every user, and the memory's history records it.
    #[arg(long)]
    pub bypass_admission: bool,
    /// The content.
    pub content: String,
}

/// `thinkus recall`.
#[derive(Debug, Clone, Args)]
pub struct RecallArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// catalog or details.
    #[arg(long, short = 'm', default_value = "catalog")]
    pub mode: String,
    /// The token budget.
    #[arg(long, short = 'b')]
    pub budget: Option<u32>,
    /// Only these types (repeatable).
    #[arg(long = "type", short = 't')]
    pub types: Vec<MemoryType>,
    /// Print the structured result as JSON.
    #[arg(long)]
    pub json: bool,
    /// The query.
    pub query: String,
}

/// `thinkus show`.
#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Memory ids.
    #[arg(required = true)]
    pub ids: Vec<String>,
}

/// `thinkus admin …`.
#[derive(Debug, Clone, Subcommand)]
pub enum AdminTask {
    /// Rebuilds the vector index from the relational store, as a job of the knowledge manager
    /// that goes on if this command stops; follows it until it is done.
    RebuildIndex {
        #[command(flatten)]
        connection: Connection,
        /// The tenant: the key's own when omitted, every tenant for a service key.
        #[arg(long)]
        tenant: Option<String>,
        /// One user; all users (of the tenant) when omitted (needs an admin key).
        #[arg(long)]
        user: Option<String>,
        /// Prints the job id and returns at once instead of following the job.
        #[arg(long)]
        detach: bool,
        /// Follows this job (started earlier) instead of starting one.
        #[arg(long, conflicts_with_all = ["tenant", "user", "detach"])]
        job: Option<String>,
    },
    /// Runs the decay and forgetting sweeps now.
    Maintenance {
        #[command(flatten)]
        connection: Connection,
        /// The tenant: the key's own when omitted, every tenant for a service key.
        #[arg(long)]
        tenant: Option<String>,
        #[arg(long)]
        user: Option<String>,
    },
    /// Records a user's plan (unlimited, seed, growth, scale, enterprise).
    SetPlan {
        #[command(flatten)]
        connection: Connection,
        /// The tenant; the key's own when omitted.
        #[arg(long, default_value = "")]
        tenant: String,
        #[arg(long)]
        user: String,
        plan: String,
    },
}

const MAX_MESSAGE: usize = 16 * 1024 * 1024;

#[allow(clippy::print_stdout)]
fn out(text: &str) {
    println!("{text}");
}

pub async fn remember(args: RememberArgs) -> anyhow::Result<()> {
    let client = KnowledgeGrpcClient::new(args.connection.channel()?, MAX_MESSAGE);
    let draft = MemoryDraft {
        importance: args.importance,
        visibility: args.visibility,
        tags: args.tags.clone(),
        summary: args.summary.clone(),
        ..MemoryDraft::new(args.r#type, args.content.clone())
    };
    let result = client
        .remember(RememberRequest {
            scope: args.scope.scope(),
            draft,
            request_id: None,
            skip_dedup: false,
            // The server names the key in the history; the client only asks.
            admission_bypassed_by: args.bypass_admission.then(|| "the CLI".to_string()),
        })
        .await?;
    let id = result.memory.as_ref().map(|m| m.id.as_str()).unwrap_or("-");
    out(&format!("{} {id} ({})", result.outcome.as_str(), result.reason));
    Ok(())
}

pub async fn recall(args: RecallArgs) -> anyhow::Result<()> {
    let client = RetrieverGrpcClient::new(args.connection.channel()?, MAX_MESSAGE);
    let mode = match args.mode.as_str() {
        "catalog" => RetrievalMode::Catalog,
        "details" => RetrievalMode::Details,
        other => anyhow::bail!("--mode: use catalog or details, not {other:?}"),
    };
    let result = client
        .recall(RecallRequest {
            scope: args.scope.scope(),
            query: args.query.clone(),
            mode,
            types: args.types.clone(),
            budget_tokens: args.budget,
            ..Default::default()
        })
        .await?;
    if args.json {
        let entries: Vec<serde_json::Value> = result
            .catalog
            .iter()
            .map(|e| {
                serde_json::json!({
                    "id": e.id, "summary": e.summary, "type": e.memory_type.as_str(), "importance": e.importance,
                    "relative_time": e.relative_time, "tags": e.tags, "score": e.score.score,
                })
            })
            .collect();
        out(&serde_json::to_string_pretty(&serde_json::json!({
            "catalog": entries,
            "tokens_used": result.tokens_used,
            "budget_tokens": result.budget_tokens,
        }))?);
        return Ok(());
    }
    if result.catalog.is_empty() && result.details.is_empty() {
        out("(nothing recalled)");
        return Ok(());
    }
    out(&result.rendered);
    out(&format!(
        "\n{} tokens of {} ({})",
        result.tokens_used, result.budget_tokens, result.tokenizer
    ));
    for (i, entry) in result.catalog.iter().enumerate() {
        out(&format!("  [{}] {}  score {:.3}", i + 1, entry.id, entry.score.score));
    }
    Ok(())
}

pub async fn show(args: ShowArgs) -> anyhow::Result<()> {
    let channel = args.connection.channel()?;
    let retriever = RetrieverGrpcClient::new(channel.clone(), MAX_MESSAGE);
    let knowledge = KnowledgeGrpcClient::new(channel, MAX_MESSAGE);
    let details = retriever
        .get_details(DetailsRequest {
            scope: args.scope.scope(),
            ids: args.ids.clone(),
            skip_access_update: true,
            ..Default::default()
        })
        .await?;
    out(&details.rendered);
    for detail in &details.details {
        let memory = knowledge.get_memory(args.scope.scope(), detail.id.clone()).await?;
        out(&format!(
            "\n{}: {} · importance {} · confidence {:.2} · freshness {:.2} · evidence {} · {}{}",
            memory.id,
            memory.memory_type,
            memory.importance,
            memory.confidence,
            memory.freshness,
            memory.evidence_count,
            memory.status,
            memory
                .superseded_by
                .as_ref()
                .map(|s| format!(" → {s}"))
                .unwrap_or_default()
        ));
        if memory.status == MemoryStatus::Active || !memory.tags.is_empty() {
            out(&format!("  tags: {}", memory.tags.join(", ")));
        }
        for change in knowledge.history(args.scope.scope(), memory.id.clone()).await? {
            out(&format!(
                "  {} {} by {}: {}",
                change.at.format("%Y-%m-%d %H:%M"),
                change.kind,
                change.actor,
                change.reason
            ));
        }
    }
    Ok(())
}

/// The users an administrative task covers: one user (of the key's tenant when none is
/// named), a tenant's users, or, with neither, the key's tenant (every tenant for a service
/// key).
fn owners(tenant: Option<String>, user: Option<String>) -> Owners {
    match (tenant, user) {
        (tenant, Some(user)) => Owners::One(Owner::new(tenant.unwrap_or_default(), user)),
        (Some(tenant), None) => Owners::Tenant(tenant),
        (None, None) => Owners::All,
    }
}

/// Polls an index rebuild job until it succeeded or failed for good, drawing its progress (users
/// done of all) on a terminal.
async fn follow_index_job(
    client: &KnowledgeGrpcClient,
    mut job: thinkus_knowledge_manager::rebuild::IndexJob,
) -> anyhow::Result<thinkus_knowledge_manager::rebuild::IndexJob> {
    let mut bar: Option<crate::progress::Progress> = None;
    let mut shown = 0;
    loop {
        if job.progress.users_total > 0 {
            let bar = bar.get_or_insert_with(|| {
                crate::progress::Progress::new("rebuilding the index (users)", Some(job.progress.users_total))
            });
            bar.inc(job.progress.users_done.saturating_sub(shown));
            shown = shown.max(job.progress.users_done);
        }
        if matches!(job.status, JobStatus::Succeeded | JobStatus::Failed) {
            if let Some(bar) = bar {
                bar.finish();
            }
            return Ok(job);
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        job = client.index_job(job.id.clone()).await?;
    }
}

pub async fn admin(task: AdminTask) -> anyhow::Result<()> {
    match task {
        AdminTask::RebuildIndex {
            connection,
            tenant,
            user,
            detach,
            job,
        } => {
            let client = KnowledgeGrpcClient::new(connection.channel()?, MAX_MESSAGE);
            let job = match job {
                Some(id) => client.index_job(id).await?,
                None => client.rebuild_index(owners(tenant, user)).await?,
            };
            if detach {
                out(&format!("index rebuild job {} queued", job.id));
                return Ok(());
            }
            let job = follow_index_job(&client, job).await?;
            let progress = job.progress;
            match job.status {
                JobStatus::Succeeded => out(&format!(
                    "indexed {} memories of {} users ({} stale points removed)",
                    progress.indexed, progress.users_done, progress.removed
                )),
                _ => anyhow::bail!(
                    "index rebuild job {} failed after {} runs: {} ({} of {} users done; the others keep their old index)",
                    job.id,
                    job.attempts,
                    job.last_error.unwrap_or_default(),
                    progress.users_done,
                    progress.users_total
                ),
            }
        }
        AdminTask::Maintenance {
            connection,
            tenant,
            user,
        } => {
            let client = KnowledgeGrpcClient::new(connection.channel()?, MAX_MESSAGE);
            let report = client.run_maintenance(owners(tenant, user), true, true, None).await?;
            out(&format!("decayed {}, forgotten {}", report.decayed, report.forgotten));
        }
        AdminTask::SetPlan {
            connection,
            tenant,
            user,
            plan,
        } => {
            let client = KnowledgeGrpcClient::new(connection.channel()?, MAX_MESSAGE);
            client.set_plan(Owner::new(tenant, user.clone()), plan.clone()).await?;
            out(&format!("{user}: plan {plan}"));
        }
    }
    Ok(())
}

/// API key helpers.
#[derive(Debug, Subcommand)]
pub enum KeysTask {
    /// Prints the SHA-256 to put in `auth.keys[].key_sha256` for a key (read from stdin when
    /// not given).
    Hash { key: Option<String> },
    /// Generates a random key and prints it with its hash.
    New,
}

pub fn keys(task: KeysTask) -> anyhow::Result<()> {
    match task {
        KeysTask::Hash { key } => {
            let key = match key {
                Some(key) => key,
                None => {
                    let mut buffer = String::new();
                    std::io::stdin().read_to_string(&mut buffer)?;
                    buffer.trim().to_string()
                }
            };
            anyhow::ensure!(!key.is_empty(), "no key given");
            out(&thinkus_common::auth::key_sha256_hex(&key));
        }
        KeysTask::New => {
            let key = format!("tk_{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
            out(&format!("key:        {key}"));
            out(&format!("key_sha256: {}", thinkus_common::auth::key_sha256_hex(&key)));
        }
    }
    Ok(())
}

/// Prints the effective configuration with its secrets (keys, passwords inside URIs)
/// redacted: the output ends up in terminals, tickets and CI logs.
pub fn print_config(config: &Config) -> anyhow::Result<()> {
    out(&toml::to_string_pretty(&redacted_config(config)?)?);
    Ok(())
}

fn redacted_config(config: &Config) -> anyhow::Result<toml::Value> {
    let mut value = toml::Value::try_from(config)?;
    thinkus_common::redact::config_value(&mut value);
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_config_hides_its_secrets() {
        let config = Config::load(
            None,
            &[
                "auth.client_key=tk_service_secret".into(),
                "gateway.ui_session_secret=page-sessions-secret-0123456789abcdef".into(),
                "storage.database=postgres://thinkus:hunter2@db:5432/thinkus".into(),
                "storage.blobs=s3://bucket/prefix?endpoint=http://s3:9000&secret=abc123".into(),
            ],
        )
        .unwrap();
        let printed = toml::to_string_pretty(&redacted_config(&config).unwrap()).unwrap();
        for secret in ["tk_service_secret", "page-sessions-secret", "hunter2", "abc123"] {
            assert!(!printed.contains(secret), "{secret} is printed:\n{printed}");
        }
        assert!(
            printed.contains("postgres://thinkus:<redacted>@db:5432/thinkus"),
            "{printed}"
        );
        assert!(printed.contains("client_key = \"<redacted>\""), "{printed}");
        let raw = toml::to_string_pretty(&config).unwrap();
        assert!(raw.contains("hunter2"), "the test reads what would have been printed");
    }
}
