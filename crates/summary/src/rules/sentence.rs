//! Sentences: the pattern families a sentence is classified by, its cleaning, attribution
//! and the decision, goal or candidate it becomes.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use thinkus_common::model::{Decision, DecisionConfidence};
use thinkus_common::text::{
    is_han, is_irregular_past, is_table_rule, pattern, sentences, summarize_to, table_cells, tagged_words, term_set,
    terms,
};

use crate::salience::{self, capitalised};

use super::input::RuleMessage;

/// The text without a lead `lead` matches ("I suggest we", "We decided to"), capitalised,
/// when at least `min_words` content words are left; otherwise the text as it was.
pub(super) fn without_lead(text: &str, lead: &Regex, min_words: usize) -> String {
    let rest = lead.replace(text.trim(), "");
    if salience::content_words(&rest) < min_words {
        return text.trim().to_string();
    }
    capitalised(&rest)
}

/// What a sentence says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
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
    pub(super) fn weight(self) -> f64 {
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
    pub(super) fn section(self) -> Kind {
        match self {
            Kind::Point => Kind::Progress,
            other => other,
        }
    }
}

pub(super) static LEADING_NOISE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(?:(?:hey|hi|hello|wow|woah|whoa|woohoo|yeah|yep|yup|yes|yay|nope|no|oh|ooh|aw+|ah|cool|nice|great|awesome|amazing|sure|sure thing|ok|okay|haha+|lol|well|so|hmm+|um+|thanks(?: a lot| so much)?|thank you(?: so much)?|congrats|congratulations|definitely|totally|absolutely|right|true|indeed|good|sounds good|got it|oh man|man|gosh|omg|btw|by the way|anyway|anyways|honestly|actually|guess what|you know what|exactly|of course|for sure|oops|ugh|phew|好的|好|嗯+|哈+|谢谢|对|是的|没问题|行|哇|哇塞|天哪)(?:\s+[A-Z][a-z]+)?\s*[,，!！.。~…:：;；-]+\s*|(?:嗨|嘿|哈喽|哈啰|你好|您好|早上好|晚上好)\p{Han}{0,3}\s*[,，!！.。~…:：;；-]+\s*)+",
    )
});
/// Discourse openers that only connect: "By the way,", "Since we last spoke,", "对了，".
pub(super) static LEAD_IN: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(?:(?:by the way|btw|anyway|anyways|also|plus|oh|and|but|so|well|actually|honestly|to be honest|you know|speaking of which|on another note|in other news|since (?:we|i) last (?:spoke|talked|chatted|caught up|saw each other)|since our last (?:chat|talk|conversation)|since we (?:spoke|talked|chatted) last)\s*[,:-]?\s+)+|^(?:对了|顺便说一下|话说|另外)[，,]\s*",
    )
});
pub(super) static TRAILING_VOCATIVE: LazyLock<Regex> = LazyLock::new(|| pattern(r",\s*[A-Z][a-z]+\s*([!.?])?$"));
pub(super) static LEADING_VOCATIVE: LazyLock<Regex> = LazyLock::new(|| pattern(r"^[A-Z][a-z]+\s*[,!]\s+"));

pub(super) static CHITCHAT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(how (are|have|was|is|did|do) you|how'?s it going|what'?s up|good to (see|hear|talk|chat)|great to (see|hear|talk|chat)|long time no see|nice to (meet|see|hear|talk|chat)|been (ages|a while|a few days|forever) since|it'?s been (ages|a while|a few days|so long) since|take care|bye|see (you|ya)|talk (to you )?(soon|later)|catch you|have a (good|great|nice|awesome|wonderful|fun)|thanks for|thank you for|you too|me too|same here|no problem|no worries|anytime|my pleasure|you'?re welcome|that'?s (so )?(great|awesome|cool|amazing|wonderful|nice|fantastic)|sounds (great|awesome|fun|amazing|cool|nice|like)|i'?m (so )?(glad|happy) (for|to hear)|好久不见|你好|再见|辛苦了|太棒了|真不错)",
    )
});
/// A reaction to the other party rather than something reported: "That's so cool", "You're
/// so dedicated", "Can't wait to see it", "太厉害了", an acknowledgement ("收到，…我记下了") or a
/// sign-off ("Ok 先这样 我去见投资人了").
pub(super) static REACTION: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(that'?s|this is|these are|those are|(i )?(totally |completely )?(get|understand|know|can imagine) (how|what|that feeling|the feeling|it'?s|you)|(i'?m )?(so )?sorry (to hear|about|for|that)|it'?s (so |really )?(great|awesome|cool|amazing|wonderful|nice|fantastic|good|lovely|inspiring|beautiful) (to|that|how|you)|sounds|looks|what a|congrat|keep (it up|going|up the|rocking|pushing)|you'?re|you are|you have|you'?ve|you must|your |i bet|i'?m sure you|i hope you|hope you|can'?t wait to (see|hear)|let me know|i'?d love to (see|hear)|love (that|it|the|your|this|how)|i love (that|it|your|how|the way)|good luck|best of luck|wishing you|enjoy|glad (to|you|it|that)|thanks|thank you)|^(太(好|棒|厉害)了|真(好|棒|不错|厉害)|听起来|看起来|你(真|太)|加油|祝你|恭喜|谢谢|不客气|没关系|收到|好的|明白|了解|知道了|记下了|没问题)|^((ok|okay|好|行)[\s，,]*)?(先这样|就这样|回头(聊|再说)|晚安|拜拜)",
    )
});

pub(super) static DECISION: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"决定|定了|确定(用|采用|了|为|使用)|就用|就选|选择了|选定|采用|拍板|敲定|最终(方案|选)|统一用|改用|选用|我们用|方案是",
        ),
        pattern(
            r"(?i)\b(we('ll| will) (go with|use|build|switch to|stick with)|let'?s (go with|use|pick|choose|stick with|switch to)|we (decided|chose|picked|agreed|settled on|went with|are going with)|(i|we)'?ve decided|i decided|decided to|decision (is|was)|we'?re (going with|switching to)|final (choice|call|decision)|settled on|opted for|chose to)\b",
        ),
    ]
});
pub(super) static CONSTRAINT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"预算|经费|成本上限|不能超过|不超过|最多|至少|上限|必须|务必|一定要|截止|期限|之前(完成|上线|交付|发布)|(上线|交付|发布)(时间|日期)|合规|只能用|不能用|需要支持|要求",
        ),
        pattern(
            r"(?i)\b(budget|deadline|due (by|on|date)|no later than|at most|at least|must|has to|required|requirement|cap(ped)? at|limit(ed)? to|cannot exceed|can'?t exceed|only use|compliance|gdpr|must support|launch (by|date|on)|ship (by|before)|within \d+ (days|weeks|months))\b",
        ),
    ]
});
pub(super) static RISK: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"风险|隐患|担心|担忧|可能会(有|出|导致|影响|失败|超)|恐怕|瓶颈|版权问题|来不及|不稳定|有问题|出问题|容易出错",
        ),
        pattern(
            r"(?i)\b(risks?|risky|concern(ed|s)?|worr(y|ied|ies)|might (fail|break|not|be hard)|could (fail|break|be a problem)|may not|bottleneck|danger|issue is|problem is|afraid (that|of)|not sure (it|we) can|struggl(e|ing)|stressful)\b",
        ),
    ]
});
pub(super) static OPEN_QUESTION: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(r"是否|要不要|需不需要|还没(确定|定|决定)|待定|待确认|不确定|有待|怎么(处理|办|解决)|如何(处理|解决)"),
        pattern(
            r"(?i)\b(should we|do we (need|want)|whether|not sure (whether|if|how|what)|tbd|to be decided|open question|unclear|undecided|still need to (decide|figure out|confirm)|how (should|do) we|which (one|option) (should|do))\b",
        ),
    ]
});
pub(super) static PROGRESS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"完成了|做完|已经(完成|做好|写好|上线|发布|实现|修复|搞定|开始|确定|提交|部署)|搞定了|上线了|发布了|实现了|写好了|修好了|修复了|开始了|提交了|部署了|交付了|跑通了|做好了|画好了|参加了|去了|刚(刚)?(完成|做|去|开始|参加|买|搬|拿到)",
        ),
        pattern(
            r"(?i)(\b(i|we)( \w+ly| just| also| finally| recently| actually| even| already| both)* (went|got|made|took|began|started|did|ran|saw|met|bought|built|wrote|found|gave|won|held|left|came|became|brought|sold|taught|read|spoke|drove|flew|joined|finished|completed|attended|visited|signed|adopted|painted|volunteered|learned|tried|created|launched|shipped|fixed|deployed|implemented|released|set up|moved|graduated|received|decided|had|lost|hosted|organized|published|passed|raised|donated|planted|baked|cooked|played|performed|traveled|travelled|went|camped|hiked|registered|enrolled|applied|opened|started|picked|took up|\w+ed)\b|\b(i|we)('ve| have)( \w+ly| just| also| finally| recently| already)* (been \w+ing|\w+ed|done|made|taken|begun|got|gotten|seen|met|built|written|found|won|become|brought|sold|taught|read|run|joined|started|finished|completed)\b|\b(i|we)'?(m| am|'re| are) (now |currently |really |also |still |actually )*(\w+ing)\b|^(just |recently |finally |also )*(been (busy|\w+ing)|started|joined|finished|got|went|took|made|signed up|wrapped up)\b|\b(done|completed|finished|shipped|deployed|merged|implemented|fixed)\b)",
        ),
    ]
});
pub(super) static PROGRESS_EXCLUDE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)\b(i|we)'?(m| am|'re| are) (\w+ly )*(thinking|wondering|feeling|hoping|looking forward|kidding|joking|saying|guessing|trying to remember|curious|telling|asking|talking|going to|gonna|planning)\b|\bi'?m (so |really )?(glad|happy|sorry|sure|excited|proud|thankful|grateful)\b|\b(i|we) (love|like|hope|think|feel|believe|guess|wish|agree|mean|know|bet)\b",
    )
});
pub(super) static NEXT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"下一步|接下来|之后(要|会|再)|待会|明天|下周|计划|打算|准备(做|开始|去|好)|将会|回头(再|我)|待办|需要(完成|确认|准备|联系|补充)|由.{1,8}(负责|完成|跟进)|我(会|来|去)|希望(能|可以)|想要|目标是",
        ),
        pattern(
            r"(?i)\b(next step|next,|next week|tomorrow|i'?ll|i will|we'?ll|we will|going to|gonna|plan(ning)? to|plans? to|intend to|to-?do|need to|needs to|will (do|start|send|finish|follow|check|review|handle|prepare|look)|follow up|hoping to|hope to|want to|wanna|aim(ing)? to|looking (forward )?to|trying to|thinking (about|of)|considering|signed up for|can'?t wait to|gotta)\b",
        ),
    ]
});
pub(super) static GOAL: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"目标是|目的是|这次(要|想|来)|今天(要|想|来)|主要(是|想)|我想(做|要|讨论|聊)|我们要(做|讨论|确定)|(我们|咱们)来(定|确定|敲定|讨论|商量)|帮我(做|设计|规划|写|看)|(讨论|确定|敲定|商量)(一下)?.{2,20}(方案|设计|计划|架构|方向|需求|预算|排期)",
        ),
        pattern(
            r"(?i)\b(the goal is|our goal|my goal (for|with|in) (this|the|today)|goal for (today|this session)|the aim is|we need to (build|design|plan|decide|figure out)|i want to (build|create|make|launch|start|design|plan)|let'?s (discuss|talk about|plan|design|figure out|decide|settle|agree on|finalize)|today we('ll| will)? (discuss|plan|work on))\b|(?i)(^|\b(can|could|would) you |\bplease )help me (build|design|plan|write|with)\b",
        ),
    ]
});
pub(super) static REASON: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(，|,|;|；|\s)?(因为|由于|理由是|原因是|考虑到|为了|\bbecause\b|\bsince\b|\bdue to\b|\bso that\b|\bas it\b|\bgiven that\b|\bthe reason is\b)",
    )
});
pub(super) static LOW_CONFIDENCE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)暂定|先用|暂时|可能|也许|试试|\b(tentative(ly)?|for now|maybe|probably|might|for the time being|let'?s try)\b",
    )
});
pub(super) static HIGH_CONFIDENCE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(r"(?i)决定|定了|确定|拍板|敲定|最终|\b(decided|final|settled|definitely|confirmed|agreed)\b")
});
pub(super) static CONFIRMATION: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(好的?|可以|行|同意|没问题|就这么(定|办)了?|就这样吧?|听你的|按你说的|sounds good|agreed|deal|ok(ay)?,? let'?s do (it|that)|let'?s do (it|that)|go (with|for) (it|that)|yes,? (let'?s|go)|perfect,? let'?s)(\s*[,，.。!！~]|\s*$)",
    )
});
pub(super) static PROPOSAL: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)建议|推荐|可以考虑|不如|方案|\b(i suggest|i recommend|how about|what about|my suggestion|i propose|option)\b|(^|[,;:]\s*)(maybe |then |so )?we could\b",
    )
});
pub(super) static ARTIFACT_REF: LazyLock<Regex> = LazyLock::new(|| pattern(r"\b(art_[0-9a-f]{32}|ART-\d{1,6})\b"));
/// "I", "I'm" or "I've" opening an English statement, then the adverbs and the word after it.
pub(super) static FIRST_PERSON_LEAD: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"^(I'm|I am|I've|I have|I)\s+(?:(?:\w+ly|just|also|finally|even|already|still|never|both|all)\s+)*([A-Za-z']+)",
    )
});
/// How a proposal is put, before what it proposes: "I suggest we", "我建议".
pub(super) static PROPOSING: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(?:(?:i|we) (?:suggest|recommend|propose)(?: that)?(?: we)?(?: should)?|(?:(?:maybe|then|so) )?we could)\s+|^(?:我|我们)?(?:建议|推荐|提议)(?:我们|大家)?(?:可以|还是)?[，,：:]?\s*",
    )
});
/// A markdown table read as sentences: each row of a table with a header (a `|` line followed by
/// a `|---|` line) becomes one line naming its cells by their column ("Segment: Lapsed · Rough
/// size: ~2,500"), so that a row chosen for the summary says what its cells are; the header and
/// the rule line go. The cells are joined by a mark that ends no sentence nor clause, so a row
/// is read as one sentence whatever its cells hold. Lines that are no such table are kept as
/// they are.
pub(super) fn tables_as_rows(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('|') {
        return std::borrow::Cow::Borrowed(text);
    }
    let rows: Vec<Option<Vec<&str>>> = text.lines().map(table_cells).collect();
    let is_rule = |i: usize| {
        rows.get(i)
            .and_then(Option::as_ref)
            .is_some_and(|cells| is_table_rule(cells))
    };
    let starts_a_table = |i: usize| rows[i].is_some() && !is_rule(i) && is_rule(i + 1);
    if !(0..rows.len()).any(starts_a_table) {
        return std::borrow::Cow::Borrowed(text);
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < lines.len() {
        let Some(header) = rows[i].as_ref().filter(|_| starts_a_table(i)) else {
            out.push_str(lines[i]);
            out.push('\n');
            i += 1;
            continue;
        };
        let zh = header.iter().any(|h| h.chars().any(is_han));
        let colon = if zh { "：" } else { ": " };
        let between = " · ";
        i += 2;
        while let Some(Some(cells)) = rows.get(i) {
            let row: Vec<String> = cells
                .iter()
                .enumerate()
                .filter(|(_, cell)| !cell.is_empty())
                .map(|(at, cell)| match header.get(at).filter(|h| !h.is_empty()) {
                    Some(name) => format!("{name}{colon}{cell}"),
                    None => cell.to_string(),
                })
                .collect();
            if !row.is_empty() {
                out.push_str(&row.join(between));
                out.push('\n');
            }
            i += 1;
        }
    }
    if !text.ends_with('\n') {
        out.pop();
    }
    std::borrow::Cow::Owned(out)
}

/// What a confirmed proposal decides: the proposal without how it was put ("I suggest we use
/// Postgres" -> "Use Postgres", "我建议用深色主题" -> "用深色主题"), as the one who decided is
/// the one who confirmed.
pub(super) fn proposed(proposal: &str) -> String {
    without_lead(proposal, &PROPOSING, 1)
}

/// Whether a word reads as a verb's past form or participle ("joined", "went", "been"): a
/// regular "-ed" form, an irregular one ([`is_irregular_past`]), or one of the auxiliaries and
/// rarer forms that table leaves out.
pub(super) fn is_past(word: &str) -> bool {
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
pub(super) fn after_own_subject(text: &str) -> Option<usize> {
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

pub(super) fn any_match(patterns: &[Regex], text: &str) -> bool {
    patterns.iter().any(|p| p.is_match(text))
}

/// Strips list marks (a summary lists its items under its own), greetings, interjections,
/// lead-ins and vocatives around a sentence.
pub(super) fn clean(sentence: &str) -> String {
    let mut text = thinkus_common::text::without_list_mark(sentence.trim()).to_string();
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
pub(super) fn strip_vocative(text: &str) -> String {
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
pub(super) fn who(message: &RuleMessage) -> String {
    match &message.speaker {
        Some(speaker) if !speaker.trim().is_empty() => speaker.trim().to_string(),
        _ => message.role.clone(),
    }
}

pub(super) fn is_question(sentence: &str) -> bool {
    sentence.ends_with('?') || sentence.ends_with('？') || sentence.ends_with('吗')
}

/// The item text: the cleaned sentence, attributed to a named speaker ("I went…" from Maria
/// reads "Maria: Went…", [`after_own_subject`]).
pub(super) fn attributed(message: &RuleMessage, sentence: &str, max_chars: usize) -> String {
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
pub(super) struct Candidate {
    pub(super) kind: Kind,
    pub(super) text: String,
    pub(super) decision: Option<Decision>,
    /// The family's weight and the sentence's salience.
    pub(super) score: f64,
    /// A reported event (a key point of a working session is kept only when it is one).
    pub(super) event: bool,
    /// Named by a pattern family in a working session: kept whatever its value, within the
    /// budget.
    pub(super) certain: bool,
    /// The content terms of the item, and those that name its topic.
    pub(super) terms: HashSet<String>,
    pub(super) topic: HashSet<String>,
    pub(super) order: usize,
}

impl Candidate {
    pub(super) fn new(
        kind: Kind,
        text: String,
        decision: Option<Decision>,
        score: f64,
        names: &HashSet<String>,
    ) -> Self {
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

pub(super) fn classify(sentence: &str, user_authored: bool) -> Option<Kind> {
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
pub(super) fn decision_of(sentence: &str, next_sentence: Option<&str>, who: String) -> Decision {
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
    let what = thinkus_common::text::without_list_mark(&what);
    Decision {
        what: summarize_to(&decided(what), 120),
        why: summarize_to(&why, 120),
        who,
        confidence,
    }
}

/// What a decision decides, without the words that announce it under a "Decisions" heading:
/// "We decided to use Postgres" -> "Use Postgres", "我们决定使用Stripe" -> "使用Stripe".
pub(super) fn decided(what: &str) -> String {
    static ANNOUNCED: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)^(?:(?:so|ok|okay|then|finally),?\s+)?(?:we|i)(?:'ve| have)?(?: finally| just)? (?:decided|agreed|chose|opted|settled) (?:to|on)\s+|^(?:所以|那|那么)?(?:我们|我|大家)?(?:最终|最后|已经)?(?:决定|商定|确定)(?:了)?[，,：:]?\s*",
        )
    });
    without_lead(what, &ANNOUNCED, 2)
}

pub(super) fn goal_of(messages: &[RuleMessage]) -> Option<String> {
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
