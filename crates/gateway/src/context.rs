//! Assembling a turn's context: sections in the order of seed 002 section 4.2 (decisions,
//! preferences, conclusions, insights, other memories), then artifacts, then the last session,
//! packed into one token budget. Entries are chosen in the order they are offered (best first:
//! a weak decision does not push out a strong conversation turn), each group within its cap,
//! and only then laid out by section. Whole entries only: an entry that does not fit is left
//! out and the trace says so. A short conversation turn (a reply like "Yes, last Tuesday!")
//! shows the turn before it under it, unless that turn is in the context too: the room saved
//! goes to more entries; a longer turn stands alone (`gateway.context_line_max_tokens`). Within a section,
//! dated entries are grouped under their day ("8 May 2023:"), days in time order, so a day is
//! written once however many of its memories are chosen (most of a session's turns share
//! one): the room saved goes to more entries too, and the section reads as a timeline.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use thinkus_common::model::{Language, MemoryType};
use thinkus_common::tokens::TokenCounter;

use crate::api::{Section, SectionKind};

impl SectionKind {
    /// The section a memory type goes to.
    pub fn of(memory_type: MemoryType) -> Self {
        match memory_type {
            MemoryType::ProjectDecision => Self::Decisions,
            MemoryType::UserPreference | MemoryType::Feedback => Self::Preferences,
            MemoryType::DiscussionConclusion => Self::Conclusions,
            MemoryType::Insight | MemoryType::Learning | MemoryType::Pattern | MemoryType::Issue => Self::Insights,
            _ => Self::Other,
        }
    }

    /// The section's heading in the user's language.
    pub fn title(self, language: Language) -> &'static str {
        match (self, language) {
            (Self::Standing, Language::Zh) => "长期规则与偏好",
            (Self::Standing, Language::En) => "Standing rules and profile",
            (Self::Decisions, Language::Zh) => "相关决策",
            (Self::Decisions, Language::En) => "Related decisions",
            (Self::Preferences, Language::Zh) => "用户偏好",
            (Self::Preferences, Language::En) => "User preferences",
            (Self::Conclusions, Language::Zh) => "讨论结论",
            (Self::Conclusions, Language::En) => "Discussion conclusions",
            (Self::Insights, Language::Zh) => "洞察与经验",
            (Self::Insights, Language::En) => "Insights and lessons",
            (Self::Other, Language::Zh) => "其他相关记忆",
            (Self::Other, Language::En) => "Other relevant memories",
            (Self::Artifacts, Language::Zh) => "相关产物",
            (Self::Artifacts, Language::En) => "Relevant artifacts",
            (Self::LastSession, Language::Zh) => "上次会话",
            (Self::LastSession, Language::En) => "Last session",
        }
    }
}

/// One entry offered for the context.
#[derive(Debug, Clone, Default)]
pub struct Entry {
    pub kind: SectionKind,
    pub text: String,
    /// Index of the entry's trace item.
    pub trace: usize,
    /// The most this entry's section may take (artifacts and the last session have caps).
    pub section_cap: Option<u32>,
    /// A line shown with the entry (a conversation turn's previous turn, which a reply like
    /// "Yes, last Tuesday!" needs; empty for a longer turn), left out when another chosen entry
    /// is that line.
    pub context: String,
    /// What the entry is as another entry's context: a turn's "Speaker: what was said".
    pub line: Option<String>,
    /// The day the entry is grouped under, if it has one.
    pub day: Option<Day>,
}

/// A day entries are grouped under: its label as the reader sees it ("8 May 2023", "昨天")
/// and a time to order the days by.
#[derive(Debug, Clone, PartialEq)]
pub struct Day {
    pub label: String,
    pub at: DateTime<Utc>,
}

impl Day {
    /// The day of something said at `at`, labelled for a reader at `now`
    /// ([`thinkus_common::time::day`]).
    pub fn of(at: DateTime<Utc>, now: DateTime<Utc>, language: Language) -> Self {
        Self {
            label: thinkus_common::time::day(at, now, language),
            at,
        }
    }

    /// The line a group of entries starts with.
    fn line(&self, language: Language) -> String {
        match language {
            Language::Zh => format!("{}：\n", self.label),
            Language::En => format!("{}:\n", self.label),
        }
    }
}

impl Entry {
    /// Whether the entry's context line is shown, given the lines of the chosen entries.
    fn shows_context(&self, lines: &HashSet<&str>) -> bool {
        !self.context.is_empty() && !lines.contains(self.context.as_str())
    }

    /// The entry led by its context line, in the order the two were said: the turn before
    /// opens the item, the entry follows under it ("- Melanie: Did you go…?\n  Caroline: Yes,
    /// last Tuesday! (9 May 2023)").
    fn with_context(&self) -> String {
        match self.text.strip_prefix("- ") {
            Some(text) => format!("- {}\n  {text}", self.context),
            None => format!("{}\n{}", self.context, self.text),
        }
    }
}

impl SectionKind {
    /// Whether the section holds recalled memories (they share the memory budget).
    pub fn is_memory(self) -> bool {
        !matches!(self, Self::Standing | Self::Artifacts | Self::LastSession)
    }
}

/// A long record cut to what the reader asked about: its lines (a line longer than the cap, its
/// sentences) that share the most words with the message, whole and in their order, within
/// `cap` tokens; "…" marks what was left out. A kept line is never cut, so no figure, date or
/// name is lost from it; a table row comes with its table's header. The first line (what the
/// record is about) is kept when it fits. A text within the cap, or a cap of 0, is kept whole.
pub fn excerpt(text: &str, query: &HashSet<String>, cap: u32, tokens: &TokenCounter) -> String {
    if cap == 0 || tokens.count(text) as u32 <= cap {
        return text.to_string();
    }
    // Units: lines, and the sentences of a line that alone exceeds the cap.
    let mut units: Vec<(usize, String, bool)> = Vec::new(); // (line, text, starts a line)
    for (line_no, line) in text.lines().enumerate() {
        if tokens.count(line) as u32 > cap {
            for (i, sentence) in thinkus_common::text::sentences(line).into_iter().enumerate() {
                units.push((line_no, sentence, i == 0));
            }
        } else {
            units.push((line_no, line.to_string(), true));
        }
    }
    // Each unit's words shared with the message, and its tokens with its line break, read once.
    let scores: Vec<usize> = units
        .iter()
        .map(|(_, unit, _)| {
            thinkus_common::text::term_set(unit)
                .iter()
                .filter(|t| query.contains(*t))
                .count()
        })
        .collect();
    let costs: Vec<u32> = units.iter().map(|(_, unit, _)| tokens.count(unit) as u32 + 1).collect();
    let is_row = |unit: &str| unit.trim_start().starts_with('|');
    // Where the table a row is in starts: its header and separator are its first two lines.
    let table_start = |at: usize| {
        let mut start = at;
        while start > 0 && units[start - 1].2 && is_row(&units[start - 1].1) {
            start -= 1;
        }
        start
    };
    let header_of = |at: usize| -> Vec<usize> {
        let start = table_start(at);
        (start..(start + 2).min(at)).collect()
    };
    // A header comes with a row of its table, never alone.
    let is_header = |at: usize| is_row(&units[at].1) && at - table_start(at) < 2;
    let mut order: Vec<usize> = (0..units.len())
        .filter(|&i| !units[i].1.trim().is_empty() && !is_header(i))
        .collect();
    // The record's first unit first when short (what the record is about), then the best,
    // then in their order.
    let lead_fits = costs.first().is_some_and(|&cost| cost - 1 <= cap / 4);
    order.sort_by_key(|&i| (!(i == 0 && lead_fits), std::cmp::Reverse(scores[i]), i));
    let mut kept = vec![false; units.len()];
    let mut used = 0u32;
    for i in order {
        if scores[i] == 0 && i != 0 {
            break;
        }
        let mut adding: Vec<usize> = vec![i];
        if is_row(&units[i].1) {
            adding.extend(header_of(i).into_iter().filter(|&h| !kept[h]));
        }
        let cost: u32 = adding.iter().map(|&u| costs[u]).sum();
        if used + cost > cap {
            continue;
        }
        used += cost;
        for u in adding {
            kept[u] = true;
        }
    }
    let mut out = String::new();
    let mut gap = false;
    let mut last_line: Option<usize> = None;
    for (i, (line_no, unit, _)) in units.iter().enumerate() {
        if !kept[i] {
            gap = true;
            continue;
        }
        if let Some(previous) = last_line {
            out.push_str(if previous == *line_no { " " } else { "\n" });
        }
        if gap {
            out.push_str("… ");
        }
        gap = false;
        last_line = Some(*line_no);
        out.push_str(unit.trim_end());
    }
    if gap {
        out.push_str(" …");
    }
    out
}

/// The context as the reader takes it for current: without the spans it marks as history.
/// A value replaced by a later one is shown, where its history matters, struck through
/// (`~~the budget is $500~~ (replaced on 3 Nov)`); everything outside `~~` spans is current.
pub fn current_text(context: &str) -> String {
    let mut current = String::with_capacity(context.len());
    let mut rest = context;
    while let Some(start) = rest.find("~~") {
        current.push_str(&rest[..start]);
        match rest[start + 2..].find("~~") {
            Some(end) => rest = &rest[start + 2 + end + 2..],
            // An unclosed marker strikes nothing.
            None => {
                current.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    current.push_str(rest);
    current
}

/// Whether `text` states `value`: case and runs of whitespace ignored, and a value that starts
/// or ends with an ASCII letter or digit must not continue a longer word or number there
/// ("$500" is not in "$5000", "Vue" is not in "Vuex"; "3月" is in "在3月").
pub fn contains_value(text: &str, value: &str) -> bool {
    fn collapse(s: &str) -> String {
        s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
    }
    let (text, value) = (collapse(text), collapse(value));
    if value.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let bounded_start = word(value.chars().next());
    let bounded_end = word(value.chars().next_back());
    text.match_indices(&value).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + value.len()..].chars().next();
        !(bounded_start && word(before) || bounded_end && word(after))
    })
}

/// The packed context.
#[derive(Debug, Clone, Default)]
pub struct Packed {
    pub context: String,
    pub sections: Vec<Section>,
    pub tokens: u32,
    /// Trace indexes of the entries that made it in, and their tokens.
    pub included: Vec<(usize, u32)>,
}

fn heading(kind: SectionKind, language: Language) -> String {
    format!("## {}\n", kind.title(language))
}

/// What opening a section costs in [`pack`]: its heading and the blank line between sections.
fn heading_cost(kind: SectionKind, language: Language, tokens: &TokenCounter) -> u32 {
    tokens.count(&heading(kind, language)) as u32 + 1
}

/// What an entry's text costs in [`pack`]: its tokens and its line break.
fn line_cost(text: &str, tokens: &TokenCounter) -> u32 {
    tokens.count(text) as u32 + 1
}

/// The tokens an entry's text may take for the entry to fit a section cap of `cap` alone: the
/// cap less the section's heading and the entry's line break, as [`pack`] counts them. A text
/// rendered to this size is never left out for its own size.
pub fn room_in_section(kind: SectionKind, cap: u32, language: Language, tokens: &TokenCounter) -> u32 {
    cap.saturating_sub(heading_cost(kind, language, tokens) + line_cost("", tokens))
}

/// Packs `entries` (offered best first) into `budget` tokens, the memory sections together
/// into at most `memory_cap`, then lays them out in section order. The whole context,
/// headings included, is counted with `tokens` and never exceeds the budget.
pub fn pack(entries: &[Entry], budget: u32, memory_cap: u32, language: Language, tokens: &TokenCounter) -> Packed {
    // Each entry counted once, with and without its context line; each heading once.
    let costs: Vec<Cost> = entries
        .iter()
        .map(|entry| {
            let bare = line_cost(&entry.text, tokens);
            let with_context = if entry.context.is_empty() {
                bare
            } else {
                line_cost(&entry.with_context(), tokens)
            };
            Cost { bare, with_context }
        })
        .collect();
    let mut headings: BTreeMap<SectionKind, u32> = BTreeMap::new();
    for entry in entries {
        headings
            .entry(entry.kind)
            .or_insert_with(|| heading_cost(entry.kind, language, tokens));
    }
    let mut days: BTreeMap<&str, u32> = BTreeMap::new();
    for day in entries.iter().filter_map(|e| e.day.as_ref()) {
        days.entry(day.label.as_str())
            .or_insert_with(|| tokens.count(&day.line(language)) as u32);
    }
    let fixed = Fixed {
        headings: &headings,
        days: &days,
    };
    let within = Within::of(entries);
    let mut chosen = vec![false; entries.len()];
    // Twice: a context line that a later choice made redundant frees room for more entries,
    // and so does an entry that a later choice's context line now shows.
    for _ in 0..2 {
        choose(entries, &costs, &fixed, &within, &mut chosen, budget, memory_cap);
    }
    let mut chosen: Vec<usize> = (0..entries.len()).filter(|&i| chosen[i]).collect();
    // Laid out by section; stable, so each section keeps the order the entries were offered in.
    chosen.sort_by_key(|&i| entries[i].kind);
    // Render, then make sure the exact count fits (token counts of joined text can differ
    // slightly from the sum of the parts): drop the weakest entry until it does.
    loop {
        let packed = render(entries, &costs, &within, &chosen, language, tokens);
        if packed.tokens <= budget || chosen.is_empty() {
            return packed;
        }
        let weakest = chosen
            .iter()
            .enumerate()
            .max_by_key(|(_, i)| entries[**i].trace)
            .map(|(at, _)| at)
            .expect("chosen is not empty");
        chosen.remove(weakest);
    }
}

/// An entry's tokens, a line break included, as rendered with and without its context line.
struct Cost {
    bare: u32,
    with_context: u32,
}

impl Cost {
    fn of(&self, entry: &Entry, lines: &HashSet<&str>) -> u32 {
        if entry.shows_context(lines) {
            self.with_context
        } else {
            self.bare
        }
    }
}

/// The lines of the chosen entries.
fn lines_of<'a>(chosen: impl Iterator<Item = &'a Entry>) -> HashSet<&'a str> {
    chosen.filter_map(|e| e.line.as_deref()).collect()
}

/// For each entry, the other entries whose context line says all the entry says
/// ([`said_within`]): a turn recalled as its catalog line, and the turn after it, which brings
/// it whole as its context. Decided once per pack, so that choosing (what an entry costs) and
/// rendering (what is written) agree on which entries are already shown.
struct Within(Vec<Vec<usize>>);

impl Within {
    fn of(entries: &[Entry]) -> Self {
        Self(
            entries
                .iter()
                .enumerate()
                .map(|(i, entry)| {
                    entries
                        .iter()
                        .enumerate()
                        .filter(|(j, other)| {
                            *j != i && !other.context.is_empty() && said_within(&entry.text, &other.context)
                        })
                        .map(|(j, _)| j)
                        .collect()
                })
                .collect(),
        )
    }

    /// Whether entry `i` is already shown, whole, as the context line of a chosen entry.
    fn shown(&self, i: usize, entries: &[Entry], chosen: impl Fn(usize) -> bool, lines: &HashSet<&str>) -> bool {
        self.0[i].iter().any(|&j| chosen(j) && entries[j].shows_context(lines))
    }
}

/// What opening a section or a day in a section costs, once: its heading, its day line.
struct Fixed<'a> {
    headings: &'a BTreeMap<SectionKind, u32>,
    days: &'a BTreeMap<&'a str, u32>,
}

/// Tokens taken so far: in all, by memories, by section; and the days opened.
#[derive(Default)]
struct Taken<'a> {
    all: u32,
    memory: u32,
    sections: BTreeMap<SectionKind, u32>,
    days: HashSet<(SectionKind, &'a str)>,
}

impl<'a> Taken<'a> {
    fn add(&mut self, entry: &'a Entry, cost: u32) {
        if let Some(day) = &entry.day {
            self.days.insert((entry.kind, day.label.as_str()));
        }
        self.all += cost;
        if entry.kind.is_memory() {
            self.memory += cost;
        }
        *self.sections.entry(entry.kind).or_insert(0) += cost;
    }
}

/// One greedy pass: the entries already chosen are counted as they now render, then each
/// other entry, in the order offered, is taken if it fits its section's cap, the memory cap
/// and the budget.
fn choose(
    entries: &[Entry],
    costs: &[Cost],
    fixed: &Fixed,
    within: &Within,
    chosen: &mut [bool],
    budget: u32,
    memory_cap: u32,
) {
    let mut lines = lines_of(entries.iter().zip(chosen.iter()).filter(|(_, c)| **c).map(|(e, _)| e));
    let mut taken = Taken::default();
    let cost = |i: usize, chosen: &[bool], lines: &HashSet<&str>, taken: &Taken| {
        let entry = &entries[i];
        // Shown already, as a chosen entry's context line: it adds nothing to the context.
        if within.shown(i, entries, |j| chosen[j], lines) {
            return 0;
        }
        let opens_section = !taken.sections.contains_key(&entry.kind);
        let heading = if opens_section { fixed.headings[&entry.kind] } else { 0 };
        let day = match &entry.day {
            Some(day) if !taken.days.contains(&(entry.kind, day.label.as_str())) => fixed.days[day.label.as_str()],
            _ => 0,
        };
        heading + day + costs[i].of(entry, lines)
    };
    for i in (0..entries.len()).filter(|&i| chosen[i]) {
        let cost = cost(i, chosen, &lines, &taken);
        if cost > 0 {
            taken.add(&entries[i], cost);
        }
    }
    for (i, entry) in entries.iter().enumerate() {
        if chosen[i] {
            continue;
        }
        let cost = cost(i, chosen, &lines, &taken);
        if cost == 0 {
            chosen[i] = true;
            continue;
        }
        let in_section = taken.sections.get(&entry.kind).copied().unwrap_or(0);
        if entry.section_cap.is_some_and(|cap| in_section + cost > cap)
            || (entry.kind.is_memory() && taken.memory + cost > memory_cap)
            || taken.all + cost > budget
        {
            continue;
        }
        taken.add(entry, cost);
        chosen[i] = true;
        if let Some(line) = entry.line.as_deref() {
            lines.insert(line);
        }
    }
}

/// A section's chosen entries in the order they are written: the undated ones as offered,
/// then each day's, days in time order (the earliest entry of a day dates it), each day's
/// entries in the order they were said.
fn laid_out(entries: &[Entry], chosen: &[usize]) -> Vec<usize> {
    let mut undated: Vec<usize> = Vec::new();
    let mut days: Vec<(&Day, Vec<usize>)> = Vec::new();
    for &i in chosen {
        match &entries[i].day {
            None => undated.push(i),
            Some(day) => match days.iter_mut().find(|(d, _)| d.label == day.label) {
                Some((first, group)) => {
                    if day.at < first.at {
                        *first = day;
                    }
                    group.push(i);
                }
                None => days.push((day, vec![i])),
            },
        }
    }
    days.sort_by_key(|(day, _)| day.at);
    // Within a day, in the order things were said: a reply after what it answers.
    for (_, group) in &mut days {
        group.sort_by_key(|&i| entries[i].day.as_ref().map(|d| d.at));
    }
    undated
        .into_iter()
        .chain(days.into_iter().flat_map(|(_, group)| group))
        .collect()
}

/// Whether `text`, an entry as shown ("- assistant: Found it.…", a catalog line cut short), says
/// nothing that `line`, another entry's context line, does not: every piece of it between the
/// "…" of a cut stands in `line`, in order. The catalog line of a turn carries no line of its
/// own to be recognised by, and the turn after it brings the whole turn as its context.
fn said_within(text: &str, line: &str) -> bool {
    let text = text.trim().trim_start_matches("- ");
    let mut rest = line;
    let mut pieces = 0;
    for piece in text.split('…').map(str::trim).filter(|piece| !piece.is_empty()) {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
        pieces += 1;
    }
    pieces > 0
}

fn render(
    entries: &[Entry],
    costs: &[Cost],
    within: &Within,
    chosen: &[usize],
    language: Language,
    tokens: &TokenCounter,
) -> Packed {
    let lines = lines_of(chosen.iter().map(|&i| &entries[i]));
    let mut is_chosen = vec![false; entries.len()];
    for &i in chosen {
        is_chosen[i] = true;
    }
    // An entry a chosen entry's context line already shows in full is written once, there.
    let shown_as_context = |i: usize| within.shown(i, entries, |j| is_chosen[j], &lines);
    let mut sections: Vec<Section> = Vec::new();
    let mut included = Vec::new();
    // `chosen` is in section order: each section's run is laid out on its own.
    for run in chosen.chunk_by(|a, b| entries[*a].kind == entries[*b].kind) {
        let kind = entries[run[0]].kind;
        let mut section = Section {
            kind,
            title: kind.title(language).to_string(),
            text: String::new(),
            tokens: 0,
        };
        let mut day: Option<&str> = None;
        for i in laid_out(entries, run) {
            let entry = &entries[i];
            if shown_as_context(i) {
                included.push((entry.trace, 0));
                continue;
            }
            if let Some(this) = &entry.day
                && day != Some(this.label.as_str())
            {
                section.text.push_str(&this.line(language));
                day = Some(this.label.as_str());
            }
            if entry.shows_context(&lines) {
                section.text.push_str(&entry.with_context());
            } else {
                section.text.push_str(&entry.text);
            }
            section.text.push('\n');
            included.push((entry.trace, costs[i].of(entry, &lines)));
        }
        // A section whose every entry is shown as another's context has nothing of its own.
        if !section.text.is_empty() {
            sections.push(section);
        }
    }
    let mut context = String::new();
    for section in &mut sections {
        section.tokens = tokens.count(&section.text) as u32;
        if !context.is_empty() {
            context.push('\n');
        }
        context.push_str(&heading(section.kind, language));
        context.push_str(&section.text);
    }
    let total = tokens.count(&context) as u32;
    Packed {
        context,
        sections,
        tokens: total,
        included,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struck_spans_are_history() {
        assert_eq!(
            current_text("- now $800\n- ~~was $500~~ (replaced 3 Nov)\n"),
            "- now $800\n-  (replaced 3 Nov)\n"
        );
        assert_eq!(current_text("a ~~b~~ c ~~d"), "a  c ~~d");
    }

    #[test]
    fn values_are_matched_whole() {
        assert!(contains_value("The budget is $500.", "$500"));
        assert!(!contains_value("The budget is $5000.", "$500"));
        assert!(!contains_value("we use Vuex", "Vue"));
        assert!(contains_value("上线改在3月20日", "3月20日"));
        assert!(contains_value("Switched to  PostgreSQL\n16", "postgresql 16"));
        assert!(!contains_value("anything", ""));
    }

    fn entry(kind: SectionKind, text: &str, trace: usize) -> Entry {
        Entry {
            kind,
            text: text.into(),
            trace,
            ..Default::default()
        }
    }

    #[test]
    fn sections_come_in_order_and_the_budget_holds() {
        let tokens = TokenCounter::default();
        let entries = vec![
            entry(SectionKind::Other, "- 预算上限是5万元", 0),
            entry(SectionKind::Decisions, "- 前端用Next.js，因为团队熟悉React", 1),
            entry(SectionKind::Preferences, "- 喜欢简约的设计风格", 2),
            entry(SectionKind::Decisions, "- 支付用Stripe", 3),
        ];
        let packed = pack(&entries, 1000, 1000, Language::Zh, &tokens);
        let kinds: Vec<SectionKind> = packed.sections.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            vec![SectionKind::Decisions, SectionKind::Preferences, SectionKind::Other]
        );
        assert!(packed.context.starts_with("## 相关决策\n- 前端用Next.js"));
        assert_eq!(packed.tokens, tokens.count(&packed.context) as u32);

        for budget in [5, 20, 35, 50] {
            let packed = pack(&entries, budget, budget, Language::Zh, &tokens);
            assert!(packed.tokens <= budget, "{} > {budget}", packed.tokens);
        }
        let small = pack(&entries, 30, 30, Language::Zh, &tokens);
        assert!(small.included.len() < entries.len());
    }

    #[test]
    fn the_best_entries_are_chosen_then_laid_out_by_section() {
        let tokens = TokenCounter::default();
        // Offered best first: a strong conversation turn, then a weak decision.
        let entries = vec![
            entry(
                SectionKind::Other,
                "- Caroline: I went to the LGBTQ support group yesterday",
                0,
            ),
            entry(
                SectionKind::Decisions,
                "- we settled on a weekly newsletter for the launch",
                1,
            ),
        ];
        let one = tokens.count(&heading(SectionKind::Other, Language::En)) as u32
            + 1
            + tokens.count(&entries[0].text) as u32
            + 1;
        let packed = pack(&entries, 1000, one, Language::En, &tokens);
        assert_eq!(packed.included.iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![0]);

        let both = pack(&entries, 1000, 1000, Language::En, &tokens);
        let kinds: Vec<SectionKind> = both.sections.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, vec![SectionKind::Decisions, SectionKind::Other]);
    }

    #[test]
    fn the_memory_cap_leaves_room_for_artifacts() {
        let tokens = TokenCounter::default();
        let mut entries: Vec<Entry> = (0..40)
            .map(|i| {
                entry(
                    SectionKind::Other,
                    &format!("- memory number {i} about the launch plan"),
                    i,
                )
            })
            .collect();
        entries.push(Entry {
            section_cap: Some(100),
            ..entry(SectionKind::Artifacts, "- art_1 build log: 3 errors (lines 10-40)", 40)
        });
        let packed = pack(&entries, 200, 120, Language::En, &tokens);
        let memory: u32 = packed
            .sections
            .iter()
            .filter(|s| s.kind.is_memory())
            .map(|s| s.tokens)
            .sum();
        assert!(memory <= 120, "{memory}");
        assert!(
            packed.included.iter().any(|(t, _)| *t == 40),
            "the artifact fits beside the memories"
        );
        assert!(packed.tokens <= 200);
    }

    #[test]
    fn a_turn_shows_the_turn_before_unless_that_turn_is_in_the_context() {
        let tokens = TokenCounter::default();
        let turn = |text: &str, line: &str, context: &str, trace: usize| Entry {
            context: context.into(),
            line: Some(line.into()),
            ..entry(SectionKind::Other, text, trace)
        };
        let question = "Melanie: Did you go to the support group last week?";
        let entries = vec![
            // The answer ranks first; its question, which it carries as context, second.
            turn(
                "- Caroline: Yes, last Tuesday! (9 May 2023)",
                "Caroline: Yes, last Tuesday!",
                question,
                0,
            ),
            turn(&format!("- {question} (9 May 2023)"), question, "", 1),
            entry(
                SectionKind::Other,
                "- Caroline: the group meets on Tuesdays (2 June 2023)",
                2,
            ),
        ];
        let alone = pack(&entries[..1], 1000, 1000, Language::En, &tokens);
        assert!(
            alone
                .context
                .contains(&format!("- {question}\n  Caroline: Yes, last Tuesday! (9 May 2023)")),
            "{}",
            alone.context
        );

        let all = pack(&entries, 1000, 1000, Language::En, &tokens);
        assert_eq!(all.context.matches(question).count(), 1, "{}", all.context);
        assert_eq!(all.included.len(), 3);

        // Just enough room for the answer with its context: once the question is chosen, the
        // answer's context line goes, and what it took makes room for the third entry.
        let rendered = |text: &str| tokens.count(text) as u32 + 1;
        let heading = tokens.count(&heading(SectionKind::Other, Language::En)) as u32 + 1;
        let cap = heading + rendered(&entries[0].text) + rendered(&entries[1].text) + rendered(&entries[2].text);
        let with_context = heading + rendered(&entries[0].with_context()) + rendered(&entries[1].text);
        assert!(
            with_context + rendered(&entries[2].text) > cap,
            "the test needs the context to matter"
        );
        let packed = pack(&entries, 1000, cap, Language::En, &tokens);
        assert_eq!(
            packed.included.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
            vec![0, 1, 2],
            "{}",
            packed.context
        );
        assert!(packed.tokens <= 1000);
    }

    #[test]
    fn a_turn_recalled_as_its_catalog_line_and_as_the_next_turns_context_is_written_once() {
        let tokens = TokenCounter::default();
        let reply = "assistant: Found it. It's a compile error, not a flaky test: PR #412 renamed a field.";
        let entries = vec![
            // The reply as its catalog line (cut short), ranked first.
            entry(SectionKind::Other, "- assistant: Found it.…", 0),
            // The question after it, which brings the reply whole as its context.
            Entry {
                context: reply.into(),
                ..entry(
                    SectionKind::Other,
                    "- user: ugh ok. can we still hit the launch date?",
                    1,
                )
            },
            // A short line that the context does not hold stays.
            entry(SectionKind::Other, "- assistant: Found the old invoice.…", 2),
        ];
        let packed = pack(&entries, 1000, 1000, Language::En, &tokens);
        assert_eq!(packed.context.matches("Found it.").count(), 1, "{}", packed.context);
        assert!(
            packed
                .context
                .contains(&format!("- {reply}\n  user: ugh ok. can we still hit the launch date?")),
            "{}",
            packed.context
        );
        assert!(packed.context.contains("Found the old invoice."), "{}", packed.context);
        // Every entry is accounted for in the trace, the one shown as a context at no cost.
        let mut included: Vec<(usize, u32)> = packed.included.clone();
        included.sort();
        assert_eq!(included.iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(included[0].1, 0);

        // What the catalog line would have cost is room for another entry: with just enough
        // budget for the question with its context and the third entry, all three are in.
        let rendered = |text: &str| tokens.count(text) as u32 + 1;
        let heading = tokens.count(&heading(SectionKind::Other, Language::En)) as u32 + 1;
        let budget = heading + rendered(&entries[1].with_context()) + rendered(&entries[2].text);
        assert!(
            budget
                < heading
                    + rendered(&entries[0].text)
                    + rendered(&entries[1].with_context())
                    + rendered(&entries[2].text),
            "the test needs the catalog line's cost to matter"
        );
        let packed = pack(&entries, budget, budget, Language::En, &tokens);
        assert!(packed.context.contains("Found the old invoice."), "{}", packed.context);
        assert_eq!(packed.context.matches("Found it.").count(), 1, "{}", packed.context);
        assert!(packed.tokens <= budget);
        // A section whose only entry is shown as another section's context is not written.
        let across = vec![
            entry(SectionKind::Decisions, "- assistant: Found it.…", 0),
            Entry {
                context: reply.into(),
                ..entry(
                    SectionKind::Other,
                    "- user: ugh ok. can we still hit the launch date?",
                    1,
                )
            },
        ];
        let packed = pack(&across, 1000, 1000, Language::En, &tokens);
        assert!(
            !packed.context.contains(SectionKind::Decisions.title(Language::En)),
            "{}",
            packed.context
        );
        assert_eq!(packed.sections.len(), 1);

        // Pieces of a line cut at both ends are found in order, and only in order.
        assert!(said_within(
            "- user: … keep things short …",
            "user: ok. btw keep things short with me"
        ));
        assert!(!said_within(
            "- user: short … keep things",
            "user: ok. btw keep things short with me"
        ));
        assert!(!said_within("- …", "user: anything"));
    }

    #[test]
    fn a_day_is_written_once_and_days_read_in_time_order() {
        let tokens = TokenCounter::default();
        let day = |label: &str, date: &str| Day {
            label: label.into(),
            at: DateTime::parse_from_rfc3339(&format!("{date}T10:00:00Z"))
                .unwrap()
                .with_timezone(&Utc),
        };
        let dated = |text: &str, d: Day, trace: usize| Entry {
            day: Some(d),
            ..entry(SectionKind::Other, text, trace)
        };
        // Offered best first: the later day's turn ranks first.
        let entries = vec![
            dated(
                "- Caroline: joined an activist group",
                day("20 Jul 2023", "2023-07-20"),
                0,
            ),
            dated(
                "- Caroline: went to a support group",
                day("8 May 2023", "2023-05-08"),
                1,
            ),
            dated("- Melanie: painted a sunrise", day("8 May 2023", "2023-05-08"), 2),
            entry(SectionKind::Other, "- a memory without a day", 3),
        ];
        let packed = pack(&entries, 1000, 1000, Language::En, &tokens);
        assert_eq!(
            packed.context,
            "## Other relevant memories\n- a memory without a day\n8 May 2023:\n- Caroline: went to a support group\n- Melanie: painted a sunrise\n20 Jul 2023:\n- Caroline: joined an activist group\n"
        );
        assert_eq!(packed.tokens, tokens.count(&packed.context) as u32);

        // A day already open costs nothing more: room for exactly the three dated entries
        // fits all three, though each with its own date line would not.
        let heading = tokens.count(&heading(SectionKind::Other, Language::En)) as u32 + 1;
        let line = |i: usize| tokens.count(&entries[i].text) as u32 + 1;
        let days = tokens.count("8 May 2023:\n") as u32 + tokens.count("20 Jul 2023:\n") as u32;
        let cap = heading + days + line(0) + line(1) + line(2);
        let packed = pack(&entries[..3], cap, cap, Language::En, &tokens);
        assert_eq!(packed.included.len(), 3, "{}", packed.context);
        assert!(packed.tokens <= cap);
        let packed = pack(&entries[..3], cap - 1, cap - 1, Language::En, &tokens);
        assert_eq!(packed.included.len(), 2, "{}", packed.context);
        // Chinese days end with a Chinese colon.
        let zh = vec![dated("- 小李：上周去了杭州", day("5月8日", "2023-05-08"), 0)];
        let packed = pack(&zh, 1000, 1000, Language::Zh, &tokens);
        assert!(packed.context.contains("5月8日：\n- 小李"), "{}", packed.context);
    }

    fn query(text: &str) -> HashSet<String> {
        thinkus_common::text::term_set(text)
    }

    #[test]
    fn a_long_record_keeps_the_lines_asked_about_whole() {
        let tokens = TokenCounter::default();
        let mut table = String::from("后端岗目前10个候选人：\n| 姓名 | 阶段 | 期望月薪 | 来源 |\n|---|---|---|---|\n");
        for (name, pay) in [
            ("王立", "30k"),
            ("许嘉宁", "28k"),
            ("赵一鸣", "38k"),
            ("孙浩", "24k"),
            ("周雨桐", "27k"),
            ("吴凡", "22k"),
            ("郑凯", "33k"),
            ("刘思远", "26k"),
            ("陈晨", "25k"),
            ("李楠", "29k"),
        ] {
            table.push_str(&format!("| {name} | 一面 | {pay} | 内推 |\n"));
        }
        table.push_str("建议先约王立和许嘉宁终面，赵一鸣的期望超出预算，暂缓。");
        let cut = excerpt(&table, &query("赵一鸣期望多少？"), 140, &tokens);
        assert!(tokens.count(&cut) <= 150, "{cut}");
        assert!(cut.starts_with("后端岗目前10个候选人"), "{cut}");
        assert!(
            cut.contains("| 姓名 | 阶段 | 期望月薪 | 来源 |"),
            "the header of the row: {cut}"
        );
        assert!(cut.contains("| 赵一鸣 | 一面 | 38k | 内推 |"), "the row, whole: {cut}");
        assert!(!cut.contains("孙浩"), "{cut}");
        assert!(cut.contains('…'), "{cut}");

        let story = "We met the landlord on Monday. The kitchen needs new extraction, which the surveyor \
            priced at £14,500 including the ducting. The lease is ten years with a break at five. \
            Parking is shared with the gym next door. The opening is planned for 12 March 2027."
            .repeat(3);
        let cut = excerpt(
            &story,
            &query("what did the surveyor say the extraction costs?"),
            40,
            &tokens,
        );
        assert!(
            cut.contains(
                "The kitchen needs new extraction, which the surveyor priced at £14,500 including the ducting."
            ),
            "a sentence whole: {cut}"
        );
        assert!(!cut.contains("Parking"), "{cut}");

        let short = "预算是35万。";
        assert_eq!(excerpt(short, &query("预算"), 60, &tokens), short);
        assert_eq!(
            excerpt(&table, &query("赵一鸣"), 0, &tokens),
            table,
            "a cap of 0 keeps it whole"
        );
    }

    #[test]
    fn a_text_of_its_room_fits_its_section() {
        let tokens = TokenCounter::default();
        for language in [Language::En, Language::Zh] {
            let cap = 60;
            let room = room_in_section(SectionKind::LastSession, cap, language, &tokens);
            let mut text = String::from("- ");
            while tokens.count(&format!("{text} point")) as u32 <= room {
                text.push_str(" point");
            }
            assert_eq!(
                tokens.count(&text) as u32,
                room,
                "the test needs a text of the room's size"
            );
            let entry = Entry {
                section_cap: Some(cap),
                ..entry(SectionKind::LastSession, &text, 0)
            };
            let packed = pack(std::slice::from_ref(&entry), 1000, 1000, language, &tokens);
            assert_eq!(packed.included.len(), 1, "{language:?}: {}", packed.context);
            // One token more and it no longer fits.
            let over = Entry {
                text: format!("{text} point"),
                ..entry
            };
            assert!(pack(&[over], 1000, 1000, language, &tokens).included.is_empty());
        }
    }

    #[test]
    fn section_caps_hold() {
        let tokens = TokenCounter::default();
        let long = "- ".to_string() + &"artifact line ".repeat(30);
        let entries = vec![
            Entry {
                section_cap: Some(40),
                ..entry(SectionKind::Artifacts, &long, 0)
            },
            entry(SectionKind::Decisions, "- use Postgres", 1),
        ];
        let packed = pack(&entries, 1000, 1000, Language::En, &tokens);
        assert_eq!(packed.included.len(), 1);
        assert_eq!(packed.included[0].0, 1);
    }
}
