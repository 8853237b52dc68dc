//! Compacts: what goes into a context instead of a content, built from the content's structure
//! without a language model. The content is first analysed once into [`Analysis`] (language
//! independent facts: the kind, top-level items, JSON shape, columns, level counts, headings,
//! lead sentences), then rendered in the injection format of the design (001 section 3.3.3) in
//! Chinese or English, dropping list entries until the rendering fits the token limit.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;
use thinkus_common::model::Language;
use thinkus_common::text::{sentences, summarize_to};
use thinkus_common::tokens::TokenCounter;

use crate::api::{ArtifactKind, Compact, LocatorExample, LocatorKind};

/// One top-level definition of a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeItem {
    /// "fn main", "class UserService", "impl Display for Id".
    pub label: String,
    pub start: u64,
    pub end: u64,
}

/// A column of a table and what its values look like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub numeric: bool,
}

/// What was learnt from a content's structure.
#[derive(Debug, Clone, PartialEq)]
pub enum Facts {
    Code {
        language: &'static str,
        items: Vec<CodeItem>,
    },
    Json {
        /// "object", "array", "string", ...
        root: &'static str,
        /// Keys of a root object, or the length of a root array.
        root_size: usize,
        /// A compact description of the structure, two levels deep.
        shape: String,
        /// A JSONPath that selects something, e.g. `$.data.users[0]`.
        example_path: String,
    },
    Table {
        delimiter: char,
        columns: Vec<Column>,
    },
    Log {
        /// Lines per level, most severe first.
        counts: Vec<(&'static str, u64)>,
        /// The first error lines: (line, text).
        first_errors: Vec<(u64, String)>,
    },
    Document {
        /// (level, line, title).
        headings: Vec<(u8, u64, String)>,
    },
    Text {
        lead: String,
    },
    Binary {
        format: Option<&'static str>,
    },
}

/// A content's analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub kind: ArtifactKind,
    /// The MIME type detected (used when the caller gave none).
    pub mime_type: String,
    pub facts: Facts,
    /// Only the head of the content was analysed (it was larger than the analysis limit).
    pub partial_bytes: Option<u64>,
    /// A keyword that occurs in the content, for the search locator's example.
    pub search_example: Option<String>,
}

/// What is analysed: the head of a content (all of it unless `partial_bytes` is set).
#[derive(Debug, Clone, Copy)]
pub struct Content<'a> {
    /// The text, or `None` for binary content.
    pub text: Option<&'a str>,
    /// The first bytes, for binary signatures.
    pub head: &'a [u8],
    /// Set to the analysed length when the content is longer.
    pub partial_bytes: Option<u64>,
    pub path: Option<&'a str>,
    pub mime_type: Option<&'a str>,
    /// The longest text parsed as JSON (a parsed document takes many times its size in
    /// memory): a longer one is analysed as text.
    pub json_max_bytes: usize,
}

fn extension(path: Option<&str>) -> Option<String> {
    let name = path?.rsplit(['/', '\\']).next()?;
    let (_, ext) = name.rsplit_once('.')?;
    Some(ext.to_ascii_lowercase())
}

const CODE_EXTENSIONS: &[(&str, &str)] = &[
    ("rs", "Rust"),
    ("py", "Python"),
    ("js", "JavaScript"),
    ("mjs", "JavaScript"),
    ("cjs", "JavaScript"),
    ("jsx", "JavaScript"),
    ("ts", "TypeScript"),
    ("tsx", "TypeScript"),
    ("go", "Go"),
    ("java", "Java"),
    ("kt", "Kotlin"),
    ("cs", "C#"),
    ("scala", "Scala"),
    ("swift", "Swift"),
    ("php", "PHP"),
    ("c", "C"),
    ("h", "C"),
    ("cc", "C++"),
    ("cpp", "C++"),
    ("hpp", "C++"),
    ("rb", "Ruby"),
    ("sh", "Shell"),
    ("bash", "Shell"),
    ("lua", "Lua"),
    ("sql", "SQL"),
    ("proto", "Protobuf"),
    ("toml", "TOML"),
    ("yaml", "YAML"),
    ("yml", "YAML"),
];

fn regex(pattern: &str) -> Regex {
    // The patterns are constants of this file; a typo is caught by the unit tests.
    Regex::new(pattern).unwrap_or_else(|err| panic!("invalid built-in pattern {pattern}: {err}"))
}

/// How a language's top-level items are found and where they end.
struct ItemRules {
    patterns: Vec<Regex>,
    /// Items end where the next item starts (TOML sections, SQL statements), instead of at the
    /// next line back at column 0.
    until_next_item: bool,
}

static RULES: LazyLock<BTreeMap<&'static str, ItemRules>> = LazyLock::new(|| {
    let rules = |patterns: &[&str], until_next_item: bool| ItemRules {
        patterns: patterns.iter().map(|p| regex(p)).collect(),
        until_next_item,
    };
    let jvm = r"^(?:(?:public|private|protected|internal|abstract|final|static|sealed|data|open|export|inline|override)\s+)*(?P<item>(?:class|interface|enum|record|object|struct|trait|protocol|extension|fun|func|function|def)\s+[A-Za-z_]\w*)";
    let mut map = BTreeMap::new();
    map.insert(
        "Rust",
        rules(
            &[
                r"^(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|unsafe|const|extern\s+\S+)\s+)*(?P<item>(?:fn|struct|enum|trait|type|union)\s+[A-Za-z_][A-Za-z0-9_]*|mod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{|macro_rules!\s*[A-Za-z_][A-Za-z0-9_]*)",
                r"^(?:unsafe\s+)?(?P<item>impl\b[^{;]*)",
            ],
            false,
        ),
    );
    map.insert(
        "Python",
        rules(&[r"^(?:async\s+)?(?P<item>(?:def|class)\s+[A-Za-z_]\w*)"], false),
    );
    let js = [
        r"^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?P<item>(?:function\*?|class|interface|enum|type)\s+[A-Za-z_$][\w$]*)",
        r"^(?:export\s+)?(?:const|let|var)\s+(?P<item>[A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?(?:function|\([^)]*\)\s*(?::\s*[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>)",
    ];
    map.insert("JavaScript", rules(&js, false));
    map.insert("TypeScript", rules(&js, false));
    map.insert(
        "Go",
        rules(
            &[r"^(?P<item>func\s+(?:\([^)]*\)\s*)?[A-Za-z_]\w*|type\s+[A-Za-z_]\w*)"],
            false,
        ),
    );
    for language in ["Java", "Kotlin", "C#", "Scala", "Swift", "PHP"] {
        map.insert(language, rules(&[jvm], false));
    }
    let c = [
        r"^(?:typedef\s+)?(?P<item>(?:struct|class|enum|union|namespace)\s+[A-Za-z_]\w*)",
        r"^(?:(?:static|inline|extern|const|unsigned|signed)\s+)*[A-Za-z_][\w:<>,]*[\s\*&]+\**(?P<item>[A-Za-z_][\w:]*)\s*\([^;]*$",
    ];
    map.insert("C", rules(&c, false));
    map.insert("C++", rules(&c, false));
    map.insert(
        "Ruby",
        rules(&[r"^(?P<item>(?:def|class|module)\s+[A-Za-z_][\w:.?!]*)"], false),
    );
    map.insert(
        "Shell",
        rules(&[r"^(?:function\s+)?(?P<item>[A-Za-z_][\w-]*)\s*\(\)"], false),
    );
    map.insert("Lua", rules(&[r"^(?:local\s+)?(?P<item>function\s+[\w.:]+)"], false));
    map.insert(
        "SQL",
        rules(
            &[
                r"(?i)^(?P<item>create\s+(?:or\s+replace\s+)?(?:unique\s+)?(?:table|index|view|function|trigger|type|procedure)\s+(?:if\s+not\s+exists\s+)?[\w.\x22]+)",
            ],
            true,
        ),
    );
    map.insert(
        "Protobuf",
        rules(&[r"^(?P<item>(?:message|service|enum)\s+\w+)"], false),
    );
    map.insert("TOML", rules(&[r"^(?P<item>\[\[?[^\]]+\]\]?)"], true));
    map.insert("YAML", rules(&[r"^(?P<item>[A-Za-z_][\w.-]*):"], false));
    map
});

/// Guesses a code language when the path does not say.
fn sniff_language(text: &str) -> Option<&'static str> {
    static RUST: LazyLock<Regex> =
        LazyLock::new(|| regex(r"(?m)^(?:pub(?:\([^)]*\))?\s+)?(?:fn|struct|enum|impl|use|mod|trait)\s"));
    static PYTHON: LazyLock<Regex> = LazyLock::new(|| regex(r"(?m)^(?:def|class|import|from)\s\S.*"));
    static GO: LazyLock<Regex> = LazyLock::new(|| regex(r"(?m)^package \w+\s*$"));
    static JS: LazyLock<Regex> =
        LazyLock::new(|| regex(r"(?m)^(?:export\s|import\s.*from\s|const\s\w+\s*=\s*require\(|function\s\w+\s*\()"));
    let first = text.lines().next().unwrap_or_default();
    if first.starts_with("#!") {
        if first.contains("python") {
            return Some("Python");
        }
        if first.contains("sh") {
            return Some("Shell");
        }
        if first.contains("node") {
            return Some("JavaScript");
        }
    }
    let sample: String = text.chars().take(64 * 1024).collect();
    if GO.is_match(&sample) && sample.contains("func ") {
        return Some("Go");
    }
    if RUST.find_iter(&sample).count() >= 2 && sample.contains("fn ") {
        return Some("Rust");
    }
    if JS.find_iter(&sample).count() >= 2 {
        return Some("JavaScript");
    }
    if PYTHON.find_iter(&sample).count() >= 2 && (sample.contains("def ") || sample.contains("import ")) {
        return Some("Python");
    }
    if sample.contains("#include <") || sample.contains("#include \"") {
        return Some("C");
    }
    None
}

fn is_closer(line: &str) -> bool {
    let t = line.trim_end();
    matches!(t.chars().next(), Some('}' | ')' | ']')) || t == "end" || t.starts_with("end ")
}

/// Top-level items with their 1-based inclusive line ranges.
pub fn code_items(text: &str, language: &str) -> Vec<CodeItem> {
    let Some(rules) = RULES.get(language) else {
        return Vec::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut starts: Vec<(usize, String)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with([' ', '\t']) || line.is_empty() {
            continue;
        }
        for pattern in &rules.patterns {
            if let Some(item) = pattern.captures(line).and_then(|c| c.name("item")) {
                let label = item
                    .as_str()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .trim_end_matches(['{', ' ', '('])
                    .to_string();
                let label = summarize_to(&label, 60);
                starts.push((i, label));
                break;
            }
        }
    }
    let mut items = Vec::with_capacity(starts.len());
    for (n, (start, label)) in starts.iter().enumerate() {
        let limit = starts.get(n + 1).map(|(s, _)| *s).unwrap_or(lines.len());
        let mut end = limit;
        if !rules.until_next_item {
            // The item ends before the next line back at column 0 that does not close it.
            if let Some(offset) = lines[start + 1..limit]
                .iter()
                .position(|l| !l.is_empty() && !l.starts_with([' ', '\t']) && !is_closer(l))
            {
                end = start + 1 + offset;
            }
        }
        // Trailing blank lines and comments belong to what follows.
        while end > start + 1 && lines[end - 1].trim().is_empty() {
            end -= 1;
        }
        items.push(CodeItem {
            label: label.clone(),
            start: *start as u64 + 1,
            end: end as u64,
        });
    }
    items
}

fn binary_format(head: &[u8]) -> Option<&'static str> {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"\x89PNG", "PNG image"),
        (b"\xFF\xD8\xFF", "JPEG image"),
        (b"GIF8", "GIF image"),
        (b"%PDF", "PDF document"),
        (b"PK\x03\x04", "ZIP archive"),
        (b"\x1F\x8B", "gzip archive"),
        (b"\x7FELF", "ELF executable"),
        (b"\0asm", "WebAssembly module"),
        (b"SQLite format 3", "SQLite database"),
    ];
    SIGNATURES
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, name)| *name)
}

fn binary_mime(format: Option<&str>) -> &'static str {
    match format {
        Some("PNG image") => "image/png",
        Some("JPEG image") => "image/jpeg",
        Some("GIF image") => "image/gif",
        Some("PDF document") => "application/pdf",
        Some("ZIP archive") => "application/zip",
        Some("gzip archive") => "application/gzip",
        Some("WebAssembly module") => "application/wasm",
        _ => "application/octet-stream",
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSONPath member selector for a key.
fn member(key: &str) -> String {
    let plain = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!(".{key}")
    } else {
        format!("['{}']", key.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

/// Describes a JSON value's structure down to `depth` object levels, listing at most `keys` keys of
/// each object.
fn shape(value: &Value, depth: usize, keys: usize) -> String {
    match value {
        Value::Object(map) if depth > 0 => {
            let mut parts: Vec<String> = map
                .iter()
                .take(keys)
                .map(|(k, v)| format!("{k}: {}", shape(v, depth - 1, keys.min(6))))
                .collect();
            if map.len() > keys {
                parts.push(format!("…+{}", map.len() - keys));
            }
            format!("{{{}}}", parts.join(", "))
        }
        Value::Object(map) => format!("object({})", map.len()),
        Value::Array(items) => match items.first() {
            // An array does not use up a level: its elements are what it holds.
            Some(first) => format!("array[{}] of {}", items.len(), shape(first, depth, keys.min(6))),
            _ => format!("array[{}]", items.len()),
        },
        other => json_type(other).to_string(),
    }
}

/// A JSONPath selecting something useful: the first element of the first array within three
/// levels, else the first member.
fn example_path(value: &Value) -> String {
    fn find(value: &Value, path: String, depth: usize) -> Option<String> {
        match value {
            Value::Array(items) if !items.is_empty() => Some(format!("{path}[0]")),
            Value::Object(map) if depth > 0 => map
                .iter()
                .find_map(|(k, v)| find(v, format!("{path}{}", member(k)), depth - 1)),
            _ => None,
        }
    }
    find(value, "$".into(), 3).unwrap_or_else(|| match value {
        Value::Object(map) => map
            .keys()
            .next()
            .map(|k| format!("${}", member(k)))
            .unwrap_or_else(|| "$".into()),
        _ => "$".into(),
    })
}

fn analyze_json(value: &Value) -> Facts {
    let (root_size, root) = match value {
        Value::Object(map) => (map.len(), "object"),
        Value::Array(items) => (items.len(), "array"),
        other => (0, json_type(other)),
    };
    Facts::Json {
        root,
        root_size,
        shape: summarize_to(&shape(value, 3, 12), 600),
        example_path: example_path(value),
    }
}

/// Splits one delimited line, honouring double quotes.
fn split_row(line: &str, delimiter: char) -> Vec<String> {
    let mut fields = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                current.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            c if c == delimiter && !quoted => fields.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    fields.push(current);
    fields.into_iter().map(|f| f.trim().to_string()).collect()
}

/// The delimiter of a table: every one of the first lines splits into the same number (> 1) of
/// fields.
fn table_delimiter(text: &str, hint: Option<char>) -> Option<char> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).take(30).collect();
    if lines.len() < 2 && hint.is_none() {
        return None;
    }
    let candidates: Vec<char> = match hint {
        Some(d) => vec![d],
        None => vec![',', '\t', ';', '|'],
    };
    candidates.into_iter().find(|&d| {
        let width = split_row(lines.first().copied().unwrap_or_default(), d).len();
        width > 1 && lines.iter().all(|l| split_row(l, d).len() == width)
    })
}

fn analyze_table(text: &str, delimiter: char) -> Facts {
    let mut rows = text.lines().filter(|l| !l.trim().is_empty());
    let header = split_row(rows.next().unwrap_or_default(), delimiter);
    let sample: Vec<Vec<String>> = rows.take(50).map(|l| split_row(l, delimiter)).collect();
    let columns = header
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let values: Vec<&String> = sample
                .iter()
                .filter_map(|r| r.get(i))
                .filter(|v| !v.is_empty())
                .collect();
            Column {
                name: summarize_to(&name, 40),
                numeric: !values.is_empty() && values.iter().all(|v| v.replace([',', '_'], "").parse::<f64>().is_ok()),
            }
        })
        .collect();
    Facts::Table { delimiter, columns }
}

static LEVEL: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)\b(fatal|critical|panic|error|err|warning|warn|info|debug|trace)\b"));
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"^\s*\[?(?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\d{2}:\d{2}:\d{2}|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2})")
});

fn level_of(line: &str) -> Option<&'static str> {
    let found = LEVEL.find(line)?;
    Some(match found.as_str().to_ascii_lowercase().as_str() {
        "fatal" | "critical" | "panic" => "fatal",
        "error" | "err" => "error",
        "warning" | "warn" => "warn",
        "info" => "info",
        "debug" => "debug",
        _ => "trace",
    })
}

/// Whether the text reads like a log: many lines carry a level or start with a timestamp.
fn looks_like_log(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).take(2000).collect();
    if lines.len() < 3 {
        return false;
    }
    let leveled = lines.iter().filter(|l| level_of(l).is_some()).count();
    let stamped = lines.iter().filter(|l| TIMESTAMP.is_match(l)).count();
    leveled * 10 >= lines.len() * 3 || stamped * 10 >= lines.len() * 5
}

fn analyze_log(text: &str) -> Facts {
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut first_errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(level) = level_of(line) {
            *counts.entry(level).or_default() += 1;
            if matches!(level, "error" | "fatal") && first_errors.len() < 20 {
                first_errors.push((i as u64 + 1, summarize_to(line.trim(), 140)));
            }
        }
    }
    let order = ["fatal", "error", "warn", "info", "debug", "trace"];
    Facts::Log {
        counts: order.iter().filter_map(|l| counts.get(l).map(|c| (*l, *c))).collect(),
        first_errors,
    }
}

fn markdown_headings(text: &str) -> Vec<(u8, u64, String)> {
    static HEADING: LazyLock<Regex> = LazyLock::new(|| regex(r"^(#{1,6})\s+(.+?)\s*#*\s*$"));
    let mut fenced = false;
    let mut headings = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(c) = HEADING.captures(line) {
            headings.push((c[1].len() as u8, i as u64 + 1, summarize_to(&c[2], 60)));
        }
    }
    headings
}

fn lead_sentences(text: &str) -> String {
    let head: String = text.chars().take(8192).collect();
    let lead: Vec<String> = sentences(&head).into_iter().take(3).collect();
    summarize_to(&lead.join(" "), 300)
}

/// A word of the content to show in the search example.
fn keyword_of(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .find(|w| w.chars().count() >= 4 && !w.chars().all(|c| c.is_ascii_digit()))
        .map(|w| w.chars().take(30).collect())
}

/// Analyses a content: its kind, MIME type and structural facts.
pub fn analyze(content: Content<'_>) -> Analysis {
    let ext = extension(content.path);
    let ext = ext.as_deref();
    let mime = content.mime_type.map(|m| m.to_ascii_lowercase());
    let mime = mime.as_deref();
    let Some(text) = content.text else {
        let format = binary_format(content.head);
        return Analysis {
            kind: ArtifactKind::Binary,
            mime_type: content
                .mime_type
                .map(str::to_string)
                .unwrap_or_else(|| binary_mime(format).into()),
            facts: Facts::Binary { format },
            partial_bytes: content.partial_bytes,
            search_example: None,
        };
    };
    let given_mime = content.mime_type.map(str::to_string);
    let trimmed = text.trim_start();
    let json_hint = ext == Some("json")
        || mime.is_some_and(|m| m.contains("json") && !m.contains("jsonl") && !m.contains("ndjson"));
    if (json_hint || trimmed.starts_with('{') || trimmed.starts_with('['))
        && content.partial_bytes.is_none()
        && text.len() <= content.json_max_bytes
        && let Ok(value) = serde_json::from_str::<Value>(text)
        && (json_hint || value.is_object() || value.is_array())
    {
        let search_example = match &value {
            Value::Object(map) => map.keys().next().cloned(),
            Value::Array(items) => items
                .first()
                .and_then(|v| v.as_object())
                .and_then(|m| m.keys().next().cloned()),
            _ => None,
        };
        return Analysis {
            kind: ArtifactKind::Json,
            mime_type: given_mime.unwrap_or_else(|| "application/json".into()),
            facts: analyze_json(&value),
            partial_bytes: None,
            search_example,
        };
    }
    let table_hint = match (ext, mime) {
        (Some("csv"), _) | (_, Some("text/csv")) => Some(','),
        (Some("tsv"), _) | (_, Some("text/tab-separated-values")) => Some('\t'),
        _ => None,
    };
    let code_language = ext
        .and_then(|e| CODE_EXTENSIONS.iter().find(|(x, _)| *x == e).map(|(_, l)| *l))
        .or_else(|| {
            let sniff = table_hint.is_none()
                && !matches!(ext, Some("md" | "markdown" | "txt" | "log" | "rst"))
                && !mime.is_some_and(|m| m.contains("markdown"));
            if sniff { sniff_language(text) } else { None }
        });
    if let Some(language) = code_language {
        let items = code_items(text, language);
        let search_example = items
            .first()
            .and_then(|i| i.label.split_whitespace().last().map(str::to_string))
            .or_else(|| keyword_of(text));
        return Analysis {
            kind: ArtifactKind::Code,
            mime_type: given_mime.unwrap_or_else(|| {
                format!(
                    "text/x-{}",
                    language.to_ascii_lowercase().replace('#', "sharp").replace('+', "p")
                )
            }),
            facts: Facts::Code { language, items },
            partial_bytes: content.partial_bytes,
            search_example,
        };
    }
    if let Some(delimiter) = table_delimiter(text, table_hint)
        && (table_hint.is_some() || !looks_like_log(text))
    {
        let facts = analyze_table(text, delimiter);
        let search_example = match &facts {
            Facts::Table { columns, .. } => columns.first().map(|c| c.name.clone()),
            _ => None,
        };
        let default_mime = if delimiter == '\t' {
            "text/tab-separated-values"
        } else {
            "text/csv"
        };
        return Analysis {
            kind: ArtifactKind::Table,
            mime_type: given_mime.unwrap_or_else(|| default_mime.into()),
            facts,
            partial_bytes: content.partial_bytes,
            search_example,
        };
    }
    let markdown =
        matches!(ext, Some("md" | "markdown" | "mdx" | "rst" | "adoc")) || mime.is_some_and(|m| m.contains("markdown"));
    let headings = markdown_headings(text);
    if ext == Some("log") || mime.is_some_and(|m| m.contains("log")) || (!markdown && looks_like_log(text)) {
        let facts = analyze_log(text);
        let search_example = match &facts {
            Facts::Log { counts, .. } => counts.first().map(|(l, _)| l.to_string()),
            _ => None,
        };
        return Analysis {
            kind: ArtifactKind::Log,
            mime_type: given_mime.unwrap_or_else(|| "text/plain".into()),
            facts,
            partial_bytes: content.partial_bytes,
            search_example,
        };
    }
    if markdown || headings.len() >= 2 {
        let search_example = headings
            .iter()
            .find_map(|(_, _, t)| keyword_of(t))
            .or_else(|| keyword_of(text));
        return Analysis {
            kind: ArtifactKind::Document,
            mime_type: given_mime.unwrap_or_else(|| "text/markdown".into()),
            facts: Facts::Document { headings },
            partial_bytes: content.partial_bytes,
            search_example,
        };
    }
    Analysis {
        kind: ArtifactKind::Text,
        mime_type: given_mime.unwrap_or_else(|| "text/plain".into()),
        facts: Facts::Text {
            lead: lead_sentences(text),
        },
        partial_bytes: content.partial_bytes,
        search_example: keyword_of(text),
    }
}

/// The size of a content for people: "4.2 KB" / "4.2KB".
pub fn human_bytes(bytes: u64, language: Language) -> String {
    let sep = if language == Language::En { " " } else { "" };
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes}{sep}B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{sep}{}", UNITS[unit])
}

/// What the compact says about the content's size.
pub fn size_label(kind: ArtifactKind, size_bytes: u64, line_count: u64, language: Language) -> String {
    let bytes = human_bytes(size_bytes, language);
    match (kind.is_text(), language) {
        (false, _) => bytes,
        (true, Language::En) => format!("{line_count} lines / {bytes}"),
        (true, Language::Zh) => format!("{line_count}行 / {bytes}"),
    }
}

fn type_label(analysis: &Analysis, language: Language) -> String {
    let en = language == Language::En;
    match (&analysis.facts, en) {
        (Facts::Code { language: l, .. }, true) => format!("code file ({l})"),
        (Facts::Code { language: l, .. }, false) => format!("代码文件（{l}）"),
        (Facts::Json { .. }, true) => "JSON document".into(),
        (Facts::Json { .. }, false) => "JSON文档".into(),
        (Facts::Table { delimiter, .. }, true) => format!("table ({})", if *delimiter == '\t' { "TSV" } else { "CSV" }),
        (Facts::Table { delimiter, .. }, false) => {
            format!("表格（{}）", if *delimiter == '\t' { "TSV" } else { "CSV" })
        }
        (Facts::Log { .. }, true) => "log".into(),
        (Facts::Log { .. }, false) => "日志".into(),
        (Facts::Document { .. }, true) => "document".into(),
        (Facts::Document { .. }, false) => "文档".into(),
        (Facts::Text { .. }, true) => "text".into(),
        (Facts::Text { .. }, false) => "文本".into(),
        (Facts::Binary { format: Some(f) }, true) => format!("binary file ({f})"),
        (Facts::Binary { format: Some(f) }, false) => format!("二进制文件（{f}）"),
        (Facts::Binary { format: None }, true) => "binary file".into(),
        (Facts::Binary { format: None }, false) => "二进制文件".into(),
    }
}

/// "… and 12 more" after a shortened list.
fn more(shown: usize, total: usize, language: Language) -> String {
    if total <= shown {
        return String::new();
    }
    match language {
        Language::En => format!(", … and {} more", total - shown),
        Language::Zh => format!("……等另外{}个", total - shown),
    }
}

/// The structural summary, listing at most `limit` entries of any list.
pub fn structural_summary(analysis: &Analysis, line_count: u64, language: Language, limit: usize) -> String {
    let en = language == Language::En;
    let list_sep = if en { ", " } else { "、" };
    let mut summary = match &analysis.facts {
        Facts::Code { language: lang, items } => {
            let shown: Vec<String> = items
                .iter()
                .take(limit)
                .map(|i| {
                    if en {
                        format!("{} ({}-{})", i.label, i.start, i.end)
                    } else {
                        format!("{}（{}-{}行）", i.label, i.start, i.end)
                    }
                })
                .collect();
            let listed = format!("{}{}", shown.join(list_sep), more(shown.len(), items.len(), language));
            match (items.is_empty(), en) {
                (true, true) => format!("{lang} source, {line_count} lines; no top-level definitions found"),
                (true, false) => format!("{lang}源代码，共{line_count}行；未找到顶层定义"),
                (false, true) if shown.is_empty() => {
                    format!("{lang} source, {line_count} lines; {} top-level items", items.len())
                }
                (false, false) if shown.is_empty() => {
                    format!("{lang}源代码，共{line_count}行；{}个顶层定义", items.len())
                }
                (false, true) => format!(
                    "{lang} source, {line_count} lines; {} top-level items: {listed}",
                    items.len()
                ),
                (false, false) => format!("{lang}源代码，共{line_count}行；{}个顶层定义：{listed}", items.len()),
            }
        }
        Facts::Json {
            root,
            root_size,
            shape,
            example_path,
        } => {
            let shape = if limit == 0 {
                String::new()
            } else {
                summarize_to(shape, 60 + limit * 25)
            };
            let root_en = match *root {
                "object" => format!("object with {root_size} keys"),
                "array" => format!("array of {root_size} items"),
                other => other.to_string(),
            };
            let root_zh = match *root {
                "object" => format!("对象，{root_size}个键"),
                "array" => format!("数组，{root_size}项"),
                other => other.to_string(),
            };
            match (shape.is_empty(), en) {
                (true, true) => format!("JSON {root_en}; e.g. {example_path}"),
                (true, false) => format!("JSON{root_zh}；示例路径 {example_path}"),
                (false, true) => format!("JSON {root_en}: {shape}; e.g. {example_path}"),
                (false, false) => format!("JSON{root_zh}：{shape}；示例路径 {example_path}"),
            }
        }
        Facts::Table { columns, .. } => {
            let rows = line_count.saturating_sub(1);
            let shown: Vec<String> = columns
                .iter()
                .take(limit)
                .map(|c| match (c.numeric, en) {
                    (true, true) => format!("{} (number)", c.name),
                    (false, true) => format!("{} (text)", c.name),
                    (true, false) => format!("{}（数字）", c.name),
                    (false, false) => format!("{}（文本）", c.name),
                })
                .collect();
            let listed = format!("{}{}", shown.join(list_sep), more(shown.len(), columns.len(), language));
            if en {
                format!("{rows} rows × {} columns: {listed}", columns.len())
            } else {
                format!("{rows}行数据 × {}列：{listed}", columns.len())
            }
        }
        Facts::Log { counts, first_errors } => {
            let counted: Vec<String> = counts
                .iter()
                .map(|(level, n)| {
                    if en {
                        format!("{n} {level}")
                    } else {
                        format!("{level} {n}条")
                    }
                })
                .collect();
            let counted = if counted.is_empty() {
                if en {
                    "no level markers".to_string()
                } else {
                    "无级别标记".to_string()
                }
            } else {
                counted.join(list_sep)
            };
            let errors: Vec<String> = first_errors
                .iter()
                .take(limit.min(8))
                .map(|(line, text)| {
                    let text = summarize_to(text, if limit >= 5 { 140 } else { 70 });
                    if en {
                        format!("line {line}: {text}")
                    } else {
                        format!("第{line}行：{text}")
                    }
                })
                .collect();
            let mut out = if en {
                format!("log of {line_count} lines: {counted}")
            } else {
                format!("日志共{line_count}行：{counted}")
            };
            if !errors.is_empty() {
                out.push_str(if en {
                    ". First errors: "
                } else {
                    "。最早的错误："
                });
                out.push_str(&errors.join(if en { "; " } else { "；" }));
            }
            out
        }
        Facts::Document { headings } => {
            let outline: Vec<&(u8, u64, String)> = headings.iter().filter(|(level, _, _)| *level <= 3).collect();
            let shown: Vec<String> = outline
                .iter()
                .take(limit)
                .map(|(level, line, title)| {
                    let marks = "#".repeat(*level as usize);
                    if en {
                        format!("{marks} {title} (line {line})")
                    } else {
                        format!("{marks} {title}（第{line}行）")
                    }
                })
                .collect();
            let listed = format!("{}{}", shown.join("; "), more(shown.len(), outline.len(), language));
            match (headings.is_empty(), en) {
                (true, true) => format!("document of {line_count} lines"),
                (true, false) => format!("文档共{line_count}行"),
                (false, true) => format!("document of {line_count} lines, {} headings: {listed}", headings.len()),
                (false, false) => format!("文档共{line_count}行，{}个标题：{listed}", headings.len()),
            }
        }
        Facts::Text { lead } => {
            let lead = summarize_to(lead, 40 + limit * 20);
            if en {
                format!("text of {line_count} lines: {lead}")
            } else {
                format!("文本共{line_count}行：{lead}")
            }
        }
        Facts::Binary { format } => match (format, en) {
            (Some(f), true) => format!("binary content ({f}); read it by byte ranges"),
            (Some(f), false) => format!("二进制内容（{f}）；只能按字节区间读取"),
            (None, true) => "binary content; read it by byte ranges".into(),
            (None, false) => "二进制内容；只能按字节区间读取".into(),
        },
    };
    if let Some(bytes) = analysis.partial_bytes {
        let head = human_bytes(bytes, language);
        summary.push_str(&if en {
            format!(" (from the first {head})")
        } else {
            format!("（根据前{head}生成）")
        });
    }
    summary
}

/// The locators an artifact supports, with examples.
pub fn locators(analysis: &Analysis, size_bytes: u64, line_count: u64) -> Vec<LocatorExample> {
    let bytes = LocatorExample {
        kind: LocatorKind::Bytes,
        example: format!("bytes=\"0-{}\"", size_bytes.clamp(1, 1024)),
    };
    if !analysis.kind.is_text() {
        return vec![bytes];
    }
    let mut out = vec![
        LocatorExample {
            kind: LocatorKind::Lines,
            example: format!("lines=\"1-{}\"", line_count.clamp(1, 50)),
        },
        bytes,
    ];
    if let Facts::Json { example_path, .. } = &analysis.facts {
        out.push(LocatorExample {
            kind: LocatorKind::JsonPath,
            example: format!("json_path=\"{}\"", example_path.replace('"', "'")),
        });
    }
    let keyword = analysis
        .search_example
        .as_deref()
        .map(|k| k.replace(['"', '\\', '\n'], ""))
        .filter(|k| !k.trim().is_empty())
        .unwrap_or_else(|| "keyword".into());
    out.push(LocatorExample {
        kind: LocatorKind::Search,
        example: format!("search=\"{keyword}\""),
    });
    out
}

/// The identity and size of the artifact a compact is for.
#[derive(Debug, Clone, Copy)]
pub struct CompactMeta<'a> {
    pub id: &'a str,
    pub path: Option<&'a str>,
    pub size_bytes: u64,
    pub line_count: u64,
}

fn shown_path(path: &str) -> String {
    let count = path.chars().count();
    if count <= 160 {
        path.to_string()
    } else {
        let tail: String = path.chars().skip(count - 159).collect();
        format!("…{tail}")
    }
}

fn assemble(
    analysis: &Analysis,
    meta: CompactMeta<'_>,
    language: Language,
    summary: String,
    tokens: &TokenCounter,
) -> Compact {
    let en = language == Language::En;
    let type_label = type_label(analysis, language);
    let size = size_label(analysis.kind, meta.size_bytes, meta.line_count, language);
    let locators = locators(analysis, meta.size_bytes, meta.line_count);
    let path = meta.path.map(shown_path);
    let mut rendered = format!("[Artifact: {}]\n", meta.id);
    let (type_key, path_key, summary_key, size_key) = if en {
        ("Type", "Path", "Summary", "Size")
    } else {
        ("类型", "路径", "摘要", "大小")
    };
    rendered.push_str(&format!("{type_key}: {type_label}\n"));
    if let Some(path) = &path {
        rendered.push_str(&format!("{path_key}: {path}\n"));
    }
    rendered.push_str(&format!("{summary_key}: {summary}\n"));
    rendered.push_str(&format!("{size_key}: {size}\n"));
    let first = &locators[0].example;
    let others: Vec<&str> = locators[1..].iter().map(|l| l.example.as_str()).collect();
    if en {
        rendered.push_str(&format!(
            "Read: get_artifact(\"{}\", {first}) returns part of it",
            meta.id
        ));
        if !others.is_empty() {
            rendered.push_str(&format!("; also {}", others.join(", ")));
        }
    } else {
        rendered.push_str(&format!(
            "获取: 可通过 get_artifact(\"{}\", {first}) 获取局部内容",
            meta.id
        ));
        if !others.is_empty() {
            rendered.push_str(&format!("；也支持 {}", others.join("、")));
        }
    }
    let count = tokens.count(&rendered) as u32;
    Compact {
        reference: meta.id.to_string(),
        type_label,
        path,
        summary,
        size,
        locators,
        rendered,
        tokens: count,
        language,
    }
}

/// Builds the compact: the given summary (from a language model) or the structural one,
/// shortened until the rendering fits in `max_tokens`.
pub fn build(
    analysis: &Analysis,
    meta: CompactMeta<'_>,
    language: Language,
    summary_override: Option<&str>,
    tokens: &TokenCounter,
    max_tokens: usize,
) -> Compact {
    if let Some(summary) = summary_override {
        let compact = assemble(analysis, meta, language, summary.to_string(), tokens);
        if compact.tokens as usize <= max_tokens {
            return compact;
        }
    }
    let mut last = None;
    for limit in [40, 24, 16, 10, 6, 3, 1, 0] {
        let summary = structural_summary(analysis, meta.line_count, language, limit);
        let compact = assemble(analysis, meta, language, summary, tokens);
        if compact.tokens as usize <= max_tokens {
            return compact;
        }
        last = Some(compact);
    }
    // Even the shortest structural summary is too long (very long labels): cut it by tokens.
    let last = last.unwrap_or_else(|| assemble(analysis, meta, language, String::new(), tokens));
    let without = assemble(analysis, meta, language, String::new(), tokens);
    let budget = max_tokens.saturating_sub(without.tokens as usize + 2);
    let summary = tokens.truncate(&last.summary, budget);
    assemble(analysis, meta, language, summary, tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(text: &str, path: Option<&str>) -> Analysis {
        analyze(Content {
            text: Some(text),
            head: text.as_bytes(),
            partial_bytes: None,
            path,
            mime_type: None,
            json_max_bytes: usize::MAX,
        })
    }

    fn compact(analysis: &Analysis, body: &str, language: Language) -> Compact {
        let meta = CompactMeta {
            id: "art_0123456789abcdef0123456789abcdef",
            path: Some("/src/x"),
            size_bytes: body.len() as u64,
            line_count: body.lines().count() as u64,
        };
        build(analysis, meta, language, None, &TokenCounter::default(), 480)
    }

    const RUST: &str = "//! A module.\n\nuse std::fmt;\n\n/// A user.\npub struct User {\n    id: u64,\n}\n\nimpl fmt::Display for User {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        write!(f, \"{}\", self.id)\n    }\n}\n\npub async fn login(user: &User) -> bool {\n    true\n}\n";

    #[test]
    fn code_lists_top_level_items_with_line_ranges() {
        let analysis = text(RUST, Some("src/user.rs"));
        assert_eq!(analysis.kind, ArtifactKind::Code);
        let Facts::Code { language, items } = &analysis.facts else {
            panic!("{:?}", analysis.facts)
        };
        assert_eq!(*language, "Rust");
        let found: Vec<(&str, u64, u64)> = items.iter().map(|i| (i.label.as_str(), i.start, i.end)).collect();
        assert_eq!(
            found,
            vec![
                ("struct User", 6, 8),
                ("impl fmt::Display for User", 10, 14),
                ("fn login", 16, 18)
            ]
        );
        let en = compact(&analysis, RUST, Language::En);
        assert!(en.summary.contains("fn login (16-18)"), "{}", en.summary);
        assert!(en.rendered.starts_with("[Artifact: art_"), "{}", en.rendered);
        let zh = compact(&analysis, RUST, Language::Zh);
        assert!(zh.rendered.contains("类型: 代码文件（Rust）"), "{}", zh.rendered);
        assert!(zh.summary.contains("fn login（16-18行）"), "{}", zh.summary);
        assert!(zh.size.starts_with("18行 / "), "{}", zh.size);
    }

    #[test]
    fn python_and_typescript_items() {
        let py =
            "import os\n\nclass Repo:\n    def get(self):\n        pass\n\n@cache\ndef load(path):\n    return 1\n";
        let Facts::Code { items, .. } = text(py, Some("a.py")).facts else {
            panic!()
        };
        let labels: Vec<(&str, u64, u64)> = items.iter().map(|i| (i.label.as_str(), i.start, i.end)).collect();
        assert_eq!(labels, vec![("class Repo", 3, 5), ("def load", 8, 9)]);
        let ts = "export async function login(u: User) {\n  return 1;\n}\nexport const logout = async (u: User) => {\n  return 2;\n};\n";
        let Facts::Code { items, language } = text(ts, Some("a.ts")).facts else {
            panic!()
        };
        assert_eq!(language, "TypeScript");
        let labels: Vec<&str> = items.iter().map(|i| i.label.as_str()).collect();
        assert_eq!(labels, vec!["function login", "logout"]);
    }

    #[test]
    fn json_shape_keys_lengths_and_a_path() {
        let doc = r#"{"data":{"users":[{"id":1,"name":"a"},{"id":2,"name":"b"}]},"total":2}"#;
        let analysis = text(doc, None);
        assert_eq!(analysis.kind, ArtifactKind::Json);
        let Facts::Json {
            example_path, shape, ..
        } = &analysis.facts
        else {
            panic!()
        };
        assert_eq!(example_path, "$.data.users[0]");
        assert!(shape.contains("users: array[2] of"), "{shape}");
        let en = compact(&analysis, doc, Language::En);
        assert!(en.rendered.contains("json_path=\"$.data.users[0]\""), "{}", en.rendered);
        assert!(en.summary.starts_with("JSON object with 2 keys"), "{}", en.summary);
    }

    #[test]
    fn tables_have_columns_and_rows() {
        let csv = "id,name,score\n1,ann,3.5\n2,\"bo, jr\",4\n3,cy,5\n";
        let analysis = text(csv, Some("scores.csv"));
        assert_eq!(analysis.kind, ArtifactKind::Table);
        let en = compact(&analysis, csv, Language::En);
        assert!(
            en.summary
                .starts_with("3 rows × 3 columns: id (number), name (text), score (number)"),
            "{}",
            en.summary
        );
        let tsv = "a\tb\nx\ty\n";
        assert_eq!(text(tsv, None).kind, ArtifactKind::Table);
    }

    #[test]
    fn logs_count_levels_and_show_first_errors() {
        let log = "2026-01-01 10:00:00 INFO start\n2026-01-01 10:00:01 WARN slow\n2026-01-01 10:00:02 ERROR db down\n2026-01-01 10:00:03 INFO retry\n";
        let analysis = text(log, None);
        assert_eq!(analysis.kind, ArtifactKind::Log);
        let en = compact(&analysis, log, Language::En);
        assert!(en.summary.contains("1 error, 1 warn, 2 info"), "{}", en.summary);
        assert!(
            en.summary.contains("line 3: 2026-01-01 10:00:02 ERROR db down"),
            "{}",
            en.summary
        );
        let zh = compact(&analysis, log, Language::Zh);
        assert!(zh.summary.contains("第3行"), "{}", zh.summary);
    }

    #[test]
    fn markdown_outline_skips_code_fences() {
        let md = "# Title\n\nintro\n\n## Setup\n\n```sh\n# not a heading\n```\n\n## Usage\n";
        let analysis = text(md, Some("README.md"));
        assert_eq!(analysis.kind, ArtifactKind::Document);
        let Facts::Document { headings } = &analysis.facts else {
            panic!()
        };
        assert_eq!(headings.len(), 3);
        let en = compact(&analysis, md, Language::En);
        assert!(en.summary.contains("## Usage (line 11)"), "{}", en.summary);
    }

    #[test]
    fn plain_text_leads_and_binary_bytes_only() {
        let prose = "The migration finished. Two tables were rebuilt. Nothing else changed. Later lines.";
        let analysis = text(prose, None);
        assert_eq!(analysis.kind, ArtifactKind::Text);
        let en = compact(&analysis, prose, Language::En);
        assert!(en.summary.contains("The migration finished."), "{}", en.summary);
        let png = b"\x89PNG\r\n\x1a\n\0\0\0";
        let analysis = analyze(Content {
            text: None,
            head: png,
            partial_bytes: None,
            path: None,
            mime_type: None,
            json_max_bytes: usize::MAX,
        });
        assert_eq!(analysis.mime_type, "image/png");
        let c = compact(&analysis, "", Language::En);
        assert_eq!(c.locators.len(), 1);
        assert_eq!(c.locators[0].kind, LocatorKind::Bytes);
    }

    #[test]
    fn huge_structures_still_fit_the_limit() {
        let mut source = String::new();
        for i in 0..3000 {
            source.push_str(&format!(
                "pub fn function_with_a_long_name_number_{i}() {{\n    body();\n}}\n\n"
            ));
        }
        let analysis = text(&source, Some("big.rs"));
        for language in [Language::En, Language::Zh] {
            let c = compact(&analysis, &source, language);
            assert!(c.tokens < 500, "{} tokens", c.tokens);
            assert_eq!(c.tokens as usize, TokenCounter::default().count(&c.rendered));
            assert!(c.summary.contains("3000"), "{}", c.summary);
        }
    }
}
