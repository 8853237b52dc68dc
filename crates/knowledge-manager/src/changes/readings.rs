//! Which stated values changed: the readings of a change within one text and against earlier ones.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use thinkus_common::text::{sentences, terms};

use super::mentions::{Mention, NOT_NAMES, ValueKind, mentions, occurrences, parse_number, prose_sentences};

/// A value that changed: `old` is no longer true; `new` replaced it when the text said what.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Change {
    pub old: String,
    pub new: Option<String>,
}

impl Change {
    pub(super) fn of(old: &str, new: Option<&str>) -> Self {
        Self {
            old: old.trim().to_string(),
            new: new.map(|n| n.trim().to_string()),
        }
    }
}

/// Words that state a change, in both languages (jieba words and stemmed English terms).
const CHANGE_WORDS: &[&str] = &[
    "改", "改成", "改为", "改到", "改用", "换", "换成", "换掉", "换用", "调", "调到", "调整", "上调", "下调", "推",
    "推到", "推迟", "延期", "延后", "延到", "挪", "挪到", "迁", "迁到", "切", "切到", "切换", "涨", "涨到", "降",
    "降到", "减", "减到", "加", "加到", "提高", "提到", "砍", "砍到", "放宽", "收紧", "更正", "变", "变成", "变为",
    "不是", "而是", "现在", "定为", "说错", "记错", "弄错", "不对", "不用", "取消", "chang", "move", "push", "slip",
    "switch", "swap", "replac", "rais", "increas", "bump", "cut", "lower", "reduc", "drop", "correct", "actual",
    "instead", "now", "updat", "revis", "meant", "anymor", "longer", "goe", "went", "go", "shift", "delay", "postpon",
    "upgrad", "downgrad", "migrat", "ditch", "misspok", "typo", "up", "down",
];

fn states_a_change(sentence_terms: &HashSet<String>) -> bool {
    CHANGE_WORDS.iter().any(|w| sentence_terms.contains(*w))
}

/// Whether a message asks for a change without saying the new value, which the reply then
/// states ("上市往后推一周吧", "push the signing a week", "ok cut it to 4 vans"). A word that
/// dates a state as often as it announces a change ([`WEAK_CHANGE_WORDS`]: "春节通道现在的关键
/// 数字给我过一遍", "what's the plan now") asks for none.
pub fn asks_for_a_change(text: &str) -> bool {
    says_any(text, &terms(text).into_iter().collect(), &ANNOUNCING_WORDS)
}

/// The words of change that announce one whatever they stand by: [`CHANGE_WORDS`] without
/// [`WEAK_CHANGE_WORDS`].
static ANNOUNCING_WORDS: LazyLock<Vec<&str>> = LazyLock::new(|| without(CHANGE_WORDS, WEAK_CHANGE_WORDS));

/// `words` without those of `left_out`, in order.
fn without(words: &[&'static str], left_out: &[&str]) -> Vec<&'static str> {
    words.iter().copied().filter(|w| !left_out.contains(w)).collect()
}

/// Whether `text` holds one of `words`: as a term, or, for a Chinese word of two characters or
/// more, as written (jieba cuts "哦不对" into "哦/不/对").
fn says_any(text: &str, text_terms: &HashSet<String>, words: &[&str]) -> bool {
    words.iter().any(|w| {
        text_terms.contains(*w)
            || (w.chars().count() >= 2 && w.chars().all(thinkus_common::text::is_han) && text.contains(w))
    })
}

/// Pairs of ideographs of a text, without those holding a one-character function word (的,
/// 个, 那…): the topic words of Chinese whatever jieba makes of them in context ("外包那边" is
/// cut "外/包/那边", "外包是" "外包/是").
fn han_pairs(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let chars: Vec<char> = text.chars().collect();
    for pair in chars.windows(2) {
        if pair.iter().all(|c| thinkus_common::text::is_han(*c))
            && !pair
                .iter()
                .any(|c| thinkus_common::text::is_stopword(c.encode_utf8(&mut [0; 4])))
        {
            out.insert(pair.iter().collect());
        }
    }
    out
}

/// What links a new value to the old one said after it: "B, not A", "B instead of A", "B (was
/// A)", "B, down from A", "B（原来A）", "B而不是A".
const OLD_AFTER_NEW: &str = r"(?:\s+(?:(?:a|an|per|each)\s+)?[a-z]+)?\s*[,，]?\s*(?:(?:(?:而|and\s+)?不是|not|instead\s+of|rather\s+than|and\s+not|(?:up|down|raised|increased|cut|reduced|lowered|dropped|moved|changed|pushed|bumped|trimmed)\s+from(?:\s+the)?)|[(（]\s*(?:not|不是|was|were|previously|formerly|原来是?|原为|原|之前是?|以前是?|此前是?|(?:up|down|raised|increased|cut|reduced|lowered|dropped|moved|changed|pushed|bumped|trimmed)\s+from(?:\s+the)?))\s*";

/// A new value followed by an old one said as a bare number, which takes the new one's unit:
/// "22 stores not 20", "8 techs (not 6)", "10.3k a month not 9.4", "是42家，不是36".
fn elliptical_old_values(sentence: &str, found: &[Mention]) -> Vec<Change> {
    static BARE_OLD: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&format!(
            r"(?i)^{OLD_AFTER_NEW}(?P<num>\d[\d,]*(?:\.\d+)?)(?:\s*[)）,，.。;；!！?？]|\s*$|\s+(?:a|an|per|each)(?-u:\b))"
        ))
        .expect("valid regex")
    });
    // "4 → 5 vans": the old value before an arrow.
    static BARE_BEFORE_ARROW: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?:^|[^\w.,])(?P<num>\d[\d,]*(?:\.\d+)?)\s*(?:->|→|=>|⟶)\s*$").expect("valid regex")
    });
    static DIGITS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d[\d,]*(?:\.\d+)?").expect("valid regex"));
    let mut out = Vec::new();
    for new in found {
        if !matches!(new.kind, ValueKind::Amount | ValueKind::Count | ValueKind::Percent) {
            continue;
        }
        let (after, before) = (&sentence[new.end..], &sentence[..new.start]);
        let (num, at) = if let Some(c) = BARE_OLD.captures(after) {
            let num = c.name("num").expect("a number");
            (num.as_str(), new.end + num.start())
        } else if let Some(c) = BARE_BEFORE_ARROW.captures(before)
            && !ARROW_AFTER.is_match(after)
        {
            let num = c.name("num").expect("a number");
            // "10 → 50 → 100 users" is a ramp.
            let lead = before[..num.start()].trim_end();
            if ends_with_arrow(lead) {
                continue;
            }
            (num.as_str(), num.start())
        } else {
            continue;
        };
        // The number is the old value itself, not part of another mention.
        if found.iter().any(|m| m.start <= at && at < m.end) {
            continue;
        }
        let Some(written) = DIGITS.find(&new.raw) else {
            continue;
        };
        let (Some(new_number), Some(old_number)) = (parse_number(written.as_str()), parse_number(num)) else {
            continue;
        };
        // Of one order of magnitude: "A$150,000, not 142" means thousands, which is a guess.
        if old_number <= 0.0 || new_number / old_number > 3.0 || old_number / new_number > 3.0 {
            continue;
        }
        let old_raw = format!("{}{}{}", &new.raw[..written.start()], num, &new.raw[written.end()..]);
        if let [old] = mentions(&old_raw).as_slice()
            && old.comparable(new)
            && !old.same_value(new)
        {
            out.push(Change::of(&old_raw, Some(&new.raw)));
        }
    }
    out
}

/// A thing named by its size: "4-hour take-home", "90-minute pairing", "3-day offsite" (a size
/// in the singular, hyphenated or not, then what it sizes).
const SIZED_THING: &str = r"\d+(?:\.\d+)?(?:-|\s)(?:minute|min|hour|hr|day|week|month|year)\s+[a-z][a-z\-]*[a-z]";

/// A thing named by its size dropped, for the one the sentence puts instead if any: "drop the
/// 4-hour take-home and do a 90-minute pairing session instead", "The 4-hour take-home is off".
fn sized_things_dropped(sentence: &str) -> Vec<Change> {
    static DROP: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&format!(
            r"(?i)(?-u:\b)(?:drop|scrap|cancel|skip|ditch|kill)(?:s|ped|ping|led|ling|ed|ing)?\s+(?:the\s+|our\s+|that\s+|this\s+|her\s+|his\s+|their\s+)?(?P<old>{SIZED_THING})"
        ))
        .expect("valid regex")
    });
    static OFF: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&format!(
            r"(?i)(?P<old>{SIZED_THING})\s+(?:is|are|was|'s)\s+(?:now\s+)?(?:off|out|dropped|cancell?ed|canceled|scrapped|gone)(?-u:\b)"
        ))
        .expect("valid regex")
    });
    static INSTEAD: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&format!(r"(?i)(?P<new>{SIZED_THING})[^.;!?]*?(?-u:\b)instead(?-u:\b)")).expect("valid regex")
    });
    let Some(old) = DROP
        .captures(sentence)
        .or_else(|| OFF.captures(sentence))
        .and_then(|c| c.name("old"))
    else {
        return Vec::new();
    };
    let new = INSTEAD
        .captures(&sentence[old.end()..])
        .and_then(|c| c.name("new"))
        .map(|m| m.as_str());
    vec![Change::of(old.as_str(), new)]
}

/// A figure a text calls inadequate, replaced by the next value of its kind the text gives:
/// "看这个注册数，20万 峰值肯定不够，41万人注册…按 30万 准备", "$500 won't be enough for the
/// offsite, make it $800". Called inadequate with nothing in its place, it is no change yet.
fn inadequate_values(text: &str) -> Vec<Change> {
    static JUDGED_ZH: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^[^，。；,;！？!?\d]{0,10}?(?:不够|不足|太少|太低|太小|太多|太高|太贵|偏低|偏高|扛不住|撑不住|顶不住)",
        )
        .expect("valid regex")
    });
    static JUDGED_EN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^[^,.;!?\d]{0,24}?(?:(?:isn'?t|is\s+not|won'?t\s+be|will\s+not\s+be|not|nowhere\s+near)\s+(?:big\s+|high\s+)?enough|(?-u:\b)too\s+(?:low|high|small|little|few|many|much|tight)(?-u:\b)|won'?t\s+cut\s+it)")
            .expect("valid regex")
    });
    let found = mentions(text);
    let mut out = Vec::new();
    for (i, old) in found.iter().enumerate() {
        let after = &text[old.end..];
        // Figures only: a name "too pricey" is left to the verbs of switching.
        if !matches!(old.kind, ValueKind::Amount | ValueKind::Count | ValueKind::Percent)
            || !(JUDGED_ZH.is_match(after) || JUDGED_EN.is_match(after))
        {
            continue;
        }
        if let Some(new) = found[i + 1..]
            .iter()
            .find(|m| m.comparable(old) && !m.same_value(old) && old.plausible_step_to(m))
        {
            out.push(Change::of(&old.raw, Some(&new.raw)));
        }
    }
    out
}

/// A value a sentence says was changed from, with no new value after it: "按最新的首发价49元印
/// （昨天跟渠道定的，从59元改过来）", "the rate is 55.10 now, we moved it from 53.40 last week".
/// The old value is paired with the last value of its kind said before it in the sentence, the
/// new one, when there is one; alone otherwise (it still is no longer current).
fn changed_from(sentence: &str, found: &[Mention]) -> Vec<Change> {
    static FROM_ZH: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?:从|由)\s*$").expect("valid regex"));
    // A verb of change and its direction, then the clause ends: "改过来", "降下来的", "调了".
    static CHANGED_ZH: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*(?P<verb>改|调|换|降|涨|挪|推|砍|减|加|提|升|变)了?(?:过来|下来|上来|回来)?(?:的|了)?\s*(?:[，。；,;）)!！?？]|$)")
            .expect("valid regex")
    });
    static FROM_EN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)(?-u:\b)(?P<verb>chang|mov|switch|cut|rais|lower|reduc|dropp|bump|push|trimm|increas|decreas)(?:e|es|ed|ing)?\s+(?:it\s+|that\s+|this\s+)?from\s+$")
            .expect("valid regex")
    });
    // What follows the old value up to the clause's end: no "to" (that is "from A to B").
    static CLAUSE_EN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[^,.;:!?)]*").expect("valid regex"));
    static TO_EN: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?i)(?-u:\b)(?:to|into)(?-u:\b)|→|->").expect("valid regex"));
    let mut out = Vec::new();
    for (i, old) in found.iter().enumerate() {
        let (before, after) = (&sentence[..old.start], &sentence[old.end..]);
        let zh = FROM_ZH.is_match(before).then(|| CHANGED_ZH.captures(after)).flatten();
        let en = FROM_EN.captures(before).filter(|_| {
            !CLAUSE_EN
                .find(after)
                .is_some_and(|clause| TO_EN.is_match(clause.as_str()))
        });
        // A name is left only by a verb of switching: "moved from Corvane Medical" tells where
        // someone worked, "switched from Mixpanel" what is no longer used.
        let verb = match (zh, en) {
            (Some(c), _) => c["verb"].to_string(),
            (None, Some(c)) => c["verb"].to_lowercase(),
            (None, None) => continue,
        };
        if old.kind == ValueKind::Name && !["改", "换", "chang", "switch"].contains(&verb.as_str()) {
            continue;
        }
        let new = found[..i]
            .iter()
            .rev()
            .find(|m| m.comparable(old) && !m.same_value(old))
            .map(|m| m.raw.as_str());
        out.push(Change::of(&old.raw, new));
    }
    out
}

/// How one mention leads to the next in a statement of change, read from the text between
/// them (and just before the first).
fn linked(before: &str, between: &str, sentence_terms: &HashSet<String>) -> Option<bool> {
    static FROM_TO_ZH: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^[^，。；,;！？]{0,8}?(?:到|至|成|为)$").expect("valid regex"));
    static CHANGE_VERB_ZH: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"[改换调推延挪迁切涨降减加提砍放收更变升]").expect("valid regex"));
    static NEW_THEN_OLD: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!("(?i)^{OLD_AFTER_NEW}$")).expect("valid regex"));
    static OLD_THEN_NEW_ZH: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\s*[,，]?\s*(?:而|应该|其实|实际上?)?是\s*$").expect("valid regex"));
    static ARROW: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*(?:->|→|=>|⟶)\s*$").expect("valid regex"));
    static INTO_ZH: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*(?:改|换|调整?|更正|变更|变|改用|切换|迁移?|挪|推迟?|延期?|涨|降|加|减)(?:成|为|到|至)\s*$")
            .expect("valid regex")
    });
    static FROM_TO_EN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)^\s+to\s+$").expect("valid regex"));
    static NOT_BUT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)^\s*[,，]?\s*but\s+$").expect("valid regex"));
    static REPLACE_WITH: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?i)^\s+(?:with|for|by)\s+$").expect("valid regex"));
    static REPLACES: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^\s+(?:replaces|replaced|will\s+replace|is\s+replacing|supersedes|superseded|takes\s+over\s+from)\s+$")
            .expect("valid regex")
    });
    let before = before.trim_end();
    let before_lower = before.to_lowercase();
    if ARROW.is_match(between) || INTO_ZH.is_match(between) {
        return Some(true);
    }
    // "从12月18日往后挪一周，改为12月25日": a clause between, then a verb of change into.
    static FROM_ACROSS_ZH: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[^。；;！？]{0,16}?(?:改为|改到|改成|挪到|推到|延到|调到|定为|变成|换成)$").expect("valid regex")
    });
    if (before.ends_with('从') || before.ends_with('由'))
        && ((FROM_TO_ZH.is_match(between) && CHANGE_VERB_ZH.is_match(between)) || FROM_ACROSS_ZH.is_match(between))
    {
        return Some(true);
    }
    if before_lower.ends_with("from") && FROM_TO_EN.is_match(between) && states_a_change(sentence_terms) {
        return Some(true);
    }
    if (before.ends_with("不是") || before_lower.ends_with("not"))
        && (OLD_THEN_NEW_ZH.is_match(between) || NOT_BUT.is_match(between))
    {
        return Some(true);
    }
    // "不按三十万了，按25万算", "不用A了，用B": not by the one, by the other.
    static NOT_BY_ZH: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"不(?:按|用|要|走|选|定|找)$").expect("valid regex"));
    static BUT_BY_ZH: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:了|啦)?[\s，,]*(?:而是|改成|改为|改|就|还是)?(?:按|用|要|走|选|定|找)?\s*$")
            .expect("valid regex")
    });
    if NOT_BY_ZH.is_match(before) && BUT_BY_ZH.is_match(between) {
        return Some(true);
    }
    if (before_lower.ends_with("replace")
        || before_lower.ends_with("replaced")
        || before_lower.ends_with("swap")
        || before_lower.ends_with("swapped"))
        && REPLACE_WITH.is_match(between)
    {
        return Some(true);
    }
    if NEW_THEN_OLD.is_match(between) || REPLACES.is_match(between) {
        return Some(false);
    }
    None
}

/// A name dropped, in English: "ditch Samsara", "Redgum is dropped", "Samsara is out." ("drop
/// Gary a note" drops nobody, "Apple is out of stock" nothing).
fn dropped_names(sentence: &str, found: &[Mention]) -> Vec<Change> {
    static BEFORE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?i)(?-u:\b)(?:ditch|dump)(?:es|s|ed|ing|ped|ping)?\s+$").expect("valid regex"));
    static AFTER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^'?s?\s+(?:(?:is|are|was|were|has\s+been|have\s+been|gets|got)\s+)?(?:(?:dropped|ditched)(?-u:\b)|out\s*(?:[,.;!)]|$))")
            .expect("valid regex")
    });
    // A capitalised word that starts the sentence is a name here too ("Redgum is dropped").
    static FIRST: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*([A-Z][A-Za-z0-9.\-+]+)").expect("valid regex"));
    let mut out: Vec<Change> = found
        .iter()
        .filter(|m| m.kind == ValueKind::Name)
        .filter(|m| BEFORE.is_match(&sentence[..m.start]) || AFTER.is_match(&sentence[m.end..]))
        .map(|m| Change::of(&m.raw, None))
        .collect();
    if let Some(first) = FIRST.captures(sentence).and_then(|c| c.get(1))
        && !found.iter().any(|m| m.start == first.start())
        && !NOT_NAMES.contains(&first.as_str().to_lowercase().as_str())
        && AFTER.is_match(&sentence[first.end()..])
    {
        out.push(Change::of(first.as_str(), None));
    }
    out
}

/// Chinese names around a verb of change, which [`mentions`] cannot see: "从客如云换成二维火",
/// "不用客如云了", "换掉客如云".
fn chinese_name_changes(sentence: &str) -> Vec<Change> {
    static FROM_INTO: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"从([\p{Han}A-Za-z0-9.\-]{2,10}?)(?:换成|改成|改为|换为|迁到|切到|改用|换到)([\p{Han}A-Za-z0-9.\-]{2,8}?)(?:[，。；,;！!？?、\s了吧的啊呢]|$)")
            .expect("valid regex")
    });
    static DROPPED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?:(?:不再用|换掉|弃用|停用)\s?([\p{Han}A-Za-z0-9.\-]{2,8}?)\s?(?:了|吧|啦|[，。；,;！!？?\s]|$)|不用\s?([\p{Han}A-Za-z0-9.\-]{2,8}?)\s?(?:了|啦))",
        )
        .expect("valid regex")
    });
    let mut out = Vec::new();
    for c in FROM_INTO.captures_iter(sentence) {
        out.push(Change::of(&c[1], Some(&c[2])));
    }
    if out.is_empty() {
        // "不用X了" drops X; "文案不用感叹号" is a rule of style, not a change: "不用" drops only
        // with the 了 of a changed state.
        for c in DROPPED.captures_iter(sentence) {
            if let Some(name) = c.get(1).or_else(|| c.get(2)) {
                out.push(Change::of(name.as_str(), None));
            }
        }
    }
    out
}

/// The names a verb of switching takes in a sentence: a name after "换成", "改用", "switch to",
/// "go with" (spaces between a Chinese verb and a Latin name allowed, as mixed writing puts
/// them), and a name in ideographs after a Chinese verb ([`HAN_TAKEN`]); each name once.
fn switch_targets(sentence: &str, found: &[Mention]) -> Vec<String> {
    static TO_EN: LazyLock<Regex> = LazyLock::new(|| switch_en(false));
    let mut targets: Vec<String> = found
        .iter()
        .filter(|m| m.kind == ValueKind::Name)
        .filter(|m| {
            let before = &sentence[..m.start];
            SWITCH_ZH_BEFORE.is_match(before) || TO_EN.is_match(before)
        })
        .map(|m| m.raw.clone())
        .chain(
            HAN_TAKEN
                .captures_iter(sentence)
                .filter_map(|c| c.get(1))
                .map(|m| m.as_str())
                .filter(|name| !thinkus_common::text::is_stopword(name))
                .map(str::to_string),
        )
        .collect();
    targets.sort_by_key(|name| name.to_lowercase());
    targets.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    targets
}

/// The Chinese verbs of switching that name what is switched to ("换成", "改用"); a bare "换"
/// also drops ("换掉客如云"), so only a Latin name after it is taken.
const SWITCH_VERBS_ZH: &str = "换成|换为|换用|改成|改为|改用|换到|切到|切换到|切换成|转用|迁到|迁移到";

/// A name in ideographs that a Chinese verb of switching takes ("改用二维火").
static HAN_TAKEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?:{SWITCH_VERBS_ZH})\s*(\p{{Han}}{{2,6}}?)(?:[，。；,;！!？?、\s]|了|吧|啊|呢|那边|这家|$)"
    ))
    .expect("valid regex")
});

/// A Chinese verb of switching right before a name (spaces allowed): "换成 ", "换 ".
static SWITCH_ZH_BEFORE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"(?:{SWITCH_VERBS_ZH}|换)\s*$")).expect("valid regex"));

/// The arrows that write a change or a ramp: "500 → 800".
const ARROWS: [&str; 4] = ["->", "→", "=>", "⟶"];

static ARROW_AFTER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*(?:->|→|=>|⟶)").expect("valid regex"));

/// Whether `lead` (the text before a value, trimmed) ends with an arrow: the value is a step of
/// a ramp ("10 → 50 → 100 users"), not the old value of a change.
fn ends_with_arrow(lead: &str) -> bool {
    ARROWS.iter().any(|arrow| lead.ends_with(arrow))
}

/// The changes a text states with both values ("from $500 to $800", "是3.2万不是2.8万", "Pro
/// is $39, not $49", "从客如云换成二维火"), or with the old one alone ("不用客如云了").
pub fn stated_changes(text: &str) -> Vec<Change> {
    let mut out = Vec::new();
    for sentence in prose_sentences(text) {
        let sentence_terms: HashSet<String> = terms(&sentence).into_iter().collect();
        let found = mentions(&sentence);
        for pair in found.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if !a.comparable(b) || a.same_value(b) {
                continue;
            }
            let before_start = sentence[..a.start]
                .char_indices()
                .rev()
                .nth(11)
                .map(|(i, _)| i)
                .unwrap_or(0);
            let before = &sentence[before_start..a.start];
            let between = &sentence[a.end..b.start];
            // "10% → 50% → 100%" is a ramp, not a change.
            let after = &sentence[b.end..];
            let lead = sentence[..a.start].trim_end();
            if ARROW_AFTER.is_match(after) || ends_with_arrow(lead) {
                continue;
            }
            match linked(before, between, &sentence_terms) {
                Some(true) => out.push(Change::of(&a.raw, Some(&b.raw))),
                Some(false) => out.push(Change::of(&b.raw, Some(&a.raw))),
                None => {}
            }
        }
        // "25k-30k上调到30k-35k": a range is one mention; "12 not 20" has bare numbers.
        out.extend(elliptical_old_values(&sentence, &found));
        let told: Vec<String> = out.iter().map(|c| c.old.clone()).collect();
        out.extend(
            changed_from(&sentence, &found)
                .into_iter()
                .filter(|c| !told.contains(&c.old)),
        );
        let mut dropped = chinese_name_changes(&sentence);
        dropped.extend(dropped_names(&sentence, &found));
        // One name dropped and one switched to in the same sentence ("排队服务换成 Cloudflare
        // Waiting Room，不用 Queue-it 了", "Redgum is out, we're going with Saltbush"): the
        // switch leaves the dropped name.
        if let [only] = dropped.as_mut_slice()
            && only.new.is_none()
            && let [target] = switch_targets(&sentence, &found).as_slice()
            && !target.to_lowercase().starts_with(&only.old.to_lowercase())
            && !only.old.to_lowercase().starts_with(&target.to_lowercase())
        {
            only.new = Some(target.clone());
        }
        out.extend(dropped);
        out.extend(sized_things_dropped(&sentence));
    }
    out.extend(self_corrections(text));
    out.extend(table_changes(text));
    let mut seen = HashSet::new();
    out.retain(|c| seen.insert(c.clone()));
    out
}

/// Column headings of a table of changes: what a value was, and what it is now.
const BEFORE_HEADINGS: &[&str] = &[
    "before",
    "old",
    "was",
    "previous",
    "previously",
    "from",
    "原来",
    "之前",
    "以前",
    "原",
    "旧",
    "调整前",
    "变更前",
    "修改前",
];
const AFTER_HEADINGS: &[&str] = &[
    "now",
    "new",
    "after",
    "to",
    "current",
    "updated",
    "现在",
    "目前",
    "新",
    "调整后",
    "变更后",
    "修改后",
    "改为",
];

/// The changes a markdown table of changes states, row by row: "| 薪资范围 | 25k-30k | 30k-35k |"
/// under "| 项目 | 原来 | 现在 |", "| Launch | Thu 19 Nov | Mon 23 Nov |" under "| What | Before
/// | Now |". In a row, a value of each kind the two cells hold once each, or, when neither
/// holds one, the two cells themselves when they are short names ("| ATS | Moka | 北森 |").
fn table_changes(text: &str) -> Vec<Change> {
    fn column(header: &[&str], names: &[&str]) -> Option<usize> {
        header
            .iter()
            .position(|h| names.contains(&h.to_lowercase().trim_matches(['*', ':', ' ']).trim()))
    }
    let mut out = Vec::new();
    let mut columns: Option<(usize, usize)> = None;
    for line in text.lines() {
        let Some(row) = thinkus_common::text::table_cells(line) else {
            columns = None;
            continue;
        };
        if thinkus_common::text::is_table_rule(&row) {
            continue;
        }
        let Some((before, after)) = columns else {
            columns = column(&row, BEFORE_HEADINGS).zip(column(&row, AFTER_HEADINGS));
            continue;
        };
        let (Some(old), Some(new)) = (row.get(before), row.get(after)) else {
            continue;
        };
        let (old_found, new_found) = (mentions(old), mentions(new));
        if old_found.is_empty() && new_found.is_empty() {
            let short =
                |c: &str| (2..=24).contains(&c.chars().count()) && !c.contains(['，', ',', '。', '.', ' ']) && c != "-";
            if short(old) && short(new) && old != new {
                out.push(Change::of(old, Some(new)));
            }
            continue;
        }
        for was in &old_found {
            let of_kind = |found: &[Mention]| found.iter().filter(|m| m.kind == was.kind).count() == 1;
            let Some(now) = new_found.iter().find(|m| m.kind == was.kind) else {
                continue;
            };
            if of_kind(&old_found) && of_kind(&new_found) && !was.same_value(now) {
                out.push(Change::of(&was.raw, Some(&now.raw)));
            }
        }
    }
    out
}

/// Words with which a speaker takes back what they just said: "I meant", "typo", "说错了",
/// "不对".
const SELF_CORRECTION: &[&str] = &[
    "meant", "mean", "misspok", "typo", "说错", "记错", "弄错", "写错", "打错", "口误", "更正", "不对",
];

/// A value taken back in the next sentence: "Pro is $49. Sorry, I meant $39", "预算35万。不对，
/// 说错了，是38万". The later sentence names one value of a kind after a word of self-correction,
/// the sentence before it one value of that kind.
fn self_corrections(text: &str) -> Vec<Change> {
    let mut out = Vec::new();
    let said = prose_sentences(text);
    for pair in said.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        let found = mentions(after);
        for new in &found {
            if found.iter().filter(|m| m.comparable(new)).count() != 1 {
                continue;
            }
            let cue = &after[..new.start];
            if !says_any(cue, &terms(cue).into_iter().collect(), SELF_CORRECTION) {
                continue;
            }
            let earlier: Vec<Mention> = mentions(before).into_iter().filter(|m| m.comparable(new)).collect();
            if let [old] = earlier.as_slice()
                && !old.same_value(new)
            {
                out.push(Change::of(&old.raw, Some(&new.raw)));
            }
        }
    }
    out
}

/// The longest sentence read for implied changes, in characters: longer ones are tables,
/// lists and analyses, where a second value of a topic is rarely a replacement.
const IMPLIED_SENTENCE_CHARS: usize = 200;

/// The clauses of a sentence with their byte ranges: split at commas, colons and semicolons.
fn clauses(sentence: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in sentence.char_indices() {
        if matches!(c, '，' | ',' | '；' | ';' | '：' | ':' | '、') {
            out.push((start, i));
            start = i + c.len_utf8();
        }
    }
    out.push((start, sentence.len()));
    out
}

/// The label of a value in a list of several: the word right before it in its clause, not a
/// verb of change nor another value ("小红书" of "调整后小红书9万", "抖音" of "小红书5万/抖音3万",
/// "event" of "paid social £6,000 and events £1,500"). None when the clause gives none.
fn label_of(sentence: &str, mention: &Mention) -> Option<String> {
    let from = clauses(sentence)
        .into_iter()
        .map(|(start, _)| start)
        .filter(|start| *start <= mention.start)
        .max()
        .unwrap_or(0);
    let before = &sentence[from..mention.start];
    let label = terms(before)
        .into_iter()
        .rev()
        .find(|t| {
            !CHANGE_WORDS.contains(&t.as_str())
                && t.chars().any(|c| c.is_alphabetic())
                && !t.chars().any(|c| c.is_ascii_digit())
        })
        .filter(|label| label.chars().count() >= 2 && !thinkus_common::text::is_stopword(label));
    // English also names a figure right after it ("A$150,000 base + A$18,000 super"): that word
    // labels it where no word stands right before it ("+ A$18,000" is not "base"'s).
    let right_before = before
        .trim_end_matches([' ', ':', '：'])
        .chars()
        .next_back()
        .is_some_and(char::is_alphabetic);
    if !right_before && matches!(mention.kind, ValueKind::Amount | ValueKind::Percent) {
        static AFTER: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"^ ([a-z][a-z\-]+)(?-u:\b)").expect("valid regex"));
        let after = AFTER
            .captures(&sentence[mention.end..])
            .and_then(|c| terms(&c[1]).into_iter().next())
            .filter(|w| {
                w.chars().count() >= 2 && !CHANGE_WORDS.contains(&w.as_str()) && !RATE_WORDS.contains(&w.as_str())
            });
        if after.is_some() {
            return after;
        }
    }
    label
}

/// Words after a figure that say what it is by, not what it is ("€34 per van", "€50 every
/// month"; "an hour", "each" are stop words, which [`terms`] leaves out already).
const RATE_WORDS: &[&str] = &["per", "everi"];

/// The label of each of a sentence's values ([`label_of`]), in their order.
fn labels_of(sentence: &str, found: &[Mention]) -> Vec<Option<String>> {
    found.iter().map(|m| label_of(sentence, m)).collect()
}

/// Words that tell of a change only with a verb of choosing when the value is a name: "现在"
/// and "now" date a state ("把Moka里现在的候选人拉一下", "the Figma file we have now") as
/// often as they announce a new one ("现在用北森", "we use Linear now").
const WEAK_CHANGE_WORDS: &[&str] = &["现在", "now", "actual", "up", "down", "go", "goe", "went"];

/// Verbs that change an amount or a date, not which thing is used: "cut it to 4 vans, we'll sub
/// out the overflow to Barry's crowd" raises nothing and switches no vendor.
const QUANTITY_CHANGE_WORDS: &[&str] = &[
    "涨", "涨到", "降", "降到", "减", "减到", "加", "加到", "提高", "提到", "砍", "砍到", "放宽", "收紧", "推", "推到",
    "推迟", "延期", "延后", "延到", "挪", "挪到", "rais", "increas", "bump", "cut", "lower", "reduc", "slip", "delay",
    "postpon", "push",
];

/// Whether `mention` is what a verb of choosing right before it takes: "现在用Rust", "we use
/// Amplitude now".
fn chosen(sentence: &str, mention: &Mention) -> bool {
    static CHOSEN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)(?:用|使用|采用|选|选了|选用|改成|(?-u:\b)(?:use|uses|using|used|chose|choose|picked|pick|on))\s*$",
        )
        .expect("valid regex")
    });
    CHOSEN.is_match(&sentence[..mention.start])
}

/// Whether the `window` around `mention` states a change of its value.
fn tells_a_change(window: &str, window_terms: &HashSet<String>, sentence: &str, mention: &Mention) -> bool {
    if mention.kind != ValueKind::Name {
        return says_any(window, window_terms, CHANGE_WORDS);
    }
    static STRONG: LazyLock<Vec<&str>> = LazyLock::new(|| without(&ANNOUNCING_WORDS, QUANTITY_CHANGE_WORDS));
    says_any(window, window_terms, &STRONG)
        || (says_any(window, window_terms, WEAK_CHANGE_WORDS) && chosen(sentence, mention))
}

/// The words around a value: those of its clause and of the clause before it ("开业也得推，
/// 改到12月20日了"), without values and verbs of change.
fn around(sentence: &str, mention: &Mention, found: &[Mention]) -> (HashSet<String>, bool) {
    let parts = clauses(sentence);
    let at = parts
        .iter()
        .position(|(s, e)| mention.start >= *s && mention.start < (*e).max(*s + 1))
        .unwrap_or(0);
    let from = parts[at.saturating_sub(1)].0;
    let window = &sentence[from..parts[at].1];
    let window_terms: HashSet<String> = terms(window).into_iter().collect();
    let changed = tells_a_change(window, &window_terms, sentence, mention);
    (topic_words(window, window_terms, found), changed)
}

/// The words of `window` (its `window_terms`) that say what its values are about: without the
/// values, the verbs of change and single characters, with the pairs of ideographs.
fn topic_words(window: &str, window_terms: HashSet<String>, found: &[Mention]) -> HashSet<String> {
    let mut words = window_terms;
    // The window without its values, read for pairs of ideographs too.
    let mut bare = window.to_string();
    for m in found {
        for t in terms(&m.raw) {
            words.remove(&t);
        }
        bare = bare.replace(&m.raw, " ");
    }
    words.extend(han_pairs(&bare));
    words.retain(|w| {
        !CHANGE_WORDS.contains(&w.as_str())
            && !MEASURE_WORDS.contains(&w.as_str())
            && w.chars().count() > 1
            && !w.chars().all(|c| c.is_ascii_digit())
    });
    words
}

/// Words that say how a value is measured (per month, about), not what it is about: a cost
/// "每月大约 $2,900" and a budget "每月 $4,200" share them (jieba words, stemmed English terms,
/// and the pairs of ideographs they make).
const MEASURE_WORDS: &[&str] = &[
    "每月",
    "每年",
    "每周",
    "每天",
    "每日",
    "一个月",
    "个月",
    "月份",
    "大约",
    "左右",
    "大概",
    "约为",
    "month",
    "year",
    "week",
    "day",
    "per",
    "about",
    "around",
    "roughli",
    "approx",
    "approxim",
];

/// The topic words of the clause of each value `text` states ([`topic_words`]), by value as
/// written: a value said twice has the words of both clauses.
fn words_around_values(text: &str) -> Vec<(String, HashSet<String>)> {
    let mut out: Vec<(String, HashSet<String>)> = Vec::new();
    for sentence in prose_sentences(text) {
        let found = mentions(&sentence);
        let parts = clauses(&sentence);
        for mention in &found {
            let (start, end) = parts
                .iter()
                .copied()
                .find(|(s, e)| mention.start >= *s && mention.start < (*e).max(*s + 1))
                .unwrap_or((0, sentence.len()));
            let clause = &sentence[start..end];
            let mut words = topic_words(clause, terms(clause).into_iter().collect(), &found);
            // A Latin word of two letters is more often a unit or an abbreviation ("$49/mo",
            // "$1,100/mo") than what the value is about.
            words.retain(|w| !w.is_ascii() || w.len() > 2);
            match out.iter_mut().find(|(raw, _)| *raw == mention.raw) {
                Some((_, known)) => known.extend(words),
                None => out.push((mention.raw.clone(), words)),
            }
        }
    }
    out
}

/// Which value of `came` (said in `new`) replaced which of `gone` (said in `old`, of the same
/// kind), read from the words around them: "Launch 19 Nov, early-bird emails 18 Nov" replaced
/// by "Launch moves to 23 Nov, early-bird emails to 22 Nov" pairs 19 Nov with 23 Nov and 18 Nov
/// with 22 Nov. Two values pair when each is the only one of the other's side that shares a
/// word with it; a value that shares words with none, or with several, is not paired.
pub fn paired_by_words(old: &str, gone: &[&str], new: &str, came: &[&str]) -> Vec<(String, String)> {
    let (old_words, new_words) = (words_around_values(old), words_around_values(new));
    let words_of = |said: &[(String, HashSet<String>)], value: &str| {
        said.iter()
            .find(|(raw, _)| raw == value)
            .map(|(_, words)| words.clone())
            .unwrap_or_default()
    };
    let gone: Vec<(&str, HashSet<String>)> = gone.iter().map(|g| (*g, words_of(&old_words, g))).collect();
    let came: Vec<(&str, HashSet<String>)> = came.iter().map(|c| (*c, words_of(&new_words, c))).collect();
    let mut out = Vec::new();
    for (old_value, old_around) in &gone {
        let sharing: Vec<_> = came.iter().filter(|(_, w)| !w.is_disjoint(old_around)).collect();
        let [(new_value, new_around)] = sharing.as_slice() else {
            continue;
        };
        if gone.iter().filter(|(_, w)| !w.is_disjoint(new_around)).count() == 1 {
            out.push((old_value.to_string(), new_value.to_string()));
        }
    }
    out
}

/// A value said in an earlier record, with the words around it.
struct Said {
    mention: Mention,
    around: HashSet<String>,
    /// The only value of its kind in its sentence.
    alone: bool,
    /// Which earlier sentence it was said in (0 the newest).
    sentence: usize,
    /// The word right before it, its label ([`label_of`]).
    label: Option<String>,
}

/// The values of earlier records (newest first), with the words around each.
pub struct Earlier {
    said: Vec<Said>,
}

impl Earlier {
    /// Reads earlier texts, newest first.
    pub fn new<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut said = Vec::new();
        let mut index = 0;
        for text in texts {
            for sentence in prose_sentences(text) {
                if sentence.chars().count() > IMPLIED_SENTENCE_CHARS {
                    continue;
                }
                let found = mentions(&sentence);
                for (mention, label) in found.iter().zip(labels_of(&sentence, &found)) {
                    let alone = found.iter().filter(|m| m.comparable(mention)).count() == 1;
                    said.push(Said {
                        around: around(&sentence, mention, &found).0,
                        mention: mention.clone(),
                        alone,
                        sentence: index,
                        label,
                    });
                }
                index += 1;
            }
        }
        Self { said }
    }

    /// The newest earlier value of `new`'s kind said among some of `words` that a change of
    /// the topic can only mean: alone of its kind in its sentence, or the only one of them
    /// there said among those words ("12月1日前到岗时间很紧：现在是11月16日" is about 到岗 by its
    /// first date only when the second is not). A sentence that cannot tell is passed over for
    /// an older one that can.
    fn replaced_by(&self, new: &Mention, words: &HashSet<String>) -> Option<&Said> {
        // A count of a specific thing is about that thing, whatever words surround it ("cut it
        // to 4 vans" after "6 vans on lease").
        let same_thing = |s: &Said| new.counts_a_specific_thing() && s.mention.unit() == new.unit();
        let about = |s: &Said| s.mention.comparable(new) && (same_thing(s) || !s.around.is_disjoint(words));
        self.said
            .iter()
            .filter(|s| about(s) && !s.mention.same_value(new))
            .find(|s| {
                s.alone
                    || !self
                        .said
                        .iter()
                        .any(|o| o.sentence == s.sentence && o.mention.start != s.mention.start && about(o))
            })
    }

    /// The newest earlier value comparable with `new` that `label` named, other than `new`,
    /// in a list said again: its sentence shares another label with `labels`, those of `new`'s
    /// sentence ("小红书5万" of "小红书5万、抖音3万" for "小红书9万、抖音3万"; not the "合计1.6万"
    /// of a quote for the "合计12万" of a budget).
    fn labelled(&self, new: &Mention, label: &str, labels: &HashSet<String>) -> Option<&Said> {
        self.said
            .iter()
            .filter(|s| s.label.as_deref() == Some(label) && s.mention.comparable(new))
            .filter(|s| {
                let shared = self
                    .said
                    .iter()
                    .filter(|o| o.sentence == s.sentence)
                    .filter_map(|o| o.label.as_ref())
                    .filter(|l| labels.contains(*l))
                    .collect::<HashSet<_>>();
                shared.len() >= 2
            })
            .find(|s| !s.mention.same_value(new))
    }

    /// Whether the value was stated before.
    fn stated(&self, mention: &Mention) -> bool {
        self.said.iter().any(|s| s.mention.same_value(mention))
    }
}

/// Changes a text implies: a value stated next to a verb of change ("改到12月20日", "raise
/// paid social to £9,500") replaces the newest earlier value of the same kind that was said
/// among the same words ("开业定在12月8日", "paid social £6,000"), when that earlier sentence
/// held no other value of the kind. A sentence of several values of a kind is read by each
/// value's label (`label_of`: "小红书9万、抖音3万" after "小红书5万、抖音3万"). Values the text
/// itself links ([`stated_changes`]) are left to that reading; values said before are not news.
pub fn implied_changes(text: &str, earlier: &Earlier) -> Vec<Change> {
    implied_changes_of(text, earlier, false)
}

/// [`implied_changes`] of a reply that carries out a proposal its user just accepted ("ok, do
/// that" … "Done: the offsite budget is now $6,500"): the acceptance is the verb of change, so
/// a value of the topic is read as new without one.
pub fn accepted_changes(text: &str, earlier: &Earlier) -> Vec<Change> {
    implied_changes_of(text, earlier, true)
}

fn implied_changes_of(text: &str, earlier: &Earlier, accepted: bool) -> Vec<Change> {
    let stated = stated_changes(text);
    let mut out: Vec<Change> = Vec::new();
    // Choices laid out are offered, not made: none of their sentences implies a change.
    let sentences: Vec<String> = prose_sentences(text)
        .into_iter()
        .filter(|s| !offers_choices(s))
        .collect();
    for sentence in &sentences {
        if sentence.chars().count() > IMPLIED_SENTENCE_CHARS {
            continue;
        }
        let sentence = sentence.as_str();
        let found = mentions(sentence);
        let list = std::cell::OnceCell::new();
        for (i, new) in found.iter().enumerate() {
            // A figure said twice is read once, where it is first said; a size ("the 4 hour
            // take-home") is no quantity.
            if found[..i].iter().any(|m| m.same_figure(new)) || new.sizes_a_thing(sentence) {
                continue;
            }
            let linked = stated
                .iter()
                .any(|c| c.old == new.raw || c.new.as_deref() == Some(new.raw.as_str()));
            // Another value of the kind in the sentence leaves it unclear which one changed; the
            // same figure said twice ("55元", "¥55"; "900人（900 users/min）") does not.
            let others = found
                .iter()
                .filter(|m| m.comparable(new) && !m.same_figure(new))
                .count();
            if linked || earlier.stated(new) {
                continue;
            }
            if others > 0 {
                // Several values of the kind: each is its label's ("小红书9万、抖音3万" after
                // "小红书5万、抖音3万"), when the sentence tells of a change. Read once a sentence.
                let (changed, labelled, labels) = list.get_or_init(|| {
                    let labelled = labels_of(sentence, &found);
                    let labels: HashSet<String> = labelled.iter().flatten().cloned().collect();
                    let changed = says_any(sentence, &terms(sentence).into_iter().collect(), CHANGE_WORDS);
                    (changed, labelled, labels)
                });
                if let Some(label) = &labelled[i]
                    && (*changed || accepted)
                    && let Some(old) = earlier.labelled(new, label, labels)
                    && old.mention.plausible_step_to(new)
                {
                    out.push(Change::of(&old.mention.raw, Some(&new.raw)));
                }
                continue;
            }
            let (words, changed) = around(sentence, new, &found);
            if !(changed || accepted) || (words.is_empty() && !new.counts_a_specific_thing()) {
                continue;
            }
            if let Some(old) = earlier.replaced_by(new, &words)
                && old.mention.plausible_step_to(new)
            {
                out.push(Change::of(&old.mention.raw, Some(&new.raw)));
            }
        }
    }
    for sentence in &sentences {
        out.extend(switched_names(sentence, earlier));
    }
    // Read with what implies a change, not as a statement: an analysis calls a figure too low
    // beside the one it is measured against ("€28,468 is too low for the €30,000 floor").
    out.extend(inadequate_values(text));
    let mut seen: HashSet<Change> = stated.into_iter().collect();
    out.retain(|c| seen.insert(c.clone()));
    out
}

/// Whether a sentence lays out choices not yet made ("Options: accept it, … or trim the crew to
/// 37.5 hrs/week", "要么砍到1.5万份，要么推到下周"): a value it names is offered, not changed to.
fn offers_choices(sentence: &str) -> bool {
    static CHOICES: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)(?-u:\b)(?:options|alternatives?|alternatively|either)(?-u:\b)|或者|要么|选项|可选")
            .expect("valid regex")
    });
    CHOICES.is_match(sentence)
}

/// The names a Chinese verb of switching takes: "换北森", "改用 Lark" gives "北森", "Lark"; a
/// name in ideographs is two to six of them, up to a stop ("换合众，", "换合众那边"). A function
/// word ("换一下") is no name.
fn taken_by_switch_zh(text: &str) -> Vec<&str> {
    static TAKES: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?:换成|换为|换用|改用|换到|切到|切换到|转用|换)([A-Za-z][A-Za-z0-9.\-+]*|\p{Han}{2,6}?)(?:[，。；,;！!？?、\s]|了|吧|啊|呢|那边|这家|$)",
        )
        .expect("valid regex")
    });
    TAKES
        .captures_iter(text)
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str())
        .filter(|name| {
            let first = name.chars().next().map(String::from).unwrap_or_default();
            !thinkus_common::text::is_stopword(&first) && !thinkus_common::text::is_stopword(name)
        })
        .collect()
}

/// An English verb of switching, up to the name it takes: "switching over to ", "went with ".
/// `moves` adds "moving to", which across a message names a switch ("Mixpanel got too pricey.
/// We're moving to PostHog") but within one sentence as often a place or a step.
fn switch_en(moves: bool) -> Regex {
    let verbs = if moves {
        r"switch(?:es|ed|ing)?|migrat(?:e|es|ed|ing)|mov(?:e|es|ed|ing)"
    } else {
        r"switch(?:es|ed|ing)?|migrat(?:e|es|ed|ing)"
    };
    Regex::new(&format!(
        r"(?i)(?-u:\b)(?:(?:{verbs})\s+(?:over\s+)?to|(?:go(?:es|ing)?|went)\s+with)\s+$"
    ))
    .expect("valid regex")
}

/// A switch to a new name in a sentence that names the old one without linking the two word to
/// word: "ATS换掉，Moka续费太贵了，换北森", "Moka is too pricey, we're switching to
/// Greenhouse". The new name is what a verb of switching takes; the old one is the only other
/// name of the sentence that was said before ("ATS" names the kind of system, not a choice).
fn switched_names(sentence: &str, earlier: &Earlier) -> Vec<Change> {
    static TO_EN: LazyLock<Regex> = LazyLock::new(|| switch_en(false));
    let found: Vec<Mention> = mentions(sentence)
        .into_iter()
        .filter(|m| m.kind == ValueKind::Name)
        .collect();
    let mut new = taken_by_switch_zh(sentence);
    new.extend(
        found
            .iter()
            .filter(|m| TO_EN.is_match(&sentence[..m.start]))
            .map(|m| m.raw.as_str()),
    );
    let [new] = new.as_slice() else {
        return Vec::new();
    };
    let key = new.to_lowercase();
    let old: Vec<&Mention> = found
        .iter()
        .filter(|m| !key.starts_with(&m.raw.to_lowercase()) && earlier.stated(m))
        .collect();
    match old.as_slice() {
        [old] => vec![Change::of(&old.raw, Some(new))],
        _ => Vec::new(),
    }
}

/// A switch whose old name the message gives in another sentence: "TiDB 我周末算了下，…每月要
/// $3,800。改成 PostgreSQL 16，用 RDS", "Mixpanel got too pricey. We're switching to PostHog".
/// The new name is the one name a verb of switching takes (spaces between the verb and a Latin
/// name allowed, as mixed writing puts them); the old one the only other name of the message
/// that `chosen` says was named as a choice before (a name merely mentioned, a component such
/// as "TiKV", is not what the switch leaves).
pub fn switched_across(text: &str, chosen: impl Fn(&str) -> bool) -> Vec<Change> {
    static SWITCH_EN: LazyLock<Regex> = LazyLock::new(|| switch_en(true));
    let names: Vec<Mention> = mentions(text)
        .into_iter()
        .filter(|m| m.kind == ValueKind::Name)
        .collect();
    let mut new: Vec<&Mention> = names
        .iter()
        .filter(|m| {
            let before = &text[..m.start];
            SWITCH_ZH_BEFORE.is_match(before) || SWITCH_EN.is_match(before)
        })
        .collect();
    new.sort_by_key(|m| m.raw.to_lowercase());
    new.dedup_by(|a, b| a.same_value(b));
    let [new] = new.as_slice() else {
        return if new.is_empty() {
            switched_across_han(text, &chosen)
        } else {
            Vec::new()
        };
    };
    // The old name: a name of the message, or a capitalised word that starts a sentence there
    // ("Mixpanel got too pricey"), which a name reading passes over.
    static CAPITALISED: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?-u:\b)[A-Z][A-Za-z0-9.\-+]+(?-u:\b)").expect("valid regex"));
    let new_key = new.raw.to_lowercase();
    let mut old: Vec<String> = names
        .iter()
        .map(|m| m.raw.clone())
        .chain(CAPITALISED.find_iter(text).map(|m| m.as_str().to_string()))
        .filter(|name| {
            let key = name.to_lowercase();
            !new_key.starts_with(&key) && !key.starts_with(&new_key) && !thinkus_common::text::is_stopword(&key)
        })
        .collect();
    // Each word once before asking `chosen`, which reads the earlier texts.
    old.sort_by_key(|name| name.to_lowercase());
    old.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    old.retain(|name| chosen(name));
    // A name of several words and its first word are one name.
    old.dedup_by(|later, first| later.to_lowercase().starts_with(&first.to_lowercase()));
    match old.as_slice() {
        [old] => vec![Change::of(old, Some(&new.raw))],
        _ => Vec::new(),
    }
}

/// [`switched_across`] for names in ideographs, which [`mentions`] cannot see: "那就换合众，鑫彩那边
/// 我去说" after "包装还是找鑫彩印务". The new name is the one word a verb of switching takes; the old
/// one the only other word of the message (two to six ideographs) that `chosen` says was named
/// as a choice before.
fn switched_across_han(text: &str, chosen: &dyn Fn(&str) -> bool) -> Vec<Change> {
    let mut new = taken_by_switch_zh(text);
    new.retain(|name| name.chars().all(thinkus_common::text::is_han));
    new.sort_unstable();
    new.dedup();
    let [new] = new.as_slice() else {
        return Vec::new();
    };
    let mut old: Vec<String> = terms(text)
        .into_iter()
        .filter(|t| {
            let n = t.chars().count();
            (2..=6).contains(&n)
                && t.chars().all(thinkus_common::text::is_han)
                && !new.contains(t.as_str())
                && !t.contains(new)
                && !thinkus_common::text::is_stopword(t)
        })
        .collect();
    old.sort_unstable();
    old.dedup();
    old.retain(|word| chosen(word));
    match old.as_slice() {
        [old] => vec![Change::of(old, Some(new))],
        _ => Vec::new(),
    }
}

/// The sentence of `text` that states a change of `old`: the first that names the new value
/// and the old one, else the first that names the new value, else the first that names the old
/// one ("不用客如云了"), else the text's first sentence; a table row is one sentence.
pub fn statement_of(text: &str, old: &str, new: Option<&str>) -> String {
    let said: Vec<String> = text
        .lines()
        .flat_map(|line| {
            if line.trim_start().starts_with('|') {
                vec![line.trim().to_string()]
            } else {
                sentences(line)
            }
        })
        .filter(|s| !s.trim().is_empty())
        .collect();
    let names = |s: &str, value: &str| !occurrences(s, value).is_empty();
    let first = |test: &dyn Fn(&str) -> bool| said.iter().find(|s| test(s)).cloned();
    new.and_then(|new| first(&|s| names(s, new) && names(s, old)))
        .or_else(|| new.and_then(|new| first(&|s| names(s, new))))
        .or_else(|| first(&|s| names(s, old)))
        .or_else(|| said.first().cloned())
        .map(|s| thinkus_common::text::without_list_mark(s.trim()).to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use thinkus_common::model::Language;

    use super::*;
    use crate::changes::{Replaced, states_value, strike};

    #[test]
    fn an_old_value_said_as_a_bare_number_takes_the_new_ones_unit() {
        for (text, old, new) in [
            (
                "Oh and Glanmire is 22 stores not 20, Orla sent the final list.",
                "20 stores",
                "22 stores",
            ),
            ("Winter crew: 8 techs (not 6) via Saltbush.", "6 techs", "8 techs"),
            ("so it's more like 10.3k a month not 9.4", "9.4k", "10.3k"),
            ("铺货是42家，不是36。", "36家", "42家"),
        ] {
            assert_eq!(pairs(stated_changes(text)), vec![some(old, new)], "{text}");
        }
        // "A$150,000 base now, not 142" means thousands: a guess, not read.
        assert!(stated_changes("so the offer's A$150,000 base now, not 142").is_empty());
        // The struck old value finds the figure as it was written before.
        let at = Utc.with_ymd_and_hms(2027, 3, 3, 9, 0, 0).unwrap();
        let changes = [Replaced {
            old: "9.4k".into(),
            new: Some("10.3k".into()),
            at,
        }];
        let struck = strike(
            "Glanmire: €9,400 a month",
            at - chrono::Duration::days(1),
            &changes,
            Language::En,
        );
        assert!(struck.contains("~~€9,400~~"), "{struck}");
    }

    #[test]
    fn an_old_value_after_the_new_one_in_other_words() {
        for (text, old, new) in [
            ("€1,279 a van, down from the €1,287 we had.", "€1,287", "€1,279"),
            (
                "Aiko's offer: A$150,000 base (was A$142,000) + super.",
                "A$142,000",
                "A$150,000",
            ),
            ("relocation A$8,000 (cut from A$12,000)", "A$12,000", "A$8,000"),
            ("价格：首发价49元（原来59元），供货价另算。", "59元", "49元"),
            (
                "好，上线从12月18日往后挪一周，改为12月25日（周五）。",
                "12月18日",
                "12月25日",
            ),
        ] {
            assert_eq!(pairs(stated_changes(text)), vec![some(old, new)], "{text}");
        }
        // A value after another in a plain sentence is no change.
        assert!(stated_changes("Q1 was $40k and Q2 was $55k.").is_empty());
    }

    #[test]
    fn a_count_changes_with_a_count_of_the_same_thing() {
        let earlier = Earlier::new([
            "Bottom line: 6 vans on these terms would leave the current account at about €28,468 after VAT.",
            "Lapwing Cold Chain (that's us: 7 vans, Cork) just got the nod.",
        ]);
        let cut = "ugh. ok cut it to 4 vans, we'll sub out the overflow to Barry's crowd if we have to";
        assert_eq!(pairs(implied_changes(cut, &earlier)), vec![some("6 vans", "4 vans")]);
        // Not a count of another thing, and a verb of quantity switches no name ("VAT" to
        // "Barry").
        let earlier = Earlier::new(["We hired 6 techs, and VAT is due on the 23rd."]);
        assert!(implied_changes(cut, &earlier).is_empty());
    }

    #[test]
    fn names_dropped_and_figures_before_an_arrow() {
        for (text, old) in [
            ("Telematics is Webfleet now, and Samsara dropped.", "Samsara"),
            ("Redgum is dropped; I'll send them a short note.", "Redgum"),
            ("Samsara is out, so no need for theirs.", "Samsara"),
            ("ok ditch Samsara", "Samsara"),
        ] {
            assert!(pairs(stated_changes(text)).contains(&(old.to_string(), None)), "{text}");
        }
        for text in ["I'll drop Gary a note.", "Apple is out of stock this week."] {
            assert!(stated_changes(text).is_empty(), "{text}");
        }
        // A name dropped where another is switched to: what the switch leaves.
        for (text, old, new) in [
            (
                "好，排队服务换成 Cloudflare Waiting Room（加到现有合同，随时可停），不用 Queue-it 了。",
                "Queue-it",
                "Cloudflare Waiting Room",
            ),
            (
                "Redgum is out, we're going with Saltbush Staffing.",
                "Redgum",
                "Saltbush Staffing",
            ),
            ("收银系统换掉客如云，改用二维火。", "客如云", "二维火"),
        ] {
            assert_eq!(pairs(stated_changes(text)), vec![some(old, new)], "{text}");
        }
        // Dropped with nothing switched to, or with two names switched to: the old name alone.
        for text in [
            "不用 Slack 了，大家都在群里说。",
            "Redgum is out; we'll go with Saltbush Staffing, or go with Hays if they can't.",
        ] {
            assert!(
                pairs(stated_changes(text)).iter().all(|(_, new)| new.is_none()),
                "{text}"
            );
        }
        assert_eq!(
            pairs(stated_changes("That needs a 5th van: 4 → 5 vans is +€1,287/month.")),
            vec![some("4 vans", "5 vans")]
        );
        assert!(stated_changes("Rollout 10 → 50 → 100 users.").is_empty(), "a ramp");
    }

    #[test]
    fn a_message_asks_for_a_change_with_a_word_that_announces_one() {
        for asks in [
            "上市往后推一周吧",
            "push the signing a week",
            "ok cut it to 4 vans",
            "预算改成12万",
        ] {
            assert!(asks_for_a_change(asks), "{asks}");
        }
        for asks_none in [
            "晚上要跟投资人电话，春节通道现在的关键数字给我过一遍",
            "so what's the plan now?",
            "go through the numbers with me",
        ] {
            assert!(!asks_for_a_change(asks_none), "{asks_none}");
        }
    }

    #[test]
    fn a_value_of_a_list_is_its_labels() {
        let earlier = Earlier::new(["达人投放预算8万，先按小红书5万、抖音3万分。"]);
        let changes = pairs(implied_changes(
            "投放预算改为12万：小红书9万（含2万加热）、抖音3万。",
            &earlier,
        ));
        assert!(changes.contains(&some("5万", "9万")), "{changes:?}");
        assert!(!changes.iter().any(|c| c.0 == "3万"), "抖音 kept its 3万: {changes:?}");
        let earlier = Earlier::new(["Paid social gets £6,000 and events £1,500 this quarter."]);
        let changes = pairs(implied_changes(
            "We're moving money around: paid social £5,000, events £2,500.",
            &earlier,
        ));
        assert!(changes.contains(&some("£6,000", "£5,000")), "{changes:?}");
        assert!(changes.contains(&some("£1,500", "£2,500")), "{changes:?}");
        // A label shared with another list is not the same list: a quote's total is not the
        // budget's.
        let earlier = Earlier::new(["包装报价合计1.6万，交期12天。"]);
        let changes = pairs(implied_changes("调整后小红书9万、抖音3万，合计12万。", &earlier));
        assert!(!changes.iter().any(|c| c.0 == "1.6万"), "{changes:?}");
        // A list said again without a word of change changes nothing.
        assert!(implied_changes("小红书9万、抖音3万，你看看。", &Earlier::new(["小红书5万、抖音3万"])).is_empty());
    }

    #[test]
    fn the_same_figure_said_twice_leaves_a_change_readable() {
        let earlier = Earlier::new(["首发价：3月18日为了便利店货架改成49元。"]);
        assert_eq!(
            pairs(implied_changes(
                "好，首发价改为55元，贴纸改成'首发价 ¥55 / 10包'，其余不变。",
                &earlier
            )),
            vec![some("49元", "55元")]
        );
        // A step of more than ten times is another quantity that shares a word.
        let earlier = Earlier::new(["投放素材里的价格我按55元更新。"]);
        assert!(implied_changes("第三个，投放预算我想了想，加到12万。", &earlier).is_empty());
    }

    #[test]
    fn going_with_another_vendor_is_a_switch() {
        let earlier = Earlier::new(["Dara wants Samsara on the new vans, 36 month contract."]);
        // The name dropped and the one gone with are in one sentence: the text states the change,
        // which the implied reading leaves to it.
        let text = "and Webfleet do monthly rolling at €34 a van, ditch Samsara, go with Webfleet";
        assert_eq!(pairs(stated_changes(text)), vec![some("Samsara", "Webfleet")]);
        assert!(implied_changes(text, &earlier).is_empty());
    }

    #[test]
    fn the_same_value_written_two_ways() {
        let a = &mentions("装修35万")[0];
        let b = &mentions("装修：35.0万")[0];
        assert!(a.same_value(b));
        let a = &mentions("on Oct 15")[0];
        let b = &mentions("the 15th of October")[0];
        assert!(a.same_value(b));
        let a = &mentions("$1,500")[0];
        let b = &mentions("1500 dollars")[0];
        assert!(a.same_value(b));
        assert!(!a.same_value(&mentions("£1,500")[0]), "another currency");
    }

    fn pairs(changes: Vec<Change>) -> Vec<(String, Option<String>)> {
        changes.into_iter().map(|c| (c.old, c.new)).collect()
    }

    fn some(old: &str, new: &str) -> (String, Option<String>) {
        (old.to_string(), Some(new.to_string()))
    }

    #[test]
    fn changes_stated_with_both_values() {
        for (text, old, new) in [
            ("刚跟装修队谈完，总价从35万加到42万。", "35万", "42万"),
            ("租金我说错了，是3.2万不是2.8万", "2.8万", "3.2万"),
            ("开业从12月8日推到12月20日", "12月8日", "12月20日"),
            ("Sorry, Pro is $39, not $49.", "$49", "$39"),
            ("We pushed the launch from Oct 15 to Oct 29.", "Oct 15", "Oct 29"),
            ("Use PostHog instead of Mixpanel", "Mixpanel", "PostHog"),
            ("目标库 TiDB -> PostgreSQL 16", "TiDB", "PostgreSQL 16"),
            ("薪资从25k-30k上调到30k-35k", "25k-30k", "30k-35k"),
            ("收银系统从客如云换成二维火，会员能通用", "客如云", "二维火"),
            (
                "PostHog Cloud replaces Mixpanel, decision made.",
                "Mixpanel",
                "PostHog Cloud",
            ),
            (
                "I told you Pro is $49. sorry, I meant $39. $49 was the old plan we killed in the spring.",
                "$49",
                "$39",
            ),
            ("预算是35万。不对，说错了，是38万。", "35万", "38万"),
            ("Launch is Oct 15. Typo: Oct 25.", "Oct 15", "Oct 25"),
        ] {
            assert_eq!(pairs(stated_changes(text)), vec![some(old, new)], "{text}");
        }
        assert_eq!(
            pairs(stated_changes("收银系统换掉吧，不用客如云了。")),
            vec![("客如云".to_string(), None)]
        );
    }

    #[test]
    fn ranges_and_plans_are_not_changes() {
        assert!(stated_changes("灰度读流量 10% → 50% → 100%").is_empty(), "a ramp");
        assert!(stated_changes("营业时间从早8点到晚9点，从12月1日到12月15日放假").is_empty());
        assert!(stated_changes("The promo runs from Nov 19 to Nov 30.").is_empty());
        assert!(stated_changes("预算35万，开业12月8日").is_empty());
        assert!(
            stated_changes("Pro is $49. Starter is $19.").is_empty(),
            "no word takes $49 back"
        );
        assert!(
            stated_changes("Budget is $500. I mean, it's tight.").is_empty(),
            "no new value"
        );
        assert!(
            stated_changes("Pro is $49. Sorry, I meant $39 for Starter and $19 for Lite.").is_empty(),
            "two new values: which one replaces $49 is not said"
        );
    }

    #[test]
    fn changes_implied_by_a_later_sentence_on_the_same_topic() {
        let headcount = Earlier::new(["外包那边给我们4个人，下周一进场"]);
        assert_eq!(
            pairs(implied_changes(
                "哦不对，外包是3个人，第4个是他们的PM不算人头",
                &headcount
            )),
            vec![some("4个人", "3个人")]
        );
        let earlier = Earlier::new(["开业定在12月8日，装修预算35万"]);
        assert_eq!(
            pairs(implied_changes("消防要改喷淋，开业也得推，改到12月20日了", &earlier)),
            vec![some("12月8日", "12月20日")]
        );
        let earlier = Earlier::new(["We send the newsletter with Mailchimp every Friday."]);
        assert_eq!(
            pairs(implied_changes(
                "Let's move the newsletter to Klaviyo next month.",
                &earlier
            )),
            vec![some("Mailchimp", "Klaviyo")]
        );
        // No verb of change: a second value of a topic is not a replacement.
        let earlier = Earlier::new(["The launch is Oct 15."]);
        assert!(implied_changes("The launch party is Oct 16.", &earlier).is_empty());
        // Another topic: no change.
        let earlier = Earlier::new(["营销预算给你3万"]);
        assert!(implied_changes("装修那边改一下，押金现在是5万", &earlier).is_empty());
    }

    #[test]
    fn a_value_changed_from_is_old_wherever_the_new_one_stands() {
        for (text, old, new) in [
            (
                "按最新的首发价49元/盒印（昨天你跟渠道定的，从59元改过来）",
                "59元",
                Some("49元"),
            ),
            ("投放预算3.5万，上周从2万提上来的", "2万", Some("3.5万")),
            ("预算从20万砍下来了", "20万", None),
            (
                "The rate is A$55.10 now, we moved it from A$53.40 last week.",
                "A$53.40",
                Some("A$55.10"),
            ),
            ("Budget: $800, changed from $500 yesterday.", "$500", Some("$800")),
        ] {
            assert_eq!(
                pairs(stated_changes(text)),
                vec![(old.to_string(), new.map(str::to_string))],
                "{text}"
            );
        }
        // A name left by a verb of switching only: where someone moved from is no choice.
        assert_eq!(
            pairs(stated_changes(
                "We switched from Mixpanel last month, PostHog is cheaper."
            )),
            vec![("Mixpanel".to_string(), None)]
        );
        assert!(stated_changes("Aiko moved from Corvane Medical last year.").is_empty());
        // From one value to another, or from a date onwards: read as before, or no change.
        assert_eq!(pairs(stated_changes("预算从20万改到30万")), vec![some("20万", "30万")]);
        assert!(stated_changes("从12月1日起营业，月租3万").is_empty());
    }

    #[test]
    fn a_change_is_stated_by_its_sentence_without_a_list_mark() {
        let reply = "Where they stand:\n- Aiko's offer: A$150,000 base (was A$142,000).\n- Crew: 8 techs.";
        assert_eq!(
            statement_of(reply, "A$142,000", Some("A$150,000")),
            "Aiko's offer: A$150,000 base (was A$142,000)."
        );
        assert_eq!(
            statement_of("| Base | A$142,000 | A$150,000 |", "A$142,000", None),
            "| Base | A$142,000 | A$150,000 |"
        );
    }

    #[test]
    fn a_count_that_sizes_a_thing_is_not_a_quantity_changed() {
        let earlier = Earlier::new(["Crew: 6 techs, 12 weeks from 3 May, 38 hours a week."]);
        for text in [
            "honestly the 4 hour take-home feels like a lot for someone who's also moving cities.",
            "Let's move the 30-minute standup to Tuesdays.",
        ] {
            assert!(implied_changes(text, &earlier).is_empty(), "{text}");
        }
        // A quantity is said in the plural: that one changes.
        assert_eq!(
            pairs(implied_changes("We cut the crew to 30 hours a week.", &earlier)),
            vec![some("38 hours", "30 hours")]
        );
    }

    #[test]
    fn a_value_called_inadequate_gives_way_to_the_next_of_its_kind() {
        for (text, old, new) in [
            (
                "回到正事。看这个注册数，20万 峰值肯定不够，41万人注册，开售那一刻少说来一大半。按 30万 准备。",
                "20万",
                "30万",
            ),
            ("$500 won't be enough for the offsite, make it $800.", "$500", "$800"),
            (
                "4 vans is too few for the Glanmire routes. We need 5 vans.",
                "4 vans",
                "5 vans",
            ),
        ] {
            assert_eq!(
                pairs(implied_changes(text, &Earlier::new([""]))),
                vec![some(old, new)],
                "{text}"
            );
        }
        // Inadequate with nothing in its place: no change yet; in an analysis, no statement.
        assert!(implied_changes("预算20万肯定不够，我再想想。", &Earlier::new([""])).is_empty());
        assert!(implied_changes("$500 isn't enough. Let's talk tomorrow.", &Earlier::new([""])).is_empty());
        assert!(stated_changes("About €28,468 is too low for the €30,000 floor.").is_empty());
    }

    #[test]
    fn values_in_chinese_numerals() {
        for (text, raw, same_as) in [
            ("峰值我们就不按三十万了", "三十万", "30万"),
            ("预算二十五万", "二十五万", "25万"),
            ("等十五分钟", "十五分钟", "15分钟"),
            ("大概三点五万", "三点五万", "3.5万"),
            ("要两万份", "两万份", "2万份"),
            ("一百二十块", "一百二十块", "120元"),
        ] {
            let found = mentions(text);
            let wanted = mentions(same_as);
            assert!(
                found.iter().any(|m| m.raw == raw && m.same_value(&wanted[0])),
                "{text}: {found:?}"
            );
        }
        // Numerals in passing are no values.
        for text in ["做一个方案", "这两个人", "千万别发", "万一不行", "十分重要", "第十名"] {
            assert!(mentions(text).is_empty(), "{text}: {:?}", mentions(text));
        }
        // A change told in numerals, in a voice note, is read.
        assert_eq!(
            pairs(stated_changes("所以这批只有六场 峰值我们就不按三十万了 按25万算吧")),
            vec![some("三十万", "25万")]
        );
        assert!(states_value("峰值就不按三十万了", "30万"));
        assert_eq!(
            pairs(implied_changes("峰值改成二十五万", &Earlier::new(["峰值按 30万 准备"]))),
            vec![some("30万", "二十五万")]
        );
    }

    #[test]
    fn counts_in_english_words() {
        for (text, raw, same_as) in [
            ("ok cut it to four vans then", "four vans", "4 vans"),
            ("it's twenty-two stores now", "twenty-two stores", "22 stores"),
            (
                "about two hundred and fifty users",
                "two hundred and fifty users",
                "250 users",
            ),
            ("Eight techs, not six.", "Eight techs", "8 techs"),
        ] {
            let found = mentions(text);
            let wanted = mentions(same_as);
            assert!(
                found.iter().any(|m| m.raw == raw && m.same_value(&wanted[0])),
                "{text}: {found:?}"
            );
        }
        for text in [
            "one thing before I go",
            "the one with the logger",
            "two of them",
            "a few vans",
        ] {
            assert!(mentions(text).is_empty(), "{text}: {:?}", mentions(text));
        }
        let earlier = Earlier::new(["The plan is 6 vans on lease from Fenwick."]);
        assert_eq!(
            pairs(implied_changes(
                "ugh. ok cut it to four vans, we'll sub out the overflow",
                &earlier
            )),
            vec![some("6 vans", "four vans")]
        );
    }

    #[test]
    fn a_thing_named_by_its_size_is_dropped_for_another() {
        assert_eq!(
            pairs(stated_changes(
                "Proposal: drop the 4-hour take-home and do a 90-minute pairing session at the panel instead."
            )),
            vec![some("4-hour take-home", "90-minute pairing")]
        );
        assert_eq!(
            pairs(stated_changes(
                "Done. The 4-hour take-home is off; the panel is a pairing session."
            )),
            vec![("4-hour take-home".to_string(), None)]
        );
        // Kept, or sized without being dropped: no change.
        assert!(stated_changes("The 4-hour take-home stays as is.").is_empty());
        assert!(stated_changes("Drop me a line after the 30-minute call.").is_empty());
        // Struck however its size is written.
        let changes = [Replaced {
            old: "4-hour take-home".into(),
            new: Some("90-minute pairing".into()),
            at: Utc.with_ymd_and_hms(2027, 3, 9, 10, 0, 0).unwrap(),
        }];
        let said = Utc.with_ymd_and_hms(2027, 3, 9, 11, 0, 0).unwrap();
        assert_eq!(
            strike(
                "the 4 hour take-home feels like a lot",
                Utc.with_ymd_and_hms(2027, 3, 8, 9, 0, 0).unwrap(),
                &changes,
                Language::En
            ),
            "the ~~4 hour take-home~~ (now 90-minute pairing, since 9 Mar) feels like a lot"
        );
        assert_eq!(
            strike("a 4-hour take-home", said, &changes, Language::En),
            "a 4-hour take-home"
        );
    }

    #[test]
    fn a_figure_of_an_english_list_is_labelled_by_the_word_after_it() {
        let earlier =
            Earlier::new(["Aiko: A$150,000 base + A$18,000 super = A$168,000 a year, plus A$12,000 relocation."]);
        let changes = pairs(accepted_changes(
            "Aiko: base A$147,500 + A$17,700 super = A$165,200 recurring; relocation A$8,000.",
            &earlier,
        ));
        assert!(changes.contains(&some("A$150,000", "A$147,500")), "{changes:?}");
        assert!(changes.contains(&some("A$18,000", "A$17,700")), "{changes:?}");
        assert!(
            !changes
                .iter()
                .any(|(old, _)| old == "A$18,000" && changes.contains(&some(old, "A$147,500"))),
            "{changes:?}"
        );
    }

    #[test]
    fn choices_laid_out_change_nothing() {
        let earlier = Earlier::new(["Winter crew: 8 techs, A$53.40/hr, 12 weeks, 38 hrs/wk."]);
        let options = "Options: accept it (the overage is 0.5%), ask them to drop the travel time, or trim the crew to 37.5 hrs/week.";
        assert!(implied_changes(options, &earlier).is_empty());
        assert!(accepted_changes(options, &earlier).is_empty());
        // The same change said outright is one.
        assert_eq!(
            pairs(implied_changes("We cut the crew to 37.5 hrs/week.", &earlier)),
            vec![some("38 hrs", "37.5 hrs")]
        );
        let earlier = Earlier::new(["试饮装印2万份"]);
        assert!(implied_changes("要么砍到1.5万份，要么推到下周再印", &earlier).is_empty());
        assert_eq!(
            pairs(implied_changes("试饮装砍到1.5万份，下周再印", &earlier)),
            vec![some("2万份", "1.5万份")]
        );
    }

    #[test]
    fn a_sentence_that_cannot_tell_gives_way_to_an_older_one_that_can() {
        // Newest first: the reply holds two dates of the opening, the user's own sentence one.
        let earlier = Earlier::new([
            "开业定在12月8日，开业前的试营业12月5日",
            "开业定在12月8日，装修预算35万",
        ]);
        assert_eq!(
            pairs(implied_changes("开业推迟，改到12月20日了", &earlier)),
            vec![some("12月8日", "12月20日")]
        );
        // Two dates of one topic in the only sentence: which one moved is not said.
        let earlier = Earlier::new(["The launch is Oct 15, the launch party Oct 16."]);
        assert!(implied_changes("We're moving the launch to Oct 29.", &earlier).is_empty());
    }

    #[test]
    fn a_table_of_changes_states_each_row() {
        let reply = "收到：\n\n| 项目 | 原来 | 现在 |\n|---|---|---|\n| 薪资范围 | 25k-30k | 30k-35k（14薪不变） |\n| 到岗时间 | 12月1日前 | 12月15日前 |\n| ATS | Moka | 北森 |\n\nJD我今天就改掉重新发。";
        assert_eq!(
            pairs(stated_changes(reply)),
            vec![
                some("25k-30k", "30k-35k"),
                some("12月1日", "12月15日"),
                some("Moka", "北森")
            ]
        );
        let reply = "Understood.\n\n| What | Before | Now |\n|---|---|---|\n| Launch and early-bird email | Thu 19 Nov | Mon 23 Nov |\n| Owner | Ellie | Ellie |";
        assert_eq!(pairs(stated_changes(reply)), vec![some("19 Nov", "23 Nov")]);
        // A table without a before and an after column states no change.
        let plan = "| Phase | Dates |\n|---|---|\n| Tease | 12-18 Nov |\n| Launch | 19 Nov |";
        assert!(stated_changes(plan).is_empty());
        let scores = "| 姓名 | 年限 | 期望 |\n|---|---|---|\n| 王立 | 5年 | 30k |";
        assert!(stated_changes(scores).is_empty());
    }

    #[test]
    fn a_switch_names_the_old_name_anywhere_in_its_sentence() {
        let earlier = Earlier::new(["把Moka里现在后端岗的候选人拉一下我看看"]);
        assert_eq!(
            pairs(implied_changes(
                "还有，ATS换掉，Moka续费太贵了，换北森，北森那套带测评",
                &earlier
            )),
            vec![some("Moka", "北森")]
        );
        let earlier = Earlier::new(["Pull the candidates we have in Lever."]);
        assert_eq!(
            pairs(implied_changes(
                "The renewal quote for Lever is too high, so we are switching to Greenhouse next month.",
                &earlier
            )),
            vec![some("Lever", "Greenhouse")]
        );
        // Not said before, two old names, or nothing switched to: no change.
        assert!(implied_changes("Lever got too pricey, switching to Greenhouse.", &Earlier::new([""])).is_empty());
        assert!(
            implied_changes(
                "Both Lever and Jira renew in May, switching to Greenhouse.",
                &Earlier::new(["We set up Lever and Jira."])
            )
            .is_empty()
        );
        assert!(implied_changes("Moka里的数据导出来，换个地方存", &earlier_moka()).is_empty());
    }

    fn earlier_moka() -> Earlier {
        Earlier::new(["把Moka里现在后端岗的候选人拉一下我看看"])
    }

    #[test]
    fn a_name_said_now_is_new_only_when_chosen() {
        let earlier = Earlier::new(["这次要招3个后端，后端用Golang，3年以上经验"]);
        assert!(
            implied_changes("把Moka里现在后端岗的候选人拉一下我看看", &earlier).is_empty(),
            "现在 dates the candidates, it does not choose Moka"
        );
        assert_eq!(
            pairs(implied_changes("后端现在用Rust了", &earlier)),
            vec![some("Golang", "Rust")]
        );
        assert_eq!(
            pairs(implied_changes("后端现在改成Rust了", &earlier)),
            vec![some("Golang", "Rust")],
            "a strong verb of change needs no verb of choosing"
        );
    }
}
