//! The artifact service: contents in the blob store, metadata and compacts in the relational
//! store, partial reads served from a small cache of immutable contents.
//!
//! Contents are addressed by their SHA-256 within a user: the blob key is derived from the
//! user and the hash, so the same bytes stored twice by one user (in any session) are kept
//! once, and one user's blobs are never shared with another's. Within one session the same
//! bytes return the existing artifact (`deduplicated`). A blob is deleted with the last
//! artifact that references it; creations and deletions of one blob are serialised by a lock
//! striped over blob keys, so a blob cannot be removed under an artifact being created.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::json;
use sha2::{Digest, Sha256};
use thinkus_backends::blob::{BlobError, BlobStore, ByteStream};
use thinkus_backends::llm::json::{extract_json, str_field};
use thinkus_backends::llm::{CompletionRequest, LanguageModel, LlmTask};
use thinkus_backends::sql::{ArtifactRecord, ArtifactStore};
use thinkus_common::ApiError;
use thinkus_common::ids::{IdKind, check_id, new_id};
use thinkus_common::model::{DEFAULT_TENANT, Language, Owner, Scope};
use thinkus_common::text::{detect_language, summarize_to};
use thinkus_common::tokens::TokenCounter;
use thinkus_common::work::ByteBudget;
use tokio_util::sync::CancellationToken;

use crate::api::{
    ArtifactApi, ArtifactInfo, ArtifactKind, Compact, ContentStream, ListRequest, Locator, NewArtifact, PurgeResult,
    ReadRequest, ReadResult, StoredArtifact,
};
use crate::compact::{self, Analysis, CompactMeta, Content};
use crate::config::ArtifactConfig;
use crate::locator::{self, ByteWindow, DEFAULT_READ_BYTES, Indexed, MAX_READ_BYTES};

/// The most metadata entries an artifact carries, and their sizes.
pub const MAX_METADATA_ENTRIES: usize = 32;
const MAX_METADATA_KEY_CHARS: usize = 128;
const MAX_METADATA_VALUE_CHARS: usize = 2048;
const MAX_PATH_CHARS: usize = 1024;
const MAX_NAME_CHARS: usize = 256;
const LOCK_STRIPES: usize = 64;
const PURGE_BATCH: usize = 200;

/// Checks a header; the error names the field.
pub fn validate_header(header: &NewArtifact, now: DateTime<Utc>) -> Result<(), ApiError> {
    if header.scope.user_id.is_empty() {
        return Err(ApiError::invalid("header.scope.user_id", "is required"));
    }
    if header.scope.session_id.as_deref().is_none_or(str::is_empty) {
        return Err(ApiError::invalid("header.scope.session_id", "is required"));
    }
    let limited = |field: &str, value: &Option<String>, max: usize| -> Result<(), ApiError> {
        match value {
            Some(v) if v.chars().count() > max => {
                Err(ApiError::invalid(field, format!("longer than {max} characters")))
            }
            Some(v) if v.chars().any(char::is_control) => Err(ApiError::invalid(field, "contains control characters")),
            _ => Ok(()),
        }
    };
    limited("header.path", &header.path, MAX_PATH_CHARS)?;
    limited("header.tool_call_id", &header.tool_call_id, MAX_NAME_CHARS)?;
    limited("header.tool_name", &header.tool_name, MAX_NAME_CHARS)?;
    limited("header.mime_type", &header.mime_type, MAX_NAME_CHARS)?;
    if let Some(mime) = &header.mime_type
        && !mime.contains('/')
    {
        return Err(ApiError::invalid(
            "header.mime_type",
            format!("{mime:?} is not a MIME type (type/subtype)"),
        ));
    }
    if header.metadata.len() > MAX_METADATA_ENTRIES {
        return Err(ApiError::invalid(
            "header.metadata",
            format!("at most {MAX_METADATA_ENTRIES} entries, got {}", header.metadata.len()),
        ));
    }
    for (key, value) in &header.metadata {
        if key.is_empty() || key.chars().count() > MAX_METADATA_KEY_CHARS {
            return Err(ApiError::invalid(
                "header.metadata",
                format!("keys must be 1-{MAX_METADATA_KEY_CHARS} characters"),
            ));
        }
        if value.chars().count() > MAX_METADATA_VALUE_CHARS {
            return Err(ApiError::invalid(
                &format!("header.metadata[{key:?}]"),
                format!("longer than {MAX_METADATA_VALUE_CHARS} characters"),
            ));
        }
    }
    if let Some(expires) = header.expires_at
        && expires <= now
    {
        return Err(ApiError::invalid("header.expires_at", "is in the past"));
    }
    Ok(())
}

/// Checks UTF-8 across chunk boundaries.
#[derive(Debug, Default)]
struct Utf8Check {
    invalid: bool,
    /// The start of a character cut by the chunk boundary.
    carry: Vec<u8>,
}

fn utf8_len(lead: u8) -> Option<usize> {
    match lead {
        0xC2..=0xDF => Some(2),
        0xE0..=0xEF => Some(3),
        0xF0..=0xF4 => Some(4),
        _ => None,
    }
}

impl Utf8Check {
    fn feed(&mut self, mut data: &[u8]) {
        if self.invalid {
            return;
        }
        if !self.carry.is_empty() {
            let Some(need) = utf8_len(self.carry[0]) else {
                self.invalid = true;
                return;
            };
            let take = (need - self.carry.len()).min(data.len());
            self.carry.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.carry.len() < need {
                return;
            }
            if std::str::from_utf8(&self.carry).is_err() {
                self.invalid = true;
                return;
            }
            self.carry.clear();
        }
        if let Err(err) = std::str::from_utf8(data) {
            if err.error_len().is_some() {
                self.invalid = true;
            } else {
                self.carry = data[err.valid_up_to()..].to_vec();
            }
        }
    }

    fn is_valid(&self) -> bool {
        !self.invalid && self.carry.is_empty()
    }
}

/// What is learnt about a content while it streams in.
struct Ingest {
    hasher: Sha256,
    size: u64,
    newlines: u64,
    last: Option<u8>,
    head: Vec<u8>,
    head_limit: usize,
    utf8: Utf8Check,
    nul: bool,
    /// The caller's stream failed with this error.
    error: Option<ApiError>,
}

impl Ingest {
    fn new(head_limit: usize) -> Self {
        Self {
            hasher: Sha256::new(),
            size: 0,
            newlines: 0,
            last: None,
            head: Vec::new(),
            head_limit,
            utf8: Utf8Check::default(),
            nul: false,
            error: None,
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.hasher.update(chunk);
        self.size += chunk.len() as u64;
        self.newlines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
        self.nul |= chunk.contains(&0);
        self.last = chunk.last().copied();
        self.utf8.feed(chunk);
        let room = self.head_limit.saturating_sub(self.head.len());
        self.head.extend_from_slice(&chunk[..room.min(chunk.len())]);
    }

    fn is_text(&self) -> bool {
        !self.nul && self.utf8.is_valid()
    }

    fn line_count(&self) -> u64 {
        match self.last {
            None => 0,
            Some(b'\n') => self.newlines,
            Some(_) => self.newlines + 1,
        }
    }
}

/// The longest prefix of `bytes` that is UTF-8: the head may end inside a character when it
/// was cut at the analysis limit.
fn valid_prefix(bytes: &[u8]) -> &str {
    match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => std::str::from_utf8(&bytes[..err.valid_up_to()]).unwrap_or_default(),
    }
}

/// Cached contents by blob key, least recently used first, and the bytes they hold.
type CacheEntries = (VecDeque<(String, Arc<Indexed>)>, usize);

/// Recently read contents with their line index, least recently used evicted first.
struct ContentCache {
    capacity: usize,
    inner: parking_lot::Mutex<CacheEntries>,
}

impl ContentCache {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: parking_lot::Mutex::new((VecDeque::new(), 0)),
        }
    }

    fn get(&self, key: &str) -> Option<Arc<Indexed>> {
        let mut inner = self.inner.lock();
        let position = inner.0.iter().position(|(k, _)| k == key)?;
        let entry = inner.0.remove(position)?;
        let value = entry.1.clone();
        inner.0.push_back(entry);
        Some(value)
    }

    fn put(&self, key: &str, value: Arc<Indexed>) {
        let weight = value.weight();
        if weight > self.capacity {
            return;
        }
        let mut inner = self.inner.lock();
        if inner.0.iter().any(|(k, _)| k == key) {
            return;
        }
        inner.0.push_back((key.to_string(), value));
        inner.1 += weight;
        while inner.1 > self.capacity {
            match inner.0.pop_front() {
                Some((_, evicted)) => inner.1 -= evicted.weight(),
                None => break,
            }
        }
    }

    fn remove(&self, key: &str) {
        let mut inner = self.inner.lock();
        if let Some(position) = inner.0.iter().position(|(k, _)| k == key)
            && let Some((_, evicted)) = inner.0.remove(position)
        {
            inner.1 -= evicted.weight();
        }
    }
}

/// The compacts of an artifact in both languages, as stored with its metadata.
type StoredCompacts = BTreeMap<String, Compact>;

/// The artifact service.
pub struct ArtifactService {
    config: ArtifactConfig,
    store: Arc<dyn ArtifactStore>,
    blobs: Arc<dyn BlobStore>,
    llm: Option<Arc<dyn LanguageModel>>,
    tokens: TokenCounter,
    locks: Vec<tokio::sync::Mutex<()>>,
    cache: ContentCache,
    /// Bytes of content parsed at once (`artifact.parse_bytes_in_flight`).
    parsing: ByteBudget,
}

fn hex_sha256(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Where an owner's content with this hash lives in the blob store. The owner is hashed: ids
/// may hold characters blob keys cannot. The default tenant's keys hash the user id alone, as
/// before tenancy, so its existing blobs keep deduplicating; other tenants hash the tenant and
/// the user, so the same user id in two tenants never shares a blob.
pub fn blob_key(owner: &Owner, sha256: &str) -> String {
    let folder = if owner.tenant_id == DEFAULT_TENANT {
        hex_sha256(owner.user_id.as_bytes())
    } else {
        hex_sha256(format!("{}\u{0}{}", owner.tenant_id, owner.user_id).as_bytes())
    };
    format!("artifacts/{folder}/{sha256}")
}

fn blob_failure(err: BlobError) -> ApiError {
    // A missing blob behind existing metadata is an inconsistency, not the caller's NOT_FOUND.
    match err {
        BlobError::Unavailable(message) => ApiError::unavailable(format!("blob store unavailable: {message}")),
        other => ApiError::internal(format!("blob store: {other}")),
    }
}

impl ArtifactService {
    pub fn new(
        config: ArtifactConfig,
        store: Arc<dyn ArtifactStore>,
        blobs: Arc<dyn BlobStore>,
        llm: Option<Arc<dyn LanguageModel>>,
        tokens: TokenCounter,
    ) -> Self {
        let cache = ContentCache::new(config.read_cache_bytes);
        let parsing = ByteBudget::new("artifact.parse_bytes_in_flight", config.parse_bytes_in_flight);
        Self {
            parsing,
            config,
            store,
            blobs,
            llm,
            tokens,
            locks: (0..LOCK_STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            cache,
        }
    }

    pub fn config(&self) -> &ArtifactConfig {
        &self.config
    }

    fn lock_for(&self, key: &str) -> &tokio::sync::Mutex<()> {
        let digest = Sha256::digest(key.as_bytes());
        &self.locks[digest[0] as usize % LOCK_STRIPES]
    }

    /// The record of an artifact the user owns; NOT_FOUND for another user's.
    async fn owned(&self, owner: &Owner, artifact_id: &str) -> Result<ArtifactRecord, ApiError> {
        check_id(IdKind::Artifact, "artifact_id", artifact_id)?;
        self.store
            .get_artifact(owner, artifact_id)
            .await?
            .ok_or_else(|| ApiError::not_found("artifact", artifact_id))
    }

    /// What the record holds, as the API shows it. A stored kind, language or metadata that
    /// cannot be read is an error naming the artifact and the column, never a default.
    fn info(record: &ArtifactRecord) -> Result<ArtifactInfo, ApiError> {
        let unreadable =
            |column: &str, why: String| ApiError::internal(format!("artifact {}: column {column}: {why}", record.id));
        let kind = ArtifactKind::parse(&record.kind)
            .ok_or_else(|| unreadable("kind", format!("unknown kind {:?}", record.kind)))?;
        let language: Language = record
            .language
            .parse()
            .map_err(|_| unreadable("language", format!("unknown language {:?}", record.language)))?;
        // The metadata is the caller's: the error names where it fails, not what it holds.
        let metadata = serde_json::from_str(&record.metadata)
            .map_err(|err| unreadable("metadata", format!("not a JSON object of strings ({err})")))?;
        Ok(ArtifactInfo {
            id: record.id.clone(),
            scope: Scope {
                tenant_id: record.tenant_id.clone(),
                user_id: record.user_id.clone(),
                role_id: record.role_id.clone().unwrap_or_default(),
                project_id: record.project_id.clone(),
                session_id: Some(record.session_id.clone()),
            },
            tool_call_id: record.tool_call_id.clone(),
            tool_name: record.tool_name.clone(),
            mime_type: record.mime_type.clone(),
            size_bytes: record.size_bytes,
            sha256: record.sha256.clone(),
            path: record.path.clone(),
            line_count: record.line_count,
            kind,
            language,
            created_at: record.created_at,
            expires_at: record.expires_at,
            metadata,
        })
    }

    /// Listed records with their compacts (in their own language), in the order given.
    fn listed<'a>(records: impl Iterator<Item = &'a ArtifactRecord>) -> Result<Vec<(ArtifactInfo, Compact)>, ApiError> {
        records
            .map(|record| Ok((Self::info(record)?, Self::compact_of(record, None)?)))
            .collect()
    }

    fn compact_of(record: &ArtifactRecord, language: Option<Language>) -> Result<Compact, ApiError> {
        let compacts: StoredCompacts = serde_json::from_str(&record.compact)
            .map_err(|err| ApiError::internal(format!("artifact {}: unreadable compact: {err}", record.id)))?;
        let wanted = language.map(|l| l.as_str()).unwrap_or(record.language.as_str());
        compacts
            .get(wanted)
            .or_else(|| compacts.values().next())
            .cloned()
            .ok_or_else(|| ApiError::internal(format!("artifact {}: no compact stored", record.id)))
    }

    /// The summary part of a compact from the language model, when one is configured.
    async fn llm_summary(
        &self,
        analysis: &Analysis,
        head: &str,
        line_count: u64,
        language: Language,
    ) -> Option<String> {
        let llm = self.llm.as_ref().filter(|_| self.config.llm_summaries)?;
        let structural = compact::structural_summary(analysis, line_count, language, 20);
        let excerpt: String = head.chars().take(3000).collect();
        let cut = if head.chars().count() > 3000 { "\n...(cut)" } else { "" };
        let (instruction, rules) = match language {
            Language::Zh => (
                "为以下工具输出生成简短摘要（不超过200字，用中文）",
                "要求：1. 说明这是什么类型的内容 2. 概括主要内容/功能 3. 如果是代码，列出主要函数/类 4. 如果是文档，列出主要章节。只回答JSON：{\"summary\": \"...\"}",
            ),
            Language::En => (
                "Write a short summary (at most 60 words, in English) of this tool output",
                "Say what kind of content it is, what it contains or does, its main functions or classes for code, its main sections for documents. Answer with JSON only: {\"summary\": \"...\"}",
            ),
        };
        let prompt = format!(
            "{instruction}.\n\nType: {}\nStructure: {structural}\nContent:\n{excerpt}{cut}\n\n{rules}",
            analysis.mime_type
        );
        let input = json!({
            "kind": analysis.kind.as_str(),
            "structure": structural,
            "language": language.as_str(),
        });
        let mut request = CompletionRequest::task(LlmTask::Compact, prompt, input);
        request.max_tokens = 400;
        match tokio::time::timeout(Duration::from_secs(30), llm.complete(request)).await {
            Ok(Ok(answer)) => match extract_json(&answer.text)
                .as_ref()
                .and_then(|v| str_field(v, "summary"))
            {
                Some(summary) => Some(summarize_to(summary, 400)),
                None => {
                    tracing::warn!(model = %answer.model, "the compact summary answer had no summary, using the structural one");
                    None
                }
            },
            Ok(Err(err)) => {
                tracing::warn!(%err, "the language model failed on a compact, using the structural summary");
                None
            }
            Err(_) => {
                tracing::warn!("the language model timed out on a compact, using the structural summary");
                None
            }
        }
    }

    /// The analysis and the compacts of a content, from its head. The analysis (up to
    /// `artifact.analyze_max_bytes` of text) and the compacts run on the CPU pool
    /// (`thinkus_common::work`), never on an async worker.
    async fn build_compacts(
        &self,
        id: &str,
        header: &NewArtifact,
        ingest: &mut Ingest,
        language: Language,
    ) -> Result<(Analysis, StoredCompacts), ApiError> {
        let is_text = ingest.is_text();
        let head = std::mem::take(&mut ingest.head);
        let partial = (ingest.size > head.len() as u64).then_some(head.len() as u64);
        let size = ingest.size;
        let path = header.path.clone();
        let mime_type = header.mime_type.clone();
        let tokens = self.tokens;
        let json_max_bytes = usize::try_from(self.config.json_path_max_bytes).unwrap_or(usize::MAX);
        // The analysis parses the head (a JSON tree takes many times its size): its bytes are
        // reserved first, held until the analysis ends.
        let reserved = self.parsing.reserve("artifact analysis", head.len()).await?;
        let (head, analysis, content_tokens) = thinkus_common::work::cpu("artifact analysis", move || {
            let _reserved = reserved;
            let valid_head = valid_prefix(&head);
            let analysis = compact::analyze(Content {
                text: is_text.then_some(valid_head),
                head: &head,
                partial_bytes: partial,
                path: path.as_deref(),
                mime_type: mime_type.as_deref(),
                json_max_bytes,
            });
            // The content's tokens: counted when it is small enough to be whole in the head,
            // estimated at four bytes a token beyond (where the configured cap is a tenth or less).
            let content_tokens = if is_text && partial.is_none() && size <= EXACT_COUNT_BYTES {
                tokens.count(valid_head)
            } else {
                (size / 4) as usize
            };
            (head, analysis, content_tokens)
        })
        .await?;
        let line_count = if is_text { ingest.line_count() } else { 0 };
        let max_tokens = compact_cap(self.config.compact_max_tokens, content_tokens);
        let llm_summary = if is_text {
            self.llm_summary(&analysis, valid_prefix(&head), line_count, language)
                .await
        } else {
            None
        };
        ingest.head = head;
        let id = id.to_string();
        let path = header.path.clone();
        thinkus_common::work::cpu("artifact compacts", move || {
            let meta = CompactMeta {
                id: &id,
                path: path.as_deref(),
                size_bytes: size,
                line_count,
            };
            let mut compacts = StoredCompacts::new();
            for candidate in [Language::En, Language::Zh] {
                let summary = llm_summary.as_deref().filter(|_| candidate == language);
                let built = compact::build(&analysis, meta, candidate, summary, &tokens, max_tokens);
                compacts.insert(candidate.as_str().to_string(), built);
            }
            (analysis, compacts)
        })
        .await
    }

    /// Streams a content into the blob store under a temporary key, learning its hash and
    /// structure on the way; then files it under its content address.
    async fn store(&self, header: NewArtifact, content: ContentStream) -> Result<StoredArtifact, ApiError> {
        let now = Utc::now();
        validate_header(&header, now)?;
        let owner = header.scope.owner();
        let session_id = header.scope.session_id.clone().unwrap_or_default();
        let ingest = Arc::new(parking_lot::Mutex::new(Ingest::new(self.config.analyze_max_bytes)));
        let observer = ingest.clone();
        let stream: ByteStream = content
            .map(move |item| match item {
                Ok(chunk) => {
                    observer.lock().feed(&chunk);
                    Ok(chunk)
                }
                Err(err) => {
                    let message = err.message.clone();
                    observer.lock().error = Some(err);
                    Err(BlobError::Stream(message))
                }
            })
            .boxed();
        let temp_key = format!("tmp/{}", uuid::Uuid::now_v7().simple());
        let written = self.blobs.put_stream(&temp_key, stream, self.config.max_bytes).await;
        let mut ingest = std::mem::replace(&mut *ingest.lock(), Ingest::new(0));
        match written {
            Ok(_) => {}
            Err(BlobError::TooLarge { limit }) => {
                return Err(ApiError::invalid(
                    "content",
                    format!("larger than the limit of {limit} bytes"),
                ));
            }
            Err(BlobError::Stream(message)) => {
                self.discard(&temp_key).await;
                return Err(ingest
                    .error
                    .unwrap_or_else(|| ApiError::invalid("content", format!("the upload failed: {message}"))));
            }
            Err(other) => {
                self.discard(&temp_key).await;
                return Err(blob_failure(other));
            }
        }
        if ingest.size == 0 {
            self.discard(&temp_key).await;
            return Err(ApiError::invalid("content", "is empty"));
        }
        let sha256 = hex::encode(ingest.hasher.clone().finalize());
        if let Some(existing) = self.store.find_artifact(&owner, &session_id, &sha256).await? {
            self.discard(&temp_key).await;
            return Ok(StoredArtifact {
                compact: Self::compact_of(&existing, header.language)?,
                artifact: Self::info(&existing)?,
                deduplicated: true,
            });
        }
        let language = header.language.unwrap_or_else(|| {
            if ingest.is_text() {
                let sample: String = String::from_utf8_lossy(&ingest.head[..ingest.head.len().min(8192)]).into_owned();
                detect_language(&sample)
            } else {
                Language::En
            }
        });
        let id = new_id(IdKind::Artifact);
        let (analysis, compacts) = match self.build_compacts(&id, &header, &mut ingest, language).await {
            Ok(built) => built,
            Err(err) => {
                self.discard(&temp_key).await;
                return Err(err);
            }
        };
        let key = blob_key(&owner, &sha256);
        let expires_at = header.expires_at.or_else(|| {
            (self.config.default_ttl_hours > 0)
                .then(|| now + chrono::Duration::hours(self.config.default_ttl_hours.min(1_000_000) as i64))
        });
        let record = ArtifactRecord {
            id,
            tenant_id: owner.tenant_id.clone(),
            user_id: owner.user_id.clone(),
            role_id: Some(header.scope.role_id.clone()).filter(|r| !r.is_empty()),
            project_id: header.scope.project_id.clone(),
            session_id: session_id.clone(),
            tool_call_id: header.tool_call_id.clone(),
            tool_name: header.tool_name.clone(),
            mime_type: header.mime_type.clone().unwrap_or_else(|| analysis.mime_type.clone()),
            size_bytes: ingest.size,
            sha256: sha256.clone(),
            blob_key: key.clone(),
            path: header.path.clone(),
            line_count: if ingest.is_text() { ingest.line_count() } else { 0 },
            kind: analysis.kind.as_str().to_string(),
            language: language.as_str().to_string(),
            compact: serde_json::to_string(&compacts).map_err(|err| ApiError::internal(err.to_string()))?,
            metadata: serde_json::to_string(&header.metadata).map_err(|err| ApiError::internal(err.to_string()))?,
            created_at: now,
            expires_at,
        };
        let _guard = self.lock_for(&key).lock().await;
        // Another upload of the same bytes in this session may have won while the compact was built.
        if let Some(existing) = self.store.find_artifact(&owner, &session_id, &sha256).await? {
            self.discard(&temp_key).await;
            return Ok(StoredArtifact {
                compact: Self::compact_of(&existing, header.language)?,
                artifact: Self::info(&existing)?,
                deduplicated: true,
            });
        }
        let created_blob = match self.blobs.size(&key).await.map_err(blob_failure)? {
            Some(_) => {
                self.discard(&temp_key).await;
                false
            }
            None => {
                if let Err(err) = self.blobs.rename(&temp_key, &key).await {
                    self.discard(&temp_key).await;
                    return Err(blob_failure(err));
                }
                true
            }
        };
        if let Err(err) = self.store.insert_artifact(&record).await {
            if created_blob && self.store.count_blob_refs(&key).await.is_ok_and(|n| n == 0) {
                let _ = self.blobs.delete(&key).await;
            }
            return Err(err.into());
        }
        tracing::debug!(artifact_id = %record.id, size = record.size_bytes, kind = %record.kind, "artifact stored");
        Ok(StoredArtifact {
            compact: Self::compact_of(&record, header.language)?,
            artifact: Self::info(&record)?,
            deduplicated: false,
        })
    }

    async fn discard(&self, temp_key: &str) {
        if let Err(err) = self.blobs.delete(temp_key).await {
            tracing::warn!(%err, key = temp_key, "a temporary blob was not removed");
        }
    }

    /// Deletes a record and, when it was the last reference, its blob. Returns whether a blob
    /// was removed; `None` when the record was already gone.
    async fn remove(&self, owner: &Owner, artifact_id: &str, blob_key: &str) -> Result<Option<bool>, ApiError> {
        let _guard = self.lock_for(blob_key).lock().await;
        if self.store.delete_artifact(owner, artifact_id).await?.is_none() {
            return Ok(None);
        }
        if self.store.count_blob_refs(blob_key).await? > 0 {
            return Ok(Some(false));
        }
        self.cache.remove(blob_key);
        self.blobs.delete(blob_key).await.map_err(blob_failure)?;
        Ok(Some(true))
    }

    /// A text content with its line index, from the cache or the blob store.
    async fn indexed(&self, record: &ArtifactRecord) -> Result<Arc<Indexed>, ApiError> {
        if let Some(hit) = self.cache.get(&record.blob_key) {
            return Ok(hit);
        }
        let bytes = self.blobs.get(&record.blob_key).await.map_err(blob_failure)?;
        let indexed = Arc::new(thinkus_common::work::cpu("artifact index", move || Indexed::new(bytes)).await?);
        self.cache.put(&record.blob_key, indexed.clone());
        Ok(indexed)
    }

    async fn read_byte_range(
        &self,
        record: &ArtifactRecord,
        start: u64,
        end: Option<u64>,
        max_bytes: usize,
        is_text: bool,
        language: Language,
    ) -> Result<ReadResult, ApiError> {
        let total = record.size_bytes;
        let empty = ByteWindow {
            data: &[],
            start: total,
            total,
        };
        if start >= total {
            return Ok(locator::read_bytes(empty, start, end, is_text, max_bytes, language));
        }
        // Fetch 3 bytes more on each side than asked so a text range can widen to whole
        // characters, and no more than the byte limit allows.
        let wanted_end = end
            .unwrap_or(total)
            .min(total)
            .min(start.saturating_add(max_bytes as u64));
        let window_start = start.saturating_sub(3);
        let window_end = wanted_end.saturating_add(3).min(total);
        let result = if let Some(cached) = self.cache.get(&record.blob_key) {
            let data = &cached.bytes[window_start as usize..window_end as usize];
            locator::read_bytes(
                ByteWindow {
                    data,
                    start: window_start,
                    total,
                },
                start,
                end,
                is_text,
                max_bytes,
                language,
            )
        } else {
            let data = self
                .blobs
                .get_range(&record.blob_key, window_start, window_end)
                .await
                .map_err(blob_failure)?;
            locator::read_bytes(
                ByteWindow {
                    data: &data,
                    start: window_start,
                    total,
                },
                start,
                end,
                is_text,
                max_bytes,
                language,
            )
        };
        Ok(ReadResult {
            total_lines: record.line_count,
            ..result
        })
    }

    /// Purges expired artifacts on schedule until shutdown.
    pub async fn run_expiry(self: Arc<Self>, shutdown: CancellationToken) {
        let interval = Duration::from_secs(self.config.purge_interval_secs);
        if interval.is_zero() {
            return;
        }
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            match self.purge_expired(None, None).await {
                Ok(PurgeResult { removed: 0, .. }) => {}
                Ok(result) => tracing::info!(
                    removed = result.removed,
                    blobs_removed = result.blobs_removed,
                    "expired artifacts purged"
                ),
                Err(err) => tracing::error!(%err, "the artifact purge failed"),
            }
        }
    }
}

#[async_trait]
impl ArtifactApi for ArtifactService {
    async fn create(&self, header: NewArtifact, content: Bytes) -> Result<StoredArtifact, ApiError> {
        if content.len() as u64 > self.config.max_bytes {
            return Err(ApiError::invalid(
                "content",
                format!("larger than the limit of {} bytes", self.config.max_bytes),
            ));
        }
        self.store(header, futures::stream::once(async move { Ok(content) }).boxed())
            .await
    }

    async fn upload(&self, header: NewArtifact, content: ContentStream) -> Result<StoredArtifact, ApiError> {
        self.store(header, content).await
    }

    async fn get(
        &self,
        scope: Scope,
        artifact_id: String,
        language: Option<Language>,
    ) -> Result<(ArtifactInfo, Compact), ApiError> {
        let record = self.owned(&scope.owner(), &artifact_id).await?;
        Ok((Self::info(&record)?, Self::compact_of(&record, language)?))
    }

    async fn read(&self, request: ReadRequest) -> Result<ReadResult, ApiError> {
        let max_bytes = request.max_bytes.unwrap_or(DEFAULT_READ_BYTES).clamp(1, MAX_READ_BYTES);
        let record = self.owned(&request.scope.owner(), &request.artifact_id).await?;
        let kind = ArtifactKind::parse(&record.kind).unwrap_or(ArtifactKind::Text);
        let language: Language = record.language.parse().unwrap_or(Language::En);
        let field = request.locator.field();
        if !kind.is_text() && !matches!(request.locator, Locator::Bytes { .. }) {
            return Err(ApiError::invalid(
                field,
                "the artifact is binary content: read it with a byte range",
            ));
        }
        let result = match &request.locator {
            Locator::Lines { start, end } => {
                if *start == 0 || end.is_some_and(|end| end < *start) {
                    return Err(ApiError::invalid("lines", "malformed or reversed range"));
                }
                let content = self.indexed(&record).await?;
                locator::read_lines(&content, *start, *end, max_bytes, language)
            }
            Locator::JsonPath(path) => {
                let path = locator::parse_json_path(path)?;
                let limit = self.config.json_path_max_bytes;
                if record.size_bytes > limit {
                    return Err(ApiError::invalid(
                        "json_path",
                        format!(
                            "the artifact is {} bytes, over artifact.json_path_max_bytes ({limit}) a JSONPath read parses; \
                             read it with lines, bytes or search",
                            record.size_bytes
                        ),
                    ));
                }
                // The parsed tree takes many times the document's size: its bytes are reserved
                // before the content is even loaded, and held until the read ends.
                let reserved = self.parsing.reserve("json_path", record.size_bytes as usize).await?;
                let content = self.indexed(&record).await?;
                let bytes = content.bytes.clone();
                thinkus_common::work::cpu("json_path", move || {
                    let _reserved = reserved;
                    locator::read_json_path(&bytes, &path, max_bytes, language)
                })
                .await??
            }
            Locator::Search(keyword) => {
                let keyword = locator::check_keyword(keyword)?;
                let content = self.indexed(&record).await?;
                thinkus_common::work::cpu("search", move || {
                    locator::search(&content, &keyword, max_bytes, language)
                })
                .await?
            }
            Locator::Bytes { start, end } => {
                if end.is_some_and(|end| end <= *start) {
                    return Err(ApiError::invalid("bytes", "reversed or empty range"));
                }
                return self
                    .read_byte_range(&record, *start, *end, max_bytes, kind.is_text(), language)
                    .await;
            }
        };
        Ok(ReadResult {
            total_lines: record.line_count,
            total_bytes: record.size_bytes,
            ..result
        })
    }

    async fn download(&self, scope: Scope, artifact_id: String) -> Result<ContentStream, ApiError> {
        let record = self.owned(&scope.owner(), &artifact_id).await?;
        let stream = self
            .blobs
            .get_stream(&record.blob_key, self.config.chunk_bytes)
            .await
            .map_err(blob_failure)?;
        Ok(stream.map(|item| item.map_err(blob_failure)).boxed())
    }

    async fn list(&self, request: ListRequest) -> Result<Vec<(ArtifactInfo, Compact)>, ApiError> {
        let records = self
            .store
            .list_artifacts(
                &request.scope.owner(),
                request.scope.session_id.as_deref(),
                request.scope.project_id.as_deref(),
                request.limit,
                request.offset,
            )
            .await?;
        Self::listed(records.iter())
    }

    async fn list_near(&self, scope: Scope, limit: usize) -> Result<Vec<(ArtifactInfo, Compact)>, ApiError> {
        let (Some(session), Some(project)) = (&scope.session_id, &scope.project_id) else {
            return self
                .list(ListRequest {
                    scope,
                    limit,
                    offset: 0,
                })
                .await;
        };
        let records = self
            .store
            .list_artifacts_near(&scope.owner(), session, project, limit)
            .await?;
        // The session's first (newest first, as read), then the rest of the project's.
        let (mut near, others): (Vec<_>, Vec<_>) = records.iter().partition(|record| record.session_id == *session);
        near.extend(others);
        Self::listed(near.into_iter())
    }

    async fn delete(&self, scope: Scope, artifact_id: String) -> Result<(), ApiError> {
        let record = self.owned(&scope.owner(), &artifact_id).await?;
        match self.remove(&scope.owner(), &artifact_id, &record.blob_key).await? {
            Some(_) => Ok(()),
            None => Err(ApiError::not_found("artifact", &artifact_id)),
        }
    }

    async fn purge_expired(&self, owner: Option<Owner>, now: Option<DateTime<Utc>>) -> Result<PurgeResult, ApiError> {
        let now = now.unwrap_or_else(Utc::now);
        let mut result = PurgeResult::default();
        loop {
            let batch = self.store.expired_artifacts(now, owner.as_ref(), PURGE_BATCH).await?;
            let full = batch.len() == PURGE_BATCH;
            let mut progressed = false;
            for record in batch {
                if let Some(blob_removed) = self.remove(&record.owner(), &record.id, &record.blob_key).await? {
                    progressed = true;
                    result.removed += 1;
                    result.blobs_removed += u64::from(blob_removed);
                }
            }
            if !full || !progressed {
                return Ok(result);
            }
        }
    }
}

/// Contents up to this size have their tokens counted for the compact's cap (a few ms at most).
const EXACT_COUNT_BYTES: u64 = 64 * 1024;
/// The fewest tokens a compact is cut to: the reference, the size and the locators with their
/// examples, and a line of summary.
const MIN_COMPACT_TOKENS: usize = 200;

/// The most tokens the compact of a content of `content_tokens` may take: the configured cap,
/// and for a content over 2,000 tokens a tenth of it (never under [`MIN_COMPACT_TOKENS`]), so
/// that a compact saves at least 90% of a large output however near 2,000 tokens it is.
pub fn compact_cap(configured: usize, content_tokens: usize) -> usize {
    if content_tokens <= 2_000 {
        return configured;
    }
    configured.min((content_tokens / 10).max(MIN_COMPACT_TOKENS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compact_costs_at_most_a_tenth_of_a_large_output() {
        assert_eq!(compact_cap(480, 500), 480, "small outputs keep the configured cap");
        assert_eq!(compact_cap(480, 2_000), 480);
        assert_eq!(compact_cap(480, 2_100), 210);
        assert_eq!(compact_cap(480, 1_500_000), 480);
        assert_eq!(compact_cap(150, 3_000), 150, "the configured cap still bounds it");
        assert!(compact_cap(480, 2_001) >= MIN_COMPACT_TOKENS);
    }

    #[test]
    fn a_record_that_cannot_be_read_names_its_column() {
        let record = ArtifactRecord {
            id: "art_1".into(),
            tenant_id: "t".into(),
            user_id: "u".into(),
            role_id: Some("cto".into()),
            project_id: None,
            session_id: "s".into(),
            tool_call_id: None,
            tool_name: None,
            mime_type: "application/json".into(),
            size_bytes: 2,
            sha256: String::new(),
            blob_key: "k".into(),
            path: None,
            line_count: 1,
            kind: "json".into(),
            language: "zh".into(),
            compact: "{}".into(),
            metadata: r#"{"source":"ci"}"#.into(),
            created_at: Utc::now(),
            expires_at: None,
        };
        let info = ArtifactService::info(&record).expect("a sound record reads");
        assert_eq!((info.kind, info.language), (ArtifactKind::Json, Language::Zh));
        assert_eq!(info.metadata.get("source").map(String::as_str), Some("ci"));
        for (column, corrupt) in [
            (
                "kind",
                ArtifactRecord {
                    kind: "spreadsheet".into(),
                    ..record.clone()
                },
            ),
            (
                "language",
                ArtifactRecord {
                    language: "klingon".into(),
                    ..record.clone()
                },
            ),
            (
                "metadata",
                ArtifactRecord {
                    metadata: "{not json".into(),
                    ..record.clone()
                },
            ),
        ] {
            let err = ArtifactService::info(&corrupt).expect_err(column);
            let message = err.to_string();
            assert!(
                message.contains("art_1") && message.contains(&format!("column {column}")),
                "{column}: {message}"
            );
        }
    }

    #[test]
    fn utf8_is_checked_across_chunk_boundaries() {
        let text = "日本語 and English";
        for cut in 0..text.len() {
            let mut check = Utf8Check::default();
            check.feed(&text.as_bytes()[..cut]);
            check.feed(&text.as_bytes()[cut..]);
            assert!(check.is_valid(), "cut at {cut}");
        }
        let mut check = Utf8Check::default();
        check.feed(&[0xE6, 0x97]);
        assert!(!check.is_valid(), "a character cut at the end is not valid");
        let mut check = Utf8Check::default();
        check.feed(&[b'a', 0xFF, b'b']);
        assert!(!check.is_valid());
    }

    #[test]
    fn ingest_counts_lines_and_keeps_the_head() {
        let mut ingest = Ingest::new(4);
        ingest.feed(b"ab\ncd");
        ingest.feed(b"\nef");
        assert_eq!(ingest.line_count(), 3);
        assert_eq!(ingest.head, b"ab\nc");
        assert_eq!(ingest.size, 8);
        assert!(ingest.is_text());
        let mut ingest = Ingest::new(4);
        ingest.feed(b"x\n");
        assert_eq!(ingest.line_count(), 1);
    }

    #[test]
    fn blob_keys_are_valid_per_owner_and_hash() {
        let owner = Owner::new(DEFAULT_TENANT, "用户 with spaces/..");
        let key = blob_key(&owner, &hex_sha256(b"x"));
        assert!(thinkus_backends::blob::check_key(&key).is_ok(), "{key}");
        assert_eq!(
            key,
            format!(
                "artifacts/{}/{}",
                hex_sha256(owner.user_id.as_bytes()),
                hex_sha256(b"x")
            ),
            "the default tenant keeps the keys written before tenancy"
        );
        assert_ne!(key, blob_key(&Owner::new(DEFAULT_TENANT, "other"), &hex_sha256(b"x")));
        let twin = Owner::new("acme", owner.user_id.clone());
        assert_ne!(
            key,
            blob_key(&twin, &hex_sha256(b"x")),
            "the same user id in another tenant"
        );
        assert!(thinkus_backends::blob::check_key(&blob_key(&twin, &hex_sha256(b"x"))).is_ok());
    }
}
