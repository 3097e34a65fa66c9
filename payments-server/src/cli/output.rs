//! What the commands print: JSON for `--json`, readable text otherwise.

use serde_json::Value;

/// What a command prints: the JSON answer (for `--json`) and the text for people.
#[derive(Debug)]
pub(super) struct Output {
    pub(super) json: Value,
    pub(super) text: String,
    /// The command's answer is a failure (printed, then the exit status is 1).
    pub(super) failed: bool,
}

impl Output {
    pub(super) fn new(json: Value, text: String) -> Output {
        Output {
            json,
            text,
            failed: false,
        }
    }

    /// The JSON, and as text the object's fields one per line.
    pub(super) fn object(json: Value) -> Output {
        let text = fields(&json, 0);
        Output::new(json, text)
    }
}

/// `yes` or `no`.
pub(super) fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// A JSON value as indented `name: value` lines.
pub(super) fn fields(v: &Value, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::new();
    match v {
        Value::Object(map) => {
            let width = map.keys().map(String::len).max().unwrap_or(0);
            // Identifiers first, then the rest in the map's (alphabetical) order.
            let first = |k: &&String| !matches!(k.as_str(), "id" | "keyid");
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by_key(first);
            for k in keys {
                let v = &map[k];
                if is_nested(v) {
                    out.push_str(&format!("{pad}{k}:\n{}", fields(v, indent + 2)));
                } else {
                    out.push_str(&format!("{pad}{k:width$}  {}\n", scalar(v)));
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                if is_nested(item) {
                    out.push_str(&format!("{pad}-\n{}", fields(item, indent + 2)));
                } else {
                    out.push_str(&format!("{pad}- {}\n", scalar(item)));
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
    out
}

fn is_nested(v: &Value) -> bool {
    match v {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => a.iter().any(|i| i.is_object() || i.is_array()),
        _ => false,
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::Bool(b) => yes_no(*b),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "(none)".to_string(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(", "),
        Value::Object(_) => "{}".to_string(),
        Value::Number(n) => n.to_string(),
    }
}

/// Rows under a header, columns padded to their widest cell.
pub(super) fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    if rows.is_empty() {
        return "(none)\n".to_string();
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_render_nested_values_indented() {
        let v = json!({"id": "p1", "paused": false, "rate_limit": {"per_second": 5}, "ips": []});
        assert_eq!(
            fields(&v, 0),
            "id          p1\nips         (none)\npaused      no\nrate_limit:\n  per_second  5\n"
        );
    }
}
