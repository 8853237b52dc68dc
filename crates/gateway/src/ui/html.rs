//! HTML building blocks: escaping, URL segments, the page layout. Every text that comes from
//! data goes through [`esc`] (or [`seg`] inside a URL path) before it reaches the page.

use std::fmt::Write as _;

/// Text for an HTML element or a double-quoted attribute.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A URL path segment or query value: unreserved characters as they are, the rest as `%XX`.
pub fn seg(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// A whole page: the layout around `body`. No inline script or style (the content security
/// policy allows only the page's own /static files).
pub fn page(lang: &str, title: &str, header: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"{lang}\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<link rel=\"stylesheet\" href=\"/static/app.css\">\n\
         <script src=\"/static/app.js\" defer></script>\n</head>\n<body>\n\
         <header class=\"top\">{header}</header>\n<main>\n{body}\n</main>\n</body>\n</html>\n",
        lang = esc(lang),
        title = esc(title),
    )
}

/// A hidden CSRF field for a form.
pub fn csrf_field(token: &str) -> String {
    format!("<input type=\"hidden\" name=\"csrf\" value=\"{}\">", esc(token))
}

/// A one-button form posting to `action`.
pub fn button_form(
    action: &str,
    csrf: &str,
    label: &str,
    class: &str,
    hidden: &[(&str, &str)],
    confirm: Option<&str>,
) -> String {
    let mut fields = csrf_field(csrf);
    for (name, value) in hidden {
        let _ = write!(
            fields,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            esc(name),
            esc(value)
        );
    }
    let confirm = confirm
        .map(|text| format!(" data-confirm=\"{}\"", esc(text)))
        .unwrap_or_default();
    format!(
        "<form method=\"post\" action=\"{}\" class=\"inline\"{confirm}>{fields}<button type=\"submit\" class=\"{}\">{}</button></form>",
        esc(action),
        esc(class),
        esc(label)
    )
}

/// A bar from 0 to 1 with its value as a percentage (a native `<meter>`: no inline style,
/// which the content security policy would refuse).
pub fn meter(value: f64, label: &str) -> String {
    let percent = (value.clamp(0.0, 1.0) * 100.0).round() as u32;
    format!(
        "<meter min=\"0\" max=\"100\" low=\"50\" high=\"80\" optimum=\"100\" value=\"{percent}\" title=\"{label} {percent}%\">{percent}%</meter>",
        label = esc(label)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_become_markup() {
        assert_eq!(
            esc("<script>alert(\"x\")</script> & 'y'"),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(seg("a/b?c=d&e"), "a%2Fb%3Fc%3Dd%26e");
        assert_eq!(seg("课程"), "%E8%AF%BE%E7%A8%8B");
        let form = button_form("/u/x\"y", "t<k", "go", "b", &[("keep", "a\"b")], Some("sure?"));
        assert!(form.contains("action=\"/u/x&quot;y\""), "{form}");
        assert!(form.contains("value=\"t&lt;k\""), "{form}");
        assert!(form.contains("data-confirm=\"sure?\""), "{form}");
    }
}
