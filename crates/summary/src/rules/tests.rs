//! The summary rules, session by session.

use super::merge::without_outdated;
use super::*;

fn msg(index: u32, role: &str, speaker: Option<&str>, content: &str) -> RuleMessage {
    RuleMessage {
        index,
        role: role.into(),
        speaker: speaker.map(str::to_string),
        content: content.into(),
    }
}

/// The summary's listed items: progress, constraints, next actions and risks.
fn listed(summary: &SummaryContent) -> Vec<&String> {
    summary
        .progress
        .iter()
        .chain(&summary.constraints)
        .chain(&summary.next_actions)
        .chain(&summary.risks)
        .collect()
}

fn input(messages: Vec<RuleMessage>) -> RulesInput {
    RulesInput {
        messages,
        // Attribution makes items longer than their sentences: no share limit here.
        max_share: 10.0,
        ..Default::default()
    }
}

#[test]
fn chinese_session() {
    let messages = vec![
        msg(
            0,
            "user",
            None,
            "今天我想讨论一下课程平台的技术方案。预算是$500，必须在2周内完成。",
        ),
        msg(1, "cto", Some("David"), "我建议用Next.js和MongoDB。"),
        msg(2, "user", None, "好，就这么定了。"),
        msg(
            3,
            "cto",
            Some("David"),
            "我们决定使用Stripe作为支付方案，因为接入简单，用户在美国。",
        ),
        msg(4, "cto", Some("David"), "需求分析已经完成了，技术方案文档在 ART-001。"),
        msg(5, "cto", Some("David"), "视频播放可能会有版权问题，需要Tom确认。"),
        msg(6, "user", None, "是否需要支持多语言？"),
        msg(7, "cto", Some("David"), "下一步我会搭建项目骨架。"),
    ];
    let out = summarize(&input(messages));
    assert!(out.goal.contains("技术方案"), "{out:?}");
    assert!(out.constraints.iter().any(|c| c.contains("$500")), "{out:?}");
    let stripe = out
        .decisions
        .iter()
        .find(|d| d.what.contains("Stripe"))
        .expect("the Stripe decision");
    assert_eq!(stripe.what, "使用Stripe作为支付方案");
    assert!(stripe.why.contains("接入简单"), "{stripe:?}");
    assert_eq!(stripe.who, "David");
    assert_eq!(stripe.confidence, DecisionConfidence::High);
    let nextjs = out
        .decisions
        .iter()
        .find(|d| d.what.contains("Next.js"))
        .expect("the confirmed proposal");
    assert_eq!(nextjs.who, "user");
    assert_eq!(nextjs.what, "用Next.js和MongoDB");
    assert!(out.progress.iter().any(|p| p.contains("需求分析")), "{out:?}");
    assert!(out.risks.iter().any(|r| r.contains("版权")), "{out:?}");
    assert!(out.open_questions.iter().any(|q| q.contains("多语言")), "{out:?}");
    assert!(out.next_actions.iter().any(|n| n.contains("骨架")), "{out:?}");
    let art = out
        .artifacts
        .iter()
        .find(|a| a.reference == "ART-001")
        .expect("the artifact");
    assert_eq!(art.desc, "技术方案文档");
}

/// An acknowledgement ("收到，…我记下了") or a sign-off ("先这样") reports no work; a decision said
/// after "好的" is still one.
#[test]
fn a_chinese_acknowledgement_is_no_work_done() {
    let out = summarize(&input(vec![
        msg(0, "user", None, "春节通道12月18日上线，首批喂养师64位。你先记下。"),
        msg(1, "assistant", None, "收到，春节预约通道的基础信息我记下了。"),
        msg(2, "assistant", None, "好的，我们决定春节单次上门定69元。"),
        msg(3, "assistant", None, "需求分析已经完成了。"),
    ]));
    assert!(!listed(&out).iter().any(|i| i.contains("记下了")), "{out:?}");
    assert!(out.decisions.iter().any(|d| d.what.contains("69元")), "{out:?}");
    assert!(out.progress.iter().any(|p| p.contains("需求分析")), "{out:?}");
    // Nor does a sign-off.
    let out = summarize(&input(vec![
        msg(0, "user", None, "Ok 先这样 我去见投资人了"),
        msg(1, "user", None, "下周一我去见投资人，先把PRD发给CTO。"),
    ]));
    assert!(!listed(&out).iter().any(|i| i.contains("先这样")), "{out:?}");
    assert!(out.next_actions.iter().any(|n| n.contains("PRD")), "{out:?}");
}

#[test]
fn english_session() {
    let messages = vec![
        msg(
            0,
            "user",
            None,
            "Hi! The goal is to plan the launch of the course platform.",
        ),
        msg(
            1,
            "user",
            None,
            "The budget is capped at $800 and the deadline is March 3.",
        ),
        msg(
            2,
            "assistant",
            None,
            "We decided to go with Postgres because the team knows it well.",
        ),
        msg(
            3,
            "assistant",
            None,
            "I finished the schema migration and deployed the staging server.",
        ),
        msg(
            4,
            "user",
            None,
            "I'm worried the payment provider might not support refunds.",
        ),
        msg(5, "user", None, "Should we support multiple currencies?"),
        msg(
            6,
            "assistant",
            None,
            "Next step: I'll write the onboarding emails. See art_0190f3c2a1b2c3d4e5f60718293a4b5c for the draft.",
        ),
        msg(7, "user", None, "How are you?"),
    ];
    let out = summarize(&input(messages));
    assert!(out.goal.to_lowercase().contains("launch"), "{out:?}");
    assert!(out.constraints.iter().any(|c| c.contains("$800")), "{out:?}");
    let d = out
        .decisions
        .iter()
        .find(|d| d.what.contains("Postgres"))
        .expect("decision");
    assert_eq!(d.what, "Go with Postgres");
    assert!(d.why.contains("team knows it"), "{d:?}");
    assert_eq!(d.confidence, DecisionConfidence::High);
    assert!(out.progress.iter().any(|p| p.contains("schema migration")), "{out:?}");
    assert!(out.risks.iter().any(|r| r.contains("refunds")), "{out:?}");
    assert!(out.open_questions.iter().any(|q| q.contains("currencies")), "{out:?}");
    assert!(out.next_actions.iter().any(|n| n.contains("onboarding")), "{out:?}");
    assert!(
        out.artifacts
            .iter()
            .any(|a| a.reference == "art_0190f3c2a1b2c3d4e5f60718293a4b5c"),
        "{out:?}"
    );
    assert!(!out.open_questions.iter().any(|q| q.contains("How are you")), "{out:?}");
}

#[test]
fn named_speakers_are_attributed_and_chitchat_dropped() {
    let messages = vec![
        msg(0, "user", Some("Maria"), "Hey John! Long time no see! What's up?"),
        msg(
            1,
            "user",
            Some("John"),
            "Hey Maria! Just got back from a family road trip yesterday, it was fun!",
        ),
        msg(
            2,
            "user",
            Some("Maria"),
            "Been busy volunteering at the homeless shelter. Just started doing aerial yoga.",
        ),
        msg(
            3,
            "user",
            Some("John"),
            "I'm gonna chat with local leaders and organizations.",
        ),
    ];
    let out = summarize(&input(messages));
    let text = format!("{:?}{:?}", out.progress, out.next_actions);
    assert!(text.contains("John: Just got back from a family road trip"), "{text}");
    assert!(text.contains("Maria: Been busy volunteering"), "{text}");
    assert!(
        text.contains("John: Gonna chat with local leaders") || text.contains("John: gonna chat"),
        "{text}"
    );
    assert!(!text.contains("Long time"), "{text}");
}

#[test]
fn merging_dedups_and_closes_questions() {
    let first = summarize(&input(vec![
        msg(0, "user", None, "Should we use Redis for caching?"),
        msg(1, "assistant", None, "I finished the API design document."),
    ]));
    assert_eq!(first.open_questions.len(), 1, "{first:?}");
    let mut next = input(vec![
        msg(2, "assistant", None, "I finished the API design document."),
        msg(
            3,
            "user",
            None,
            "We decided to use Redis for caching because reads dominate.",
        ),
    ]);
    next.previous = Some(first);
    let second = summarize(&next);
    assert_eq!(second.progress.len(), 1, "duplicates merge: {second:?}");
    assert!(second.open_questions.is_empty(), "answered: {second:?}");
    assert_eq!(second.decisions.len(), 1);
}

#[test]
fn output_stays_within_the_share() {
    let long: Vec<RuleMessage> = (0..40)
        .map(|i| {
            msg(
                i,
                "user",
                Some("Ann"),
                &format!("I finished task number {i} of the migration plan for the billing system today."),
            )
        })
        .collect();
    let read: usize = long.iter().map(|m| char_count(&m.content)).sum();
    let out = summarize(&RulesInput {
        messages: long,
        max_share: 0.15,
        min_chars: 0,
        max_items: 50,
        ..Default::default()
    });
    let written: usize = out.progress.iter().map(|p| char_count(p)).sum();
    assert!(written as f64 <= read as f64 * 0.15, "{written} of {read}");
    assert!(!out.progress.is_empty());
}

#[test]
fn summary_requests_are_detected() {
    assert!(
        asks_for_summary("帮我recap一下今天的讨论"),
        "a Latin word glued to Chinese"
    );
    assert!(asks_for_summary("帮我总结一下今天的讨论"));
    assert!(asks_for_summary("Can you summarize where we are?"));
    assert!(asks_for_summary("quick recap please"));
    assert!(!asks_for_summary("the summary field is empty"));
}

fn chat(lines: &[(&str, &str)]) -> Vec<RuleMessage> {
    lines
        .iter()
        .enumerate()
        .map(|(i, (speaker, text))| msg(i as u32, "user", Some(speaker), text))
        .collect()
}

#[test]
fn a_conversation_keeps_what_each_speaker_reported() {
    let messages = chat(&[
        ("Maria", "Hey John! Long time no see! How have you been?"),
        (
            "John",
            "Hey Maria! I went to a pottery workshop with my kids last Friday - it was so cool! Have you ever tried pottery?",
        ),
        ("Maria", "Wow, that's so awesome! You're such a great dad."),
        (
            "Maria",
            "I adopted a puppy from the shelter yesterday, her name is Coco. I'm taking her to the vet next week.",
        ),
        ("John", "Congrats! Coco looks adorable. I bet your family loves her."),
        ("John", "By the way, I'm planning a trip to the East Coast in July."),
        ("Maria", "Sounds amazing! Have fun and take care!"),
    ]);
    let read: usize = messages.iter().map(|m| char_count(&m.content)).sum();
    let out = summarize(&RulesInput {
        messages,
        max_share: 0.5,
        min_chars: 0,
        ..Default::default()
    });
    let points = format!("{:?}", [&out.progress[..], &out.next_actions[..]].concat());
    assert!(out.goal.is_empty() && out.decisions.is_empty(), "{out:?}");
    assert!(
        points.contains("John: Went to a pottery workshop with my kids last Friday"),
        "{points}"
    );
    assert!(
        !points.contains("so cool") && !points.contains("tried pottery"),
        "{points}"
    );
    assert!(
        points.contains("Maria: Adopted a puppy from the shelter yesterday"),
        "{points}"
    );
    assert!(points.contains("East Coast"), "{points}");
    for reaction in ["awesome", "great dad", "adorable", "Long time", "take care"] {
        assert!(!points.contains(reaction), "{reaction} in {points}");
    }
    // A fraction of the conversation, not all of it.
    let written: usize = out
        .progress
        .iter()
        .chain(&out.next_actions)
        .map(|p| char_count(p))
        .sum();
    assert!(written * 2 <= read, "{written} of {read}: {points}");
}

#[test]
fn a_chinese_conversation_keeps_what_each_speaker_reported() {
    let messages = chat(&[
        ("小王", "嗨小李！好久不见！最近怎么样？"),
        (
            "小李",
            "哇，好久不见！我上周去杭州参加了一个摄影展，拍了很多西湖的照片。",
        ),
        ("小王", "太棒了！你拍的照片一定很好看。"),
        ("小王", "我最近在准备驾照考试，下个月考科目二。"),
        ("小李", "加油！你一定能过的。"),
    ]);
    let out = summarize(&RulesInput {
        messages,
        ..Default::default()
    });
    let points = format!("{:?}", [&out.progress[..], &out.next_actions[..]].concat());
    assert!(points.contains("小李：上周去杭州参加了一个摄影展"), "{points}");
    assert!(points.contains("驾照"), "{points}");
    for reaction in ["嗨", "太棒了", "一定很好看", "加油", "好久不见"] {
        assert!(!points.contains(reaction), "{reaction} in {points}");
    }
}

#[test]
fn a_working_session_keeps_done_work_not_remarks() {
    let messages = vec![
        msg(0, "user", None, "The goal is to ship the billing page this week."),
        msg(
            1,
            "assistant",
            None,
            "I deployed the invoice service to staging yesterday.",
        ),
        msg(
            2,
            "assistant",
            None,
            "The weather here is lovely and the coffee machine is new.",
        ),
    ];
    let out = summarize(&input(messages));
    assert!(out.progress.iter().any(|p| p.contains("invoice service")), "{out:?}");
    assert!(!format!("{out:?}").contains("coffee"), "{out:?}");
}

#[test]
fn a_confirmation_decides_only_the_proposal_it_answers() {
    let decided = summarize(&input(vec![
        msg(0, "cto", Some("David"), "I suggest we use Postgres for the ledger."),
        msg(1, "user", None, "Sounds good, let's do that."),
    ]));
    assert!(
        decided
            .decisions
            .iter()
            .any(|d| d.what == "Use Postgres for the ledger"),
        "{decided:?}"
    );
    let unrelated = summarize(&input(vec![
        msg(0, "cto", Some("David"), "I suggest we use Postgres for the ledger."),
        msg(1, "user", None, "I will check the invoices tomorrow."),
        msg(
            2,
            "cto",
            Some("David"),
            "The staging server was restarted this morning.",
        ),
        msg(3, "user", None, "Sounds good, let's do that."),
    ]));
    assert!(unrelated.decisions.is_empty(), "{unrelated:?}");
    let remark = summarize(&input(vec![
        msg(
            0,
            "user",
            Some("Ann"),
            "It felt great to see we could make a difference.",
        ),
        msg(1, "user", Some("Bo"), "Agreed!"),
    ]));
    assert!(remark.decisions.is_empty(), "{remark:?}");
}

#[test]
fn a_full_section_keeps_its_most_valuable_items() {
    let mut lines = vec![("Ann", "I got a new job at the Seattle aquarium last week!".to_string())];
    for i in 0..8 {
        lines.push(("Ann", format!("Also the plants on shelf {i} need some water.")));
    }
    let messages: Vec<RuleMessage> = lines
        .iter()
        .enumerate()
        .map(|(i, (speaker, text))| msg(i as u32, "user", Some(speaker), text))
        .collect();
    let out = summarize(&RulesInput {
        max_items: 2,
        ..input(messages)
    });
    assert!(out.progress.len() <= 2, "{out:?}");
    assert!(out.progress.iter().any(|p| p.contains("aquarium")), "{out:?}");
}

#[test]
fn a_worry_in_a_session_without_decisions_is_a_risk() {
    let out = summarize(&input(vec![
        msg(0, "user", None, "We must finish the billing migration by June."),
        msg(
            1,
            "user",
            None,
            "I'm worried the old invoices might not import cleanly.",
        ),
    ]));
    assert!(out.risks.iter().any(|r| r.contains("invoices")), "{out:?}");
    let zh = summarize(&input(vec![
        msg(0, "user", None, "我们下周要和供应商谈合同。"),
        msg(1, "user", None, "我担心对方会临时涨价。"),
    ]));
    assert!(zh.risks.iter().any(|r| r.contains("涨价")), "{zh:?}");
}

#[test]
fn the_speaker_is_left_out_only_where_the_statement_still_reads_the_same() {
    let said = |text: &str| {
        let message = msg(0, "user", Some("Jolene"), text);
        attributed(&message, text, 140)
    };
    assert_eq!(said("I went hiking last week."), "Jolene: Went hiking last week.");
    assert_eq!(said("I just joined a gym."), "Jolene: Just joined a gym.");
    assert_eq!(said("I've been studying a lot."), "Jolene: Been studying a lot.");
    assert_eq!(
        said("I'm thinking of working with trans people."),
        "Jolene: Thinking of working with trans people."
    );
    assert_eq!(said("我上周去了杭州。"), "Jolene：上周去了杭州。");
    assert_eq!(said("我们下周发布。"), "Jolene：我们下周发布。");
    assert_eq!(said("我妈妈上个月做了手术。"), "Jolene：我妈妈上个月做了手术。");
    assert_eq!(said("我的电脑坏了。"), "Jolene：我的电脑坏了。");
    assert_eq!(said("我刚买了车。"), "Jolene：刚买了车。");
    // A plan, a habit or a need without its subject would read as advice.
    assert_eq!(said("I'll keep pushing forward."), "Jolene: I'll keep pushing forward.");
    assert_eq!(
        said("I use essential oils and soft music."),
        "Jolene: I use essential oils and soft music."
    );
    assert_eq!(
        said("I need a better way to focus."),
        "Jolene: I need a better way to focus."
    );
    // What the speaker has or is stays whole.
    assert_eq!(said("I have a dog named Max."), "Jolene: I have a dog named Max.");
    assert_eq!(said("I'm a nurse at the clinic."), "Jolene: I'm a nurse at the clinic.");
}

#[test]
fn a_session_opened_on_what_to_settle_has_that_goal() {
    let zh = summarize(&input(vec![
        msg(
            0,
            "user",
            None,
            "我们来定一下新版官网的设计方向。预算从500美元调整到800美元。",
        ),
        msg(1, "designer", Some("Elena"), "我建议用简洁的深色主题，配合大图。"),
        msg(2, "user", None, "可以，就这么定了。"),
    ]));
    assert!(zh.goal.contains("设计方向"), "{zh:?}");
    assert!(
        zh.decisions.iter().any(|d| d.what == "用简洁的深色主题，配合大图"),
        "{zh:?}"
    );
    let en = summarize(&input(vec![
        msg(0, "user", None, "Let's decide the pricing for the launch."),
        msg(
            1,
            "cfo",
            Some("Mia"),
            "I recommend a $20 monthly plan, because churn is high.",
        ),
        msg(2, "user", None, "Sounds good, let's do that."),
    ]));
    assert!(en.goal.contains("pricing"), "{en:?}");
    assert!(
        en.decisions
            .iter()
            .any(|d| d.what == "A $20 monthly plan" && d.why == "churn is high"),
        "{en:?}"
    );
    // A chat that opens on news has no goal.
    let chat = summarize(&input(vec![msg(
        0,
        "user",
        Some("小王"),
        "我上周去杭州出差了，顺便去了西湖。",
    )]));
    assert!(chat.goal.is_empty(), "{chat:?}");
}

#[test]
fn a_changed_figure_or_choice_outdates_what_was_said_before() {
    let first = summarize(&input(vec![
        msg(
            0,
            "user",
            None,
            "今天要定课程平台的技术方案。预算是$500，必须在2周内完成。",
        ),
        msg(1, "user", None, "我们决定前端用Next.js，因为团队熟悉。"),
    ]));
    assert!(first.constraints.iter().any(|c| c.contains("$500")), "{first:?}");
    let second = summarize(&RulesInput {
        previous: Some(first),
        ..input(vec![
            msg(2, "user", None, "预算调整到$800。"),
            msg(3, "user", None, "我们决定前端改用Vue，因为招人容易。"),
        ])
    });
    assert_eq!(
        second.constraints,
        ["必须在2周内完成。", "预算调整到$800。"],
        "{second:?}"
    );
    let frontends: Vec<&str> = second.decisions.iter().map(|d| d.what.as_str()).collect();
    assert_eq!(frontends, ["前端改用Vue"], "{second:?}");

    let first = summarize(&input(vec![msg(
        0,
        "user",
        None,
        "The goal is to plan the launch. The budget is capped at $500 and the deadline is March 3.",
    )]));
    let second = summarize(&RulesInput {
        previous: Some(first),
        ..input(vec![msg(1, "user", None, "The budget is now $800.")])
    });
    let all = second.constraints.join(" | ");
    assert!(!all.contains("$500"), "{all}");
    assert!(all.contains("March 3") && all.contains("$800"), "{all}");
    // Within one session too, the later figure stands.
    let once = summarize(&input(vec![
        msg(
            0,
            "user",
            None,
            "The goal is to plan the launch. The budget must stay under $500.",
        ),
        msg(1, "user", None, "Update: the budget must stay under $800 now."),
    ]));
    assert!(!once.constraints.join(" ").contains("$500"), "{once:?}");
    // A decision after a constraint of the same session outdates it too.
    let decided = summarize(&input(vec![
        msg(
            0,
            "user",
            None,
            "今天要定课程平台的技术方案。预算是$500，必须在2周内完成。",
        ),
        msg(1, "user", None, "我们决定把预算提高到$800，因为要加视频。"),
    ]));
    assert!(!decided.constraints.join(" ").contains("$500"), "{decided:?}");
    assert!(decided.decisions.iter().any(|d| d.what.contains("$800")), "{decided:?}");
}

#[test]
fn only_the_clause_about_the_changed_subject_goes() {
    assert_eq!(
        without_outdated("预算是$500，必须在2周内完成。", "预算调整到$800"),
        Some("必须在2周内完成。".to_string())
    );
    assert_eq!(
        without_outdated("The budget is $500 and the deadline is March 3.", "The budget is $800"),
        Some("The deadline is March 3.".to_string())
    );
    assert_eq!(without_outdated("预算是$500。", "预算调整到$800"), None);
    // A figure's thousands separator is no clause's end: the figure goes whole, never "200".
    assert_eq!(without_outdated("Budget: £5,200", "Raise the budget to £9,500"), None);
    assert_eq!(
        without_outdated("The budget is $5,000, due in 2 weeks.", "The budget is $8,000"),
        Some("Due in 2 weeks.".to_string())
    );
    // The same figure again, another subject, or no figure at all: nothing is outdated.
    for newer in ["预算还是$500", "上线时间推迟到3月15日", "预算要控制好"] {
        assert_eq!(
            without_outdated("预算是$500，必须在2周内完成。", newer).as_deref(),
            Some("预算是$500，必须在2周内完成。"),
            "{newer}"
        );
    }
}

#[test]
fn a_models_answer_keeps_only_the_latest_figure() {
    // The LLM engine's complete answer goes through the same merge, into nothing.
    let answer = SummaryContent {
        constraints: vec!["预算是$500，必须在2周内完成".into(), "预算调整到$800".into()],
        ..Default::default()
    };
    let merged = merge(SummaryContent::default(), answer, 12);
    assert_eq!(merged.constraints, ["必须在2周内完成", "预算调整到$800"]);
}

#[test]
fn a_table_is_read_row_by_row_with_its_header() {
    let reply = "Great. For Mailchimp I'd split the list into three segments:\n\n\
                 | Segment | Rough size | Message |\n|---|---|---|\n\
                 | Bought in the last 12 months | ~4,100 | Early access for our regulars |\n\
                 | Lapsed | ~2,500 | We've missed you |\n\nThe regulars go first at 7am.";
    let read = tables_as_rows(reply);
    assert!(
        read.contains("Segment: Lapsed · Rough size: ~2,500 · Message: We've missed you\n"),
        "{read}"
    );
    assert!(!read.contains("| Segment |") && !read.contains("|---|"), "{read}");
    assert!(read.contains("The regulars go first at 7am."), "{read}");
    // Chinese headers, an empty cell left out; a line of bars without a header rule is no table.
    let zh = tables_as_rows("| 项目 | 原来 | 现在 |\n| --- | :---: | --- |\n| 装修预算 |  | 42万 |\n");
    assert_eq!(zh, "项目：装修预算 · 现在：42万\n");
    assert_eq!(tables_as_rows("a | b | c"), "a | b | c");
    assert_eq!(tables_as_rows("no table here"), "no table here");

    // In a summary no item is a bare header or a row of cells without their names.
    let summary = summarize(&input(vec![
        msg(
            0,
            "user",
            None,
            "Let's plan the Mailchimp send for the gift box launch.",
        ),
        msg(1, "cmo", Some("Ava"), reply),
    ]));
    let items = listed(&summary);
    assert!(items.iter().all(|item| !item.contains('|')), "{summary:?}");
}

#[test]
fn a_table_row_is_one_sentence() {
    // Cells that hold commas and figures with thousands separators: a row stays whole, so an
    // item never names a channel without its budget, nor is a figure cut to "200".
    let reply = "Paid social raised to £9,500 (from £6,000). Proposed split:\n\n| Channel | Budget |\n|---|---|\n\
                 | Meta, gift-givers 35-54 | £5,200 |\n| Meta, site retargeting | £2,100 |\n\
                 | Pinterest gift guides | £1,700 |\n\nTea lovers broad gets switched off.";
    let read = thinkus_common::text::sentences(&tables_as_rows(reply));
    assert!(
        read.iter()
            .any(|s| s == "Channel: Meta, gift-givers 35-54 · Budget: £5,200"),
        "{read:?}"
    );
    let zh = thinkus_common::text::sentences(&tables_as_rows(
        "| 渠道 | 预算 |\n|---|---|\n| 小红书达人探店 | 1.5万 |\n| 线下物料 | 0.5万 |\n",
    ));
    assert_eq!(
        zh,
        ["渠道：小红书达人探店 · 预算：1.5万", "渠道：线下物料 · 预算：0.5万"]
    );
    let summary = summarize(&input(vec![
        msg(0, "user", None, "Let's go bigger. Raise paid social to £9,500."),
        msg(1, "assistant", None, reply),
    ]));
    let items = listed(&summary);
    for item in &items {
        assert!(
            item.chars().any(char::is_alphabetic),
            "an item of figures alone: {summary:?}"
        );
        assert!(
            !item.starts_with("Channel") || item.contains('£'),
            "a row cut from its budget: {summary:?}"
        );
    }
}

#[test]
fn lines_of_a_list_are_items_without_their_marks() {
    let messages = vec![
        msg(0, "user", None, "Where do the two hires stand?"),
        msg(
            1,
            "assistant",
            None,
            "Done:\n- We decided to lease 5 vans from Fenwick at €1,279 each a month.\n- The crew cost went up to A$201,005 after the revised quote.\n2. Next I'll send the offer letter to HR by Friday.",
        ),
    ];
    let out = summarize(&input(messages));
    let items: Vec<&String> = listed(&out)
        .into_iter()
        .chain(out.decisions.iter().map(|d| &d.what))
        .collect();
    assert!(items.iter().any(|i| i.contains("5 vans")), "{out:?}");
    assert!(
        items.iter().all(|i| !i.starts_with("- ") && !i.starts_with("2. ")),
        "{items:?}"
    );
}
