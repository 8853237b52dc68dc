//! Robust reading of JSON answers from language models: fenced blocks, prose around the JSON,
//! answers cut off mid-way (complete elements of a truncated array are kept).

use serde_json::Value;

/// The first JSON object or array in `text`, however it is wrapped. A truncated array yields
/// its complete elements; a truncated object yields nothing.
pub fn extract_json(text: &str) -> Option<Value> {
    let text = strip_fences(text.trim());
    if let Ok(value) = serde_json::from_str::<Value>(text)
        && (value.is_object() || value.is_array())
    {
        return Some(value);
    }
    let start = text.find(['{', '['])?;
    let candidate = &text[start..];
    if let Some(end) = matching_end(candidate)
        && let Ok(value) = serde_json::from_str::<Value>(&candidate[..=end])
    {
        return Some(value);
    }
    if candidate.starts_with('[') {
        return Some(Value::Array(complete_elements(candidate)));
    }
    None
}

fn strip_fences(text: &str) -> &str {
    if let Some(rest) = text.strip_prefix("```") {
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
        let rest = rest.strip_suffix("```").unwrap_or(rest);
        return rest.trim();
    }
    if let Some(start) = text.find("```") {
        let after = &text[start + 3..];
        let after = after.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
        let end = after.find("```").unwrap_or(after.len());
        return after[..end].trim();
    }
    text
}

/// The index of the bracket closing the one at position 0, skipping strings.
fn matching_end(text: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The complete top-level elements of a truncated array.
fn complete_elements(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let body = &text[1..];
    let mut offset = 0;
    while offset < body.len() {
        let rest = &body[offset..];
        let Some(start) = rest.find(|c: char| !c.is_whitespace() && c != ',') else {
            break;
        };
        let element = &rest[start..];
        if element.starts_with(']') {
            break;
        }
        let end = if element.starts_with(['{', '[']) {
            match matching_end(element) {
                Some(end) => end + 1,
                None => break,
            }
        } else {
            match element.find([',', ']']) {
                Some(end) => end,
                None => break,
            }
        };
        match serde_json::from_str::<Value>(element[..end].trim()) {
            Ok(value) => out.push(value),
            Err(_) => break,
        }
        offset += start + end;
    }
    out
}

/// A string field, trimmed; `None` when missing, not a string, or empty.
pub fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key)?.as_str().map(str::trim).filter(|s| !s.is_empty())
}

/// A list of strings: non-string entries are dropped; a single string counts as a list.
pub fn str_list(value: &Value, key: &str) -> Vec<String> {
    match value.get(key) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_string()],
        _ => Vec::new(),
    }
}

/// An integer field, also accepted as a float or a numeric string.
pub fn int_field(value: &Value, key: &str) -> Option<i64> {
    match value.get(key)? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.round() as i64)),
        Value::String(s) => s.trim().parse::<f64>().ok().map(|f| f.round() as i64),
        _ => None,
    }
}

/// A boolean field, also accepted as "true"/"false" or 0/1.
pub fn bool_field(value: &Value, key: &str) -> Option<bool> {
    match value.get(key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(true),
            "false" | "no" => Some(false),
            _ => None,
        },
        Value::Number(n) => n.as_i64().map(|i| i != 0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_fenced_and_wrapped() {
        assert_eq!(extract_json("{\"a\":1}"), Some(json!({"a": 1})));
        assert_eq!(extract_json("```json\n{\"a\":1}\n```"), Some(json!({"a": 1})));
        assert_eq!(
            extract_json("Here is the result:\n```\n[{\"a\":1}]\n```\nDone."),
            Some(json!([{"a": 1}]))
        );
        assert_eq!(
            extract_json("Sure! {\"need_memory\": \"yes\", \"notes\": \"a } in a string\"} hope it helps"),
            Some(json!({"need_memory": "yes", "notes": "a } in a string"}))
        );
    }

    #[test]
    fn truncated_arrays_keep_complete_elements() {
        let cut =
            "[{\"type\":\"risk\",\"content\":\"a\"}, {\"type\":\"constraint\",\"content\":\"b\"}, {\"type\":\"act";
        assert_eq!(
            extract_json(cut),
            Some(json!([{"type":"risk","content":"a"},{"type":"constraint","content":"b"}]))
        );
        assert_eq!(extract_json("{\"a\": 1, \"b\": "), None);
        assert_eq!(extract_json("no json at all"), None);
        assert_eq!(extract_json("42"), None);
    }

    #[test]
    fn field_helpers_accept_loose_types() {
        let v = json!({"importance": "4", "score": 3.6, "tags": "design", "flag": "true", "empty": "  "});
        assert_eq!(int_field(&v, "importance"), Some(4));
        assert_eq!(int_field(&v, "score"), Some(4));
        assert_eq!(str_list(&v, "tags"), vec!["design"]);
        assert_eq!(bool_field(&v, "flag"), Some(true));
        assert_eq!(str_field(&v, "empty"), None);
    }
}
