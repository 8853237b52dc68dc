//! The rules' signals: the main one says why the need was decided (it picks the reason
//! shown to the user and is the first of a decision's `signals`); a time phrase adds its
//! kind, and details chosen for an unsure need add [`DECISION_SUPPORT`]. The strings are
//! those decisions have always carried (the learned heads' weight files name them).

use thinkus_common::model::Language;

/// Why the rules decided the need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    SmallTalk,
    HistoryReference,
    NewSession,
    ProjectState,
    Personal,
    Person,
    PastEvent,
    OutsideWorld,
    SelfContainedTask,
    GeneralKnowledge,
    SelfContained,
    TimePhrase,
    Unclear,
}

impl Signal {
    /// Every main signal, in the order of the learned heads' one-hot inputs.
    pub const ALL: [Signal; 13] = [
        Signal::SmallTalk,
        Signal::HistoryReference,
        Signal::NewSession,
        Signal::ProjectState,
        Signal::Personal,
        Signal::Person,
        Signal::PastEvent,
        Signal::OutsideWorld,
        Signal::SelfContainedTask,
        Signal::GeneralKnowledge,
        Signal::SelfContained,
        Signal::TimePhrase,
        Signal::Unclear,
    ];

    /// The name a decision's `signals` carry.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::SmallTalk => "small_talk",
            Signal::HistoryReference => "history_reference",
            Signal::NewSession => "new_session",
            Signal::ProjectState => "project_state",
            Signal::Personal => "personal",
            Signal::Person => "person",
            Signal::PastEvent => "past_event",
            Signal::OutsideWorld => "outside_world",
            Signal::SelfContainedTask => "self_contained_task",
            Signal::GeneralKnowledge => "general_knowledge",
            Signal::SelfContained => "self_contained",
            Signal::TimePhrase => "time_phrase",
            Signal::Unclear => "unclear",
        }
    }

    /// The reason a decision with this main signal gives, in the user's language.
    pub fn reason(self, language: Language) -> String {
        let (zh, en) = match self {
            Signal::SmallTalk => ("寒暄或致谢，不需要记忆", "Small talk, no memory needed"),
            Signal::HistoryReference => ("提到了之前的讨论，需要回忆", "Refers to earlier discussion"),
            Signal::ProjectState => (
                "询问项目已有的决策或状态",
                "Asks about the project's decisions or state",
            ),
            Signal::Personal => (
                "需要结合用户偏好给出个性化建议",
                "Needs the user's preferences for personal advice",
            ),
            Signal::Person => (
                "问到用户身边某个人的经历或说法，需要回忆",
                "Asks about someone in the user's life: only the history knows",
            ),
            Signal::PastEvent => (
                "问到用户经历过的某次具体活动，需要回忆",
                "Asks about a particular past event of the user's: only the history knows",
            ),
            Signal::GeneralKnowledge => ("通用知识问答，不需要记忆", "General knowledge, no memory needed"),
            Signal::SelfContainedTask => (
                "独立的新任务，信息已在消息中",
                "Self-contained task, everything is in the message",
            ),
            Signal::OutsideWorld => (
                "谈的是外部世界的事，不需要记忆",
                "About the outside world, no memory needed",
            ),
            Signal::SelfContained => (
                "消息本身是完整的，不涉及之前的内容",
                "Self-contained, nothing points at earlier work",
            ),
            Signal::TimePhrase => (
                "提到了时间范围，可能涉及之前的内容",
                "Names a period, may concern earlier work",
            ),
            Signal::NewSession => ("新会话开始，参考上次的进展", "A new session: pick up the last progress"),
            Signal::Unclear => ("无法确定，先看一眼记忆目录", "Unclear: a quick look at the catalog"),
        };
        match language {
            Language::Zh => zh.to_string(),
            Language::En => en.to_string(),
        }
    }
}

/// The kind of time phrase a message names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSignal {
    DayBeforeYesterday,
    Yesterday,
    Today,
    Week,
    Month,
    Date,
    MonthOfYear,
    Year,
}

impl TimeSignal {
    /// The name a decision's `signals` carry (`time:` and the kind).
    pub fn as_str(self) -> &'static str {
        match self {
            TimeSignal::DayBeforeYesterday => "time:day_before_yesterday",
            TimeSignal::Yesterday => "time:yesterday",
            TimeSignal::Today => "time:today",
            TimeSignal::Week => "time:week",
            TimeSignal::Month => "time:month",
            TimeSignal::Date => "time:date",
            TimeSignal::MonthOfYear => "time:month_of_year",
            TimeSignal::Year => "time:year",
        }
    }
}

/// Added when the rules choose details for an unsure need.
pub const DECISION_SUPPORT: &str = "decision_support";
