//! The built-in decision rules, for Chinese and English (seed 000 section 3.1, seed 001 section
//! 3.1). In order:
//! 1. small talk and thanks -> no;
//! 2. references to shared history (之前, 上次, 我说过, 刚才提到, as I said, last time, we
//!    decided, remember...) -> yes;
//! 3. questions about the project's own decisions, constraints or status -> yes;
//! 4. personalised advice and anything touching the user's preferences -> yes;
//! 5. general knowledge and new self-contained tasks -> no;
//! 6. anything else -> maybe (a cheap catalog look).
//!
//! Overview questions get the catalog mode; specific content and decision support get
//! details. Budgets follow the design's tiers; time phrases become ranges.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use regex::{Regex, RegexSet};
use thinkus_common::model::{ControlDecision, Language, MemoryType, NeedMemory, RetrievalMode, TimeRange};
use thinkus_common::text::detect_language;

/// What the rules are given.
#[derive(Debug, Clone, Default)]
pub struct RuleInput<'a> {
    pub message: &'a str,
    pub message_count: u32,
    pub recent_messages: &'a [String],
    pub project_id: Option<&'a str>,
    pub type_hints: &'a [MemoryType],
    pub now: DateTime<Utc>,
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("valid rule pattern")
}

fn set(patterns: &[&str]) -> RegexSet {
    RegexSet::new(patterns).expect("valid rule patterns")
}

static SMALL_TALK: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^\s*(你好|您好|嗨|哈喽|早上好|早安|晚上好|晚安|谢谢|多谢|感谢|好的|好|嗯|哦|收到|明白了?|了解|ok|okay|k|thanks|thank you|thx|cool|great|nice|hi|hello|hey|good (morning|night|evening)|bye|see you|got it|sounds good|perfect)[\s!！。.,，~～😊🙏👍]*$",
    )
});

static HISTORY: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"之前|以前(说|讨论|定|聊|提|的方案)|上次|上回|那次|我说过|我提过|我讲过|你说过|你提过|刚才(提到|说的|那个|那段|那份|讲的|写的)|刚刚(说|提到|写)|我们(讨论|聊|谈|商量|定|决定|说好|约定)(过|了|的)|说好的|我们定的|咱们(定|说)的|按(我们|之前|上次|原来)(定|说|聊|商量)的|记得(吗|我|我们|那)|还记得|老规矩|跟上次一样|继续(上次|之前|昨天)|接着(上次|之前|昨天)|回顾一下|复盘|那个(方案|决定|预算|报价|设计稿|需求)",
        r"(?i)\b(earlier|last time|as i (said|mentioned|told)|i (told|mentioned to) you|you (said|mentioned|suggested|told me)|we (discussed|talked about|decided|agreed|chose|picked|settled|went over|planned|covered)|remember (when|what|that|the)|do you remember|previously|the (one|plan|option|design|draft|budget|deadline|version) we|where were we|pick up where|as before|like last time|we left off|our (plan|decision|budget|deadline|pricing|roadmap|strategy|agreement|launch date|stack|tone|guidelines?|criteria|numbers|policy|positioning|persona|kpis?)|what did (we|i|you) (decide|say|pick|agree|choose)|recap|catch me up|remind me)\b",
    ])
});

static PROJECT_STATE: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"我们(的|这个)?(项目|产品|公司)?(的)?(预算|技术栈|架构|定价|价格|截止|上线|进度|计划|路线图|目标|方案|设计|风格|品牌|需求|决定|决策|里程碑|排期|kpi|KPI|数据|指标|合同|供应商|团队|招聘)|(项目|产品)(进度|状态|现在|目前)|现在(做|进行)到哪|进展(如何|怎么样)|定下来(没|了吗)|定了(吗|没)|确定了吗|方案是什么|预算(是多少|还剩|够不够)|什么时候上线",
        r"(?i)\b(what('s| is| was| are| were) (our|the current|the agreed|the final)|status of (our|the)|how far (along|are we)|where (are|do) we stand|our (current )?(budget|stack|pricing|roadmap|deadline|timeline|plan|metrics|runway|burn|mrr|kpis?|goals?|positioning|hiring plan|vendor|contract)|did we (decide|settle|agree|finalize|sign|ship|launch|hire)|have we (decided|settled|agreed|finalized|shipped|launched)|which (vendor|option|plan|stack|framework|tool) did we)\b",
    ])
});

static PERSONAL: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"适合我|根据我的|按我的|我的(偏好|习惯|风格|口味|情况|需求|预算|团队|公司|客户|产品)|我喜欢的|我不喜欢的|我习惯|给我推荐|帮我选|我该(选|用|怎么)|你觉得我|以我|对我(来说)?(最|更)|我(们)?(应该|该不该)|我(的|们的)风格|按我们定的|用我们的",
        r"(?i)\b(for me|fits? (me|us|how we)|suits? (me|us)|my (preference|style|taste|situation|team|company|budget|customers|product|startup|goals?)|based on what you know|knowing me|how i like|the way i like|what i usually|should i|should we|would you recommend for (me|us)|in my case|for our (team|company|startup|product|case)|our (style|tone|brand|voice|customers|users))\b",
    ])
});

static GENERAL: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"什么是|是什么意思|是什么原理|原理是|的原理|的区别|有什么区别|哪个(更|比较)好|怎么(写|用|实现|配置|安装|计算|理解)|如何(写|用|实现|配置|安装|计算|理解)|为什么(会|要)|解释(一下)?|举个例子|定义|概念|英文(怎么|是)|全称",
        r"(?i)^(what is|what's|what are|what does .* mean|define|explain|how does|how do (i|you|we)|how to|why (is|does|do)|difference between|compare|is it true|who (is|was|invented)|when (was|did) .* (invented|founded|released))\b|\b(vs\.?|versus)\b",
    ])
});

static TASK: LazyLock<RegexSet> = LazyLock::new(|| {
    set(&[
        r"翻译|润色|改写|校对|纠正语法|帮我把(这|下面|以下)|下面这段|以下(内容|文字|代码|这段)|这段(话|文字|代码)|计算一下|算一下|写一个(正则|函数|脚本|sql|SQL|查询|公式|正则表达式)|生成一个(表格|列表|正则)|转成|转换成|格式化",
        r"(?i)\b(translate|proofread|rephrase|rewrite this|fix the grammar|convert (this|the following)|format (this|the following)|calculate|compute|write (a|me a) (regex|function|script|sql|query|formula|haiku|poem|joke)|generate a (regex|table|list of)|summarize (this|the following)|here is (a|the) (text|code|paragraph|article)|the following (text|code))\b",
    ])
});

static OVERVIEW: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(哪些|有哪几|列一下|列出|列个|清单|汇总|概览|都(讨论|聊|定|做)了(什么|啥|哪些)|讨论过(什么|哪些)|聊过(什么|哪些)|有什么(没|还)|还有(哪些|什么)没|回顾一下|复盘|总结一下(我们|之前|上次|目前)|(what|which) (have|did) we (discuss|decide|cover|talk about|agree)|what have we|list (all|the|every|our)|overview|summary of|recap|catch me up|what'?s (still )?open|open (items|questions|issues)|remind me what|everything we|all (the|our) (decisions|notes|action items|tasks|risks))",
    )
});

static FULL_REVIEW: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(全面回顾|完整回顾|所有的?(决定|讨论|记录|信息)|全部(决定|讨论|记录|历史)|从头到尾|everything we (discussed|decided|did)|full (review|recap|history)|all of our (decisions|history|discussions)|the whole history)",
    )
});

static TYPE_PATTERNS: LazyLock<Vec<(MemoryType, Regex)>> = LazyLock::new(|| {
    vec![
        (
            MemoryType::ProjectDecision,
            re(
                r"(?i)(决定|决策|方案|定了|定的|选了|选的|选择|技术栈|架构|框架|采用|\bdecid|\bdecision|\bchose|\bchoice|\bpicked|\bstack\b|architecture|framework|\bwent with|\bgo with|\bagreed to use|\bplan\b)",
            ),
        ),
        (
            MemoryType::UserPreference,
            re(
                r"(?i)(偏好|喜欢|风格|习惯|口味|讨厌|不要|语气|prefer|\blike\b|\blikes\b|\bstyle\b|\btaste|\btone\b|\bvoice\b|\bhate\b|favou?rite|how i like)",
            ),
        ),
        (
            MemoryType::Constraint,
            re(
                r"(?i)(预算|截止|期限|上线时间|必须|要求|限制|上限|合规|budget|deadline|launch date|\bmust\b|requirement|constraint|\blimit|\bcap\b|compliance|runway|timeline)",
            ),
        ),
        (
            MemoryType::DiscussionConclusion,
            re(
                r"(?i)(结论|共识|讨论(的)?结果|达成|会议|开会|聊的|讨论过|conclusion|consensus|outcome|\bagreed\b|meeting|we discussed|talked about)",
            ),
        ),
        (
            MemoryType::ActionItem,
            re(
                r"(?i)(待办|下一步|任务|跟进|谁负责|安排|todo|to-do|next step|action item|follow.?up|\btasks?\b|who owns|assigned)",
            ),
        ),
        (
            MemoryType::Risk,
            re(r"(?i)(风险|担心|隐患|顾虑|\brisks?\b|concern|worr)"),
        ),
        (
            MemoryType::Feedback,
            re(r"(?i)(反馈|评价|意见|满意|feedback|review of|complain|liked the|didn'?t like)"),
        ),
        (
            MemoryType::Issue,
            re(r"(?i)(问题|bug|故障|报错|宕机|事故|\bissue|\bbug|incident|outage|\berror)"),
        ),
        (
            MemoryType::Insight,
            re(r"(?i)(发现|洞察|数据显示|转化率|留存|insight|data show|\bnoticed|conversion|retention|churn)"),
        ),
        (
            MemoryType::Learning,
            re(r"(?i)(教训|经验|踩坑|学到|lesson|learned|learnt|takeaway|postmortem|post-mortem)"),
        ),
        (
            MemoryType::Pattern,
            re(r"(?i)(规范|流程|惯例|最佳实践|模板|playbook|best practice|process|convention|template|checklist)"),
        ),
    ]
});

/// A time phrase and the range it names.
fn time_range(message: &str, now: DateTime<Utc>) -> Option<(TimeRange, &'static str)> {
    static YESTERDAY: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)(昨天|昨日|\byesterday\b)"));
    static DAY_BEFORE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)(前天|\bday before yesterday\b)"));
    static TODAY: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?i)(今天|今早|今天上午|今天下午|\btoday\b|\bthis morning\b|\bearlier today\b)"));
    static WEEK: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)(上周|上星期|上个星期|这周|本周|这星期|这个星期|最近几天|前几天|这几天|过去一周|最近一周|一周内|\blast week\b|\bthis week\b|\bpast (few|couple of) days\b|\bpast week\b|\bfew days ago\b|\bthe other day\b|\bearlier this week\b)",
        )
    });
    static MONTH: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)(上个月|上月|这个月|本月|最近一个月|过去一个月|近一个月|这一个月|\blast month\b|\bthis month\b|\bpast month\b|\bpast (30|thirty) days\b|\blast (30|thirty) days\b|\bfew weeks ago\b|\blast few weeks\b)",
        )
    });
    static CN_DATE: LazyLock<Regex> = LazyLock::new(|| re(r"(\d{1,2})月(\d{1,2})[日号]"));
    static EN_DATE: LazyLock<Regex> = LazyLock::new(|| {
        re(r"(?i)\b(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b")
    });
    let day = |date: NaiveDate| Utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0).unwrap_or_default());
    let today = day(now.date_naive());
    if DAY_BEFORE.is_match(message) {
        return Some((
            TimeRange::Between {
                start: Some(today - Duration::days(2)),
                end: Some(today - Duration::days(1)),
            },
            "time:day_before_yesterday",
        ));
    }
    if YESTERDAY.is_match(message) {
        return Some((
            TimeRange::Between {
                start: Some(today - Duration::days(1)),
                end: Some(today),
            },
            "time:yesterday",
        ));
    }
    let explicit_day = |month: u32, dom: u32| -> Option<TimeRange> {
        // A date without a year is the latest one not after today.
        let mut date = NaiveDate::from_ymd_opt(now.year(), month, dom)?;
        if day(date) > today {
            date = NaiveDate::from_ymd_opt(now.year() - 1, month, dom)?;
        }
        Some(TimeRange::Between {
            start: Some(day(date)),
            end: Some(day(date) + Duration::days(1)),
        })
    };
    if let Some(c) = CN_DATE.captures(message) {
        let (month, dom) = (c[1].parse().ok()?, c[2].parse().ok()?);
        if let Some(range) = explicit_day(month, dom) {
            return Some((range, "time:date"));
        }
    }
    if let Some(c) = EN_DATE.captures(message) {
        let month = match c[1].to_lowercase().get(..3)? {
            "jan" => 1,
            "feb" => 2,
            "mar" => 3,
            "apr" => 4,
            "may" => 5,
            "jun" => 6,
            "jul" => 7,
            "aug" => 8,
            "sep" => 9,
            "oct" => 10,
            "nov" => 11,
            _ => 12,
        };
        if let Some(range) = c[2].parse().ok().and_then(|dom| explicit_day(month, dom)) {
            return Some((range, "time:date"));
        }
    }
    if TODAY.is_match(message) {
        return Some((
            TimeRange::Between {
                start: Some(today),
                end: None,
            },
            "time:today",
        ));
    }
    if WEEK.is_match(message) {
        return Some((TimeRange::Last7Days, "time:week"));
    }
    if MONTH.is_match(message) {
        return Some((TimeRange::Last30Days, "time:month"));
    }
    None
}

fn types_of(message: &str) -> Vec<MemoryType> {
    TYPE_PATTERNS
        .iter()
        .filter(|(_, pattern)| pattern.is_match(message))
        .map(|(t, _)| *t)
        .collect()
}

fn reason(language: Language, signal: &str) -> String {
    let (zh, en) = match signal {
        "small_talk" => ("寒暄或致谢，不需要记忆", "Small talk, no memory needed"),
        "history_reference" => ("提到了之前的讨论，需要回忆", "Refers to earlier discussion"),
        "project_state" => (
            "询问项目已有的决策或状态",
            "Asks about the project's decisions or state",
        ),
        "personal" => (
            "需要结合用户偏好给出个性化建议",
            "Needs the user's preferences for personal advice",
        ),
        "general_knowledge" => ("通用知识问答，不需要记忆", "General knowledge, no memory needed"),
        "self_contained_task" => (
            "独立的新任务，信息已在消息中",
            "Self-contained task, everything is in the message",
        ),
        "time_phrase" => (
            "提到了时间范围，可能涉及之前的内容",
            "Names a period, may concern earlier work",
        ),
        "new_session" => ("新会话开始，参考上次的进展", "A new session: pick up the last progress"),
        _ => ("无法确定，先看一眼记忆目录", "Unclear: a quick look at the catalog"),
    };
    match language {
        Language::Zh => zh.to_string(),
        Language::En => en.to_string(),
    }
}

/// The rules' decision.
pub fn decide(input: &RuleInput<'_>) -> ControlDecision {
    let message = input.message.trim();
    let language = detect_language(message);
    let mut signals: Vec<String> = Vec::new();
    let time = time_range(message, input.now);
    if let Some((_, signal)) = &time {
        signals.push((*signal).to_string());
    }

    let history = HISTORY.is_match(message);
    let project_state = PROJECT_STATE.is_match(message);
    let personal = PERSONAL.is_match(message);
    let general = GENERAL.is_match(message);
    let task = TASK.is_match(message);
    let small_talk = SMALL_TALK.is_match(message);
    let new_session_pickup = input.message_count == 0 && message.chars().count() <= 40 && re_pickup().is_match(message);

    let (need, main_signal) = if small_talk && !history {
        (NeedMemory::No, "small_talk")
    } else if history && !(general && is_general_aside(message)) {
        (NeedMemory::Yes, "history_reference")
    } else if new_session_pickup {
        (NeedMemory::Yes, "new_session")
    } else if project_state {
        (NeedMemory::Yes, "project_state")
    } else if personal && !task {
        (NeedMemory::Yes, "personal")
    } else if task {
        (NeedMemory::No, "self_contained_task")
    } else if general {
        (NeedMemory::No, "general_knowledge")
    } else if time.is_some() {
        (NeedMemory::Maybe, "time_phrase")
    } else {
        (NeedMemory::Maybe, "unclear")
    };
    signals.insert(0, main_signal.to_string());

    let mut memory_types = if need == NeedMemory::No {
        Vec::new()
    } else {
        types_of(message)
    };
    if main_signal == "personal" && !memory_types.contains(&MemoryType::UserPreference) {
        memory_types.push(MemoryType::UserPreference);
    }
    for hint in input.type_hints {
        if need != NeedMemory::No && !memory_types.contains(hint) {
            memory_types.push(*hint);
        }
    }

    let overview = OVERVIEW.is_match(message);
    let full_review = FULL_REVIEW.is_match(message);
    let retrieval_mode = match need {
        NeedMemory::Yes if !overview => RetrievalMode::Details,
        _ => RetrievalMode::Catalog,
    };
    let budget_tokens = match (need, retrieval_mode) {
        (NeedMemory::No, _) => 0,
        (NeedMemory::Maybe, _) => 300,
        _ if full_review => 2000,
        (_, RetrievalMode::Catalog) => 400,
        (_, RetrievalMode::Details) => 1000,
    };
    let time_range = match (need, time) {
        (NeedMemory::No, _) => TimeRange::All,
        (_, Some((range, _))) => range,
        (_, None) => TimeRange::All,
    };
    ControlDecision {
        need_memory: need,
        memory_types,
        retrieval_mode,
        budget_tokens,
        time_range,
        reason: reason(language, main_signal),
        engine: "rules".into(),
        signals,
        language,
    }
}

/// "As I said, I'm just curious: how does TCP work?" uses a history phrase as a figure of
/// speech before a general question.
fn is_general_aside(message: &str) -> bool {
    static ASIDE: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)(不用管了|不管了|换个问题|问个别的|随便问问|just curious|unrelated|random question|anyway,|btw,|by the way,)",
        )
    });
    ASIDE.is_match(message)
}

fn re_pickup() -> &'static Regex {
    static PICKUP: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)(继续|接着|我们到哪了|进行到哪|从哪开始|where were we|let'?s continue|continue|pick (it )?up|carry on|resume)",
        )
    });
    &PICKUP
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide_text(text: &str) -> ControlDecision {
        decide(&RuleInput {
            message: text,
            message_count: 3,
            now: Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap(),
            ..Default::default()
        })
    }

    #[test]
    fn history_references_need_memory() {
        for text in [
            "我们上次讨论的技术方案是什么?",
            "As I said last time, keep the deck short",
            "按我们定的风格写一个首页文案",
        ] {
            let d = decide_text(text);
            assert_eq!(d.need_memory, NeedMemory::Yes, "{text}");
        }
        let d = decide_text("我们上次讨论的技术方案是什么?");
        assert!(
            d.memory_types.contains(&MemoryType::ProjectDecision),
            "{:?}",
            d.memory_types
        );
        assert_eq!(d.retrieval_mode, RetrievalMode::Details);
        assert_eq!(d.language, Language::Zh);
        assert!(d.reason.contains("之前"), "{}", d.reason);
    }

    #[test]
    fn general_questions_do_not() {
        for text in [
            "React和Vue哪个更好?",
            "What is a CAC payback period?",
            "帮我把这段话翻译成英文：我们下周发布",
            "谢谢！",
        ] {
            assert_eq!(decide_text(text).need_memory, NeedMemory::No, "{text}");
        }
    }

    #[test]
    fn preferences_and_overviews() {
        let d = decide_text("Based on what you know about me, which laptop should I buy?");
        assert_eq!(d.need_memory, NeedMemory::Yes);
        assert!(d.memory_types.contains(&MemoryType::UserPreference));
        let d = decide_text("我们讨论过哪些营销方案？");
        assert_eq!(d.need_memory, NeedMemory::Yes);
        assert_eq!(d.retrieval_mode, RetrievalMode::Catalog);
        assert!((200..=500).contains(&d.budget_tokens));
        let d = decide_text("Give me a full recap of everything we decided");
        assert_eq!(d.budget_tokens, 2000);
    }

    #[test]
    fn time_phrases_become_ranges() {
        assert_eq!(decide_text("上周我们定的预算是多少").time_range, TimeRange::Last7Days);
        assert_eq!(
            decide_text("what did we decide last month about pricing").time_range,
            TimeRange::Last30Days
        );
        let yesterday = decide_text("昨天讨论的数据库迁移方案定下来没");
        assert_eq!(
            yesterday.time_range,
            TimeRange::Between {
                start: Some(Utc.with_ymd_and_hms(2026, 11, 21, 0, 0, 0).unwrap()),
                end: Some(Utc.with_ymd_and_hms(2026, 11, 22, 0, 0, 0).unwrap()),
            }
        );
        let dated = decide_text("11月3号开会说了什么");
        assert!(matches!(dated.time_range, TimeRange::Between { .. }));
    }

    #[test]
    fn unclear_messages_look_cheaply() {
        let d = decide_text("ok let's do the pricing page next");
        assert_eq!(d.need_memory, NeedMemory::Maybe);
        assert_eq!(d.retrieval_mode, RetrievalMode::Catalog);
        assert_eq!(d.budget_tokens, 300);
    }
}
