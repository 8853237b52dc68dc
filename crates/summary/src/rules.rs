//! The built-in summary rules, registered in the rule engine for [`LlmTask::Summarize`]. They
//! answer in the JSON the LLM prompt asks for (the complete, merged summary), so both engines
//! share one parser.
//!
//! The rules read the new messages sentence by sentence. Greetings, interjections, vocatives
//! and lead-ins ("by the way", "对了") are stripped; questions that are not open questions,
//! small talk and reactions to the other party ("That's so cool!", "You're so dedicated",
//! "太厉害了") are dropped. Each remaining sentence is classified by the first pattern family
//! that matches, in this order: decisions (with their reasons, who made them and how settled
//! they are), constraints, risks, open questions, completed work, next steps; a sentence of
//! no family is a key point (something a participant reported). A sentence of the opening
//! messages stating what the session is for becomes the goal when none is known yet. A short
//! confirmation ("好，就这么定了", "sounds good, let's do that") answering the other party's
//! proposal turns it into a decision. Artifacts are attached by reference: the session's
//! stored artifacts, and `art_…` / `ART-…` references mentioned in the text.
//!
//! A session with no goal, decision or artifact is a conversation: its sentences are weighed
//! by what they report alone, and its risks and constraints read as key points. In a working
//! session each family adds its weight, and of the key points only reported events (done
//! work) are kept, as progress.
//!
//! Kept sentences are shortened ([`salience::compress`]: no hedges, no verdict tails, no
//! questions tacked on) and attributed to a named speaker. Which are kept is a greedy choice
//! under a length budget: each sentence is worth its salience ([`salience::salience`]:
//! reported events, plans, dates, names, numbers, content, the session's opening; not
//! reactions, not reminiscences), its family's weight in a working session, and the
//! session's topic words it adds (words the session keeps using or opened with), less what it
//! repeats of the sentences already chosen. The most valuable is taken first, until the new
//! items reach `max_share` of the characters read (but at least `min_chars`), so a summary
//! stays a fraction of its session; a sentence worth less than a threshold is left out unless
//! a family named it, and a section takes its `max_items` most valuable. The result is merged
//! into the previous summary: near-duplicates (term Jaccard ≥ 0.6) are dropped, a newer
//! decision on the same subject replaces the older one, a constraint or decision that states
//! other values for a subject (the budget, the deadline, the frontend…) outdates the clauses
//! that said otherwise ("预算调整到$800" ends "预算是$500"), open questions answered by a new
//! decision are closed, and each section keeps its newest `max_items`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use thinkus_backends::llm::{LlmError, LlmTask, RuleEngine, RuleHandler};
use thinkus_common::model::{ArtifactRef, Decision, DecisionConfidence, Language};
use thinkus_common::text::{
    char_count, detect_language, is_han, is_irregular_past, pattern, sentences, summarize_to, tagged_words,
    term_jaccard, term_set, terms,
};
use thinkus_knowledge_manager::subject;

use crate::api::SummaryContent;
use crate::salience::{self, Position, TermStats, capitalised, choice};

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
            max_share: 0.23,
            min_chars: 300,
            max_items: 12,
        }
    }
}

/// The text without a lead `lead` matches ("I suggest we", "We decided to"), capitalised,
/// when at least `min_words` content words are left; otherwise the text as it was.
fn without_lead(text: &str, lead: &Regex, min_words: usize) -> String {
    let rest = lead.replace(text.trim(), "");
    if salience::content_words(&rest) < min_words {
        return text.trim().to_string();
    }
    capitalised(&rest)
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
    /// Something a participant reported that no family names: a key point.
    Point,
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
            Kind::Point => 0.0,
        }
    }

    /// The section an item of this family goes to (key points are progress).
    fn section(self) -> Kind {
        match self {
            Kind::Point => Kind::Progress,
            other => other,
        }
    }
}

static LEADING_NOISE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(?:(?:hey|hi|hello|wow|woah|whoa|woohoo|yeah|yep|yup|yes|yay|nope|no|oh|ooh|aw+|ah|cool|nice|great|awesome|amazing|sure|sure thing|ok|okay|haha+|lol|well|so|hmm+|um+|thanks(?: a lot| so much)?|thank you(?: so much)?|congrats|congratulations|definitely|totally|absolutely|right|true|indeed|good|sounds good|got it|oh man|man|gosh|omg|btw|by the way|anyway|anyways|honestly|actually|guess what|you know what|exactly|of course|for sure|oops|ugh|phew|好的|好|嗯+|哈+|谢谢|对|是的|没问题|行|哇|哇塞|天哪)(?:\s+[A-Z][a-z]+)?\s*[,，!！.。~…:：;；-]+\s*|(?:嗨|嘿|哈喽|哈啰|你好|您好|早上好|晚上好)\p{Han}{0,3}\s*[,，!！.。~…:：;；-]+\s*)+",
    )
});
/// Discourse openers that only connect: "By the way,", "Since we last spoke,", "对了，".
static LEAD_IN: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(?:(?:by the way|btw|anyway|anyways|also|plus|oh|and|but|so|well|actually|honestly|to be honest|you know|speaking of which|on another note|in other news|since (?:we|i) last (?:spoke|talked|chatted|caught up|saw each other)|since our last (?:chat|talk|conversation)|since we (?:spoke|talked|chatted) last)\s*[,:-]?\s+)+|^(?:对了|顺便说一下|话说|另外)[，,]\s*",
    )
});
static TRAILING_VOCATIVE: LazyLock<Regex> = LazyLock::new(|| pattern(r",\s*[A-Z][a-z]+\s*([!.?])?$"));
static LEADING_VOCATIVE: LazyLock<Regex> = LazyLock::new(|| pattern(r"^[A-Z][a-z]+\s*[,!]\s+"));

static CHITCHAT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(how (are|have|was|is|did|do) you|how'?s it going|what'?s up|good to (see|hear|talk|chat)|great to (see|hear|talk|chat)|long time no see|nice to (meet|see|hear|talk|chat)|been (ages|a while|a few days|forever) since|it'?s been (ages|a while|a few days|so long) since|take care|bye|see (you|ya)|talk (to you )?(soon|later)|catch you|have a (good|great|nice|awesome|wonderful|fun)|thanks for|thank you for|you too|me too|same here|no problem|no worries|anytime|my pleasure|you'?re welcome|that'?s (so )?(great|awesome|cool|amazing|wonderful|nice|fantastic)|sounds (great|awesome|fun|amazing|cool|nice|like)|i'?m (so )?(glad|happy) (for|to hear)|好久不见|你好|再见|辛苦了|太棒了|真不错)",
    )
});
/// A reaction to the other party rather than something reported: "That's so cool", "You're
/// so dedicated", "Can't wait to see it", "太厉害了".
static REACTION: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(that'?s|this is|these are|those are|(i )?(totally |completely )?(get|understand|know|can imagine) (how|what|that feeling|the feeling|it'?s|you)|(i'?m )?(so )?sorry (to hear|about|for|that)|it'?s (so |really )?(great|awesome|cool|amazing|wonderful|nice|fantastic|good|lovely|inspiring|beautiful) (to|that|how|you)|sounds|looks|what a|congrat|keep (it up|going|up the|rocking|pushing)|you'?re|you are|you have|you'?ve|you must|your |i bet|i'?m sure you|i hope you|hope you|can'?t wait to (see|hear)|let me know|i'?d love to (see|hear)|love (that|it|the|your|this|how)|i love (that|it|your|how|the way)|good luck|best of luck|wishing you|enjoy|glad (to|you|it|that)|thanks|thank you)|^(太(好|棒|厉害)了|真(好|棒|不错|厉害)|听起来|看起来|你(真|太)|加油|祝你|恭喜|谢谢|不客气|没关系)",
    )
});

static DECISION: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"决定|定了|确定(用|采用|了|为|使用)|就用|就选|选择了|选定|采用|拍板|敲定|最终(方案|选)|统一用|改用|选用|我们用|方案是",
        ),
        pattern(
            r"(?i)\b(we('ll| will) (go with|use|build|switch to|stick with)|let'?s (go with|use|pick|choose|stick with|switch to)|we (decided|chose|picked|agreed|settled on|went with|are going with)|(i|we)'?ve decided|i decided|decided to|decision (is|was)|we'?re (going with|switching to)|final (choice|call|decision)|settled on|opted for|chose to)\b",
        ),
    ]
});
static CONSTRAINT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"预算|经费|成本上限|不能超过|不超过|最多|至少|上限|必须|务必|一定要|截止|期限|之前(完成|上线|交付|发布)|(上线|交付|发布)(时间|日期)|合规|只能用|不能用|需要支持|要求",
        ),
        pattern(
            r"(?i)\b(budget|deadline|due (by|on|date)|no later than|at most|at least|must|has to|required|requirement|cap(ped)? at|limit(ed)? to|cannot exceed|can'?t exceed|only use|compliance|gdpr|must support|launch (by|date|on)|ship (by|before)|within \d+ (days|weeks|months))\b",
        ),
    ]
});
static RISK: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"风险|隐患|担心|担忧|可能会(有|出|导致|影响|失败|超)|恐怕|瓶颈|版权问题|来不及|不稳定|有问题|出问题|容易出错",
        ),
        pattern(
            r"(?i)\b(risks?|risky|concern(ed|s)?|worr(y|ied|ies)|might (fail|break|not|be hard)|could (fail|break|be a problem)|may not|bottleneck|danger|issue is|problem is|afraid (that|of)|not sure (it|we) can|struggl(e|ing)|stressful)\b",
        ),
    ]
});
static OPEN_QUESTION: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(r"是否|要不要|需不需要|还没(确定|定|决定)|待定|待确认|不确定|有待|怎么(处理|办|解决)|如何(处理|解决)"),
        pattern(
            r"(?i)\b(should we|do we (need|want)|whether|not sure (whether|if|how|what)|tbd|to be decided|open question|unclear|undecided|still need to (decide|figure out|confirm)|how (should|do) we|which (one|option) (should|do))\b",
        ),
    ]
});
static PROGRESS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"完成了|做完|已经(完成|做好|写好|上线|发布|实现|修复|搞定|开始|确定|提交|部署)|搞定了|上线了|发布了|实现了|写好了|修好了|修复了|开始了|提交了|部署了|交付了|跑通了|做好了|画好了|参加了|去了|刚(刚)?(完成|做|去|开始|参加|买|搬|拿到)",
        ),
        pattern(
            r"(?i)(\b(i|we)( \w+ly| just| also| finally| recently| actually| even| already| both)* (went|got|made|took|began|started|did|ran|saw|met|bought|built|wrote|found|gave|won|held|left|came|became|brought|sold|taught|read|spoke|drove|flew|joined|finished|completed|attended|visited|signed|adopted|painted|volunteered|learned|tried|created|launched|shipped|fixed|deployed|implemented|released|set up|moved|graduated|received|decided|had|lost|hosted|organized|published|passed|raised|donated|planted|baked|cooked|played|performed|traveled|travelled|went|camped|hiked|registered|enrolled|applied|opened|started|picked|took up|\w+ed)\b|\b(i|we)('ve| have)( \w+ly| just| also| finally| recently| already)* (been \w+ing|\w+ed|done|made|taken|begun|got|gotten|seen|met|built|written|found|won|become|brought|sold|taught|read|run|joined|started|finished|completed)\b|\b(i|we)'?(m| am|'re| are) (now |currently |really |also |still |actually )*(\w+ing)\b|^(just |recently |finally |also )*(been (busy|\w+ing)|started|joined|finished|got|went|took|made|signed up|wrapped up)\b|\b(done|completed|finished|shipped|deployed|merged|implemented|fixed)\b)",
        ),
    ]
});
static PROGRESS_EXCLUDE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)\b(i|we)'?(m| am|'re| are) (\w+ly )*(thinking|wondering|feeling|hoping|looking forward|kidding|joking|saying|guessing|trying to remember|curious|telling|asking|talking|going to|gonna|planning)\b|\bi'?m (so |really )?(glad|happy|sorry|sure|excited|proud|thankful|grateful)\b|\b(i|we) (love|like|hope|think|feel|believe|guess|wish|agree|mean|know|bet)\b",
    )
});
static NEXT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"下一步|接下来|之后(要|会|再)|待会|明天|下周|计划|打算|准备(做|开始|去|好)|将会|回头(再|我)|待办|需要(完成|确认|准备|联系|补充)|由.{1,8}(负责|完成|跟进)|我(会|来|去)|希望(能|可以)|想要|目标是",
        ),
        pattern(
            r"(?i)\b(next step|next,|next week|tomorrow|i'?ll|i will|we'?ll|we will|going to|gonna|plan(ning)? to|plans? to|intend to|to-?do|need to|needs to|will (do|start|send|finish|follow|check|review|handle|prepare|look)|follow up|hoping to|hope to|want to|wanna|aim(ing)? to|looking (forward )?to|trying to|thinking (about|of)|considering|signed up for|can'?t wait to|gotta)\b",
        ),
    ]
});
static GOAL: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"目标是|目的是|这次(要|想|来)|今天(要|想|来)|主要(是|想)|我想(做|要|讨论|聊)|我们要(做|讨论|确定)|(我们|咱们)来(定|确定|敲定|讨论|商量)|帮我(做|设计|规划|写|看)|(讨论|确定|敲定|商量)(一下)?.{2,20}(方案|设计|计划|架构|方向|需求|预算|排期)",
        ),
        pattern(
            r"(?i)\b(the goal is|our goal|my goal (for|with|in) (this|the|today)|goal for (today|this session)|the aim is|we need to (build|design|plan|decide|figure out)|i want to (build|create|make|launch|start|design|plan)|let'?s (discuss|talk about|plan|design|figure out|decide|settle|agree on|finalize)|today we('ll| will)? (discuss|plan|work on))\b|(?i)(^|\b(can|could|would) you |\bplease )help me (build|design|plan|write|with)\b",
        ),
    ]
});
static REASON: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(，|,|;|；|\s)?(因为|由于|理由是|原因是|考虑到|为了|\bbecause\b|\bsince\b|\bdue to\b|\bso that\b|\bas it\b|\bgiven that\b|\bthe reason is\b)",
    )
});
static LOW_CONFIDENCE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)暂定|先用|暂时|可能|也许|试试|\b(tentative(ly)?|for now|maybe|probably|might|for the time being|let'?s try)\b",
    )
});
static HIGH_CONFIDENCE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(r"(?i)决定|定了|确定|拍板|敲定|最终|\b(decided|final|settled|definitely|confirmed|agreed)\b")
});
static CONFIRMATION: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(好的?|可以|行|同意|没问题|就这么(定|办)了?|就这样吧?|听你的|按你说的|sounds good|agreed|deal|ok(ay)?,? let'?s do (it|that)|let'?s do (it|that)|go (with|for) (it|that)|yes,? (let'?s|go)|perfect,? let'?s)(\s*[,，.。!！~]|\s*$)",
    )
});
static PROPOSAL: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)建议|推荐|可以考虑|不如|方案|\b(i suggest|i recommend|how about|what about|my suggestion|i propose|option)\b|(^|[,;:]\s*)(maybe |then |so )?we could\b",
    )
});
static ARTIFACT_REF: LazyLock<Regex> = LazyLock::new(|| pattern(r"\b(art_[0-9a-f]{32}|ART-\d{1,6})\b"));
/// "I", "I'm" or "I've" opening an English statement, then the adverbs and the word after it.
static FIRST_PERSON_LEAD: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"^(I'm|I am|I've|I have|I)\s+(?:(?:\w+ly|just|also|finally|even|already|still|never|both|all)\s+)*([A-Za-z']+)",
    )
});
/// How a proposal is put, before what it proposes: "I suggest we", "我建议".
static PROPOSING: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(?:(?:i|we) (?:suggest|recommend|propose)(?: that)?(?: we)?(?: should)?|(?:(?:maybe|then|so) )?we could)\s+|^(?:我|我们)?(?:建议|推荐|提议)(?:我们|大家)?(?:可以|还是)?[，,：:]?\s*",
    )
});

/// What a confirmed proposal decides: the proposal without how it was put ("I suggest we use
/// Postgres" -> "Use Postgres", "我建议用深色主题" -> "用深色主题"), as the one who decided is
/// the one who confirmed.
fn proposed(proposal: &str) -> String {
    without_lead(proposal, &PROPOSING, 1)
}

/// Whether a word reads as a verb's past form or participle ("joined", "went", "been"): a
/// regular "-ed" form, an irregular one ([`is_irregular_past`]), or one of the auxiliaries and
/// rarer forms that table leaves out.
fn is_past(word: &str) -> bool {
    const MORE: &[&str] = &[
        "was", "had", "did", "been", "done", "dug", "fought", "hung", "rang", "ridden", "sank", "shook", "shown",
        "stole", "struck", "tore",
    ];
    let word = word.to_ascii_lowercase();
    is_irregular_past(&word)
        || MORE.contains(&word.as_str())
        || (word.len() > 4
            && word.ends_with("ed")
            && (!word.ends_with("eed") || matches!(word.as_str(), "agreed" | "freed" | "guaranteed")))
}

/// Where the text goes on once the speaker's own subject is left out, when leaving it out
/// keeps what is said: "I went" -> "Went", "I've been" -> "Been", "I'm thinking" ->
/// "Thinking", "我上周去了" -> "上周去了". Not "I'll keep going" or "I use oils", which would
/// read as advice, nor "I have a dog", "I'm a nurse", "我妈妈…" or "我的…", which would lose
/// whose it is; "我们" is the speaker's team.
fn after_own_subject(text: &str) -> Option<usize> {
    if text.starts_with('我') {
        // "我上周去了" -> "上周去了", but "我妈妈", "我的", "我三个孩子" and "我们" (the
        // speaker's team) stay.
        let words = tagged_words(text);
        let elides = matches!(words.as_slice(), [("我", _), (_, next), ..]
            if !next.starts_with('n') && !matches!(*next, "uj" | "m" | "q"));
        return elides.then_some('我'.len_utf8());
    }
    let found = FIRST_PERSON_LEAD.captures(text)?;
    let next = &found[2];
    let elides = match &found[1] {
        "I'm" | "I am" => !matches!(next.to_ascii_lowercase().as_str(), "a" | "an" | "the" | "one"),
        _ => is_past(next),
    };
    elides.then(|| found[1].len())
}

fn any_match(patterns: &[Regex], text: &str) -> bool {
    patterns.iter().any(|p| p.is_match(text))
}

/// Strips greetings, interjections, lead-ins and vocatives around a sentence.
fn clean(sentence: &str) -> String {
    let mut text = sentence.trim().to_string();
    for _ in 0..4 {
        let stripped = LEADING_NOISE.replace(&text, "").to_string();
        let stripped = strip_vocative(&stripped);
        let stripped = LEAD_IN.replace(&stripped, "").to_string();
        if stripped == text {
            break;
        }
        text = stripped;
    }
    text = TRAILING_VOCATIVE.replace(&text, "$1").to_string();
    capitalised(text.trim().trim_end_matches(['!', '！', '~']).trim())
}

/// "Maria, I went…" -> "I went…"; but "Yesterday, I went…" keeps its time.
fn strip_vocative(text: &str) -> String {
    const NOT_NAMES: &[&str] = &[
        "yesterday",
        "today",
        "tonight",
        "tomorrow",
        "recently",
        "lately",
        "now",
        "then",
        "finally",
        "luckily",
        "sadly",
        "unfortunately",
        "thankfully",
        "hopefully",
        "meanwhile",
        "later",
        "currently",
        "initially",
        "first",
        "second",
        "next",
        "last",
        "also",
    ];
    match LEADING_VOCATIVE.find(text) {
        Some(found) => {
            let word = found.as_str().trim_end_matches(|c: char| !c.is_alphabetic());
            if NOT_NAMES.contains(&word.to_lowercase().as_str()) {
                text.to_string()
            } else {
                text[found.end()..].to_string()
            }
        }
        None => text.to_string(),
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

/// The item text: the cleaned sentence, attributed to a named speaker ("I went…" from Maria
/// reads "Maria: Went…", [`after_own_subject`]).
fn attributed(message: &RuleMessage, sentence: &str, max_chars: usize) -> String {
    let text = summarize_to(sentence, max_chars);
    match &message.speaker {
        Some(speaker) if !speaker.trim().is_empty() => {
            let rest = match after_own_subject(&text) {
                Some(end) => text[end..].trim().to_string(),
                None => text.clone(),
            };
            let rest = if salience::content_words(&rest) == 0 {
                text.clone()
            } else {
                rest
            };
            let rest = capitalised(&rest);
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

/// A candidate item of the new messages.
#[derive(Debug, Clone)]
struct Candidate {
    kind: Kind,
    text: String,
    decision: Option<Decision>,
    /// The family's weight and the sentence's salience.
    score: f64,
    /// A reported event (a key point of a working session is kept only when it is one).
    event: bool,
    /// Named by a pattern family in a working session: kept whatever its value, within the
    /// budget.
    certain: bool,
    /// The content terms of the item, and those that name its topic.
    terms: HashSet<String>,
    topic: HashSet<String>,
    order: usize,
}

impl Candidate {
    fn new(kind: Kind, text: String, decision: Option<Decision>, score: f64, names: &HashSet<String>) -> Self {
        let shown = match &decision {
            Some(d) => format!("{} {} {}", d.what, d.why, d.who),
            None => text.clone(),
        };
        let terms = term_set(&shown);
        Candidate {
            kind,
            topic: salience::topic_of(&terms, names),
            terms,
            text,
            decision,
            score,
            event: false,
            certain: false,
            order: 0,
        }
    }
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
    static EPISTEMIC: LazyLock<Regex> = LazyLock::new(|| {
        pattern(r"(?i)\bmust('ve| have| be (so|really|a|an|nice|fun|great|hard|tough|amazing|awesome))\b")
    });
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
    // "why: because…" says "because" twice.
    if let Some(connective) = REASON.find(&why).filter(|m| m.start() == 0)
        && salience::content_words(&why[connective.end()..]) > 0
    {
        why = why[connective.end()..].trim_start().to_string();
    }
    let confidence = if LOW_CONFIDENCE.is_match(sentence) {
        DecisionConfidence::Low
    } else if HIGH_CONFIDENCE.is_match(sentence) {
        DecisionConfidence::High
    } else {
        DecisionConfidence::Medium
    };
    Decision {
        what: summarize_to(&decided(&what), 120),
        why: summarize_to(&why, 120),
        who,
        confidence,
    }
}

/// What a decision decides, without the words that announce it under a "Decisions" heading:
/// "We decided to use Postgres" -> "Use Postgres", "我们决定使用Stripe" -> "使用Stripe".
fn decided(what: &str) -> String {
    static ANNOUNCED: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)^(?:(?:so|ok|okay|then|finally),?\s+)?(?:we|i)(?:'ve| have)?(?: finally| just)? (?:decided|agreed|chose|opted|settled) (?:to|on)\s+|^(?:所以|那|那么)?(?:我们|我|大家)?(?:最终|最后|已经)?(?:决定|商定|确定)(?:了)?[，,：:]?\s*",
        )
    });
    without_lead(what, &ANNOUNCED, 2)
}

fn goal_of(messages: &[RuleMessage]) -> Option<String> {
    // What a session is for is said as it opens.
    for message in messages.iter().take(3) {
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
    let speakers: HashSet<String> = input
        .messages
        .iter()
        .filter_map(|m| m.speaker.as_deref())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let name_terms: HashSet<String> = speakers.iter().flat_map(|s| term_set(s)).collect();
    // Each message's sentences, cleaned, with their content terms.
    let read: Vec<Vec<(String, String, HashSet<String>)>> = input
        .messages
        .iter()
        .map(|message| {
            sentences(&message.content)
                .into_iter()
                .map(|raw| {
                    let cleaned = clean(&raw);
                    let content = term_set(&cleaned);
                    (raw, cleaned, content)
                })
                .collect()
        })
        .collect();
    let stats = TermStats::of(read.iter().map(|message| {
        message
            .iter()
            .flat_map(|(_, _, content)| content.iter().cloned())
            .collect::<HashSet<String>>()
    }));
    let mut candidates: Vec<Candidate> = Vec::new();
    // The last proposal: who made it, what it was, in which message.
    let mut last_proposal: Option<(String, String, usize)> = None;
    let mut chars_read = 0usize;
    let mut mentioned: Vec<(String, String)> = Vec::new();
    let mut after_question = false;
    // A confirmed proposal is a decision of the one who confirmed it.
    let confirmed = |proposal: String, who: String| {
        let proposal = proposed(&proposal);
        // Its reason, if it gave one, is the decision's; confirmed, it is settled.
        let decision = Decision {
            confidence: DecisionConfidence::High,
            ..decision_of(&proposal, None, who)
        };
        let score = salience::salience(&proposal, &term_set(&proposal), &speakers, Position::default()).score;
        Candidate::new(Kind::Decision, proposal, Some(decision), score, &name_terms)
    };
    for (message_index, (message, read)) in input.messages.iter().zip(&read).enumerate() {
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
        let mut first_of_message = true;
        for (i, (raw, sentence, content)) in read.iter().enumerate() {
            let term_count = content.len();
            let short = term_count < 2;
            // "好，就这么定了" is short but decides.
            if CONFIRMATION.is_match(raw.trim())
                && term_count <= 4
                && let Some((proposer, proposal, at)) = last_proposal.take()
                && proposer != speaker
                && at + 1 == message_index
            {
                candidates.push(confirmed(proposal, speaker.clone()));
                continue;
            }
            if short {
                continue;
            }
            // "I finished another pot - want to see it?" reports; only its question goes.
            let statement = is_question(sentence)
                .then(|| salience::statement_head(sentence))
                .flatten()
                .filter(|_| !any_match(&OPEN_QUESTION, sentence));
            let sentence = statement.as_ref().unwrap_or(sentence);
            if PROPOSAL.is_match(sentence) && !is_question(sentence) {
                last_proposal = Some((speaker.clone(), sentence.clone(), message_index));
            }
            let kind = match classify(sentence, user_authored) {
                Some(kind) => kind,
                None if is_question(sentence) || CHITCHAT.is_match(sentence) => continue,
                None => Kind::Point,
            };
            if matches!(kind, Kind::Progress | Kind::Next | Kind::Point) && REACTION.is_match(sentence) {
                continue;
            }
            let position = Position {
                message: message_index,
                messages: input.messages.len(),
                first_of_message,
                after_question,
            };
            first_of_message = false;
            let head_terms = statement.as_ref().map(|head| term_set(head));
            let content = head_terms.as_ref().unwrap_or(content);
            let salience = salience::salience(sentence, content, &speakers, position);
            if kind == Kind::Point {
                // Not worth shortening when even all its words new could not make it worth
                // its place.
                let best: f64 = salience::topic_of(content, &name_terms)
                    .iter()
                    .map(|t| stats.weight(t))
                    .sum();
                if salience.score + best + choice::CONTINUES_TOPIC < choice::THRESHOLD {
                    continue;
                }
            }
            let decision = (kind == Kind::Decision).then(|| {
                let next = read.get(i + 1).map(|(_, cleaned, _)| cleaned.as_str());
                decision_of(sentence, next, speaker.clone())
            });
            let text = match (&decision, kind) {
                (Some(d), _) => d.what.clone(),
                (None, Kind::Question) => attributed(message, sentence, 140),
                (None, _) => attributed(message, &salience::compress(sentence), 140),
            };
            let mut candidate = Candidate::new(kind, text, decision, salience.score, &name_terms);
            candidate.event = salience.event;
            candidates.push(candidate);
        }
        after_question = read.last().is_some_and(|(raw, _, _)| is_question(raw.trim()));
    }
    for (order, candidate) in candidates.iter_mut().enumerate() {
        candidate.order = order;
    }

    let previous = input.previous.clone().unwrap_or_default();
    let goal = if previous.goal.is_empty() {
        goal_of(&input.messages)
    } else {
        None
    };
    let conversation = previous.goal.is_empty()
        && goal.is_none()
        && previous.decisions.is_empty()
        && previous.constraints.is_empty()
        && input.artifacts.is_empty()
        && mentioned.is_empty()
        && !candidates.iter().any(|c| c.kind == Kind::Decision);
    if conversation {
        // What each participant reported, ranked by what it says rather than by family; a
        // chat's "must" is rarely a constraint, but a worry stays a risk.
        for candidate in &mut candidates {
            if candidate.kind == Kind::Constraint {
                candidate.kind = Kind::Point;
            }
        }
    } else {
        // A working session's key points are its done work.
        candidates.retain(|c| c.kind != Kind::Point || c.event);
        for candidate in &mut candidates {
            candidate.score += candidate.kind.weight();
            candidate.certain = candidate.kind != Kind::Point;
        }
    }

    let budget = (((chars_read as f64) * input.max_share).ceil() as usize).max(input.min_chars);
    let kept = choose(&candidates, budget, max_items, &stats);

    let mut fresh = SummaryContent::default();
    // In the order said, so a later constraint or decision outdates an earlier one of the other
    // section here (the merge below sees each section on its own).
    for candidate in kept {
        match candidate.kind {
            Kind::Decision => {
                for decision in candidate.decision.iter().filter(|d| !d.what.is_empty()) {
                    fresh.constraints = drop_outdated(std::mem::take(&mut fresh.constraints), &decision.what);
                    fresh.decisions.push(decision.clone());
                }
            }
            Kind::Constraint => {
                let newer = &candidate.text;
                fresh.decisions.retain(|d| !outdates(newer, &d.what));
                fresh.constraints.push(newer.clone());
            }
            Kind::Risk => fresh.risks.push(candidate.text.clone()),
            Kind::Question => fresh.open_questions.push(candidate.text.clone()),
            Kind::Progress | Kind::Point => fresh.progress.push(candidate.text.clone()),
            Kind::Next => fresh.next_actions.push(candidate.text.clone()),
        }
    }
    if let Some(goal) = goal {
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
    merge(previous, fresh, max_items)
}

/// The items worth their place within `budget` characters, in the order they were said: the
/// most valuable first (its score, the session's topic words it adds, less what it repeats);
/// one worth less than [`choice::THRESHOLD`] is left out unless a pattern family named it,
/// and a section takes at most `max_items` (its most valuable, not its first).
fn choose<'a>(candidates: &'a [Candidate], budget: usize, max_items: usize, stats: &TermStats) -> Vec<&'a Candidate> {
    // Terms as numbers: the values are computed many times over.
    let mut ids: HashMap<&str, usize> = HashMap::new();
    let mut numbered = |terms: &'a HashSet<String>| -> Vec<usize> {
        terms
            .iter()
            .map(|t| {
                let next = ids.len();
                *ids.entry(t.as_str()).or_insert(next)
            })
            .collect()
    };
    struct Choice<'a> {
        candidate: &'a Candidate,
        terms: Vec<usize>,
        /// Topic terms and what each adds.
        topic: Vec<(usize, f64)>,
    }
    let mut pool: Vec<Choice> = candidates
        .iter()
        .map(|candidate| Choice {
            candidate,
            terms: numbered(&candidate.terms),
            topic: Vec::new(),
        })
        .collect();
    for choice in &mut pool {
        choice.topic = choice
            .candidate
            .topic
            .iter()
            .map(|t| (ids[t.as_str()], stats.weight(t)))
            .collect();
    }
    let mut said = vec![false; ids.len()];
    let mut topics = vec![false; ids.len()];
    let value = |choice: &Choice, said: &[bool], topics: &[bool]| {
        let new = choice.terms.iter().filter(|t| !said[**t]).count();
        let repeated = 1.0 - new as f64 / choice.terms.len().max(1) as f64;
        let continues = new >= 2 && choice.topic.iter().any(|(t, _)| topics[*t]);
        let adds: f64 = choice.topic.iter().filter(|(t, _)| !said[*t]).map(|(_, w)| w).sum();
        choice.candidate.score - choice::REDUNDANCY * 3.0 * repeated
            + if continues { choice::CONTINUES_TOPIC } else { 0.0 }
            + adds
    };
    let mut kept: Vec<&Candidate> = Vec::new();
    let mut used = 0usize;
    while !pool.is_empty() {
        let (index, best) = pool
            .iter()
            .enumerate()
            .map(|(i, c)| (i, value(c, &said, &topics)))
            .max_by(|(ia, a), (ib, b)| {
                a.total_cmp(b)
                    .then(pool[*ib].candidate.order.cmp(&pool[*ia].candidate.order))
            })
            .expect("a non-empty pool");
        let choice = pool.swap_remove(index);
        let candidate = choice.candidate;
        if best < choice::THRESHOLD && !candidate.certain {
            continue;
        }
        let cost = candidate_chars(candidate);
        if used + cost > budget && !kept.is_empty() {
            continue;
        }
        if kept
            .iter()
            .filter(|k| k.kind.section() == candidate.kind.section())
            .count()
            >= max_items
        {
            continue;
        }
        if kept
            .iter()
            .any(|k| k.kind == candidate.kind && jaccard(&k.terms, &candidate.terms) >= 0.6)
        {
            continue;
        }
        used += cost;
        for term in &choice.terms {
            said[*term] = true;
        }
        for (term, _) in &choice.topic {
            topics[*term] = true;
        }
        kept.push(candidate);
    }
    kept.sort_by_key(|c| c.order);
    kept
}

/// The Jaccard similarity of two term sets (what [`term_jaccard`] computes from texts).
fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = a.intersection(b).count() as f64;
    shared / ((a.len() + b.len()) as f64 - shared)
}

/// What the text says an artifact is: the clause mentioning it, without the reference and
/// the words pointing at it ("技术方案文档在 ART-001" -> "技术方案文档").
fn artifact_context(text: &str, reference: &str) -> String {
    static POINTER: LazyLock<Regex> =
        LazyLock::new(|| pattern(r"(?i)(\s|在|是|见|于|:|：|\(|（)+$|^(\s|:|：)+|\b(see|in|at|is|are|under|for)\s*$"));
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

/// What is left of a constraint or decision once a newer statement has changed what it said
/// about a subject ("预算是$500，必须在2周内完成" after "预算调整到$800" keeps "必须在2周内完成"):
/// a clause goes when it is about the newer statement's subject (`subject::detect`) and states
/// other values (`subject::values_differ`). A clause about two subjects ("the budget is $500
/// and the deadline is March 3") loses only its part about the changed one. `None` when
/// nothing is left.
fn without_outdated(item: &str, newer: &str) -> Option<String> {
    static CLAUSE: LazyLock<Regex> = LazyLock::new(|| pattern(r"[，,;；]\s*"));
    static AND: LazyLock<Regex> = LazyLock::new(|| pattern(r"\s+and\s+|并且|而且|同时"));
    let Some(changed) = subject::detect(newer) else {
        return Some(item.to_string());
    };
    let outdated = |part: &str| subject::detect(part) == Some(changed) && subject::values_differ(part, newer);
    // Each clause with the separator after it.
    let pieces = |text: &str, regex: &Regex| -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut start = 0;
        for found in regex.find_iter(text) {
            out.push((text[start..found.start()].to_string(), found.as_str().to_string()));
            start = found.end();
        }
        out.push((text[start..].to_string(), String::new()));
        out
    };
    let mut kept: Vec<(String, String)> = Vec::new();
    let mut changed_any = false;
    for (clause, sep) in pieces(item, &CLAUSE) {
        if !outdated(&clause) {
            kept.push((clause, sep));
            continue;
        }
        changed_any = true;
        let parts = pieces(&clause, &AND);
        let subjects: HashSet<&str> = parts.iter().filter_map(|(p, _)| subject::detect(p)).collect();
        if subjects.len() < 2 {
            continue;
        }
        let rest: Vec<String> = parts
            .into_iter()
            .filter(|(p, _)| !outdated(p))
            .map(|(p, _)| p)
            .collect();
        let joiner = if rest.iter().any(|p| p.chars().any(is_han)) {
            "，"
        } else {
            " and "
        };
        kept.push((rest.join(joiner), sep));
    }
    if !changed_any {
        return Some(item.to_string());
    }
    let text: String = kept.iter().map(|(clause, sep)| format!("{clause}{sep}")).collect();
    let text = text.trim().trim_end_matches(['，', ',', ';', '；', ' ']);
    if salience::content_words(text) == 0 {
        return None;
    }
    Some(salience::with_stop_of(capitalised(text), item))
}

/// Whether a newer statement outdates any part of an item ([`without_outdated`]).
fn outdates(newer: &str, item: &str) -> bool {
    without_outdated(item, newer).as_deref() != Some(item)
}

/// The items that a newer one leaves as they were or in part (see [`without_outdated`]).
fn drop_outdated(items: Vec<String>, newer: &str) -> Vec<String> {
    items
        .into_iter()
        .filter_map(|item| without_outdated(&item, newer))
        .collect()
}

/// Appends the new items of a list, dropping near-duplicates, keeping the newest `max`.
fn merge_list(old: Vec<String>, new: Vec<String>, max: usize) -> Vec<String> {
    let mut items: Vec<(String, HashSet<String>)> = old
        .into_iter()
        .map(|item| {
            let terms = term_set(&item);
            (item, terms)
        })
        .collect();
    for item in new {
        if item.trim().is_empty() {
            continue;
        }
        let terms = term_set(&item);
        if let Some(pos) = items
            .iter()
            .position(|(o, t)| o.trim().eq_ignore_ascii_case(item.trim()) || jaccard(t, &terms) >= 0.6)
        {
            // The newer wording wins and moves to the end (it is the most recent state).
            items.remove(pos);
        }
        items.push((item, terms));
    }
    let excess = items.len().saturating_sub(max);
    items.drain(..excess);
    items.into_iter().map(|(item, _)| item).collect()
}

/// Merges new content into a summary: the deterministic merge both engines' results go
/// through (an LLM's complete answer merges into nothing but itself).
pub fn merge(previous: SummaryContent, fresh: SummaryContent, max_items: usize) -> SummaryContent {
    // A newer statement about a subject outdates what was said of it before, in either
    // section: "预算调整到$800" ends "预算是$500" ("a user whose budget changed expects the
    // old figure gone").
    let mut decisions = previous.decisions;
    let mut constraints = previous.constraints;
    for decision in &fresh.decisions {
        decisions.retain(|d| {
            !(same_item(&d.what, &decision.what)
                || term_jaccard(&d.what, &decision.what) >= 0.5
                || outdates(&decision.what, &d.what))
        });
        constraints = drop_outdated(constraints, &decision.what);
        decisions.push(decision.clone());
    }
    for constraint in &fresh.constraints {
        constraints = drop_outdated(constraints, constraint);
        decisions.retain(|d| !outdates(constraint, &d.what));
        constraints = merge_list(constraints, vec![constraint.clone()], usize::MAX);
    }
    let excess = decisions.len().saturating_sub(max_items);
    decisions.drain(..excess);
    let excess = constraints.len().saturating_sub(max_items);
    constraints.drain(..excess);
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
    let done: Vec<HashSet<String>> = progress.iter().map(|p| term_set(p)).collect();
    next_actions.retain(|n| {
        let next = term_set(n);
        !done.iter().any(|p| jaccard(&next, p) >= 0.6) || fresh_next.contains(n)
    });
    SummaryContent {
        goal: if fresh.goal.is_empty() {
            previous.goal
        } else {
            fresh.goal
        },
        constraints,
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
        pattern(
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
        assert_eq!(stripe.what, "使用Stripe作为支付方案");
        assert!(stripe.why.contains("接入简单"), "{stripe:?}");
        assert_eq!(stripe.who, "David");
        assert_eq!(stripe.confidence, DecisionConfidence::High);
        let nextjs = out
            .decisions
            .iter()
            .find(|d| d.what.contains("Next.js"))
            .expect("the confirmed proposal");
        assert_eq!(nextjs.who, "user");
        assert_eq!(nextjs.what, "用Next.js和MongoDB");
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
        assert_eq!(d.what, "Go with Postgres");
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
        assert!(
            asks_for_summary("帮我recap一下今天的讨论"),
            "a Latin word glued to Chinese"
        );
        assert!(asks_for_summary("帮我总结一下今天的讨论"));
        assert!(asks_for_summary("Can you summarize where we are?"));
        assert!(asks_for_summary("quick recap please"));
        assert!(!asks_for_summary("the summary field is empty"));
    }

    fn chat(lines: &[(&str, &str)]) -> Vec<RuleMessage> {
        lines
            .iter()
            .enumerate()
            .map(|(i, (speaker, text))| msg(i as u32, "user", Some(speaker), text))
            .collect()
    }

    #[test]
    fn a_conversation_keeps_what_each_speaker_reported() {
        let messages = chat(&[
            ("Maria", "Hey John! Long time no see! How have you been?"),
            (
                "John",
                "Hey Maria! I went to a pottery workshop with my kids last Friday - it was so cool! Have you ever tried pottery?",
            ),
            ("Maria", "Wow, that's so awesome! You're such a great dad."),
            (
                "Maria",
                "I adopted a puppy from the shelter yesterday, her name is Coco. I'm taking her to the vet next week.",
            ),
            ("John", "Congrats! Coco looks adorable. I bet your family loves her."),
            ("John", "By the way, I'm planning a trip to the East Coast in July."),
            ("Maria", "Sounds amazing! Have fun and take care!"),
        ]);
        let read: usize = messages.iter().map(|m| char_count(&m.content)).sum();
        let out = summarize(&RulesInput {
            messages,
            max_share: 0.5,
            min_chars: 0,
            ..Default::default()
        });
        let points = format!("{:?}", [&out.progress[..], &out.next_actions[..]].concat());
        assert!(out.goal.is_empty() && out.decisions.is_empty(), "{out:?}");
        assert!(
            points.contains("John: Went to a pottery workshop with my kids last Friday"),
            "{points}"
        );
        assert!(
            !points.contains("so cool") && !points.contains("tried pottery"),
            "{points}"
        );
        assert!(
            points.contains("Maria: Adopted a puppy from the shelter yesterday"),
            "{points}"
        );
        assert!(points.contains("East Coast"), "{points}");
        for reaction in ["awesome", "great dad", "adorable", "Long time", "take care"] {
            assert!(!points.contains(reaction), "{reaction} in {points}");
        }
        // A fraction of the conversation, not all of it.
        let written: usize = out
            .progress
            .iter()
            .chain(&out.next_actions)
            .map(|p| char_count(p))
            .sum();
        assert!(written * 2 <= read, "{written} of {read}: {points}");
    }

    #[test]
    fn a_chinese_conversation_keeps_what_each_speaker_reported() {
        let messages = chat(&[
            ("小王", "嗨小李！好久不见！最近怎么样？"),
            (
                "小李",
                "哇，好久不见！我上周去杭州参加了一个摄影展，拍了很多西湖的照片。",
            ),
            ("小王", "太棒了！你拍的照片一定很好看。"),
            ("小王", "我最近在准备驾照考试，下个月考科目二。"),
            ("小李", "加油！你一定能过的。"),
        ]);
        let out = summarize(&RulesInput {
            messages,
            ..Default::default()
        });
        let points = format!("{:?}", [&out.progress[..], &out.next_actions[..]].concat());
        assert!(points.contains("小李：上周去杭州参加了一个摄影展"), "{points}");
        assert!(points.contains("驾照"), "{points}");
        for reaction in ["嗨", "太棒了", "一定很好看", "加油", "好久不见"] {
            assert!(!points.contains(reaction), "{reaction} in {points}");
        }
    }

    #[test]
    fn a_working_session_keeps_done_work_not_remarks() {
        let messages = vec![
            msg(0, "user", None, "The goal is to ship the billing page this week."),
            msg(
                1,
                "assistant",
                None,
                "I deployed the invoice service to staging yesterday.",
            ),
            msg(
                2,
                "assistant",
                None,
                "The weather here is lovely and the coffee machine is new.",
            ),
        ];
        let out = summarize(&input(messages));
        assert!(out.progress.iter().any(|p| p.contains("invoice service")), "{out:?}");
        assert!(!format!("{out:?}").contains("coffee"), "{out:?}");
    }

    #[test]
    fn a_confirmation_decides_only_the_proposal_it_answers() {
        let decided = summarize(&input(vec![
            msg(0, "cto", Some("David"), "I suggest we use Postgres for the ledger."),
            msg(1, "user", None, "Sounds good, let's do that."),
        ]));
        assert!(
            decided
                .decisions
                .iter()
                .any(|d| d.what == "Use Postgres for the ledger"),
            "{decided:?}"
        );
        let unrelated = summarize(&input(vec![
            msg(0, "cto", Some("David"), "I suggest we use Postgres for the ledger."),
            msg(1, "user", None, "I will check the invoices tomorrow."),
            msg(
                2,
                "cto",
                Some("David"),
                "The staging server was restarted this morning.",
            ),
            msg(3, "user", None, "Sounds good, let's do that."),
        ]));
        assert!(unrelated.decisions.is_empty(), "{unrelated:?}");
        let remark = summarize(&input(vec![
            msg(
                0,
                "user",
                Some("Ann"),
                "It felt great to see we could make a difference.",
            ),
            msg(1, "user", Some("Bo"), "Agreed!"),
        ]));
        assert!(remark.decisions.is_empty(), "{remark:?}");
    }

    #[test]
    fn a_full_section_keeps_its_most_valuable_items() {
        let mut lines = vec![("Ann", "I got a new job at the Seattle aquarium last week!".to_string())];
        for i in 0..8 {
            lines.push(("Ann", format!("Also the plants on shelf {i} need some water.")));
        }
        let messages: Vec<RuleMessage> = lines
            .iter()
            .enumerate()
            .map(|(i, (speaker, text))| msg(i as u32, "user", Some(speaker), text))
            .collect();
        let out = summarize(&RulesInput {
            max_items: 2,
            ..input(messages)
        });
        assert!(out.progress.len() <= 2, "{out:?}");
        assert!(out.progress.iter().any(|p| p.contains("aquarium")), "{out:?}");
    }

    #[test]
    fn a_worry_in_a_session_without_decisions_is_a_risk() {
        let out = summarize(&input(vec![
            msg(0, "user", None, "We must finish the billing migration by June."),
            msg(
                1,
                "user",
                None,
                "I'm worried the old invoices might not import cleanly.",
            ),
        ]));
        assert!(out.risks.iter().any(|r| r.contains("invoices")), "{out:?}");
        let zh = summarize(&input(vec![
            msg(0, "user", None, "我们下周要和供应商谈合同。"),
            msg(1, "user", None, "我担心对方会临时涨价。"),
        ]));
        assert!(zh.risks.iter().any(|r| r.contains("涨价")), "{zh:?}");
    }

    #[test]
    fn the_speaker_is_left_out_only_where_the_statement_still_reads_the_same() {
        let said = |text: &str| {
            let message = msg(0, "user", Some("Jolene"), text);
            attributed(&message, text, 140)
        };
        assert_eq!(said("I went hiking last week."), "Jolene: Went hiking last week.");
        assert_eq!(said("I just joined a gym."), "Jolene: Just joined a gym.");
        assert_eq!(said("I've been studying a lot."), "Jolene: Been studying a lot.");
        assert_eq!(
            said("I'm thinking of working with trans people."),
            "Jolene: Thinking of working with trans people."
        );
        assert_eq!(said("我上周去了杭州。"), "Jolene：上周去了杭州。");
        assert_eq!(said("我们下周发布。"), "Jolene：我们下周发布。");
        assert_eq!(said("我妈妈上个月做了手术。"), "Jolene：我妈妈上个月做了手术。");
        assert_eq!(said("我的电脑坏了。"), "Jolene：我的电脑坏了。");
        assert_eq!(said("我刚买了车。"), "Jolene：刚买了车。");
        // A plan, a habit or a need without its subject would read as advice.
        assert_eq!(said("I'll keep pushing forward."), "Jolene: I'll keep pushing forward.");
        assert_eq!(
            said("I use essential oils and soft music."),
            "Jolene: I use essential oils and soft music."
        );
        assert_eq!(
            said("I need a better way to focus."),
            "Jolene: I need a better way to focus."
        );
        // What the speaker has or is stays whole.
        assert_eq!(said("I have a dog named Max."), "Jolene: I have a dog named Max.");
        assert_eq!(said("I'm a nurse at the clinic."), "Jolene: I'm a nurse at the clinic.");
    }

    #[test]
    fn a_session_opened_on_what_to_settle_has_that_goal() {
        let zh = summarize(&input(vec![
            msg(
                0,
                "user",
                None,
                "我们来定一下新版官网的设计方向。预算从500美元调整到800美元。",
            ),
            msg(1, "designer", Some("Elena"), "我建议用简洁的深色主题，配合大图。"),
            msg(2, "user", None, "可以，就这么定了。"),
        ]));
        assert!(zh.goal.contains("设计方向"), "{zh:?}");
        assert!(
            zh.decisions.iter().any(|d| d.what == "用简洁的深色主题，配合大图"),
            "{zh:?}"
        );
        let en = summarize(&input(vec![
            msg(0, "user", None, "Let's decide the pricing for the launch."),
            msg(
                1,
                "cfo",
                Some("Mia"),
                "I recommend a $20 monthly plan, because churn is high.",
            ),
            msg(2, "user", None, "Sounds good, let's do that."),
        ]));
        assert!(en.goal.contains("pricing"), "{en:?}");
        assert!(
            en.decisions
                .iter()
                .any(|d| d.what == "A $20 monthly plan" && d.why == "churn is high"),
            "{en:?}"
        );
        // A chat that opens on news has no goal.
        let chat = summarize(&input(vec![msg(
            0,
            "user",
            Some("小王"),
            "我上周去杭州出差了，顺便去了西湖。",
        )]));
        assert!(chat.goal.is_empty(), "{chat:?}");
    }

    #[test]
    fn a_changed_figure_or_choice_outdates_what_was_said_before() {
        let first = summarize(&input(vec![
            msg(
                0,
                "user",
                None,
                "今天要定课程平台的技术方案。预算是$500，必须在2周内完成。",
            ),
            msg(1, "user", None, "我们决定前端用Next.js，因为团队熟悉。"),
        ]));
        assert!(first.constraints.iter().any(|c| c.contains("$500")), "{first:?}");
        let second = summarize(&RulesInput {
            previous: Some(first),
            ..input(vec![
                msg(2, "user", None, "预算调整到$800。"),
                msg(3, "user", None, "我们决定前端改用Vue，因为招人容易。"),
            ])
        });
        assert_eq!(
            second.constraints,
            ["必须在2周内完成。", "预算调整到$800。"],
            "{second:?}"
        );
        let frontends: Vec<&str> = second.decisions.iter().map(|d| d.what.as_str()).collect();
        assert_eq!(frontends, ["前端改用Vue"], "{second:?}");

        let first = summarize(&input(vec![msg(
            0,
            "user",
            None,
            "The goal is to plan the launch. The budget is capped at $500 and the deadline is March 3.",
        )]));
        let second = summarize(&RulesInput {
            previous: Some(first),
            ..input(vec![msg(1, "user", None, "The budget is now $800.")])
        });
        let all = second.constraints.join(" | ");
        assert!(!all.contains("$500"), "{all}");
        assert!(all.contains("March 3") && all.contains("$800"), "{all}");
        // Within one session too, the later figure stands.
        let once = summarize(&input(vec![
            msg(
                0,
                "user",
                None,
                "The goal is to plan the launch. The budget must stay under $500.",
            ),
            msg(1, "user", None, "Update: the budget must stay under $800 now."),
        ]));
        assert!(!once.constraints.join(" ").contains("$500"), "{once:?}");
        // A decision after a constraint of the same session outdates it too.
        let decided = summarize(&input(vec![
            msg(
                0,
                "user",
                None,
                "今天要定课程平台的技术方案。预算是$500，必须在2周内完成。",
            ),
            msg(1, "user", None, "我们决定把预算提高到$800，因为要加视频。"),
        ]));
        assert!(!decided.constraints.join(" ").contains("$500"), "{decided:?}");
        assert!(decided.decisions.iter().any(|d| d.what.contains("$800")), "{decided:?}");
    }

    #[test]
    fn only_the_clause_about_the_changed_subject_goes() {
        assert_eq!(
            without_outdated("预算是$500，必须在2周内完成。", "预算调整到$800"),
            Some("必须在2周内完成。".to_string())
        );
        assert_eq!(
            without_outdated("The budget is $500 and the deadline is March 3.", "The budget is $800"),
            Some("The deadline is March 3.".to_string())
        );
        assert_eq!(without_outdated("预算是$500。", "预算调整到$800"), None);
        // The same figure again, another subject, or no figure at all: nothing is outdated.
        for newer in ["预算还是$500", "上线时间推迟到3月15日", "预算要控制好"] {
            assert_eq!(
                without_outdated("预算是$500，必须在2周内完成。", newer).as_deref(),
                Some("预算是$500，必须在2周内完成。"),
                "{newer}"
            );
        }
    }

    #[test]
    fn a_models_answer_keeps_only_the_latest_figure() {
        // The LLM engine's complete answer goes through the same merge, into nothing.
        let answer = SummaryContent {
            constraints: vec!["预算是$500，必须在2周内完成".into(), "预算调整到$800".into()],
            ..Default::default()
        };
        let merged = merge(SummaryContent::default(), answer, 12);
        assert_eq!(merged.constraints, ["必须在2周内完成", "预算调整到$800"]);
    }
}
