//! Rendering recall results as prompt text in the user's language, and packing them into a
//! token budget: whole entries only, best first.

use std::collections::HashSet;

use thinkus_common::model::{Language, Memory, MemoryType};
use thinkus_common::text::{char_count, snippet};
use thinkus_common::tokens::TokenCounter;

/// The longest text of a catalog line taken from a memory's content.
pub const CATALOG_TEXT_CHARS: usize = 120;

/// What a catalog line says of a memory: its summary, or, when the summary is its content cut
/// short ("The budget for the launch, after the review with…"), the sentences of the content
/// that answer the query, kept whole, so a figure, a date or a name is not cut off.
pub fn catalog_text(memory: &Memory, query_terms: &HashSet<String>) -> String {
    let cut = memory.summary.ends_with('…') && char_count(&memory.content) > char_count(&memory.summary);
    if cut {
        snippet(&memory.content, query_terms, CATALOG_TEXT_CHARS)
    } else {
        memory.summary.clone()
    }
}

/// The heading of a catalog.
pub fn catalog_heading(language: Language) -> &'static str {
    match language {
        Language::Zh => "## 相关记忆目录",
        Language::En => "## Memory catalog",
    }
}

/// The heading of details.
pub fn details_heading(language: Language) -> &'static str {
    match language {
        Language::Zh => "## 记忆详情",
        Language::En => "## Memory details",
    }
}

/// One catalog line: `[3] 技术方案决策 - 选择Next.js (项目决策, 2天前) #tech`.
pub fn catalog_line(number: usize, memory: &Memory, text: &str, relative_time: &str, language: Language) -> String {
    let mut line = format!("- [{number}] ");
    if memory.memory_type == MemoryType::ConversationTurn
        && let Some(speaker) = &memory.speaker
    {
        line.push_str(speaker);
        line.push_str(": ");
    }
    line.push_str(text);
    let separator = match language {
        Language::Zh => "，",
        Language::En => ", ",
    };
    line.push_str(&format!(
        " ({}{separator}{relative_time}",
        memory.memory_type.label(language)
    ));
    if memory.importance >= 4 {
        line.push_str(&format!("{separator}★{}", memory.importance));
    }
    line.push(')');
    for tag in memory.tags.iter().take(4) {
        line.push_str(" #");
        line.push_str(tag);
    }
    line
}

/// One details block.
pub fn details_block(
    number: usize,
    memory: &Memory,
    relative_time: &str,
    decisions: &[String],
    language: Language,
) -> String {
    let mut block = format!("### [{number}] {} ({relative_time})\n", memory.summary);
    if let Some(speaker) = &memory.speaker {
        block.push_str(speaker);
        block.push_str(": ");
    }
    block.push_str(memory.content.trim());
    block.push('\n');
    let (context, related, artifacts) = match language {
        Language::Zh => ("背景", "相关决策", "产物"),
        Language::En => ("Context", "Related decisions", "Artifacts"),
    };
    if !memory.context.trim().is_empty() {
        block.push_str(&format!("{context}: {}\n", memory.context.trim()));
    }
    if !decisions.is_empty() {
        block.push_str(&format!("{related}: {}\n", decisions.join("; ")));
    }
    if !memory.artifact_refs.is_empty() {
        let refs: Vec<String> = memory
            .artifact_refs
            .iter()
            .map(|r| {
                if r.locator.is_empty() {
                    format!("{} {}", r.reference, r.desc)
                } else {
                    format!("{} ({}) {}", r.reference, r.locator, r.desc)
                }
            })
            .collect();
        block.push_str(&format!("{artifacts}: {}\n", refs.join("; ")));
    }
    block
}

/// Accumulates rendered parts while they fit in the budget.
#[derive(Debug)]
pub struct Packer<'a> {
    counter: &'a TokenCounter,
    budget: usize,
    text: String,
    used: usize,
}

impl<'a> Packer<'a> {
    pub fn new(counter: &'a TokenCounter, budget: usize) -> Self {
        Self {
            counter,
            budget,
            text: String::new(),
            used: 0,
        }
    }

    /// The tokens `part` would add (with its newline).
    pub fn cost(&self, part: &str) -> usize {
        self.counter.count(part) + 1
    }

    /// A floor under [`Packer::cost`] that costs no encoding ([`TokenCounter::at_least`]).
    fn least_cost(part: &str) -> usize {
        TokenCounter::at_least(part) + 1
    }

    /// Appends `part` if it fits; returns its cost when it did. A part that could not fit even
    /// at its fewest possible tokens is turned away without being counted: a recall tries every
    /// candidate's line, and most of them come after the budget is nearly spent.
    pub fn try_push(&mut self, part: &str) -> Option<usize> {
        if self.used + Self::least_cost(part) > self.budget {
            return None;
        }
        let cost = self.cost(part);
        if self.used + cost > self.budget {
            return None;
        }
        self.push(part, cost);
        Some(cost)
    }

    /// Appends a heading together with the first part under it, or neither.
    pub fn try_push_with_heading(&mut self, heading: &str, part: &str) -> Option<usize> {
        if self.used + Self::least_cost(heading) + Self::least_cost(part) > self.budget {
            return None;
        }
        let heading_cost = self.cost(heading);
        let cost = self.cost(part);
        if self.used + heading_cost + cost > self.budget {
            return None;
        }
        self.push(heading, heading_cost);
        self.push(part, cost);
        Some(cost)
    }

    fn push(&mut self, part: &str, cost: usize) {
        self.text.push_str(part);
        self.text.push('\n');
        self.used += cost;
    }

    pub fn used(&self) -> usize {
        self.used
    }

    /// The text and its exact token count.
    pub fn finish(self) -> (String, usize) {
        let text = self.text.trim_end().to_string();
        let tokens = self.counter.count(&text);
        (text, tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_stops_at_the_budget_and_counts_exactly() {
        let counter = TokenCounter::default();
        let mut packer = Packer::new(&counter, 30);
        assert!(
            packer
                .try_push_with_heading("## Memory catalog", "- [1] budget is $800 (constraint, 2 days ago)")
                .is_some()
        );
        let mut pushed = 1;
        while packer
            .try_push("- [2] we go with Next.js and MongoDB (decision, 3 days ago)")
            .is_some()
        {
            pushed += 1;
        }
        assert!(pushed >= 1);
        let (text, tokens) = packer.finish();
        assert!(tokens <= 30, "{tokens} tokens: {text}");
        assert_eq!(tokens, counter.count(&text));
    }
    #[test]
    fn a_catalog_line_is_not_cut_before_its_figure() {
        use thinkus_common::model::{MemorySource, Scope};
        use thinkus_common::text::term_set;
        let memory = |content: &str| {
            Memory::new(
                Scope::new("u", "cfo"),
                MemoryType::Constraint,
                content.to_string(),
                MemorySource::UserInput,
                chrono::Utc::now(),
            )
        };
        let long = memory(
            "After the review with finance and the two store managers last Tuesday, the budget for the \
             shop launch is now $800. The pilots stay in Harbor and Casa Lumbre.",
        );
        assert!(
            !long.summary.contains("$800"),
            "the stored summary is cut: {}",
            long.summary
        );
        let text = catalog_text(&long, &term_set("what is the launch budget now?"));
        assert!(text.contains("$800"), "{text}");
        assert!(char_count(&text) <= CATALOG_TEXT_CHARS + 2, "{text}");
        let zh = memory(
            "评审会上和财务、两位店长一起重新过了一遍所有的开支项目之后，西溪店的装修预算从35万加到了42万，开业日期不变，仍然是12月20日。",
        );
        let text = catalog_text(&zh, &term_set("装修预算现在是多少"));
        assert!(text.contains("42万"), "{text}");
        // A summary that is not a cut is the line as it was written.
        let short = memory("Budget: $800.");
        assert_eq!(catalog_text(&short, &term_set("budget")), "Budget: $800.");
        let line = catalog_line(
            1,
            &long,
            &catalog_text(&long, &term_set("budget")),
            "today",
            Language::En,
        );
        assert!(line.contains("$800"), "{line}");
    }
}
