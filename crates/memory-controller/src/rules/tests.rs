//! The rules, message by message.

use chrono::{TimeZone, Utc};
use thinkus_common::model::{ControlDecision, Language, MemoryType, NeedMemory, RetrievalMode, TimeRange};

use super::decide::{RuleInput, decide};
use super::patterns::types_of;
use crate::config::BudgetTiers;

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
fn the_period_is_the_one_the_question_asks_about() {
    // A time phrase in a statement of a longer message tells of something else.
    let note = decide_text(
        "right so I'm in the van, Dara has the trial van out on the run since yesterday. \
         And the vans, how many vans did we land on with the money side? I can't remember.",
    );
    assert_ne!(note.need_memory, NeedMemory::No);
    assert_eq!(note.time_range, TimeRange::All);
    let zh = decide_text("昨天跑了一天门店，累死了。上次定的首发价是多少来着？");
    assert_eq!(zh.time_range, TimeRange::All);
    // In the sentence that asks, or in a message of one sentence or where nothing asks, it
    // holds as before.
    let asked = decide_text("Busy morning. What did we decide yesterday about the vans?");
    assert!(
        matches!(asked.time_range, TimeRange::Between { .. }),
        "{:?}",
        asked.time_range
    );
    let told = decide_text("我们昨天定了预算。把方案再发我一下。");
    assert!(
        matches!(told.time_range, TimeRange::Between { .. }),
        "{:?}",
        told.time_range
    );
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
fn budgets_come_from_the_configured_tiers() {
    let budgets = BudgetTiers {
        full_review: 3000,
        person: 1700,
        glance: 350,
        ..Default::default()
    };
    let now = Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap();
    for (message, budget) in [
        ("How many times has Melanie gone to the beach?", 3000),
        ("When did Caroline go to the support group?", 1700),
        ("我们都讨论了哪些事？", 350),
        ("What did we decide about the budget last week?", 1000),
    ] {
        let d = decide(&RuleInput {
            message,
            message_count: 3,
            now,
            budgets,
            ..Default::default()
        });
        assert_eq!(d.budget_tokens, budget, "{message}: {:?}", d.signals);
    }
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
