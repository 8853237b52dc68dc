//! Phrase classes: the compiled patterns the rules read a message with (small talk, history
//! references, project state, personal advice, general knowledge, tasks, pointers at the
//! user's world, overview and detail wording, memory types), and the helpers that read a
//! message's instruction and clauses with them.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use thinkus_common::model::MemoryType;
use thinkus_common::text::{pattern, pattern_set};

/// Messages made only of greetings, thanks, acknowledgements and goodbyes, in any number.
pub(super) static SMALL_TALK: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^[\s\W_]*((你好|您好|嗨|哈喽|早上好|早安|中午好|下午好|晚上好|晚安|谢谢你?|多谢|感谢|辛苦了?|好的|好滴|好嘞|好吧|好|嗯+|哦+|噢|喔|收到|明白了?|了解了?|懂了|知道了|没问题|行吧?|可以|妥|哈+|呵呵|嘿嘿|太棒了|棒|赞|牛|周末愉快|节日快乐|新年快乐|明天见|回头见|再见|拜拜|先这样吧?|那就先这样吧?|明天继续|下次聊|ok|okay|k|kk|thanks( a lot| so much)?|thank you( so much)?|thx|ty|cool|great|nice|awesome|perfect|amazing|hi|hello|hey( there)?|yo|good (morning|night|evening|afternoon)|morning|night|bye|goodbye|see (you|ya)|talk (to you )?(tomorrow|later|soon)|got it|sounds good|lol|lmao|haha+|hehe|happy (friday|monday|weekend|holidays?|new year)|have a (good|nice|great) (day|weekend|one)|that'?s (super |very |really )?(helpful|great|useful)|you'?re (the best|awesome)|much appreciated|no worries|all good|will do|noted|cheers)[\s\W_]*)+$",
    )
});

/// Chit-chat about the assistant or the mood, which needs no memory.
pub(super) static SOCIAL: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(你是谁|你叫什么|你今天(忙不忙|怎么样|好吗)|最近怎么样|在吗|who are you|what'?s your name|how'?s it going|how are you|what'?s up|are you there)|哈哈|这个梗|that'?s (all|it) for (today|now)|先到这|今天就到这|心情不错|太好笑",
    )
});

/// References to shared history: a time word tied to a speaker or a verb of discussion, a
/// remembered thing, an earlier statement.
pub(super) static HISTORY: LazyLock<RegexSet> = LazyLock::new(|| {
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
pub(super) static REMINISCE: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"(?i)(\bremember when\b|\bback in the day\b|还记得.{0,10}(那时|那会|年代)|当年)"));

/// Phrases that mark what follows as a detour, so a history phrase before it is a figure of
/// speech.
pub(super) static ASIDE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(不用管了|不管了|换个问题|问个别的|随便问问|just curious|unrelated|random question|anyway|btw|by the way|never mind|quick one)",
    )
});

/// Questions about the project's decisions, constraints or status; the last two patterns
/// catch status questions without a pronoun ("合同签了吗", "is the redesign done yet?").
pub(super) static PROJECT_STATE: LazyLock<RegexSet> = LazyLock::new(|| {
    pattern_set(&[
        r"我们(的|这个)?(项目|产品|公司|团队)?(的)?(预算|技术栈|架构|定价|价格|截止|上线|进度|计划|路线图|目标|方案|设计|风格|品牌|需求|决定|决策|里程碑|排期|kpi|KPI|数据|指标|合同|供应商|团队|招聘|用户|客户|目标用户)|(项目|产品)(进度|状态|现在|目前)|现在(做|进行|推进)到哪|(推进|进行|跟进|谈)到哪(一步|了)|进展(如何|怎么样)|进度(怎么样|如何)|怎么样了|定下来(没|了吗)|定了(吗|没)|确定了吗|改好了?没|写好没|处理完了?(吗|没)|还有(哪些|什么)(事|待办)?没|有哪些待办|完成了哪些|对过的|方案是什么|预算(是多少|还剩|够不够)|超预算|什么时候上线|最后(选|定|用|是|怎么|拍)|(定|选|砍|签)(下来)?的(事|方案|东西|那)|(选|定)(在|了)哪",
        r"(?i)\b(what('s| is| was| are| were) (our|the current|the agreed|the final)|status of|what'?s the status|how far (along|are we)|where (are|do) we stand|our (current )?(budget|stack|pricing|roadmap|deadline|timeline|plan|metrics|runway|burn|mrr|kpis?|goals?|positioning|hiring plan|vendor|contract|tech debt|backlog|cap|infra)|did we (decide|settle|agree|finalize|sign|ship|launch|hire)|have we (decided|settled|agreed|finalized|shipped|launched)|which (vendor|option|plan|stack|framework|tool)s? did we|update on|still (open|pending)|what'?s (still )?(pending|open)|(is|has) the .* (resolved|fixed|done|shipped|signed)|how'?s the .* (tracking|going)|how did (it|the .*) go|what got done|what went wrong with|takeaways from|came out of|keep popping up|recurring|walk me through|the gist|feedback from|runway|burn rate|where are we (on|with)|any (news|progress|word) on)\b|\b(hr|cfo|cto|ceo|cmo|coo|designer|lawyer|pm)'s\b",
        r"(风险|待办|问题)清单|过一遍|结论(是|呢)|(?i)\b(conclusion|outcome|action items|takeaways?) (from|of)\b",
        r"(完|好|出来|下来|定|上线|发布|发出去|签|批|审|到位|落地|搞定|落实|跑通|通|修好|修复|谈妥|交付|开始|回复|付|到)(了)?(吗|没|没有|么)[?？]?\s*$|(上限|预算|截止日期|排期|报价|账期|薪资|定价)(是|定|拍|定的|拍的)?(了)?(多少|几号|哪天)|(还)?(作数|算数|有效|生效)(吗|么)|(还)?(能|赶得上|来得及)(按时|如期)",
        r"(?i)\b(done|finished|signed|shipped|live|ready|approved|merged|fixed|resolved|sent|published|deployed|closed|wrapped up|sorted) yet\b|^(is|are|has|have|did) (the|that|this) .*\b(yet|already|still (on|happening|a thing|valid))\b|\b(still on track|on schedule|behind schedule)\b|^(hey,? |so,? |btw,? )?(did|has|have) the \w+|\bever (send|sign|get|reply|respond|come|pay)|\b(go|come) through\b|keeps? (coming|popping|showing|cropping) up|keeps? (happening|failing|breaking)|\bthe (hard |soft |monthly |annual )?(budget|cap|deadline|launch date|price point|salary band|headcount)\b",
    ])
});

/// Personalised advice and the user's preferences.
pub(super) static PERSONAL: LazyLock<RegexSet> = LazyLock::new(|| {
    pattern_set(&[
        r"适合我|根据我的|按我的|我的(偏好|习惯|风格|口味|情况|需求|预算|团队|公司|客户|产品)|我喜欢的|我不喜欢的|我习惯|给我推荐|帮我选|我该(选|用|怎么)|你觉得我|以我|对我(来说)?(最|更)|我(们)?(应该|该不该)|我(的|们的)风格|按我们定的|用我们的|我们的(目标用户|用户|客户|调性|品牌)|按品牌规范|(品牌|设计)规范",
        r"(?i)\bour (target )?(audience|users|customers|persona)\b",
        r"(?i)\b(for me|fits? (me|us|how we)|suits? (me|us)|my (preference|style|taste|situation|team|company|budget|customers|product|startup|goals?)|based on what you know|knowing me|how i like|the way i like|what i usually|should i|should we|would you recommend for (me|us)|in my case|for our (team|company|startup|product|case)|our (style|tone|brand|voice|customers|users)|keep that in mind|i should|keep in mind for)\b",
    ])
});

/// General knowledge, matched clause by clause (the English pattern is anchored at a
/// clause's start).
pub(super) static GENERAL: LazyLock<RegexSet> = LazyLock::new(|| {
    pattern_set(&[
        r"什么是|什么叫|是什么意思|啥意思|是什么原理|原理|的区别|有什么区别|有啥区别|有什么不同|哪个(更|比较)好|怎么(写|用|实现|配置|设置|安装|计算|理解|计税)|如何(写|用|实现|配置|安装|计算|理解)|为什么(会|要)|解释(一下)?|讲讲|举个例子|定义|概念|英文(怎么|是)|怎么说|全称|一般(在|怎么|包含|是|要|需要)|通常|行业(平均|惯例|标准)|是多少|多少倍|等于多少|有哪几种|有效期多久|最长|现在还流行|有什么用意|有什么要求|法律规定|法律上|怎么规定|有什么影响|一般有|合法吗|是不是太",
        r"(?i)^(what is|what's|what are|what does|what was|define|explain|how does|how do (i|you)|how is|how to|how many|how much|why (is|does|do|did)|difference between|compare|is it (true|legal|worth)|is \w+ better|who (is|was|invented|founded)|when (was|did)|worst case|in the old days|in older versions)\b|\b(vs\.?|versus|difference|typically|typical|in general|general tips|generic|rule of thumb|industry (standard|average|benchmark)|like i'?m (five|5))\b",
    ])
});

/// New self-contained tasks; their content follows a colon or a quote.
pub(super) static TASK: LazyLock<RegexSet> = LazyLock::new(|| {
    pattern_set(&[
        r"翻译|翻成|润色|改写|校对|语病|纠正语法|帮我把(这|下面|以下)|下面这段|以下(内容|文字|代码|这段)|这段(话|文字|代码|英文|SQL)|计算一下|算一下|写(一|个|一个|一首)(正则|函数|脚本|sql|SQL|查询|公式|正则表达式|bash|Python|小诗|诗)|写个|生成一个|起\d*个名字|转成|转换成|格式化|统一成|模板",
        r"(?i)^(translate|proofread|rephrase|rewrite|fix the grammar|convert|format|calculate|compute|write|draft|generate|summarize|turn this|give me \d+|pls|please)\b|\b(translate|template|snippet|haiku|limerick|regex|script)\b",
    ])
});

/// Anything pointing at the user's own world.
pub(super) static ANCHOR: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(我们|咱们|咱|我的|我(在|想|要|打算|觉得|准备|正在|上次|之前|说|提|们)|你(之前|上次|当时|帮我)|(?i:\b(we|our|ours|my|we're|we've)\b)|\bus\b)",
    )
});

/// Talk about the outside world: news, an article, hearsay.
pub(super) static EXTERNAL: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(看到一篇|看到一个|听说|新闻|行业趋势|据说|\bi (read|saw|heard)\b|\bnews\b|\barticle\b|\bblog post\b|\bapparently\b)",
    )
});

/// Continuations and decision talk that a catalog look may help with.
pub(super) static FOLLOWUP: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^(那|和|还有|and\b|what about|how about)|呢[？?]?$|下一步|继续|展开|再(改|来|想)|换个|建议|要不要|该不该|纠结|这个(方案|bug|问题|设计|版本)|这块|那块|\b(next steps?|continue|keep going|expand|alternatives|ideas|thoughts|should (the|we|i)|good time to|let'?s|revisit|recheck|tighten|prioriti[sz]e|try)\b",
    )
});

/// Words that point at the team's own people, work and periods without a pronoun.
pub(super) static HINT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(那个|那件|那次|那份|那几|那版|这周|上周|本周|这个月|上个月|本月|最近(几天|一个月|一周)|(CEO|CTO|CFO|CMO|COO|HR|PM|设计师|律师|法务|财务|运营|产品经理|猎头|投资人|候选人|销售|客服)(之前|上次|说|提|提醒|给|评|改|对|这边|那边)|这边|那边|项目|到目前为止|目前为止|(客户|用户)(反馈|投诉|评价)|供应商|账期|工单|复盘|评审|发版|上线|路线图|否了|(?i:roadmap|\bthe (cfo|cto|ceo|cmo|designer|lawyer|pm|team|investors?|candidates?|pilot|retro|deploy|release|review|launch|campaign|interviews?)\b|\b(this|last|past) (week|month|quarter)\b|\bfrom (monday|tuesday|wednesday|thursday|friday)\b|\bproposal\b|\brisks?\b|\bretro\b|\brejected\b|\bside\b|\bpending\b|\bstill\b|\bso far\b))",
    )
});

/// Overview questions: lists, progress, patterns, "where were we".
pub(super) static OVERVIEW: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(哪些|哪几|列一下|列出|列个|清单|汇总|概览|梳理|规律|共性|反复|老出|待办|进度|怎么样了|推进到|到哪|聊到哪|都(讨论|聊|定|做)了(什么|啥|哪些)|讨论过(什么|哪些)|聊过(什么|哪些)|有什么(没|还)|还有(哪些|什么)没|回顾一下|复盘|总结(过|一下)|做什么的|(what|which) have we (discussed|decided|covered|talked about|agreed|tried)|what have we|\bwhich \w+ have we|list (all|the|every|our)|\blist\b|overview|summary of|summari[sz]e everything|recap|catch me up|(still|what'?s) (open|pending)|open (items|questions|issues|risks)|remind me what|everything we|all (the|our) (decisions|notes|action items|tasks|risks)|patterns?\b|recurring|keep popping up|what got done|\btracking\b|so far|where were we|what do you know about|walk me through the .* list|what feedback|have we written up)",
    )
});

/// Asks for one specific thing or its reasons, which overrides an overview word.
pub(super) static SPECIFIC: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"(?i)(为什么|原因|具体|细节|\bwhy\b|\bexactly\b|\bin detail\b)"));

/// Decision support, which needs the details of what is known.
pub(super) static DECISION_SUPPORT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(要不要|该不该|需不需要|怎么办|怎么(定|解决|改|选)|该怎么|如何(定|选|改)|比较(好|合理)|纠结|值不值|还需要(准备)?|帮我(写|准备)|\bshould (we|i|the)\b|\bdo we need\b|\bthoughts\b|\bgood time to\b|\bhow should\b|\bworth it\b|\bany ideas\b|\brecheck\b|\bwhat should (i|we) do\b|\bhelp me write\b|\bprep\b|\bwhat should the\b|\brevisit\b)",
    )
});

pub(super) static FULL_REVIEW: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(全面回顾|完整回顾|所有的?(决定|讨论|记录|信息)|全部(决定|讨论|记录|历史)|从头到尾|everything we('ve)? (discussed|decided|did|agreed)|full (review|recap|history)|all of our (decisions|history|discussions)|the whole history)",
    )
});

/// A new session asking to pick up where it stopped.
pub(super) static PICKUP: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(继续|接着|我们到哪了|进行到哪|聊到哪|从哪开始|where were we|let'?s continue|continue|pick (it )?up|carry on|resume)",
    )
});

pub(super) static TYPE_PATTERNS: LazyLock<Vec<(MemoryType, Regex)>> = LazyLock::new(|| {
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

pub(super) fn types_of(message: &str) -> Vec<MemoryType> {
    TYPE_PATTERNS
        .iter()
        .filter(|(_, pattern)| pattern.is_match(message))
        .map(|(t, _)| *t)
        .collect()
}

/// The part of a message the cues are read from: for a task, what comes before its content
/// (a colon or a quote), so words inside the text to translate or polish are not cues.
pub(super) fn instruction(message: &str, task: bool) -> &str {
    if !task {
        return message;
    }
    message.split([':', '：', '"', '“', '「']).next().unwrap_or(message)
}

/// Whether any clause is a general-knowledge question; "ok, what is churn?" starts its
/// question after a comma.
pub(super) fn is_general(message: &str) -> bool {
    GENERAL.is_match(message)
        || message
            .split([':', '：', ';', '；', ',', '，', '.', '。', '?', '？', '!', '！'])
            .map(str::trim)
            .any(|clause| !clause.is_empty() && GENERAL.is_match(clause))
}

/// A question about something of the user's own ("what tagline did we land on?", "我们的客单价是多少"),
/// which asks for specific content.
pub(super) fn own_question(head: &str) -> bool {
    static QUESTION: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)([?？]\s*$|吗|呢|多少|哪个|什么|^(what|which|how|when|where|who|why|is|are|do|does|did|was|were|can)\b)",
        )
    });
    (ANCHOR.is_match(head) || HINT.is_match(head)) && QUESTION.is_match(head)
}
