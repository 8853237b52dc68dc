//! Questions about the people and events of the user's life: someone named by their first
//! name, a particular past event, a question gathering many things, a portrait.

use std::sync::LazyLock;

use regex::Regex;
use thinkus_common::text::pattern;

/// Capitalised words that name no one in the user's life: companies, products, technologies,
/// days and months, pronouns.
const NOT_A_PERSON: &[&str] = &[
    "i",
    "we",
    "you",
    "they",
    "he",
    "she",
    "it",
    "the",
    "this",
    "that",
    "there",
    "what",
    "who",
    "when",
    "where",
    "how",
    "why",
    "which",
    "whose",
    "whom",
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "can",
    "could",
    "should",
    "would",
    "will",
    "has",
    "have",
    "had",
    "my",
    "our",
    "your",
    "their",
    "his",
    "her",
    "any",
    "some",
    "twitter",
    "netflix",
    "google",
    "apple",
    "amazon",
    "microsoft",
    "meta",
    "facebook",
    "instagram",
    "tiktok",
    "youtube",
    "linkedin",
    "uber",
    "airbnb",
    "stripe",
    "paypal",
    "shopify",
    "slack",
    "notion",
    "figma",
    "react",
    "vue",
    "svelte",
    "angular",
    "django",
    "rails",
    "node",
    "python",
    "rust",
    "java",
    "docker",
    "kubernetes",
    "aws",
    "azure",
    "gcp",
    "openai",
    "chatgpt",
    "claude",
    "anthropic",
    "tesla",
    "spacex",
    "nvidia",
    "intel",
    "amd",
    "samsung",
    "huawei",
    "xiaomi",
    "alibaba",
    "tencent",
    "baidu",
    "bytedance",
    "wechat",
    "alipay",
    "taobao",
    "excel",
    "word",
    "powerpoint",
    "salesforce",
    "hubspot",
    "zoom",
    "github",
    "gitlab",
    "vercel",
    "netlify",
    "heroku",
    "supabase",
    "firebase",
    "postgres",
    "postgresql",
    "mysql",
    "redis",
    "mongodb",
    "kafka",
    "tailwind",
    "bootstrap",
    "next",
    "ios",
    "android",
    "windows",
    "mac",
    "macos",
    "linux",
    "iphone",
    "ipad",
    "gmail",
    "outlook",
    "canva",
    "adobe",
    "photoshop",
    "sketch",
    "jira",
    "trello",
    "asana",
    "mailchimp",
    "webflow",
    "wordpress",
    "wix",
    "squarespace",
    "bitcoin",
    "ethereum",
    "visa",
    "mastercard",
    "costco",
    "walmart",
    "ikea",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "christmas",
    "easter",
    "europe",
    "america",
    "china",
    "california",
    "london",
    "paris",
    "berlin",
    "tokyo",
    "us",
    "uk",
    "eu",
    "gdpr",
    "seo",
    "sem",
    "saas",
    "api",
    "ceo",
    "cto",
    "cfo",
    "cmo",
    "coo",
    "hr",
    "pm",
];

/// A question about a particular event of the past, named with "the" ("What was discussed in
/// the counseling workshop?", "What did the posters at the poetry reading say?", "Who was at
/// the offsite?"): the user's history, not general knowledge, knows what happened there. An
/// event named after something public ("the Yalta conference", "the Google I/O keynote") is
/// the world's history, not the user's.
pub(super) fn about_a_past_event(head: &str) -> bool {
    static QUESTION_IN_PAST: LazyLock<Regex> = LazyLock::new(|| {
        pattern(r"(?i)^(what|who|where|how|why|which|when)\b.*\b(was|were|did|had|said|discussed|raised|showed)\b")
    });
    static EVENT: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)\b(?:the|that|this)\s+((?:[\w+-]+\s+){0,3})(meeting|workshop|race|reading|conference|event|trip|party|call|class|festival|concert|interview|session|retreat|offsite|sync|standup|review|demo|presentation|talk|seminar|webinar|dinner|lunch|wedding|ceremony|exhibition|fair|visit|tour|hike|match|game|fundraiser|parade|march|rally|flood|storm|accident|posters?|speech|keynote)\b",
        )
    });
    QUESTION_IN_PAST.is_match(head)
        && EVENT.captures_iter(head).any(|c| {
            let modifiers = c.get(1).map_or("", |m| m.as_str());
            !modifiers.split_whitespace().any(|w| {
                let mut chars = w.chars();
                chars.next().is_some_and(|c| c.is_uppercase()) && chars.any(|c| c.is_lowercase())
            })
        })
}

/// A question whose answer gathers many things ("What activities has Melanie done with her
/// family?", "Which cities did Dave travel to?", "How many times has she been to the beach?",
/// "What have Caroline and Melanie both painted?", "他都去过哪些城市？").
pub(super) fn asks_for_many(head: &str) -> bool {
    static COUNTING: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)(\bhow many\b|\bhow often\b|\bin total\b|\bboth\b|\ball (the )?(times|places|ways|things)\b|几次|多少次|哪几(个|次|种|家|位)|都(去过|做过|买过|读过|看过|有过|试过|养过)|一共)",
        )
    });
    static PLURAL_QUESTION: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)^(what|which)((\s+[\w+-]+){0,3}?)\s+([a-z]{3,}[^s\W]s)\s+(have|has|had|did|does|do|are|were|is)\b",
        )
    });
    COUNTING.is_match(head) || PLURAL_QUESTION.is_match(head)
}

/// Whether a question about someone asks for a portrait that only their whole history gives:
/// a guess ("Would Caroline pursue writing?", "What might John's financial status be?"), a
/// trait or a standing ("What attributes describe John?", "Is Deborah married?" is not: one
/// fact), or a habit ("What does Calvin do to relax?", "What kind of music does Dave listen
/// to?").
pub(super) fn asks_for_a_portrait(head: &str) -> bool {
    static PORTRAIT: LazyLock<Regex> = LazyLock::new(|| {
        pattern(concat!(
            r"(?i)^(would|might|could)\b|\b(would|might|likely|potentially|probably) ",
            r"|\b(identity|personality|traits?|attributes|character|political|religious|financial status|relationship status)\b",
            r"|\b(describes?|view (his|her|their) \w+ as|feel about)\b",
            r"|\b(hobbies|interests|passions?)\b|\bwhat (kinds?|types?|sorts?) of\b|\bnames of\b",
            r"|\bdo(es)? to (relax|destress|de-stress|unwind|cope|recharge)\b|\b(usually|often|typically|tend to)\b",
            r"|(会不会|可能会?|大概|性格|为人|爱好|兴趣|平时|通常|一般都?)",
        ))
    });
    PORTRAIT.is_match(head)
}

/// Words that, just before a capitalised word, make it someone acting or acted upon ("did
/// Caroline", "has Melanie", "told Jon", "shared by John", "with Audrey").
const BEFORE_A_NAME: &[&str] = &[
    "did",
    "does",
    "do",
    "has",
    "have",
    "had",
    "is",
    "was",
    "were",
    "would",
    "will",
    "can",
    "could",
    "should",
    "might",
    "to",
    "for",
    "about",
    "from",
    "and",
    "with",
    "by",
    "between",
    "help",
    "helps",
    "helped",
    "helping",
    "support",
    "supports",
    "supported",
    "told",
    "tell",
    "tells",
    "wrote",
    "write",
    "writes",
    "asked",
    "ask",
    "meet",
    "met",
    "showed",
    "show",
    "shows",
    "gave",
    "give",
    "gives",
    "describe",
    "describes",
    "described",
    "inspired",
    "inspires",
    "motivated",
    "motivates",
    "sent",
    "send",
    "visited",
    "visit",
    "called",
    "invited",
    "taught",
    "remind",
    "reminds",
    "reminded",
    "makes",
    "made",
    "that",
];

/// Words that, just after a capitalised word, make it someone doing something ("Caroline
/// went", "Melanie likes", "Calvin received").
const AFTER_A_NAME: &[&str] = &[
    "has",
    "had",
    "is",
    "was",
    "got",
    "gets",
    "faced",
    "attended",
    "mentioned",
    "mention",
    "mentions",
    "said",
    "says",
    "felt",
    "feels",
    "went",
    "goes",
    "made",
    "makes",
    "took",
    "takes",
    "shared",
    "organized",
    "organised",
    "support",
    "supports",
    "like",
    "likes",
    "love",
    "loves",
    "want",
    "wants",
    "plan",
    "plans",
    "misses",
    "miss",
    "need",
    "needs",
    "think",
    "thinks",
    "consider",
    "considers",
    "considering",
    "planning",
    "working",
    "doing",
    "sang",
    "sings",
    "play",
    "plays",
    "enjoy",
    "enjoys",
    "do",
    "does",
    "did",
    "use",
    "uses",
    "used",
    "saw",
    "sees",
    "see",
    "buy",
    "bought",
    "learn",
    "learned",
    "learnt",
    "start",
    "started",
    "find",
    "found",
    "get",
    "keep",
    "keeps",
    "feel",
    "could",
    "would",
    "should",
    "might",
    "will",
    "can",
    "can't",
    "couldn't",
    "didn't",
    "doesn't",
    "don't",
    "hasn't",
    "hadn't",
    "isn't",
    "wasn't",
    "won't",
    "wouldn't",
];

/// What only a person has: "the childhood of Calvin" names someone.
const OWNED_BY_A_PERSON: &[&str] = &[
    "childhood",
    "family",
    "friend",
    "friends",
    "kids",
    "children",
    "parents",
    "wife",
    "husband",
    "partner",
    "mother",
    "father",
    "mom",
    "dad",
    "sister",
    "brother",
    "birthday",
    "hobbies",
    "pets",
];

/// The auxiliaries of [`BEFORE_A_NAME`]: "does Audrey", "was Calvin".
const AUXILIARIES: &[&str] = &[
    "did", "does", "do", "has", "have", "had", "is", "was", "were", "would", "will", "can", "could", "should", "might",
];

/// Adverbs that may stand between a name and its verb ("Andrew really misses").
const ADVERBS: &[&str] = &[
    "really",
    "often",
    "usually",
    "currently",
    "recently",
    "ever",
    "just",
    "still",
    "always",
    "never",
    "once",
    "also",
    "first",
    "finally",
    "actually",
];

/// A question about what someone in the user's life did, said or likes ("When did Caroline go
/// to the support group?", "What is Melanie's favourite book?", "Which song motivates Caroline
/// to be courageous?"): general knowledge cannot answer it. Every capitalised word is looked at
/// with its neighbours (a single regex would let "What has" hide "has Melanie"); well-known
/// companies, products, places, days and months do not count, and neither does a capital that
/// only starts the sentence.
pub(super) fn about_a_person(head: &str) -> bool {
    static QUESTION: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)([?]\s*$|^(what|which|how|when|where|who|whom|whose|why|is|are|do|does|did|was|were|would|has|have)\b)",
        )
    });
    // "Do restaurants generally do better with Toast or Square?" asks about the world.
    static GENERIC: LazyLock<Regex> =
        LazyLock::new(|| pattern(r"(?i)\b(generally|typically|in general|most (people|companies|teams|startups))\b"));
    if !QUESTION.is_match(head) {
        return false;
    }
    // A generic question names people only as the subject of its auxiliary ("How long does
    // Audrey typically walk her dogs?"); "with Toast" is a product.
    let generic = GENERIC.is_match(head);
    let is_quote = |c: char| matches!(c, '\'' | '`' | '’');
    let words: Vec<&str> = head
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && !is_quote(c)))
        .map(|w| w.trim_start_matches(is_quote))
        .collect();
    let plain = |w: &str| w.trim_end_matches(is_quote).replace('’', "'").to_lowercase();
    for (i, word) in words.iter().enumerate() {
        // "Melanie's", "Deborah`s": a possessive names someone whatever comes before it.
        let (name, possessive) = match word.char_indices().find(|(_, c)| is_quote(*c)) {
            Some((at, _)) => {
                let rest: String = word[at..].chars().skip(1).collect();
                (&word[..at], rest.eq_ignore_ascii_case("s"))
            }
            None => (*word, false),
        };
        let mut chars = name.chars();
        let capitalised = chars.next().is_some_and(|c| c.is_ascii_uppercase())
            && name.len() >= 2
            && chars.all(|c| c.is_ascii_lowercase());
        if !capitalised || NOT_A_PERSON.contains(&name.to_lowercase().as_str()) {
            continue;
        }
        if possessive {
            return true;
        }
        if i == 0 {
            continue;
        }
        let before = plain(words[i - 1]);
        if generic {
            if AUXILIARIES.contains(&before.as_str()) {
                return true;
            }
            continue;
        }
        if BEFORE_A_NAME.contains(&before.as_str()) {
            return true;
        }
        // "the childhood of Calvin", "the kids of Melanie".
        if before == "of" && i >= 2 && OWNED_BY_A_PERSON.contains(&plain(words[i - 2]).as_str()) {
            return true;
        }
        let mut next = words.get(i + 1).map(|w| plain(w));
        if next.as_deref().is_some_and(|w| ADVERBS.contains(&w)) {
            next = words.get(i + 2).map(|w| plain(w));
        }
        if let Some(next) = next
            && (AFTER_A_NAME.contains(&next.as_str()) || (next.len() > 4 && next.ends_with("ed")))
        {
            return true;
        }
    }
    false
}
