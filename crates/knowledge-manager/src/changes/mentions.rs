//! The values a text states.

use std::sync::LazyLock;

use regex::Regex;
use thinkus_common::text::sentences;

/// The kind of a value: only values of one kind replace each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueKind {
    /// Money and other quantities with a currency or magnitude: "$500", "35万", "£6,000".
    Amount,
    /// "20%", "15％".
    Percent,
    /// A calendar day: "12月8日", "Oct 15", "23 November", "2026-12-12".
    Date,
    /// A number of things: "3个", "4 contractors", "2名".
    Count,
    /// A range of amounts: "25k-30k", "1万到2万".
    Range,
    /// A product, vendor or technology: "PostgreSQL 16", "Mixpanel", "Next.js", "客如云".
    Name,
}

/// How two mentions are compared: by number, by calendar day or by text.
#[derive(Debug, Clone, PartialEq)]
enum Key {
    Number {
        value: f64,
        currency: Option<char>,
    },
    /// A number of things: "6 vans", "1,500 users", "2万份", "4个人".
    Count {
        value: f64,
        unit: String,
    },
    Day {
        month: u32,
        day: u32,
    },
    Text(String),
}

impl Key {
    fn same(&self, other: &Key) -> bool {
        match (self, other) {
            (Key::Number { value: a, currency: ca }, Key::Number { value: b, currency: cb }) => {
                (a - b).abs() < 1e-6 * a.abs().max(1.0) && (ca.is_none() || cb.is_none() || ca == cb)
            }
            (Key::Count { value: a, unit: ua }, Key::Count { value: b, unit: ub }) => {
                (a - b).abs() < 1e-6 * a.abs().max(1.0) && ua == ub
            }
            (Key::Day { month: ma, day: da }, Key::Day { month: mb, day: db }) => ma == mb && da == db,
            (Key::Text(a), Key::Text(b)) => a == b,
            _ => false,
        }
    }
}

/// A value as written in a text.
#[derive(Debug, Clone, PartialEq)]
pub struct Mention {
    /// As written: "35.0万", "Oct 15", "PostgreSQL 16".
    pub raw: String,
    pub kind: ValueKind,
    key: Key,
    /// Byte offsets in the text.
    pub start: usize,
    pub end: usize,
}

impl Mention {
    /// Whether two mentions state the same value ("35万" and "35.0万", "Oct 15" and "15
    /// October", "PostgreSQL" and "postgresql").
    pub fn same_value(&self, other: &Mention) -> bool {
        self.kind == other.kind && self.key.same(&other.key)
    }

    /// The number a value states, for amounts, percents and counts.
    pub(super) fn number(&self) -> Option<f64> {
        match &self.key {
            Key::Number { value, .. } | Key::Count { value, .. } => Some(*value),
            _ => None,
        }
    }

    /// Whether `self` can be what a later `new` replaced without the text saying so: numbers
    /// within a factor of ten of each other. A step larger than that is another quantity that
    /// shares a word with it (a price of 55元 and a budget of 12万 both "投放").
    pub(super) fn plausible_step_to(&self, new: &Mention) -> bool {
        match (self.number(), new.number()) {
            (Some(a), Some(b)) if a > 0.0 && b > 0.0 => a / b <= 10.0 && b / a <= 10.0,
            _ => true,
        }
    }

    /// The same value, or the same number said with another unit of the same thing ("900人",
    /// "900 users").
    pub(super) fn same_figure(&self, other: &Mention) -> bool {
        self.same_value(other) || (self.comparable(other) && self.number().is_some() && self.number() == other.number())
    }

    /// Whether two figures are said in one unit: amounts in the same currency (or neither in
    /// one), counts of the same thing. What a figure worked out from others is measured in.
    pub(super) fn same_unit(&self, other: &Mention) -> bool {
        self.kind == other.kind
            && match (&self.key, &other.key) {
                (Key::Number { currency: a, .. }, Key::Number { currency: b, .. }) => a == b,
                (Key::Count { unit: a, .. }, Key::Count { unit: b, .. }) => a == b,
                _ => false,
            }
    }

    /// What a count counts ("van", "份"), as compared.
    pub(super) fn unit(&self) -> Option<&str> {
        match &self.key {
            Key::Count { unit, .. } => Some(unit),
            _ => None,
        }
    }

    /// Whether two values may replace each other: of one kind, and for counts, counts of the
    /// same thing ("4 vans" does not replace "6 techs"). Counts named in two scripts ("1,500
    /// users", "900人") are left to the words around them.
    pub(super) fn comparable(&self, other: &Mention) -> bool {
        self.kind == other.kind
            && match (self.unit(), other.unit()) {
                (Some(a), Some(b)) => a == b || a.is_ascii() != b.is_ascii(),
                _ => true,
            }
    }

    /// Whether a count, in `text`, gives the size of the thing named after it rather than a
    /// quantity: "the 4 hour take-home", "a 90 minute pairing" (English says a quantity in the
    /// plural, "4 hours", and a size in the singular, followed by what it sizes). The hyphenated
    /// "4-hour" is no count to begin with; [`SIZED_THING`] reads both forms as text.
    pub(super) fn sizes_a_thing(&self, text: &str) -> bool {
        static SIZE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\d[\d,.]*\s?([A-Za-z]+)$").expect("valid regex"));
        static NEXT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\s*([a-z][a-z\-]+)").expect("valid regex"));
        let Some(unit) = SIZE.captures(&self.raw).and_then(|c| c.get(1)) else {
            return false;
        };
        !unit.as_str().ends_with('s')
            && self.number() != Some(1.0)
            && NEXT
                .captures(&text[self.end..])
                .and_then(|c| c.get(1))
                .is_some_and(|next| !thinkus_common::text::is_stopword(next.as_str()))
    }

    /// A count of a thing named specifically ("vans", "份", "家"), not of people or items in
    /// general ("个", "人", "位"): the thing it counts says what the count is about.
    pub(super) fn counts_a_specific_thing(&self) -> bool {
        self.unit()
            .is_some_and(|u| !GENERIC_COUNTERS.contains(&u) && u.chars().count() >= if u.is_ascii() { 3 } else { 1 })
    }
}

/// What follows a number that is a price by the unit: "an hour", "a month", "per van".
static RATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^ (?:an?|per) (?:hour|hr|day|week|month|year|unit|head|seat|user|van|item|piece)(?-u:\b)")
        .expect("valid regex")
});

/// Chinese counter words that count people or items in general.
const GENERIC_COUNTERS: &[&str] = &["个", "人", "名", "位", "种", "项", "次"];

/// The unit of a count as compared: lower case, an English plural's "s" dropped, "个人" as "人".
fn count_unit(counter: &str) -> String {
    let unit = counter.trim().to_lowercase();
    if unit == "个人" {
        return "人".into();
    }
    if unit.is_ascii() && unit.len() > 3 && unit.ends_with('s') && !unit.ends_with("ss") {
        return unit[..unit.len() - 1].to_string();
    }
    unit
}

/// The English noun right after a number that says what it counts ("6 vans", "3 advance
/// rentals" counts "advance"): a lower-case word of two letters or more that is not a function
/// word, a clock's am/pm or a unit of money.
fn counted_noun(after: &str) -> Option<&str> {
    static NOUN: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^ ([a-z][a-z\-]*[a-z])(?-u:\b)").expect("valid regex"));
    let word = NOUN.captures(after)?.get(1)?.as_str();
    let excluded = NOT_NAMES.contains(&word)
        || thinkus_common::text::is_stopword(word)
        || [
            "am", "pm", "per", "x", "times", "percent", "plus", "minus", "out", "up", "down", "more", "less", "or",
            "and",
        ]
        .contains(&word)
        || month_number(word).is_some_and(|_| word.len() <= 9);
    (!excluded).then_some(word)
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

fn month_number(name: &str) -> Option<u32> {
    let name = name.to_lowercase();
    MONTHS.iter().position(|m| name.starts_with(m)).map(|i| i as u32 + 1)
}

static DATE_ZH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:\d{4}年)?(\d{1,2})月(\d{1,2})[日号]").expect("valid regex"));
static DATE_EN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?-u:\b)(?:(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?|(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*)(?-u:\b)",
    )
    .expect("valid regex")
});
static DATE_ISO: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)\d{4}-(\d{2})-(\d{2})(?-u:\b)").expect("valid regex"));
/// A number with what makes it a value: a currency, a magnitude, a percent sign, a unit or a
/// counter word; or two of them as a range.
/// English numbers in words from two ("one" and "a" are mostly no count: "one thing", "the
/// one with the logger"), up to the thousands.
static SPELLED_COUNT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)(?P<num>(?:(?:one|a|two|three|four|five|six|seven|eight|nine)\s+(?:hundred|thousand)(?:\s+and)?\s+)?(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[- ](?:one|two|three|four|five|six|seven|eight|nine))?|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen)|(?:one|a|two|three|four|five|six|seven|eight|nine|ten)\s+(?:hundred|thousand))(?-u:\b)")
        .expect("valid regex")
});

/// The number of [`SPELLED_COUNT`]'s words: "twenty-two" 22, "two hundred and fifty" 250.
fn spelled_number(words: &str) -> Option<f64> {
    const UNITS: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 8] = [
        "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    let (mut total, mut current) = (0.0, 0.0);
    for word in words
        .to_lowercase()
        .split([' ', '-'])
        .filter(|w| !w.is_empty() && *w != "and")
    {
        if let Some(n) = UNITS.iter().position(|u| *u == word) {
            current += n as f64;
        } else if let Some(n) = TENS.iter().position(|t| *t == word) {
            current += (n as f64 + 2.0) * 10.0;
        } else if word == "a" {
            current += 1.0;
        } else if word == "hundred" {
            current = current.max(1.0) * 100.0;
        } else if word == "thousand" {
            total += current.max(1.0) * 1000.0;
            current = 0.0;
        } else {
            return None;
        }
    }
    Some(total + current)
}

/// A number in Chinese numerals, as spoken and transcribed ("三十万", "二十五", "三点五万").
const CHINESE_NUMERAL: &str =
    "[一二两三四五六七八九十][零〇一二两三四五六七八九十百千]*(?:点[零〇一二两三四五六七八九]+)?";

static QUANTITY: LazyLock<Regex> = LazyLock::new(|| {
    let one = r"[$¥￥€£]?\s?\d(?:[\d,]*\d)?(?:\.\d+)?\s?(?:万|千|亿|(?i:k|m|mn|bn)(?-u:\b))?";
    Regex::new(&format!(
        r"(?P<cur>[$¥￥€£])?\s?(?P<num>\d(?:[\d,]*\d)?(?:\.\d+)?|{CHINESE_NUMERAL})\s?(?P<mag>万|千|亿|(?i:k|m|mn|bn)(?-u:\b))?(?P<range>\s?(?:-|–|~|～|至|到)\s?{one})?(?P<pct>\s?[%％])?(?P<unit>\s?(?:元|块|美元|英镑|欧元|(?i:dollars?|usd|rmb|pounds?|gbp|eur)(?-u:\b)))?(?P<count>个人|个月|小时|分钟|个|人|名|位|台|家|间|份|单|辆|套|件|张|条|盒|包|箱|瓶|杯|座|栋|所|支|只|本|篇|部|场|轮|批|组|户|款|项|笔|周|天|(?i:\s?(?:people|persons|engineers?|developers?|devs?|contractors?|hires?|heads|designers?|stores?|seats?))(?-u:\b))?"
    ))
    .expect("valid regex")
});
/// Product, vendor and technology names: a capital, a dot, a plus or a digit inside a Latin
/// word (also between Chinese characters, hence the ASCII boundaries), with a version number.
static NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)[A-Za-z][A-Za-z0-9]*(?:[.\-+][A-Za-z0-9]+)*(?:\s\d+(?:\.\d+)?(?-u:\b))?(?-u:\b)")
        .expect("valid regex")
});

/// Capitalised words that are not names (sentence starts, pronouns, common verbs).
pub(super) const NOT_NAMES: &[&str] = &[
    "i",
    "we",
    "you",
    "he",
    "she",
    "they",
    "it",
    "the",
    "a",
    "an",
    "our",
    "my",
    "your",
    "let",
    "let's",
    "ok",
    "okay",
    "yes",
    "no",
    "please",
    "actually",
    "now",
    "so",
    "also",
    "this",
    "that",
    "these",
    "those",
    "sorry",
    "hi",
    "hey",
    "thanks",
    "thank",
    "and",
    "but",
    "or",
    "for",
    "from",
    "to",
    "in",
    "on",
    "at",
    "is",
    "are",
    "was",
    "be",
    "if",
    "when",
    "what",
    "which",
    "who",
    "how",
    "why",
    "where",
    "can",
    "could",
    "should",
    "would",
    "will",
    "do",
    "does",
    "did",
    "just",
    "not",
    "noted",
    "done",
    "good",
    "great",
    "sure",
    "right",
    "well",
    "then",
    "there",
    "here",
    "because",
    "as",
    "with",
    "by",
    "of",
    "all",
    "any",
    "some",
    "one",
    "two",
    "new",
    "old",
    "next",
    "last",
    "first",
    "q1",
    "q2",
    "q3",
    "q4",
    "am",
    "pm",
    "ceo",
    "cto",
    "cfo",
    "cmo",
    "hr",
    "mr",
    "ms",
    "dr",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "mon",
    "tue",
    "wed",
    "thu",
    "fri",
    "sat",
    "sun",
    "today",
    "tomorrow",
    "yesterday",
    "noted",
];

/// Whether `start` begins a sentence of `text`: a capital there says nothing about a name.
fn at_sentence_start(text: &str, start: usize) -> bool {
    let before = text[..start]
        .trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '“' | '‘' | '(' | '*' | '-'));
    before.is_empty() || before.ends_with(['.', '!', '?', '。', '！', '？', ':', '：', '\n'])
}

pub(super) fn parse_number(digits: &str) -> Option<f64> {
    digits.replace(',', "").parse::<f64>().ok()
}

/// A number written in Chinese numerals: "三十" 30, "二十五" 25, "一百二十" 120, "三千" 3000,
/// "三点五" 3.5; none for other text.
fn chinese_number(written: &str) -> Option<f64> {
    let digit = |c: char| {
        Some(match c {
            '零' | '〇' => 0.0,
            '一' => 1.0,
            '二' | '两' => 2.0,
            '三' => 3.0,
            '四' => 4.0,
            '五' => 5.0,
            '六' => 6.0,
            '七' => 7.0,
            '八' => 8.0,
            '九' => 9.0,
            _ => return None,
        })
    };
    let (whole, fraction) = match written.split_once('点') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (written, None),
    };
    if whole.is_empty()
        || !whole
            .chars()
            .all(|c| digit(c).is_some() || matches!(c, '十' | '百' | '千'))
    {
        return None;
    }
    let (mut total, mut current) = (0.0, 0.0);
    for c in whole.chars() {
        match c {
            '十' | '百' | '千' => {
                let place = match c {
                    '十' => 10.0,
                    '百' => 100.0,
                    _ => 1000.0,
                };
                total += if current == 0.0 { 1.0 } else { current } * place;
                current = 0.0;
            }
            _ => current = digit(c)?,
        }
    }
    let mut number = total + current;
    if let Some(fraction) = fraction {
        let mut scale = 0.1;
        for c in fraction.chars() {
            number += digit(c)? * scale;
            scale /= 10.0;
        }
    }
    Some(number)
}

/// What a magnitude word multiplies by: "万" 10,000, "k" 1,000, "bn" a billion; 1 for none.
pub(super) fn magnitude(mag: &str) -> f64 {
    match mag.to_lowercase().as_str() {
        "万" => 1e4,
        "千" | "k" => 1e3,
        "亿" => 1e8,
        "m" | "mn" => 1e6,
        "bn" => 1e9,
        _ => 1.0,
    }
}

fn currency_of(text: &str) -> Option<char> {
    let lower = text.to_lowercase();
    match () {
        _ if lower.contains('$') || lower.contains("美元") || lower.contains("dollar") || lower.contains("usd") => {
            Some('$')
        }
        _ if lower.contains('£') || lower.contains("英镑") || lower.contains("pound") || lower.contains("gbp") => {
            Some('£')
        }
        _ if lower.contains('€') || lower.contains("欧元") || lower.contains("eur") => Some('€'),
        _ if lower.contains('¥') || lower.contains('￥') || lower.contains("rmb") => Some('¥'),
        _ => None,
    }
}

/// The values a text states, in order, without overlaps: dates first, then quantities, then
/// names. A bare number ("3", "2026") is not a value: alone it says too little to be compared.
pub fn mentions(text: &str) -> Vec<Mention> {
    let mut found: Vec<Mention> = Vec::new();
    let taken = |found: &[Mention], start: usize, end: usize| found.iter().any(|m| start < m.end && m.start < end);
    for c in DATE_ZH.captures_iter(text) {
        let whole = c.get(0).expect("a match");
        if let (Some(month), Some(day)) = (c[1].parse().ok(), c[2].parse().ok())
            && (1..=12).contains(&month)
            && (1..=31).contains(&day)
        {
            found.push(Mention {
                raw: whole.as_str().to_string(),
                kind: ValueKind::Date,
                key: Key::Day { month, day },
                start: whole.start(),
                end: whole.end(),
            });
        }
    }
    for c in DATE_EN.captures_iter(text) {
        let whole = c.get(0).expect("a match");
        let (month, day) = match (c.get(1), c.get(2), c.get(3), c.get(4)) {
            (Some(m), Some(d), _, _) => (month_number(m.as_str()), d.as_str().parse().ok()),
            (_, _, Some(d), Some(m)) => (month_number(m.as_str()), d.as_str().parse().ok()),
            _ => (None, None),
        };
        if let (Some(month), Some(day)) = (month, day)
            && (1..=31).contains(&day)
            && !taken(&found, whole.start(), whole.end())
        {
            found.push(Mention {
                raw: whole.as_str().to_string(),
                kind: ValueKind::Date,
                key: Key::Day { month, day },
                start: whole.start(),
                end: whole.end(),
            });
        }
    }
    for c in DATE_ISO.captures_iter(text) {
        let whole = c.get(0).expect("a match");
        if let (Ok(month), Ok(day)) = (c[1].parse(), c[2].parse())
            && !taken(&found, whole.start(), whole.end())
        {
            found.push(Mention {
                raw: whole.as_str().to_string(),
                kind: ValueKind::Date,
                key: Key::Day { month, day },
                start: whole.start(),
                end: whole.end(),
            });
        }
    }
    for c in QUANTITY.captures_iter(text) {
        let whole = c.get(0).expect("a match");
        let raw = whole.as_str().trim();
        let mut start = whole.start() + (whole.as_str().len() - whole.as_str().trim_start().len());
        let mut end = start + raw.len();
        if taken(&found, start, end) {
            continue;
        }
        // A dollar of a country: "A$150,000", "US$1,800", "HK$", "NZ$".
        if raw.starts_with('$') {
            let letters = text[..start].chars().rev().take_while(char::is_ascii_uppercase).count();
            let before_letters = text[..start - letters].chars().next_back();
            if (1..=3).contains(&letters) && !before_letters.is_some_and(|c| c.is_ascii_alphanumeric()) {
                start -= letters;
            }
        }
        let mut raw = text[start..end].to_string();
        // Not the tail of a longer number or word ("v2", "B20261104"), nor an ordinal ("第4个"
        // is which one, not how many).
        if text[..start]
            .chars()
            .next_back()
            .is_some_and(|p| p.is_ascii_alphanumeric() || p == '第')
        {
            continue;
        }
        let mag = c.name("mag").map(|m| m.as_str()).unwrap_or("");
        let number = match chinese_number(&c["num"]) {
            // In Chinese numerals, a number of ten or more, or of ten thousands: a lone "一",
            // "两" or "三" counts things in passing ("一个方案", "这两个").
            Some(number) if c["num"].contains(['十', '百', '千']) || matches!(mag, "万" | "亿") => number,
            Some(_) => continue,
            None => match parse_number(&c["num"]) {
                Some(number) => number,
                None => continue,
            },
        };
        let (kind, key) = if c.name("range").is_some() {
            (ValueKind::Range, Key::Text(raw.to_lowercase().replace([' ', ','], "")))
        } else if c.name("pct").is_some() {
            (
                ValueKind::Percent,
                Key::Number {
                    value: number,
                    currency: None,
                },
            )
        } else if c.name("cur").is_some() || c.name("unit").is_some() {
            (
                ValueKind::Amount,
                Key::Number {
                    value: number * magnitude(mag),
                    currency: currency_of(&raw),
                },
            )
        } else if let Some(count) = c.name("count") {
            (
                ValueKind::Count,
                Key::Count {
                    value: number * magnitude(mag),
                    unit: count_unit(count.as_str()),
                },
            )
        } else if !mag.is_empty() {
            (
                ValueKind::Amount,
                Key::Number {
                    value: number * magnitude(mag),
                    currency: currency_of(&raw),
                },
            )
        } else if RATE.is_match(&text[end..]) {
            // A price by the unit without its currency: "53.40 an hour", "38 a van a month".
            (
                ValueKind::Amount,
                Key::Number {
                    value: number,
                    currency: None,
                },
            )
        } else if let Some(noun) = counted_noun(&text[end..]) {
            end += 1 + noun.len();
            raw = text[start..end].to_string();
            (
                ValueKind::Count,
                Key::Count {
                    value: number,
                    unit: count_unit(noun),
                },
            )
        } else {
            continue;
        };
        found.push(Mention {
            raw,
            kind,
            key,
            start,
            end,
        });
    }
    // A count in words, as spoken and transcribed: "cut it to four vans", "twenty-two stores".
    for c in SPELLED_COUNT.captures_iter(text) {
        let whole = c.get(0).expect("a match");
        let Some(number) = spelled_number(&c["num"]) else {
            continue;
        };
        let Some(noun) = counted_noun(&text[whole.end()..]) else {
            continue;
        };
        let (start, end) = (whole.start(), whole.end() + 1 + noun.len());
        if taken(&found, start, end) {
            continue;
        }
        found.push(Mention {
            raw: text[start..end].to_string(),
            kind: ValueKind::Count,
            key: Key::Count {
                value: number,
                unit: count_unit(noun),
            },
            start,
            end,
        });
    }
    for m in NAME.find_iter(text) {
        let word = m.as_str();
        let lower = word.split(' ').next().unwrap_or(word).to_lowercase();
        // Inside a word, a capital, a dot or a digit marks a name ("PostHog", "Next.js",
        // "Vue3"); a first capital does too, except where every sentence starts with one.
        let stem = word.split(' ').next().unwrap_or(word);
        let marked_inside = stem.chars().skip(1).any(|c| c.is_uppercase())
            || stem.contains(['.', '-', '+'])
            || stem.chars().any(|c| c.is_ascii_digit());
        let capital = word.chars().next().is_some_and(char::is_uppercase);
        let distinctive = marked_inside || (capital && !at_sentence_start(text, m.start()));
        if !distinctive
            || word.len() < 2
            || NOT_NAMES.contains(&lower.as_str())
            || thinkus_common::text::is_stopword(&lower)
            || month_number(word).is_some_and(|_| word.len() <= 9 && word.chars().all(char::is_alphabetic))
            || taken(&found, m.start(), m.end())
        {
            continue;
        }
        // A name of several words ("PostHog Cloud", "Google Analytics") is one value, known by
        // its first word.
        if let Some(last) = found.last_mut()
            && last.kind == ValueKind::Name
            && &text[last.end..m.start()] == " "
        {
            last.raw = text[last.start..m.end()].to_string();
            last.end = m.end();
            continue;
        }
        found.push(Mention {
            raw: word.to_string(),
            kind: ValueKind::Name,
            key: Key::Text(lower),
            start: m.start(),
            end: m.end(),
        });
    }
    // Code is not a statement of values: an SQL keyword or a version in a query is not a
    // name or a figure the user can change.
    let code = code_ranges(text);
    found.retain(|m| !code.iter().any(|&(start, end)| m.start < end && start < m.end));
    found.sort_by_key(|m| m.start);
    found
}

/// The sentences of `text` with its code ([`code_ranges`]) left out, for the readings that go
/// sentence by sentence: a fenced block split into sentences no longer shows its fences, so
/// the code is taken out before the split, as [`mentions`] leaves it out of a whole text.
pub(super) fn prose_sentences(text: &str) -> Vec<String> {
    let code = code_ranges(text);
    if code.is_empty() {
        return sentences(text);
    }
    let mut prose = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in code {
        prose.push_str(&text[at..start]);
        prose.push(' ');
        at = end;
    }
    prose.push_str(&text[at..]);
    sentences(&prose)
}

/// The byte ranges of `text` that are code: fenced blocks (from a line starting with three
/// backticks to the next such line, or the end) and inline spans between backticks that hold
/// more than one word (`SELECT * FROM orders`); a span of one word (`gh-ost`, `PostgreSQL`)
/// names a thing as prose would.
fn code_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    if !text.contains('`') {
        return out;
    }
    let mut fence: Option<usize> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let end = at + line.len();
        if line.trim_start().starts_with("```") {
            match fence.take() {
                Some(start) => out.push((start, end)),
                None => fence = Some(at),
            }
        } else if fence.is_none() {
            let mut open: Option<usize> = None;
            for (i, _) in line.match_indices('`') {
                match open.take() {
                    Some(start) if line[start + 1..i].trim().contains(char::is_whitespace) => {
                        out.push((at + start, at + i + 1));
                    }
                    Some(_) => {}
                    None => open = Some(i),
                }
            }
        }
        at = end;
    }
    if let Some(start) = fence {
        out.push((start, text.len()));
    }
    out
}

/// Occurrences of `value` in `text` as byte ranges: by value when [`mentions`] reads it ("35万"
/// finds "35.0万"), else as text with word boundaries at Latin ends ("客如云", "Mixpanel").
pub(super) fn occurrences(text: &str, value: &str) -> Vec<(usize, usize)> {
    let wanted = mentions(value);
    if let [one] = wanted.as_slice()
        && one.raw.trim() == value.trim()
    {
        return mentions(text)
            .into_iter()
            .filter(|m| m.same_value(one))
            .map(|m| (m.start, m.end))
            .collect();
    }
    // "4-hour take-home" and "4 hour take-home" are one thing: a hyphen after a number reads
    // as a space (the same length, so offsets hold).
    static NUMBER_HYPHEN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(\d)-([a-z])").expect("valid regex"));
    let lower_text = NUMBER_HYPHEN.replace_all(&text.to_lowercase(), "$1 $2").into_owned();
    let lower_value = NUMBER_HYPHEN.replace_all(&value.to_lowercase(), "$1 $2").into_owned();
    if lower_value.is_empty() || lower_text.len() != text.len() {
        // Case folding changed byte offsets (rare scripts): match exactly instead.
        return text.match_indices(value).map(|(i, v)| (i, i + v.len())).collect();
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let (starts_word, ends_word) = (word(value.chars().next()), word(value.chars().next_back()));
    lower_text
        .match_indices(&lower_value)
        .filter(|(i, v)| {
            let before = text[..*i].chars().next_back();
            let after = text[i + v.len()..].chars().next();
            !(starts_word && word(before) || ends_word && word(after))
        })
        .map(|(i, v)| (i, i + v.len()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::{Change, stated_changes};

    fn raws(text: &str) -> Vec<(String, ValueKind)> {
        mentions(text).into_iter().map(|m| (m.raw, m.kind)).collect()
    }

    #[test]
    fn code_states_no_values() {
        // A query in an analysis: its keywords are not names, its LIMIT not a figure.
        assert_eq!(
            raws("最慢的是 `SELECT * FROM orders ORDER BY created_at DESC LIMIT 50`，平均 380ms，换 PostgreSQL 16"),
            vec![("PostgreSQL 16".to_string(), ValueKind::Name)]
        );
        // A fenced block, and one left open, hold no values; the prose around them does.
        assert_eq!(
            raws(
                "Budget is $800.\n```sql\nUPDATE plans SET price = 49 WHERE Name = 'Pro';\n```\nthe launch is Oct 15.\n```\nINSERT Foo"
            ),
            vec![
                ("$800".to_string(), ValueKind::Amount),
                ("Oct 15".to_string(), ValueKind::Date)
            ]
        );
        // The readings that go sentence by sentence leave code out too, although a block split
        // into sentences no longer shows its fences.
        let pasted = "Here is the seed file.\n```yaml\nplan: pro\nprice: moved from $49 to $39\n```\nThe launch moves from Oct 15 to Oct 20.";
        assert_eq!(
            stated_changes(pasted),
            vec![Change::of("Oct 15", Some("Oct 20"))],
            "only the prose's change"
        );
        // A span of one word names a thing as prose does.
        assert_eq!(
            raws("We switched to `PostHog` from Mixpanel"),
            vec![
                ("PostHog".to_string(), ValueKind::Name),
                ("Mixpanel".to_string(), ValueKind::Name)
            ]
        );
    }

    #[test]
    fn values_of_every_kind_in_both_languages() {
        assert_eq!(
            raws("装修预算35万，房租月租2.8万，开业定在12月8日，外包4个人"),
            vec![
                ("35万".to_string(), ValueKind::Amount),
                ("2.8万".to_string(), ValueKind::Amount),
                ("12月8日".to_string(), ValueKind::Date),
                ("4个人".to_string(), ValueKind::Count),
            ]
        );
        assert_eq!(
            raws("Launch is Oct 15, Pro is $49/month, 20% off, migrating to PostgreSQL 16 with 4 contractors"),
            vec![
                ("Oct 15".to_string(), ValueKind::Date),
                ("Pro".to_string(), ValueKind::Name),
                ("$49".to_string(), ValueKind::Amount),
                ("20%".to_string(), ValueKind::Percent),
                ("PostgreSQL 16".to_string(), ValueKind::Name),
                ("4 contractors".to_string(), ValueKind::Count),
            ]
        );
        assert_eq!(raws("薪资25k-30k"), vec![("25k-30k".to_string(), ValueKind::Range)]);
        // Bare numbers, codes and order numbers are not values.
        assert!(
            raws("The top 3 are here, see B20261104-07 at 10 am")
                .iter()
                .all(|(_, k)| *k == ValueKind::Name)
        );
    }

    #[test]
    fn a_number_with_what_it_counts_is_a_count_of_that_thing() {
        assert_eq!(
            raws("I'm thinking 6 vans on lease, 3 advance rentals, A$150,000 base and US$1,800 a month"),
            vec![
                ("6 vans".to_string(), ValueKind::Count),
                ("3 advance".to_string(), ValueKind::Count),
                ("A$150,000".to_string(), ValueKind::Amount),
                ("US$1,800".to_string(), ValueKind::Amount),
            ]
        );
        assert_eq!(
            raws("试饮装准备2万份，日峰值约384单，铺36家门店，周期12周"),
            vec![
                ("2万份".to_string(), ValueKind::Count),
                ("384单".to_string(), ValueKind::Count),
                ("36家".to_string(), ValueKind::Count),
                ("12周".to_string(), ValueKind::Count),
            ]
        );
        let (four_vans, one_van, six_techs) = (&mentions("4 vans")[0], &mentions("1 van")[0], &mentions("6 techs")[0]);
        assert!(four_vans.comparable(one_van) && !four_vans.same_value(one_van));
        assert!(
            !four_vans.comparable(six_techs),
            "counts of two things do not replace each other"
        );
        assert!(four_vans.counts_a_specific_thing());
        assert!(!mentions("4个人")[0].counts_a_specific_thing(), "people in general");
        assert!(mentions("20000份")[0].same_value(&mentions("2万份")[0]));
    }
}
