//! The docs against the repository: what they quote from it must be there.
//!
//! - Every list filter whose name has brackets (`metadata[<key>]`) has a `curl` example with
//!   `-g` (curl otherwise reads the brackets as a range: "bad range in URL") and one with the
//!   brackets as `%5B`/`%5D`.

use std::path::{Path, PathBuf};

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).expect("the doc reads")
}

/// The names in the first column of `doc`'s tables that have brackets: `metadata[<key>]` gives
/// `metadata`.
fn bracket_parameters(doc: &str) -> Vec<String> {
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name))
        .filter_map(|name| name.split_once('[').map(|(base, _)| base.to_string()))
        .filter(|base| !base.is_empty())
        .collect()
}

#[test]
fn every_bracket_filter_has_curl_examples_that_work() {
    let api = read("docs/api.md");
    let filters = bracket_parameters(&api);
    assert!(filters.contains(&"metadata".to_string()), "{filters:?}");
    let curls: Vec<&str> = api
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("curl "))
        .collect();
    for name in filters {
        let globbed = curls.iter().any(|l| {
            l.contains(&format!("{name}[")) && (l.contains(" -g ") || l.contains(" --globoff "))
        });
        assert!(
            globbed,
            "docs/api.md has no `curl -g` example of `{name}[...]`"
        );
        let encoded = curls.iter().any(|l| l.contains(&format!("{name}%5B")));
        assert!(
            encoded,
            "docs/api.md has no `curl` example of `{name}%5B...%5D`"
        );
    }
    // No curl line elsewhere in docs/api.md sends brackets without -g.
    for l in &curls {
        let url_has_brackets = l
            .split_whitespace()
            .any(|w| w.contains("?") && w.contains('['));
        assert!(
            !url_has_brackets || l.contains(" -g ") || l.contains(" --globoff "),
            "curl refuses brackets without -g: {l}"
        );
    }
}
