//! Conversions between the shared protobuf messages and the domain model, with validation that
//! names the offending field. Service adapters call these; domain code never sees protobuf.

use chrono::{DateTime, TimeZone, Utc};
use prost_types::Timestamp;
use thinkus_proto::common as pb;

use crate::error::ApiError;
use crate::model::{
    ArtifactRef, ControlDecision, Decision, DecisionConfidence, EngineChoice, Language, Memory, MemorySource,
    MemoryStatus, MemoryType, Message, NeedMemory, QueryEmbedding, RetrievalMode, Scope, TimeRange, Visibility,
};

/// Longest id accepted for users, roles, projects and sessions.
pub const MAX_SCOPE_ID_CHARS: usize = 128;

/// What a request's scope must carry.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScopeRules {
    pub role: bool,
    pub project: bool,
    pub session: bool,
}

impl ScopeRules {
    pub const USER: ScopeRules = ScopeRules {
        role: false,
        project: false,
        session: false,
    };
    pub const USER_ROLE: ScopeRules = ScopeRules {
        role: true,
        project: false,
        session: false,
    };
    pub const USER_SESSION: ScopeRules = ScopeRules {
        role: false,
        project: false,
        session: true,
    };
    pub const USER_ROLE_SESSION: ScopeRules = ScopeRules {
        role: true,
        project: false,
        session: true,
    };
}

fn check_scope_id(field: &str, value: &str) -> Result<(), ApiError> {
    if value.chars().count() > MAX_SCOPE_ID_CHARS {
        return Err(ApiError::invalid(
            field,
            format!("longer than {MAX_SCOPE_ID_CHARS} characters"),
        ));
    }
    if value.chars().any(|c| c.is_control()) {
        return Err(ApiError::invalid(field, "contains control characters"));
    }
    if value.trim() != value {
        return Err(ApiError::invalid(field, "has leading or trailing whitespace"));
    }
    Ok(())
}

fn optional(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

/// Validates and converts a request scope. `field` is the scope's field name ("scope").
pub fn scope_from_proto(scope: Option<&pb::Scope>, field: &str, rules: ScopeRules) -> Result<Scope, ApiError> {
    let scope = scope.ok_or_else(|| ApiError::invalid(field, "is required"))?;
    let user = format!("{field}.user_id");
    if scope.user_id.is_empty() {
        return Err(ApiError::invalid(&user, "is required"));
    }
    check_scope_id(&user, &scope.user_id)?;
    check_scope_id(&format!("{field}.tenant_id"), &scope.tenant_id)?;
    check_scope_id(&format!("{field}.role_id"), &scope.role_id)?;
    check_scope_id(&format!("{field}.project_id"), &scope.project_id)?;
    check_scope_id(&format!("{field}.session_id"), &scope.session_id)?;
    if rules.role && scope.role_id.is_empty() {
        return Err(ApiError::invalid(&format!("{field}.role_id"), "is required"));
    }
    if rules.project && scope.project_id.is_empty() {
        return Err(ApiError::invalid(&format!("{field}.project_id"), "is required"));
    }
    if rules.session && scope.session_id.is_empty() {
        return Err(ApiError::invalid(&format!("{field}.session_id"), "is required"));
    }
    Ok(Scope {
        // Empty until the caller's principal resolves it (`Principal::authorize`).
        tenant_id: scope.tenant_id.clone(),
        user_id: scope.user_id.clone(),
        role_id: scope.role_id.clone(),
        project_id: optional(&scope.project_id),
        session_id: optional(&scope.session_id),
    })
}

pub fn scope_to_proto(scope: &Scope) -> pb::Scope {
    pb::Scope {
        user_id: scope.user_id.clone(),
        role_id: scope.role_id.clone(),
        project_id: scope.project_id.clone().unwrap_or_default(),
        session_id: scope.session_id.clone().unwrap_or_default(),
        tenant_id: scope.tenant_id.clone(),
    }
}

pub fn timestamp(time: DateTime<Utc>) -> Timestamp {
    Timestamp {
        seconds: time.timestamp(),
        nanos: time.timestamp_subsec_nanos() as i32,
    }
}

pub fn timestamp_opt(time: Option<DateTime<Utc>>) -> Option<Timestamp> {
    time.map(timestamp)
}

/// The range of `google.protobuf.Timestamp`: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
/// Times outside it are refused: arithmetic on them (a TTL added, a window subtracted)
/// overflows chrono's range and panicked before this check.
pub const MIN_TIMESTAMP_SECONDS: i64 = -62_135_596_800;
pub const MAX_TIMESTAMP_SECONDS: i64 = 253_402_300_799;

/// Converts a timestamp, INVALID_ARGUMENT naming `field` when out of range.
pub fn datetime(ts: &Timestamp, field: &str) -> Result<DateTime<Utc>, ApiError> {
    if !(0..1_000_000_000).contains(&ts.nanos) {
        return Err(ApiError::invalid(field, "nanos must be within 0..1e9"));
    }
    if !(MIN_TIMESTAMP_SECONDS..=MAX_TIMESTAMP_SECONDS).contains(&ts.seconds) {
        return Err(ApiError::invalid(
            field,
            format!(
                "{} seconds is outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59Z",
                ts.seconds
            ),
        ));
    }
    Utc.timestamp_opt(ts.seconds, ts.nanos as u32)
        .single()
        .ok_or_else(|| ApiError::invalid(field, "is not a representable time"))
}

pub fn datetime_opt(ts: Option<&Timestamp>, field: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
    ts.map(|t| datetime(t, field)).transpose()
}

macro_rules! enum_map {
    ($domain:ident, $proto:path, $to_proto:ident, $from_proto:ident, $name:literal, { $($d:ident <=> $p:ident),+ $(,)? }) => {
        pub fn $to_proto(value: $domain) -> i32 {
            use $proto as P;
            match value {
                $($domain::$d => P::$p as i32),+
            }
        }

        /// Converts a proto enum value; `Ok(None)` for UNSPECIFIED, INVALID_ARGUMENT for values
        /// this server does not know.
        pub fn $from_proto(value: i32, field: &str) -> Result<Option<$domain>, ApiError> {
            use $proto as P;
            match P::try_from(value) {
                Ok(P::Unspecified) => Ok(None),
                $(Ok(P::$p) => Ok(Some($domain::$d)),)+
                Err(_) => Err(ApiError::invalid(field, format!("unknown {} {value}", $name))),
            }
        }
    };
}

enum_map!(MemoryType, pb::MemoryType, memory_type_to_proto, memory_type_from_proto, "memory type", {
    ProjectDecision <=> ProjectDecision,
    UserPreference <=> UserPreference,
    DiscussionConclusion <=> DiscussionConclusion,
    ActionItem <=> ActionItem,
    Constraint <=> Constraint,
    Risk <=> Risk,
    Feedback <=> Feedback,
    Insight <=> Insight,
    Issue <=> Issue,
    Learning <=> Learning,
    Pattern <=> Pattern,
    ConversationTurn <=> ConversationTurn,
    Fact <=> Fact,
});

enum_map!(Visibility, pb::Visibility, visibility_to_proto, visibility_from_proto, "visibility", {
    Private <=> Private,
    Project <=> Project,
    Global <=> Global,
});

enum_map!(MemoryStatus, pb::MemoryStatus, status_to_proto, status_from_proto, "memory status", {
    Active <=> Active,
    Suppressed <=> Suppressed,
    Frozen <=> Frozen,
    Replaced <=> Replaced,
    Forgotten <=> Forgotten,
});

enum_map!(MemorySource, pb::MemorySource, source_to_proto, source_from_proto, "memory source", {
    UserInput <=> UserInput,
    Discussion <=> Discussion,
    Inference <=> Inference,
    System <=> System,
    Consolidation <=> Consolidation,
    Promotion <=> Promotion,
    Conversation <=> Conversation,
    Summary <=> Summary,
});

enum_map!(NeedMemory, pb::NeedMemory, need_to_proto, need_from_proto, "need", {
    Yes <=> Yes,
    No <=> No,
    Maybe <=> Maybe,
});

enum_map!(RetrievalMode, pb::RetrievalMode, mode_to_proto, mode_from_proto, "retrieval mode", {
    Catalog <=> Catalog,
    Details <=> Details,
});

enum_map!(DecisionConfidence, pb::DecisionConfidence, confidence_to_proto, confidence_from_proto, "decision confidence", {
    High <=> High,
    Medium <=> Medium,
    Low <=> Low,
});

/// A required memory type: UNSPECIFIED is refused too.
pub fn required_memory_type(value: i32, field: &str) -> Result<MemoryType, ApiError> {
    memory_type_from_proto(value, field)?.ok_or_else(|| ApiError::invalid(field, "is required"))
}

/// A list of memory types; UNSPECIFIED entries are refused.
pub fn memory_types(values: &[i32], field: &str) -> Result<Vec<MemoryType>, ApiError> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| required_memory_type(*v, &format!("{field}[{i}]")))
        .collect()
}

pub fn engine_from_proto(value: i32, field: &str) -> Result<EngineChoice, ApiError> {
    match pb::Engine::try_from(value) {
        Ok(pb::Engine::Unspecified) => Ok(EngineChoice::Configured),
        Ok(pb::Engine::Rules) => Ok(EngineChoice::Rules),
        Ok(pb::Engine::Llm) => Ok(EngineChoice::Llm),
        Err(_) => Err(ApiError::invalid(field, format!("unknown engine {value}"))),
    }
}

pub fn engine_to_proto_choice(choice: EngineChoice) -> i32 {
    match choice {
        EngineChoice::Configured => pb::Engine::Unspecified as i32,
        EngineChoice::Rules => pb::Engine::Rules as i32,
        EngineChoice::Llm => pb::Engine::Llm as i32,
    }
}

/// Converts a time range; an end before its start is INVALID_ARGUMENT.
pub fn time_range_from_proto(range: Option<&pb::TimeRange>, field: &str) -> Result<Option<TimeRange>, ApiError> {
    let Some(range) = range else {
        return Ok(None);
    };
    match pb::TimeRangePreset::try_from(range.preset) {
        Ok(pb::TimeRangePreset::Last7Days) => Ok(Some(TimeRange::Last7Days)),
        Ok(pb::TimeRangePreset::Last30Days) => Ok(Some(TimeRange::Last30Days)),
        Ok(pb::TimeRangePreset::All) => Ok(Some(TimeRange::All)),
        Ok(pb::TimeRangePreset::Unspecified) => {
            let start = datetime_opt(range.start.as_ref(), &format!("{field}.start"))?;
            let end = datetime_opt(range.end.as_ref(), &format!("{field}.end"))?;
            if let (Some(start), Some(end)) = (start, end)
                && end < start
            {
                return Err(ApiError::invalid(
                    &format!("{field}.end"),
                    format!("ends ({end}) before it starts ({start})"),
                ));
            }
            if start.is_none() && end.is_none() {
                Ok(None)
            } else {
                Ok(Some(TimeRange::Between { start, end }))
            }
        }
        Err(_) => Err(ApiError::invalid(
            &format!("{field}.preset"),
            format!("unknown preset {}", range.preset),
        )),
    }
}

pub fn time_range_to_proto(range: TimeRange) -> pb::TimeRange {
    match range {
        TimeRange::Last7Days => pb::TimeRange {
            preset: pb::TimeRangePreset::Last7Days as i32,
            ..Default::default()
        },
        TimeRange::Last30Days => pb::TimeRange {
            preset: pb::TimeRangePreset::Last30Days as i32,
            ..Default::default()
        },
        TimeRange::All => pb::TimeRange {
            preset: pb::TimeRangePreset::All as i32,
            ..Default::default()
        },
        TimeRange::Between { start, end } => pb::TimeRange {
            preset: pb::TimeRangePreset::Unspecified as i32,
            start: timestamp_opt(start),
            end: timestamp_opt(end),
        },
    }
}

pub fn artifact_ref_to_proto(r: &ArtifactRef) -> pb::ArtifactRef {
    pb::ArtifactRef {
        r#ref: r.reference.clone(),
        locator: r.locator.clone(),
        desc: r.desc.clone(),
    }
}

pub fn artifact_ref_from_proto(r: &pb::ArtifactRef) -> ArtifactRef {
    ArtifactRef {
        reference: r.r#ref.clone(),
        locator: r.locator.clone(),
        desc: r.desc.clone(),
    }
}

pub fn memory_to_proto(memory: &Memory) -> pb::Memory {
    pb::Memory {
        id: memory.id.clone(),
        scope: Some(scope_to_proto(&memory.scope)),
        r#type: memory_type_to_proto(memory.memory_type),
        content: memory.content.clone(),
        summary: memory.summary.clone(),
        importance: i32::from(memory.importance),
        confidence: memory.confidence,
        freshness: memory.freshness,
        evidence_count: memory.evidence_count as i32,
        visibility: visibility_to_proto(memory.visibility),
        status: status_to_proto(memory.status),
        superseded_by: memory.superseded_by.clone().unwrap_or_default(),
        source: source_to_proto(memory.source),
        tags: memory.tags.clone(),
        created_at: Some(timestamp(memory.created_at)),
        updated_at: Some(timestamp(memory.updated_at)),
        last_accessed_at: timestamp_opt(memory.last_accessed_at),
        access_count: memory.access_count as i64,
        context: memory.context.clone(),
        related_decision_ids: memory.related_decision_ids.clone(),
        artifact_refs: memory.artifact_refs.iter().map(artifact_ref_to_proto).collect(),
        language: memory.language.as_str().to_string(),
        speaker: memory.speaker.clone().unwrap_or_default(),
        occurred_at: Some(timestamp(memory.occurred_at)),
        subject: memory.subject.clone().unwrap_or_default(),
        iteration_id: memory.iteration_id.clone().unwrap_or_default(),
        external_id: memory.external_id.clone().unwrap_or_default(),
    }
}

pub fn decision_to_proto(decision: &Decision) -> pb::Decision {
    pb::Decision {
        what: decision.what.clone(),
        why: decision.why.clone(),
        who: decision.who.clone(),
        confidence: confidence_to_proto(decision.confidence),
    }
}

pub fn decision_from_proto(decision: &pb::Decision) -> Decision {
    Decision {
        what: decision.what.clone(),
        why: decision.why.clone(),
        who: decision.who.clone(),
        confidence: confidence_from_proto(decision.confidence, "confidence")
            .ok()
            .flatten()
            .unwrap_or_default(),
    }
}

pub fn control_decision_to_proto(decision: &ControlDecision) -> pb::ControlDecision {
    pb::ControlDecision {
        need_memory: need_to_proto(decision.need_memory),
        memory_types: decision.memory_types.iter().map(|t| memory_type_to_proto(*t)).collect(),
        retrieval_mode: mode_to_proto(decision.retrieval_mode),
        budget_tokens: decision.budget_tokens as i32,
        time_range: Some(time_range_to_proto(decision.time_range)),
        reason: decision.reason.clone(),
        engine: decision.engine.clone(),
        signals: decision.signals.clone(),
        language: decision.language.as_str().to_string(),
    }
}

/// Reads a decision sent by the memory controller.
pub fn control_decision_from_proto(decision: &pb::ControlDecision) -> Result<ControlDecision, ApiError> {
    Ok(ControlDecision {
        need_memory: need_from_proto(decision.need_memory, "need_memory")?.unwrap_or(NeedMemory::Maybe),
        memory_types: memory_types(&decision.memory_types, "memory_types")?,
        retrieval_mode: mode_from_proto(decision.retrieval_mode, "retrieval_mode")?.unwrap_or_default(),
        budget_tokens: decision.budget_tokens.max(0) as u32,
        time_range: time_range_from_proto(decision.time_range.as_ref(), "time_range")?.unwrap_or(TimeRange::All),
        reason: decision.reason.clone(),
        engine: decision.engine.clone(),
        signals: decision.signals.clone(),
        language: decision.language.parse().unwrap_or(Language::En),
    })
}

/// The widest query embedding accepted (the largest common embedding models have 4,096).
pub const MAX_EMBEDDING_DIM: usize = 4096;

/// Reads an optional query embedding: a model name, 1 to [`MAX_EMBEDDING_DIM`] finite values.
/// Whether the size is the model's dimension is for the service that knows its model.
pub fn query_embedding_from_proto(
    embedding: Option<&pb::QueryEmbedding>,
    field: &str,
) -> Result<Option<QueryEmbedding>, ApiError> {
    let Some(embedding) = embedding else {
        return Ok(None);
    };
    if embedding.model.trim().is_empty() {
        return Err(ApiError::invalid(
            &format!("{field}.model"),
            "is required with the values",
        ));
    }
    if embedding.values.is_empty() || embedding.values.len() > MAX_EMBEDDING_DIM {
        return Err(ApiError::invalid(
            &format!("{field}.values"),
            format!("must hold 1-{MAX_EMBEDDING_DIM} values, got {}", embedding.values.len()),
        ));
    }
    if let Some(at) = embedding.values.iter().position(|v| !v.is_finite()) {
        return Err(ApiError::invalid(
            &format!("{field}.values[{at}]"),
            "is not a finite number",
        ));
    }
    Ok(Some(QueryEmbedding {
        model: embedding.model.clone(),
        values: embedding.values.clone(),
    }))
}

/// Writes an optional query embedding.
pub fn query_embedding_to_proto(embedding: Option<&QueryEmbedding>) -> Option<pb::QueryEmbedding> {
    embedding.map(|e| pb::QueryEmbedding {
        model: e.model.clone(),
        values: e.values.clone(),
    })
}

/// Converts session messages, checking each has a role and content.
pub fn messages_from_proto(messages: &[pb::Message], field: &str, max_chars: usize) -> Result<Vec<Message>, ApiError> {
    let now = Utc::now();
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let at = format!("{field}[{i}]");
            if m.content.trim().is_empty() {
                return Err(ApiError::invalid(&format!("{at}.content"), "is empty"));
            }
            if m.content.chars().count() > max_chars {
                return Err(ApiError::invalid(
                    &format!("{at}.content"),
                    format!("longer than {max_chars} characters"),
                ));
            }
            if m.role.is_empty() {
                return Err(ApiError::invalid(&format!("{at}.role"), "is required"));
            }
            Ok(Message {
                role: m.role.clone(),
                content: m.content.clone(),
                speaker: optional(&m.speaker),
                created_at: datetime_opt(m.created_at.as_ref(), &format!("{at}.created_at"))?.unwrap_or(now),
                index: 0,
            })
        })
        .collect()
}

pub fn message_to_proto(message: &Message) -> pb::Message {
    pb::Message {
        role: message.role.clone(),
        content: message.content.clone(),
        speaker: message.speaker.clone().unwrap_or_default(),
        created_at: Some(timestamp(message.created_at)),
        index: message.index as i32,
    }
}

/// Parses an optional language code ("zh", "en"); empty means `None`.
pub fn language_from_proto(value: &str, field: &str) -> Result<Option<Language>, ApiError> {
    if value.is_empty() {
        return Ok(None);
    }
    value
        .parse::<Language>()
        .map(Some)
        .map_err(|_| ApiError::invalid(field, format!("unsupported language {value:?} (use \"zh\" or \"en\")")))
}

/// Page size and offset from a page request: the token is an opaque offset.
pub fn page_from_proto(page: Option<&pb::PageRequest>, field: &str) -> Result<(usize, usize), ApiError> {
    let Some(page) = page else {
        return Ok((50, 0));
    };
    if page.page_size < 0 || page.page_size > 500 {
        return Err(ApiError::invalid(&format!("{field}.page_size"), "must be 0-500"));
    }
    let size = if page.page_size == 0 {
        50
    } else {
        page.page_size as usize
    };
    let offset = if page.page_token.is_empty() {
        0
    } else {
        page.page_token
            .strip_prefix("o")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| ApiError::invalid(&format!("{field}.page_token"), "is not a token this server issued"))?
    };
    Ok((size, offset))
}

/// A page request for `limit` entries from `offset`, as `page_from_proto` reads it (a client's
/// side; at most 500 a page).
pub fn page_to_proto(limit: usize, offset: usize) -> pb::PageRequest {
    pb::PageRequest {
        page_size: limit.min(500) as i32,
        page_token: if offset == 0 {
            String::new()
        } else {
            format!("o{offset}")
        },
    }
}

/// The token of the page after `offset + returned` when the page was full.
pub fn next_page(size: usize, offset: usize, returned: usize) -> pb::PageResponse {
    pb::PageResponse {
        next_page_token: if returned >= size {
            format!("o{}", offset + returned)
        } else {
            String::new()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_embeddings_name_the_bad_field() {
        assert_eq!(query_embedding_from_proto(None, "query_embedding").unwrap(), None);
        let good = pb::QueryEmbedding {
            model: "m".into(),
            values: vec![0.6, 0.8],
        };
        let read = query_embedding_from_proto(Some(&good), "query_embedding")
            .unwrap()
            .unwrap();
        assert_eq!(query_embedding_to_proto(Some(&read)), Some(good.clone()));
        let cases = [
            (
                pb::QueryEmbedding {
                    model: String::new(),
                    ..good.clone()
                },
                "query_embedding.model: is required with the values",
            ),
            (
                pb::QueryEmbedding {
                    values: Vec::new(),
                    ..good.clone()
                },
                "query_embedding.values: must hold 1-4096 values, got 0",
            ),
            (
                pb::QueryEmbedding {
                    values: vec![0.1; MAX_EMBEDDING_DIM + 1],
                    ..good.clone()
                },
                "query_embedding.values: must hold 1-4096 values, got 4097",
            ),
            (
                pb::QueryEmbedding {
                    values: vec![0.1, f32::NAN],
                    ..good.clone()
                },
                "query_embedding.values[1]: is not a finite number",
            ),
        ];
        for (bad, message) in cases {
            let err = query_embedding_from_proto(Some(&bad), "query_embedding").unwrap_err();
            assert_eq!(err.message, message);
        }
    }

    #[test]
    fn timestamps_outside_the_protobuf_range_are_refused() {
        let at = |seconds| Timestamp { seconds, nanos: 0 };
        assert!(datetime(&at(MIN_TIMESTAMP_SECONDS), "now").is_ok());
        assert!(datetime(&at(MAX_TIMESTAMP_SECONDS), "now").is_ok());
        for seconds in [
            MIN_TIMESTAMP_SECONDS - 1,
            MAX_TIMESTAMP_SECONDS + 1,
            i64::MAX,
            i64::MIN,
            8_210_298_412_800,
        ] {
            let err = datetime(&at(seconds), "now").unwrap_err();
            assert!(err.message.starts_with("now: "), "{}", err.message);
        }
        // What the range leaves room for: a window back and a long TTL forward.
        let first = datetime(&at(MIN_TIMESTAMP_SECONDS), "now").unwrap();
        let last = datetime(&at(MAX_TIMESTAMP_SECONDS), "now").unwrap();
        let _ = first - chrono::Duration::days(36_500);
        let _ = last + chrono::Duration::hours(1_000_000);
    }

    #[test]
    fn scope_validation_names_fields() {
        let err = scope_from_proto(None, "scope", ScopeRules::USER).unwrap_err();
        assert_eq!(err.message, "scope: is required");
        let scope = pb::Scope {
            user_id: "u1".into(),
            ..Default::default()
        };
        let err = scope_from_proto(Some(&scope), "scope", ScopeRules::USER_ROLE).unwrap_err();
        assert_eq!(err.message, "scope.role_id: is required");
        let scope = pb::Scope {
            user_id: "u1".into(),
            role_id: "cto".into(),
            project_id: "p1".into(),
            session_id: String::new(),
            tenant_id: "acme".into(),
        };
        let domain = scope_from_proto(Some(&scope), "scope", ScopeRules::USER_ROLE).unwrap();
        assert_eq!(domain.tenant_id, "acme", "as asked, until the principal checks it");
        assert_eq!(domain.project_id.as_deref(), Some("p1"));
        assert_eq!(domain.session_id, None);
        assert_eq!(scope_to_proto(&domain), scope);
        let scope = pb::Scope {
            user_id: "u\n1".into(),
            ..Default::default()
        };
        assert!(scope_from_proto(Some(&scope), "scope", ScopeRules::USER).is_err());
    }

    #[test]
    fn unknown_enum_values_are_named() {
        let err = memory_type_from_proto(99, "memory.type").unwrap_err();
        assert_eq!(err.message, "memory.type: unknown memory type 99");
        assert_eq!(memory_type_from_proto(0, "t").unwrap(), None);
        assert_eq!(
            required_memory_type(0, "memory.type").unwrap_err().message,
            "memory.type: is required"
        );
        for ty in MemoryType::ALL {
            assert_eq!(
                memory_type_from_proto(memory_type_to_proto(*ty), "t").unwrap(),
                Some(*ty)
            );
        }
    }

    #[test]
    fn reversed_time_range_is_refused() {
        let now = Utc::now();
        let range = pb::TimeRange {
            preset: 0,
            start: Some(timestamp(now)),
            end: Some(timestamp(now - chrono::Duration::days(1))),
        };
        let err = time_range_from_proto(Some(&range), "time_range").unwrap_err();
        assert!(err.message.starts_with("time_range.end: ends"), "{}", err.message);
    }

    #[test]
    fn pages_round_trip() {
        let (size, offset) = page_from_proto(None, "page").unwrap();
        assert_eq!((size, offset), (50, 0));
        let next = next_page(50, 0, 50);
        let request = pb::PageRequest {
            page_size: 50,
            page_token: next.next_page_token,
        };
        assert_eq!(page_from_proto(Some(&request), "page").unwrap(), (50, 50));
        assert!(next_page(50, 0, 10).next_page_token.is_empty());
        let bad = pb::PageRequest {
            page_size: 10,
            page_token: "zzz".into(),
        };
        assert!(page_from_proto(Some(&bad), "page").is_err());
        for (limit, offset) in [(20, 0), (20, 40), (500, 1)] {
            assert_eq!(
                page_from_proto(Some(&page_to_proto(limit, offset)), "page").unwrap(),
                (limit, offset)
            );
        }
    }
}
