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
//! (simple reference 200-500, deep 500-1500, full review 1500-3000), named in
//! `config::BudgetTiers` and configurable as `[controller.budgets]`; time phrases become
//! ranges.
//!
//! By concern: `patterns.rs` holds the phrase classes, `time.rs` the time phrases and their
//! ranges, `persons.rs` the questions about people and past events, `decide.rs` the decision
//! that reads them all, `signal.rs` the signals it names.

mod decide;
mod patterns;
mod persons;
mod signal;
mod time;

pub use decide::{RuleInput, decide, warm_up};
pub use signal::{DECISION_SUPPORT, Signal, TimeSignal};
pub use time::time_range;

#[cfg(test)]
mod tests;
