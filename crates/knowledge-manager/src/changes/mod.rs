//! Values that changed. People say "the renovation went from 35万 to 42万", "是3.2万不是2.8万",
//! "Pro is $39, not $49", "收银系统从客如云换成二维火", or, days after "launch is Oct 15",
//! "we're moving launch to Oct 29". Every earlier record that states the old value (a turn of
//! either speaker, a memory, a summary) is then history: whoever shows it marks the old value
//! as replaced ([`strike`]) instead of presenting it as current.
//!
//! Two readings, both structural rather than lists of phrasings:
//! - [`stated_changes`]: one text names both values, linked by the way languages state a
//!   change: "from A to B" with a verb of change, "B, not A", "B instead of A", "A -> B",
//!   "从A…到B" with a verb of change, "是B不是A", "不是A而是B", "A改成B", "从A换成B",
//!   "不用A了" (A dropped);
//!   An old value said as a bare number takes the new one's unit ("22 stores not 20", "4 → 5
//!   vans");
//! - [`implied_changes`]: a sentence with a verb of change states a value of the same kind
//!   (amount, percentage, date, count of the same thing, name) as an earlier sentence that
//!   shares a topic word with it ("开业定在12月8日" … "开业也得推，改到12月20日了"); a count of a
//!   specific thing needs no other shared word ("6 vans" … "ok cut it to 4 vans");
//!   [`accepted_changes`] reads a reply that carries out an accepted proposal the same way, the
//!   acceptance standing for the verb of change.
//!
//! The module reads in three steps: [`mentions`] finds the values a text states (amounts,
//! percentages, dates, counts of a thing, names), `readings` finds which of them changed, and
//! [`strike`] marks the replaced ones wherever an older record is shown.

mod mentions;
mod readings;
mod strike;

pub use mentions::{Mention, ValueKind, mentions};
pub use readings::{
    Change, Earlier, accepted_changes, asks_for_a_change, implied_changes, paired_by_words, stated_changes,
    statement_of, switched_across,
};
pub use strike::{Replaced, states_value, strike};
