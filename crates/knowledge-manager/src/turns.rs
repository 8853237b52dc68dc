//! Raw conversation turns: stored as said, embedded in batches, recallable at once.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use thinkus_backends::filter::MemoryFilter;
use thinkus_backends::sql::{Change, ChangeKind, MemoryOrder, MemoryQuery, WriteBatch};
use thinkus_backends::vector::{Layers, Reader};
use thinkus_common::ApiError;
use thinkus_common::ids::{IdKind, new_id};
use thinkus_common::model::{Language, Memory, MemoryStatus, MemoryType, Scope, Visibility};
use thinkus_common::text::{char_count, detect_language};
use tracing::Instrument;

use crate::api::{IngestResult, IngestTurnsRequest, Turn, ValueChange};
use crate::changes::{
    self, Earlier, accepted_changes, implied_changes, mentions, paired_by_words, stated_changes, statement_of,
    switched_across,
};
use crate::rules;
use crate::service::{KnowledgeManager, actor_of};
use crate::subject;

/// The tag prefix a stored turn carries for each memory learned from its exchange
/// ("extracted:mem_..."): whoever shows the memory leaves the turn out.
pub const EXTRACTED_TAG: &str = "extracted:";

/// The tag of a record that states a value change, and the prefix of the tag that holds it
/// ("changed:35万→42万"; "changed:客如云→" when the old value was only dropped).
pub const VALUE_CHANGE_TAG: &str = "value_change";
pub const CHANGED_TAG: &str = "changed:";

/// How many earlier turns a new one is read against for the values it changes.
const EARLIER_TURNS: usize = 200;

/// The memories learned from a stored turn's exchange, from its tags.
pub fn extracted_ids(tags: &[String]) -> impl Iterator<Item = &str> {
    tags.iter().filter_map(|t| t.strip_prefix(EXTRACTED_TAG))
}

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
        if turn.extracted_memory_ids.len() > 100 {
            return Err(ApiError::invalid(
                &format!("{field}.extracted_memory_ids"),
                "holds more than 100 ids",
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

/// What a user's turn asked of the reply after it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Asked {
    Nothing,
    /// A change, without (always) its new value: "上市往后推一周吧".
    Change,
    /// The proposal before it, accepted: "ok, do that".
    Accepted,
}

/// How a turn is read for the values it changes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reading {
    /// Only the changes it states outright (an assistant's turn: it may derive values at length).
    Stated,
    /// Also those it implies with a verb of change (a user's turn; a reply to a message that
    /// asked for a change).
    Implied,
    /// Also a value of a topic said without one: a reply carrying out a proposal its user just
    /// accepted.
    Accepted,
}

/// The value changes a turn states or implies against what was said before, as tags.
fn changes_in(content: &str, earlier_texts: &[String], reading: Reading) -> Vec<String> {
    let mut changes = stated_changes(content);
    if reading != Reading::Stated {
        let earlier = Earlier::new(earlier_texts.iter().map(String::as_str));
        changes.extend(if reading == Reading::Accepted {
            accepted_changes(content, &earlier)
        } else {
            implied_changes(content, &earlier)
        });
        for switch in switched_across(content, |name| was_chosen(earlier_texts, name)) {
            if !changes.contains(&switch) {
                changes.push(switch);
            }
        }
    }
    // A name dropped and replaced in one message is the switch, not a drop.
    let switched: Vec<String> = changes
        .iter()
        .filter(|c| c.new.is_some())
        .map(|c| c.old.clone())
        .collect();
    changes.retain(|c| c.new.is_some() || !switched.contains(&c.old));
    changes
        .into_iter()
        // A dropped name that no value reading recognises ("不用客如云了") counts only if it was
        // named as a choice before: "不用担心了" drops nothing.
        .filter(|c| c.new.is_some() || !mentions(&c.old).is_empty() || was_chosen(earlier_texts, &c.old))
        .map(|c| format!("{CHANGED_TAG}{}→{}", c.old, c.new.unwrap_or_default()))
        .collect()
}

/// Whether an earlier text named `name` as what is used or chosen ("倾向用客如云", "选了北森",
/// "we use Mixpanel").
fn was_chosen(earlier_texts: &[String], name: &str) -> bool {
    let Ok(chosen) = regex::Regex::new(&format!(
        r"(?i)(?:用|选|选了|定了|找|采用|换成|改成|改为|改用|迁到|迁移到|切到|倾向|使用|上|use|using|chose|choose|picked|with|via|(?:switch|migrat|mov)\w*\s+to)\s?{}",
        regex::escape(name)
    )) else {
        return false;
    };
    // "别用感叹号", "don't use Zoom": a use ruled out is not a choice.
    static NEGATED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)(?:别|不|不要|不能|没|甭|勿|don'?t\s|do\s+not\s|never\s|no\s)\s?$")
            .expect("valid regex")
    });
    earlier_texts
        .iter()
        .any(|t| chosen.find_iter(t).any(|m| !NEGATED.is_match(&t[..m.start()])))
}

/// The changes a memory's tags record ([`CHANGED_TAG`]`old→new`), as the old value and the new
/// one (none when the old value was dropped).
fn tagged_changes(memory: &Memory) -> impl Iterator<Item = (&str, Option<&str>)> {
    memory
        .tags
        .iter()
        .filter_map(|t| t.strip_prefix(CHANGED_TAG)?.split_once('→'))
        .map(|(old, new)| (old, (!new.is_empty()).then_some(new)))
}

/// How far apart a turn and a memory learned from the same message may be dated (the memory
/// takes the message's time; the reply comes after it).
const SAME_MESSAGE_SECONDS: i64 = 60;

/// The changes said in another role's turns of the reader's project that the reader may not
/// read (`hidden`: exchanges that taught that role a private memory), as the old value and the
/// day alone, and only the old values the reader has read: "push the panel a week" told to the
/// CTO strikes HR's "11 March", and a figure said to the CTO alone stays the CTO's. The new value
/// comes with it only where the reader reads it already (a memory of the project learned from
/// the same message, a record stating both values), in that record's words. The records to
/// hold the old values against are read only when there is such a change.
async fn changes_said_privately(
    km: &KnowledgeManager,
    scope: &Scope,
    reader: &Reader,
    hidden: &[Memory],
) -> Result<Vec<ValueChange>, ApiError> {
    let hidden: Vec<&Memory> = hidden
        .iter()
        .filter(|m| {
            m.memory_type == MemoryType::ConversationTurn
                && scope.project_id.is_some()
                && m.scope.project_id == scope.project_id
        })
        .collect();
    if hidden.is_empty() {
        return Ok(Vec::new());
    }
    // What the reader may read, to hold each old value against.
    let read: Vec<(String, DateTime<Utc>)> = km
        .store
        .list_memories(&MemoryQuery {
            order: MemoryOrder::Newest,
            limit: EARLIER_TURNS,
            ..MemoryQuery::of(MemoryFilter {
                reader: Some(reader.clone()),
                ..MemoryFilter::any_status(&scope.owner())
            })
        })
        .await?
        .into_iter()
        .map(|m| (m.content, m.occurred_at))
        .collect();
    let mut out = Vec::new();
    for memory in hidden {
        for (old, new) in tagged_changes(memory) {
            if !read.iter().any(|(text, _)| changes::states_value(text, old)) {
                continue;
            }
            // The new value is no secret where the reader reads it already: a memory of the
            // project learned from the same message ("砍到1.5万份", a risk the sales lead's
            // voice note taught the project while the rest of it stayed theirs), or a record
            // that states both values.
            let shared = new.and_then(|new| {
                read.iter()
                    .find(|(text, at)| {
                        changes::states_value(text, new)
                            && ((*at - memory.occurred_at).num_seconds().abs() <= SAME_MESSAGE_SECONDS
                                || changes::states_value(text, old))
                    })
                    .map(|(text, _)| (new, text))
            });
            let change = ValueChange {
                statement: String::new(),
                old: old.to_string(),
                new: None,
                at: memory.occurred_at,
                memory_id: String::new(),
                session_id: None,
            };
            out.push(match shared {
                Some((new, text)) => ValueChange {
                    statement: statement_of(text, old, Some(new)),
                    new: Some(new.to_string()),
                    ..change
                },
                None => change.old_value_only(),
            });
        }
    }
    Ok(out)
}

/// The value changes the reader of `scope` may see, newest first: those said in turns (tagged
/// when stored) and those of memories a newer memory replaced (the values of the old one that
/// the new one states otherwise).
pub(crate) async fn value_changes(
    km: &KnowledgeManager,
    scope: &Scope,
    limit: usize,
) -> Result<Vec<ValueChange>, ApiError> {
    if scope.role_id.trim().is_empty() {
        return Err(ApiError::invalid("scope.role_id", "is required"));
    }
    let reader = Reader {
        role_id: scope.role_id.clone(),
        project_id: scope.project_id.clone(),
        layers: Layers::Both,
    };
    let limit = limit.clamp(1, 1000);
    let live = vec![
        MemoryStatus::Active,
        MemoryStatus::Frozen,
        MemoryStatus::Replaced,
        MemoryStatus::Suppressed,
    ];
    let readable = MemoryFilter {
        reader: Some(reader.clone()),
        ..MemoryFilter::any_status(&scope.owner())
    };
    // The memories that state a change, whoever may read them, in one statement: those the
    // reader may not read are kept for [`changes_said_privately`]. Room for as many again of
    // those, so that other roles' changes seldom crowd out the reader's own.
    let (mut stated, hidden): (Vec<Memory>, Vec<Memory>) = km
        .store
        .list_memories(&MemoryQuery {
            order: MemoryOrder::Newest,
            limit: (2 * limit).min(1000),
            ..MemoryQuery::of(MemoryFilter {
                statuses: live,
                tags: vec![VALUE_CHANGE_TAG.to_string()],
                ..MemoryFilter::user(&scope.owner())
            })
        })
        .await?
        .into_iter()
        .partition(|m| readable.matches_memory(m));
    stated.truncate(limit);
    let mut out: Vec<ValueChange> = Vec::new();
    for memory in &stated {
        for (old, new) in tagged_changes(memory) {
            out.push(ValueChange {
                statement: statement_of(&memory.content, old, new),
                old: old.to_string(),
                new: new.map(str::to_string),
                at: memory.occurred_at,
                memory_id: memory.id.clone(),
                session_id: memory.scope.session_id.clone(),
            });
        }
    }
    // The replaced memories and what replaced them, in one statement.
    let (replaced, successors) = km
        .store
        .list_memories_and_successors(&MemoryQuery {
            order: MemoryOrder::Newest,
            limit,
            ..MemoryQuery::of(MemoryFilter {
                reader: Some(reader.clone()),
                statuses: vec![MemoryStatus::Replaced],
                ..MemoryFilter::user(&scope.owner())
            })
        })
        .await?;
    out.extend(changes_said_privately(km, scope, &reader, &hidden).await?);
    let successors: HashMap<String, Memory> = successors.into_iter().map(|m| (m.id.clone(), m)).collect();
    for old in &replaced {
        let Some(new) = old.superseded_by.as_ref().and_then(|id| successors.get(id)) else {
            continue;
        };
        // A value said before the one it replaced (learned out of order) is no change of
        // value: what was said last stands, and the earlier one is not shown as its successor.
        if new.occurred_at < old.occurred_at {
            continue;
        }
        let at = new.occurred_at.max(old.occurred_at);
        // A memory the reader may read, replaced by one it may not (another role's private
        // memory of the same subject): its value changed, and what it became is that role's.
        let withheld = !readable.matches_memory(new);
        out.extend(replaced_values(&old.content, &new.content).into_iter().map(|(o, n)| {
            let change = ValueChange {
                statement: statement_of(&new.content, &o, n.as_deref()),
                old: o,
                new: n,
                at,
                memory_id: new.id.clone(),
                session_id: new.scope.session_id.clone(),
            };
            if withheld { change.old_value_only() } else { change }
        }));
    }
    out.sort_by_key(|c| std::cmp::Reverse(c.at));
    let mut seen = std::collections::HashSet::new();
    out.retain(|c| seen.insert((c.old.clone(), c.new.clone())));
    out.truncate(limit);
    Ok(out)
}

/// The values of `old` that `new` states otherwise: for each kind of value `new` states, the
/// old one it does not repeat, paired with the new one when there is exactly one of each. When
/// several old values of a kind are not repeated, the words around them say which new value
/// replaced which ([`paired_by_words`]: "launch 19 Nov, emails 18 Nov" and "launch 23 Nov,
/// emails 22 Nov"); those they cannot pair are not marked (a long analysis replaced by another
/// names many things once).
fn replaced_values(old: &str, new: &str) -> Vec<(String, Option<String>)> {
    let old_values = mentions(old);
    let new_values = mentions(new);
    let mut out = Vec::new();
    for kind in new_values
        .iter()
        .map(|m| m.kind)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let gone: Vec<_> = old_values
            .iter()
            .filter(|o| o.kind == kind && !new_values.iter().any(|n| n.same_value(o)))
            .collect();
        let came: Vec<_> = new_values
            .iter()
            .filter(|n| n.kind == kind && !old_values.iter().any(|o| o.same_value(n)))
            .collect();
        match (gone.as_slice(), came.as_slice()) {
            (_, []) => {}
            ([o], [n]) => out.push((o.raw.clone(), Some(n.raw.clone()))),
            ([o], _) => out.push((o.raw.clone(), None)),
            _ => {
                let gone: Vec<&str> = gone.iter().map(|m| m.raw.as_str()).collect();
                let came: Vec<&str> = came.iter().map(|m| m.raw.as_str()).collect();
                out.extend(
                    paired_by_words(old, &gone, new, &came)
                        .into_iter()
                        .map(|(o, n)| (o, Some(n))),
                );
            }
        }
    }
    out
}

/// The line of the turn before, stored as a turn's context and shown with it, when whoever may
/// read the turn may read that one too; none otherwise. A turn private to its role (its exchange
/// taught something private) is no context for the next turn shared with the project: the other
/// roles would read under it what the user told that role alone.
fn context_from(before: &Memory, scope: &Scope, visibility: Visibility) -> String {
    let same_readers = before.scope.project_id == scope.project_id
        && (before.visibility != Visibility::Private || before.scope.role_id == scope.role_id);
    if same_readers && before.visibility.reach() >= visibility.reach() {
        before.turn_line()
    } else {
        String::new()
    }
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

    // What was said before in the reader's part of the conversation (the project's, or the
    // role's own outside projects), newest first: a turn that changes a value said there marks it.
    let mut earlier_texts: Vec<String> = km
        .store
        .list_memories(&MemoryQuery {
            order: MemoryOrder::Newest,
            limit: EARLIER_TURNS,
            ..MemoryQuery::of(MemoryFilter {
                reader: Some(Reader {
                    role_id: scope.role_id.clone(),
                    project_id: scope.project_id.clone(),
                    layers: if scope.project_id.is_some() {
                        Layers::Project
                    } else {
                        Layers::CrossProject
                    },
                }),
                types: vec![MemoryType::ConversationTurn],
                ..MemoryFilter::any_status(&scope.owner())
            })
        })
        .await?
        .into_iter()
        .map(|m| m.content)
        .collect();

    let now = Utc::now();
    let mut ids = Vec::with_capacity(request.turns.len());
    let mut fresh: Vec<Memory> = Vec::new();
    // What the last user turn asked of the reply after it.
    let mut asked = Asked::Nothing;
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
            previous
                .as_ref()
                .map(|before| context_from(before, scope, request.visibility))
                .unwrap_or_default(),
            occurred_at,
            now,
        );
        memory.visibility = request.visibility;
        memory.subject = subject;
        memory.external_id = turn.external_id.clone();
        memory.tags = turn
            .extracted_memory_ids
            .iter()
            .map(|id| format!("{EXTRACTED_TAG}{id}"))
            .collect();
        // What an assistant says it may derive at length (tables, estimates): its turns are read
        // for changes it states outright only, unless it answers a message that asked for a
        // change or accepted its proposal ("上市往后推一周吧" … "改到4月16日"; "ok, do that" …
        // "Done: the plan is now 4 vans").
        let reading = match (turn.speaker != "assistant", asked) {
            (true, _) => Reading::Implied,
            (false, Asked::Change) => Reading::Implied,
            (false, Asked::Accepted) => Reading::Accepted,
            (false, Asked::Nothing) => Reading::Stated,
        };
        // A reply to a message that asked for a change reads it against what was said before
        // that message: the value the message states is the one it asked for ("这个又变了…最后定
        // 55元" … "好，首发价改为55元" changes the "49元" said before), not a value said before.
        // A reply carrying out an accepted proposal, against what was said before the proposal:
        // its figures ("调整后小红书9万") are what was accepted.
        let before = match (turn.speaker != "assistant", reading) {
            (false, Reading::Implied) => earlier_texts.get(1..).unwrap_or_default(),
            (false, Reading::Accepted) => earlier_texts.get(2..).unwrap_or_default(),
            _ => &earlier_texts[..],
        };
        let changes = changes_in(&memory.content, before, reading);
        asked = match turn.speaker != "assistant" {
            true if rules::opens_with_confirmation(&memory.content) => Asked::Accepted,
            true if changes::asks_for_a_change(&memory.content) => Asked::Change,
            _ => Asked::Nothing,
        };
        if !changes.is_empty() {
            memory.tags.push(VALUE_CHANGE_TAG.to_string());
            memory.tags.extend(changes);
        }
        earlier_texts.insert(0, memory.content.clone());
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
        // In the user's critical section: an erasure runs before (then a job's turns are
        // refused) or after the commit and the index (then it removes them with the rest).
        let _user = km.lock_user(&scope.owner()).await?;
        km.check_job(&scope.owner(), &request.job_id).await?;
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
    fn a_turn_shows_no_line_its_readers_may_not_read() {
        let cto = Scope::new("mei", "cto").with_project("shop").with_session("s1");
        let turn = |visibility: Visibility| {
            let mut memory = Memory::conversation_turn(
                cto.clone(),
                "assistant",
                "好的，我会用中文回复。".into(),
                String::new(),
                Utc::now(),
                Utc::now(),
            );
            memory.visibility = visibility;
            memory
        };
        let line = turn(Visibility::Private).turn_line();
        // What the user told the cto alone is no context for a turn the project reads...
        assert_eq!(context_from(&turn(Visibility::Private), &cto, Visibility::Project), "");
        assert_eq!(context_from(&turn(Visibility::Project), &cto, Visibility::Global), "");
        // ...nor for another role's private turn, nor in another project.
        let cfo = Scope::new("mei", "cfo").with_project("shop").with_session("s1");
        assert_eq!(context_from(&turn(Visibility::Private), &cfo, Visibility::Private), "");
        let elsewhere = Scope::new("mei", "cto").with_project("cafe").with_session("s1");
        assert_eq!(
            context_from(&turn(Visibility::Project), &elsewhere, Visibility::Project),
            ""
        );
        // The same readers or fewer: the line before is the turn's context.
        assert_eq!(
            context_from(&turn(Visibility::Private), &cto, Visibility::Private),
            line
        );
        assert_eq!(
            context_from(&turn(Visibility::Project), &cto, Visibility::Project),
            line
        );
        assert_eq!(
            context_from(&turn(Visibility::Project), &cto, Visibility::Private),
            line
        );
    }

    #[test]
    fn a_rule_of_style_is_no_choice_and_drops_nothing() {
        let said = vec!["谢谢🙏 还有，你以后写文案别用感叹号，也别喊“家人们”。".to_string()];
        assert!(!was_chosen(&said, "感叹号"), "a use ruled out is not a choice");
        assert!(was_chosen(&["包装还是用鑫彩印务".to_string()], "鑫彩印务"));
        assert!(!was_chosen(
            &["Please don't use Zoom for client calls.".to_string()],
            "Zoom"
        ));
        assert!(
            changes_in(
                "好，记住了：文案不用感叹号，不用“家人们”这类称呼，语气安静、靠谱。",
                &said,
                Reading::Implied
            )
            .is_empty()
        );
        // A switch between names in ideographs, the old one named as engaged before.
        let said = vec!["包装还是找鑫彩印务，老合作了。".to_string()];
        assert_eq!(
            changes_in(
                "那就换合众，鑫彩那边我去说。上市时间的事我下周一跟CMO聊",
                &said,
                Reading::Implied
            ),
            vec![format!("{CHANGED_TAG}鑫彩→合众")]
        );
        let said = vec!["收银系统用客如云。".to_string()];
        assert_eq!(
            changes_in("客如云太贵，不用客如云了。", &said, Reading::Implied),
            vec![format!("{CHANGED_TAG}客如云→")]
        );
    }

    #[test]
    fn a_switch_leaves_the_choice_named_in_another_sentence() {
        let earlier = |texts: &[&str]| texts.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        let said = earlier(&[
            "订单库要迁了。我倾向迁到 TiDB，以后 horizontal scale 省心。",
            "TiDB 生产集群最小规模一般是 3 个 PD + 2 个 TiDB + 3 个 TiKV，再加监控。",
        ]);
        assert_eq!(
            changes_in(
                "订单库迁移的事改主意了。TiDB 我周末算了下，最小集群 3 PD + 2 TiDB + 3 TiKV，每月要 $3,800 左右。改成 PostgreSQL 16，用 RDS，团队之前都用过。",
                &said,
                Reading::Implied
            ),
            vec![format!("{CHANGED_TAG}TiDB→PostgreSQL 16")]
        );
        let said = earlier(&["We use Mixpanel for product analytics."]);
        assert_eq!(
            changes_in(
                "Mixpanel got too pricey for us. We're switching to PostHog next month.",
                &said,
                Reading::Implied
            ),
            vec![format!("{CHANGED_TAG}Mixpanel→PostHog")]
        );
        // Two earlier choices in the message: nothing says which one the switch leaves.
        let said = earlier(&["We use Mixpanel for analytics.", "We use Segment to collect events."]);
        assert!(
            changes_in(
                "Mixpanel and Segment both renew in May. Switching to PostHog.",
                &said,
                Reading::Implied
            )
            .is_empty()
        );
        // A name only mentioned before, never chosen, is not what a switch leaves.
        let said = earlier(&["Someone mentioned Amplitude at the meetup."]);
        assert!(
            changes_in(
                "Amplitude has a free tier. Switching to PostHog.",
                &said,
                Reading::Implied
            )
            .is_empty()
        );
    }

    #[test]
    fn a_replaced_record_marks_only_the_values_it_changed() {
        // One value of a kind gone and one come: a change from the one to the other.
        assert_eq!(
            replaced_values("预算每月 $3,000 以内", "预算放宽到每月 $4,200"),
            vec![("$3,000".to_string(), Some("$4,200".to_string()))]
        );
        // One gone and two come: gone, its successor not known.
        assert_eq!(
            replaced_values("We use Vue for the front end", "We use React with Redux now"),
            vec![("Vue".to_string(), None)]
        );
        // A long analysis replaced by another names many things once: none of them is marked.
        assert_eq!(
            replaced_values(
                "Slowest: orders by Shopify, Stripe payouts and Zendesk tickets, via Airflow",
                "SQL compatibility: GROUP_CONCAT and INSERT IGNORE need rewriting for PostgreSQL"
            ),
            Vec::<(String, Option<String>)>::new()
        );
        // Several values of a kind changed: the words around each say which replaced which,
        // in either language; a value whose words name no one new value is not marked.
        assert_eq!(
            replaced_values(
                "Launch Thursday 19 November, early-bird emails go out 18 November.",
                "Launch moves to Monday 23 November, early-bird emails to 22 November."
            ),
            vec![
                ("19 November".to_string(), Some("23 November".to_string())),
                ("18 November".to_string(), Some("22 November".to_string())),
            ]
        );
        assert_eq!(
            replaced_values(
                "开业定在12月8日，试营业12月5日。",
                "开业改到12月20日，试营业改到12月17日。"
            ),
            vec![
                ("12月8日".to_string(), Some("12月20日".to_string())),
                ("12月5日".to_string(), Some("12月17日".to_string())),
            ]
        );
        assert_eq!(
            replaced_values(
                "Paid social £6,000 and influencers £1,200.",
                "Paid social £9,500, influencers £1,500."
            ),
            vec![
                ("£6,000".to_string(), Some("£9,500".to_string())),
                ("£1,200".to_string(), Some("£1,500".to_string())),
            ]
        );
        assert_eq!(
            replaced_values(
                "Pricing: Pro is $49/mo per location. Starter stays $19.",
                "Mixpanel changed their pricing and our bill jumped to $1,100/mo."
            ),
            Vec::<(String, Option<String>)>::new()
        );
        // Values the new record repeats are not changes.
        assert_eq!(
            replaced_values("Launch Oct 15 on Vercel", "Launch Oct 15 on Vercel, budget $800"),
            Vec::<(String, Option<String>)>::new()
        );
    }

    #[test]
    fn captions_are_described_in_the_speakers_language() {
        let turn = |text: &str, caption: Option<&str>| Turn {
            speaker: "Caroline".into(),
            text: text.into(),
            occurred_at: None,
            external_id: None,
            caption: caption.map(str::to_string),
            ..Default::default()
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

    #[test]
    fn bad_turns_name_the_field() {
        let bad = vec![Turn {
            speaker: "".into(),
            text: "hi".into(),
            occurred_at: None,
            external_id: None,
            caption: None,
            ..Default::default()
        }];
        assert_eq!(
            validate(&bad, 100).unwrap_err().message,
            "turns[0].speaker: is required"
        );
        assert!(validate(&[], 100).is_err());
    }
}
