//! The built-in summary rules, registered in the rule engine for [`LlmTask::Summarize`]. They
//! answer in the JSON the LLM prompt asks for (the complete, merged summary), so both engines
//! share one parser.
//!
//! The rules read the new messages sentence by sentence. Greetings, interjections and
//! vocatives are stripped; each remaining sentence is classified by the first pattern family
//! that matches, in this order: decisions (with their reasons, who made them and how settled
//! they are), constraints, risks, open questions, completed work, next steps. A sentence
//! stating what the session is for becomes the goal when none is known yet. A short
//! confirmation ("好，就这么定了", "sounds good, let's do that") turns the other party's last
//! proposal into a decision. Artifacts are attached by reference: the session's stored
//! artifacts, and `art_…` / `ART-…` references mentioned in the text.
//!
//! Items are ranked by their family and their specificity (content words, names, numbers),
//! and the best are kept until the new items reach `max_share` of the characters read (but at
//! least `min_chars`), so a summary stays a fraction of its session. The result is merged into the previous summary:
//! near-duplicates (term Jaccard ≥ 0.6) are dropped, a newer decision on the same subject
//! replaces the older one, open questions answered by a new decision are closed, and each
//! section keeps its newest `max_items`.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use thinkus_backends::llm::{LlmError, LlmTask, RuleEngine, RuleHandler};
use thinkus_common::model::{ArtifactRef, Decision, DecisionConfidence, Language};
use thinkus_common::text::{char_count, detect_language, is_han, sentences, summarize_to, term_jaccard, terms};

use crate::api::SummaryContent;

/// Registers the summary rules.
pub fn register(engine: &RuleEngine) {
    let handler: Arc<dyn RuleHandler> = Arc::new(|input: &Value| {
        let input: RulesInput = serde_json::from_value(input.clone())
            .map_err(|err| LlmError::BadResponse(format!("summary input: {err}")))?;
        serde_json::to_string(&summarize(&input)).map_err(|err| LlmError::BadResponse(err.to_string()))
    });
    engine.register(LlmTask::Summarize, handler);
}

/// One message as the rules read it.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct RuleMessage {
    pub index: u32,
    pub role: String,
    pub speaker: Option<String>,
    pub content: String,
}

/// The rules' input: the new messages, the summary so far and the session's artifacts.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct RulesInput {
    pub messages: Vec<RuleMessage>,
    pub previous: Option<SummaryContent>,
    pub artifacts: Vec<ArtifactRef>,
    pub max_share: f64,
    /// The share never cuts below this many characters (a short session keeps its points).
    pub min_chars: usize,
    pub max_items: usize,
}

impl Default for RulesInput {
    fn default() -> Self {
        Self {
            messages: Vec::new(),
            previous: None,
            artifacts: Vec::new(),
            max_share: 0.16,
            min_chars: 300,
            max_items: 12,
        }
    }
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("valid summary rule pattern")
}

/// What a sentence says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Decision,
    Constraint,
    Risk,
    Question,
    Progress,
    Next,
}

impl Kind {
    /// How much a sentence of this family is worth keeping, before its specificity.
    fn weight(self) -> f64 {
        match self {
            Kind::Decision => 3.0,
            Kind::Constraint => 2.6,
            Kind::Risk => 2.3,
            Kind::Next => 2.0,
            Kind::Progress => 2.0,
            Kind::Question => 1.6,
        }
    }
}

static LEADING_NOISE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:(?:hey|hi|hello|wow|woah|whoa|woohoo|yeah|yep|yup|yes|nope|no|oh|ooh|aw+|ah|cool|nice|great|awesome|amazing|sure|ok|okay|haha+|lol|well|so|hmm+|thanks(?: a lot)?|thank you(?: so much)?|congrats|definitely|totally|absolutely|right|true|indeed|good|sounds good|got it|好的|好|嗯+|哈+|谢谢|对|是的|没问题|行)(?:\s+[A-Z][a-z]+)?\s*[,，!！.。~…:：-]+\s*)+",
    )
});
static TRAILING_VOCATIVE: LazyLock<Regex> = LazyLock::new(|| re(r",\s*[A-Z][a-z]+\s*([!.?])?$"));
static LEADING_VOCATIVE: LazyLock<Regex> = LazyLock::new(|| re(r"^[A-Z][a-z]+,\s+"));

static CHITCHAT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(how (are|have) you|how'?s it going|what'?s up|good to see you|long time no see|nice to (meet|see)|take care|bye|see you|talk (to you )?soon|have a (good|great|nice)|thanks for|thank you for|you too|me too|same here|that'?s (so )?(great|awesome|cool|amazing|wonderful|nice|fantastic)|sounds (great|awesome|fun|amazing|cool|nice|like)|i'?m (so )?(glad|happy) (for|to hear)|好久不见|你好|再见|辛苦了|太棒了|真不错)",
    )
});

static DECISION: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        re(
            r"决定|定了|确定(用|采用|了|为|使用)|就用|就选|选择了|选定|采用|拍板|敲定|最终(方案|选)|统一用|改用|选用|我们用|方案是",
        ),
        re(
            r"(?i)\b(we('ll| will) (go with|use|build|switch to|stick with)|let'?s (go with|use|pick|choose|stick with|switch to)|we (decided|chose|picked|agreed|settled on|went with|are going with)|(i|we)'?ve decided|i decided|decided to|decision (is|was)|we'?re (going with|switching to)|final (choice|call|decision)|settled on|opted for|chose to)\b",
        ),
    ]
});
static CONSTRAINT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        re(
            r"预算|经费|成本上限|不能超过|不超过|最多|至少|上限|必须|务必|一定要|截止|期限|之前(完成|上线|交付|发布)|(上线|交付|发布)(时间|日期)|合规|只能用|不能用|需要支持|要求",
        ),
        re(
            r"(?i)\b(budget|deadline|due (by|on|date)|no later than|at most|at least|must|has to|required|requirement|cap(ped)? at|limit(ed)? to|cannot exceed|can'?t exceed|only use|compliance|gdpr|must support|launch (by|date|on)|ship (by|before)|within \d+ (days|weeks|months))\b",
        ),
    ]
});
static RISK: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        re(
            r"风险|隐患|担心|担忧|可能会(有|出|导致|影响|失败|超)|恐怕|瓶颈|版权问题|来不及|不稳定|有问题|出问题|容易出错",
        ),
        re(
            r"(?i)\b(risks?|risky|concern(ed|s)?|worr(y|ied|ies)|might (fail|break|not|be hard)|could (fail|break|be a problem)|may not|bottleneck|danger|issue is|problem is|afraid (that|of)|not sure (it|we) can|struggl(e|ing)|stressful)\b",
        ),
    ]
});
static OPEN_QUESTION: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        re(r"是否|要不要|需不需要|还没(确定|定|决定)|待定|待确认|不确定|有待|怎么(处理|办|解决)|如何(处理|解决)"),
        re(
            r"(?i)\b(should we|do we (need|want)|whether|not sure (whether|if|how|what)|tbd|to be decided|open question|unclear|undecided|still need to (decide|figure out|confirm)|how (should|do) we|which (one|option) (should|do))\b",
        ),
    ]
});
static PROGRESS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        re(
            r"完成了|做完|已经(完成|做好|写好|上线|发布|实现|修复|搞定|开始|确定|提交|部署)|搞定了|上线了|发布了|实现了|写好了|修好了|修复了|开始了|提交了|部署了|交付了|跑通了|做好了|画好了|参加了|去了|刚(刚)?(完成|做|去|开始|参加|买|搬|拿到)",
        ),
        re(
            r"(?i)(\b(i|we)( \w+ly| just| also| finally| recently| actually| even| already| both)* (went|got|made|took|began|started|did|ran|saw|met|bought|built|wrote|found|gave|won|held|left|came|became|brought|sold|taught|read|spoke|drove|flew|joined|finished|completed|attended|visited|signed|adopted|painted|volunteered|learned|tried|created|launched|shipped|fixed|deployed|implemented|released|set up|moved|graduated|received|decided|had|lost|hosted|organized|published|passed|raised|donated|planted|baked|cooked|played|performed|traveled|travelled|went|camped|hiked|registered|enrolled|applied|opened|started|picked|took up|\w+ed)\b|\b(i|we)('ve| have)( \w+ly| just| also| finally| recently| already)* (been \w+ing|\w+ed|done|made|taken|begun|got|gotten|seen|met|built|written|found|won|become|brought|sold|taught|read|run|joined|started|finished|completed)\b|\b(i|we)'?(m| am|'re| are) (now |currently |really |also |still |actually )*(\w+ing)\b|^(just |recently |finally |also )*(been (busy|\w+ing)|started|joined|finished|got|went|took|made|signed up|wrapped up)\b|\b(done|completed|finished|shipped|deployed|merged|implemented|fixed)\b)",
        ),
    ]
});
static PROGRESS_EXCLUDE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(i|we)'?(m| am|'re| are) (\w+ly )*(thinking|wondering|feeling|hoping|looking forward|kidding|joking|saying|guessing|trying to remember|curious|telling|asking|talking|going to|gonna|planning)\b|\bi'?m (so |really )?(glad|happy|sorry|sure|excited|proud|thankful|grateful)\b|\b(i|we) (love|like|hope|think|feel|believe|guess|wish|agree|mean|know|bet)\b",
    )
});
static NEXT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        re(
            r"下一步|接下来|之后(要|会|再)|待会|明天|下周|计划|打算|准备(做|开始|去|好)|将会|回头(再|我)|待办|需要(完成|确认|准备|联系|补充)|由.{1,8}(负责|完成|跟进)|我(会|来|去)|希望(能|可以)|想要|目标是",
        ),
        re(
            r"(?i)\b(next step|next,|next week|tomorrow|i'?ll|i will|we'?ll|we will|going to|gonna|plan(ning)? to|plans? to|intend to|to-?do|need to|needs to|will (do|start|send|finish|follow|check|review|handle|prepare|look)|follow up|hoping to|hope to|want to|wanna|aim(ing)? to|looking (forward )?to|trying to|thinking (about|of)|considering|signed up for|can'?t wait to|gotta)\b",
        ),
    ]
});
static GOAL: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        re(
            r"目标是|目的是|这次(要|想|来)|今天(要|想|来)|主要(是|想)|我想(做|要|讨论|聊)|我们要(做|讨论|确定)|帮我(做|设计|规划|写|看)|讨论(一下)?.{2,20}(方案|设计|计划|架构)",
        ),
        re(
            r"(?i)\b(the goal is|our goal|my goal|goal for (today|this session)|the aim is|we need to (build|design|plan|decide|figure out)|i want to (build|create|make|launch|start|design|plan)|let'?s (discuss|talk about|plan|design|figure out)|help me (build|design|plan|write|with)|today we('ll| will)? (discuss|plan|work on))\b",
        ),
    ]
});
static REASON: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(，|,|;|；|\s)?(因为|由于|理由是|原因是|考虑到|为了|\bbecause\b|\bsince\b|\bdue to\b|\bso that\b|\bas it\b|\bgiven that\b|\bthe reason is\b)",
    )
});
static LOW_CONFIDENCE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)暂定|先用|暂时|可能|也许|试试|\b(tentative(ly)?|for now|maybe|probably|might|for the time being|let'?s try)\b",
    )
});
static HIGH_CONFIDENCE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)决定|定了|确定|拍板|敲定|最终|\b(decided|final|settled|definitely|confirmed|agreed)\b"));
static CONFIRMATION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(好的?|可以|行|同意|没问题|就这么(定|办)了?|就这样吧?|听你的|按你说的|sounds good|agreed|deal|ok(ay)?,? let'?s do (it|that)|let'?s do (it|that)|go (with|for) (it|that)|yes,? (let'?s|go)|perfect,? let'?s)(\s*[,，.。!！~]|\s*$)",
    )
});
static PROPOSAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)建议|推荐|可以考虑|不如|方案|\b(i suggest|i recommend|we could|how about|what about|my suggestion|i propose|option)\b",
    )
});
static ARTIFACT_REF: LazyLock<Regex> = LazyLock::new(|| re(r"\b(art_[0-9a-f]{32}|ART-\d{1,6})\b"));
static FIRST_PERSON_LEAD: LazyLock<Regex> = LazyLock::new(|| re(r"^((I'm|I am|I've|I have|I'll|I)\b|我)\s*"));

fn any_match(patterns: &[Regex], text: &str) -> bool {
    patterns.iter().any(|p| p.is_match(text))
}

/// Strips greetings, interjections and vocatives around a sentence.
fn clean(sentence: &str) -> String {
    let mut text = sentence.trim().to_string();
    for _ in 0..3 {
        let stripped = LEADING_NOISE.replace(&text, "").to_string();
        let stripped = LEADING_VOCATIVE.replace(&stripped, "").to_string();
        if stripped == text {
            break;
        }
        text = stripped;
    }
    text = TRAILING_VOCATIVE.replace(&text, "$1").to_string();
    let text = text.trim().trim_end_matches(['!', '！', '~']).trim();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) if first.is_ascii_lowercase() => first.to_ascii_uppercase().to_string() + chars.as_str(),
        Some(_) => text.to_string(),
        None => String::new(),
    }
}

/// Who a message is from, as a summary names them.
fn who(message: &RuleMessage) -> String {
    match &message.speaker {
        Some(speaker) if !speaker.trim().is_empty() => speaker.trim().to_string(),
        _ => message.role.clone(),
    }
}

fn is_question(sentence: &str) -> bool {
    sentence.ends_with('?') || sentence.ends_with('？') || sentence.ends_with('吗')
}

/// The item text: the cleaned sentence, attributed to a named speaker.
fn attributed(message: &RuleMessage, sentence: &str, max_chars: usize) -> String {
    let text = summarize_to(sentence, max_chars);
    match &message.speaker {
        Some(speaker) if !speaker.trim().is_empty() => {
            let rest = FIRST_PERSON_LEAD.replace(&text, "").to_string();
            let rest = if rest.trim().is_empty() { text.clone() } else { rest };
            let sep = if rest.chars().next().is_some_and(is_han) {
                "："
            } else {
                ": "
            };
            format!("{}{sep}{}", speaker.trim(), rest.trim())
        }
        _ => text,
    }
}

static DATED: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(yesterday|today|tonight|last (week|weekend|month|year|night|monday|tuesday|wednesday|thursday|friday|saturday|sunday|fri|sat|sun|tues?)|this (week|weekend|morning|month)|(a few|two|three|\d+) (days|weeks|months) ago|recently|just (got|finished|started|joined|went|took|made|signed)|next (week|month|year))\b|昨天|今天|上周|上个月|刚刚|刚才|最近|下周",
    )
});

/// How specific a sentence is: content words, names, numbers, and a date (a dated action is
/// an event worth keeping).
fn specificity(sentence: &str) -> f64 {
    let dated = if DATED.is_match(sentence) { 0.8 } else { 0.0 };
    let content = terms(sentence);
    let distinct: HashSet<&String> = content.iter().collect();
    let names = sentence
        .split_whitespace()
        .skip(1)
        .filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
        .count();
    let numbers = sentence
        .split_whitespace()
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()))
        .count();
    dated + (distinct.len().min(14) as f64) * 0.15 + (names.min(3) as f64) * 0.25 + (numbers.min(2) as f64) * 0.3
}

/// A candidate item of the new messages.
#[derive(Debug, Clone)]
struct Candidate {
    kind: Kind,
    text: String,
    decision: Option<Decision>,
    score: f64,
    order: usize,
}

fn classify(sentence: &str, user_authored: bool) -> Option<Kind> {
    if CHITCHAT.is_match(sentence) {
        return None;
    }
    if is_question(sentence) {
        // Questions are open only when they say so; conversational questions are not.
        return any_match(&OPEN_QUESTION, sentence).then_some(Kind::Question);
    }
    if any_match(&DECISION, sentence) {
        return Some(Kind::Decision);
    }
    static EPISTEMIC: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?i)\bmust('ve| have| be (so|really|a|an|nice|fun|great|hard|tough|amazing|awesome))\b"));
    if any_match(&CONSTRAINT, sentence)
        && !EPISTEMIC.is_match(sentence)
        && (user_authored || terms(sentence).len() >= 3)
    {
        return Some(Kind::Constraint);
    }
    if any_match(&RISK, sentence) {
        return Some(Kind::Risk);
    }
    if any_match(&OPEN_QUESTION, sentence) {
        return Some(Kind::Question);
    }
    if any_match(&NEXT, sentence) {
        return Some(Kind::Next);
    }
    if any_match(&PROGRESS, sentence) && !PROGRESS_EXCLUDE.is_match(sentence) {
        return Some(Kind::Progress);
    }
    None
}

/// Splits a decision sentence into what and why.
fn decision_of(sentence: &str, next_sentence: Option<&str>, who: String) -> Decision {
    let (what, mut why) = match REASON.find(sentence) {
        Some(found) if found.start() > 0 => {
            let what = sentence[..found.start()].trim_end_matches([',', '，', ';', '；', ' ']);
            let why = sentence[found.start()..]
                .trim_start_matches([',', '，', ';', '；', ' '])
                .trim_end_matches(['。', '.', '!', '！']);
            (what.to_string(), why.to_string())
        }
        _ => (sentence.trim_end_matches(['。', '.']).to_string(), String::new()),
    };
    if why.is_empty()
        && let Some(next) = next_sentence
        && REASON.find(next).is_some_and(|m| m.start() <= 1)
    {
        why = next.trim_end_matches(['。', '.', '!', '！']).to_string();
    }
    let confidence = if LOW_CONFIDENCE.is_match(sentence) {
        DecisionConfidence::Low
    } else if HIGH_CONFIDENCE.is_match(sentence) {
        DecisionConfidence::High
    } else {
        DecisionConfidence::Medium
    };
    Decision {
        what: summarize_to(&what, 120),
        why: summarize_to(&why, 120),
        who,
        confidence,
    }
}

fn goal_of(messages: &[RuleMessage]) -> Option<String> {
    for message in messages {
        for sentence in sentences(&message.content) {
            let sentence = clean(&sentence);
            if any_match(&GOAL, &sentence) {
                return Some(summarize_to(&sentence, 100));
            }
        }
    }
    None
}

/// The summary of the previous content and the new messages.
pub fn summarize(input: &RulesInput) -> SummaryContent {
    let max_items = input.max_items.max(1);
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut order = 0usize;
    let mut last_proposal: Option<(String, String)> = None;
    let mut chars_read = 0usize;
    let mut mentioned: Vec<(String, String)> = Vec::new();
    for message in &input.messages {
        chars_read += char_count(&message.content);
        let user_authored = message.role == "user";
        let speaker = who(message);
        for found in ARTIFACT_REF.find_iter(&message.content) {
            if !mentioned.iter().any(|(r, _)| r == found.as_str()) {
                mentioned.push((
                    found.as_str().to_string(),
                    artifact_context(&message.content, found.as_str()),
                ));
            }
        }
        let raw: Vec<String> = sentences(&message.content);
        let cleaned: Vec<String> = raw.iter().map(|s| clean(s)).collect();
        for (i, sentence) in cleaned.iter().enumerate() {
            if sentence.is_empty() || terms(sentence).len() < 2 {
                // "好，就这么定了" is short but decides: handled as a confirmation below.
                if CONFIRMATION.is_match(raw[i].trim())
                    && let Some((proposer, proposal)) = last_proposal.take()
                    && proposer != speaker
                {
                    candidates.push(Candidate {
                        kind: Kind::Decision,
                        text: proposal.clone(),
                        decision: Some(Decision {
                            what: summarize_to(&proposal, 120),
                            why: String::new(),
                            who: speaker.clone(),
                            confidence: DecisionConfidence::High,
                        }),
                        score: Kind::Decision.weight() + specificity(&proposal),
                        order,
                    });
                    order += 1;
                }
                continue;
            }
            if CONFIRMATION.is_match(raw[i].trim())
                && terms(sentence).len() <= 4
                && let Some((proposer, proposal)) = last_proposal.take()
                && proposer != speaker
            {
                candidates.push(Candidate {
                    kind: Kind::Decision,
                    text: proposal.clone(),
                    decision: Some(Decision {
                        what: summarize_to(&proposal, 120),
                        why: String::new(),
                        who: speaker.clone(),
                        confidence: DecisionConfidence::High,
                    }),
                    score: Kind::Decision.weight() + specificity(&proposal),
                    order,
                });
                order += 1;
                continue;
            }
            if PROPOSAL.is_match(sentence) && !is_question(sentence) {
                last_proposal = Some((speaker.clone(), sentence.clone()));
            }
            let Some(kind) = classify(sentence, user_authored) else {
                continue;
            };
            let decision = (kind == Kind::Decision).then(|| {
                let next = cleaned.get(i + 1).map(String::as_str);
                decision_of(sentence, next, speaker.clone())
            });
            let text = match &decision {
                Some(d) => d.what.clone(),
                None => attributed(message, sentence, 140),
            };
            candidates.push(Candidate {
                kind,
                score: kind.weight() + specificity(sentence),
                text,
                decision,
                order,
            });
            order += 1;
        }
    }

    // Keep the best items within the share of what was read, then restore their order.
    let budget = (((chars_read as f64) * input.max_share).ceil() as usize).max(input.min_chars);
    let mut ranked: Vec<&Candidate> = candidates.iter().collect();
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.order.cmp(&b.order)));
    let mut kept: Vec<&Candidate> = Vec::new();
    let mut used = 0usize;
    for candidate in ranked {
        let cost = candidate_chars(candidate);
        if used + cost > budget && !kept.is_empty() {
            continue;
        }
        if used + cost > budget.max(cost) {
            continue;
        }
        if kept
            .iter()
            .any(|k| k.kind == candidate.kind && term_jaccard(&k.text, &candidate.text) >= 0.6)
        {
            continue;
        }
        used += cost;
        kept.push(candidate);
    }
    kept.sort_by_key(|c| c.order);

    let mut fresh = SummaryContent::default();
    for candidate in kept {
        match candidate.kind {
            Kind::Decision => fresh
                .decisions
                .extend(candidate.decision.clone().into_iter().filter(|d| !d.what.is_empty())),
            Kind::Constraint => fresh.constraints.push(candidate.text.clone()),
            Kind::Risk => fresh.risks.push(candidate.text.clone()),
            Kind::Question => fresh.open_questions.push(candidate.text.clone()),
            Kind::Progress => fresh.progress.push(candidate.text.clone()),
            Kind::Next => fresh.next_actions.push(candidate.text.clone()),
        }
    }
    let previous_goal = input.previous.as_ref().map(|p| p.goal.clone()).unwrap_or_default();
    if previous_goal.is_empty()
        && let Some(goal) = goal_of(&input.messages)
    {
        fresh.goal = goal;
    }
    for known in &input.artifacts {
        fresh.artifacts.push(known.clone());
    }
    for (reference, context) in mentioned {
        if !fresh.artifacts.iter().any(|a| a.reference == reference) {
            fresh.artifacts.push(ArtifactRef {
                reference,
                locator: String::new(),
                desc: summarize_to(&context, 60),
            });
        }
    }
    merge(input.previous.clone().unwrap_or_default(), fresh, max_items)
}

/// What the text says an artifact is: the clause mentioning it, without the reference and
/// the words pointing at it ("技术方案文档在 ART-001" -> "技术方案文档").
fn artifact_context(text: &str, reference: &str) -> String {
    static POINTER: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?i)(\s|在|是|见|于|:|：|\(|（)+$|^(\s|:|：)+|\b(see|in|at|is|are|under|for)\s*$"));
    let clause = text
        .split(['，', ',', '；', ';', '。', '\n'])
        .find(|c| c.contains(reference))
        .unwrap_or_default()
        .replace(reference, "");
    let mut desc = clause.trim().to_string();
    for _ in 0..3 {
        let next = POINTER.replace_all(&desc, "").trim().to_string();
        if next == desc {
            break;
        }
        desc = next;
    }
    desc.trim_end_matches(['.', '!', '?', '。']).to_string()
}

fn candidate_chars(candidate: &Candidate) -> usize {
    match &candidate.decision {
        Some(d) => char_count(&d.what) + char_count(&d.why) + char_count(&d.who) + 4,
        None => char_count(&candidate.text),
    }
}

fn same_item(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim()) || term_jaccard(a, b) >= 0.6
}

/// Appends the new items of a list, dropping near-duplicates, keeping the newest `max`.
fn merge_list(mut old: Vec<String>, new: Vec<String>, max: usize) -> Vec<String> {
    for item in new {
        if item.trim().is_empty() {
            continue;
        }
        if let Some(pos) = old.iter().position(|o| same_item(o, &item)) {
            // The newer wording wins and moves to the end (it is the most recent state).
            old.remove(pos);
        }
        old.push(item);
    }
    let excess = old.len().saturating_sub(max);
    old.drain(..excess);
    old
}

/// Merges new content into a summary: the deterministic merge both engines' results go
/// through (an LLM's complete answer merges into nothing but itself).
pub fn merge(previous: SummaryContent, fresh: SummaryContent, max_items: usize) -> SummaryContent {
    let mut decisions = previous.decisions;
    for decision in &fresh.decisions {
        decisions.retain(|d| !(same_item(&d.what, &decision.what) || term_jaccard(&d.what, &decision.what) >= 0.5));
        decisions.push(decision.clone());
    }
    let excess = decisions.len().saturating_sub(max_items);
    decisions.drain(..excess);
    let mut open_questions = merge_list(previous.open_questions, fresh.open_questions, max_items);
    // A decision taken on a question closes it.
    open_questions.retain(|q| !fresh.decisions.iter().any(|d| term_jaccard(q, &d.what) >= 0.4));
    let mut artifacts = previous.artifacts;
    for artifact in fresh.artifacts {
        match artifacts.iter_mut().find(|a| a.reference == artifact.reference) {
            Some(existing) => {
                if existing.locator.is_empty() {
                    existing.locator = artifact.locator;
                }
                if existing.desc.is_empty() {
                    existing.desc = artifact.desc;
                }
            }
            None => artifacts.push(artifact),
        }
    }
    let excess = artifacts.len().saturating_sub(max_items * 2);
    artifacts.drain(..excess);
    let progress = merge_list(previous.progress, fresh.progress, max_items);
    // Next steps that were since done are no longer next.
    let fresh_next = fresh.next_actions.clone();
    let mut next_actions = merge_list(previous.next_actions, fresh.next_actions, max_items);
    next_actions.retain(|n| !progress.iter().any(|p| term_jaccard(n, p) >= 0.6) || fresh_next.contains(n));
    SummaryContent {
        goal: if fresh.goal.is_empty() {
            previous.goal
        } else {
            fresh.goal
        },
        constraints: merge_list(previous.constraints, fresh.constraints, max_items),
        decisions,
        progress,
        artifacts,
        next_actions,
        risks: merge_list(previous.risks, fresh.risks, max_items),
        open_questions,
    }
}

/// The language the user writes in: their messages, or all messages when none is the user's.
pub fn language_of(messages: &[RuleMessage]) -> Language {
    let user: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == "user")
        .map(|m| m.content.as_str())
        .collect();
    let texts: Vec<&str> = if user.is_empty() {
        messages.iter().map(|m| m.content.as_str()).collect()
    } else {
        user
    };
    thinkus_common::text::detect_language_of(texts)
}

/// Whether a message asks for a summary ("总结一下", "summarize").
pub fn asks_for_summary(text: &str) -> bool {
    static ASK: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)总结一下|总结下|做个总结|做一下总结|帮我总结|小结一下|概括一下|回顾一下|梳理一下|\b(summari[sz]e|sum (it |this |things )?up|recap|give me a summary|a quick summary|wrap up what we)\b",
        )
    });
    ASK.is_match(text)
}

/// True for text in Chinese.
pub fn is_chinese(text: &str) -> bool {
    detect_language(text) == Language::Zh
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(index: u32, role: &str, speaker: Option<&str>, content: &str) -> RuleMessage {
        RuleMessage {
            index,
            role: role.into(),
            speaker: speaker.map(str::to_string),
            content: content.into(),
        }
    }

    fn input(messages: Vec<RuleMessage>) -> RulesInput {
        RulesInput {
            messages,
            // Attribution makes items longer than their sentences: no share limit here.
            max_share: 10.0,
            ..Default::default()
        }
    }

    #[test]
    fn chinese_session() {
        let messages = vec![
            msg(
                0,
                "user",
                None,
                "今天我想讨论一下课程平台的技术方案。预算是$500，必须在2周内完成。",
            ),
            msg(1, "cto", Some("David"), "我建议用Next.js和MongoDB。"),
            msg(2, "user", None, "好，就这么定了。"),
            msg(
                3,
                "cto",
                Some("David"),
                "我们决定使用Stripe作为支付方案，因为接入简单，用户在美国。",
            ),
            msg(4, "cto", Some("David"), "需求分析已经完成了，技术方案文档在 ART-001。"),
            msg(5, "cto", Some("David"), "视频播放可能会有版权问题，需要Tom确认。"),
            msg(6, "user", None, "是否需要支持多语言？"),
            msg(7, "cto", Some("David"), "下一步我会搭建项目骨架。"),
        ];
        let out = summarize(&input(messages));
        assert!(out.goal.contains("技术方案"), "{out:?}");
        assert!(out.constraints.iter().any(|c| c.contains("$500")), "{out:?}");
        let stripe = out
            .decisions
            .iter()
            .find(|d| d.what.contains("Stripe"))
            .expect("the Stripe decision");
        assert!(stripe.why.contains("接入简单"), "{stripe:?}");
        assert_eq!(stripe.who, "David");
        assert_eq!(stripe.confidence, DecisionConfidence::High);
        let nextjs = out
            .decisions
            .iter()
            .find(|d| d.what.contains("Next.js"))
            .expect("the confirmed proposal");
        assert_eq!(nextjs.who, "user");
        assert!(out.progress.iter().any(|p| p.contains("需求分析")), "{out:?}");
        assert!(out.risks.iter().any(|r| r.contains("版权")), "{out:?}");
        assert!(out.open_questions.iter().any(|q| q.contains("多语言")), "{out:?}");
        assert!(out.next_actions.iter().any(|n| n.contains("骨架")), "{out:?}");
        let art = out
            .artifacts
            .iter()
            .find(|a| a.reference == "ART-001")
            .expect("the artifact");
        assert_eq!(art.desc, "技术方案文档");
    }

    #[test]
    fn english_session() {
        let messages = vec![
            msg(
                0,
                "user",
                None,
                "Hi! The goal is to plan the launch of the course platform.",
            ),
            msg(
                1,
                "user",
                None,
                "The budget is capped at $800 and the deadline is March 3.",
            ),
            msg(
                2,
                "assistant",
                None,
                "We decided to go with Postgres because the team knows it well.",
            ),
            msg(
                3,
                "assistant",
                None,
                "I finished the schema migration and deployed the staging server.",
            ),
            msg(
                4,
                "user",
                None,
                "I'm worried the payment provider might not support refunds.",
            ),
            msg(5, "user", None, "Should we support multiple currencies?"),
            msg(
                6,
                "assistant",
                None,
                "Next step: I'll write the onboarding emails. See art_0190f3c2a1b2c3d4e5f60718293a4b5c for the draft.",
            ),
            msg(7, "user", None, "How are you?"),
        ];
        let out = summarize(&input(messages));
        assert!(out.goal.to_lowercase().contains("launch"), "{out:?}");
        assert!(out.constraints.iter().any(|c| c.contains("$800")), "{out:?}");
        let d = out
            .decisions
            .iter()
            .find(|d| d.what.contains("Postgres"))
            .expect("decision");
        assert!(d.why.contains("team knows it"), "{d:?}");
        assert_eq!(d.confidence, DecisionConfidence::High);
        assert!(out.progress.iter().any(|p| p.contains("schema migration")), "{out:?}");
        assert!(out.risks.iter().any(|r| r.contains("refunds")), "{out:?}");
        assert!(out.open_questions.iter().any(|q| q.contains("currencies")), "{out:?}");
        assert!(out.next_actions.iter().any(|n| n.contains("onboarding")), "{out:?}");
        assert!(
            out.artifacts
                .iter()
                .any(|a| a.reference == "art_0190f3c2a1b2c3d4e5f60718293a4b5c"),
            "{out:?}"
        );
        assert!(!out.open_questions.iter().any(|q| q.contains("How are you")), "{out:?}");
    }

    #[test]
    fn named_speakers_are_attributed_and_chitchat_dropped() {
        let messages = vec![
            msg(0, "user", Some("Maria"), "Hey John! Long time no see! What's up?"),
            msg(
                1,
                "user",
                Some("John"),
                "Hey Maria! Just got back from a family road trip yesterday, it was fun!",
            ),
            msg(
                2,
                "user",
                Some("Maria"),
                "Been busy volunteering at the homeless shelter. Just started doing aerial yoga.",
            ),
            msg(
                3,
                "user",
                Some("John"),
                "I'm gonna chat with local leaders and organizations.",
            ),
        ];
        let out = summarize(&input(messages));
        let text = format!("{:?}{:?}", out.progress, out.next_actions);
        assert!(text.contains("John: Just got back from a family road trip"), "{text}");
        assert!(text.contains("Maria: Been busy volunteering"), "{text}");
        assert!(
            text.contains("John: Gonna chat with local leaders") || text.contains("John: gonna chat"),
            "{text}"
        );
        assert!(!text.contains("Long time"), "{text}");
    }

    #[test]
    fn merging_dedups_and_closes_questions() {
        let first = summarize(&input(vec![
            msg(0, "user", None, "Should we use Redis for caching?"),
            msg(1, "assistant", None, "I finished the API design document."),
        ]));
        assert_eq!(first.open_questions.len(), 1, "{first:?}");
        let mut next = input(vec![
            msg(2, "assistant", None, "I finished the API design document."),
            msg(
                3,
                "user",
                None,
                "We decided to use Redis for caching because reads dominate.",
            ),
        ]);
        next.previous = Some(first);
        let second = summarize(&next);
        assert_eq!(second.progress.len(), 1, "duplicates merge: {second:?}");
        assert!(second.open_questions.is_empty(), "answered: {second:?}");
        assert_eq!(second.decisions.len(), 1);
    }

    #[test]
    fn output_stays_within_the_share() {
        let long: Vec<RuleMessage> = (0..40)
            .map(|i| {
                msg(
                    i,
                    "user",
                    Some("Ann"),
                    &format!("I finished task number {i} of the migration plan for the billing system today."),
                )
            })
            .collect();
        let read: usize = long.iter().map(|m| char_count(&m.content)).sum();
        let out = summarize(&RulesInput {
            messages: long,
            max_share: 0.15,
            min_chars: 0,
            max_items: 50,
            ..Default::default()
        });
        let written: usize = out.progress.iter().map(|p| char_count(p)).sum();
        assert!(written as f64 <= read as f64 * 0.15, "{written} of {read}");
        assert!(!out.progress.is_empty());
    }

    #[test]
    fn summary_requests_are_detected() {
        assert!(asks_for_summary("帮我总结一下今天的讨论"));
        assert!(asks_for_summary("Can you summarize where we are?"));
        assert!(asks_for_summary("quick recap please"));
        assert!(!asks_for_summary("the summary field is empty"));
    }
}
