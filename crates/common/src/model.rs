//! The domain model shared by the services. No protobuf types here: `convert` maps them.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use crate::names::UnknownValue;
use crate::names::string_enum;
pub use crate::text::Language;

/// The tenant of data written before tenancy existed, of dev mode, and of scopes built
/// without one (`Scope::new`).
pub const DEFAULT_TENANT: &str = "default";

fn default_tenant() -> String {
    DEFAULT_TENANT.to_string()
}

/// Who owns data: a user of a tenant. The same user id in two tenants is two people.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Owner {
    pub tenant_id: String,
    pub user_id: String,
}

impl Owner {
    pub fn new(tenant_id: impl Into<String>, user_id: impl Into<String>) -> Self {
        Self {
            tenant_id: tenant_id.into(),
            user_id: user_id.into(),
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant_id, self.user_id)
    }
}

/// Whose data a request is about. `project_id` and `session_id` are `None` when empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    /// The tenant; set from the caller's credentials (a service key may name one). Scopes
    /// stored before tenancy read as [`DEFAULT_TENANT`].
    #[serde(default = "default_tenant")]
    pub tenant_id: String,
    pub user_id: String,
    pub role_id: String,
    pub project_id: Option<String>,
    pub session_id: Option<String>,
}

impl Default for Scope {
    fn default() -> Self {
        Self {
            tenant_id: default_tenant(),
            user_id: String::new(),
            role_id: String::new(),
            project_id: None,
            session_id: None,
        }
    }
}

impl Scope {
    /// A scope of the default tenant.
    pub fn new(user_id: impl Into<String>, role_id: impl Into<String>) -> Self {
        Self {
            user_id: user_id.into(),
            role_id: role_id.into(),
            ..Self::default()
        }
    }

    pub fn with_tenant(mut self, tenant_id: impl Into<String>) -> Self {
        self.tenant_id = tenant_id.into();
        self
    }

    pub fn with_project(mut self, project_id: impl Into<String>) -> Self {
        self.project_id = Some(project_id.into());
        self
    }

    pub fn with_session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// The owner of the scope's data.
    pub fn owner(&self) -> Owner {
        Owner::new(self.tenant_id.clone(), self.user_id.clone())
    }
}

string_enum!(
    /// What a memory records.
    MemoryType {
        ProjectDecision => "project_decision",
        UserPreference => "user_preference",
        DiscussionConclusion => "discussion_conclusion",
        ActionItem => "action_item",
        Constraint => "constraint",
        Risk => "risk",
        Feedback => "feedback",
        Insight => "insight",
        Issue => "issue",
        Learning => "learning",
        Pattern => "pattern",
        ConversationTurn => "conversation_turn",
        Fact => "fact",
    }
);

impl MemoryType {
    /// Iteration knowledge (seed 003): bound to an iteration, promotable.
    pub fn is_iteration_knowledge(self) -> bool {
        matches!(self, MemoryType::Insight | MemoryType::Issue | MemoryType::Learning)
    }

    /// How the type reads in a heading or a catalog, in the given language.
    pub fn label(self, language: Language) -> &'static str {
        match (self, language) {
            (MemoryType::ProjectDecision, Language::Zh) => "项目决策",
            (MemoryType::UserPreference, Language::Zh) => "用户偏好",
            (MemoryType::DiscussionConclusion, Language::Zh) => "讨论结论",
            (MemoryType::ActionItem, Language::Zh) => "待办事项",
            (MemoryType::Constraint, Language::Zh) => "约束条件",
            (MemoryType::Risk, Language::Zh) => "风险",
            (MemoryType::Feedback, Language::Zh) => "用户反馈",
            (MemoryType::Insight, Language::Zh) => "见解",
            (MemoryType::Issue, Language::Zh) => "问题",
            (MemoryType::Learning, Language::Zh) => "经验",
            (MemoryType::Pattern, Language::Zh) => "模式",
            (MemoryType::ConversationTurn, Language::Zh) => "对话",
            (MemoryType::Fact, Language::Zh) => "事实",
            (MemoryType::ProjectDecision, Language::En) => "decision",
            (MemoryType::UserPreference, Language::En) => "preference",
            (MemoryType::DiscussionConclusion, Language::En) => "conclusion",
            (MemoryType::ActionItem, Language::En) => "action item",
            (MemoryType::Constraint, Language::En) => "constraint",
            (MemoryType::Risk, Language::En) => "risk",
            (MemoryType::Feedback, Language::En) => "feedback",
            (MemoryType::Insight, Language::En) => "insight",
            (MemoryType::Issue, Language::En) => "issue",
            (MemoryType::Learning, Language::En) => "learning",
            (MemoryType::Pattern, Language::En) => "pattern",
            (MemoryType::ConversationTurn, Language::En) => "turn",
            (MemoryType::Fact, Language::En) => "fact",
        }
    }
}

string_enum!(
    /// Which roles may recall a memory.
    Visibility {
        Private => "private",
        Project => "project",
        Global => "global",
    }
);

impl Visibility {
    /// How far a memory of this visibility reaches: its role alone, every role of its project,
    /// every role of the user. A wider visibility ranks higher.
    pub fn reach(self) -> u8 {
        match self {
            Visibility::Private => 0,
            Visibility::Project => 1,
            Visibility::Global => 2,
        }
    }
}

string_enum!(
    /// Where a memory is in its life.
    MemoryStatus {
        Active => "active",
        Suppressed => "suppressed",
        Frozen => "frozen",
        Replaced => "replaced",
        Forgotten => "forgotten",
    }
);

string_enum!(
    /// Where a memory came from.
    MemorySource {
        UserInput => "user_input",
        Discussion => "discussion",
        Inference => "inference",
        System => "system",
        Consolidation => "consolidation",
        Promotion => "promotion",
        Conversation => "conversation",
        Summary => "summary",
    }
);

/// A pointer from a memory or summary to an artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRef {
    #[serde(rename = "ref")]
    pub reference: String,
    pub locator: String,
    pub desc: String,
}

/// One remembered item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub id: String,
    pub scope: Scope,
    pub memory_type: MemoryType,
    pub content: String,
    pub summary: String,
    pub importance: u8,
    pub confidence: f64,
    pub freshness: f64,
    pub evidence_count: u32,
    pub visibility: Visibility,
    pub status: MemoryStatus,
    pub superseded_by: Option<String>,
    pub source: MemorySource,
    pub tags: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_accessed_at: Option<DateTime<Utc>>,
    pub access_count: u64,
    pub context: String,
    pub related_decision_ids: Vec<String>,
    pub artifact_refs: Vec<ArtifactRef>,
    pub language: Language,
    pub speaker: Option<String>,
    pub occurred_at: DateTime<Utc>,
    pub subject: Option<String>,
    pub iteration_id: Option<String>,
    pub external_id: Option<String>,
    /// Bumped by every stored change; writes check it (optimistic concurrency).
    pub version: i64,
}

/// The longest line of a conversation turn carried as the next turn's context, in characters.
pub const TURN_LINE_CHARS: usize = 300;

/// What a turn said as one line, "Speaker: what was said", cut to [`TURN_LINE_CHARS`]
/// ([`Memory::turn_line`] of a stored turn).
pub fn turn_line(speaker: &str, content: &str) -> String {
    crate::text::summarize_to(&format!("{speaker}: {content}"), TURN_LINE_CHARS)
}

impl Memory {
    /// A new active, private memory of `content`, said or written at `at`: importance 3,
    /// confidence 1, freshness 3, its summary the first 50 characters, in the language of its
    /// text. Callers set what their source knows more of.
    pub fn new(
        scope: Scope,
        memory_type: MemoryType,
        content: String,
        source: MemorySource,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            id: crate::ids::new_id(crate::ids::IdKind::Memory),
            scope,
            memory_type,
            summary: crate::text::summarize_to(&content, 50),
            language: crate::text::detect_language(&content),
            content,
            context: String::new(),
            importance: 3,
            confidence: 1.0,
            freshness: 3.0,
            evidence_count: 1,
            visibility: Visibility::Private,
            status: MemoryStatus::Active,
            superseded_by: None,
            source,
            tags: Vec::new(),
            created_at: at,
            updated_at: at,
            last_accessed_at: None,
            access_count: 0,
            related_decision_ids: Vec::new(),
            artifact_refs: Vec::new(),
            speaker: None,
            occurred_at: at,
            subject: None,
            iteration_id: None,
            external_id: None,
            version: 0,
        }
    }

    /// A conversation turn as the knowledge manager stores it: said by `speaker` at
    /// `occurred_at`, recorded at `now`, with the line of the turn before as `context`
    /// ([`Memory::turn_line`]).
    pub fn conversation_turn(
        scope: Scope,
        speaker: &str,
        content: String,
        context: String,
        occurred_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            context,
            speaker: Some(speaker.trim().to_string()),
            occurred_at,
            ..Self::new(
                scope,
                MemoryType::ConversationTurn,
                content,
                MemorySource::Conversation,
                now,
            )
        }
    }

    /// A conversation turn as one line, "Speaker: what was said", cut to [`TURN_LINE_CHARS`]:
    /// the context stored with the turn after it, and how the retriever recognises neighbours.
    pub fn turn_line(&self) -> String {
        turn_line(self.speaker.as_deref().unwrap_or(""), &self.content)
    }

    /// The text that is embedded and indexed for search: summary, content and, for turns, the
    /// speaker, so that "what did Caroline say about..." finds her turns.
    pub fn index_text(&self) -> String {
        let mut text = String::with_capacity(self.content.len() + self.summary.len() + 32);
        if let Some(speaker) = &self.speaker {
            text.push_str(speaker);
            text.push_str(": ");
        }
        // A summary cut from the content's beginning ("We decided to…") adds nothing but tokens.
        let lead = self.summary.trim_end_matches(['…', '.']).trim_end();
        let content = self.content.split_whitespace().collect::<Vec<_>>().join(" ");
        if !lead.is_empty() && !content.starts_with(lead) {
            text.push_str(&self.summary);
            text.push('\n');
        }
        text.push_str(&self.content);
        text
    }
}

/// A named time range or explicit bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeRange {
    Last7Days,
    Last30Days,
    All,
    /// Inclusive start, exclusive end; either may be open.
    Between {
        start: Option<DateTime<Utc>>,
        end: Option<DateTime<Utc>>,
    },
}

impl TimeRange {
    /// The concrete bounds relative to `now`.
    pub fn bounds(self, now: DateTime<Utc>) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
        match self {
            TimeRange::Last7Days => (Some(now - chrono::Duration::days(7)), None),
            TimeRange::Last30Days => (Some(now - chrono::Duration::days(30)), None),
            TimeRange::All => (None, None),
            TimeRange::Between { start, end } => (start, end),
        }
    }

    /// The design's names: last_7_days, last_30_days, all, or "start..end".
    pub fn label(self) -> String {
        match self {
            TimeRange::Last7Days => "last_7_days".into(),
            TimeRange::Last30Days => "last_30_days".into(),
            TimeRange::All => "all".into(),
            TimeRange::Between { start, end } => format!(
                "{}..{}",
                start.map(|t| t.format("%Y-%m-%d").to_string()).unwrap_or_default(),
                end.map(|t| t.format("%Y-%m-%d").to_string()).unwrap_or_default()
            ),
        }
    }
}

/// The controller's answer to "does this message need memory?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NeedMemory {
    Yes,
    No,
    Maybe,
}

/// How much of each memory recall returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetrievalMode {
    #[default]
    Catalog,
    Details,
}

/// A message's embedding, computed once by the caller (the gateway embeds each user message
/// once) and handed to the services that would otherwise embed it again. Computed as a search
/// query (e5's "query: " prefix); `model` names the embedder it came from, so a service with
/// another model can tell it apart and embed the text itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryEmbedding {
    pub model: String,
    pub values: Vec<f32>,
}

/// The memory controller's plan for one message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlDecision {
    pub need_memory: NeedMemory,
    pub memory_types: Vec<MemoryType>,
    pub retrieval_mode: RetrievalMode,
    pub budget_tokens: u32,
    pub time_range: TimeRange,
    pub reason: String,
    pub engine: String,
    pub signals: Vec<String>,
    pub language: Language,
}

/// Which engine makes a decision, an extraction or a summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineChoice {
    /// What the service is configured to use.
    #[default]
    Configured,
    Rules,
    Llm,
}

/// A decision recorded in a session summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub what: String,
    #[serde(default)]
    pub why: String,
    #[serde(default)]
    pub who: String,
    #[serde(default)]
    pub confidence: DecisionConfidence,
}

/// How settled a decision is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionConfidence {
    High,
    #[default]
    Medium,
    Low,
}

/// One message of a session's trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
    pub speaker: Option<String>,
    pub created_at: DateTime<Utc>,
    pub index: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_names_round_trip() {
        for ty in MemoryType::ALL {
            assert_eq!(ty.as_str().parse::<MemoryType>().unwrap(), *ty);
        }
        assert!("decision".parse::<MemoryType>().is_err());
        assert_eq!(
            "archived".parse::<MemoryStatus>().unwrap_err().to_string(),
            "unknown MemoryStatus \"archived\""
        );
    }

    #[test]
    fn presets_have_bounds() {
        let now = Utc::now();
        let (start, end) = TimeRange::Last7Days.bounds(now);
        assert_eq!(start.unwrap(), now - chrono::Duration::days(7));
        assert!(end.is_none());
        assert_eq!(TimeRange::All.bounds(now), (None, None));
    }
}
