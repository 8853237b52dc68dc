//! Raw conversation turns: stored as said, embedded in batches, recallable at once.

use std::collections::HashMap;

use chrono::Utc;
use thinkus_backends::filter::MemoryFilter;
use thinkus_backends::sql::{Change, ChangeKind, MemoryOrder, MemoryQuery, WriteBatch};
use thinkus_backends::vector::{Bm25Encoder, SparseVector};
use thinkus_common::ApiError;
use thinkus_common::ids::{IdKind, new_id};
use thinkus_common::model::{Language, Memory, MemoryType};
use thinkus_common::text::{char_count, detect_language};
use tracing::Instrument;

use crate::api::{IngestResult, IngestTurnsRequest, Turn};
use crate::service::{KnowledgeManager, actor_of};
use crate::subject;

fn validate(turns: &[Turn], max_chars: usize) -> Result<(), ApiError> {
    if turns.is_empty() || turns.len() > 1000 {
        return Err(ApiError::invalid("turns", "must hold 1-1000 turns"));
    }
    for (i, turn) in turns.iter().enumerate() {
        let field = format!("turns[{i}]");
        if turn.speaker.trim().is_empty() {
            return Err(ApiError::invalid(&format!("{field}.speaker"), "is required"));
        }
        if char_count(&turn.speaker) > 128 {
            return Err(ApiError::invalid(
                &format!("{field}.speaker"),
                "longer than 128 characters",
            ));
        }
        let caption = turn.caption.as_deref().unwrap_or("");
        if turn.text.trim().is_empty() && caption.trim().is_empty() {
            return Err(ApiError::invalid(
                &format!("{field}.text"),
                "is empty (and there is no caption)",
            ));
        }
        if char_count(&turn.text) + char_count(caption) > max_chars {
            return Err(ApiError::invalid(
                &format!("{field}.text"),
                format!("longer than {max_chars} characters"),
            ));
        }
        if let Some(id) = &turn.external_id
            && char_count(id) > 128
        {
            return Err(ApiError::invalid(
                &format!("{field}.external_id"),
                "longer than 128 characters",
            ));
        }
    }
    Ok(())
}

/// What a turn says, with the image it shares described in the speaker's language.
fn content_of(turn: &Turn) -> String {
    let text = turn.text.trim();
    match turn.caption.as_deref().map(str::trim).filter(|c| !c.is_empty()) {
        None => text.to_string(),
        Some(caption) => {
            let language = detect_language(if text.is_empty() { caption } else { text });
            let shared = match language {
                Language::Zh => format!("[分享了一张图片：{caption}]"),
                Language::En => format!("[shares a photo: {caption}]"),
            };
            if text.is_empty() {
                shared
            } else {
                format!("{text} {shared}")
            }
        }
    }
}

/// How much the line of the turn before counts in a turn's BM25 vector, against 1 for the
/// turn itself (BM25F field weights). The line is there for replies that mean nothing alone
/// ("Yes, last Tuesday!"), but at full weight a question's words rank its answer as high as
/// the question itself, and the answer's own words were drowned in its predecessor's. A
/// quarter: LoCoMo development half R@10 0.794 -> 0.806 with the retriever's defaults, 0 to
/// 0.25 alike, 0.5 and more worse (docs/retrieval.md). Changing it means rebuilding the index.
pub(crate) const CONTEXT_WEIGHT: f32 = 0.25;

/// When the turn was said, in its language: "(8 May 2023) ". The date lets "what did she buy
/// in March 2023" meet the turns of that month.
fn date_label(memory: &Memory) -> String {
    match memory.language {
        Language::Zh => memory.occurred_at.format("(%Y年%-m月%-d日) ").to_string(),
        Language::En => memory.occurred_at.format("(%-d %B %Y) ").to_string(),
    }
}

/// Who said what: "Caroline: what was said". The speaker lets "what did Caroline say" meet
/// her turns.
fn said(memory: &Memory) -> String {
    match memory.speaker.as_deref().filter(|s| !s.is_empty()) {
        Some(speaker) => format!("{speaker}: {}", memory.content),
        None => memory.content.clone(),
    }
}

/// The text a turn is embedded with: "(8 May 2023) Previous: ...\nSpeaker: what was said".
/// Measured on LoCoMo: docs/retrieval.md.
pub(crate) fn index_text(memory: &Memory) -> String {
    let mut text = date_label(memory);
    if !memory.context.is_empty() {
        text.push_str(&memory.context);
        text.push('\n');
    }
    text.push_str(&said(memory));
    text
}

/// A turn's BM25 vector: the words of [`index_text`], those of the turn before weighing
/// [`CONTEXT_WEIGHT`].
pub(crate) fn sparse_vector(encoder: &Bm25Encoder, memory: &Memory) -> SparseVector {
    let own = format!("{}{}", date_label(memory), said(memory));
    encoder.document_fields(&[(&own, 1.0), (&memory.context, CONTEXT_WEIGHT)])
}

/// Stores turns; a repeated external id returns the stored turn instead.
pub(crate) async fn ingest(km: &KnowledgeManager, request: IngestTurnsRequest) -> Result<IngestResult, ApiError> {
    validate(&request.turns, km.config.max_turn_chars)?;
    let scope = &request.scope;
    let external: Vec<String> = request.turns.iter().filter_map(|t| t.external_id.clone()).collect();
    let mut known: HashMap<String, String> = km
        .store
        .find_external(&scope.owner(), &external)
        .await?
        .into_iter()
        .collect();

    // The turn before the first new one, for the first turn's context.
    let mut previous: Option<Memory> = match &scope.session_id {
        Some(session) => km
            .store
            .list_memories(&MemoryQuery {
                order: MemoryOrder::Newest,
                limit: 1,
                ..MemoryQuery::of(MemoryFilter {
                    types: vec![MemoryType::ConversationTurn],
                    session_id: Some(session.clone()),
                    ..MemoryFilter::any_status(&scope.owner())
                })
            })
            .await?
            .pop(),
        None => None,
    };

    let now = Utc::now();
    let mut ids = Vec::with_capacity(request.turns.len());
    let mut fresh: Vec<Memory> = Vec::new();
    for turn in &request.turns {
        if let Some(id) = turn.external_id.as_ref().and_then(|e| known.get(e)) {
            ids.push(id.clone());
            continue;
        }
        let content = content_of(turn);
        let occurred_at = turn.occurred_at.unwrap_or(now);
        // What the turn states a value of ("the budget is $500"): a later fact with another
        // value replaces the turn as it replaces an older fact.
        let subject = subject::detect(&content).map(str::to_string);
        let mut memory = Memory::conversation_turn(
            scope.clone(),
            &turn.speaker,
            content,
            previous.as_ref().map(Memory::turn_line).unwrap_or_default(),
            occurred_at,
            now,
        );
        memory.visibility = request.visibility;
        memory.subject = subject;
        memory.external_id = turn.external_id.clone();
        if let Some(external_id) = &turn.external_id {
            known.insert(external_id.clone(), memory.id.clone());
        }
        ids.push(memory.id.clone());
        previous = Some(memory.clone());
        fresh.push(memory);
    }

    let texts: Vec<String> = fresh.iter().map(KnowledgeManager::index_text).collect();
    let mut vectors = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(64) {
        vectors.extend(
            km.embedder
                .embed_passages(chunk)
                .instrument(tracing::info_span!("embed.passages", count = chunk.len()))
                .await?,
        );
    }
    if !fresh.is_empty() {
        let batch = WriteBatch {
            changes: fresh
                .iter()
                .map(|m| Change {
                    id: new_id(IdKind::Change),
                    tenant_id: scope.tenant_id.clone(),
                    user_id: scope.user_id.clone(),
                    memory_id: m.id.clone(),
                    kind: ChangeKind::Create,
                    actor: actor_of(scope),
                    reason: "conversation turn".into(),
                    before: None,
                    after: None,
                    at: now,
                })
                .collect(),
            inserts: fresh.clone(),
            ..Default::default()
        };
        km.store.commit(batch).await?;
        let points = fresh
            .iter()
            .zip(vectors)
            .map(|(memory, dense)| km.point(memory, dense))
            .collect();
        km.index(points, Vec::new(), Vec::new()).await;
    }
    Ok(IngestResult {
        memory_ids: ids,
        created: fresh.len() as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captions_are_described_in_the_speakers_language() {
        let turn = |text: &str, caption: Option<&str>| Turn {
            speaker: "Caroline".into(),
            text: text.into(),
            occurred_at: None,
            external_id: None,
            caption: caption.map(str::to_string),
        };
        assert_eq!(
            content_of(&turn("Look at this!", Some("a dog on a beach"))),
            "Look at this! [shares a photo: a dog on a beach]"
        );
        assert_eq!(
            content_of(&turn("看这个", Some("海边的狗"))),
            "看这个 [分享了一张图片：海边的狗]"
        );
        assert_eq!(content_of(&turn("plain", None)), "plain");
    }

    fn stored(speaker: &str, content: &str, context: &str) -> Memory {
        let at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2023, 5, 8, 13, 56, 0).unwrap();
        let scope = thinkus_common::model::Scope::new("u1", "assistant").with_session("s1");
        Memory::conversation_turn(scope, speaker, content.into(), context.into(), at, at)
    }

    #[test]
    fn index_text_has_date_context_and_speaker() {
        let reply = stored(
            "Caroline",
            "Yes, last Tuesday!",
            "Melanie: Did you go to the support group?",
        );
        assert_eq!(
            index_text(&reply),
            "(8 May 2023) Melanie: Did you go to the support group?\nCaroline: Yes, last Tuesday!"
        );
        let first = stored("Caroline", "Hi Mel!", "");
        assert_eq!(index_text(&first), "(8 May 2023) Caroline: Hi Mel!");
        let zh = stored("小王", "我喜欢简约的设计风格", "");
        assert_eq!(index_text(&zh), "(2023年5月8日) 小王: 我喜欢简约的设计风格");
    }

    #[test]
    fn the_turn_before_weighs_less_in_bm25() {
        let encoder = Bm25Encoder::default();
        let query = encoder.query("support group");
        let answer = stored(
            "Caroline",
            "I went to a support group yesterday.",
            "Melanie: How was your week?",
        );
        let reply = stored(
            "Melanie",
            "That's great!",
            "Caroline: I went to a support group yesterday.",
        );
        let (answer, reply) = (sparse_vector(&encoder, &answer), sparse_vector(&encoder, &reply));
        assert!(reply.dot(&query) > 0.0, "a reply still meets its question's words");
        assert!(answer.dot(&query) > 1.5 * reply.dot(&query));
    }

    #[test]
    fn bad_turns_name_the_field() {
        let bad = vec![Turn {
            speaker: "".into(),
            text: "hi".into(),
            occurred_at: None,
            external_id: None,
            caption: None,
        }];
        assert_eq!(
            validate(&bad, 100).unwrap_err().message,
            "turns[0].speaker: is required"
        );
        assert!(validate(&[], 100).is_err());
    }
}
