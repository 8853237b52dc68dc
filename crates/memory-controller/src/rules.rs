//! The built-in decision rules, for Chinese and English (seed 000 section 3.1, seed 001 section
//! 3.1). In order:
//! 1. small talk, thanks and chit-chat about the assistant -> no;
//! 2. references to shared history (之前说, 上次, 我说过, 刚才提到, as I said, last time, we
//!    decided, remember...) -> yes, unless the phrase is a figure of speech before a general
//!    question ("as I said, just curious: how does TCP work?");
//! 3. a new session that asks to pick up where it stopped -> yes;
//! 4. questions about the project's own decisions, constraints or status, with or without a
//!    pronoun ("支付模块上线了吗", "is the vendor contract signed yet?") -> yes;
//! 5. personalised advice and anything touching the user's preferences -> yes;
//! 6. talk about the outside world (news, an article, another company's history) -> no;
//! 7. general knowledge and new self-contained tasks -> no, when nothing points at the user's
//!    own world; the content of a task (what follows "翻译：" or a quote) is not read for cues,
//!    so "translate: our team decided..." stays no;
//! 8. a message with no pointer to the user's world and no follow-up wording -> no;
//! 9. anything else -> maybe (a cheap catalog look).
//!
//! Overview questions (lists, progress, patterns, "where were we") get the catalog mode;
//! specific content and decision support get details. Budgets follow the design's tiers
//! (simple reference 200-500, deep 500-1500, full review 1500-3000); time phrases become
//! ranges.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use regex::{Regex, RegexSet};
use thinkus_common::model::{ControlDecision, Language, MemoryType, NeedMemory, RetrievalMode, TimeRange};
use thinkus_common::text::{detect_language, pattern, pattern_set};

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

/// Messages made only of greetings, thanks, acknowledgements and goodbyes, in any number.
static SMALL_TALK: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^[\s\W_]*((你好|您好|嗨|哈喽|早上好|早安|中午好|下午好|晚上好|晚安|谢谢你?|多谢|感谢|辛苦了?|好的|好滴|好嘞|好吧|好|嗯+|哦+|噢|喔|收到|明白了?|了解了?|懂了|知道了|没问题|行吧?|可以|妥|哈+|呵呵|嘿嘿|太棒了|棒|赞|牛|周末愉快|节日快乐|新年快乐|明天见|回头见|再见|拜拜|先这样吧?|那就先这样吧?|明天继续|下次聊|ok|okay|k|kk|thanks( a lot| so much)?|thank you( so much)?|thx|ty|cool|great|nice|awesome|perfect|amazing|hi|hello|hey( there)?|yo|good (morning|night|evening|afternoon)|morning|night|bye|goodbye|see (you|ya)|talk (to you )?(tomorrow|later|soon)|got it|sounds good|lol|lmao|haha+|hehe|happy (friday|monday|weekend|holidays?|new year)|have a (good|nice|great) (day|weekend|one)|that'?s (super |very |really )?(helpful|great|useful)|you'?re (the best|awesome)|much appreciated|no worries|all good|will do|noted|cheers)[\s\W_]*)+$",
    )
});

/// Chit-chat about the assistant or the mood, which needs no memory.
static SOCIAL: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(你是谁|你叫什么|你今天(忙不忙|怎么样|好吗)|最近怎么样|在吗|who are you|what'?s your name|how'?s it going|how are you|what'?s up|are you there)|哈哈|这个梗|that'?s (all|it) for (today|now)|先到这|今天就到这|心情不错|太好笑",
    )
});

/// References to shared history: a time word tied to a speaker or a verb of discussion, a
/// remembered thing, an earlier statement.
static HISTORY: LazyLock<RegexSet> = LazyLock::new(|| {
    pattern_set(&[
        r"(之前|以前|先前|当初|当时|上次|上回|那次|前(两|几|一)天|那天|昨天|前天|上周|上礼拜|上个?月|早上|上午|下午|刚才|刚刚)(我|你|咱|我们|你们|他|她|大家)?(跟\S{1,6})?(说|讲|聊|谈|讨论|商量|定|决定|约定|答应|承诺|提|提到|提过|提醒|评估|统计|算|整理|总结|设|选|用|踩|做|写|发|给|对|改|砍|否|拍板|确认|同意|列|报|签|约|面试|复盘|开会|帮)",
        r"(之前|以前|上次|上回|当初)(的|那|这)(个|份|次|几|调性|风格|方案|计划|预算|设计|决定|结论|思路|需求|候选人|会议|讨论|话题)",
        r"(上次|上回)(的|那|你|我)|那版|来着|帮我回忆|回忆一?下|想不起来|照旧|老样子|跟以前一样|(和|跟)之前一样|(提|踩|做|试|聊|定|用|说|砍|否|谈|问)过(的|哪|什么|几)|我(是不是|好像|应该)?(说|提|讲)过",
        r"我说过|我提过|我讲过|我跟你说|你说过|你提过|你之前|你上次|刚才(提到|说|那|讲|写|你|我)|刚刚(说|提到|写|那)|我们(讨论|聊|谈|商量|定|决定|说好|约定)(过|了|的)|说好的|我们定的|咱们(定|说)的|按(我们|之前|上次|原来)(定|说|聊|商量)?的|记得(吗|我|我们|那)|还记得|老规矩|跟上次一样|继续(上次|之前|昨天)|接着(上次|之前|昨天)|回顾一下|复盘|后来(怎么|决定|定|选|呢|处理)|(那个|那件|那次)(方案|决定|预算|报价|设计稿|需求|事|bug|问题|合作|候选人|投诉)",
        r"我们.{0,12}(定|选|用|签|设|花|做|砍|承诺|答应|学到|总结|试)(的|了|过)|我们(当时|那时|已经|最后)",
        r"(CEO|CTO|CFO|CMO|COO|HR|设计师|律师|法务|财务|投资人|猎头|供应商|外包)(之前|上次|当时|那边)?.{0,6}(说的|提的|建议的|定的|拍的|给的|报的|承诺的|答应的|提醒)|落下来的|当时拍",
        r"(?i)\bthe (ceo|cto|cfo|cmo|coo|designer|lawyer|pm|board|investors?|recruiter|contractor|agency|vendor|supplier)\b.{0,30}\b(said|suggested|proposed|concluded?|flagged|recommended|landed on|decided|agreed|promised|offered|quoted)\b",
        r"(?i)\b(did|had) we\b|\bhave we (\w+ )?\w+(ed|en|t)\b|\bwe('ve| have)? (\w+ )?(\w+ed|set|chose|went|spent|built|made|said|told|landed|won|lost|ran|sent|paid|hit|got|put|found|learnt|learned|drew|wrote|took|gave|held)\b( \w+)* (before|earlier|already|back then|in the end)\b|\bdid we\b|\bwhat \w+ (did|have) we\b",
        r"(?i)\b(earlier you|you (said|mentioned|suggested|told me|recommended|proposed|promised|flagged|wrote)|earlier,? (you|we|i)|mentioned .* earlier|last time|as i (said|mentioned|told)|i (told|mentioned to) you|we (discussed|talked about|decided|agreed|chose|picked|settled|went over|planned|covered|ruled out|rejected|signed|hired|shipped|launched)|remember (when|what|that|the)|do you remember|the (one|plan|option|design|draft|budget|deadline|version) we|where were we|pick up where|as before|like last time|we left off|what did (we|i|you) (decide|say|pick|agree|choose|think)|what you just (wrote|said)|recap|catch me up|remind me|did (i|we|you) (say|mention|decide|agree|pick|choose|like)|we'?ve (agreed|decided|discussed|covered)|our (agreed|usual|standard|chosen|established)|as usual|same as (before|always|usual)|the last (launch|release|campaign|sprint|meeting|review|round|call|sync|retro|time)|(i|we)'?ve (\w+ )?(liked|said|told you|used|picked|chosen|mentioned|shared|tried)\b.*\b(before|already)|what i'?ve (liked|said|told you|picked|chosen)|ever get (written|done|sorted|fixed|signed|decided)|get sorted)\b",
    ])
});

/// Nostalgia about the world ("remember when every website used Flash?"), not about the user.
static REMINISCE: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"(?i)(\bremember when\b|\bback in the day\b|还记得.{0,10}(那时|那会|年代)|当年)"));

/// Phrases that mark what follows as a detour, so a history phrase before it is a figure of
/// speech.
static ASIDE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(不用管了|不管了|换个问题|问个别的|随便问问|just curious|unrelated|random question|anyway|btw|by the way|never mind|quick one)",
    )
});

/// Questions about the project's decisions, constraints or status; the last two patterns
/// catch status questions without a pronoun ("合同签了吗", "is the redesign done yet?").
static PROJECT_STATE: LazyLock<RegexSet> = LazyLock::new(|| {
    pattern_set(&[
        r"我们(的|这个)?(项目|产品|公司|团队)?(的)?(预算|技术栈|架构|定价|价格|截止|上线|进度|计划|路线图|目标|方案|设计|风格|品牌|需求|决定|决策|里程碑|排期|kpi|KPI|数据|指标|合同|供应商|团队|招聘|用户|客户|目标用户)|(项目|产品)(进度|状态|现在|目前)|现在(做|进行|推进)到哪|(推进|进行|跟进|谈)到哪(一步|了)|进展(如何|怎么样)|进度(怎么样|如何)|怎么样了|定下来(没|了吗)|定了(吗|没)|确定了吗|改好了?没|写好没|处理完了?(吗|没)|还有(哪些|什么)(事|待办)?没|有哪些待办|完成了哪些|对过的|方案是什么|预算(是多少|还剩|够不够)|超预算|什么时候上线|最后(选|定|用|是|怎么|拍)|(定|选|砍|签)(下来)?的(事|方案|东西|那)|(选|定)(在|了)哪",
        r"(?i)\b(what('s| is| was| are| were) (our|the current|the agreed|the final)|status of|what'?s the status|how far (along|are we)|where (are|do) we stand|our (current )?(budget|stack|pricing|roadmap|deadline|timeline|plan|metrics|runway|burn|mrr|kpis?|goals?|positioning|hiring plan|vendor|contract|tech debt|backlog|cap|infra)|did we (decide|settle|agree|finalize|sign|ship|launch|hire)|have we (decided|settled|agreed|finalized|shipped|launched)|which (vendor|option|plan|stack|framework|tool)s? did we|update on|still (open|pending)|what'?s (still )?(pending|open)|(is|has) the .* (resolved|fixed|done|shipped|signed)|how'?s the .* (tracking|going)|how did (it|the .*) go|what got done|what went wrong with|takeaways from|came out of|keep popping up|recurring|walk me through|the gist|feedback from|runway|burn rate|where are we (on|with)|any (news|progress|word) on)\b|\b(hr|cfo|cto|ceo|cmo|coo|designer|lawyer|pm)'s\b",
        r"(风险|待办|问题)清单|过一遍|结论(是|呢)|(?i)\b(conclusion|outcome|action items|takeaways?) (from|of)\b",
        r"(完|好|出来|下来|定|上线|发布|发出去|签|批|审|到位|落地|搞定|落实|跑通|通|修好|修复|谈妥|交付|开始|回复|付|到)(了)?(吗|没|没有|么)[?？]?\s*$|(上限|预算|截止日期|排期|报价|账期|薪资|定价)(是|定|拍|定的|拍的)?(了)?(多少|几号|哪天)|(还)?(作数|算数|有效|生效)(吗|么)|(还)?(能|赶得上|来得及)(按时|如期)",
        r"(?i)\b(done|finished|signed|shipped|live|ready|approved|merged|fixed|resolved|sent|published|deployed|closed|wrapped up|sorted) yet\b|^(is|are|has|have|did) (the|that|this) .*\b(yet|already|still (on|happening|a thing|valid))\b|\b(still on track|on schedule|behind schedule)\b|^(hey,? |so,? |btw,? )?(did|has|have) the \w+|\bever (send|sign|get|reply|respond|come|pay)|\b(go|come) through\b|keeps? (coming|popping|showing|cropping) up|keeps? (happening|failing|breaking)|\bthe (hard |soft |monthly |annual )?(budget|cap|deadline|launch date|price point|salary band|headcount)\b",
    ])
});

/// Personalised advice and the user's preferences.
static PERSONAL: LazyLock<RegexSet> = LazyLock::new(|| {
    pattern_set(&[
        r"适合我|根据我的|按我的|我的(偏好|习惯|风格|口味|情况|需求|预算|团队|公司|客户|产品)|我喜欢的|我不喜欢的|我习惯|给我推荐|帮我选|我该(选|用|怎么)|你觉得我|以我|对我(来说)?(最|更)|我(们)?(应该|该不该)|我(的|们的)风格|按我们定的|用我们的|我们的(目标用户|用户|客户|调性|品牌)|按品牌规范|(品牌|设计)规范",
        r"(?i)\bour (target )?(audience|users|customers|persona)\b",
        r"(?i)\b(for me|fits? (me|us|how we)|suits? (me|us)|my (preference|style|taste|situation|team|company|budget|customers|product|startup|goals?)|based on what you know|knowing me|how i like|the way i like|what i usually|should i|should we|would you recommend for (me|us)|in my case|for our (team|company|startup|product|case)|our (style|tone|brand|voice|customers|users)|keep that in mind|i should|keep in mind for)\b",
    ])
});

/// General knowledge, matched clause by clause (the English pattern is anchored at a
/// clause's start).
static GENERAL: LazyLock<RegexSet> = LazyLock::new(|| {
    pattern_set(&[
        r"什么是|什么叫|是什么意思|啥意思|是什么原理|原理|的区别|有什么区别|有啥区别|有什么不同|哪个(更|比较)好|怎么(写|用|实现|配置|设置|安装|计算|理解|计税)|如何(写|用|实现|配置|安装|计算|理解)|为什么(会|要)|解释(一下)?|讲讲|举个例子|定义|概念|英文(怎么|是)|怎么说|全称|一般(在|怎么|包含|是|要|需要)|通常|行业(平均|惯例|标准)|是多少|多少倍|等于多少|有哪几种|有效期多久|最长|现在还流行|有什么用意|有什么要求|法律规定|法律上|怎么规定|有什么影响|一般有|合法吗|是不是太",
        r"(?i)^(what is|what's|what are|what does|what was|define|explain|how does|how do (i|you)|how is|how to|how many|how much|why (is|does|do|did)|difference between|compare|is it (true|legal|worth)|is \w+ better|who (is|was|invented|founded)|when (was|did)|worst case|in the old days|in older versions)\b|\b(vs\.?|versus|difference|typically|typical|in general|general tips|generic|rule of thumb|industry (standard|average|benchmark)|like i'?m (five|5))\b",
    ])
});

/// New self-contained tasks; their content follows a colon or a quote.
static TASK: LazyLock<RegexSet> = LazyLock::new(|| {
    pattern_set(&[
        r"翻译|翻成|润色|改写|校对|语病|纠正语法|帮我把(这|下面|以下)|下面这段|以下(内容|文字|代码|这段)|这段(话|文字|代码|英文|SQL)|计算一下|算一下|写(一|个|一个|一首)(正则|函数|脚本|sql|SQL|查询|公式|正则表达式|bash|Python|小诗|诗)|写个|生成一个|起\d*个名字|转成|转换成|格式化|统一成|模板",
        r"(?i)^(translate|proofread|rephrase|rewrite|fix the grammar|convert|format|calculate|compute|write|draft|generate|summarize|turn this|give me \d+|pls|please)\b|\b(translate|template|snippet|haiku|limerick|regex|script)\b",
    ])
});

/// Anything pointing at the user's own world.
static ANCHOR: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(我们|咱们|咱|我的|我(在|想|要|打算|觉得|准备|正在|上次|之前|说|提|们)|你(之前|上次|当时|帮我)|(?i:\b(we|our|ours|my|we're|we've)\b)|\bus\b)",
    )
});

/// Talk about the outside world: news, an article, hearsay.
static EXTERNAL: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(看到一篇|看到一个|听说|新闻|行业趋势|据说|\bi (read|saw|heard)\b|\bnews\b|\barticle\b|\bblog post\b|\bapparently\b)",
    )
});

/// Continuations and decision talk that a catalog look may help with.
static FOLLOWUP: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(那|和|还有|and\b|what about|how about)|呢[？?]?$|下一步|继续|展开|再(改|来|想)|换个|建议|要不要|该不该|纠结|这个(方案|bug|问题|设计|版本)|这块|那块|\b(next steps?|continue|keep going|expand|alternatives|ideas|thoughts|should (the|we|i)|good time to|let'?s|revisit|recheck|tighten|prioriti[sz]e|try)\b",
    )
});

/// Words that point at the team's own people, work and periods without a pronoun.
static HINT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(那个|那件|那次|那份|那几|那版|这周|上周|本周|这个月|上个月|本月|最近(几天|一个月|一周)|(CEO|CTO|CFO|CMO|COO|HR|PM|设计师|律师|法务|财务|运营|产品经理|猎头|投资人|候选人|销售|客服)(之前|上次|说|提|提醒|给|评|改|对|这边|那边)|这边|那边|项目|到目前为止|目前为止|(客户|用户)(反馈|投诉|评价)|供应商|账期|工单|复盘|评审|发版|上线|路线图|否了|(?i:roadmap|\bthe (cfo|cto|ceo|cmo|designer|lawyer|pm|team|investors?|candidates?|pilot|retro|deploy|release|review|launch|campaign|interviews?)\b|\b(this|last|past) (week|month|quarter)\b|\bfrom (monday|tuesday|wednesday|thursday|friday)\b|\bproposal\b|\brisks?\b|\bretro\b|\brejected\b|\bside\b|\bpending\b|\bstill\b|\bso far\b))",
    )
});

/// Overview questions: lists, progress, patterns, "where were we".
static OVERVIEW: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(哪些|哪几|列一下|列出|列个|清单|汇总|概览|梳理|规律|共性|反复|老出|待办|进度|怎么样了|推进到|到哪|聊到哪|都(讨论|聊|定|做)了(什么|啥|哪些)|讨论过(什么|哪些)|聊过(什么|哪些)|有什么(没|还)|还有(哪些|什么)没|回顾一下|复盘|总结(过|一下)|做什么的|(what|which) have we (discussed|decided|covered|talked about|agreed|tried)|what have we|\bwhich \w+ have we|list (all|the|every|our)|\blist\b|overview|summary of|summari[sz]e everything|recap|catch me up|(still|what'?s) (open|pending)|open (items|questions|issues|risks)|remind me what|everything we|all (the|our) (decisions|notes|action items|tasks|risks)|patterns?\b|recurring|keep popping up|what got done|\btracking\b|so far|where were we|what do you know about|walk me through the .* list|what feedback|have we written up)",
    )
});

/// Asks for one specific thing or its reasons, which overrides an overview word.
static SPECIFIC: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"(?i)(为什么|原因|具体|细节|\bwhy\b|\bexactly\b|\bin detail\b)"));

/// Decision support, which needs the details of what is known.
static DECISION_SUPPORT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(要不要|该不该|需不需要|怎么办|怎么(定|解决|改|选)|该怎么|如何(定|选|改)|比较(好|合理)|纠结|值不值|还需要(准备)?|帮我(写|准备)|\bshould (we|i|the)\b|\bdo we need\b|\bthoughts\b|\bgood time to\b|\bhow should\b|\bworth it\b|\bany ideas\b|\brecheck\b|\bwhat should (i|we) do\b|\bhelp me write\b|\bprep\b|\bwhat should the\b|\brevisit\b)",
    )
});

static FULL_REVIEW: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(全面回顾|完整回顾|所有的?(决定|讨论|记录|信息)|全部(决定|讨论|记录|历史)|从头到尾|everything we('ve)? (discussed|decided|did|agreed)|full (review|recap|history)|all of our (decisions|history|discussions)|the whole history)",
    )
});

/// A new session asking to pick up where it stopped.
static PICKUP: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(继续|接着|我们到哪了|进行到哪|聊到哪|从哪开始|where were we|let'?s continue|continue|pick (it )?up|carry on|resume)",
    )
});

static TYPE_PATTERNS: LazyLock<Vec<(MemoryType, Regex)>> = LazyLock::new(|| {
    vec![
        (
            MemoryType::ProjectDecision,
            pattern(
                r"(?i)(决定|决策|方案|定了|定的|选了|选的|选择|技术栈|架构|框架|采用|\bdecid|\bdecision|\bchose|\bchoice|\bpicked|\bstack\b|architecture|framework|\bwent with|\bgo with|\bagreed to use|\bplan\b)",
            ),
        ),
        (
            MemoryType::UserPreference,
            pattern(
                r"(?i)(偏好|喜欢|风格|习惯|口味|讨厌|不要|语气|prefer|\blike\b|\blikes\b|\bstyle\b|\btaste|\btone\b|\bvoice\b|\bhate\b|favou?rite|how i like)",
            ),
        ),
        (
            MemoryType::Constraint,
            pattern(
                r"(?i)(预算|截止|期限|上线时间|必须|要求|限制|上限|合规|budget|deadline|launch date|\bmust\b|requirement|constraint|\blimit|\bcap\b|compliance|runway|timeline)",
            ),
        ),
        (
            MemoryType::DiscussionConclusion,
            pattern(
                r"(?i)(结论|共识|讨论(的)?结果|达成|会议|开会|聊的|讨论过|conclusion|consensus|outcome|\bagreed\b|meeting|we discussed|talked about)",
            ),
        ),
        (
            MemoryType::ActionItem,
            pattern(
                r"(?i)(待办|下一步|任务|跟进|谁负责|安排|todo|to-do|next step|action item|follow.?up|\btasks?\b|who owns|assigned)",
            ),
        ),
        (
            MemoryType::Risk,
            pattern(r"(?i)(风险|担心|隐患|顾虑|\brisks?\b|concern|worr)"),
        ),
        (
            MemoryType::Feedback,
            pattern(r"(?i)(反馈|评价|意见|满意|feedback|review of|complain|liked the|didn'?t like)"),
        ),
        (
            MemoryType::Issue,
            pattern(r"(?i)(问题|bug|故障|报错|宕机|事故|\bissue|\bbug|incident|outage|\berror)"),
        ),
        (
            MemoryType::Insight,
            pattern(r"(?i)(发现|洞察|数据显示|转化率|留存|insight|data show|\bnoticed|conversion|retention|churn)"),
        ),
        (
            MemoryType::Learning,
            pattern(r"(?i)(教训|经验|踩坑|学到|lesson|learned|learnt|takeaway|postmortem|post-mortem)"),
        ),
        (
            MemoryType::Pattern,
            pattern(r"(?i)(规范|流程|惯例|最佳实践|模板|playbook|best practice|process|convention|template|checklist)"),
        ),
    ]
});

/// A time phrase and the range it names.
pub fn time_range(message: &str, now: DateTime<Utc>) -> Option<(TimeRange, &'static str)> {
    static YESTERDAY: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?i)(昨天|昨日|\byesterday\b)"));
    static DAY_BEFORE: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?i)(前天|\bday before yesterday\b)"));
    static TODAY: LazyLock<Regex> =
        LazyLock::new(|| pattern(r"(?i)(今天|今早|今天上午|今天下午|\btoday\b|\bthis morning\b|\bearlier today\b)"));
    static WEEK: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)(上周|上星期|上个星期|这周|本周|这星期|这个星期|最近几天|(^|[^提])前几天|这几天|过去一周|最近一周|一周内|\blast week\b|\bthis week\b|\bpast (few|couple of) days\b|\bpast week\b|\bfew days ago\b|\bthe other day\b|\bearlier this week\b)",
        )
    });
    static MONTH: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)(上个月|上月|这个月|本月|最近一个月|过去一个月|近一个月|这一个月|\blast month\b|\bthis month\b|\bpast month\b|\bpast (30|thirty) days\b|\blast (30|thirty) days\b|\bfew weeks ago\b|\b(last|past) (few|couple( of)?) weeks\b|\ba couple( of)? weeks (back|ago)\b)",
        )
    });
    let today = midnight(now.date_naive());
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
    if let Some(found) = explicit_date(message, now) {
        return Some(found);
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

/// The start of a day, in UTC.
fn midnight(date: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0).unwrap_or_default())
}

/// How far before a named date what was said about it may be (plans, announcements).
const NAMED_DATE_BEFORE_DAYS: i64 = 7;
/// How far after a named date what was said about it may be (reports, "last month we...").
const NAMED_DATE_AFTER_DAYS: i64 = 31;

/// Month names and their usual abbreviations (whole words only: "marketing" is no month).
const MONTH_NAMES: &str = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)";

fn month_number(name: &str) -> Option<u32> {
    let months = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let key = name.to_lowercase();
    months.iter().position(|m| key.starts_with(m)).map(|i| i as u32 + 1)
}

/// A named day, month or year ("October 13, 2023", "13 Oct", "in May 2023", "2023年5月",
/// "11月3号", "in 2023"), as the range it spans; "as of", "by", "until" or "before" it (之前,
/// 以前) keep only what came before, "since" or "after" it (以来, 之后) only what came after.
/// A day or month without a year is the latest one not after today.
fn explicit_date(message: &str, now: DateTime<Utc>) -> Option<(TimeRange, &'static str)> {
    static EN_MONTH_DAY: LazyLock<Regex> = LazyLock::new(|| {
        pattern(&format!(
            r"(?i)\b{MONTH_NAMES}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?"
        ))
    });
    static EN_DAY_MONTH: LazyLock<Regex> = LazyLock::new(|| {
        pattern(&format!(
            r"(?i)\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH_NAMES}\b\.?(?:,?\s+(\d{{4}})\b)?"
        ))
    });
    static EN_MONTH_YEAR: LazyLock<Regex> =
        LazyLock::new(|| pattern(&format!(r"(?i)\b{MONTH_NAMES}\.?,?\s+(?:of\s+)?(\d{{4}})\b")));
    static EN_MONTH: LazyLock<Regex> = LazyLock::new(|| {
        pattern(&format!(
            r"(?i)\b(?:in|during|since|after|before|until|by|from|of)\s+(?:early\s+|late\s+|mid-?)?{MONTH_NAMES}\b"
        ))
    });
    static CN_MONTH_ONLY: LazyLock<Regex> = LazyLock::new(|| pattern(r"(^|[^\d年])(\d{1,2})月(份)?([^\d]|$)"));
    static ISO_DAY: LazyLock<Regex> = LazyLock::new(|| pattern(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"));
    static CN_DAY: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})[日号]"));
    static CN_MONTH: LazyLock<Regex> = LazyLock::new(|| pattern(r"(\d{4})年(\d{1,2})月"));
    static CN_YEAR: LazyLock<Regex> = LazyLock::new(|| pattern(r"(\d{4})年"));
    static EN_YEAR: LazyLock<Regex> =
        LazyLock::new(|| pattern(r"(?i)\b(?:in|during|of|for|since|after|before|until|by)\s+(\d{4})\b"));
    static BEFORE: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?i)\b(as of|by|until|till|up to|before)\s*$"));
    static AFTER: LazyLock<Regex> = LazyLock::new(|| pattern(r"(?i)\b(since|after|from)\s*$"));
    static CN_BEFORE: LazyLock<Regex> = LazyLock::new(|| pattern(r"^\s*(之前|以前|前|为止)"));
    static CN_AFTER: LazyLock<Regex> = LazyLock::new(|| pattern(r"^\s*(以来|之后|以后|后|起)"));

    let today = now.date_naive();
    let year_of = |text: Option<regex::Match<'_>>| text.and_then(|m| m.as_str().parse::<i32>().ok());
    let plausible = |year: i32| (1900..=2200).contains(&year);
    // (first day, day after the last, where the phrase starts and ends).
    let span: Option<(NaiveDate, NaiveDate, usize, usize, &'static str)> = (|| {
        let day_span = |year: Option<i32>, month: u32, dom: u32| -> Option<(NaiveDate, NaiveDate)> {
            let date = match year {
                Some(year) if plausible(year) => NaiveDate::from_ymd_opt(year, month, dom)?,
                Some(_) => return None,
                None => {
                    let this_year = NaiveDate::from_ymd_opt(today.year(), month, dom)?;
                    if this_year > today {
                        NaiveDate::from_ymd_opt(today.year() - 1, month, dom)?
                    } else {
                        this_year
                    }
                }
            };
            Some((date, date.succ_opt()?))
        };
        let month_span = |year: i32, month: u32| -> Option<(NaiveDate, NaiveDate)> {
            let first = NaiveDate::from_ymd_opt(year, month, 1)?;
            let next = if month == 12 {
                NaiveDate::from_ymd_opt(year + 1, 1, 1)?
            } else {
                NaiveDate::from_ymd_opt(year, month + 1, 1)?
            };
            plausible(year).then_some((first, next))
        };
        // Year (optional in Chinese), month, day.
        for pattern in [&*ISO_DAY, &*CN_DAY] {
            if let Some(c) = pattern.captures(message) {
                let whole = c.get(0)?;
                let (month, dom) = (c[2].parse().ok()?, c[3].parse().ok()?);
                if let Some((a, b)) = day_span(year_of(c.get(1)), month, dom) {
                    return Some((a, b, whole.start(), whole.end(), "time:date"));
                }
            }
        }
        for pattern in [&*EN_MONTH_DAY, &*EN_DAY_MONTH] {
            if let Some(c) = pattern.captures(message) {
                let whole = c.get(0)?;
                let (month_text, dom_text) = if c[1].chars().all(|ch| ch.is_ascii_digit()) {
                    (&c[2], &c[1])
                } else {
                    (&c[1], &c[2])
                };
                let (Some(month), Ok(dom)) = (month_number(month_text), dom_text.parse::<u32>()) else {
                    continue;
                };
                if let Some((a, b)) = day_span(year_of(c.get(3)), month, dom) {
                    return Some((a, b, whole.start(), whole.end(), "time:date"));
                }
            }
        }
        if let Some(c) = CN_MONTH.captures(message) {
            let whole = c.get(0)?;
            if let (Some(year), Ok(month)) = (year_of(c.get(1)), c[2].parse::<u32>())
                && let Some((a, b)) = month_span(year, month)
            {
                return Some((a, b, whole.start(), whole.end(), "time:month_of_year"));
            }
        }
        if let Some(c) = EN_MONTH_YEAR.captures(message) {
            let whole = c.get(0)?;
            if let (Some(month), Some(year)) = (month_number(&c[1]), year_of(c.get(2)))
                && let Some((a, b)) = month_span(year, month)
            {
                return Some((a, b, whole.start(), whole.end(), "time:month_of_year"));
            }
        }
        // A month without a year: the latest one that has begun.
        let latest_month = |month: u32| -> Option<(NaiveDate, NaiveDate)> {
            let year = if month > today.month() {
                today.year() - 1
            } else {
                today.year()
            };
            month_span(year, month)
        };
        if let Some(c) = EN_MONTH.captures(message) {
            let name = c.get(1)?;
            if let Some((a, b)) = month_number(name.as_str()).and_then(latest_month) {
                return Some((a, b, name.start(), name.end(), "time:month"));
            }
        }
        if let Some(c) = CN_MONTH_ONLY.captures(message) {
            let number = c.get(2)?;
            if let Some((a, b)) = number
                .as_str()
                .parse::<u32>()
                .ok()
                .filter(|m| (1..=12).contains(m))
                .and_then(latest_month)
            {
                return Some((
                    a,
                    b,
                    number.start(),
                    c.get(3).map_or(number.end(), |m| m.end()),
                    "time:month",
                ));
            }
        }
        for pattern in [&*CN_YEAR, &*EN_YEAR] {
            if let Some(c) = pattern.captures(message) {
                let number = c.get(1)?;
                let year = year_of(Some(number))?;
                if plausible(year) {
                    let (a, b) = (
                        NaiveDate::from_ymd_opt(year, 1, 1)?,
                        NaiveDate::from_ymd_opt(year + 1, 1, 1)?,
                    );
                    // The bound words of "since 2023" sit before the number, inside the match.
                    return Some((a, b, number.start(), c.get(0)?.end(), "time:year"));
                }
            }
        }
        None
    })();
    let (first, after_last, at, end, signal) = span?;
    let (before_text, after_text) = (&message[..at], &message[end..]);
    let range = if BEFORE.is_match(before_text) || CN_BEFORE.is_match(after_text) {
        TimeRange::Between {
            start: None,
            end: Some(midnight(after_last)),
        }
    } else if AFTER.is_match(before_text) || CN_AFTER.is_match(after_text) {
        TimeRange::Between {
            start: Some(midnight(first)),
            end: None,
        }
    } else {
        // A named date is when something happened; it is usually told afterwards ("yesterday
        // I met...", "two weeks ago I read..."), sometimes planned a little before: the range
        // reaches a week before it and a month after it. Ranking, not the filter, picks the
        // turns of the day itself.
        TimeRange::Between {
            start: Some(midnight(first) - Duration::days(NAMED_DATE_BEFORE_DAYS)),
            end: Some(midnight(after_last) + Duration::days(NAMED_DATE_AFTER_DAYS)),
        }
    };
    Some((range, signal))
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
        "person" => (
            "问到用户身边某个人的经历或说法，需要回忆",
            "Asks about someone in the user's life: only the history knows",
        ),
        "past_event" => (
            "问到用户经历过的某次具体活动，需要回忆",
            "Asks about a particular past event of the user's: only the history knows",
        ),
        "general_knowledge" => ("通用知识问答，不需要记忆", "General knowledge, no memory needed"),
        "self_contained_task" => (
            "独立的新任务，信息已在消息中",
            "Self-contained task, everything is in the message",
        ),
        "outside_world" => (
            "谈的是外部世界的事，不需要记忆",
            "About the outside world, no memory needed",
        ),
        "self_contained" => (
            "消息本身是完整的，不涉及之前的内容",
            "Self-contained, nothing points at earlier work",
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

/// The part of a message the cues are read from: for a task, what comes before its content
/// (a colon or a quote), so words inside the text to translate or polish are not cues.
fn instruction(message: &str, task: bool) -> &str {
    if !task {
        return message;
    }
    message.split([':', '：', '"', '“', '「']).next().unwrap_or(message)
}

/// Whether any clause is a general-knowledge question; "ok, what is churn?" starts its
/// question after a comma.
fn is_general(message: &str) -> bool {
    GENERAL.is_match(message)
        || message
            .split([':', '：', ';', '；', ',', '，', '.', '。', '?', '？', '!', '！'])
            .map(str::trim)
            .any(|clause| !clause.is_empty() && GENERAL.is_match(clause))
}

/// A question about something of the user's own ("what tagline did we land on?", "我们的客单价是多少"),
/// which asks for specific content.
fn own_question(head: &str) -> bool {
    static QUESTION: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)([?？]\s*$|吗|呢|多少|哪个|什么|^(what|which|how|when|where|who|why|is|are|do|does|did|was|were|can)\b)",
        )
    });
    (ANCHOR.is_match(head) || HINT.is_match(head)) && QUESTION.is_match(head)
}

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
fn about_a_past_event(head: &str) -> bool {
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
fn asks_for_many(head: &str) -> bool {
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
fn asks_for_a_portrait(head: &str) -> bool {
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
fn about_a_person(head: &str) -> bool {
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

/// The rules' decision.
pub fn decide(input: &RuleInput<'_>) -> ControlDecision {
    let message = input.message.trim();
    let language = detect_language(message);
    let mut signals: Vec<String> = Vec::new();
    let time = time_range(message, input.now);
    if let Some((_, signal)) = &time {
        signals.push((*signal).to_string());
    }

    let task = TASK.is_match(message);
    let general = is_general(message);
    let head = instruction(message, task);
    let aside_general = general && ASIDE.is_match(message);

    let need_and_signal = || -> (NeedMemory, &'static str) {
        if SMALL_TALK.is_match(message) || SOCIAL.is_match(message) {
            return (NeedMemory::No, "small_talk");
        }
        let reminiscing = general && REMINISCE.is_match(head) && !ANCHOR.is_match(head);
        if HISTORY.is_match(head) && !aside_general && !reminiscing {
            return (NeedMemory::Yes, "history_reference");
        }
        if input.message_count == 0 && message.chars().count() <= 40 && PICKUP.is_match(message) {
            return (NeedMemory::Yes, "new_session");
        }
        if PROJECT_STATE.is_match(head) {
            return (NeedMemory::Yes, "project_state");
        }
        if PERSONAL.is_match(head) {
            return (NeedMemory::Yes, "personal");
        }
        if about_a_person(head) {
            return (NeedMemory::Yes, "person");
        }
        if about_a_past_event(head) && !EXTERNAL.is_match(message) {
            return (NeedMemory::Yes, "past_event");
        }
        if EXTERNAL.is_match(message) {
            return (NeedMemory::No, "outside_world");
        }
        let anchor = ANCHOR.is_match(head);
        let hint = HINT.is_match(head);
        if (task || general) && !hint && (task || !anchor) {
            return if task {
                (NeedMemory::No, "self_contained_task")
            } else {
                (NeedMemory::No, "general_knowledge")
            };
        }
        if aside_general {
            return (NeedMemory::No, "general_knowledge");
        }
        let past_period = time.as_ref().is_some_and(|(_, signal)| *signal != "time:today");
        if !anchor && !hint && !past_period && !FOLLOWUP.is_match(message) {
            return (NeedMemory::No, "self_contained");
        }
        if time.is_some() {
            (NeedMemory::Maybe, "time_phrase")
        } else {
            (NeedMemory::Maybe, "unclear")
        }
    };
    let (need, main_signal) = need_and_signal();
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

    let overview = OVERVIEW.is_match(message) && !SPECIFIC.is_match(message);
    let full_review = FULL_REVIEW.is_match(message);
    let aggregate = asks_for_many(head);
    let retrieval_mode = match need {
        NeedMemory::Yes if !overview => RetrievalMode::Details,
        NeedMemory::Maybe if !overview && (DECISION_SUPPORT.is_match(message) || own_question(head)) => {
            RetrievalMode::Details
        }
        _ => RetrievalMode::Catalog,
    };
    if retrieval_mode == RetrievalMode::Details && need == NeedMemory::Maybe {
        signals.push("decision_support".into());
    }
    let budget_tokens = match (need, retrieval_mode) {
        (NeedMemory::No, _) => 0,
        (NeedMemory::Maybe, RetrievalMode::Catalog) => 300,
        (NeedMemory::Maybe, RetrievalMode::Details) => 600,
        _ if full_review => 2000,
        // Everything someone did of a kind ("what books has she read?", "how many times...")
        // is spread over many conversations: the full-review tier.
        (NeedMemory::Yes, RetrievalMode::Details) if aggregate => 2000,
        // What someone did or said is scattered over many conversations: the top of the deep tier.
        // A portrait of someone draws on all of their history: the full-review tier.
        (NeedMemory::Yes, RetrievalMode::Details) if main_signal == "person" && asks_for_a_portrait(head) => 2000,
        (_, RetrievalMode::Details) if main_signal == "person" => 1500,
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

/// Compiles every rule now, so the first request does not pay for it.
pub fn warm_up() {
    // Messages down every path, so that the patterns local to the rules compile too.
    for message in [
        "warm up",
        "你好！",
        "我们上周定的预算是多少？之前说的方案还用吗？",
        "帮我把2023年5月8日以来的决定都列出来",
        "What did we decide about the budget last week?",
        "What has Melanie painted since October 13, 2023?",
        "How long does Audrey typically walk her dogs for?",
        "What was discussed in the pottery workshop in May?",
        "List every book Caroline has read so far",
        "How do Stripe webhooks work?",
    ] {
        let _ = decide(&RuleInput {
            message,
            message_count: 3,
            now: Utc::now(),
            ..Default::default()
        });
    }
    for pattern in [
        &*SMALL_TALK,
        &*SOCIAL,
        &*ASIDE,
        &*ANCHOR,
        &*EXTERNAL,
        &*FOLLOWUP,
        &*HINT,
        &*OVERVIEW,
        &*SPECIFIC,
        &*DECISION_SUPPORT,
        &*FULL_REVIEW,
        &*PICKUP,
    ] {
        let _ = pattern.is_match("");
    }
    for patterns in [&*HISTORY, &*PROJECT_STATE, &*PERSONAL, &*GENERAL, &*TASK] {
        let _ = patterns.is_match("");
    }
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
    fn a_latin_word_glued_to_chinese_is_read() {
        // "tone" between ideographs: no Unicode word boundary there, an ASCII one on both sides.
        assert!(types_of("用上次的tone写一段开场白").contains(&MemoryType::UserPreference));
        assert!(!types_of("用上次的overtones写").contains(&MemoryType::UserPreference));
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

    fn assert_need(need: NeedMemory, texts: &[&str]) {
        for text in texts {
            let d = decide_text(text);
            assert_eq!(d.need_memory, need, "{text}: {:?}", d.signals);
        }
    }

    #[test]
    fn small_talk_variants_do_not() {
        assert_need(
            NeedMemory::No,
            &[
                "好的，谢谢！",
                "收到，辛苦了~",
                "哈哈哈 这个梗太好笑了",
                "周末愉快 🎉",
                "thanks, that's super helpful!",
                "haha nice 👍",
                "ok cool, talk tomorrow",
                "Who are you?",
            ],
        );
    }

    #[test]
    fn history_words_about_the_outside_world_do_not() {
        assert_need(
            NeedMemory::No,
            &[
                "之前的版本里React的生命周期是怎么写的？",
                "以前的诺基亚为什么会衰落",
                "What was Twitter's previous logo?",
                "In older versions of Django, how did you define URL patterns?",
                "Remember when every website used Flash? Why did it die out?",
                "As I said, I'm just curious: how does the TCP handshake work?",
                "I read last week that Google is killing third-party cookies",
            ],
        );
    }

    #[test]
    fn quoted_task_content_is_not_a_cue() {
        assert_need(
            NeedMemory::No,
            &[
                "翻译成英文：我们上次讨论的方案已经定了",
                "润色一下这段：我们的产品帮助用户节省时间",
                "Translate into Chinese: \"our team decided to ship next week\"",
                "Proofread: We agreed with our investors on the terms.",
            ],
        );
    }

    #[test]
    fn status_questions_without_pronouns_need_memory() {
        assert_need(
            NeedMemory::Yes,
            &[
                "支付模块上线了吗",
                "合同法务审完了吗",
                "新官网的设计稿出来了没",
                "Q3的招聘计划还作数吗",
                "服务器的预算上限是多少来着",
                "Is the vendor contract signed yet?",
                "landing page redesign done yet?",
                "did the contractor ever send over the invoice",
                "any update on the Series A term sheet?",
                "What problems keep coming up with checkout?",
            ],
        );
    }

    #[test]
    fn general_knowledge_stays_general() {
        assert_need(
            NeedMemory::No,
            &[
                "Explain RAG like I'm five",
                "What's the difference between a contractor and an employee for US tax purposes?",
                "期权和限制性股票有什么区别",
                "员工主动离职要提前几天通知，法律上是怎么规定的",
                "How do I set up a GitHub Actions cache?",
                "Write a haiku about Mondays",
            ],
        );
    }

    #[test]
    fn team_members_words_and_recall_markers_need_memory() {
        assert_need(
            NeedMemory::Yes,
            &[
                "the CMO said Meta ROAS was bad - what were the actual numbers?",
                "律师之前提醒的那几个合规风险还记得吗",
                "帮我写个运营专员的JD，风格照旧",
                "Pick a font that fits what I've liked before",
                "What tagline did we land on?",
            ],
        );
    }

    #[test]
    fn modes_follow_the_question() {
        let d = decide_text("我们试过哪些获客渠道？");
        assert_eq!(
            (d.need_memory, d.retrieval_mode),
            (NeedMemory::Yes, RetrievalMode::Catalog)
        );
        let d = decide_text("What's still pending on the finance side?");
        assert_eq!(d.retrieval_mode, RetrievalMode::Catalog);
        let d = decide_text("Which of the vendors did we rule out, and why?");
        assert_eq!(
            (d.need_memory, d.retrieval_mode),
            (NeedMemory::Yes, RetrievalMode::Details)
        );
        let d = decide_text("Should we localize into German?");
        assert_ne!(d.need_memory, NeedMemory::No);
        assert_eq!(d.retrieval_mode, RetrievalMode::Details);
        let d = decide_text("next steps?");
        assert_eq!(
            (d.need_memory, d.retrieval_mode),
            (NeedMemory::Maybe, RetrievalMode::Catalog)
        );
        assert_eq!(d.budget_tokens, 300);
    }

    #[test]
    fn a_new_session_picks_up() {
        let d = decide(&RuleInput {
            message: "where were we?",
            message_count: 0,
            now: Utc::now(),
            ..Default::default()
        });
        assert_eq!(d.need_memory, NeedMemory::Yes);
        assert_eq!(d.retrieval_mode, RetrievalMode::Catalog);
    }
    #[test]
    fn questions_about_people_in_the_users_life_need_memory() {
        for text in [
            "When did Caroline go to the LGBTQ support group?",
            "What is Melanie's favourite book?",
            "What career path has Caroline decided to pursue?",
            // A sentence-initial "What has" must not hide "has Melanie".
            "What has Melanie painted?",
            "Where has Melanie camped?",
            "What is Caroline excited about in the adoption process?",
            "Which song motivates Caroline to be courageous?",
            "What is something that Andrew really misses while working in the city?",
            "Which of Deborah`s family and friends have passed away?",
            "How did the extra funding help the school shown in the photo shared by John?",
            "When is Andrew going to go hiking with Audrey?",
            "What was the necklace Calvin received meant to remind him of?",
            "Did Priya sign off on the deck?",
            // "typically" about someone named is still about them.
            "How long does Audrey typically walk her dogs for?",
            "What was the reason Audrey couldn't walk her dogs for a period of time?",
            "Why Audrey couldn’t walk her dogs that week?",
            // After a verb or a person's thing, as an object.
            "Which podcasts have been helping Priya fall asleep?",
            "What was the note that Tomas wrote Elena about?",
            "What toys from the childhood of Marco does he still keep?",
            "What did David mention about the launch?",
        ] {
            let d = decide_text(text);
            assert_eq!(d.need_memory, NeedMemory::Yes, "{text}");
            assert!(d.signals.contains(&"person".to_string()), "{text}: {:?}", d.signals);
        }
        for text in [
            "What was discussed in the LGBTQ+ counseling workshop?",
            "What did the posters at the poetry reading say?",
            "What did the charity race raise awareness for?",
            "Who was at the offsite last spring?",
        ] {
            let d = decide_text(text);
            assert_eq!(d.need_memory, NeedMemory::Yes, "{text}: {:?}", d.signals);
        }
        for text in [
            "What was Twitter's previous logo?",
            "How do Stripe webhooks work?",
            "Is Tailwind better than Bootstrap?",
            "What is the capital of France?",
            "When did Apple release the first iPhone?",
            "How does Kubernetes schedule pods?",
            "Do restaurants generally do better with Toast or Square as a POS?",
            "What was discussed at the Yalta conference in 1945?",
        ] {
            assert_eq!(decide_text(text).need_memory, NeedMemory::No, "{text}");
        }
    }

    fn between(text: &str) -> (Option<String>, Option<String>) {
        match decide_text(text).time_range {
            TimeRange::Between { start, end } => (
                start.map(|t| t.format("%Y-%m-%d").to_string()),
                end.map(|t| t.format("%Y-%m-%d").to_string()),
            ),
            other => panic!("{text}: {other:?}"),
        }
    }

    fn span(start: &str, end: &str) -> (Option<String>, Option<String>) {
        (Some(start.to_string()), Some(end.to_string()))
    }

    #[test]
    fn questions_gathering_many_things_get_the_full_review_budget() {
        for text in [
            "What activities has Melanie done with her family?",
            "Which cities did Dave travel to in 2023?",
            "How many times has Melanie gone to the beach?",
            "What LGBTQ+ events has Caroline participated in?",
            "What subject have Caroline and Melanie both painted?",
            // A portrait of someone: all of their history.
            "Would Caroline pursue writing as a career option?",
            "What might John's financial status be?",
            "What attributes describe John?",
            "What does Calvin do to relax?",
            "What kind of music does Dave listen to?",
            "What are the names of Audrey's dogs?",
        ] {
            let d = decide_text(text);
            assert_eq!(
                (d.need_memory, d.budget_tokens),
                (NeedMemory::Yes, 2000),
                "{text}: {:?}",
                d.signals
            );
        }
        for text in [
            "What is Melanie's favourite book?",
            "When did Caroline go to the support group?",
            "Is Deborah married?",
        ] {
            assert_eq!(decide_text(text).budget_tokens, 1500, "{text}");
        }
    }

    #[test]
    fn named_days_months_and_years_keep_their_year() {
        // "now" is 2026-11-22 in these tests. A named date spans from a week before it to a
        // month after it: what happened then is mostly told afterwards.
        assert_eq!(
            between("What painting did Melanie show to Caroline on October 13, 2023?"),
            span("2023-10-06", "2023-11-14")
        );
        assert_eq!(
            between("What was Calvin excited to do after getting his car fixed on 7 July, 2023?"),
            span("2023-06-30", "2023-08-08")
        );
        assert_eq!(
            between("what did we agree on 3 March"),
            span("2026-02-24", "2026-04-04")
        );
        // The latest such day not after today: December 5 is last year's.
        assert_eq!(
            between("what did we agree on Dec 5th?"),
            span("2025-11-28", "2026-01-06")
        );
        assert_eq!(
            between("What is Jolene currently doing in June 2023?"),
            span("2023-05-25", "2023-08-01")
        );
        assert_eq!(between("2024年5月我们定的预算是多少"), span("2024-04-24", "2024-07-02"));
        assert_eq!(between("2025年3月8日开会说了什么"), span("2025-03-01", "2025-04-09"));
        assert_eq!(between("what did we ship in 2025?"), span("2024-12-25", "2026-02-01"));
        assert_eq!(
            between("changes to the plan on 2026-02-14"),
            span("2026-02-07", "2026-03-18")
        );
        // Bounds: as of / before keep the past, since / after the rest.
        assert_eq!(
            between("How long has it been since Andrew adopted his first pet, as of November 2023?"),
            (None, Some("2023-12-01".to_string()))
        );
        assert_eq!(
            between("what have we decided since March 2026?"),
            (Some("2026-03-01".to_string()), None)
        );
        assert_eq!(
            between("2025年以来我们签了哪些合同"),
            (Some("2025-01-01".to_string()), None)
        );
        // A month without a year is the latest one that has begun.
        assert_eq!(
            between("What did we learn from the warehouse overload in October?"),
            span("2026-09-24", "2026-12-02")
        );
        assert_eq!(between("12月份的复盘结论是什么"), span("2025-11-24", "2026-02-01"));
        // Words that only look like months are not dates.
        assert_eq!(decide_text("what did marketing 12 say").time_range, TimeRange::All);
    }
}
