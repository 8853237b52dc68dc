//! Time phrases: relative periods (yesterday, last week, 上个月) and named days, months and
//! years, as the ranges they span.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use regex::Regex;
use thinkus_common::model::TimeRange;
use thinkus_common::text::pattern;

use super::signal::TimeSignal;

/// A time phrase and the range it names.
pub fn time_range(message: &str, now: DateTime<Utc>) -> Option<(TimeRange, TimeSignal)> {
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
            TimeSignal::DayBeforeYesterday,
        ));
    }
    if YESTERDAY.is_match(message) {
        return Some((
            TimeRange::Between {
                start: Some(today - Duration::days(1)),
                end: Some(today),
            },
            TimeSignal::Yesterday,
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
            TimeSignal::Today,
        ));
    }
    if WEEK.is_match(message) {
        return Some((TimeRange::Last7Days, TimeSignal::Week));
    }
    if MONTH.is_match(message) {
        return Some((TimeRange::Last30Days, TimeSignal::Month));
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
fn explicit_date(message: &str, now: DateTime<Utc>) -> Option<(TimeRange, TimeSignal)> {
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
    let span: Option<(NaiveDate, NaiveDate, usize, usize, TimeSignal)> = (|| {
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
                    return Some((a, b, whole.start(), whole.end(), TimeSignal::Date));
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
                    return Some((a, b, whole.start(), whole.end(), TimeSignal::Date));
                }
            }
        }
        if let Some(c) = CN_MONTH.captures(message) {
            let whole = c.get(0)?;
            if let (Some(year), Ok(month)) = (year_of(c.get(1)), c[2].parse::<u32>())
                && let Some((a, b)) = month_span(year, month)
            {
                return Some((a, b, whole.start(), whole.end(), TimeSignal::MonthOfYear));
            }
        }
        if let Some(c) = EN_MONTH_YEAR.captures(message) {
            let whole = c.get(0)?;
            if let (Some(month), Some(year)) = (month_number(&c[1]), year_of(c.get(2)))
                && let Some((a, b)) = month_span(year, month)
            {
                return Some((a, b, whole.start(), whole.end(), TimeSignal::MonthOfYear));
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
                return Some((a, b, name.start(), name.end(), TimeSignal::Month));
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
                    TimeSignal::Month,
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
                    return Some((a, b, number.start(), c.get(0)?.end(), TimeSignal::Year));
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
