//! The texts the services write, in the page's language. A candidate's reason, a history
//! record's reason and who made it, a turn's decision and why each memory was or was not used
//! are sentences the services build (in English in the store and the APIs, or in the language
//! of the message for a turn), from a small set of phrases with values in them. This phrasebook
//! holds each phrase in both languages; the page matches a text against it and writes the
//! phrase of its own language with the same values, each value translated in turn (a decision's
//! reason inside why a memory was used, inside why it was left out). A text no phrase matches
//! is what a person or a language model wrote: it is shown as it was written.
//!
//! A phrase's `{0}`, `{1}`... are its values, in the order either language needs them. Phrases
//! that wrap others ("{0} (left out: {1})") come before the ones they wrap.

use thinkus_common::model::Language;

/// (English, Chinese).
type Pair = (&'static str, &'static str);

/// Who made a change, as the history records it.
const ACTORS: &[Pair] = &[
    ("user:{0}", "用户 {0}"),
    ("role:{0}", "员工 {0}"),
    ("system:quota", "系统（配额）"),
    ("system:forget", "系统（遗忘）"),
    ("system:decay", "系统（衰减）"),
    ("system:profile", "系统（长期画像）"),
    ("import", "Markdown 导入"),
];

/// Every sentence the services write that the page shows.
const PHRASES: &[Pair] = &[
    // Wrappers first: a reason with what was added to it.
    ("{0} (left out: {1})", "{0}（{1}，未放入）"),
    ("{0} (admission bypassed by {1})", "{0}（{1} 跳过了写入审核）"),
    ("{0} (the quota gave up {1})", "{0}（配额为它让出了 {1}）"),
    ("{0} (rejected: {1})", "{0}（已拒绝：{1}）"),
    (
        "{0} (settled: {1} replaced the value it questioned)",
        "{0}（已解决：{1} 替换了它质疑的值）",
    ),
    (
        "{0} (resolved by {1}: the current value was kept)",
        "{0}（由 {1} 解决：保留了现在的值）",
    ),
    (
        "{0}; nothing recorded in {1}: searched all time",
        "{0}；{1} 内没有记录，改为检索全部历史",
    ),
    (
        "{0}; but the memory catalog holds a strong match (similarity {1}, shared words): included",
        "{0}；但记忆目录里有强匹配（语义相似度{1}，且有共同词），附上",
    ),
    (
        "{0}; but the memory catalog holds a strong match (similarity {1}, shared words); the task brings no material of its own: recalled in detail",
        "{0}；但记忆目录里有强匹配（语义相似度{1}，且有共同词），任务要用的材料消息里没有，按细节检索",
    ),
    ("{0}; promoted to the long-term profile", "{0}；升为长期画像"),
    // Why a turn's context holds a memory (the gateway).
    (
        "relevance {0}, importance {1}, freshness {2} ({3})",
        "相关度{0}，重要性{1}，新鲜度{2}（{3}）",
    ),
    ("standing rule (in every context)", "长期规则（每次都带上）"),
    ("profile (in every context)", "用户画像（每次都带上）"),
    ("a conflict waiting for the user", "待用户确认的冲突"),
    (
        "a new session starts: the project's last session ({0}) summary",
        "新会话开始，附上项目上次会话（{0}）的摘要",
    ),
    (
        "an artifact of this session; term overlap with the message {0}",
        "本会话的产物，与消息的词重合度{0}",
    ),
    ("far less relevant than the best memory", "远不如最相关的记忆相关"),
    ("the last session's summary says it", "上次会话摘要里已有"),
    ("it stands among the standing rules", "已在长期规则与偏好中"),
    ("over budget", "超出预算"),
    ("last_7_days", "最近7天"),
    ("last_30_days", "最近30天"),
    // The memory controller's decision (its rules, its learned head, its fallback).
    ("Small talk, no memory needed", "寒暄或致谢，不需要记忆"),
    ("Refers to earlier discussion", "提到了之前的讨论，需要回忆"),
    (
        "Asks about the project's decisions or state",
        "询问项目已有的决策或状态",
    ),
    (
        "Needs the user's preferences for personal advice",
        "需要结合用户偏好给出个性化建议",
    ),
    (
        "Asks about someone in the user's life: only the history knows",
        "问到用户身边某个人的经历或说法，需要回忆",
    ),
    (
        "Asks about a particular past event of the user's: only the history knows",
        "问到用户经历过的某次具体活动，需要回忆",
    ),
    ("General knowledge, no memory needed", "通用知识问答，不需要记忆"),
    (
        "Self-contained task, everything is in the message",
        "独立的新任务，信息已在消息中",
    ),
    (
        "About the outside world, no memory needed",
        "谈的是外部世界的事，不需要记忆",
    ),
    (
        "Self-contained, nothing points at earlier work",
        "消息本身是完整的，不涉及之前的内容",
    ),
    (
        "Names a period, may concern earlier work",
        "提到了时间范围，可能涉及之前的内容",
    ),
    ("A new session: pick up the last progress", "新会话开始，参考上次的进展"),
    ("Unclear: a quick look at the catalog", "无法确定，先看一眼记忆目录"),
    (
        "Learned: likely about earlier work ({0})",
        "学到的判断：很可能涉及之前的内容（{0}）",
    ),
    ("Learned: memory may help ({0})", "学到的判断：记忆可能有帮助（{0}）"),
    ("Learned: no memory needed ({0})", "学到的判断：不需要记忆（{0}）"),
    (
        "Decision failed, using the conservative default ({0})",
        "判断失败，使用保守默认值（{0}）",
    ),
    // Why a candidate waits (the knowledge manager's admission and pending conflicts).
    (
        "profile fact with time-sensitive wording",
        "个人信息里有随时间变化的说法",
    ),
    ("profile fact with low confidence ({0})", "个人信息的置信度偏低（{0}）"),
    ("contradicts {0} about {1}: {2}", "与 {0} 关于 {1} 的内容矛盾：{2}"),
    ("inferred by an executive", "由员工推断"),
    ("confidence {0} below {1}", "置信度 {0} 低于 {1}"),
    // Why a memory changed (its history).
    ("written", "已写入"),
    ("replaces {0}", "替换了 {0}"),
    (
        "written as replaced: {0} states a later value of {1}",
        "写入时即被替换：{0} 记录了 {1} 更晚的值",
    ),
    (
        "quota cleanup: importance {0} with {1} reads, the least valuable of role {2}, makes room for {3}",
        "配额清理：重要性 {0}，读取 {1} 次，是员工 {2} 最不重要的记忆，为 {3} 让出位置",
    ),
    ("similar to {0} ({1})", "与 {0} 相似（{1}）"),
    (
        "importance {0} with {1} reads, older than {2} days",
        "重要性 {0}，读取 {1} 次，超过 {2} 天",
    ),
    (
        "freshness {0} -> {1} after {2} days without access",
        "{2} 天未被读取，新鲜度 {0} -> {1}",
    ),
    (
        "long-term profile: {0} observations, confidence {1}",
        "长期画像：出现 {0} 次，置信度 {1}",
    ),
    ("replaced by a newer value of {0}", "被 {0} 的新值替换"),
    ("set importance: {0} -> {1}: {2}", "调整重要性：{0} -> {1}：{2}"),
    ("replace: {0}", "更正：{0}"),
    ("suppress: {0}", "压制：{0}"),
    ("freeze: {0}", "冻结：{0}"),
    ("restore: {0}", "恢复：{0}"),
    ("merged with {0} others", "与另外 {0} 条合并"),
    ("promoted to a {0}", "升为{0}"),
    (
        "conflict {0} resolved by {1}: the new value was kept",
        "冲突 {0} 由{1}解决：保留了新的值",
    ),
    (
        "conflict {0} resolved by {1}: kept over {2}",
        "冲突 {0} 由{1}解决：保留现在的值，而不是 {2}",
    ),
    ("conflict {0} resolved by {1}: {2}", "冲突 {0} 由{1}解决：{2}"),
    ("conversation turn", "对话原文"),
    // What a form is refused for.
    ("{0}: is required", "{0}：必须填写"),
    ("{0}: must be 1-5", "{0}：必须是 1 到 5"),
    ("unknown API key", "API 密钥无效"),
    ("candidate {0} was already {1}", "候选记忆 {0} 已经处理过（{1}）"),
    ("approved", "已批准"),
    ("rejected", "已拒绝"),
    ("memory {0} was already replaced by {1}", "记忆 {0} 已经被 {1} 替换"),
    (
        "the current value of conflict {0} is no longer active: keep the new value or reject it",
        "冲突 {0} 现在的值已不再有效：请保留新的值，或者拒绝它",
    ),
    ("internal error", "内部错误"),
    ("corrected on the memory page", "在记忆页面上更正"),
    ("deleted on the memory page", "在记忆页面上删除"),
    ("rejected on the memory page", "在记忆页面上拒绝"),
    ("chosen on the memory page", "在记忆页面上选择"),
    ("edited in the Markdown import", "在 Markdown 导入中修改"),
    (
        "importance edited in the Markdown import",
        "在 Markdown 导入中修改了重要性",
    ),
    ("line deleted in the Markdown import", "在 Markdown 导入中删除了这一行"),
];

enum Part<'a> {
    Text(&'a str),
    Value(usize),
}

fn parts(template: &str) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').map(|c| open + c);
        let index = close.and_then(|c| rest[open + 1..c].parse::<usize>().ok());
        match (close, index) {
            (Some(close), Some(index)) => {
                if open > 0 {
                    out.push(Part::Text(&rest[..open]));
                }
                out.push(Part::Value(index));
                rest = &rest[close + 1..];
            }
            _ => {
                out.push(Part::Text(&rest[..open + 1]));
                rest = &rest[open + 1..];
            }
        }
    }
    if !rest.is_empty() {
        out.push(Part::Text(rest));
    }
    out
}

/// Whether every bracket of `text` (ASCII or full-width) is closed, in order: a value is
/// never half of a bracketed phrase.
fn balanced(text: &str) -> bool {
    let mut depth = 0i32;
    for c in text.chars() {
        match c {
            '(' | '（' => depth += 1,
            ')' | '）' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

/// The values of `text` if it is `template` with values in its places (each with its
/// brackets balanced; the shortest first, the last one to the end of the text).
fn values<'t>(template: &str, text: &'t str) -> Option<Vec<&'t str>> {
    fn walk<'t>(parts: &[Part<'_>], text: &'t str, found: &mut Vec<(usize, &'t str)>) -> bool {
        match parts {
            [] => text.is_empty(),
            [Part::Text(literal), rest @ ..] => text.starts_with(literal) && walk(rest, &text[literal.len()..], found),
            [Part::Value(index)] => {
                if !balanced(text) {
                    return false;
                }
                found.push((*index, text));
                true
            }
            [Part::Value(index), Part::Text(literal), rest @ ..] => {
                let mut from = 0;
                while let Some(at) = text[from..].find(literal).map(|at| from + at) {
                    let mark = found.len();
                    found.push((*index, &text[..at]));
                    if balanced(&text[..at]) && walk(rest, &text[at + literal.len()..], found) {
                        return true;
                    }
                    found.truncate(mark);
                    from = at + literal.chars().next().map_or(1, char::len_utf8);
                }
                false
            }
            // Two values side by side cannot be told apart: no phrase has them.
            [Part::Value(_), Part::Value(_), ..] => false,
        }
    }
    let mut found = Vec::new();
    if !walk(&parts(template), text, &mut found) {
        return None;
    }
    let count = found.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
    let mut out = vec![""; count];
    for (index, value) in found {
        out[index] = value;
    }
    Some(out)
}

fn fill(template: &str, values: &[String]) -> String {
    parts(template)
        .into_iter()
        .map(|part| match part {
            Part::Text(text) => text.to_string(),
            Part::Value(index) => values.get(index).cloned().unwrap_or_default(),
        })
        .collect()
}

fn translate(book: &[Pair], text: &str, language: Language, depth: usize) -> Option<String> {
    for (en, zh) in book {
        let (target, other) = match language {
            Language::Zh => (*zh, *en),
            Language::En => (*en, *zh),
        };
        // A text of the other language, or of this one with values of the other.
        if let Some(values) = values(other, text).or_else(|| values(target, text)) {
            let values: Vec<String> = values
                .into_iter()
                .map(|value| {
                    if depth < 8 {
                        localize_at(value, language, depth + 1)
                    } else {
                        value.to_string()
                    }
                })
                .collect();
            return Some(fill(target, &values));
        }
    }
    None
}

fn localize_at(text: &str, language: Language, depth: usize) -> String {
    translate(PHRASES, text, language, depth)
        .or_else(|| translate(ACTORS, text, language, 8))
        .unwrap_or_else(|| text.to_string())
}

/// A text a service wrote, in `language` when it is made of known phrases; else as written.
pub fn localize(text: &str, language: Language) -> String {
    localize_at(text, language, 0)
}

/// Who made a change ("user:alice", "system:decay", "import"), in `language`.
pub fn actor(actor: &str, language: Language) -> String {
    translate(ACTORS, actor, language, 8).unwrap_or_else(|| actor.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phrase_has_the_same_values_in_both_languages() {
        for (en, zh) in PHRASES.iter().chain(ACTORS) {
            let indices = |template: &str| {
                let mut found: Vec<usize> = parts(template)
                    .into_iter()
                    .filter_map(|p| match p {
                        Part::Value(i) => Some(i),
                        Part::Text(_) => None,
                    })
                    .collect();
                found.sort();
                found
            };
            assert_eq!(indices(en), indices(zh), "{en} / {zh}");
            let values = indices(en);
            assert_eq!(values, (0..values.len()).collect::<Vec<_>>(), "{en}: values 0, 1, 2...");
            for template in [en, zh] {
                let parts = parts(template);
                assert!(
                    parts.iter().any(|p| matches!(p, Part::Text(t) if !t.trim().is_empty())),
                    "{template}: a phrase has words"
                );
                assert!(
                    !parts.windows(2).any(|w| matches!(w, [Part::Value(_), Part::Value(_)])),
                    "{template}: two values side by side"
                );
            }
        }
    }

    #[test]
    fn the_services_texts_read_in_either_language() {
        use Language::{En, Zh};
        // A candidate's reasons (the knowledge manager).
        assert_eq!(
            localize("profile fact with low confidence (0.42)", Zh),
            "个人信息的置信度偏低（0.42）"
        );
        assert_eq!(
            localize("contradicts mem_1, mem_2 about budget: confidence 0.40 below 0.60", Zh),
            "与 mem_1, mem_2 关于 budget 的内容矛盾：置信度 0.40 低于 0.60"
        );
        // The history, values translated in turn; a person's own words stay.
        assert_eq!(
            localize("set importance: 3 -> 5: corrected on the memory page", Zh),
            "调整重要性：3 -> 5：在记忆页面上更正"
        );
        assert_eq!(localize("replace: 预算改了", Zh), "更正：预算改了");
        assert_eq!(
            localize("freshness 4.00 -> 3.10 after 12 days without access", Zh),
            "12 天未被读取，新鲜度 4.00 -> 3.10"
        );
        assert_eq!(
            localize("written (admission bypassed by role:cfo) (the quota gave up mem_9)", Zh),
            "已写入（员工 cfo 跳过了写入审核）（配额为它让出了 mem_9）"
        );
        assert_eq!(actor("user:alice", Zh), "用户 alice");
        assert_eq!(actor("system:decay", Zh), "系统（衰减）");
        assert_eq!(actor("用户 alice", En), "user:alice");
        // A turn's reasons: written in the message's language, read in the page's.
        let zh = "相关度0.83，重要性0.60，新鲜度0.90（提到了之前的讨论，需要回忆）（超出预算，未放入）";
        let en =
            "relevance 0.83, importance 0.60, freshness 0.90 (Refers to earlier discussion) (left out: over budget)";
        assert_eq!(localize(zh, En), en);
        assert_eq!(localize(en, Zh), zh);
        assert_eq!(localize(zh, Zh), zh);
        assert_eq!(
            localize(
                "提到了时间范围，可能涉及之前的内容；last_7_days 内没有记录，改为检索全部历史",
                En
            ),
            "Names a period, may concern earlier work; nothing recorded in last_7_days: searched all time"
        );
        assert_eq!(
            localize(
                "Names a period, may concern earlier work; nothing recorded in last_7_days: searched all time",
                Zh
            ),
            "提到了时间范围，可能涉及之前的内容；最近7天 内没有记录，改为检索全部历史"
        );
        assert_eq!(
            localize(
                "relevance 0.5, importance 0.4, freshness 1.0 (Learned: memory may help (0.61))",
                Zh
            ),
            "相关度0.5，重要性0.4，新鲜度1.0（学到的判断：记忆可能有帮助（0.61））"
        );
        // What no phrase says: as written (a language model's note, a person's words).
        assert_eq!(localize("用户在问上周的决定", En), "用户在问上周的决定");
        assert_eq!(localize("budget moved to $800", Zh), "budget moved to $800");
        assert_eq!(localize("", Zh), "");
    }
}
