//! How a memory is indexed: the text it is embedded with and its BM25 vector. A conversation
//! turn carries its date, its speaker and the line before it; every other memory its own index
//! text (`Memory::index_text`). Changing either means rebuilding the index.

use thinkus_backends::vector::{Bm25Encoder, SparseVector};
use thinkus_common::model::{Language, Memory, MemoryType};

/// The text embedded and indexed for a memory.
pub(crate) fn index_text(memory: &Memory) -> String {
    if memory.memory_type == MemoryType::ConversationTurn {
        return turn_text(memory);
    }
    memory.index_text()
}

/// The BM25 vector indexed for a memory.
pub(crate) fn sparse_vector(encoder: &Bm25Encoder, memory: &Memory) -> SparseVector {
    if memory.memory_type == MemoryType::ConversationTurn {
        turn_sparse_vector(encoder, memory)
    } else {
        encoder.document(&index_text(memory))
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
///
/// A Chinese turn is embedded without its date (its BM25 vector keeps it, for "三月份"
/// questions): every turn of a session shares the date, and written in ideographs and digits
/// it is a larger share of a short Chinese turn than "(8 May 2023)" is of an English one, so
/// it pulled the turns of a session towards each other rather than towards what they say. On
/// the Chinese development conversations the embedding alone found 0.750 of the evidence in
/// its top 10 with the date and 0.769 without; on English LoCoMo the date helps a little
/// (docs/retrieval.md).
fn turn_text(memory: &Memory) -> String {
    let mut text = match memory.language {
        Language::En => date_label(memory),
        Language::Zh => String::new(),
    };
    if !memory.context.is_empty() {
        text.push_str(&memory.context);
        text.push('\n');
    }
    text.push_str(&said(memory));
    text
}

/// A turn's BM25 vector: the words of [`turn_text`], those of the turn before weighing
/// [`CONTEXT_WEIGHT`].
fn turn_sparse_vector(encoder: &Bm25Encoder, memory: &Memory) -> SparseVector {
    let own = format!("{}{}", date_label(memory), said(memory));
    encoder.document_fields(&[(&own, 1.0), (&memory.context, CONTEXT_WEIGHT)])
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    fn stored(speaker: &str, content: &str, context: &str) -> Memory {
        let at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2023, 5, 8, 13, 56, 0).unwrap();
        let scope = thinkus_common::model::Scope::new("u1", "assistant").with_session("s1");
        Memory::conversation_turn(scope, speaker, content.into(), context.into(), at, at)
    }

    #[test]
    fn an_english_turn_is_embedded_with_date_context_and_speaker() {
        let reply = stored(
            "Caroline",
            "Yes, last Tuesday!",
            "Melanie: Did you go to the support group?",
        );
        assert_eq!(
            turn_text(&reply),
            "(8 May 2023) Melanie: Did you go to the support group?\nCaroline: Yes, last Tuesday!"
        );
        let first = stored("Caroline", "Hi Mel!", "");
        assert_eq!(turn_text(&first), "(8 May 2023) Caroline: Hi Mel!");
    }

    #[test]
    fn a_chinese_turn_is_embedded_without_its_date_and_searched_with_it() {
        let zh = stored("小王", "我喜欢简约的设计风格", "小李: 你喜欢什么风格？");
        assert_eq!(turn_text(&zh), "小李: 你喜欢什么风格？\n小王: 我喜欢简约的设计风格");
        let encoder = Bm25Encoder::default();
        let indexed = turn_sparse_vector(&encoder, &zh);
        assert!(
            indexed.dot(&encoder.query("2023年5月")) > 0.0,
            "the keyword index still knows the month"
        );
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
        let (answer, reply) = (
            turn_sparse_vector(&encoder, &answer),
            turn_sparse_vector(&encoder, &reply),
        );
        assert!(reply.dot(&query) > 0.0, "a reply still meets its question's words");
        assert!(answer.dot(&query) > 1.5 * reply.dot(&query));
    }
}
