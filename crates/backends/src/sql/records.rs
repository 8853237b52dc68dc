//! Rows of the relational store that are not memories.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use thinkus_common::model::{ArtifactRef, Decision, Owner, Scope, UnknownValue};

macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownValue { kind: stringify!($name), value: other.to_string() }),
                }
            }
        }
    };
}

text_enum!(
    /// The kind of a recorded change of a memory.
    ChangeKind {
        Create => "create",
        Evidence => "evidence",
        Merge => "merge",
        Correction => "correction",
        Decay => "decay",
        Forget => "forget",
        Delete => "delete",
        Promote => "promote",
        Supersede => "supersede",
    }
);

text_enum!(
    /// Where a queued candidate is.
    CandidateStatus {
        Pending => "pending",
        Approved => "approved",
        Rejected => "rejected",
    }
);

text_enum!(
    /// Where a background job is.
    JobStatus {
        Pending => "pending",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
    }
);

/// One entry of a memory's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub id: String,
    pub tenant_id: String,
    pub user_id: String,
    pub memory_id: String,
    pub kind: ChangeKind,
    /// "user:alice", "role:cto", "system:decay", ...
    pub actor: String,
    pub reason: String,
    /// The memory before, as JSON; `None` for a creation.
    pub before: Option<String>,
    /// The memory after, as JSON; `None` for a deletion.
    pub after: Option<String>,
    pub at: DateTime<Utc>,
}

/// The stored response of a request, keyed by the caller's request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub tenant_id: String,
    pub user_id: String,
    /// The operation and the caller's request id ("remember:abc").
    pub key: String,
    /// The response, serialised by the service.
    pub response: String,
    pub created_at: DateTime<Utc>,
}

/// A memory waiting for a person's approval.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub id: String,
    pub scope: Scope,
    /// The memory to write, serialised by the knowledge manager.
    pub draft: String,
    pub reason: String,
    pub score: f64,
    pub evidence_count: u32,
    pub status: CandidateStatus,
    /// Normalised content, to count repeated observations of the same candidate.
    pub content_key: String,
    pub created_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
    pub memory_id: Option<String>,
}

/// An artifact's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactRecord {
    pub id: String,
    pub tenant_id: String,
    pub user_id: String,
    pub role_id: Option<String>,
    pub project_id: Option<String>,
    pub session_id: String,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub mime_type: String,
    pub size_bytes: u64,
    pub sha256: String,
    /// Where the content is in the blob store.
    pub blob_key: String,
    pub path: Option<String>,
    pub line_count: u64,
    /// The structure detected ("code", "json", ...).
    pub kind: String,
    /// The language of the compact ("zh", "en").
    pub language: String,
    /// The structural summary and locators, serialised by the artifact service.
    pub compact: String,
    /// Caller metadata as a JSON object.
    pub metadata: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// Identifies a session and who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionKey {
    pub tenant_id: String,
    pub user_id: String,
    pub session_id: String,
    pub role_id: String,
    pub project_id: Option<String>,
}

/// A session's state.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub tenant_id: String,
    pub user_id: String,
    pub session_id: String,
    pub role_id: String,
    pub project_id: Option<String>,
    pub message_count: u32,
    pub last_message_at: DateTime<Utc>,
    /// Index of the last message the summary covers, -1 when none.
    pub summarized_until: i32,
    pub ended: bool,
    pub summary_requested: bool,
}

/// A structured session summary.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRecord {
    pub id: String,
    pub tenant_id: String,
    pub user_id: String,
    pub role_id: String,
    pub project_id: Option<String>,
    pub session_id: String,
    pub goal: String,
    pub constraints: Vec<String>,
    pub decisions: Vec<Decision>,
    pub progress: Vec<String>,
    pub artifacts: Vec<ArtifactRef>,
    pub next_actions: Vec<String>,
    pub risks: Vec<String>,
    pub open_questions: Vec<String>,
    pub trajectory_start: i32,
    pub trajectory_end: i32,
    pub language: String,
    pub engine: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A background job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    pub id: String,
    /// What it does ("learn", "summarize").
    pub kind: String,
    pub tenant_id: String,
    pub user_id: String,
    pub session_id: Option<String>,
    /// The job's input, serialised by its producer.
    pub payload: String,
    pub status: JobStatus,
    pub attempts: u32,
    pub max_attempts: u32,
    pub last_error: Option<String>,
    pub run_after: DateTime<Utc>,
    pub lease_until: Option<DateTime<Utc>>,
    /// At most one queued job per dedupe key.
    pub dedupe_key: Option<String>,
    /// What the job did once it succeeded, serialised by its producer.
    pub result: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Change {
    pub fn owner(&self) -> Owner {
        Owner::new(self.tenant_id.clone(), self.user_id.clone())
    }
}

impl ArtifactRecord {
    pub fn owner(&self) -> Owner {
        Owner::new(self.tenant_id.clone(), self.user_id.clone())
    }
}

impl SessionKey {
    pub fn owner(&self) -> Owner {
        Owner::new(self.tenant_id.clone(), self.user_id.clone())
    }
}

impl SessionRecord {
    pub fn owner(&self) -> Owner {
        Owner::new(self.tenant_id.clone(), self.user_id.clone())
    }
}

impl SummaryRecord {
    pub fn owner(&self) -> Owner {
        Owner::new(self.tenant_id.clone(), self.user_id.clone())
    }
}

impl JobRecord {
    pub fn owner(&self) -> Owner {
        Owner::new(self.tenant_id.clone(), self.user_id.clone())
    }
}

/// Everything the relational store holds of one owner, in every table (what `ExportUser`
/// reads). Each list is in a stable order: memories, candidates, summaries, artifacts and
/// jobs by creation time; changes and messages as they happened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnerRecords {
    /// Every memory, in every status.
    pub memories: Vec<thinkus_common::model::Memory>,
    /// Every change record, of live and deleted memories alike (a deleted memory's without
    /// its content).
    pub changes: Vec<Change>,
    pub candidates: Vec<Candidate>,
    /// The plan set with `SetPlan`, if any.
    pub plan: Option<String>,
    pub sessions: Vec<SessionRecord>,
    /// (session id, message), by session then index.
    pub messages: Vec<(String, thinkus_common::model::Message)>,
    pub summaries: Vec<SummaryRecord>,
    pub artifacts: Vec<ArtifactRecord>,
    pub jobs: Vec<JobRecord>,
    /// The idempotency records' keys (their responses are the service's own copies of what
    /// it answered, already exported as the rows they describe).
    pub request_keys: Vec<String>,
    /// Earlier erasures of this owner.
    pub erasures: Vec<ErasureRecord>,
}

/// How many rows of each kind an erasure removed (`EraseUser`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureCounts {
    pub memories: u64,
    /// Change records (the history of every memory, deleted ones included).
    pub changes: u64,
    pub candidates: u64,
    pub idempotency: u64,
    pub plans: u64,
    pub artifacts: u64,
    pub sessions: u64,
    pub session_messages: u64,
    pub summaries: u64,
    pub jobs: u64,
    /// Points removed from the vector index (counted by the knowledge manager, which owns
    /// the index).
    #[serde(default)]
    pub vectors: u64,
}

impl ErasureCounts {
    /// Rows removed from the relational store (artifacts' included: the artifact service
    /// removes them with their blobs).
    pub fn rows(&self) -> u64 {
        // Saturating: the artifact count arrives in the request from the gateway, and a
        // malformed one must not overflow (a panic reachable from a request).
        [
            self.memories,
            self.changes,
            self.candidates,
            self.idempotency,
            self.plans,
            self.artifacts,
            self.sessions,
            self.session_messages,
            self.summaries,
            self.jobs,
        ]
        .into_iter()
        .fold(0u64, u64::saturating_add)
    }

    /// Everything removed: rows and vector points.
    pub fn total(&self) -> u64 {
        self.rows().saturating_add(self.vectors)
    }
}

/// The record that an owner's data was erased: who asked, when, how much. No content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureRecord {
    pub id: String,
    pub tenant_id: String,
    pub user_id: String,
    /// Who asked ("key:1a2b3c4d", "dev").
    pub actor: String,
    pub at: DateTime<Utc>,
    pub counts: ErasureCounts,
}

#[cfg(test)]
mod erasure_tests {
    use super::ErasureCounts;

    #[test]
    fn counts_from_a_malformed_request_do_not_overflow() {
        let counts = ErasureCounts {
            artifacts: u64::MAX,
            memories: 3,
            vectors: 2,
            ..Default::default()
        };
        assert_eq!(counts.rows(), u64::MAX);
        assert_eq!(counts.total(), u64::MAX);
        let plain = ErasureCounts {
            memories: 3,
            vectors: 2,
            ..Default::default()
        };
        assert_eq!((plain.rows(), plain.total()), (3, 5));
    }
}
