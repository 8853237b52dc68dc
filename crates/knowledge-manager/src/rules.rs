//! The built-in rules of the knowledge manager's tasks, registered in the rule engine:
//! extraction (what in a conversation is worth remembering) and merging (one memory from
//! several). They answer in the JSON the LLM prompts ask for, so both engines share a parser.
//!
//! Extraction reads the user's messages clause by clause. A clause is classified by the first
//! pattern family that matches, in this order: corrections, constraints, decisions,
//! preferences, action items, risks, feedback, conclusions, iteration knowledge, facts.
//! Questions, hypotheticals and hedged talk are not memories. A short confirmation ("好，就这么
//! 定了", "sounds good, let's do that") turns the assistant's last proposal into a decision.

use std::sync::{Arc, LazyLock};

use regex::Regex;
use serde_json::{Value, json};
use thinkus_backends::llm::{LlmError, LlmTask, RuleEngine, RuleHandler};
use thinkus_common::model::{Language, MemoryType};
use thinkus_common::text::{detect_language, pattern, summarize_to};

use crate::subject;

/// Registers the knowledge manager's rules.
pub fn register(engine: &RuleEngine) {
    let extract: Arc<dyn RuleHandler> = Arc::new(|input: &Value| Ok(extract(input).to_string()));
    let merge: Arc<dyn RuleHandler> = Arc::new(|input: &Value| merge(input).map(|v| v.to_string()));
    engine.register(LlmTask::Extract, extract);
    engine.register(LlmTask::Merge, merge);
}

/// One pattern family.
struct Family {
    memory_type: MemoryType,
    importance: u8,
    patterns: Vec<Regex>,
}

static CORRECTION: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    vec![
        pattern(
            r"改成|改为|改到|调整为|调整到|更正|纠正一下|之前说错|说错了|不是.{0,12}而是|不是之前|已经不是|换成了?|推迟到|提前到|延期到",
        ),
        pattern(
            r"(?i)\b(actually|correction|i meant|changed? (it )?to|moved? (it )?to|pushed (it )?(back )?to|no longer|instead of|not .{1,20} anymore|update:|scratch that|wait,? no|i mixed (it|them) up|i got (it|that) wrong)\b",
        ),
    ]
});

static FAMILIES: LazyLock<Vec<Family>> = LazyLock::new(|| {
    vec![
        // Explicit markers of iteration knowledge come first: "踩过的坑：回调必须返回SUCCESS" is
        // a learning even though it says 必须; "以后都这么办" makes a routine a pattern.
        Family {
            memory_type: MemoryType::Learning,
            importance: 3,
            patterns: vec![
                pattern(r"教训|学到了?[：:]|踩过的坑|踩(了|过)?(个|一个)?坑|经验是|吸取"),
                pattern(
                    r"(?i)(\blessons? learned\b|\bthe lesson\b|^lesson\b|\blessons? from\b|\bwe('ve)? learned\b|\blearned the hard way\b|\bthe fix was\b)",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::Pattern,
            importance: 3,
            patterns: vec![
                pattern(
                    r"(以后|今后)(都|也)?(这么|这样)(办|做|来)|固定下来|形成(规范|流程|惯例)|成(了)?惯例|最佳实践|标准做法|模板化|保持(这个)?(习惯|做法)|(习惯|做法|节奏)(要|得)?(保持|坚持)|(已经)?成(了)?(规矩|惯例|习惯)",
                ),
                pattern(
                    r"(?i)\b(best practice|standard (process|practice|procedure)|as a rule|make it a habit|playbook|keep (that|this|it|doing that|doing this) going|keep doing (that|this|it)|let'?s keep (that|this|doing)|it'?s (become )?(a|our) (routine|ritual|habit)|that'?s (our|the) (rule|standard|process)( now)?|let'?s make (that|this|it) (a )?(standard|rule|habit)|whenever we)\b",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::Feedback,
            importance: 3,
            patterns: vec![
                pattern(
                    r"(?i)\b(exactly what i (needed|wanted)|spot on|keep it up|you (did|made|wrote) .{0,30}(great|good|helpful|perfect|useful|exactly)|(was|were|has been|have been) (spot on|super helpful|really helpful|very helpful))\b",
                ),
                // A judgement of a piece of work: "the wireframes were too cluttered".
                pattern(
                    r"(?i)\b(copy|draft|deck|design|wireframes?|mockups?|report|email|summary|post|slides|analysis|docs?|writing|tone|page|logo|proposal|script|outline|plan)s? (you (did|made|wrote|sent|put together) )?(felt|feels?|looks?|looked|reads?|sounds?|sounded|came across as|was|were|is|are) (too |a bit |kind of |really |very |way too |a little |so |pretty )?(generic|cluttered|bland|salesy|stiff|robotic|wordy|verbose|confusing|messy|boring|dense|busy|pushy|vague|dry|great|perfect|excellent|spot on|solid|clear|helpful)\b",
                ),
                pattern(
                    r"(我|我们)?(很|非常|挺|特别|不太|不)满意|(写|做|改|讲)得(很|太|非常|挺|有点|不太)(好|棒|清楚|清晰|啰嗦|乱|长|差|生硬|专业)|语气(太|有点|过于)|(太|有点|过于)(啰嗦|生硬|冗长)|你(之前|上次|刚才)?(给|写|做|发)的.{1,12}(很好|很棒|不错|太)",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::ActionItem,
            importance: 3,
            patterns: vec![
                pattern(r"记得|别忘了|不要忘了|提醒我"),
                pattern(r"(?i)\b(remember to|remind me|don'?t forget|make sure to)\b"),
            ],
        },
        Family {
            memory_type: MemoryType::Constraint,
            importance: 4,
            patterns: vec![
                pattern(
                    r"预算|经费|成本上限|花费不超过|不能超过|不超过|(最多|至少)[^，,。；;]{0,6}(\d|[一二两三四五六七八九十百千万几])|上限|下限|账期|(月薪|年薪|薪资|工资|单价|报价|时薪)\s*\d|必须|务必|一定要|截止|期限|之前(完成|上线|交付|发布)|(上线|交付|发布)(时间|日期)|合规|法规|要求(是|必须)|需要支持|只能|不能用|控制在.{1,12}以内|(\d|万|千|百)[A-Za-z]*以内",
                ),
                pattern(
                    r"(?i)\b(budget|deadline|due (by|on|date)|no later than|at most|at least|must|has to|have to|required|requirement|cap(ped)? at|limit(ed)? to|cannot exceed|can't exceed|not exceed|only use|compliance|gdpr|must support|launch (by|date)|launch on (the )?(\d|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|mon|tue|wed|thu|fri|sat|sun)|ship (by|before)|within \$?\d|no exceptions|(hiring|spending|budget) freeze|freeze until|sign-?off (from|by)|net-\d+|(can'?t|cannot|can not|not allowed to|never) (store|stretch|go over|exceed|spend|hire|collect|share|keep|use|ship|sell|offer)|(no|not) more than)\b",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::ProjectDecision,
            importance: 4,
            patterns: vec![
                pattern(
                    r"决定|定了|确定(用|采用|了|为)|就用|就选|选择了|选定|采用|拍板|敲定|最终(方案|选)|我们用|统一用|改用|选用|定为|定成|用(.{1,15})(做|作为|来做)|(最后|最终)(选|定|用)了?|选了|外包给|交给.{1,10}(做|负责)|(定价|售价|标价)(就|定|为|是|按)|\d+(\.\d+)?\s*折|就按.{1,15}(来|算|执行|定)|统一(开|做|走|发|写|使用)|换成|改用",
                ),
                pattern(
                    r"(?i)(\bwe('ll| will) (go with|use|build|launch|switch)|\blet'?s (go with|use|build|pick|choose|do|stick with|switch)|\bwe (decided|chose|picked|agreed to use|are going with|'re going with|settled on|went with)|\bdecision\b|\bwe'?re (using|switching to)|\bgoing forward,? we|\bfinal(ized)? (choice|call|decision)|\bwe('ll| will) stick with|\bwe'?re going with|\bgoing with\b|^(ok(ay)?,?\s+)?[A-Za-z0-9.\-]+( [A-Za-z0-9.\-]+)? it is\b|\bchange of plans?\b|(^|\bwe |\bi )(decided|chose) (to|on)\b|^going forward\b|\b(switch(ing|ed)?|mov(e|ed|ing)|migrat(e|ed|ing)) (off|from|away from) .{1,30} to\b|\bswitching .{1,30} to\b|\bpric(e|ed|ing) .{0,20}\b(at|is|to) \$?\d|\b(tier|plan) (is|at|will be) \$?\d|\b(refund|trial|return) (window|period|policy) is\b)",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::UserPreference,
            importance: 4,
            patterns: vec![
                pattern(
                    r"我(比较|更|很|挺|最|特别|一直)?(喜欢|偏好|倾向|偏爱|爱用|习惯)|我不(太)?喜欢|我讨厌|我受不了|不要(太|用|再|给我)?|别(用|再|太|给我)|希望(你|你们)?(以后|每次|都|能)|以后(都|请|每次)|请(不要|别|尽量|一直|总是|每次)|越.{1,6}越好|(风格|语气|格式|颜色|配色)(要|偏|以)|我习惯|(跟|给|向)我(汇报|报告|发|说)|发我就行|(直接|先)说结论|(报告|周报|方案|文档|回复|回答|数据|部分|给我的).{0,8}请(用|以|附上|加上|带上|标注|注明)",
                ),
                pattern(
                    r"(?i)\b(i (really |much |strongly )?(prefer|like|love|enjoy|want|hate|dislike|can't stand)|i don'?t (like|want|care for)|i'?d rather|please (always|never|don'?t|avoid|keep|use)|don'?t (ever )?(use|send|give me|make)|never (use|send)|always (use|include|send|write)|my preference|i'm not a fan of|i favou?r|keep it (short|simple|brief|concise)|i'?m used to|stop (using|sending|suggesting)|don'?t bother|(use|write|spell) .{1,30} in (all|every) (our|my|of)|send me .{1,40} every|in anything you (write|send)|^keep (the|our|my|all|every|your) .{0,20}(voice|tone|style|design|copy|reports?|emails?|updates?|answers?))\b",
                ),
            ],
        },
        // Weaker decision wording, after preferences ("我喜欢用Figma" is a preference):
        // "收款用PayPal", "we'll take payments through Stripe".
        Family {
            memory_type: MemoryType::ProjectDecision,
            importance: 4,
            patterns: vec![
                pattern(
                    r"(就|统一|还是)用[A-Za-z]|(收款|支付|部署|托管|数据库|前端|后端|框架|组件库|官网|服务器|存储|监控|日志|客服|邮件|域名|埋点|CDN|CI)\p{Han}{0,2}用[A-Za-z]",
                ),
                pattern(
                    r"(?i)\bwe('ll| will)? (take|accept|run|host|deploy|handle) .{1,30} (through|on|via|with) [A-Z][A-Za-z0-9.\-]+",
                ),
                pattern(
                    r"^(?i:and |then |also |plus )?(?i:use|go with|switch to|stick with|pick) [A-Z][A-Za-z0-9.\-]+",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::ActionItem,
            importance: 3,
            patterns: vec![
                pattern(
                    r"下一步|待办|记得|别忘了|跟进|安排(一下)?|负责|提醒我|需要(你|你们)?(去|先)?(做|完成|准备|联系|整理|写|更新|提交)|(今天|明天|下周|本周|这周|周[一二三四五六日天]|月底)(之前|前)?(就|先)?(要|把|完成|交|发|去|签|拉|开|约|见|做|出|定|打)|我们得|得尽快|尽快把|todo",
                ),
                pattern(
                    r"(?i)\b(next step|action item|to-?do|follow up|follow-up|remind me|remember to|(someone|somebody|we) (needs?|has|have) to|needs to (be )?(done|audited|fixed|updated|renewed)|don'?t forget|make sure (to|you)|we need to|i need you to|please (prepare|draft|send|schedule|set up|reach out|update|write)|by (monday|tuesday|wednesday|thursday|friday|eod|end of (the )?(day|week|month))|i'?ll (send|prepare|call|email|review|check)|(i|we)'?ll \w+ .{0,40}\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|next week))\b",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::Risk,
            importance: 4,
            patterns: vec![
                pattern(
                    r"风险|担心|隐患|可能会(导致|影响|出问题|延期|超支|直接)|停摆|怕(会|的是)|万一|瓶颈|有问题的是|不确定性|撑不过|扛不住|(可能|恐怕)(会)?(受影响|撑不|扛不|来不及|赶不上|跟不上|没人|不够|亏|崩|挂|被)",
                ),
                pattern(
                    r"(?i)\b(risk|risky|concern(ed)?|worr(y|ied)|could (break|fail|delay|hurt|kill|eat|sink)|might (fail|break|slip|not|eat|kill|sink|hurt|cost)|bottleneck|exposure|liabilit(y|ies)|danger|(a|some) (real |good |high |big )?chance (that )?|(could|would|might) be in trouble|can'?t deliver|won'?t (make it|be ready|deliver))\b",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::Feedback,
            importance: 3,
            patterns: vec![
                pattern(
                    r"(报告|文档|方案|文案|回答|回复|设计|稿子|这版|上一版|你写的|你做的).{0,10}(太长|太短|啰嗦|不错|很好|很棒|不行|不满意|有问题|太复杂|太简单|不够|很清楚|很清晰|满意)|写得(很|太|不)|做得(很|太|不)",
                ),
                pattern(
                    r"(?i)\b(too (long|short|verbose|wordy|formal|casual|technical)|great (job|work)|well done|nice work|not what i (wanted|asked for|expected)|this (is|was) (helpful|useless|confusing|perfect|exactly)|you (nailed|missed)|(the|your) (report|deck|draft|summary|answer|design) (is|was) (great|good|bad|too|confusing|perfect|excellent))\b",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::DiscussionConclusion,
            importance: 3,
            patterns: vec![
                pattern(
                    r"结论(是|很清楚|：|:)|(一致|都)(同意|认为)|我们同意|达成(一致|共识)|共识是|大家(都)?同意|讨论下来|总结(来说|一下)?[，,：:]",
                ),
                pattern(
                    r"(?i)\b(we agreed|we all agree|consensus|the conclusion|in conclusion|bottom line|the takeaway|we concluded|agreed that)\b",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::Pattern,
            importance: 3,
            patterns: vec![
                pattern(
                    r"(以后|每次|今后)(都|一律)?(先|要|统一)|固定下来|形成(规范|流程|惯例)|最佳实践|标准做法|模板化",
                ),
                pattern(
                    r"(?i)\b(best practice|from now on,? (we|always)|every time we|standard (process|practice|procedure)|as a rule|make it a habit|playbook)\b",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::Learning,
            importance: 3,
            patterns: vec![
                pattern(r"教训|经验是|学到|原来是|踩(了)?坑|吸取|下次(要|得|应该)"),
                pattern(r"(?i)\b(lesson|learned|learnt|the fix was|we found that|next time we should|takeaway)\b"),
            ],
        },
        Family {
            memory_type: MemoryType::Issue,
            importance: 3,
            patterns: vec![
                pattern(
                    r"(bug|Bug|BUG|故障|报错|崩溃|卡顿|问题出在|出了问题|挂了|宕机|漏洞|白屏|还没修|投诉|原因找到了|写错了|闪退|打不开|加载不出|超时|(响应|加载|打开|接口|页面|速度|系统|网站|后台)(很|特别|非常|太)?慢|不能用|用不了|的问题是|被.{1,6}刷了)",
                ),
                pattern(
                    r"(?i)\b(bug|outage|crash(es|ed)?|broken|the issue (is|was)|error (in|on)|regression|downtime|incident|breaks|broke|keeps? (failing|crashing)|tickets about|complain(ts|ing)? about|got abused|landing in spam|timing out|times out|timed out|(is|are|has been) (really |very |super )?slow|keeps? (timing out|failing|crashing|breaking)|(doesn'?t|won'?t|isn'?t) (work|load|working|loading)|stopped working)\b",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::Insight,
            importance: 3,
            patterns: vec![
                pattern(
                    r"发现|原来(用户|客户|大家|大部分|大多)|(用户|客户|大家)(最|更)(在意|关心|看重)|主要是因为|(打开|点击|转化|留存|复购|退款)率.{0,4}(最高|最低|更高|更低)|数据(显示|表明)|洞察|观察到|看起来(用户|客户)|大部分(用户|客户)|转化率|留存率|复购率",
                ),
                pattern(
                    r"(?i)\b(turns out|it turned out|i realized|we realized|i realised|we realised|most of (our|the) (users|customers|buyers|signups)|we noticed|noticed that|data shows|the data (shows|says)|insight|observed|most (users|customers)|conversion rate|conversion is|convert(s)? \d+(\.\d+)?x|retention|churn)\b",
                ),
            ],
        },
        Family {
            memory_type: MemoryType::Fact,
            importance: 3,
            patterns: vec![
                pattern(
                    r"我(是|在|住在|来自|负责)|我们(公司|团队|工作室)(是|有|在)|我的(公司|团队|职位|背景)|公司(有|叫|成立)|团队(有|一共)|我们的(产品|公司|主要用户|用户|客户|主要客户|目标用户|团队)(叫|是|主要是|大多是|都是)|(公司|我们)(去年|今年|上个月)?的?(营收|收入|流水|利润|估值)|我(之前|以前|曾经)在|我们(现在)?(是|有|一共)\s*\d+\s*个人",
                ),
                pattern(
                    r"(?i)\b(i am a|i'm a|i'm the|i work (at|for|in)|i live in|i'm based in|i'm from|our (company|team|startup|shop|store|app|business) (is|has|sells|makes)|our (core |main |target )?(users|customers|clients|audience) are|the company is called|we'?re incorporated|i used to (be|work)|i moved to|we are a|we're a|my (company|team|background|role) (is|has)|we have [\d,]+|we'?re based in|(our|the) (company|team|startup|office) is (based|located) in|\d+ (people|employees|staff))\b",
                ),
            ],
        },
    ]
});

static MONEY_OR_DATE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)([$￥€£]\s?\d|\d\s?(万|千|元|块|美元|k\b|m\b)|\d{1,2}(st|nd|rd|th)\b|\d{1,2}月|\d{1,2}[日号]|周[一二三四五六日天]|(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d|\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b)",
    )
});
static NEGATED_OLD_VALUE: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"(?i)^(而)?(不是|并不是|已经不是)|^(not|no longer)\b"));
static QUESTION: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)([?？]\s*$|^(what|how|why|when|where|which|who|should|could|would|can|do|does|did|is|are|will)\b|(吗|呢|么)[\s。！!]*$|^(请问|为什么|怎么|怎样|如何|哪个|哪些|是否|要不要|能不能|可不可以|是不是))",
    )
});
/// "What we learned: …", "How we fixed it: …" head a statement; they do not ask.
static HEADING: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"(?i)^(what|how|why|where|when)\b[^?？:：]{0,40}[:：]\s*\S[^?？]*$"));

/// Read in its contracted form ([`contracted`]): "Do not cc legal on these." opens as a question
/// would ("Do we…") but, as "Don't cc legal", tells what to do.
fn is_question(text: &str) -> bool {
    let text = contracted(text);
    QUESTION.is_match(&text) && !HEADING.is_match(&text)
}

/// Whether a clause asks to be told something: it ends as a question does (a question mark, or
/// a Chinese particle of asking: 吗, 呢, 么, 来着) and is not a request put as a question ("could
/// you always include the source?", "能不能顺便估一下人天？"), which states what the user wants.
/// Unlike [`is_question`], an imperative opening ("Do not share…") is no question here.
pub fn asks_to_be_told(text: &str) -> bool {
    static REQUEST: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)^\W*(could|can|would|will) you\b|^\W*please\b|^\W*(麻烦|请|帮我)|(你|您)[^，,。？?]{0,12}(能不能|可不可以|能否|可以)",
        )
    });
    let text = text.trim();
    thinkus_common::text::ends_as_question(text) && !REQUEST.is_match(text)
}

static HYPOTHETICAL: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(如果|假如|假设|要是|万一的话|倘若|\bif we\b|\bwhat if\b|\bsuppose\b|\bhypothetically\b|\bimagine\b|\bin theory\b)",
    )
});
static HEDGE: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(也许|可能吧|或许|考虑一下|想一想|再看看|还没想好|不一定|说不定|尚未|待确认|等.{0,8}(拍板|确认|决定)|\bmaybe\b|\bperhaps\b|\bnot sure\b|\bget back to you\b|\bafter i (talk|check|speak)\b|\bi think we might\b|\blet me think\b|\bthinking about\b|\bconsidering\b|\bmight\b)",
    )
});
static CONFIRMATION: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^\s*(好的?|可以|行|没问题|同意|就这么(办|定了?)|就按(你说的|这个)(来|办)?|定了|ok(ay)?|yep|yup|yeah|yes|sure|sounds good|agreed|let'?s do (it|that)|go (with|for) it|yes,? (let'?s|go)|perfect|deal|approved)[\s，,。.!！]*(就这么(办|定了?)|就按这个来|let'?s (do|go with) (that|it)|(please )?do (that|it)|go ahead)?[\s。.!！]*$",
    )
});

/// Whether a message only accepts what was proposed to it ("ok, do that", "行，就这么办").
pub fn is_confirmation(text: &str) -> bool {
    CONFIRMATION.is_match(text)
}

/// Whether a message accepts what was proposed to it: alone, or opening with an acceptance that
/// says so, whatever it says next ("yep do that. and cut relocation to 8k"); a bare "ok." before
/// another matter accepts nothing.
pub fn opens_with_confirmation(text: &str) -> bool {
    static SAYS_SO: LazyLock<Regex> = LazyLock::new(|| {
        pattern(
            r"(?i)(do (that|it)|go ahead|let'?s do|go (with|for) it|sounds good|agreed|deal|approved|就这么|就按|同意|定了)",
        )
    });
    let first = text
        .split_inclusive(['.', '。', '!', '！', ';', '；', '\n'])
        .next()
        .unwrap_or(text);
    is_confirmation(text) || (is_confirmation(first) && SAYS_SO.is_match(first))
}
static PROPOSAL: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(建议|提议|推荐|可以考虑|方案是|我的建议|不如|i(?:'d| would)? (suggest|recommend|propose)|my recommendation|we could|how about|i'd go with|the best option|\b(proposal|suggestion|recommendation)\s*:)",
    )
});
static FILLER: LazyLock<Regex> = LazyLock::new(|| {
    pattern(r"(?i)^(对了|另外|还有|然后|嗯|哦|那|所以|总之|btw|by the way|also|and|so|oh|ok|okay|well|anyway)[，,\s]+")
});
static PROJECT_HINT: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(这个项目|本项目|项目里|这次|这个(产品|网站|app|应用|平台)|首页|这版|this project|for this (app|site|product|project|launch)|the (landing|home) ?page|this release)",
    )
});

/// A clause that opens by asking for a piece of work now: "帮我写两句…", "给我整理一份…",
/// "你跟设计说下…", "write the invite for…", "draft me a…". The verb takes an amount, an
/// indefinite article or a piece of work for someone, so neither "你给我写的方案太泛了" (what
/// was written) nor "write the dates as ISO" (a rule of form) is a request.
static TASK_NOW: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^\W*(?:(?:那就|那|好的|好|行|ok|okay|嗯|and|also|then|so|now)[，,\s]*)?(?:(?:你|您)?(?:帮我|给我|替我|麻烦你|麻烦)?(?:写|起草|草拟|拟|做|整理|准备|出)(?:一|两|三|几|个|份|封|段|篇|条|句|版|张)|(?:你|您)?(?:跟|和|给)[^，,。\s]{1,8}(?:说|讲|发|回)(?:下|一下|声)|(?:please\s+|pls\s+|can you\s+|could you\s+)?(?:write|draft|prepare|put together|create|send)\s+(?:me\s+|him\s+|her\s+|them\s+|us\s+)?(?:(?:a|an|two|three|some|\d+)\b|the\s+\w+\s+(?:for|to)\b))",
    )
});

/// A mark of a rule for every later piece of work: "以后", "每次", "always", "from now on", or
/// a recurrence ("every Monday morning", "每周一").
static STANDING: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)(以后|今后|往后|从现在起|从今天起|每次|每回|每[天日周月年季]|每个(?:月|星期|礼拜)|一律|一直|总是|统一|都用|都要|都别|都不要|\balways\b|\bfrom now on\b|\bgoing forward\b|\bin (?:the )?future\b|\bwhenever\b|\bevery\s+\w+|\bnever\b|\bas a rule\b|\bby default\b)",
    )
});

/// Whether a clause asks for a piece of work now ([`TASK_NOW`]) without a mark of a rule for
/// every later one ([`STANDING`]).
pub fn asks_for_work_now(text: &str) -> bool {
    TASK_NOW.is_match(text) && !STANDING.is_match(text)
}

/// The speaker speaking of themself: "我" (not "我们"), "本人", "I", "me", "my".
static FIRST_PERSON: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"(?i)(我(?:[^们]|$)|本人|\b(?:i|i'm|i've|i'll|i'd|me|my|mine|myself)\b)"));

/// A clause that only points back at the one before it: "以后都这么办", "let's keep that
/// going", "别再换了". It belongs to that clause, even across a sentence end.
static ANAPHORIC: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?i)^((就|都|以后都)?按这个.{0,4}(来|办|做)|以后都(这么|这样)|这(个做法|个习惯|已经成|就是我们的)|这个.{0,4}(要|得)?(固定|保持)|(别|不要)再(换|改|动)了?|let'?s (keep|make) (that|this|it)|keep (that|this|it) going|keep doing (that|this|it)|that'?s (our|the) (rule|standard|process))",
    )
});

/// One clause being assembled: its text, whether it has a trigger of its own, and whether it
/// states a figure (a sum, a date).
struct Piece {
    text: String,
    triggered: bool,
    figure: bool,
}

impl Piece {
    /// Ends a sentence: what follows starts a statement of its own.
    fn closed(&self, period_too: bool) -> bool {
        let end = self.text.trim_end();
        end.ends_with(['。', '！', '？', '!', '?', '\n']) || (period_too && end.ends_with('.'))
    }

    fn memory_type(&self) -> Option<MemoryType> {
        classify(self.text.trim()).map(|f| f.memory_type)
    }
}

/// Splits a message into clauses that can each hold one memory ("预算5万，月底上线，用Stripe收
/// 款" holds three). Within a sentence, a clause joins the one before it when:
/// - it has no trigger of its own: a reason or detail ("我们决定用Next.js，因为团队熟悉React");
/// - the one before has none: it sets the scene ("要是核心开发离职，项目可能会停摆");
/// - both say the same kind of thing and not each its own figure ("我们公司在深圳，团队一共20
///   人" is one fact; "预算8万，20号之前上线" are two constraints).
///
/// A clause that only points back ("以后都这么办") joins the one before it in any case.
fn clauses(text: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let boundary = match c {
            '。' | '！' | '？' | '!' | '?' | '；' | ';' | '\n' | '，' | '、' => true,
            ',' => true,
            '.' => chars.get(i + 1).is_none_or(|n| n.is_whitespace()),
            _ => false,
        };
        current.push(c);
        if boundary {
            pieces.push(std::mem::take(&mut current));
        }
    }
    if !current.trim().is_empty() {
        pieces.push(current);
    }
    let mut out: Vec<Piece> = Vec::new();
    for piece in pieces {
        let trimmed = piece.trim();
        if trimmed.is_empty() {
            continue;
        }
        let bare = trimmed.trim_end_matches(['，', ',', '、', ';', '；', '。', '.', '!', '！']);
        let bare = FILLER.replace(bare.trim(), "");
        let triggered = classify(&bare).is_some() || CORRECTION.iter().any(|r| r.is_match(&bare));
        let is_question = is_question(trimmed.trim_end_matches(['，', ',', '、']));
        let figure = MONEY_OR_DATE.is_match(&bare);
        let joins = match out.last() {
            None => false,
            Some(_) if is_question => false,
            Some(last) if NEGATED_OLD_VALUE.is_match(FILLER.replace(last.text.trim(), "").as_ref()) => false,
            Some(_) if ANAPHORIC.is_match(&bare) => true,
            Some(last) if !triggered => !last.closed(false),
            Some(last) if !last.triggered => !last.closed(true),
            Some(last) => {
                let each_its_own_figure = last.figure && figure;
                !last.closed(true)
                    && !each_its_own_figure
                    && classify(&bare).map(|f| f.memory_type) == last.memory_type()
            }
        };
        match out.last_mut() {
            Some(last) if joins => {
                last.text.push_str(&piece);
                last.triggered |= triggered;
                last.figure |= figure;
            }
            _ => out.push(Piece {
                text: piece,
                triggered,
                figure,
            }),
        }
    }
    out.into_iter()
        .map(|c| {
            c.text
                .trim()
                .trim_end_matches(['，', ',', '、', ';', '；'])
                .trim()
                .to_string()
        })
        .filter(|c| !c.is_empty())
        .collect()
}

fn classify(clause: &str) -> Option<&'static Family> {
    let clause = contracted(clause);
    FAMILIES
        .iter()
        .find(|family| family.patterns.iter().any(|p| p.is_match(&clause)))
}

/// The English negations written out ("do not", "cannot") in the contracted form the families'
/// patterns are written in ("don't", "can't"): "Do not use tables" states what "Don't use
/// tables" does.
fn contracted(text: &str) -> std::borrow::Cow<'_, str> {
    static OUT: LazyLock<Regex> =
        LazyLock::new(|| pattern(r"(?i)\b(do|does|did|is|are|was|were|will|can|would|should|must|have|has)\s*not\b"));
    OUT.replace_all(text, |c: &regex::Captures<'_>| {
        let verb = &c[1];
        match verb.to_ascii_lowercase().as_str() {
            "will" => format!("{}on't", &verb[..1]),
            "can" => format!("{}an't", &verb[..1]),
            _ => format!("{verb}n't"),
        }
    })
}

fn is_user(role: &str) -> bool {
    matches!(role, "user" | "human" | "boss" | "customer")
}

/// One extracted candidate, in the LLM answer's JSON shape.
fn candidate(memory_type: MemoryType, content: &str, importance: u8, confidence: f64, role: &str) -> Value {
    let content = FILLER.replace(content.trim(), "").trim().to_string();
    let subject = subject::detect(&content);
    let project_specific = match memory_type {
        MemoryType::UserPreference | MemoryType::Feedback => PROJECT_HINT.is_match(&content),
        // A fact about the speaker ("我怀孕了", "I live in Leeds") belongs to no project; a fact
        // said in a project's conversation about anything else ("开业定在12月8日", "the lease is
        // 2.8万 a month") is the project's, for its every role.
        MemoryType::Fact => PROJECT_HINT.is_match(&content) || !FIRST_PERSON.is_match(&content),
        _ => true,
    };
    let mut tags: Vec<String> = Vec::new();
    if let Some(subject) = subject {
        tags.push(subject.to_string());
    }
    json!({
        "type": memory_type.as_str(),
        "content": content,
        "summary": summarize_to(&content, 50),
        "importance": importance,
        "tags": tags,
        "relevant_role": role,
        "project_specific": project_specific,
        "confidence": confidence,
    })
}

fn long_enough(clause: &str) -> bool {
    match detect_language(clause) {
        // Figures and names carry meaning in short Chinese clauses ("预算5万", "后端用NestJS"):
        // a run of Latin letters or digits counts as one.
        Language::Zh => {
            let han = clause.chars().filter(|c| thinkus_common::text::is_han(*c)).count();
            let figures = clause
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|run| !run.is_empty())
                .count();
            han + figures >= 4
        }
        // "Budget $50k", "use Stripe": two words carrying a figure or a name say enough.
        Language::En => {
            let words = clause.split_whitespace().count();
            words >= 3
                || (words == 2
                    && (clause.chars().any(|c| c.is_ascii_digit())
                        || clause
                            .split_whitespace()
                            .nth(1)
                            .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_uppercase()))))
        }
    }
}

/// One part of a conversation the extraction reads on its own.
#[derive(Debug, Clone)]
pub enum Segment {
    /// A short confirmation of the assistant's last proposal: the proposal, decided.
    Confirmed { message: usize, candidate: Value },
    /// One clause of a user's message and what the rules read in it.
    Clause {
        message: usize,
        text: String,
        reading: Reading,
    },
}

impl Segment {
    /// The rules' candidate for the segment, if any.
    pub fn rule_candidate(&self) -> Option<&Value> {
        match self {
            Segment::Confirmed { candidate, .. } => Some(candidate),
            Segment::Clause { reading, .. } => reading.candidate.as_ref(),
        }
    }

    /// The index of the message it comes from.
    pub fn message(&self) -> usize {
        match self {
            Segment::Confirmed { message, .. } | Segment::Clause { message, .. } => *message,
        }
    }
}

/// What the rules read in one clause: the family that matched, the marks of a statement that
/// is not (yet) a memory, and the rules' own candidate.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub family: Option<MemoryType>,
    pub question: bool,
    pub hypothetical: bool,
    /// The clause or its message hedges ("maybe", "还没想好").
    pub hedged: bool,
    /// A correction wording ("改成", "actually").
    pub correction: bool,
    /// A sum or a date.
    pub figure: bool,
    pub long_enough: bool,
    /// The clause asks for something to be told (a question it marks as one, not a request
    /// phrased as one): nothing in it is to be remembered.
    pub asks: bool,
    /// The clause asks for a piece of work now, with no mark of a standing rule ("帮我写两句…，
    /// 不要感叹号"): what it requires is that work's, not a preference to remember.
    pub task_now: bool,
    /// What the rules extract from the clause.
    pub candidate: Option<Value>,
}

fn read(clause: &str, role: &str, message_hedged: bool) -> Reading {
    let text = clause.trim();
    Reading {
        family: classify(text).map(|f| f.memory_type),
        question: is_question(text),
        asks: asks_to_be_told(text),
        task_now: asks_for_work_now(text),
        hypothetical: HYPOTHETICAL.is_match(text),
        hedged: message_hedged || HEDGE.is_match(text),
        correction: CORRECTION.iter().any(|r| r.is_match(text)),
        figure: MONEY_OR_DATE.is_match(text),
        long_enough: long_enough(text),
        candidate: classify_clause(text, role, message_hedged),
    }
}

fn messages_of(input: &Value) -> Vec<(String, String)> {
    input["messages"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|m| {
                    (
                        m["role"].as_str().unwrap_or("user").to_string(),
                        m["content"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The segments of a conversation (`input` as [`extract`] takes it), in order.
pub fn segments(input: &Value) -> Vec<Segment> {
    let role = input["role_id"].as_str().unwrap_or("");
    let mut out = Vec::new();
    let mut last_proposal: Option<String> = None;
    for (message, (author, content)) in messages_of(input).iter().enumerate() {
        if !is_user(author) {
            last_proposal = proposal_in(content);
            continue;
        }
        if CONFIRMATION.is_match(content) {
            if let Some(proposal) = last_proposal.take() {
                out.push(Segment::Confirmed {
                    message,
                    candidate: candidate(MemoryType::ProjectDecision, &proposal, 4, 0.85, role),
                });
            }
            continue;
        }
        // Hedging anywhere in a message ("…, not sure yet", "尚未确认，等老板拍板") makes its
        // decisions, constraints and corrections tentative.
        let hedged = HEDGE.is_match(content);
        for text in clauses(content) {
            let reading = read(&text, role, hedged);
            out.push(Segment::Clause { message, text, reading });
        }
    }
    out
}

/// The extraction rules: `input` is `{"messages": [{"role", "content"}], "role_id": ...}`.
pub fn extract(input: &Value) -> Value {
    Value::Array(
        segments(input)
            .iter()
            .filter_map(Segment::rule_candidate)
            .cloned()
            .collect(),
    )
}

/// A candidate of `memory_type` for `content`, as the rules write one (the content without
/// its filler, a summary, the subject as a tag, whether it is project-specific).
pub fn candidate_for(memory_type: MemoryType, content: &str, confidence: f64, role: &str) -> Value {
    candidate(memory_type, content, importance_of(memory_type), confidence, role)
}

/// The importance the rules give a type (its first family's).
pub fn importance_of(memory_type: MemoryType) -> u8 {
    FAMILIES
        .iter()
        .find(|f| f.memory_type == memory_type)
        .map_or(3, |f| f.importance)
}

/// The sentence of an assistant message that proposes something, if any.
fn proposal_in(text: &str) -> Option<String> {
    thinkus_common::text::sentences(text)
        .into_iter()
        .find(|s| PROPOSAL.is_match(s))
        .map(|s| {
            // "建议使用Stripe作为支付方案" reads as a decision once confirmed: drop the verb
            // of proposing so the memory states what was decided.
            static LEAD: LazyLock<Regex> = LazyLock::new(|| {
                pattern(r"(?i)^(我的建议是|我建议|建议(你们|我们)?|我?提议|推荐(你们|使用)?|可以考虑|不如|i(?:'d| would)? (suggest|recommend|propose)( that)?( we)?|my recommendation is( to)?|we could|how about|i'd go with|(proposal|suggestion|recommendation)\s*:)[，,:：\s]*")
            });
            LEAD.replace(s.trim(), "").trim().to_string()
        })
        .filter(|s| !s.is_empty())
}

fn classify_clause(clause: &str, role: &str, message_hedged: bool) -> Option<Value> {
    let text = clause.trim();
    if !long_enough(text) || is_question(text) {
        return None;
    }
    // Risks, learnings and patterns are conditional by nature ("要是核心开发离职，项目可能会停
    // 摆", "annual plans only sell if we show…"); anything else under an "if" is hypothetical.
    if HYPOTHETICAL.is_match(text)
        && classify(text).is_none_or(|f| {
            !matches!(
                f.memory_type,
                MemoryType::Risk | MemoryType::Learning | MemoryType::Pattern
            )
        })
    {
        return None;
    }
    let hedged = message_hedged || HEDGE.is_match(text);
    if CORRECTION.iter().any(|r| r.is_match(text)) {
        if hedged || NEGATED_OLD_VALUE.is_match(text) {
            // "The meeting might move to Thursday, not sure yet" changes nothing yet; "不是之前说
            // 的$500" names the old value, which the clause with the new one replaces.
            return None;
        }
        // A correction states a new value: it is a constraint, decision or preference
        // according to what it is about, and it matters.
        // (A match, not `unwrap_or`: its argument would be evaluated, and its early return
        // taken, even when a family matched.)
        let memory_type = match classify(text) {
            Some(family) => family.memory_type,
            None => match subject::detect(text) {
                Some("budget") | Some("deadline") => MemoryType::Constraint,
                Some(_) => MemoryType::ProjectDecision,
                None if MONEY_OR_DATE.is_match(text) => MemoryType::Constraint,
                None => return None,
            },
        };
        let memory_type = if matches!(memory_type, MemoryType::Risk | MemoryType::Feedback | MemoryType::Issue) {
            MemoryType::ProjectDecision
        } else {
            memory_type
        };
        return Some(candidate(memory_type, text, 5, 0.95, role));
    }
    let family = classify(text)?;
    if matches!(family.memory_type, MemoryType::UserPreference | MemoryType::Feedback) && asks_for_work_now(text) {
        // "帮我写两句年终感谢，40字以内，不要感叹号": the requirements of a piece of work asked
        // for now, not a rule for every later one.
        return None;
    }
    if hedged && matches!(family.memory_type, MemoryType::ProjectDecision | MemoryType::Constraint) {
        // "maybe we could use Stripe" is not a decision yet.
        return None;
    }
    let confidence = if hedged { 0.6 } else { 0.9 };
    Some(candidate(family.memory_type, text, family.importance, confidence, role))
}

/// The merge rule: `input` is `{"contents": [...]}`. Keeps every distinct statement, the most
/// complete first, and drops clauses another one already says.
pub fn merge(input: &Value) -> Result<Value, LlmError> {
    let contents: Vec<String> = input["contents"]
        .as_array()
        .map(|items| items.iter().filter_map(|v| v.as_str()).map(str::to_string).collect())
        .unwrap_or_default();
    if contents.is_empty() {
        return Err(LlmError::BadResponse("nothing to merge".into()));
    }
    let mut sorted = contents.clone();
    sorted.sort_by_key(|c| std::cmp::Reverse(c.chars().count()));
    let mut kept: Vec<String> = Vec::new();
    for content in sorted {
        let clause = content.trim().trim_end_matches(['。', '.', '！', '!']).to_string();
        let covered = kept
            .iter()
            .any(|k| k.contains(&clause) || thinkus_common::text::term_jaccard(k, &clause) >= 0.6);
        if !covered && !clause.is_empty() {
            kept.push(clause);
        }
    }
    let language = thinkus_common::text::detect_language_of(contents.iter().map(String::as_str));
    let merged = match language {
        Language::Zh => format!("{}。", kept.join("；")),
        Language::En => format!("{}.", kept.join("; ")),
    };
    Ok(json!({
        "mergedContent": merged,
        "mergedSummary": summarize_to(&kept[0], 50),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_asks_to_be_told_a_request_put_as_one_does_not() {
        for asks in [
            "rules q: how many hours can a driver actually do in a day in a van under 3.5 tonnes?",
            "春运一般从哪天开始来着",
            "上线日期定了吗",
            "what did Gary say about the quote？",
        ] {
            assert!(asks_to_be_told(asks), "{asks}");
        }
        for states in [
            "Could you always include the source link for any stat you use in copy?",
            "您给方案的时候能不能顺便估一下人天？",
            "Do not share the salary bands with the team.",
            "上线日期定在12月18日。",
            "We use Stripe for payments",
        ] {
            assert!(!asks_to_be_told(states), "{states}");
        }
    }

    #[test]
    fn a_short_yes_accepts_a_proposal() {
        for yes in [
            "ok, do that",
            "行，就这么办",
            "sounds good",
            "好的",
            "OK do it.",
            "yep do that",
            "yeah, go ahead",
        ] {
            assert!(is_confirmation(yes), "{yes}");
        }
        for no in [
            "ok, but what about the venue?",
            "do that later",
            "好的方案要再想想",
            "yes but not today",
        ] {
            assert!(!is_confirmation(no), "{no}");
        }
        // Accepted first, then more: the acceptance stands.
        assert!(opens_with_confirmation(
            "yep do that. and cut relocation to 8k, melbourne to adelaide doesn't cost 12"
        ));
        assert!(opens_with_confirmation("行，就这么办。另外贴纸按55做"));
        assert!(!opens_with_confirmation("ok. other thing: the budget is 800"));
        assert!(!opens_with_confirmation("好的。另外贴纸按55做"));
        assert!(!opens_with_confirmation("ok, but what about the venue? also the date"));
    }

    fn run(messages: &[(&str, &str)]) -> Vec<(String, String)> {
        let input = json!({
            "messages": messages.iter().map(|(r, c)| json!({"role": r, "content": c})).collect::<Vec<_>>(),
            "role_id": "cto",
        });
        extract(&input)
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["type"].as_str().unwrap().to_string(),
                    v["content"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn what_a_task_asked_for_now_requires_is_no_preference() {
        for task in [
            "那帮我写两句给喂养师的年终感谢，40字以内，不要感叹号，别提钱",
            "你跟设计说下定稿别拖过24号",
            "write the invite for the panel, keep it under 100 words and don't mention salary",
        ] {
            assert!(asks_for_work_now(task), "{task}");
            let kept = run(&[("user", task)]);
            assert!(
                !kept.iter().any(|(t, _)| t == "user_preference" || t == "feedback"),
                "{task}: {kept:?}"
            );
        }
        // A rule for every later piece of work, a recurrence, a rule of form and what was
        // written before stay.
        for rule in [
            "Write the dates as ISO, 2026-03-01",
            "以后给我写文案都不要感叹号",
            "Send me the KPI dashboard every Monday morning.",
            "Write me a summary like that every time, it's perfect",
        ] {
            assert!(!asks_for_work_now(rule), "{rule}");
        }
        assert!(!asks_for_work_now("你给我写的投标技术方案太泛了"));
        assert!(
            run(&[("user", "以后给我写文案都不要感叹号")])
                .iter()
                .any(|(t, _)| t == "user_preference" || t == "feedback" || t == "constraint"),
            "a standing rule of style is kept"
        );
    }

    #[test]
    fn a_fact_about_the_speaker_is_theirs_a_fact_about_the_work_the_projects() {
        let project_specific =
            |text: &str| candidate_for(MemoryType::Fact, text, 0.9, "cfo")["project_specific"] == true;
        for work in [
            "开业定在12月8日",
            "门店月租2.8万，押二付三",
            "The lease is £2,800 a month",
            "Our warehouse is in Ningbo",
        ] {
            assert!(project_specific(work), "{work}");
        }
        for person in [
            "我怀孕了，预产期是明年5月",
            "本人在杭州住",
            "I live in Leeds with my two kids",
            "My daughter starts school in March",
        ] {
            assert!(!project_specific(person), "{person}");
        }
        // Preferences stay with the role they were told to unless they name the project.
        assert!(candidate_for(MemoryType::UserPreference, "报数都用万元", 0.9, "cfo")["project_specific"] == false);
    }

    #[test]
    fn preferences_in_both_languages() {
        assert_eq!(
            run(&[("user", "我喜欢简约的设计风格")]),
            vec![("user_preference".into(), "我喜欢简约的设计风格".into())]
        );
        let en = run(&[("user", "I prefer short bullet-point reports over long essays.")]);
        assert_eq!(en[0].0, "user_preference");
    }

    #[test]
    fn a_latin_word_glued_to_chinese_is_read() {
        // "deadline" between ideographs: no Unicode word boundary there, an ASCII one on both sides.
        let found = run(&[("user", "这个feature的deadline是下周五")]);
        assert!(found.iter().any(|(t, _)| t == "constraint"), "{found:?}");
    }

    #[test]
    fn several_memories_in_one_message() {
        let found = run(&[("user", "预算5万，下个月15号之前上线，用Stripe收款")]);
        let types: Vec<&str> = found.iter().map(|(t, _)| t.as_str()).collect();
        assert!(types.contains(&"constraint"), "{found:?}");
        assert!(found.iter().any(|(_, c)| c.contains("Stripe")), "{found:?}");
        assert!(found.iter().any(|(_, c)| c.contains("5万")), "{found:?}");
    }

    #[test]
    fn corrections_keep_the_new_value() {
        let found = run(&[("user", "预算改成$800了，不是之前说的$500")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "constraint");
        assert!(found[0].1.contains("$800"));
        let found = run(&[("user", "Actually, the budget is $800, not $500.")]);
        assert_eq!(found[0].0, "constraint", "{found:?}");
    }

    #[test]
    fn questions_and_hypotheticals_are_not_memories() {
        assert!(run(&[("user", "我们用什么数据库？")]).is_empty());
        assert!(run(&[("user", "如果预算是一百万我们会怎么做")]).is_empty());
        assert!(run(&[("user", "What did we decide about the budget?")]).is_empty());
        assert!(run(&[("user", "Do we need tachographs in the vans?")]).is_empty());
        // A rule written as "Do not…" opens like a question and is none; written out, a
        // negation reads as its contracted form.
        let found = run(&[("user", "Do not use tables in anything you send me.")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "user_preference", "{found:?}");
        assert_eq!(
            contracted("We cannot exceed it, I do not want that"),
            "We can't exceed it, I don't want that"
        );
        assert_eq!(contracted("Will not ship"), "Won't ship");
        assert!(run(&[("user", "谢谢！")]).is_empty());
    }

    #[test]
    fn confirmation_turns_a_proposal_into_a_decision() {
        let found = run(&[
            ("assistant", "我建议使用Stripe作为支付方案，接入简单。"),
            ("user", "好，就这么定了"),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "project_decision");
        assert!(found[0].1.contains("Stripe"));
        // A proposal under its label, or said with "I'd": the label and the verb of proposing
        // are not part of what was decided.
        for (proposal, yes, decided) in [
            (
                "Agreed, it tells us little. Proposal: drop the 4-hour take-home and do a 90-minute pairing session instead.",
                "ok do that",
                "drop the 4-hour take-home and do a 90-minute pairing session instead.",
            ),
            (
                "I'd recommend we move the launch to Tuesday.",
                "sounds good",
                "move the launch to Tuesday.",
            ),
            ("我提议把发布会挪到周二。", "行，就这么办", "把发布会挪到周二。"),
        ] {
            let found = run(&[("assistant", proposal), ("user", yes)]);
            assert_eq!(found.len(), 1, "{proposal}: {found:?}");
            assert_eq!(
                (found[0].0.as_str(), found[0].1.as_str()),
                ("project_decision", decided)
            );
        }
    }

    #[test]
    fn reasons_stay_with_their_decision() {
        let found = run(&[("user", "我们决定用Next.js，因为团队熟悉React")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].1.contains("因为团队熟悉React"));
    }

    #[test]
    fn clauses_split_by_what_they_state() {
        let found = run(&[("user", "Budget $50k, launch by the 15th, use Stripe")]);
        assert_eq!(found.len(), 3, "{found:?}");
        // Same kind, no figure each: one memory; a clause pointing back joins its antecedent.
        assert_eq!(run(&[("user", "我们公司在深圳，团队一共20个人")]).len(), 1);
        let found = run(&[("user", "Every Monday we do a metrics review. Let's keep that going.")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "pattern");
        // The scene a risk is conditional on stays with it.
        let found = run(&[("user", "要是核心开发离职，项目可能会直接停摆")]);
        assert!(found[0].1.contains("离职") && found[0].0 == "risk", "{found:?}");
    }

    #[test]
    fn corrections_keep_their_family() {
        let found = run(&[("user", "Correction: we moved off Firebase to Appwrite.")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "project_decision");
    }

    #[test]
    fn merge_keeps_distinct_statements() {
        let merged = merge(&json!({"contents": ["我喜欢简约风格", "不要太花哨", "我喜欢简约风格"]})).unwrap();
        let text = merged["mergedContent"].as_str().unwrap();
        assert!(text.contains("简约") && text.contains("花哨"), "{text}");
        assert_eq!(text.matches("简约风格").count(), 1);
    }
}
