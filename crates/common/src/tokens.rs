//! Token counting for budgets, with a real BPE tokenizer (cl100k_base by default).

use std::fmt;

use tiktoken_rs::CoreBPE;

/// The encodings a deployment may count with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Cl100kBase,
    O200kBase,
    P50kBase,
    R50kBase,
}

impl Encoding {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "cl100k_base" => Some(Encoding::Cl100kBase),
            "o200k_base" => Some(Encoding::O200kBase),
            "p50k_base" => Some(Encoding::P50kBase),
            "r50k_base" => Some(Encoding::R50kBase),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::O200kBase => "o200k_base",
            Encoding::P50kBase => "p50k_base",
            Encoding::R50kBase => "r50k_base",
        }
    }
}

/// Counts tokens. Cheap to copy: the BPE tables are loaded once per process and shared.
#[derive(Clone, Copy)]
pub struct TokenCounter {
    encoding: Encoding,
    bpe: &'static CoreBPE,
}

impl fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCounter")
            .field("encoding", &self.encoding.name())
            .finish()
    }
}

impl Default for TokenCounter {
    fn default() -> Self {
        Self::new(Encoding::Cl100kBase)
    }
}

impl TokenCounter {
    pub fn new(encoding: Encoding) -> Self {
        let bpe = match encoding {
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::P50kBase => tiktoken_rs::p50k_base_singleton(),
            Encoding::R50kBase => tiktoken_rs::r50k_base_singleton(),
        };
        Self { encoding, bpe }
    }

    /// Builds the counter for a configured encoding name.
    pub fn for_name(name: &str) -> Option<Self> {
        Encoding::parse(name).map(Self::new)
    }

    pub fn encoding_name(&self) -> &'static str {
        self.encoding.name()
    }

    /// The number of tokens of `text` (special tokens are counted as plain text).
    pub fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.bpe.encode_ordinary(text).len()
    }

    /// The longest prefix of `text` that fits in `max_tokens`, cut at a character boundary,
    /// with "…" appended when cut (the ellipsis is counted).
    pub fn truncate(&self, text: &str, max_tokens: usize) -> String {
        if self.count(text) <= max_tokens {
            return text.to_string();
        }
        if max_tokens <= 1 {
            return String::new();
        }
        // Binary search on character positions: decoding token prefixes could split a
        // multi-byte character, cutting on chars cannot.
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let (mut lo, mut hi) = (0usize, chars.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let end = chars.get(mid).map_or(text.len(), |(offset, _)| *offset);
            let candidate = format!("{}…", &text[..end]);
            if self.count(&candidate) <= max_tokens {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let end = chars.get(lo).map_or(text.len(), |(offset, _)| *offset);
        format!("{}…", text[..end].trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_with_cl100k() {
        let counter = TokenCounter::default();
        assert_eq!(counter.count(""), 0);
        assert_eq!(counter.count("hello world"), 2);
        assert!(counter.count("我喜欢简约的设计风格") >= 5);
    }

    #[test]
    fn truncation_fits_and_keeps_characters_whole() {
        let counter = TokenCounter::default();
        let text = "预算改成$800了，不是之前说的$500。".repeat(20);
        let cut = counter.truncate(&text, 30);
        assert!(counter.count(&cut) <= 30, "{}", counter.count(&cut));
        assert!(cut.ends_with('…'));
        assert!(text.starts_with(cut.trim_end_matches('…')));
        assert_eq!(counter.truncate("short", 10), "short");
    }

    #[test]
    fn encodings_by_name() {
        assert!(TokenCounter::for_name("o200k_base").is_some());
        assert!(TokenCounter::for_name("gpt5").is_none());
    }
}
