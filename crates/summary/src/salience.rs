//! What makes a sentence worth a place in a summary, for the summary rules, in Chinese and
//! English; and how a kept sentence is shortened without losing what it says.
//!
//! A sentence scores for what it reports: a first-person event ("I went", "我们上周完成了"),
//! a plan, a date or time ("yesterday", "上周"), names and numbers, and its content words;
//! it loses for addressing the listener ("you're so…"), for starting on a vague subject with
//! little content ("It was…"), for reminiscing or describing habits, and for words that
//! only react (great, love, feel…). The session's own vocabulary weighs in when sentences
//! are chosen: a word the session keeps coming back to, or that opened it, is more likely
//! what the session was about ([`TermStats`]).
//!
//! Shortening ([`compress`]) drops what a reader of a summary does not need: a question
//! tacked on a statement ("… - want to see a pic?", [`statement_head`]), an evaluative tail ("…- it was so
//! cool"), closing clauses that name no topic ("…, had a blast", "…，真的很开心"), opinion
//! openers ("I think"), hedges and intensifiers ("really", "kinda", "真的"), fillers ("其实",
//! "说实话") and final particles ("吧", "呢").

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::{Captures, Regex};
use thinkus_common::text::{is_stopword, pattern, terms, words};

/// The text with its first letter a capital, as a summary's item starts ("went hiking" ->
/// "Went hiking"); other scripts stay as they are.
pub(crate) fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) if first.is_ascii_lowercase() => first.to_ascii_uppercase().to_string() + chars.as_str(),
        _ => text.to_string(),
    }
}

/// Weights of a sentence's signals. Chosen on conversations with annotated events (the
/// summary bench) and rounded; each is a plain reading of what a summary keeps.
mod weight {
    /// A first-person (or own family's) event in the past: the core of a summary.
    pub const EVENT: f64 = 1.8;
    /// A plan or intention.
    pub const PLAN: f64 = 1.25;
    /// A date or a time ("last week", "上周").
    pub const TIME: f64 = 1.9;
    /// Per name (capitalised word that is not the first), up to three.
    pub const NAME: f64 = 0.9;
    pub const NUMBER: f64 = 0.3;
    /// Per content word, up to ten.
    pub const TERM: f64 = 0.1;
    /// About the listener and not the speaker.
    pub const LISTENER: f64 = -1.2;
    /// A vague subject ("It was…", "That…") with little content.
    pub const VAGUE: f64 = -0.75;
    /// The speaker as subject ("I…", "We…", "我…", or an elided "Been busy…").
    pub const SPEAKER_SUBJECT: f64 = 0.9;
    /// The first statement of a message (its news usually comes first).
    pub const FIRST_OF_MESSAGE: f64 = 0.1;
    /// In the opening quarter of the session (what the session was about comes early).
    pub const OPENING: f64 = 0.85;
    /// Right after the other party's question: mostly an answer to a detail.
    pub const AFTER_QUESTION: f64 = -0.6;
    /// Times the share of words that carry no topic (great, love, feel…).
    pub const GENERIC_SHARE: f64 = -1.0;
    /// Presents something ("Here's…", "This is…", "这是…").
    pub const PRESENTING: f64 = 0.6;
    /// Reminiscence ("when I was a kid", "years ago", "小时候").
    pub const DISTANT_PAST: f64 = -0.3;
    /// Habits ("usually", "every weekend", "经常").
    pub const HABIT: f64 = -0.45;
}

/// How a chosen sentence's new words count, on top of its own score.
pub mod choice {
    /// Each new topic word is worth this much...
    pub const TERM_BASE: f64 = 0.08;
    /// ... plus this much per other message using it (up to four)...
    pub const TERM_PER_REPEAT: f64 = 0.15;
    /// ... plus this much when the session's opening fifth uses it...
    pub const TERM_OPENING: f64 = 0.22;
    /// ... all times this.
    pub const TERM_SCALE: f64 = 0.88;
    /// Times three times the share of a sentence's words already in the summary.
    pub const REDUNDANCY: f64 = 0.7;
    /// A sentence that continues a chosen topic with new words.
    pub const CONTINUES_TOPIC: f64 = 0.7;
    /// Below this value a sentence is not worth its place.
    pub const THRESHOLD: f64 = 1.27;
}

static FIRST_PERSON: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"(?i)\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'll|our|ours|us)\b|我"));

static EVENT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(concat!(
        r"(?i)\b(i|we|my(?: \w+){1,2}|our(?: \w+){1,2})\b(?: (?:\w+ly|just|also|finally|even|already|both|all|actually|recently))* ",
        r"(?:went|got|made|took|began|started|did|ran|saw|met|bought|built|wrote|found|gave|won|held|left|came|became|brought|sold|taught|read|spoke|drove|flew|had|lost|kept|heard|grew|sang|swam|rode|ate|joined|\w+ed)\b",
        r"|\b(?:i|we)(?:'ve| have| had)(?: (?:\w+ly|just|also|finally|recently|already|been))* (?:\w+ed|\w+en|done|made|got|gotten|begun|met|built|found|won|become|brought|taught|read|run|been)\b",
        r"|\b(?:i|we)'?(?:m| am|'re| are) (?:now |currently |still |also |finally )*\w+ing\b",
        r"|\b(?:i|we) (?:was|were) (?:\w+ly |just |still |also )*\w+ing\b",
        r"|(?:我|我们)[^，。！？,.!?]{0,12}(?:了|过)|已经|刚(?:刚|才)?(?:去|做|完成|开始|参加|买|搬|拿到|结束|回来)",
    ))
});

/// A statement whose subject, the speaker, is left out: "Been busy volunteering", "Just
/// started aerial yoga".
static ELIDED_EVENT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(concat!(
        r"(?i)^(?:(?:just|recently|finally|also|even|actually) )*",
        r"(?:been|went|got|had|took|made|started|began|finished|joined|tried|bought|signed|visited|attended|found|met|saw|did|ran|learned|picked|won|lost|moved|adopted|received|spent|completed|wrapped|hit|hosted|organized|volunteered|decided|painted|wrote|read|gave|came|left|booked|launched|released|dropped|set up|checked out)\b",
    ))
});

static PLAN: LazyLock<Regex> = LazyLock::new(|| {
    pattern(concat!(
        r"(?i)\b(i'?ll|i will|we'?ll|we will|going to|gonna|plan(ning)? to|planning|plans? to|intend to|hoping to|hope to|want to|wanna|aim(ing)? to|thinking (about|of)|considering|signed up|can'?t wait (to|for)|looking forward to|about to|next (week|month|year|up)|off to|upcoming|getting ready (to|for)|preparing (to|for))\b",
        r"|打算|计划|准备|下周|明天|下个月|将要|要去|想去|即将|过几天",
    ))
});

static TIME: LazyLock<Regex> = LazyLock::new(|| {
    pattern(concat!(
        r"(?i)\b(yesterday|today|tonight|tomorrow|(last|this past|past|this|next|coming) (week|weekend|month|year|night|summer|winter|spring|fall|autumn|monday|tuesday|wednesday|thursday|friday|saturday|sunday|fri|sat|sun|mon|tues?|wed|thu|thurs)",
        r"|(a few|a couple( of)?|several|two|three|four|five|\d+) (days|weeks|months|years) (ago|back)|(a|one) (day|week|month|year) ago|recently|lately|the other (day|night|week)|over the weekend",
        r"|on (monday|tuesday|wednesday|thursday|friday|saturday|sunday)|in (january|february|march|april|may|june|july|august|september|october|november|december)|on the \d+(st|nd|rd|th)?|for the first time|since (we|i) last)\b",
        r"|昨天|前天|今天|今晚|上周|上星期|上个月|上个?周末|前几天|最近|刚才|刚刚|这周|本周|下周|下个月|明天|去年|\d+月\d+[日号]",
    ))
});

static LISTENER: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?i)\b(you|your|you're|you've|yours|yourself)\b|你|您"));
static VAGUE_START: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?i)^(it|that|this|they|those|these)\b|^(这|那|它)"));
static SPEAKER_START: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?i)^(i|my|i'm|i've|i'd|we|we've|we're|our)\b|^我"));
static PRESENTING: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(here'?s|here is|here are|check (it |this |these )?out|look at|take a look|this is|these are|meet)\b|^这(是|就是)",
    )
});
static DISTANT_PAST: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)\b(last year|years? ago|as a (kid|child|teen|teenager)|when i was (young|younger|little|a kid|a child|in)|growing up|back then|back in the day|in (high school|college)|childhood|used to|(few|couple of|many) years back)\b|小时候|以前|当年|那时候",
    )
});
static HABIT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)\b(usually|always|often|every (day|week|weekend|morning|night)|tend to|whenever|sometimes)\b|经常|总是|平时|每天|每周",
    )
});
static CAPITALISED: LazyLock<Regex> = LazyLock::new(|| pattern(r"\b[A-Z][a-zA-Z]+"));

/// Words that react or qualify rather than say what happened: a sentence made of them
/// carries no topic, and they make no topic of their own.
static GENERIC: LazyLock<HashSet<String>> = LazyLock::new(|| {
    let english = "great awesome amazing love loved loving lovely feel feels feeling feelings felt thing things \
        stuff time times lot lots much many good better best bad worse worst fun cool glad happy happier \
        happiness thanks thank thankful grateful keep kept make makes made making know knew think thought \
        sure nice wonderful beautiful incredible fantastic terrific fabulous hope hoped hoping hopeful want \
        wanted wanting need needed needs life lives people person way ways day days year years always never \
        ever something anything everything nothing someone anyone everyone somebody kind little big huge \
        new old moment moments right well even still going go goes went gone come comes came coming see \
        seen saw seeing look looks looked looking like liked likes take takes took taking give gives gave \
        giving help helps helped helping try tries tried trying say says said tell tells told talk talks \
        talked talking chat chatted chatting sound sounds sounded mean means meant world share shared \
        sharing special super pretty totally definitely exciting excited excitement inspiring inspired \
        inspire inspiration inspires proud pride support supported supportive supporting enjoy enjoyed \
        enjoying joy difference bring brings brought bringing wow interesting important matter matters \
        meaningful powerful positive negative tough hard easy crazy wild stressful stress stressed \
        peaceful peace calm relaxing relax relaxed vibe vibes energy passion passionate dream dreams goal \
        goals journey experience experiences adventure adventures memories memory cherish cherished \
        appreciate appreciated appreciation rewarding fulfilling satisfying worth blast chance opportunity \
        opportunities part place absolutely honestly actually seriously literally basically probably maybe \
        perhaps true real reality sense touch heart soul mind sweet cute adorable gorgeous stunning neat fab \
        brilliant perfect sorry bummer pity hear heard listen listened wait waiting forward busy keeping \
        stay staying remind reminds reminded reminder remember remembered motivated motivation motivating \
        motivate encourage encouraging encouragement courage strength strong rock rocks rocked cheers \
        congrats congratulations luck lucky blessed bless";
    let chinese = "好 不错 开心 高兴 喜欢 觉得 感觉 真的 非常 特别 厉害 棒 有意思 加油 谢谢 哈哈 事情 东西 大家 \
        一起 时候 现在 这样 那样 知道 希望 可能 应该 真是 太 挺 蛮 有点 一直 还是 真 确实 其实 感谢 不过 当然";
    terms(english).into_iter().chain(terms(chinese)).collect()
});

/// Whether a content term reacts or qualifies rather than names a topic.
pub fn is_generic(term: &str) -> bool {
    GENERIC.contains(term)
}

/// Where a sentence stands in its session.
#[derive(Debug, Clone, Copy, Default)]
pub struct Position {
    /// The message's index among the messages read, from 0.
    pub message: usize,
    /// How many messages were read.
    pub messages: usize,
    /// The message's first statement.
    pub first_of_message: bool,
    /// The message before, from someone else, ended on a question.
    pub after_question: bool,
}

/// What a sentence reports, as the rules weigh it.
#[derive(Debug, Clone, Default)]
pub struct Salience {
    pub score: f64,
    /// A reported event (first person, past): what a conversation's summary is made of.
    pub event: bool,
}

/// Scores a cleaned sentence, given its content terms. `names` are the session's speakers
/// (their names are not the names a sentence mentions).
pub fn salience(sentence: &str, content: &HashSet<String>, names: &HashSet<String>, position: Position) -> Salience {
    let specific = content.iter().filter(|t| !is_generic(t)).count();
    let elided = ELIDED_EVENT.is_match(sentence);
    let first_person = elided || FIRST_PERSON.is_match(sentence);
    let event = elided || EVENT.is_match(sentence);
    let mut score = 0.0;
    if event {
        score += weight::EVENT;
    } else if PLAN.is_match(sentence) {
        score += weight::PLAN;
    }
    if TIME.is_match(sentence) {
        score += weight::TIME;
    }
    let mentioned: HashSet<&str> = CAPITALISED
        .find_iter(sentence)
        .filter(|m| m.start() > 0 && m.as_str() != "I" && !names.contains(m.as_str()))
        .map(|m| m.as_str())
        .collect();
    score += weight::NAME * mentioned.len().min(3) as f64;
    if sentence.chars().any(|c| c.is_ascii_digit()) {
        score += weight::NUMBER;
    }
    score += weight::TERM * content.len().min(10) as f64;
    if !first_person && LISTENER.is_match(sentence) {
        score += weight::LISTENER;
    }
    if VAGUE_START.is_match(sentence) && specific < 3 {
        score += weight::VAGUE;
    }
    if elided || SPEAKER_START.is_match(sentence) {
        score += weight::SPEAKER_SUBJECT;
    }
    if position.first_of_message {
        score += weight::FIRST_OF_MESSAGE;
        if position.after_question {
            score += weight::AFTER_QUESTION;
        }
    }
    let quarter = (position.messages as f64 * 0.25).max(1.0);
    score += weight::OPENING * (1.0 - position.message as f64 / quarter).max(0.0);
    if !content.is_empty() {
        score += weight::GENERIC_SHARE * (1.0 - specific as f64 / content.len() as f64);
    }
    if PRESENTING.is_match(sentence) {
        score += weight::PRESENTING;
    }
    if DISTANT_PAST.is_match(sentence) {
        score += weight::DISTANT_PAST;
    }
    if HABIT.is_match(sentence) {
        score += weight::HABIT;
    }
    Salience { score, event }
}

/// How often and how early the session uses each content term.
#[derive(Debug, Default)]
pub struct TermStats {
    /// Term -> (messages using it, index of the first).
    seen: HashMap<String, (u32, usize)>,
    messages: usize,
}

impl TermStats {
    /// The statistics of messages given as their content terms, in order.
    pub fn of(messages: impl IntoIterator<Item = HashSet<String>>) -> Self {
        let mut stats = TermStats::default();
        for (index, message) in messages.into_iter().enumerate() {
            for term in message {
                stats.seen.entry(term).or_insert((0, index)).0 += 1;
            }
            stats.messages = index + 1;
        }
        stats
    }

    /// What a topic term adds to a summary that does not have it yet.
    pub fn weight(&self, term: &str) -> f64 {
        use choice::*;
        let (count, first) = self.seen.get(term).copied().unwrap_or((1, usize::MAX));
        let opening = (first as f64) < self.messages as f64 * 0.2;
        TERM_SCALE
            * (TERM_BASE
                + TERM_PER_REPEAT * f64::from(count.saturating_sub(1).min(4))
                + if opening { TERM_OPENING } else { 0.0 })
    }
}

const EVALUATIVE: &str = "amazing|awesome|great|fun|cool|wild|powerful|rewarding|incredible|fantastic|wonderful|nice|lovely|beautiful|tough|hard|crazy|insane|unreal|special|emotional|exciting|a blast|a lot of fun|fulfilling|inspiring|scary|stressful|meaningful|magical|awful|terrible|exhausting|eye-opening|epic|intense|relaxing|peaceful|satisfying|empowering|touching|surreal|overwhelming|challenging|worth it|experience|feeling|adventure|ride|journey|tricky|freeing|calming|therapeutic|heartwarming|humbling|moving|a dream|a success|successful|neat|sweet|good|bad|sad|cute|adorable|stunning|gorgeous|breathtaking|unforgettable|memorable|enlightening|interesting|rough|difficult|hectic|busy|nerve-wracking|wholesome|uplifting|refreshing|invigorating|bittersweet";
const INTENSIFIER: &str = "so|really|very|super|such|truly|totally|pretty|absolutely|just|kinda|quite|incredibly|extremely|amazingly|a bit|a little|definitely|seriously|honestly|actually";

/// "…, and it was so powerful", "… - it was a wild feeling": the speaker's verdict on what
/// they just said.
static EVALUATIVE_TAIL: LazyLock<Regex> = LazyLock::new(|| {
    pattern(&format!(
        r"(?i)(?:\s*(?:,|;|\s-|–|—)\s*(?:and |but |so |which |plus )?|\s+(?:and|but) )(?:it|that|this|which|they|everyone|we)(?:'s| is| was| were| has been| have been| felt| feels| looked| looks|'re| are| had)(?: (?:{INTENSIFIER}))* (?:a |an |such a |such an )?(?:(?:{INTENSIFIER}) )*(?:{EVALUATIVE})\b.*$"
    ))
});
static OPINION_LEAD: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(?:i think|i guess|i feel like|i believe|i mean|i must say|i have to say|i gotta say|to be honest|you know|funny enough|believe it or not|fun fact|good news|big news)[,:]?\s+|^(?:其实|说实话|老实说|话说|对了|顺便说一下|顺便说|就是说|我跟你说)[，,、]?",
    )
});
static HEDGE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)\b(really|so|kinda|totally|actually|definitely|literally|super|truly|basically|honestly|absolutely|pretty much|very|quite|seriously|incredibly|extremely|a bit|a little bit) +(\w+)|真的|超级|非常",
    )
});
static FINAL_PARTICLE: LazyLock<Regex> = LazyLock::new(|| pattern(r"(\w)[啊呀呢哦啦嘛]+([。！!？?～~]*)$"));

/// Shortens a cleaned statement to what it says (see the module documentation). A cut that
/// would leave too little is not made.
pub fn compress(sentence: &str) -> String {
    let mut text = sentence.trim().to_string();
    if let Some(head) = statement_head(&text) {
        text = head;
    }
    let without_verdict = EVALUATIVE_TAIL.replace(&text, "").to_string();
    if without_verdict != text && content_words(&without_verdict) >= 3 {
        text = without_verdict;
    }
    let without_opinion = OPINION_LEAD.replace(&text, "").to_string();
    if content_words(&without_opinion) >= 2 {
        text = without_opinion;
    }
    text = HEDGE
        .replace_all(&text, |caps: &Captures| {
            let Some(hedge) = caps.get(1) else {
                // A Chinese intensifier.
                return String::new();
            };
            let next = &caps[2];
            let lower = hedge.as_str().to_lowercase();
            // "so far", "so that", "a bit of": not hedges; a capitalised "Super" may be a name.
            let keeps = (lower == "so"
                && matches!(
                    next.to_lowercase().as_str(),
                    "that" | "far" | "much" | "many" | "long" | "on" | "called" | "to" | "i" | "we"
                ))
                || (lower.starts_with("a ") && next.eq_ignore_ascii_case("of"))
                || (hedge.start() > 0 && hedge.as_str().starts_with(|c: char| c.is_ascii_uppercase()));
            if keeps { caps[0].to_string() } else { next.to_string() }
        })
        .to_string();
    text = FINAL_PARTICLE.replace(&text, "$1$2").to_string();
    text = without_empty_tail(&text);
    let mut text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    text = text
        .trim_end_matches([' ', ',', ';', '-', '–', '—', ':', '，', '；', '：'])
        .to_string();
    capitalised(&with_stop_of(text, sentence))
}

/// A shortened text with the full stop of the text it was cut from: a cut tail takes it with
/// it, and it comes back unless the text still ends a sentence.
pub(crate) fn with_stop_of(mut text: String, original: &str) -> String {
    if let Some(stop) = original.trim_end().chars().last().filter(|c| matches!(c, '.' | '。'))
        && !text.ends_with(['.', '。', '!', '！', '?', '？', '…'])
    {
        text.push(stop);
    }
    text
}

/// The text without its closing clauses that name no topic ("…, and it was refreshing",
/// "… - so much fun"), when what is left still says something. Only closing clauses go: one
/// cut from the middle ("Jean, who had been through a lot, yet…") would change what is said.
fn without_empty_tail(text: &str) -> String {
    static BREAK: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?:,|;|\s[-–—])\s+(?:(?:and|but|so|plus)\s+)?|[，；]"));
    let mut end = text.len();
    let breaks: Vec<(usize, usize)> = BREAK.find_iter(text).map(|m| (m.start(), m.end())).collect();
    for (start, after) in breaks.into_iter().rev() {
        let clause = &text[after..end];
        let names_a_topic = terms(clause).iter().any(|t| !is_generic(t));
        if names_a_topic || content_words(&text[..start]) < 3 {
            break;
        }
        end = start;
    }
    text[..end].to_string()
}

/// The statement a question was tacked on ("I finished it - want to see?" -> "I finished
/// it"), when there is one: what comes before the last clause break of a sentence that ends
/// on a question mark.
pub fn statement_head(sentence: &str) -> Option<String> {
    let text = sentence.trim();
    if !text.ends_with(['?', '？']) {
        return None;
    }
    let cut = [", ", "; ", " - ", " – ", " — ", "，", "；", "—"]
        .iter()
        .filter_map(|sep| text.rfind(sep))
        .max()?;
    let head = text[..cut].trim();
    (!head.ends_with(['?', '？']) && content_words(head) >= 2).then(|| head.to_string())
}

/// The topic words among a text's content terms: neither generic nor a speaker's name.
pub fn topic_of(content: &HashSet<String>, names: &HashSet<String>) -> HashSet<String> {
    content
        .iter()
        .filter(|t| !is_generic(t) && !names.contains(*t))
        .cloned()
        .collect()
}

/// The words of a text that are not stopwords: what "enough left" means when a cut is
/// weighed (cheaper than stemming them into terms).
pub fn content_words(text: &str) -> usize {
    words(text).iter().filter(|w| !is_stopword(w)).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinkus_common::text::term_set;

    fn names() -> HashSet<String> {
        ["Caroline", "Melanie"].iter().map(|s| s.to_string()).collect()
    }

    fn score(sentence: &str, names: &HashSet<String>, position: Position) -> Salience {
        salience(sentence, &term_set(sentence), names, position)
    }

    fn at(message: usize) -> Position {
        Position {
            message,
            messages: 20,
            first_of_message: true,
            after_question: false,
        }
    }

    #[test]
    fn reported_events_outscore_reactions() {
        let names = names();
        let event = score("I went to a pottery workshop with my kids last Friday.", &names, at(10));
        let reaction = score("It was so great to see everyone having fun.", &names, at(10));
        let listener = score("Your kids must love it so much.", &names, at(10));
        assert!(event.event, "{event:?}");
        assert!(event.score > reaction.score + 2.0, "{event:?} {reaction:?}");
        assert!(event.score > listener.score + 2.0, "{event:?} {listener:?}");
        let elided = score("Just started doing aerial yoga.", &names, at(10));
        assert!(elided.event, "{elided:?}");
    }

    #[test]
    fn chinese_events_and_times_count() {
        let names = HashSet::new();
        let event = score("我们上周完成了支付模块的联调。", &names, at(10));
        let reaction = score("这个真的太棒了。", &names, at(10));
        assert!(event.event, "{event:?}");
        assert!(event.score > reaction.score + 2.0, "{event:?} {reaction:?}");
    }

    #[test]
    fn the_opening_weighs_more() {
        let names = names();
        let early = score("I adopted a puppy.", &names, at(0));
        let late = score("I adopted a puppy.", &names, at(15));
        assert!(early.score > late.score, "{early:?} {late:?}");
    }

    #[test]
    fn compression_keeps_the_statement() {
        assert_eq!(
            compress("I went to a LGBTQ support group yesterday and it was so powerful."),
            "I went to a LGBTQ support group yesterday."
        );
        assert_eq!(
            compress("Yesterday I took the kids to the museum - it was so cool spending time with them."),
            "Yesterday I took the kids to the museum."
        );
        assert_eq!(
            compress("I finished another pottery project - want to see a pic?"),
            "I finished another pottery project"
        );
        assert_eq!(
            compress("I think we should really go with the cheaper venue"),
            "We should go with the cheaper venue"
        );
        assert_eq!(
            compress("So far the feedback is really good."),
            "So far the feedback is good."
        );
        assert_eq!(
            compress("其实我们真的已经完成了需求分析啦。"),
            "我们已经完成了需求分析。"
        );
        // Closing clauses that name no topic go; a clause in the middle stays.
        assert_eq!(
            compress("It was refreshing, and the pic I'm sending is just stunning, love it."),
            "It was refreshing, and the pic I'm sending is just stunning."
        );
        assert_eq!(
            compress("We went camping with the kids last week, had a blast, it was great fun."),
            "We went camping with the kids last week."
        );
        assert_eq!(
            compress("I met Jean, who had been through a lot, yet stayed optimistic."),
            "I met Jean, who had been through a lot, yet stayed optimistic."
        );
        assert_eq!(
            compress("我们上周完成了需求分析，真的很开心。"),
            "我们上周完成了需求分析。"
        );
        assert_eq!(
            statement_head("I finished another pottery project - want to see a pic?").as_deref(),
            Some("I finished another pottery project")
        );
        assert_eq!(statement_head("Want to see a pic?"), None);
        assert_eq!(
            statement_head("FYI, I finished another pottery project - want to see a pic?").as_deref(),
            Some("FYI, I finished another pottery project")
        );
        assert_eq!(
            statement_head("我们上周上线了新版本，你看过了吗？").as_deref(),
            Some("我们上周上线了新版本")
        );
    }

    #[test]
    fn repeated_and_early_words_weigh_more() {
        let stats = TermStats::of(
            [
                "I got a puppy last week.",
                "A puppy! What breed?",
                "The puppy is a beagle.",
                "Nice. I painted a lake.",
                "Cool.",
                "Cool.",
                "Cool.",
                "Cool.",
                "Cool.",
                "Cool.",
            ]
            .map(term_set),
        );
        let puppy = stats.weight(&terms("puppy")[0]);
        let lake = stats.weight(&terms("lake")[0]);
        assert!(puppy > lake, "{puppy} {lake}");
    }

    #[test]
    fn generic_words_make_no_topic() {
        let topic = topic_of(
            &term_set("Caroline: it was so amazing, I love the pottery class"),
            &term_set("Caroline"),
        );
        assert!(topic.contains(&terms("pottery")[0]), "{topic:?}");
        assert!(!topic.contains(&terms("amazing")[0]), "{topic:?}");
        assert!(!topic.contains(&terms("Caroline")[0]), "{topic:?}");
    }
}
