//! Conversions between the artifact service's protobuf messages and its domain API, both ways
//! (the server adapter reads requests and writes responses; the gRPC client does the opposite).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use thinkus_common::ApiError;
use thinkus_common::convert::{
    ScopeRules, datetime, datetime_opt, language_from_proto, next_page, scope_from_proto, scope_to_proto, timestamp,
    timestamp_opt,
};
use thinkus_common::model::{Language, Owner, Scope};
use thinkus_proto::artifact as pb;
use thinkus_proto::artifact::read_artifact_request::Locator as PbLocator;
use thinkus_proto::common as pbc;

use crate::api::{
    ArtifactInfo, ArtifactKind, Compact, ListRequest, Locator, LocatorExample, LocatorKind, NewArtifact, PurgeResult,
    ReadRequest, ReadResult, SearchHit, StoredArtifact,
};
use crate::locator::{MAX_READ_BYTES, parse_bytes, parse_lines};

fn optional(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

pub fn kind_to_proto(kind: ArtifactKind) -> i32 {
    (match kind {
        ArtifactKind::Code => pbc::ArtifactKind::Code,
        ArtifactKind::Json => pbc::ArtifactKind::Json,
        ArtifactKind::Table => pbc::ArtifactKind::Table,
        ArtifactKind::Log => pbc::ArtifactKind::Log,
        ArtifactKind::Document => pbc::ArtifactKind::Document,
        ArtifactKind::Text => pbc::ArtifactKind::Text,
        ArtifactKind::Binary => pbc::ArtifactKind::Binary,
    }) as i32
}

pub fn kind_from_proto(value: i32) -> Result<ArtifactKind, ApiError> {
    match pbc::ArtifactKind::try_from(value) {
        Ok(pbc::ArtifactKind::Code) => Ok(ArtifactKind::Code),
        Ok(pbc::ArtifactKind::Json) => Ok(ArtifactKind::Json),
        Ok(pbc::ArtifactKind::Table) => Ok(ArtifactKind::Table),
        Ok(pbc::ArtifactKind::Log) => Ok(ArtifactKind::Log),
        Ok(pbc::ArtifactKind::Document) => Ok(ArtifactKind::Document),
        Ok(pbc::ArtifactKind::Text) => Ok(ArtifactKind::Text),
        Ok(pbc::ArtifactKind::Binary) => Ok(ArtifactKind::Binary),
        _ => Err(ApiError::invalid("artifact.kind", format!("unknown kind {value}"))),
    }
}

fn locator_kind_to_proto(kind: LocatorKind) -> i32 {
    (match kind {
        LocatorKind::Lines => pbc::LocatorType::Lines,
        LocatorKind::Bytes => pbc::LocatorType::Bytes,
        LocatorKind::JsonPath => pbc::LocatorType::Jsonpath,
        LocatorKind::Search => pbc::LocatorType::Search,
    }) as i32
}

fn locator_kind_from_proto(value: i32) -> Result<LocatorKind, ApiError> {
    match pbc::LocatorType::try_from(value) {
        Ok(pbc::LocatorType::Lines) => Ok(LocatorKind::Lines),
        Ok(pbc::LocatorType::Bytes) => Ok(LocatorKind::Bytes),
        Ok(pbc::LocatorType::Jsonpath) => Ok(LocatorKind::JsonPath),
        Ok(pbc::LocatorType::Search) => Ok(LocatorKind::Search),
        _ => Err(ApiError::invalid(
            "compact.locators.type",
            format!("unknown locator type {value}"),
        )),
    }
}

/// Reads and validates an artifact header (the scope needs a user and a session).
pub fn header_from_proto(header: Option<&pb::ArtifactHeader>) -> Result<NewArtifact, ApiError> {
    let header = header.ok_or_else(|| ApiError::invalid("header", "is required"))?;
    Ok(NewArtifact {
        scope: scope_from_proto(header.scope.as_ref(), "header.scope", ScopeRules::USER_SESSION)?,
        tool_call_id: optional(&header.tool_call_id),
        tool_name: optional(&header.tool_name),
        mime_type: optional(header.mime_type.trim()),
        path: optional(&header.path),
        expires_at: datetime_opt(header.expires_at.as_ref(), "header.expires_at")?,
        metadata: header.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        language: language_from_proto(&header.language, "header.language")?,
    })
}

pub fn header_to_proto(header: &NewArtifact) -> pb::ArtifactHeader {
    pb::ArtifactHeader {
        scope: Some(scope_to_proto(&header.scope)),
        tool_call_id: header.tool_call_id.clone().unwrap_or_default(),
        tool_name: header.tool_name.clone().unwrap_or_default(),
        mime_type: header.mime_type.clone().unwrap_or_default(),
        path: header.path.clone().unwrap_or_default(),
        expires_at: timestamp_opt(header.expires_at),
        metadata: header.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        language: header.language.map(|l| l.as_str().to_string()).unwrap_or_default(),
    }
}

pub fn artifact_to_proto(info: &ArtifactInfo) -> pbc::Artifact {
    pbc::Artifact {
        id: info.id.clone(),
        scope: Some(scope_to_proto(&info.scope)),
        tool_call_id: info.tool_call_id.clone().unwrap_or_default(),
        mime_type: info.mime_type.clone(),
        size_bytes: info.size_bytes as i64,
        sha256: info.sha256.clone(),
        path: info.path.clone().unwrap_or_default(),
        line_count: info.line_count as i64,
        kind: kind_to_proto(info.kind),
        created_at: Some(timestamp(info.created_at)),
        expires_at: timestamp_opt(info.expires_at),
        metadata: info.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        tool_name: info.tool_name.clone().unwrap_or_default(),
    }
}

/// An artifact as a server returned it; `language` is its compact's (the message has none).
pub fn artifact_from_proto(artifact: Option<&pbc::Artifact>, language: Language) -> Result<ArtifactInfo, ApiError> {
    let a = artifact.ok_or_else(|| ApiError::internal("the artifact service answered without an artifact"))?;
    let scope = a.scope.clone().unwrap_or_default();
    Ok(ArtifactInfo {
        id: a.id.clone(),
        scope: thinkus_common::model::Scope {
            tenant_id: scope.tenant_id,
            user_id: scope.user_id,
            role_id: scope.role_id,
            project_id: optional(&scope.project_id),
            session_id: optional(&scope.session_id),
        },
        tool_call_id: optional(&a.tool_call_id),
        tool_name: optional(&a.tool_name),
        mime_type: a.mime_type.clone(),
        size_bytes: a.size_bytes.max(0) as u64,
        sha256: a.sha256.clone(),
        path: optional(&a.path),
        line_count: a.line_count.max(0) as u64,
        kind: kind_from_proto(a.kind)?,
        language,
        created_at: match &a.created_at {
            Some(ts) => datetime(ts, "artifact.created_at")?,
            None => chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        },
        expires_at: datetime_opt(a.expires_at.as_ref(), "artifact.expires_at")?,
        metadata: a
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    })
}

pub fn compact_to_proto(compact: &Compact) -> pbc::ArtifactCompact {
    pbc::ArtifactCompact {
        r#ref: compact.reference.clone(),
        r#type: compact.type_label.clone(),
        path: compact.path.clone().unwrap_or_default(),
        summary: compact.summary.clone(),
        size: compact.size.clone(),
        locators: compact
            .locators
            .iter()
            .map(|l| pbc::Locator {
                r#type: locator_kind_to_proto(l.kind),
                example: l.example.clone(),
            })
            .collect(),
        rendered: compact.rendered.clone(),
        tokens: compact.tokens as i32,
        language: compact.language.as_str().to_string(),
    }
}

pub fn compact_from_proto(compact: Option<&pbc::ArtifactCompact>) -> Result<Compact, ApiError> {
    let c = compact.ok_or_else(|| ApiError::internal("the artifact service answered without a compact"))?;
    Ok(Compact {
        reference: c.r#ref.clone(),
        type_label: c.r#type.clone(),
        path: optional(&c.path),
        summary: c.summary.clone(),
        size: c.size.clone(),
        locators: c
            .locators
            .iter()
            .map(|l| {
                Ok(LocatorExample {
                    kind: locator_kind_from_proto(l.r#type)?,
                    example: l.example.clone(),
                })
            })
            .collect::<Result<_, ApiError>>()?,
        rendered: c.rendered.clone(),
        tokens: c.tokens.max(0) as u32,
        language: language_from_proto(&c.language, "compact.language")?.unwrap_or(Language::En),
    })
}

pub fn create_response(stored: &StoredArtifact) -> pb::CreateArtifactResponse {
    pb::CreateArtifactResponse {
        artifact: Some(artifact_to_proto(&stored.artifact)),
        compact: Some(compact_to_proto(&stored.compact)),
        deduplicated: stored.deduplicated,
    }
}

pub fn upload_response(stored: &StoredArtifact) -> pb::UploadArtifactResponse {
    pb::UploadArtifactResponse {
        artifact: Some(artifact_to_proto(&stored.artifact)),
        compact: Some(compact_to_proto(&stored.compact)),
        deduplicated: stored.deduplicated,
    }
}

/// A stored artifact from a create or upload answer.
pub fn stored_from_proto(
    artifact: Option<&pbc::Artifact>,
    compact: Option<&pbc::ArtifactCompact>,
    deduplicated: bool,
) -> Result<StoredArtifact, ApiError> {
    let compact = compact_from_proto(compact)?;
    Ok(StoredArtifact {
        artifact: artifact_from_proto(artifact, compact.language)?,
        compact,
        deduplicated,
    })
}

pub fn get_to_proto(scope: &Scope, artifact_id: String, language: Option<Language>) -> pb::GetArtifactRequest {
    pb::GetArtifactRequest {
        scope: Some(scope_to_proto(scope)),
        artifact_id,
        language: language.map(|l| l.as_str().to_string()).unwrap_or_default(),
    }
}

pub fn get_response(artifact: &ArtifactInfo, compact: &Compact) -> pb::GetArtifactResponse {
    pb::GetArtifactResponse {
        artifact: Some(artifact_to_proto(artifact)),
        compact: Some(compact_to_proto(compact)),
    }
}

/// An artifact and its compact from a get answer.
pub fn get_from_response(response: &pb::GetArtifactResponse) -> Result<(ArtifactInfo, Compact), ApiError> {
    let compact = compact_from_proto(response.compact.as_ref())?;
    let artifact = artifact_from_proto(response.artifact.as_ref(), compact.language)?;
    Ok((artifact, compact))
}

pub fn list_to_proto(request: &ListRequest) -> pb::ListArtifactsRequest {
    pb::ListArtifactsRequest {
        scope: Some(scope_to_proto(&request.scope)),
        page: Some(thinkus_common::convert::page_to_proto(request.limit, request.offset)),
    }
}

pub fn list_response(listed: &[(ArtifactInfo, Compact)], limit: usize, offset: usize) -> pb::ListArtifactsResponse {
    pb::ListArtifactsResponse {
        artifacts: listed.iter().map(|(a, _)| artifact_to_proto(a)).collect(),
        compacts: listed.iter().map(|(_, c)| compact_to_proto(c)).collect(),
        page: Some(next_page(limit, offset, listed.len())),
    }
}

/// The artifacts and their compacts from a list answer (two parallel lists).
pub fn list_from_response(response: &pb::ListArtifactsResponse) -> Result<Vec<(ArtifactInfo, Compact)>, ApiError> {
    if response.artifacts.len() != response.compacts.len() {
        return Err(ApiError::internal("the artifact service answered mismatched lists"));
    }
    response
        .artifacts
        .iter()
        .zip(&response.compacts)
        .map(|(artifact, compact)| {
            let compact = compact_from_proto(Some(compact))?;
            Ok((artifact_from_proto(Some(artifact), compact.language)?, compact))
        })
        .collect()
}

pub fn download_to_proto(scope: &Scope, artifact_id: String) -> pb::DownloadArtifactRequest {
    pb::DownloadArtifactRequest {
        scope: Some(scope_to_proto(scope)),
        artifact_id,
    }
}

pub fn delete_to_proto(scope: &Scope, artifact_id: String) -> pb::DeleteArtifactRequest {
    pb::DeleteArtifactRequest {
        scope: Some(scope_to_proto(scope)),
        artifact_id,
    }
}

/// A purge of one owner's expired artifacts, or of everyone's when `owner` is `None`.
pub fn purge_to_proto(owner: Option<Owner>, now: Option<DateTime<Utc>>) -> pb::PurgeExpiredRequest {
    pb::PurgeExpiredRequest {
        scope: owner.map(|owner| pbc::Scope {
            tenant_id: owner.tenant_id,
            user_id: owner.user_id,
            ..Default::default()
        }),
        now: timestamp_opt(now),
    }
}

pub fn purge_result_to_proto(result: &PurgeResult) -> pb::PurgeExpiredResponse {
    pb::PurgeExpiredResponse {
        removed: result.removed as i64,
        blobs_removed: result.blobs_removed as i64,
    }
}

pub fn purge_result_from_proto(response: &pb::PurgeExpiredResponse) -> PurgeResult {
    PurgeResult {
        removed: response.removed.max(0) as u64,
        blobs_removed: response.blobs_removed.max(0) as u64,
    }
}

fn range_text(start: u64, end: Option<u64>) -> String {
    match end {
        Some(end) => format!("{start}-{end}"),
        None => format!("{start}-"),
    }
}

/// Reads and validates a partial read: exactly one locator, a well-formed range.
pub fn read_from_proto(request: &pb::ReadArtifactRequest) -> Result<ReadRequest, ApiError> {
    let scope = scope_from_proto(request.scope.as_ref(), "scope", ScopeRules::USER)?;
    let locator = match &request.locator {
        None => {
            return Err(ApiError::invalid(
                "locator",
                "is required: set one of lines, bytes, json_path or search",
            ));
        }
        Some(PbLocator::Lines(text)) => {
            let (start, end) = parse_lines(text)?;
            Locator::Lines { start, end }
        }
        Some(PbLocator::Bytes(text)) => {
            let (start, end) = parse_bytes(text)?;
            Locator::Bytes { start, end }
        }
        Some(PbLocator::JsonPath(path)) => {
            crate::locator::parse_json_path(path)?;
            Locator::JsonPath(path.trim().to_string())
        }
        Some(PbLocator::Search(keyword)) => Locator::Search(crate::locator::check_keyword(keyword)?),
    };
    let max_bytes = match request.max_bytes {
        0 => None,
        n if n < 0 => return Err(ApiError::invalid("max_bytes", format!("must not be negative, got {n}"))),
        n if n as u64 > MAX_READ_BYTES as u64 => {
            return Err(ApiError::invalid(
                "max_bytes",
                format!("at most {MAX_READ_BYTES}, got {n}"),
            ));
        }
        n => Some(n as usize),
    };
    Ok(ReadRequest {
        scope,
        artifact_id: request.artifact_id.clone(),
        locator,
        max_bytes,
    })
}

pub fn read_to_proto(request: &ReadRequest) -> pb::ReadArtifactRequest {
    pb::ReadArtifactRequest {
        scope: Some(scope_to_proto(&request.scope)),
        artifact_id: request.artifact_id.clone(),
        locator: Some(match &request.locator {
            Locator::Lines { start, end } => PbLocator::Lines(range_text(*start, *end)),
            Locator::Bytes { start, end } => PbLocator::Bytes(range_text(*start, *end)),
            Locator::JsonPath(path) => PbLocator::JsonPath(path.clone()),
            Locator::Search(keyword) => PbLocator::Search(keyword.clone()),
        }),
        max_bytes: request.max_bytes.unwrap_or(0) as i64,
    }
}

pub fn read_result_to_proto(result: &ReadResult) -> pb::ReadArtifactResponse {
    pb::ReadArtifactResponse {
        content: result.content.clone(),
        data: result.data.clone(),
        start: result.start as i64,
        end: result.end as i64,
        past_end: result.past_end,
        truncated: result.truncated,
        note: result.note.clone(),
        total_lines: result.total_lines as i64,
        total_bytes: result.total_bytes as i64,
        hits: result
            .hits
            .iter()
            .map(|h| pb::SearchHit {
                line: h.line as i64,
                start_line: h.start_line as i64,
                end_line: h.end_line as i64,
                text: h.text.clone(),
            })
            .collect(),
        matches: result.matches as i64,
    }
}

pub fn read_result_from_proto(response: pb::ReadArtifactResponse) -> ReadResult {
    let unsigned = |v: i64| v.max(0) as u64;
    ReadResult {
        start: unsigned(response.start),
        end: unsigned(response.end),
        past_end: response.past_end,
        truncated: response.truncated,
        total_lines: unsigned(response.total_lines),
        total_bytes: unsigned(response.total_bytes),
        matches: unsigned(response.matches),
        hits: response
            .hits
            .iter()
            .map(|h| SearchHit {
                line: unsigned(h.line),
                start_line: unsigned(h.start_line),
                end_line: unsigned(h.end_line),
                text: h.text.clone(),
            })
            .collect(),
        content: response.content,
        data: response.data,
        note: response.note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(locator: PbLocator) -> pb::ReadArtifactRequest {
        pb::ReadArtifactRequest {
            scope: Some(pbc::Scope {
                user_id: "u1".into(),
                ..Default::default()
            }),
            artifact_id: "art_x".into(),
            locator: Some(locator),
            max_bytes: 0,
        }
    }

    #[test]
    fn bad_locators_name_their_field() {
        let cases = [
            (PbLocator::Lines("9-2".into()), "lines: "),
            (PbLocator::Bytes("abc".into()), "bytes: "),
            (PbLocator::JsonPath("$[".into()), "json_path: "),
            (PbLocator::Search("  ".into()), "search: "),
        ];
        for (locator, prefix) in cases {
            let err = read_from_proto(&read(locator)).unwrap_err();
            assert!(err.message.starts_with(prefix), "{}", err.message);
        }
        let mut none = read(PbLocator::Lines("1".into()));
        none.locator = None;
        assert!(read_from_proto(&none).unwrap_err().message.starts_with("locator: "));
        let mut big = read(PbLocator::Lines("1".into()));
        big.max_bytes = -1;
        assert!(read_from_proto(&big).unwrap_err().message.starts_with("max_bytes: "));
    }

    #[test]
    fn read_requests_round_trip() {
        for locator in [
            Locator::Lines { start: 3, end: None },
            Locator::Bytes {
                start: 0,
                end: Some(10),
            },
            Locator::JsonPath("$.a[0]".into()),
            Locator::Search("login".into()),
        ] {
            let request = ReadRequest {
                scope: thinkus_common::model::Scope::new("u1", ""),
                artifact_id: "art_x".into(),
                locator,
                max_bytes: Some(100),
            };
            assert_eq!(read_from_proto(&read_to_proto(&request)).unwrap(), request);
        }
    }

    #[test]
    fn headers_need_a_session() {
        let header = pb::ArtifactHeader {
            scope: Some(pbc::Scope {
                user_id: "u1".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let err = header_from_proto(Some(&header)).unwrap_err();
        assert_eq!(err.message, "header.scope.session_id: is required");
    }
}
