//! Replaced values marked wherever an older record is shown.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Utc};
use regex::Regex;
use thinkus_common::model::Language;

use super::mentions::{Mention, ValueKind, magnitude, mentions, occurrences, parse_number};
use super::readings::{Change, stated_changes};

/// A change as a reader's context applies it: the value replaced, what replaced it (the
/// newest value when it changed again), and since when.
#[derive(Debug, Clone, PartialEq)]
pub struct Replaced {
    pub old: String,
    pub new: Option<String>,
    pub at: DateTime<Utc>,
}

/// Whether `text` states `value` (by value where [`mentions`] reads it, else as text).
pub fn states_value(text: &str, value: &str) -> bool {
    !occurrences(text, value).is_empty()
}

fn struck_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(start) = text[from..].find("~~").map(|i| from + i) {
        match text[start + 2..].find("~~") {
            Some(end) => {
                spans.push((start, start + 2 + end + 2));
                from = start + 2 + end + 2;
            }
            None => break,
        }
    }
    spans
}

fn day_label(at: DateTime<Utc>, language: Language) -> String {
    match language {
        Language::Zh => format!("{}月{}日", at.month(), at.day()),
        Language::En => at.format("%-d %b").to_string(),
    }
}

/// Follows a value through later changes to its newest replacement, and when that came.
fn newest(change: &Replaced, changes: &[Replaced]) -> Option<(String, DateTime<Utc>)> {
    let mut current = change.new.clone()?;
    let mut at = change.at;
    for _ in 0..8 {
        let next = changes
            .iter()
            .filter(|c| {
                c.at >= at && !occurrences(&current, &c.old).is_empty() && c.new.as_deref() != Some(current.as_str())
            })
            .min_by_key(|c| c.at);
        match next.and_then(|c| c.new.clone().map(|n| (n, c.at))) {
            Some((n, t)) => {
                current = n;
                at = t;
            }
            None => break,
        }
    }
    Some((current, at))
}

/// Marks in `text`, said at `said_at`, the values that changed since: each old value is struck
/// through (`~~35万~~`, which readers of the context take for history), followed once by
/// what replaced it and since when ("（11月5日起为42万）", " (now $800, since 5 Nov)"), unless the
/// text names the new value itself ("从~~35万~~加到42万").
pub fn strike(text: &str, said_at: DateTime<Utc>, changes: &[Replaced], language: Language) -> String {
    let mut marks: Vec<(usize, usize, String)> = Vec::new();
    let struck = struck_spans(text);
    // The changes the text itself states: it tells of them whenever it is dated (a message
    // shown as the context of the reply after it carries the reply's time).
    let mut own: Option<Vec<Change>> = None;
    for change in changes {
        let spans = occurrences(text, &change.old);
        if spans.is_empty() {
            continue;
        }
        let newest = newest(change, changes);
        let new = newest.as_ref().map(|(value, _)| value.clone());
        // Changed and changed back: the old value is current again.
        if new.as_deref() == Some(change.old.as_str()) {
            continue;
        }
        let names_new = new.as_deref().is_some_and(|n| !occurrences(text, n).is_empty())
            || change.new.as_deref().is_some_and(|n| !occurrences(text, n).is_empty());
        // Said before the change, unless telling of it: naming the new value too ("Noted:
        // from $500 to $800", said a moment after the user's own words) or stating the change.
        if change.at < said_at
            && !names_new
            && !own
                .get_or_insert_with(|| stated_changes(text))
                .iter()
                .any(|c| c.old == change.old)
        {
            continue;
        }
        for (i, (start, end)) in spans.into_iter().enumerate() {
            let inside = |s: usize, e: usize| start < e && s < end;
            if struck.iter().any(|(s, e)| inside(*s, *e)) || marks.iter().any(|(s, e, _)| inside(*s, *e)) {
                continue;
            }
            let note = if names_new || i > 0 {
                String::new()
            } else {
                // Since the newest change: "6 vans" cut to 4 on 1 Mar and raised to 5 on 3 Mar is
                // "now 5 vans, since 3 Mar".
                let day = day_label(newest.as_ref().map_or(change.at, |(_, at)| *at), language);
                match (&new, language) {
                    (Some(new), Language::Zh) => format!("（{day}起为{new}）"),
                    (Some(new), Language::En) => format!(" (now {new}, since {day})"),
                    (None, Language::Zh) => format!("（{day}已更改）"),
                    (None, Language::En) => format!(" (changed {day})"),
                }
            };
            marks.push((start, end, format!("~~{}~~{note}", &text[start..end])));
        }
    }
    if marks.is_empty() {
        return text.to_string();
    }
    // So far the marks are the old values'; what was worked out from them follows.
    marks.extend(worked_out_from(text, &struck, &marks, language));
    marks.sort_by_key(|(start, _, _)| *start);
    let mut out = String::with_capacity(text.len() + 32 * marks.len());
    let mut at = 0;
    for (start, end, replacement) in marks {
        out.push_str(&text[at..start]);
        out.push_str(&replacement);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// The figures of `text` worked out from an old value that `marks` strike: in the sentence of
/// the old value, a figure that is the old value times another figure of the text said in the
/// figure's own unit (a count times a rate: "~~6 vans~~ … cost €7,590 a month" with "€1,265 per
/// van"; "~~64位~~喂养师 … 每人每天6单 … 日峰值约384单"); and the result of written arithmetic
/// with the old value among its terms, wherever in the text ("装修：~~35.0万~~ … 35.0 + 16.0 +
/// 9.0 + 3.0 = 63.0万", a bare term read with the magnitude written on the result). Its value
/// went with the old one, so it is struck too, naming what it was worked out from. A product is
/// dimensional (the rate's unit is the result's), which keeps coincidences of small numbers
/// out; the figure is at least 10, the other factor at least 2, and 0.5% of rounding is allowed.
fn worked_out_from(
    text: &str,
    struck: &[(usize, usize)],
    marks: &[(usize, usize, String)],
    language: Language,
) -> Vec<(usize, usize, String)> {
    let found = mentions(text);
    let figure = |m: &Mention| matches!(m.kind, ValueKind::Amount | ValueKind::Count) && m.number().is_some();
    let overlaps = |m: &Mention, (s, e): (usize, usize)| m.start < e && s < m.end;
    let free = |m: &Mention| {
        !struck.iter().any(|span| overlaps(m, *span)) && !marks.iter().any(|(s, e, _)| overlaps(m, (*s, *e)))
    };
    // The old values struck, as figures.
    let olds: Vec<(&Mention, f64)> = marks
        .iter()
        .filter_map(|(start, end, _)| {
            let old = found.iter().find(|m| m.start == *start && m.end == *end && figure(m))?;
            Some((old, old.number().filter(|o| *o > 0.0)?))
        })
        .collect();
    let mut out: Vec<(usize, usize, String)> = Vec::new();
    let mut strike_as_worked_out = |figure: &Mention, old: &Mention| {
        if out.iter().any(|(s, e, _)| overlaps(figure, (*s, *e))) {
            return;
        }
        let was = &old.raw;
        let note = match language {
            Language::Zh => format!("（按原来的~~{was}~~算出）"),
            Language::En => format!(" (worked out from the old ~~{was}~~)"),
        };
        out.push((figure.start, figure.end, format!("~~{}~~{note}", figure.raw)));
    };
    for &(old, o) in &olds {
        let (from, to) = sentence_around(text, old.start, old.end);
        for candidate in found
            .iter()
            .filter(|m| m.start >= from && m.end <= to && figure(m) && free(m))
        {
            let Some(f) = candidate.number().filter(|f| *f >= 10.0) else {
                continue;
            };
            let worked_out = found.iter().any(|k| {
                !std::ptr::eq(k, candidate)
                    && !std::ptr::eq(k, old)
                    && k.same_unit(candidate)
                    && k.number().is_some_and(|k| k >= 2.0 && (o * k - f).abs() <= 0.005 * f)
            });
            if worked_out {
                strike_as_worked_out(candidate, old);
            }
        }
    }
    // The magnitude written on a term ("16.0万", "4k"), read as a mention's is.
    let term_magnitude = |term: &regex::Captures| term.name("magnitude").map_or(1.0, |m| magnitude(m.as_str()));
    for equation in EQUATION.captures_iter(text) {
        let (Some(terms), Some(result)) = (equation.get(1), equation.get(2)) else {
            continue;
        };
        let result_magnitude = TERM.captures(result.as_str()).map_or(1.0, |c| term_magnitude(&c));
        let from = TERM.captures_iter(terms.as_str()).find_map(|term| {
            let number = parse_number(term.name("number")?.as_str())?;
            let written = term_magnitude(&term);
            let value = number * if written > 1.0 { written } else { result_magnitude };
            olds.iter()
                .find(|(_, o)| (o - value).abs() <= 1e-9 * o.abs().max(1.0))
                .map(|(old, _)| *old)
        });
        let Some(old) = from else {
            continue;
        };
        if let Some(candidate) = found
            .iter()
            .find(|m| m.start >= result.start() && m.start < result.end() && figure(m) && free(m))
        {
            strike_as_worked_out(candidate, old);
        }
    }
    out
}

/// A term of written arithmetic: a number with its currency sign and magnitude ("€1,265",
/// "35.0", "16.0万", "4k").
const TERM_PATTERN: &str = r"[$€£¥]?(?P<number>\d[\d,]*(?:\.\d+)?)\s?(?P<magnitude>万|千|亿|k\b|K\b)?";

static TERM: LazyLock<Regex> = LazyLock::new(|| Regex::new(TERM_PATTERN).expect("valid regex"));

/// A sum, difference, product or quotient of terms and its result: "a + b + c = d", "4 × €1,265
/// = €5,060", "约" or "≈" before the result allowed.
static EQUATION: LazyLock<Regex> = LazyLock::new(|| {
    let term = TERM_PATTERN.replace("?P<number>", "?:").replace("?P<magnitude>", "?:");
    Regex::new(&format!(
        r"({term}(?:\s*[+\-−×x*÷/]\s*{term})+)\s*[=＝]\s*(?:约|about\s|≈\s?)?({term})"
    ))
    .expect("valid regex")
});

/// The byte range of the sentence of `text` holding `start..end`: up to the nearest line break
/// or end of sentence ("。", "！", "？", or ".", "!", "?" before a space) on each side. A
/// semicolon goes on with the same matter ("喂养师64位；按每人每天6单算，日峰值约384单").
fn sentence_around(text: &str, start: usize, end: usize) -> (usize, usize) {
    let ends_sentence = |at: usize, c: char| match c {
        '\n' | '。' | '！' | '？' => true,
        '.' | '!' | '?' => text[at + c.len_utf8()..].chars().next().is_none_or(char::is_whitespace),
        _ => false,
    };
    let from = text[..start]
        .char_indices()
        .rev()
        .find(|&(i, c)| ends_sentence(i, c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let to = text[end..]
        .char_indices()
        .find(|&(i, c)| ends_sentence(end + i, c))
        .map_or(text.len(), |(i, _)| end + i);
    (from, to)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn old_values_are_struck_with_what_replaced_them() {
        let at = |d: u32| Utc.with_ymd_and_hms(2026, 11, d, 9, 0, 0).unwrap();
        let changes = vec![
            Replaced {
                old: "35万".into(),
                new: Some("42万".into()),
                at: at(5),
            },
            Replaced {
                old: "客如云".into(),
                new: None,
                at: at(5),
            },
        ];
        assert_eq!(
            strike("- 装修：35.0万，收银用客如云", at(2), &changes, Language::Zh),
            "- 装修：~~35.0万~~（11月5日起为42万），收银用~~客如云~~（11月5日已更改）"
        );
        // The statement of the change names the new value: the old one is only struck.
        assert_eq!(
            strike("总价从35万加到42万", at(5), &changes, Language::Zh),
            "总价从~~35万~~加到42万"
        );
        // Said after the change: as it was said, unless it tells of the change.
        assert_eq!(
            strike("比原来的35万多了7万", at(6), &changes, Language::Zh),
            "比原来的35万多了7万"
        );
        assert_eq!(
            strike("记下了：装修从35万调整为42万", at(6), &changes, Language::Zh),
            "记下了：装修从~~35万~~调整为42万"
        );
        let changes = vec![
            Replaced {
                old: "$500".into(),
                new: Some("$800".into()),
                at: at(3),
            },
            Replaced {
                old: "$800".into(),
                new: Some("$900".into()),
                at: at(4),
            },
        ];
        // The newest value, with the day it came: $900 holds since 4 Nov, not since the $500
        // first gave way.
        assert_eq!(
            strike("Noted: the budget is $500.", at(1), &changes, Language::En),
            "Noted: the budget is ~~$500~~ (now $900, since 4 Nov)."
        );
        assert_eq!(strike("$5000 is fine", at(1), &changes, Language::En), "$5000 is fine");
        // Changed and changed back: current again.
        let back = vec![
            Replaced {
                old: "Oct 15".into(),
                new: Some("Oct 29".into()),
                at: at(3),
            },
            Replaced {
                old: "Oct 29".into(),
                new: Some("Oct 15".into()),
                at: at(4),
            },
        ];
        assert_eq!(
            strike("Launch is Oct 15.", at(1), &back, Language::En),
            "Launch is Oct 15."
        );
    }

    #[test]
    fn a_text_that_states_a_change_marks_it_whenever_it_is_dated() {
        let at = |d: u32| Utc.with_ymd_and_hms(2026, 11, d, 9, 0, 0).unwrap();
        let changes = vec![Replaced {
            old: "客如云".into(),
            new: None,
            at: at(5),
        }];
        // The user's message, shown under the reply a day later as its context.
        assert_eq!(
            strike(
                "收银系统换掉吧，不用客如云了。二维火报价低",
                at(6),
                &changes,
                Language::Zh
            ),
            "收银系统换掉吧，不用~~客如云~~（11月5日已更改）了。二维火报价低"
        );
        // Said later without telling of the change: as it was said.
        assert_eq!(
            strike("老店还在用客如云", at(6), &changes, Language::Zh),
            "老店还在用客如云"
        );
    }

    #[test]
    fn a_figure_worked_out_from_an_old_value_goes_with_it() {
        let at = |d: u32| Utc.with_ymd_and_hms(2027, 3, d, 9, 0, 0).unwrap();
        let vans = [Replaced {
            old: "6 vans".into(),
            new: Some("4 vans".into()),
            at: at(1),
        }];
        // A count times a rate of the text, in the rate's unit.
        assert_eq!(
            strike(
                "Bottom line: 6 vans cost €7,590 a month for 48 months.\n- €1,265 per van per month",
                at(1) - chrono::Duration::hours(1),
                &vans,
                Language::En
            ),
            "Bottom line: ~~6 vans~~ (now 4 vans, since 1 Mar) cost ~~€7,590~~ (worked out from the old ~~6 vans~~) \
             a month for 48 months.\n- €1,265 per van per month"
        );
        let sitters = [Replaced {
            old: "64位".into(),
            new: Some("46位".into()),
            at: at(7),
        }];
        assert_eq!(
            strike(
                "首批签约喂养师64位，覆盖6个区；按每人每天6单算，日峰值约384单",
                at(2),
                &sitters,
                Language::Zh
            ),
            "首批签约喂养师~~64位~~（3月7日起为46位），覆盖6个区；按每人每天6单算，日峰值约~~384单~~（按原来的~~64位~~算出）"
        );
        // Written arithmetic with an old term, wherever the old value stands in the text; a
        // bare term is read with the result's magnitude. Sums without an old term stay.
        let renovation = [Replaced {
            old: "35万".into(),
            new: Some("42万".into()),
            at: at(5),
        }];
        assert_eq!(
            strike(
                "- 装修：35.0万\n- 首批备货：3.0万\n合计约 35.0 + 16.0 + 9.0 + 3.0 = 63.0万；另 16.0 + 9.0 = 25.0万",
                at(2),
                &renovation,
                Language::Zh
            ),
            "- 装修：~~35.0万~~（3月5日起为42万）\n- 首批备货：3.0万\n合计约 35.0 + 16.0 + 9.0 + 3.0 = \
             ~~63.0万~~（按原来的~~35.0万~~算出）；另 16.0 + 9.0 = 25.0万"
        );
        let rate = [Replaced {
            old: "€1,265".into(),
            new: Some("€1,287".into()),
            at: at(1),
        }];
        assert_eq!(
            strike(
                "- 4 × €1,265 = €5,060/month",
                at(1) - chrono::Duration::hours(1),
                &rate,
                Language::En
            ),
            "- 4 × ~~€1,265~~ (now €1,287, since 1 Mar) = ~~€5,060~~ (worked out from the old ~~€1,265~~)/month"
        );
        // A product in another unit is a coincidence (6 vans x 48 months is no distance), a
        // figure in another sentence is another matter, and a figure under ten or a factor
        // under two is too common a product to tell.
        for text in [
            "6 vans for 48 months, about 288 km a day",
            "We lease 6 vans. The office costs €7,590 a month, €1,265 a desk.",
            "6 vans, 7 stops each, 1 depot",
        ] {
            let struck = strike(text, at(1) - chrono::Duration::hours(1), &vans, Language::En);
            assert_eq!(struck.matches("~~").count(), 2, "only the old value: {struck}");
        }
    }
}
