//! Keeping secrets out of what the process prints and logs: API keys, passwords inside URIs,
//! and the values parsers quote in their error messages.

/// What a redacted value is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Configuration keys whose values are secrets wherever they appear.
const SECRET_KEYS: [&str; 7] = [
    "key",
    "client_key",
    "password",
    "secret",
    "token",
    "api_key",
    "secret_access_key",
];

/// URI query parameters whose values are secrets.
const SECRET_PARAMS: [&str; 8] = [
    "password",
    "passwd",
    "api_key",
    "apikey",
    "key",
    "token",
    "secret",
    "access_token",
];

/// Whether a configuration key (`auth.client_key`, `auth.keys.0.key`,
/// `gateway.ui_session_secret`) holds a secret: one of the secret names, or a name ending in
/// `_secret`.
pub fn is_secret_key(key: &str) -> bool {
    key.rsplit('.')
        .next()
        .is_some_and(|last| SECRET_KEYS.contains(&last) || last.ends_with("_secret"))
}

/// `uri` with the password of its user info and the values of secret query parameters
/// replaced: `postgres://app:hunter2@db/x` -> `postgres://app:<redacted>@db/x`. Text that is not
/// a URI comes back unchanged.
pub fn uri(uri: &str) -> String {
    let Some(scheme_end) = uri.find("://") else {
        return uri.to_string();
    };
    let rest_start = scheme_end + 3;
    let authority_end = uri[rest_start..]
        .find(['/', '?', '#'])
        .map_or(uri.len(), |i| rest_start + i);
    let mut out = String::with_capacity(uri.len());
    out.push_str(&uri[..rest_start]);
    let authority = &uri[rest_start..authority_end];
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            match user_info.split_once(':') {
                Some((user, _password)) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(REDACTED);
                }
                None => out.push_str(user_info),
            }
            out.push('@');
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    let tail = &uri[authority_end..];
    match tail.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let (query, fragment) = match query.split_once('#') {
                Some((query, fragment)) => (query, Some(fragment)),
                None => (query, None),
            };
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((name, _)) if SECRET_PARAMS.contains(&name.to_ascii_lowercase().as_str()) => {
                        format!("{name}={REDACTED}")
                    }
                    _ => param.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
            if let Some(fragment) = fragment {
                out.push('#');
                out.push_str(fragment);
            }
        }
        None => out.push_str(tail),
    }
    out
}

/// A configuration rendered for people: secret keys' values and passwords inside URIs
/// replaced (`thinkus config`).
pub fn config_value(value: &mut toml::Value) {
    match value {
        toml::Value::Table(table) => {
            for (key, value) in table.iter_mut() {
                match value {
                    toml::Value::String(text) if is_secret_key(key) && !text.is_empty() => {
                        *text = REDACTED.to_string();
                    }
                    _ => config_value(value),
                }
            }
        }
        toml::Value::Array(items) => items.iter_mut().for_each(config_value),
        toml::Value::String(text) => *text = uri(text),
        _ => {}
    }
}

/// A parser's message with every quoted value replaced: serde and TOML quote the values they
/// could not read (`invalid type: string "tk_…", expected a sequence`), and those may be keys.
pub fn quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('"') {
        let quote = '"';
        let after = &rest[open + 1..];
        match after.find(quote) {
            Some(close) => {
                out.push_str(&rest[..open]);
                out.push(quote);
                if !after[..close].is_empty() {
                    out.push_str(REDACTED);
                }
                out.push(quote);
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&rest[..open]);
                out.push_str(REDACTED);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// A TOML parse error of `source` without the quoted source line its `Display` shows: the
/// position and the parser's message with quoted values redacted.
pub fn toml_error(err: &toml::de::Error, source: &str) -> String {
    let message = quoted(err.message().trim());
    match err.span() {
        Some(span) => {
            let (line, column) = line_and_column(source, span.start);
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// The 1-based line and column of a byte offset.
pub fn line_and_column(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// A multi-line parser message (figment shows TOML errors with the offending source line and
/// a caret under it) without the source lines, and with quoted values redacted.
pub fn parser_message(message: &str) -> String {
    let kept: Vec<&str> = message
        .lines()
        .filter(|line| {
            let trimmed = line.trim_start();
            // Source lines look like `3 | key = "…"` and caret lines like `|     ^`.
            let digits = trimmed.trim_start_matches(|c: char| c.is_ascii_digit());
            !digits.trim_start().starts_with('|')
        })
        .collect();
    quoted(kept.join(" ").split_whitespace().collect::<Vec<_>>().join(" ").as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_uris_are_redacted() {
        assert_eq!(
            uri("postgres://app:hunter2@db.internal:5432/thinkus"),
            "postgres://app:<redacted>@db.internal:5432/thinkus"
        );
        assert_eq!(
            uri("postgres://app@db/x"),
            "postgres://app@db/x",
            "no password, nothing to hide"
        );
        assert_eq!(
            uri("qdrant://q:6334?api_key=abc&prefix=thinkus"),
            "qdrant://q:6334?api_key=<redacted>&prefix=thinkus"
        );
        assert_eq!(
            uri("qdrant://q:6334?api_key_env=QDRANT_KEY"),
            "qdrant://q:6334?api_key_env=QDRANT_KEY",
            "the name of a variable is not a secret"
        );
        assert_eq!(uri("sqlite://data/thinkus.db"), "sqlite://data/thinkus.db");
        assert_eq!(uri("not a uri"), "not a uri");
        assert_eq!(
            uri("https://u:p@h/v1?token=t#frag"),
            "https://u:<redacted>@h/v1?token=<redacted>#frag"
        );
    }

    #[test]
    fn secret_keys_of_a_config_are_redacted() {
        let mut value: toml::Value = toml::from_str(
            r#"
            [auth]
            client_key = "tk_service"
            keys = [{ tenant = "acme", key = "tk_inline", key_sha256 = "ab" }]
            [storage]
            database = "postgres://app:hunter2@db/x"
            [telemetry]
            log_level = "info"
            "#,
        )
        .unwrap();
        config_value(&mut value);
        let text = toml::to_string(&value).unwrap();
        for secret in ["tk_service", "tk_inline", "hunter2"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(text.contains("key_sha256 = \"ab\""), "hashes are not secrets: {text}");
        assert!(text.contains("log_level = \"info\""), "{text}");
    }

    #[test]
    fn quoted_values_are_redacted() {
        assert_eq!(
            quoted("invalid type: string \"tk_secret\", expected a sequence"),
            "invalid type: string \"<redacted>\", expected a sequence"
        );
        assert_eq!(quoted("unknown field `tenantt`"), "unknown field `tenantt`");
        assert_eq!(quoted("unclosed \"tk_abc"), "unclosed <redacted>");
    }

    #[test]
    fn parser_messages_lose_their_source_lines() {
        let message =
            "TOML parse error at line 3, column 7\n  |\n3 | key = \"tk_abc\n  |       ^\ninvalid basic string\n";
        let cleaned = parser_message(message);
        assert!(!cleaned.contains("tk_abc"), "{cleaned}");
        assert!(
            cleaned.contains("line 3, column 7") && cleaned.contains("invalid basic string"),
            "{cleaned}"
        );
    }

    #[test]
    fn lines_and_columns_are_one_based() {
        assert_eq!(line_and_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_and_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_and_column("ab", 99), (1, 3));
    }
}
