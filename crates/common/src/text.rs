//! Text handling for Chinese and English: language detection, word segmentation (jieba for
//! Chinese, Snowball stemming for English), stopwords, summaries cut at a sensible place, and the
//! one constructor of the rule engines' patterns.

use std::collections::HashSet;
use std::sync::LazyLock;

use jieba_rs::Jieba;
use regex::{Regex, RegexSet};
use rust_stemmers::{Algorithm, Stemmer};

use crate::names::string_enum;

string_enum!(
    /// The language of a text, as far as this system cares: Chinese or English.
    Language {
        Zh => "zh",
        En => "en",
    }
);

static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);
static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

static EN_STOPWORDS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    "a an the and or but if then else of at by for with about against between into through \
     during before after above below to from up down in out on off over under again further \
     once here there when where why how all any both each few more most other some such no nor \
     not only own same so than too very s t can will just don should now i me my myself we our \
     ours ourselves you your yours yourself yourselves he him his himself she her hers herself \
     it its itself they them their theirs themselves what which who whom this that these those \
     am is are was were be been being have has had having do does did doing would could ought \
     i'm you're he's she's it's we're they're i've you've we've they've i'd you'd he'd she'd \
     we'd they'd i'll you'll he'll she'll we'll they'll isn't aren't wasn't weren't hasn't \
     haven't hadn't doesn't don't didn't won't wouldn't shan't shouldn't can't cannot couldn't \
     mustn't let's that's who's what's here's there's when's where's why's how's also yes ok \
     okay oh hey hi hello yeah really got get gets"
        .split_whitespace()
        .collect()
});

static ZH_STOPWORDS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    "的 了 和 是 就 都 而 及 与 着 或 一个 没有 我们 你们 他们 她们 它们 我 你 他 她 它 这 那 \
     这个 那个 这些 那些 之 在 也 有 对 把 被 让 给 从 到 向 吗 呢 吧 啊 呀 哦 嗯 么 得 地 \
     个 上 下 里 中 很 还 又 再 才 会 能 要 去 来 说 看 想 用 做 为 以 于 将 等 但 所以 因为 \
     如果 然后 可以 一下 一些 什么 怎么 怎样 如何 哪 哪些 多少 吗？ 请 帮 帮我 我的 你的"
        .split_whitespace()
        .collect()
});

/// True for CJK unified ideographs (and their extensions and compatibility block).
pub fn is_han(c: char) -> bool {
    matches!(c,
        '\u{4E00}'..='\u{9FFF}'
        | '\u{3400}'..='\u{4DBF}'
        | '\u{20000}'..='\u{2A6DF}'
        | '\u{2A700}'..='\u{2EBEF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{30000}'..='\u{3134F}')
}

/// Chinese when the text has at least two ideographs and they are not drowned in English
/// words (technical terms in a Chinese sentence are common: "我们用Next.js和MongoDB").
pub fn detect_language(text: &str) -> Language {
    let mut han = 0usize;
    let mut latin_words = 0usize;
    let mut in_word = false;
    for c in text.chars() {
        if is_han(c) {
            han += 1;
            in_word = false;
        } else if c.is_ascii_alphabetic() {
            if !in_word {
                latin_words += 1;
                in_word = true;
            }
        } else {
            in_word = false;
        }
    }
    if (han >= 2 && han * 3 >= latin_words) || (han >= 1 && latin_words == 0) {
        Language::Zh
    } else {
        Language::En
    }
}

/// The language of a set of texts taken together.
pub fn detect_language_of<'a>(texts: impl IntoIterator<Item = &'a str>) -> Language {
    let mut zh = 0;
    let mut en = 0;
    for text in texts {
        match detect_language(text) {
            Language::Zh => zh += 1,
            Language::En => en += 1,
        }
    }
    if zh > 0 && zh * 2 >= en {
        Language::Zh
    } else {
        Language::En
    }
}

/// Whether a term is a stopword in either language.
pub fn is_stopword(term: &str) -> bool {
    EN_STOPWORDS.contains(term) || ZH_STOPWORDS.contains(term)
}

/// Stems an English word with Snowball ("decisions" -> "decis", "running" -> "run").
pub fn stem(word: &str) -> String {
    STEMMER.stem(base_form(word)).into_owned()
}

/// Past forms and participles of common irregular English verbs, with their base form.
const IRREGULAR_PAST: &[(&str, &str)] = &[
    ("ate", "eat"),
    ("eaten", "eat"),
    ("became", "become"),
    ("began", "begin"),
    ("begun", "begin"),
    ("bought", "buy"),
    ("brought", "bring"),
    ("broke", "break"),
    ("broken", "break"),
    ("built", "build"),
    ("came", "come"),
    ("caught", "catch"),
    ("chose", "choose"),
    ("chosen", "choose"),
    ("drew", "draw"),
    ("drawn", "draw"),
    ("drove", "drive"),
    ("driven", "drive"),
    ("fell", "fall"),
    ("fallen", "fall"),
    ("felt", "feel"),
    ("flew", "fly"),
    ("flown", "fly"),
    ("forgot", "forget"),
    ("forgotten", "forget"),
    ("found", "find"),
    ("gave", "give"),
    ("given", "give"),
    ("went", "go"),
    ("gone", "go"),
    ("got", "get"),
    ("gotten", "get"),
    ("grew", "grow"),
    ("grown", "grow"),
    ("heard", "hear"),
    ("held", "hold"),
    ("hid", "hide"),
    ("kept", "keep"),
    ("knew", "know"),
    ("known", "know"),
    ("led", "lead"),
    ("left", "leave"),
    ("lost", "lose"),
    ("made", "make"),
    ("meant", "mean"),
    ("met", "meet"),
    ("paid", "pay"),
    ("ran", "run"),
    ("rode", "ride"),
    ("said", "say"),
    ("sang", "sing"),
    ("sung", "sing"),
    ("sat", "sit"),
    ("saw", "see"),
    ("seen", "see"),
    ("sent", "send"),
    ("slept", "sleep"),
    ("sold", "sell"),
    ("spent", "spend"),
    ("spoke", "speak"),
    ("spoken", "speak"),
    ("stood", "stand"),
    ("swam", "swim"),
    ("taught", "teach"),
    ("took", "take"),
    ("taken", "take"),
    ("thought", "think"),
    ("threw", "throw"),
    ("thrown", "throw"),
    ("told", "tell"),
    ("understood", "understand"),
    ("woke", "wake"),
    ("won", "win"),
    ("wore", "wear"),
    ("worn", "wear"),
    ("wrote", "write"),
    ("written", "write"),
];

/// The base form of a common irregular English verb ("took" -> "take"), which a suffix
/// stemmer cannot find: "she took a class" then meets "takes a class".
fn base_form(word: &str) -> &str {
    if word == "goes" {
        return "go";
    }
    IRREGULAR_PAST
        .iter()
        .find(|(form, _)| *form == word)
        .map(|(_, base)| *base)
        .unwrap_or(word)
}

/// Whether a lowercase word is the past form or participle of a common irregular verb
/// ("took", "taken"), which no suffix shows.
pub fn is_irregular_past(word: &str) -> bool {
    IRREGULAR_PAST.iter().any(|(form, _)| *form == word)
}

/// Splits text into runs of ideographs and runs of everything else.
fn han_runs(text: &str) -> Vec<(bool, &str)> {
    let mut runs = Vec::new();
    let mut start = 0;
    let mut current: Option<bool> = None;
    for (offset, c) in text.char_indices() {
        let han = is_han(c);
        match current {
            Some(kind) if kind == han => {}
            Some(kind) => {
                runs.push((kind, &text[start..offset]));
                start = offset;
                current = Some(han);
            }
            None => current = Some(han),
        }
    }
    if let Some(kind) = current {
        runs.push((kind, &text[start..]));
    }
    runs
}

/// Segments text into words: jieba for Chinese runs, alphanumeric words for the rest,
/// lowercased. Punctuation is dropped; stopwords are kept.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (han, run) in han_runs(text) {
        if han {
            for word in JIEBA.cut(run, true) {
                let word = word.trim();
                if !word.is_empty() {
                    out.push(word.to_string());
                }
            }
        } else {
            let mut word = String::new();
            for c in run.chars() {
                if c.is_alphanumeric() || c == '\'' || ((c == '.' || c == '$') && !word.is_empty()) {
                    word.extend(c.to_lowercase());
                } else {
                    push_word(&mut out, &mut word);
                    if c == '$' {
                        word.push('$');
                    }
                }
            }
            push_word(&mut out, &mut word);
        }
    }
    out
}

fn push_word(out: &mut Vec<String>, word: &mut String) {
    let trimmed = word.trim_matches(|c| c == '.' || c == '\'');
    if !trimmed.is_empty() && trimmed != "$" {
        out.push(trimmed.to_string());
    }
    word.clear();
}

/// Chinese text as dictionary words with their parts of speech (jieba's tags: "n…" nouns,
/// "v" verbs, "d" adverbs, "t" times, "r" pronouns, "uj" 的, "m" numerals…). Without the
/// HMM, so an unknown pair such as "我爸" stays two words.
pub fn tagged_words(text: &str) -> Vec<(&str, &str)> {
    JIEBA.tag(text, false).into_iter().map(|t| (t.word, t.tag)).collect()
}

/// Content terms for matching: words without stopwords, English stemmed, Chinese words kept
/// whole plus their single ideographs for words of three or more characters (so "设计风格"
/// still meets "风格").
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in words(text) {
        if is_stopword(&word) {
            continue;
        }
        if word.chars().next().is_some_and(is_han) {
            out.push(word);
        } else if word.chars().all(|c| c.is_ascii_alphabetic() || c == '\'') {
            if word.len() > 1 {
                out.push(stem(&word));
            }
        } else {
            out.push(word);
        }
    }
    out
}

/// The marker of an ideograph n-gram among [`search_terms`]: a single ideograph or a pair
/// never equals a word.
const NGRAM_MARK: char = '\u{1}';

/// The terms a text is searched by (BM25): its [`terms`], and for Chinese also every
/// ideograph that is not a stopword and every pair of adjacent ideographs within a run
/// (marked, so that "手表" the pair and "手表" the word count apart). Word segmentation alone
/// misses where the question and the answer are cut differently ("二手平台" against
/// "闲鱼上收了一块二手的"), names and words jieba does not know, and voice-input errors; pairs
/// still meet there, single ideographs where the two sides share one character of a word
/// ("那块表" against "手表", "降压药" against "药"), and the words keep their weight where
/// segmentation agrees. Measured on the Chinese development conversations
/// (docs/retrieval.md): BM25 alone R@10 0.679 with words, 0.710 with pairs, 0.746 with single
/// ideographs as well. Changing it means rebuilding the index.
pub fn search_terms(text: &str) -> Vec<String> {
    let mut out = terms(text);
    for (han, run) in han_runs(text) {
        if !han {
            continue;
        }
        let chars: Vec<char> = run.chars().collect();
        for &single in &chars {
            if !is_stopword(single.encode_utf8(&mut [0; 4])) {
                out.push(format!("{NGRAM_MARK}{single}"));
            }
        }
        for pair in chars.windows(2) {
            out.push(format!("{NGRAM_MARK}{}{}", pair[0], pair[1]));
        }
    }
    out
}

/// Distinct content terms.
pub fn term_set(text: &str) -> HashSet<String> {
    terms(text).into_iter().collect()
}

/// Jaccard similarity of the content terms of two texts, 0 to 1.
pub fn term_jaccard(a: &str, b: &str) -> f64 {
    let a = term_set(a);
    let b = term_set(b);
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = a.intersection(&b).count() as f64;
    shared / a.union(&b).count() as f64
}

/// Sentence-ending punctuation in both languages.
pub fn is_sentence_end(c: char) -> bool {
    matches!(c, '。' | '！' | '？' | '!' | '?' | '.' | '；' | ';' | '\n')
}
/// The cells of a markdown table row, trimmed ("| 项目 | 原来 |" -> ["项目", "原来"]); `None` for
/// a line that is not one (a row starts and ends with `|`).
pub fn table_cells(line: &str) -> Option<Vec<&str>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split('|').map(str::trim).collect())
}

/// Whether a row's cells are a table's rule line, the one under its header ("|---|:---:|").
pub fn is_table_rule(cells: &[&str]) -> bool {
    !cells.is_empty()
        && cells
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')))
}

/// A line without the mark of a list item ("- ", "* ", "• ", "2. ", "3) ", "1、"): what it says,
/// for a reader that lists it under its own marks ("- - Vans: 5 from Fenwick" otherwise).
pub fn without_list_mark(line: &str) -> &str {
    static LIST_MARK: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\s*(?:[-*•·]|\d{1,2}[.)、])\s+").expect("valid regex"));
    match LIST_MARK.find(line) {
        Some(mark) => &line[mark.end()..],
        None => line,
    }
}

/// Whether a sentence ends as a question does: a question mark, or a Chinese particle of asking
/// (吗, 呢, 么, 来着), before any closing quote, bracket or full stop ("上次定的多少来着。").
pub fn ends_as_question(sentence: &str) -> bool {
    let end = sentence.trim_end_matches(|c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | '”' | '’' | ')' | '）' | '。' | '.' | '!' | '！')
    });
    end.ends_with(['?', '？', '吗', '呢', '么']) || end.ends_with("来着")
}

/// Splits text into sentences, keeping their ending punctuation. A period inside a number or
/// an abbreviation-like token ("Next.js", "3.5") does not end a sentence.
pub fn sentences(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        current.push(c);
        if is_sentence_end(c) {
            if c == '.' {
                let next = chars.get(i + 1).copied();
                if next.is_some_and(|n| !n.is_whitespace()) {
                    continue;
                }
            }
            let sentence = current.trim().to_string();
            if !sentence.is_empty() && sentence.chars().any(char::is_alphanumeric) {
                out.push(sentence);
            }
            current.clear();
        }
    }
    let rest = current.trim();
    if !rest.is_empty() && rest.chars().any(char::is_alphanumeric) {
        out.push(rest.to_string());
    }
    out
}

/// Cuts `text` to at most `max_chars` characters for a catalog summary, preferring to stop at
/// a clause boundary, then at a word boundary, and marking the cut with "…".
pub fn summarize_to(text: &str, max_chars: usize) -> String {
    let normalized: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let count = normalized.chars().count();
    if count <= max_chars {
        return normalized;
    }
    let budget = max_chars.saturating_sub(1).max(1);
    let head: Vec<char> = normalized.chars().take(budget).collect();
    let min_keep = budget / 2;
    // A clause boundary in the second half of the budget reads best.
    let clause = head
        .iter()
        .rposition(|&c| matches!(c, '，' | '、' | '；' | '。' | ',' | ';' | '：' | ':' | '.'))
        .filter(|&i| i >= min_keep);
    let cut = match clause {
        Some(i) => i,
        None => {
            let is_cjk_tail = head.last().copied().is_some_and(is_han);
            if is_cjk_tail {
                head.len()
            } else {
                head.iter()
                    .rposition(|c| c.is_whitespace())
                    .filter(|&i| i >= min_keep)
                    .unwrap_or(head.len())
            }
        }
    };
    let mut out: String = head[..cut].iter().collect();
    out = out
        .trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '，' | ',' | '、' | ':' | '：'))
        .to_string();
    out.push('…');
    out
}

/// The part of `text` that matters to a reader asking with `query_terms` ([`term_set`] of the
/// question), in at most `max_chars` characters: the sentences sharing the most terms with the
/// question, laid out in the order written, "…" where text was left out. Sentences are kept
/// whole, so a figure, a date or a name is never cut in two; a sentence longer than the limit
/// gives its best clauses instead. With no shared term, the text's opening.
pub fn snippet(text: &str, query_terms: &HashSet<String>, max_chars: usize) -> String {
    let normalized: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if char_count(&normalized) <= max_chars {
        return normalized;
    }
    let mut parts: Vec<String> = Vec::new();
    for sentence in sentences(text) {
        let sentence: String = sentence.split_whitespace().collect::<Vec<_>>().join(" ");
        if char_count(&sentence) <= max_chars {
            parts.push(sentence);
        } else {
            // A run-on sentence or a table row: its clauses stand for it.
            let mut clause = String::new();
            for c in sentence.chars() {
                clause.push(c);
                if matches!(c, '，' | ',' | '；' | ';' | '：' | ':' | '|') {
                    parts.push(std::mem::take(&mut clause));
                }
            }
            if !clause.trim().is_empty() {
                parts.push(clause);
            }
        }
    }
    let scores: Vec<usize> = parts
        .iter()
        .map(|p| term_set(p).intersection(query_terms).count())
        .collect();
    let mut order: Vec<usize> = (0..parts.len()).collect();
    // Best first; among equals, the earlier one.
    order.sort_by_key(|&i| (std::cmp::Reverse(scores[i]), i));
    let mut keep = vec![false; parts.len()];
    let mut used = 0usize;
    for i in order {
        if scores[i] == 0 && keep.iter().any(|k| *k) {
            break;
        }
        let cost = char_count(&parts[i]) + 1;
        if used + cost > max_chars {
            if used == 0 {
                // Not even the best part fits: its opening, cut where a word ends.
                return summarize_to(&parts[i], max_chars);
            }
            continue;
        }
        used += cost;
        keep[i] = true;
    }
    let mut out = String::new();
    let mut skipped = false;
    for (i, part) in parts.iter().enumerate() {
        if keep[i] {
            if skipped {
                out.push_str(if out.is_empty() { "… " } else { " … " });
            } else if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(part.trim());
            skipped = false;
        } else {
            skipped = true;
        }
    }
    if skipped {
        out.push('…');
    }
    out
}

/// The number of characters of a text (what the design's "50 characters" counts).
pub fn char_count(text: &str) -> usize {
    text.chars().count()
}

/// Compiles a rule pattern, as every rule engine does (the memory controller's, the extraction
/// rules and admission of the knowledge manager, the summary's). Its word boundaries `\b` and
/// `\B` are ASCII ones: a Latin word ends where an ASCII letter, digit or underscore meets anything
/// else, so `\bStripe\b` finds "用Stripe付款" (a Unicode boundary sees none between an ideograph
/// and a Latin letter, both being word characters), English text reads as before, and the regex
/// engine keeps its DFA (a Unicode boundary keeps it off). Everything else of the syntax is
/// Unicode as usual (`\w`, `\d`, `(?i)`, `\p{Han}`).
///
/// The patterns are constants of the crates that compile them, each covered by their unit tests,
/// so an invalid one is a programming error and panics with the pattern and the reason.
pub fn pattern(source: &str) -> Regex {
    Regex::new(&ascii_boundaries(source)).unwrap_or_else(|err| panic!("invalid rule pattern {source}: {err}"))
}

/// A set of rule patterns, each compiled as [`pattern`] compiles one.
pub fn pattern_set(sources: &[&str]) -> RegexSet {
    RegexSet::new(sources.iter().map(|source| ascii_boundaries(source)))
        .unwrap_or_else(|err| panic!("invalid rule pattern set {sources:?}: {err}"))
}

/// The pattern with each `\b` and `\B` made an ASCII one (`(?-u:\b)`, `(?-u:\B)`). Escapes are
/// read whole, so an escaped backslash followed by a `b` (`\\b`, a backslash then the letter)
/// stays what it was.
fn ascii_boundaries(source: &str) -> String {
    let mut out = String::with_capacity(source.len() + 16);
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(kind @ ('b' | 'B')) => {
                out.push_str("(?-u:\\");
                out.push(kind);
                out.push(')');
            }
            Some(escaped) => {
                out.push('\\');
                out.push(escaped);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chinese_is_searched_by_words_and_adjacent_ideographs() {
        let found = search_terms("我收了一块手表, the watch");
        let mark = |s: &str| format!("{NGRAM_MARK}{s}");
        for term in ["手表", "watch"] {
            assert!(found.contains(&term.to_string()), "{term} in {found:?}");
        }
        assert!(
            found.contains(&mark("手表")) && found.contains(&mark("我收")),
            "{found:?}"
        );
        assert!(
            !found.contains(&mark("表,")),
            "pairs stay within a run of ideographs: {found:?}"
        );
        // A lone ideograph counts unless it is a stopword.
        assert!(search_terms("猫 的").contains(&mark("猫")));
        assert!(!search_terms("猫 的").contains(&mark("的")));
        // English text is searched by its terms alone.
        assert_eq!(search_terms("Pottery classes"), terms("Pottery classes"));
    }

    #[test]
    fn chinese_is_searched_by_single_ideographs_too() {
        let mark = |s: &str| format!("{NGRAM_MARK}{s}");
        // "那块表" and "手表" share no word and no pair, only the ideograph 表.
        let question = search_terms("那块表多少钱");
        let answer = search_terms("收了一块二手手表");
        assert!(
            question.contains(&mark("表")) && answer.contains(&mark("表")),
            "{question:?} {answer:?}"
        );
        // Every ideograph of a run counts once, stopwords (的, 了) not at all.
        let found = search_terms("我的猫吃了药");
        for single in ["猫", "吃", "药"] {
            assert_eq!(
                found.iter().filter(|t| **t == mark(single)).count(),
                1,
                "{single} in {found:?}"
            );
        }
        for stopword in ["的", "了", "我"] {
            assert!(!found.contains(&mark(stopword)), "{stopword} in {found:?}");
        }
    }

    #[test]
    fn pattern_boundaries_are_ascii_ones() {
        let stripe = pattern(r"(?i)\bstripe\b");
        assert!(stripe.is_match("用Stripe付款"), "a Latin word glued to ideographs");
        assert!(stripe.is_match("we pay with Stripe."));
        assert!(!stripe.is_match("Stripes"), "still a boundary against a Latin letter");
        assert!(!stripe.is_match("pinstripe"));
        // The Unicode boundary of a plain Regex misses it: what the constructor is for.
        assert!(!Regex::new(r"(?i)\bstripe\b").unwrap().is_match("用Stripe付款"));
        assert!(pattern(r"a\Bb").is_match("ab"));
        assert!(!pattern(r"a\Bb").is_match("a b"));
        // An escaped backslash before a letter b is a backslash and a b, not a boundary.
        assert!(pattern(r"x\\b").is_match(r"x\b"));
        assert!(!pattern(r"x\\b").is_match("x b"));
        assert_eq!(ascii_boundaries(r"\p{Han}\d\b"), r"\p{Han}\d(?-u:\b)");
        let set = pattern_set(&[r"(?i)\btbd\b", r"\bnone\b"]);
        assert_eq!(set.matches("价格还是TBD").into_iter().collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn a_snippet_keeps_the_sentences_that_answer_whole() {
        let text =
            "结论：缺口约28.6万。装修42.0万，首期租金16.0万。另外金麦面粉重复付款1.8万要追回。周报我按表格发您。";
        let question = term_set("装修花多少钱");
        let short = snippet(text, &question, 30);
        assert!(short.contains("装修42.0万"), "{short}");
        assert!(!short.contains("周报"), "{short}");
        assert!(short.char_indices().count() <= 34, "{short}");
        let text =
            "We moved launch to Oct 29. The pilots are Harbor, Casa Lumbre and Pho 88. Usability budget is $2,400 now.";
        let short = snippet(text, &term_set("what is the usability budget?"), 60);
        assert_eq!(short, "… Usability budget is $2,400 now.");
        assert_eq!(snippet("short text", &term_set("x"), 60), "short text");
        let lead = snippet(text, &term_set("unrelated words"), 40);
        assert_eq!(lead, "We moved launch to Oct 29.…");
    }

    #[test]
    fn detects_chinese_with_english_terms() {
        assert_eq!(detect_language("我们用Next.js和MongoDB做这个项目"), Language::Zh);
        assert_eq!(detect_language("我喜欢简约的设计风格"), Language::Zh);
        assert_eq!(detect_language("I prefer a minimal design"), Language::En);
        assert_eq!(detect_language("Budget is $800 now"), Language::En);
        assert_eq!(detect_language("预算"), Language::Zh);
    }

    #[test]
    fn irregular_verbs_meet_their_base_form() {
        let took = terms("She took a pottery class and went camping");
        let takes = terms("she takes pottery classes; goes camping");
        for term in ["take", "go", "potteri", "camp"] {
            assert!(took.contains(&term.to_string()), "{term}: {took:?}");
            assert!(takes.contains(&term.to_string()), "{term}: {takes:?}");
        }
    }

    #[test]
    fn segments_chinese_and_stems_english() {
        let terms = terms("我喜欢简约的设计风格");
        assert!(terms.contains(&"简约".to_string()), "{terms:?}");
        assert!(
            terms.contains(&"设计".to_string()) || terms.contains(&"设计风格".to_string()),
            "{terms:?}"
        );
        assert!(!terms.contains(&"的".to_string()));
        let terms = self::terms("We decided on the running deployments");
        assert!(terms.contains(&"decid".to_string()), "{terms:?}");
        assert!(terms.contains(&"run".to_string()), "{terms:?}");
        assert!(terms.contains(&"deploy".to_string()), "{terms:?}");
        assert!(!terms.contains(&"the".to_string()));
    }

    #[test]
    fn keeps_money_and_versions_whole() {
        let words = words("Budget moved from $500 to $800, use Next.js 14");
        assert!(words.contains(&"$500".to_string()), "{words:?}");
        assert!(words.contains(&"$800".to_string()), "{words:?}");
        assert!(words.contains(&"next.js".to_string()), "{words:?}");
    }

    #[test]
    fn mixed_text_segments_both_scripts() {
        let words = words("预算改成$800了");
        assert!(words.contains(&"预算".to_string()), "{words:?}");
        assert!(words.contains(&"$800".to_string()), "{words:?}");
    }

    #[test]
    fn summaries_cut_at_boundaries() {
        let zh = "经过讨论，决定使用Next.js 14 + App Router作为前端框架，MongoDB作为数据库，Tailwind CSS做样式，理由是用户熟悉React";
        let cut = summarize_to(zh, 50);
        assert!(char_count(&cut) <= 50, "{cut}");
        assert!(cut.ends_with('…'));
        let en = "We decided to go with Next.js and MongoDB because the user knows React well and needs SSR for SEO";
        let cut = summarize_to(en, 50);
        assert!(char_count(&cut) <= 50, "{cut}");
        assert!(!cut.contains("  "));
        assert_eq!(summarize_to("short", 50), "short");
    }

    #[test]
    fn sentences_split_in_both_languages() {
        let s = sentences("我们决定用Stripe。预算是$800！Is that ok? Use Next.js 14.");
        assert_eq!(s.len(), 4, "{s:?}");
        assert_eq!(s[3], "Use Next.js 14.");
    }

    #[test]
    fn jaccard_is_symmetric_and_bounded() {
        let a = "我喜欢简约的设计风格";
        let b = "我更喜欢简约风格的设计";
        let ab = term_jaccard(a, b);
        assert!((ab - term_jaccard(b, a)).abs() < 1e-9);
        assert!(ab > 0.3 && ab <= 1.0, "{ab}");
        assert_eq!(term_jaccard("", b), 0.0);
    }

    #[test]
    fn a_sentence_ends_as_a_question() {
        for asks in [
            "what did we decide?",
            "上次定的首发价是多少来着？",
            "合同签了吗。",
            "多少来着",
            "他问\"几点？\"",
            "是这个吗 ",
        ] {
            assert!(ends_as_question(asks), "{asks}");
        }
        for states in [
            "Dara has the van out since yesterday.",
            "就这样吧！",
            "Is it? No, it is not.",
        ] {
            assert!(!ends_as_question(states), "{states}");
        }
    }
}
