//! Subjects and values: what a fact is about ("budget", "deadline", "frontend") and the values
//! it states ("$800", "2026-03-01", "next.js"). Two memories about the same subject that state
//! different values contradict each other: the newer replaces the older.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use thinkus_common::model::MemoryType;

/// Subjects and the words that name them, in Chinese and English.
const SUBJECTS: &[(&str, &[&str])] = &[
    (
        "budget",
        &[
            "预算",
            "经费",
            "费用上限",
            "开支上限",
            "budget",
            "spend limit",
            "spending cap",
        ],
    ),
    (
        "deadline",
        &[
            "截止",
            "期限",
            "上线时间",
            "交付时间",
            "发布日期",
            "上线日期",
            "deadline",
            "due date",
            "launch date",
            "ship date",
            "go-live",
        ],
    ),
    (
        "frontend",
        &["前端", "frontend", "front-end", "front end", "ui framework"],
    ),
    ("backend", &["后端", "backend", "back-end", "服务端", "server side"]),
    ("database", &["数据库", "database", "db "]),
    ("payment", &["支付", "payment", "payments", "收款"]),
    (
        "hosting",
        &[
            "部署",
            "托管",
            "hosting",
            "deploy ",
            "deployment",
            "云服务商",
            "cloud provider",
        ],
    ),
    (
        "design_style",
        &["设计风格", "视觉风格", "design style", "visual style", "ui style"],
    ),
    (
        "color",
        &[
            "主色",
            "配色",
            "颜色",
            "color palette",
            "colour",
            "brand color",
            "primary color",
        ],
    ),
    (
        "pricing",
        &["定价", "价格", "售价", "pricing", "price point", "subscription price"],
    ),
    ("team_size", &["团队规模", "人数", "team size", "headcount"]),
    ("language", &["编程语言", "programming language", "写代码用"]),
    (
        "market",
        &[
            "目标市场",
            "目标用户",
            "target market",
            "target users",
            "target audience",
        ],
    ),
    (
        "schedule",
        &["例会", "周会", "standup", "weekly meeting", "sync meeting"],
    ),
    (
        "communication",
        &[
            "沟通方式",
            "回复风格",
            "communication style",
            "reply style",
            "报告格式",
            "report format",
        ],
    ),
];

/// How a subject reads in the given language: the first word that names it in that language
/// ("预算", "budget"), or the subject itself when none is known.
pub fn label(subject: &str, language: thinkus_common::model::Language) -> String {
    let chinese = language == thinkus_common::model::Language::Zh;
    SUBJECTS
        .iter()
        .find(|(name, _)| *name == subject)
        .and_then(|(_, words)| words.iter().find(|w| w.is_ascii() != chinese))
        .map(|w| w.trim().to_string())
        .unwrap_or_else(|| subject.replace('_', " "))
}

/// Types whose memories state facts that can be superseded.
pub fn is_factual(memory_type: MemoryType) -> bool {
    matches!(
        memory_type,
        MemoryType::Constraint
            | MemoryType::ProjectDecision
            | MemoryType::UserPreference
            | MemoryType::Fact
            | MemoryType::DiscussionConclusion
    )
}

/// The subject a text is about, if it names one.
pub fn detect(text: &str) -> Option<&'static str> {
    let lower = format!("{} ", text.to_lowercase());
    SUBJECTS
        .iter()
        .map(|(subject, words)| {
            let position = words.iter().filter_map(|w| lower.find(w)).min();
            (subject, position)
        })
        .filter_map(|(subject, position)| position.map(|p| (p, *subject)))
        .min()
        .map(|(_, subject)| subject)
}

static MONEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)([$¥￥€£]\s?\d[\d,]*(?:\.\d+)?\s?[kmw万千]?|\d[\d,]*(?:\.\d+)?\s?(?:万|千|元|美元|块|k\b|usd|rmb|dollars?))")
        .expect("valid regex")
});
static DATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(\d{4}[-/.年]\d{1,2}(?:[-/.月]\d{1,2}日?)?|\d{1,2}月\d{1,2}[日号]?|\d{1,2}月(?:底|初|中)?|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?|q[1-4]|下周[一二三四五六日天]?|下个?月|本月底|月底|周[一二三四五六日天])",
    )
    .expect("valid regex")
});
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(?:\.\d+)?").expect("valid regex"));
static NAME: LazyLock<Regex> = LazyLock::new(|| {
    // Product and technology names: words with a capital, a dot or a digit inside
    // (Next.js, MongoDB, Vercel, Vue3, PostgreSQL), also between Chinese words ("前端用Next.js"):
    // the boundaries are ASCII ones, as a Chinese character is a word character to Unicode.
    Regex::new(r"(?-u:\b)[A-Za-z][A-Za-z0-9]*(?:[.\-+][A-Za-z0-9]+)*(?-u:\b)").expect("valid regex")
});

/// The values a text states: amounts, dates, numbers and proper names, normalised.
pub fn values(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text.to_string();
    for regex in [&*MONEY, &*DATE] {
        for m in regex.find_iter(text) {
            out.insert(normalize_value(m.as_str()));
            rest = rest.replace(m.as_str(), " ");
        }
    }
    for m in NUMBER.find_iter(&rest) {
        out.insert(m.as_str().to_string());
    }
    for m in NAME.find_iter(&rest) {
        let word = m.as_str();
        let capitalised = word.chars().next().is_some_and(char::is_uppercase)
            || word.contains(['.', '-', '+'])
            || word.chars().any(|c| c.is_ascii_digit());
        let lower = word.to_lowercase();
        if capitalised
            && word.len() > 1
            && !thinkus_common::text::is_stopword(&lower)
            && !COMMON_CAPITALISED.contains(&lower.as_str())
        {
            out.insert(lower);
        }
    }
    out
}

/// The values a text states as written ("$800", "3月15日", "Next.js"), in the order they
/// appear, for people to read; [`values`] gives them normalised, for comparison.
pub fn shown_values(text: &str) -> Vec<String> {
    let mut found: Vec<(usize, String)> = Vec::new();
    for regex in [&*MONEY, &*DATE] {
        for m in regex.find_iter(text) {
            if !found.iter().any(|(at, v)| *at <= m.start() && m.start() < at + v.len()) {
                found.push((m.start(), m.as_str().trim().to_string()));
            }
        }
    }
    for m in NAME.find_iter(text) {
        let inside = found.iter().any(|(at, v)| *at <= m.start() && m.start() < at + v.len());
        let word = m.as_str();
        if !inside && !values(word).is_empty() {
            found.push((m.start(), word.to_string()));
        }
    }
    found.sort();
    found.into_iter().map(|(_, v)| v).collect()
}

/// Capitalised words that are not values (sentence starts, pronouns).
const COMMON_CAPITALISED: &[&str] = &[
    "we", "i", "the", "our", "let", "let's", "ok", "okay", "yes", "no", "please", "actually", "now", "so", "also",
    "it", "this", "that", "budget", "deadline", "use", "go", "make", "set", "move", "change", "changed", "update",
    "instead", "not", "but", "and", "for", "from", "to", "is", "are", "was", "be", "team", "user", "users",
];

fn normalize_value(raw: &str) -> String {
    raw.to_lowercase()
        .replace([',', ' ', '￥'], "")
        .replace("美元", "$")
        .replace("dollars", "$")
        .replace("dollar", "$")
        .replace("usd", "$")
}

/// Whether two statements about the same subject disagree: the newer states values the older
/// does not.
pub fn values_differ(older: &str, newer: &str) -> bool {
    let old = values(older);
    let new = values(newer);
    !new.is_empty() && !new.is_subset(&old) && !old.is_empty()
}

/// Whether two statements name different values (amounts, dates, numbers, product names) so
/// that they cannot be the same memory however close their embeddings are: e5 puts "we'll go
/// with Stripe for payments" and "we'll go with PostgreSQL for the database" at 0.94. A
/// capitalised first word is a sentence start, not a name. A statement without values (or
/// with a subset of the other's) does not conflict.
pub fn values_conflict(a: &str, b: &str) -> bool {
    fn uncapitalised(text: &str) -> String {
        let text = text.trim_start();
        let mut chars = text.chars();
        match chars.next() {
            Some(first)
                if first.is_ascii_uppercase() && !chars.clone().next().is_some_and(|c| c.is_ascii_uppercase()) =>
            {
                first.to_ascii_lowercase().to_string() + chars.as_str()
            }
            _ => text.to_string(),
        }
    }
    let a = values(&uncapitalised(a));
    let b = values(&uncapitalised(b));
    !a.is_subset(&b) && !b.is_subset(&a)
}

/// What narrows the subject in a text: the word glued before the one that names it
/// ("装修预算" → "装修", "营销预算" → "营销", "marketing budget" → "marketing"). None for a
/// subject named bare or only determined ("预算改成$800", "这个项目的预算", "把预算", "the new
/// budget", "our budget"): grammar's closed classes (jieba's parts of speech for Chinese, the
/// determiners and words of change for English) rather than a list of budgets.
pub fn qualifier(text: &str, subject: &str) -> Option<String> {
    const NOT_QUALIFIERS: &[&str] = &[
        "the", "a", "an", "our", "my", "your", "their", "his", "her", "its", "this", "that", "these", "those", "new",
        "old", "current", "updated", "revised", "latest", "final", "original", "overall", "whole", "entire", "full",
        "same", "which", "what", "and", "or", "of", "for", "to", "is", "was", "be", "in", "on",
    ];
    let names = SUBJECTS.iter().find(|(name, _)| *name == subject)?.1;
    let lower = text.to_lowercase();
    let (at, name) = names
        .iter()
        .filter_map(|name| lower.find(name.trim()).map(|at| (at, *name)))
        .min()?;
    let before = &lower[..at];
    if name.is_ascii() {
        if !before.ends_with(' ') {
            return None;
        }
        let word = before
            .trim_end()
            .rsplit(|c: char| !c.is_alphanumeric() && c != '-')
            .next()?;
        let is_word = word.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
        return (is_word && !NOT_QUALIFIERS.contains(&word)).then(|| word.to_string());
    }
    // Chinese: the dictionary word right before, a noun or a verb of two characters or more
    // ("装修", "营销", "市场"); one character ("总", "定", "把") or a particle is no narrowing.
    let (word, tag) = thinkus_common::text::tagged_words(before).pop()?;
    let narrows = (tag.starts_with('n') || tag.starts_with('v') || tag == "b")
        && word.chars().count() >= 2
        && word.chars().all(thinkus_common::text::is_han);
    narrows.then(|| word.to_string())
}

/// Whether two texts about `subject` are about the same one: both name it with the same
/// narrowing word, or at least one names it bare ("预算改成$800" is about any budget said
/// before; "装修预算" and "营销预算" are two budgets).
pub fn same_subject(a: &str, b: &str, subject: &str) -> bool {
    match (qualifier(a, subject), qualifier(b, subject)) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// Values an explicit correction in `newer` says are no longer true ("不是之前说的$500",
/// "not $500 anymore"): a negated old value.
pub fn negated_values(text: &str) -> BTreeSet<String> {
    static NEGATED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)(?:不是(?:之前|原来|以前)?(?:说的|定的)?|而不是|instead of|not|no longer|rather than)\s*([^，,。.;；]+)")
            .expect("valid regex")
    });
    NEGATED
        .captures_iter(text)
        .filter_map(|c| c.get(1))
        .flat_map(|m| values(m.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_budgets_of_one_project_are_two_subjects() {
        assert_eq!(
            qualifier("装修预算35万，房租月租2.8万", "budget").as_deref(),
            Some("装修")
        );
        assert_eq!(
            qualifier("营销预算给你3万，包含物料", "budget").as_deref(),
            Some("营销")
        );
        assert_eq!(
            qualifier("The marketing budget is $3,000", "budget").as_deref(),
            Some("marketing")
        );
        for bare in [
            "预算改成$800了",
            "这个项目的预算是$500",
            "把预算砍到30万",
            "总预算60万",
            "The new budget is $800",
            "our budget is $500",
            "Budget: $500",
        ] {
            assert_eq!(qualifier(bare, "budget"), None, "{bare}");
        }
        assert!(!same_subject("装修预算35万", "营销预算给你3万", "budget"));
        assert!(!same_subject(
            "The ad budget is $2k",
            "The travel budget is $5k",
            "budget"
        ));
        assert!(same_subject("装修预算35万", "装修预算加到42万", "budget"));
        assert!(same_subject("这个项目的预算是$500", "预算改成$800了", "budget"));
        assert!(same_subject("营销预算3万", "预算改成5万", "budget"));
    }

    #[test]
    fn subjects_in_both_languages() {
        assert_eq!(detect("预算改成$800了"), Some("budget"));
        assert_eq!(detect("The budget is $500"), Some("budget"));
        assert_eq!(detect("上线时间推迟到3月15日"), Some("deadline"));
        assert_eq!(detect("前端用Next.js"), Some("frontend"));
        assert_eq!(detect("我喜欢简约的设计风格"), Some("design_style"));
        assert_eq!(detect("今天天气不错"), None);
    }

    #[test]
    fn names_inside_chinese_are_values() {
        assert!(values("前端用Next.js").contains("next.js"));
        assert!(values_differ("我们决定前端用Next.js", "我们决定前端改用Vue"));
    }

    #[test]
    fn budget_correction_differs() {
        assert!(values_differ("预算是$500", "预算改成$800了，不是之前说的$500"));
        assert!(values_differ("Total budget: $500", "The budget is now $800"));
        assert!(!values_differ("预算是$500", "预算还是$500"));
        assert!(values_differ(
            "We go with MongoDB",
            "We switched the database to PostgreSQL"
        ));
        assert!(!values_differ(
            "We go with Next.js",
            "Next.js is our frontend framework"
        ));
    }

    #[test]
    fn values_are_normalised() {
        let v = values("预算 $1,500 截止 2026-03-01，用 Next.js 和 Vercel");
        assert!(v.contains("$1500"), "{v:?}");
        assert!(v.contains("2026-03-01"), "{v:?}");
        assert!(v.contains("next.js"), "{v:?}");
        assert!(v.contains("vercel"), "{v:?}");
    }

    #[test]
    fn values_as_written_and_labels() {
        assert_eq!(shown_values("预算改成$800了"), vec!["$800"]);
        assert_eq!(
            shown_values("The budget is $500 and we use Next.js"),
            vec!["$500", "Next.js"]
        );
        assert_eq!(shown_values("上线时间推迟到3月15日"), vec!["3月15日"]);
        use thinkus_common::model::Language;
        assert_eq!(label("budget", Language::Zh), "预算");
        assert_eq!(label("budget", Language::En), "budget");
        assert_eq!(label("design_style", Language::En), "design style");
        assert_eq!(label("team_size", Language::Zh), "团队规模");
        assert_eq!(label("unknown_thing", Language::En), "unknown thing");
    }

    #[test]
    fn negations_name_the_old_value() {
        let negated = negated_values("预算改成$800了，不是之前说的$500");
        assert!(negated.contains("$500"), "{negated:?}");
        assert!(!negated.contains("$800"));
    }
}
