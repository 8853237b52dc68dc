//! Locators: parsing the ranges a reader asks for, and reading them from a content.
//!
//! Conventions: lines are 1-based and inclusive, split on `\n` (a final `\n` does not start an
//! extra line, a `\r` before it is dropped from search context); bytes are 0-based with an
//! exclusive end. A byte range on text never splits a UTF-8 character: the start moves back to
//! the first byte of the character it falls in and the end moves forward past the character it
//! falls in, so the range only ever widens (by at most 3 bytes on each side), and the response's
//! `start`/`end` report the range actually returned. When a result is cut at the byte limit, the
//! cut moves back to a character (and, for lines, a line) boundary instead.

use bytes::Bytes;
use serde_json_path::JsonPath;
use thinkus_common::ApiError;
use thinkus_common::model::Language;

use crate::api::{ReadResult, SearchHit};

/// The default and largest byte limit of one read.
pub const DEFAULT_READ_BYTES: usize = 1024 * 1024;
pub const MAX_READ_BYTES: usize = 4 * 1024 * 1024;
/// Lines of context on each side of a search hit.
pub const CONTEXT_LINES: u64 = 5;
/// The most hits a search returns.
pub const MAX_HITS: usize = 100;
/// The longest keyword and JSONPath accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 1024;
/// The most descendant segments (`..`) a JSONPath may hold, filters included: each one can
/// multiply the nodes a query visits by the document's depth.
pub const MAX_DESCENDANT_SEGMENTS: usize = 1;

fn shown(text: &str) -> String {
    text.chars().take(60).collect()
}

fn number(text: &str, field: &str, whole: &str) -> Result<u64, ApiError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::invalid(
            field,
            format!("malformed range {:?} (expected \"a-b\", \"a\" or \"a-\")", shown(whole)),
        ));
    }
    text.parse::<u64>()
        .map_err(|_| ApiError::invalid(field, format!("{:?} is too large", shown(text))))
}

/// Splits "a-b", "a-" or "a" into its bounds.
fn bounds(text: &str, field: &str) -> Result<(u64, Option<u64>), ApiError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ApiError::invalid(field, "is empty"));
    }
    match trimmed.split_once('-') {
        Some((a, b)) => {
            let start = number(a.trim(), field, text)?;
            let end = if b.trim().is_empty() {
                None
            } else {
                Some(number(b.trim(), field, text)?)
            };
            Ok((start, end))
        }
        None => {
            let start = number(trimmed, field, text)?;
            Ok((start, Some(start)))
        }
    }
}

/// Parses a line range "a-b" (1-based, inclusive), "a" (one line) or "a-" (to the end).
pub fn parse_lines(text: &str) -> Result<(u64, Option<u64>), ApiError> {
    let (start, end) = bounds(text, "lines")?;
    if start == 0 {
        return Err(ApiError::invalid("lines", "lines are numbered from 1"));
    }
    if let Some(end) = end
        && end < start
    {
        return Err(ApiError::invalid(
            "lines",
            format!("reversed range {start}-{end} (the end comes before the start)"),
        ));
    }
    Ok((start, end))
}

/// Parses a byte range "a-b" (0-based, end exclusive) or "a-" (to the end).
pub fn parse_bytes(text: &str) -> Result<(u64, Option<u64>), ApiError> {
    let trimmed = text.trim();
    if !trimmed.contains('-') && !trimmed.is_empty() {
        return Err(ApiError::invalid(
            "bytes",
            format!("malformed range {:?} (expected \"a-b\" or \"a-\")", shown(text)),
        ));
    }
    let (start, end) = bounds(text, "bytes")?;
    if let Some(end) = end
        && end <= start
    {
        return Err(ApiError::invalid(
            "bytes",
            format!("reversed or empty range {start}-{end} (the end is exclusive and must exceed the start)"),
        ));
    }
    Ok((start, end))
}

/// Parses an RFC 9535 JSONPath.
pub fn parse_json_path(text: &str) -> Result<JsonPath, ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::invalid("json_path", "is empty"));
    }
    if text.len() > MAX_QUERY_BYTES {
        return Err(ApiError::invalid(
            "json_path",
            format!("longer than {MAX_QUERY_BYTES} bytes"),
        ));
    }
    let descendants = text.matches("..").count();
    if descendants > MAX_DESCENDANT_SEGMENTS {
        return Err(ApiError::invalid(
            "json_path",
            format!(
                "{:?} has {descendants} descendant segments (..); at most {MAX_DESCENDANT_SEGMENTS} is allowed",
                shown(text)
            ),
        ));
    }
    JsonPath::parse(text.trim()).map_err(|err| {
        ApiError::invalid(
            "json_path",
            format!(
                "not a valid JSONPath {:?}: {} (at {})",
                shown(text),
                err.message(),
                err.position()
            ),
        )
    })
}

/// Checks a search keyword.
pub fn check_keyword(text: &str) -> Result<String, ApiError> {
    let keyword = text.trim();
    if keyword.is_empty() {
        return Err(ApiError::invalid("search", "is empty"));
    }
    if keyword.len() > MAX_QUERY_BYTES {
        return Err(ApiError::invalid(
            "search",
            format!("longer than {MAX_QUERY_BYTES} bytes"),
        ));
    }
    if keyword.contains('\n') {
        return Err(ApiError::invalid("search", "must be on one line"));
    }
    Ok(keyword.to_string())
}

/// A text content with its line index, as partial reads use it.
#[derive(Debug)]
pub struct Indexed {
    pub bytes: Bytes,
    /// The byte offset where each line starts.
    line_starts: Vec<usize>,
}

impl Indexed {
    pub fn new(bytes: Bytes) -> Self {
        let mut line_starts = Vec::new();
        if !bytes.is_empty() {
            line_starts.push(0);
            for (i, b) in bytes.iter().enumerate() {
                if *b == b'\n' && i + 1 < bytes.len() {
                    line_starts.push(i + 1);
                }
            }
        }
        Self { bytes, line_starts }
    }

    pub fn line_count(&self) -> u64 {
        self.line_starts.len() as u64
    }

    /// Memory held, for the cache's accounting.
    pub fn weight(&self) -> usize {
        self.bytes.len() + self.line_starts.len() * std::mem::size_of::<usize>()
    }

    /// Byte span of line `n` (1-based), with its newline.
    fn span(&self, n: u64) -> (usize, usize) {
        let i = (n - 1) as usize;
        let start = self.line_starts[i];
        let end = self.line_starts.get(i + 1).copied().unwrap_or(self.bytes.len());
        (start, end)
    }

    /// Line `n` without its line ending.
    fn line(&self, n: u64) -> &[u8] {
        let (start, end) = self.span(n);
        let mut line = &self.bytes[start..end];
        if let Some(stripped) = line.strip_suffix(b"\n") {
            line = stripped;
        }
        if let Some(stripped) = line.strip_suffix(b"\r") {
            line = stripped;
        }
        line
    }
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The longest prefix of `bytes` of at most `max` bytes that ends on a character boundary.
fn char_prefix(bytes: &[u8], max: usize) -> usize {
    if bytes.len() <= max {
        return bytes.len();
    }
    let mut cut = max;
    while cut > 0 && is_continuation(bytes[cut]) {
        cut -= 1;
    }
    cut
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

fn note(language: Language, en: String, zh: String) -> String {
    match language {
        Language::En => en,
        Language::Zh => zh,
    }
}

/// Reads lines `start..=end` (clamped to the content).
pub fn read_lines(content: &Indexed, start: u64, end: Option<u64>, max_bytes: usize, language: Language) -> ReadResult {
    let total = content.line_count();
    let mut result = ReadResult {
        total_lines: total,
        total_bytes: content.bytes.len() as u64,
        ..Default::default()
    };
    if start > total {
        result.past_end = true;
        result.note = note(
            language,
            format!("line {start} is past the end: the artifact has {total} lines"),
            format!("第{start}行超出范围：该产物共{total}行"),
        );
        return result;
    }
    let wanted_end = end.unwrap_or(total);
    let last = wanted_end.min(total);
    result.past_end = wanted_end > total;
    let (from, _) = content.span(start);
    let (_, mut to) = content.span(last);
    let mut returned_last = last;
    if to - from > max_bytes {
        result.truncated = true;
        // Whole lines when at least one fits, otherwise the first line cut at a character.
        let limit = from + max_bytes;
        let mut n = start;
        while n < last && content.span(n).1 <= limit {
            n += 1;
        }
        if content.span(start).1 <= limit {
            returned_last = n - 1;
            to = content.span(returned_last).1;
        } else {
            returned_last = start;
            to = from + char_prefix(&content.bytes[from..], max_bytes);
        }
    }
    result.content = text_of(&content.bytes[from..to]);
    result.start = start;
    result.end = returned_last;
    result.note = if result.truncated {
        note(
            language,
            format!("cut at {max_bytes} bytes after line {returned_last}; the artifact has {total} lines"),
            format!("已在{max_bytes}字节处截断（至第{returned_last}行）；该产物共{total}行"),
        )
    } else if result.past_end {
        note(
            language,
            format!("the range goes past the end: returned lines {start}-{returned_last} of {total}"),
            format!("范围超出结尾：已返回第{start}-{returned_last}行，共{total}行"),
        )
    } else {
        String::new()
    };
    result
}

/// Part of a content fetched for a byte read: it starts at `start` and reaches 3 bytes past
/// the requested end (or the content's end) so text ranges can widen to whole characters.
#[derive(Debug, Clone, Copy)]
pub struct ByteWindow<'a> {
    pub data: &'a [u8],
    pub start: u64,
    /// The content's size.
    pub total: u64,
}

/// Reads bytes `start..end` of a content from a window of it.
pub fn read_bytes(
    window: ByteWindow<'_>,
    start: u64,
    end: Option<u64>,
    is_text: bool,
    max_bytes: usize,
    language: Language,
) -> ReadResult {
    let ByteWindow {
        data: window,
        start: window_start,
        total,
    } = window;
    let mut result = ReadResult {
        total_bytes: total,
        ..Default::default()
    };
    if start >= total {
        result.past_end = true;
        result.start = total;
        result.end = total;
        result.note = note(
            language,
            format!("byte {start} is past the end: the artifact has {total} bytes"),
            format!("第{start}字节超出范围：该产物共{total}字节"),
        );
        return result;
    }
    let wanted_end = end.unwrap_or(total);
    result.past_end = wanted_end > total;
    let window_end = window_start + window.len() as u64;
    let limit_end = wanted_end.min(total);
    let mut from = start;
    let mut to = limit_end.min(window_end);
    if is_text {
        while from > window_start && is_continuation(window[(from - window_start) as usize]) {
            from -= 1;
        }
        while to < window_end && is_continuation(window[(to - window_start) as usize]) {
            to += 1;
        }
    }
    let slice = &window[(from - window_start) as usize..(to - window_start) as usize];
    let kept = if is_text {
        char_prefix(slice, max_bytes)
    } else {
        slice.len().min(max_bytes)
    };
    let slice = &slice[..kept];
    result.start = from;
    result.end = from + kept as u64;
    // The window may stop short of the range when the byte limit would cut it anyway.
    result.truncated = result.end < limit_end;
    if is_text {
        result.content = text_of(slice);
    } else {
        result.data = slice.to_vec();
    }
    let widened = from != start || (!result.truncated && result.end > limit_end);
    let mut notes = Vec::new();
    if widened {
        notes.push(note(
            language,
            format!(
                "widened to bytes {}-{} so no UTF-8 character is split",
                result.start, result.end
            ),
            format!("已扩展为第{}-{}字节，以免截断UTF-8字符", result.start, result.end),
        ));
    }
    if result.truncated {
        notes.push(note(
            language,
            format!("cut at {max_bytes} bytes"),
            format!("已在{max_bytes}字节处截断"),
        ));
    }
    if result.past_end {
        notes.push(note(
            language,
            format!("the range goes past the end: the artifact has {total} bytes"),
            format!("范围超出结尾：该产物共{total}字节"),
        ));
    }
    result.note = notes.join("; ");
    result
}

/// A writer that keeps at most `limit` bytes and refuses the rest, so that a serializer
/// writing into it stops at the limit instead of rendering everything.
#[derive(Debug)]
pub(crate) struct Limited {
    kept: Vec<u8>,
    limit: usize,
    /// Bytes offered, kept or not: at most one write past the limit.
    offered: usize,
}

impl Limited {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            kept: Vec::with_capacity(limit.min(64 * 1024)),
            limit,
            offered: 0,
        }
    }

    fn is_full(&self) -> bool {
        self.offered > self.limit
    }
}

impl std::io::Write for Limited {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.offered += buf.len();
        let room = self.limit - self.kept.len();
        if buf.len() > room {
            self.kept.extend_from_slice(&buf[..room]);
            return Err(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                "the read's byte limit",
            ));
        }
        self.kept.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Evaluates a JSONPath on a JSON content; the matches come back as a JSON array, rendered
/// one match at a time and only up to `max_bytes`: a `$..*` of a large document matches every
/// node, and every node holds its whole subtree, so the full rendering can be many times the
/// document's size.
pub fn read_json_path(
    content: &[u8],
    path: &JsonPath,
    max_bytes: usize,
    language: Language,
) -> Result<ReadResult, ApiError> {
    use std::io::Write as _;

    let value: serde_json::Value = serde_json::from_slice(content).map_err(|err| {
        ApiError::invalid(
            "json_path",
            format!("the artifact is not JSON ({err}); use lines, bytes or search"),
        )
    })?;
    let nodes = path.query(&value);
    let matches = nodes.len() as u64;
    let mut out = Limited::new(max_bytes);
    let _ = out.write_all(b"[");
    for (i, node) in nodes.iter().enumerate() {
        if out.is_full() {
            break;
        }
        if i > 0 {
            let _ = out.write_all(b",");
        }
        // An error here is the limit: the serializer stops at the first refused write.
        let _ = serde_json::to_writer(&mut out, node);
    }
    let _ = out.write_all(b"]");
    let truncated = out.is_full();
    let kept = char_prefix(&out.kept, max_bytes);
    let mut rendered = out.kept;
    rendered.truncate(kept);
    let rendered = String::from_utf8(rendered).map_err(|err| ApiError::internal(err.to_string()))?;
    Ok(ReadResult {
        content: rendered,
        truncated,
        matches,
        total_bytes: content.len() as u64,
        note: match (matches, truncated) {
            (0, _) => note(language, "no match".into(), "没有匹配".into()),
            (_, true) => note(
                language,
                format!("{matches} matches, cut at {max_bytes} bytes"),
                format!("{matches}个匹配，已在{max_bytes}字节处截断"),
            ),
            _ => String::new(),
        },
        ..Default::default()
    })
}

fn contains_ignore_case(line: &str, keyword_lower: &str) -> bool {
    if keyword_lower.is_ascii() {
        let needle = keyword_lower.as_bytes();
        line.as_bytes()
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
    } else {
        line.to_lowercase().contains(keyword_lower)
    }
}

/// Finds a keyword (case-insensitive), returning each hit line with its context.
pub fn search(content: &Indexed, keyword: &str, max_bytes: usize, language: Language) -> ReadResult {
    let total = content.line_count();
    let keyword_lower = keyword.to_lowercase();
    let mut result = ReadResult {
        total_lines: total,
        total_bytes: content.bytes.len() as u64,
        ..Default::default()
    };
    let mut rendered = String::new();
    let mut found = 0u64;
    for n in 1..=total {
        let line = String::from_utf8_lossy(content.line(n));
        if !contains_ignore_case(&line, &keyword_lower) {
            continue;
        }
        found += 1;
        if result.truncated {
            continue;
        }
        let start_line = n.saturating_sub(CONTEXT_LINES).max(1);
        let end_line = (n + CONTEXT_LINES).min(total);
        let mut text = String::new();
        let mut block = format!("@@ line {n} (lines {start_line}-{end_line}) @@\n");
        for m in start_line..=end_line {
            let context = String::from_utf8_lossy(content.line(m));
            if m > start_line {
                text.push('\n');
            }
            text.push_str(&context);
            let marker = if m == n { '>' } else { ' ' };
            block.push_str(&format!("{marker}{m:>6} | {context}\n"));
        }
        if result.hits.len() >= MAX_HITS || rendered.len() + block.len() > max_bytes {
            result.truncated = true;
            continue;
        }
        rendered.push_str(&block);
        result.hits.push(SearchHit {
            line: n,
            start_line,
            end_line,
            text,
        });
    }
    result.content = rendered;
    result.matches = found;
    if let (Some(first), Some(last)) = (result.hits.first(), result.hits.last()) {
        result.start = first.line;
        result.end = last.line;
    }
    let shown_hits = result.hits.len();
    result.note = if found == 0 {
        note(
            language,
            format!("no line contains {keyword:?}"),
            format!("没有包含“{keyword}”的行"),
        )
    } else if result.truncated {
        note(
            language,
            format!("{found} lines match; the first {shown_hits} are shown"),
            format!("共{found}行匹配，仅显示前{shown_hits}处"),
        )
    } else {
        String::new()
    };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(data: &[u8]) -> ByteWindow<'_> {
        ByteWindow {
            data,
            start: 0,
            total: data.len() as u64,
        }
    }

    fn indexed(text: &str) -> Indexed {
        Indexed::new(Bytes::from(text.to_string()))
    }

    #[test]
    fn line_ranges_parse_and_refuse_nonsense() {
        assert_eq!(parse_lines("1-50").unwrap(), (1, Some(50)));
        assert_eq!(parse_lines(" 7 ").unwrap(), (7, Some(7)));
        assert_eq!(parse_lines("5-").unwrap(), (5, None));
        for bad in [
            "",
            "0-3",
            "9-2",
            "a-b",
            "1-2-3",
            "-5",
            "1..5",
            "１-2",
            "99999999999999999999999-1",
        ] {
            let err = parse_lines(bad).unwrap_err();
            assert!(err.message.starts_with("lines: "), "{bad:?}: {}", err.message);
        }
    }

    #[test]
    fn byte_ranges_parse_and_refuse_nonsense() {
        assert_eq!(parse_bytes("0-100").unwrap(), (0, Some(100)));
        assert_eq!(parse_bytes("100-").unwrap(), (100, None));
        for bad in ["", "5", "10-10", "10-3", "x-1", "-"] {
            let err = parse_bytes(bad).unwrap_err();
            assert!(err.message.starts_with("bytes: "), "{bad:?}: {}", err.message);
        }
    }

    #[test]
    fn json_paths_parse_or_name_the_locator() {
        assert!(parse_json_path("$.data.users[0]").is_ok());
        assert!(parse_json_path("$..name").is_ok());
        for bad in ["", "data.users", "$[", "$.a[?(@.x"] {
            let err = parse_json_path(bad).unwrap_err();
            assert!(err.message.starts_with("json_path: "), "{bad:?}: {}", err.message);
        }
    }

    #[test]
    fn lines_are_read_inclusive_and_past_the_end_is_said() {
        let content = indexed("one\ntwo\nthree\nfour\n");
        assert_eq!(content.line_count(), 4);
        let r = read_lines(&content, 2, Some(3), 1024, Language::En);
        assert_eq!(r.content, "two\nthree\n");
        assert_eq!((r.start, r.end, r.past_end), (2, 3, false));
        let r = read_lines(&content, 3, Some(10), 1024, Language::En);
        assert_eq!(r.content, "three\nfour\n");
        assert!(r.past_end);
        assert!(r.note.contains("of 4"), "{}", r.note);
        let r = read_lines(&content, 9, None, 1024, Language::Zh);
        assert!(r.past_end && r.content.is_empty());
        assert!(r.note.contains("共4行"), "{}", r.note);
    }

    #[test]
    fn line_reads_cut_on_line_then_char_boundaries() {
        let content = indexed("aaaa\nbbbb\ncccc\n");
        let r = read_lines(&content, 1, None, 11, Language::En);
        assert_eq!(r.content, "aaaa\nbbbb\n");
        assert_eq!(r.end, 2);
        assert!(r.truncated);
        let content = indexed("日本語のテキスト\n");
        let r = read_lines(&content, 1, None, 4, Language::En);
        assert_eq!(r.content, "日");
        assert!(r.truncated);
    }

    #[test]
    fn byte_reads_never_split_a_character() {
        let text = "a日b";
        let bytes = text.as_bytes();
        // Byte 2 is inside 日 (bytes 1-3): the range widens to the whole character.
        let r = read_bytes(win(bytes), 2, Some(3), true, 1024, Language::En);
        assert_eq!(r.content, "日");
        assert_eq!((r.start, r.end), (1, 4));
        assert!(r.note.contains("widened"), "{}", r.note);
        let r = read_bytes(win(bytes), 0, Some(100), true, 1024, Language::En);
        assert_eq!(r.content, text);
        assert!(r.past_end);
        let r = read_bytes(win(bytes), 0, None, true, 2, Language::En);
        assert_eq!(r.content, "a");
        assert!(r.truncated);
        let r = read_bytes(win(&[0, 159, 146, 150]), 1, Some(3), false, 1024, Language::En);
        assert_eq!(r.data, vec![159, 146]);
        assert!(r.content.is_empty());
    }

    #[test]
    fn json_path_reads_matches_and_refuses_non_json() {
        let doc = br#"{"data":{"users":[{"name":"ann"},{"name":"bo"}]}}"#;
        let path = parse_json_path("$.data.users[*].name").unwrap();
        let r = read_json_path(doc, &path, 1024, Language::En).unwrap();
        assert_eq!(r.content, r#"["ann","bo"]"#);
        assert_eq!(r.matches, 2);
        let r = read_json_path(doc, &path, 5, Language::En).unwrap();
        assert_eq!(r.content, r#"["ann"#);
        assert!(
            r.truncated && r.note.contains("2 matches, cut at 5 bytes"),
            "{}",
            r.note
        );
        let r = read_json_path(doc, &path, 12, Language::En).unwrap();
        assert_eq!((r.content.as_str(), r.truncated), (r#"["ann","bo"]"#, false));
        let err = read_json_path(b"not json", &path, 1024, Language::En).unwrap_err();
        assert!(
            err.message.starts_with("json_path: the artifact is not JSON"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_json_path_read_stops_at_its_byte_limit() {
        // 100 nested arrays around a 1 MB string: `$..*` matches 100 nodes that each hold
        // the string, 100 MB in all. The read renders no more than it returns.
        let depth = 100;
        let doc = format!("{}\"{}\"{}", "[".repeat(depth), "x".repeat(1 << 20), "]".repeat(depth));
        let path = parse_json_path("$..*").unwrap();
        let r = read_json_path(doc.as_bytes(), &path, 4096, Language::En).unwrap();
        assert_eq!(r.matches, depth as u64);
        assert!(r.truncated && r.content.len() <= 4096);
        assert!(
            r.content.starts_with("[[[[") && r.content.ends_with("xxxx"),
            "{}",
            &r.content[..20]
        );

        let mut limited = Limited::new(4096);
        let value: serde_json::Value = serde_json::from_str(&doc).unwrap();
        let nodes = path.query(&value);
        let _ = serde_json::to_writer(&mut limited, nodes.first().unwrap());
        // The first node alone is the 1 MB string plus brackets; all of them would be 100 MB.
        assert!(
            limited.offered < 2 << 20,
            "the serializer stopped at the limit: {} bytes offered",
            limited.offered
        );
    }

    #[test]
    fn json_paths_with_several_descendant_segments_are_refused() {
        for bad in ["$..a..b", "$..[?@..x]", "$[?count(@..*) > 1]..y"] {
            let err = parse_json_path(bad).unwrap_err();
            assert!(err.message.contains("descendant segments"), "{bad}: {}", err.message);
        }
        assert!(parse_json_path("$..*").is_ok());
        assert!(parse_json_path("$[?count(@..*) > 1]").is_ok());
    }

    #[test]
    fn search_returns_hits_with_context_and_line_numbers() {
        let text: String = (1..=30)
            .map(|i| format!("line {i}{}\n", if i == 12 { " Login here" } else { "" }))
            .collect();
        let content = indexed(&text);
        let r = search(&content, "login", 1 << 20, Language::En);
        assert_eq!(r.hits.len(), 1);
        let hit = &r.hits[0];
        assert_eq!((hit.line, hit.start_line, hit.end_line), (12, 7, 17));
        assert!(hit.text.starts_with("line 7\n"));
        assert!(r.content.contains(">    12 | line 12 Login here"), "{}", r.content);
        let none = search(&content, "absent", 1 << 20, Language::En);
        assert!(none.hits.is_empty() && none.note.contains("no line"));
    }

    mod fuzz {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Any locator text parses or is refused naming its field; never a panic.
            #[test]
            fn locator_parsing_never_panics(text in "\\PC{0,40}", digits in "[0-9 -]{0,30}") {
                for input in [text.as_str(), digits.as_str()] {
                    if let Err(err) = parse_lines(input) {
                        prop_assert!(err.message.starts_with("lines: "), "{}", err.message);
                    }
                    if let Err(err) = parse_bytes(input) {
                        prop_assert!(err.message.starts_with("bytes: "), "{}", err.message);
                    }
                    if let Err(err) = parse_json_path(input) {
                        prop_assert!(err.message.starts_with("json_path: "), "{}", err.message);
                    }
                    if let Err(err) = check_keyword(input) {
                        prop_assert!(err.message.starts_with("search: "), "{}", err.message);
                    }
                }
            }

            /// Reads of any range of any text return valid text within the limits.
            #[test]
            fn reads_never_panic_or_split_characters(
                text in "(\\PC|\n){0,200}",
                start in 0u64..300,
                len in proptest::option::of(1u64..300),
                max in 1usize..64,
                keyword in "\\PC{1,4}",
            ) {
                let content = Indexed::new(Bytes::from(text.clone()));
                let total_lines = content.line_count();
                let line_start = start.max(1);
                let r = read_lines(&content, line_start, len.map(|l| line_start + l - 1), max, Language::En);
                prop_assert!(r.content.len() <= max);
                prop_assert!(text.contains(&r.content));
                prop_assert_eq!(r.past_end, len.map(|l| line_start + l - 1).unwrap_or(total_lines) > total_lines || line_start > total_lines);
                let total = text.len() as u64;
                let window = ByteWindow { data: text.as_bytes(), start: 0, total };
                let r = read_bytes(window, start, len.map(|l| start + l), true, max, Language::Zh);
                prop_assert!(r.content.len() <= max);
                prop_assert!(r.start <= r.end && r.end <= total.max(r.start));
                if r.end > r.start {
                    prop_assert_eq!(&text.as_bytes()[r.start as usize..r.end as usize], r.content.as_bytes());
                }
                let r = search(&content, &keyword, max.max(8) * 64, Language::En);
                for hit in &r.hits {
                    prop_assert!(hit.start_line <= hit.line && hit.line <= hit.end_line && hit.end_line <= total_lines);
                }
                if let Ok(path) = parse_json_path("$..a") {
                    let _ = read_json_path(text.as_bytes(), &path, max, Language::En);
                }
            }
        }
    }
}
