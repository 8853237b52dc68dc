//! Times for people: "2天前", "3 days ago".

use chrono::{DateTime, Utc};

use crate::model::Language;

/// `then` relative to `now` in the given language.
pub fn relative(then: DateTime<Utc>, now: DateTime<Utc>, language: Language) -> String {
    let seconds = (now - then).num_seconds();
    let future = seconds < 0;
    let seconds = seconds.unsigned_abs();
    let (amount, unit) = if seconds < 60 {
        (0, Unit::Now)
    } else if seconds < 3_600 {
        (seconds / 60, Unit::Minute)
    } else if seconds < 86_400 {
        (seconds / 3_600, Unit::Hour)
    } else if seconds < 7 * 86_400 {
        (seconds / 86_400, Unit::Day)
    } else if seconds < 30 * 86_400 {
        (seconds / (7 * 86_400), Unit::Week)
    } else if seconds < 365 * 86_400 {
        (seconds / (30 * 86_400), Unit::Month)
    } else {
        (seconds / (365 * 86_400), Unit::Year)
    };
    match language {
        Language::Zh => zh(amount, unit, future),
        Language::En => en(amount, unit, future),
    }
}

/// When something was, for a reader who must reason about dates (a prompt's context): relative
/// within a week ("2天前", "yesterday"), beyond that the date itself ("5月8日", "8 May"), with
/// its year when it is not this year's ("2023年5月8日", "8 May 2023"). "3 years ago" cannot
/// answer "when did she go?"; "8 May 2023" can.
pub fn when(then: DateTime<Utc>, now: DateTime<Utc>, language: Language) -> String {
    use chrono::Datelike;
    if (now - then).num_seconds().unsigned_abs() < 7 * 86_400 {
        return relative(then, now, language);
    }
    let same_year = then.year() == now.year();
    match (language, same_year) {
        (Language::Zh, true) => format!("{}月{}日", then.month(), then.day()),
        (Language::Zh, false) => format!("{}年{}月{}日", then.year(), then.month(), then.day()),
        (Language::En, true) => then.format("%-d %b").to_string(),
        (Language::En, false) => then.format("%-d %b %Y").to_string(),
    }
}

#[derive(Clone, Copy)]
enum Unit {
    Now,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

/// The day something was, for a heading that groups what was said that day: "today" and
/// "yesterday", "3 days ago" within a week (calendar days, UTC), beyond that as [`when`]. One
/// day has one label, whatever the hour ("2 hours ago" and "5 hours ago" are both "today").
pub fn day(then: DateTime<Utc>, now: DateTime<Utc>, language: Language) -> String {
    let days = (now.date_naive() - then.date_naive()).num_days();
    if !(0..7).contains(&days) {
        return when(then, now, language);
    }
    match (language, days) {
        (Language::Zh, 0) => "今天".into(),
        (Language::En, 0) => "today".into(),
        (language, days) => relative(now - chrono::Duration::days(days), now, language),
    }
}

fn zh(amount: u64, unit: Unit, future: bool) -> String {
    let name = match unit {
        Unit::Now => return "刚刚".into(),
        Unit::Day if amount == 1 => return if future { "明天" } else { "昨天" }.into(),
        Unit::Minute => "分钟",
        Unit::Hour => "小时",
        Unit::Day => "天",
        Unit::Week => "周",
        Unit::Month => "个月",
        Unit::Year => "年",
    };
    format!("{amount}{name}{}", if future { "后" } else { "前" })
}

fn en(amount: u64, unit: Unit, future: bool) -> String {
    let name = match unit {
        Unit::Now => return "just now".into(),
        Unit::Day if amount == 1 => return if future { "tomorrow" } else { "yesterday" }.into(),
        Unit::Minute => "minute",
        Unit::Hour => "hour",
        Unit::Day => "day",
        Unit::Week => "week",
        Unit::Month => "month",
        Unit::Year => "year",
    };
    let plural = if amount == 1 { "" } else { "s" };
    if future {
        format!("in {amount} {name}{plural}")
    } else {
        format!("{amount} {name}{plural} ago")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    #[test]
    fn both_languages() {
        let now = Utc::now();
        assert_eq!(relative(now - Duration::days(2), now, Language::Zh), "2天前");
        assert_eq!(relative(now - Duration::days(3), now, Language::En), "3 days ago");
        assert_eq!(relative(now - Duration::days(1), now, Language::En), "yesterday");
        assert_eq!(relative(now - Duration::hours(2), now, Language::Zh), "2小时前");
        assert_eq!(relative(now - Duration::seconds(5), now, Language::En), "just now");
        assert_eq!(relative(now - Duration::days(14), now, Language::En), "2 weeks ago");
        assert_eq!(relative(now - Duration::days(400), now, Language::Zh), "1年前");
        assert_eq!(relative(now + Duration::days(3), now, Language::En), "in 3 days");
        assert_eq!(relative(now - Duration::minutes(1), now, Language::En), "1 minute ago");
    }

    #[test]
    fn days_have_one_label_whatever_the_hour() {
        use chrono::TimeZone;
        let now = Utc.with_ymd_and_hms(2026, 11, 22, 18, 0, 0).unwrap();
        assert_eq!(day(now - Duration::hours(2), now, Language::En), "today");
        assert_eq!(day(now - Duration::hours(17), now, Language::Zh), "今天");
        // 20 hours before 18:00 is the day before: yesterday, not "20 hours ago".
        assert_eq!(day(now - Duration::hours(20), now, Language::En), "yesterday");
        assert_eq!(day(now - Duration::hours(20), now, Language::Zh), "昨天");
        assert_eq!(day(now - Duration::days(3), now, Language::En), "3 days ago");
        assert_eq!(
            day(now - Duration::days(3) - Duration::hours(17), now, Language::Zh),
            "3天前"
        );
        let may = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
        assert_eq!(day(may, now, Language::En), "8 May 2023");
        // Beyond a week, or ahead of now: the date as `when` gives it.
        assert_eq!(day(now - Duration::days(9), now, Language::En), "13 Nov");
        assert_eq!(day(now + Duration::days(2), now, Language::En), "in 2 days");
    }

    #[test]
    fn dates_beyond_a_week() {
        use chrono::TimeZone;
        let now = Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap();
        assert_eq!(when(now - Duration::days(2), now, Language::Zh), "2天前");
        assert_eq!(when(now - Duration::days(1), now, Language::En), "yesterday");
        let may = Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap();
        assert_eq!(when(may, now, Language::En), "8 May 2023");
        assert_eq!(when(may, now, Language::Zh), "2023年5月8日");
        let march = Utc.with_ymd_and_hms(2026, 3, 3, 9, 0, 0).unwrap();
        assert_eq!(when(march, now, Language::En), "3 Mar");
        assert_eq!(when(march, now, Language::Zh), "3月3日");
    }
}
