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
    ///
    /// The text is encoded in chunks of at most [`CHUNK_BYTES`], cut where the encoder's
    /// pre-tokenizer cuts anyway (before a space that follows a non-space character), so the
    /// count is the same as for the whole text. A run without such a place (a long run of
    /// spaces, or of letters) is cut at a character boundary instead, which may change the
    /// count by a token per cut: the encoder panics on long whitespace runs (its regex gives up
    /// and the library unwraps the error) and takes quadratic time on long pieces.
    pub fn count(&self, text: &str) -> usize {
        chunks(text).map(|chunk| self.bpe.encode_ordinary(chunk).len()).sum()
    }

    /// A floor under [`TokenCounter::count`] that costs no encoding: the number of runs of
    /// non-whitespace characters. Both encodings' pre-tokenizers cut a text into pieces that
    /// never hold characters of two such runs (whitespace is a piece of its own, or leads one
    /// piece), each piece is at least one token, and [`chunks`] only adds cuts.
    pub fn at_least(text: &str) -> usize {
        text.split_whitespace().count()
    }

    /// Whether `text` has more than `limit` tokens, counting no further than needed.
    pub fn exceeds(&self, text: &str, limit: usize) -> bool {
        let mut counted = 0;
        for chunk in chunks(text) {
            counted += self.bpe.encode_ordinary(chunk).len();
            if counted > limit {
                return true;
            }
        }
        false
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

/// The largest piece of text encoded at once.
pub const CHUNK_BYTES: usize = 2048;

/// `text` cut into chunks of at most [`CHUNK_BYTES`] (more only for a character that does not
/// fit), at pre-tokenizer boundaries where there are some.
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= CHUNK_BYTES {
            return Some(std::mem::take(&mut rest));
        }
        let cut = cut_point(rest, CHUNK_BYTES);
        let (chunk, tail) = rest.split_at(cut);
        rest = tail;
        Some(chunk)
    })
}

/// Where to end a chunk of `text` that is longer than `max` bytes: the last space within the
/// first `max` bytes that follows a non-whitespace character (no pre-tokenizer piece spans
/// it), else the last character boundary within them, else the end of the first character.
fn cut_point(text: &str, max: usize) -> usize {
    let bytes = text.as_bytes();
    let mut at = max.min(bytes.len());
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    let window = &bytes[..at];
    let boundary = (1..window.len())
        .rev()
        .find(|&i| window[i] == b' ' && text[..i].chars().next_back().is_some_and(|c| !c.is_whitespace()));
    match boundary {
        Some(i) => i,
        None if at > 0 => at,
        None => text.chars().next().map_or(text.len(), char::len_utf8),
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
    fn chunked_counts_equal_whole_counts_at_word_boundaries() {
        let counter = TokenCounter::default();
        let text = "The budget for the course platform is $800, not $500.  我们决定用Stripe。\n".repeat(200);
        assert!(text.len() > 4 * CHUNK_BYTES);
        let whole = counter.bpe.encode_ordinary(&text).len();
        assert_eq!(counter.count(&text), whole);
        for chunk in chunks(&text) {
            assert!(chunk.len() <= CHUNK_BYTES);
        }
        assert_eq!(
            chunks(&text).collect::<String>(),
            text,
            "chunks cover the text in order"
        );
        assert!(counter.exceeds(&text, whole - 1));
        assert!(!counter.exceeds(&text, whole));
    }

    #[test]
    fn long_runs_neither_panic_nor_take_long() {
        let counter = TokenCounter::default();
        // A long run of spaces before a word made the library's regex give up (its backtrack
        // limit), and the library unwrapped the error: a panic. Long runs of one letter took
        // quadratic time.
        for text in [
            " ".repeat(1 << 20),
            format!("a{}b", " ".repeat(1 << 20)),
            format!("{}b", " ".repeat(1 << 20)),
            "\t \n".repeat(100_000),
            "a".repeat(1 << 20),
            "日".repeat(300_000),
        ] {
            let started = std::time::Instant::now();
            let count = counter.count(&text);
            assert!(count > 0 && count <= text.len());
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "{:?}",
                started.elapsed()
            );
        }
    }

    /// The floor holds for both encodings on text of every kind the packers meet: prose in
    /// both languages, figures, punctuation glued to words, markup, emoji, runs of spaces and
    /// newlines. A floor that counted characters, or words split at punctuation, fails here.
    #[test]
    fn at_least_is_never_above_the_count() {
        let texts = [
            "- [12] we go with Next.js and MongoDB (decision, 3 days ago)",
            "预算从$500调整到$800，下周一前由小王确认。",
            "Q3 revenue: $1,234,567.89 (+12.5% YoY); churn 3.2%",
            "他说：“先上线再说”——然后就没有然后了……",
            "mixed 中英文 text with PR/SLA/OKR and 🚀 emoji 👍",
            "  leading   and trailing   spaces \n\n\t tabs\r\n",
            "a.b,c;d:e!f?g(h)[i]{j}<k>",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "https://example.com/a/b?c=d&e=f#g",
            "",
        ];
        for name in ["cl100k_base", "o200k_base"] {
            let counter = TokenCounter::for_name(name).expect("a known encoding");
            for text in texts {
                assert!(
                    TokenCounter::at_least(text) <= counter.count(text),
                    "{name}: {text:?} has {} tokens, floor {}",
                    counter.count(text),
                    TokenCounter::at_least(text)
                );
            }
        }
        assert_eq!(TokenCounter::at_least("one two  three\nfour"), 4);
    }

    #[test]
    fn encodings_by_name() {
        assert!(TokenCounter::for_name("o200k_base").is_some());
        assert!(TokenCounter::for_name("gpt5").is_none());
    }
}
