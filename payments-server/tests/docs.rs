//! The docs against the repository: what they quote from it must be there.
//!
//! - Every list filter whose name has brackets (`metadata[<key>]`) has a `curl` example with
//!   `-g` (curl otherwise reads the brackets as a range: "bad range in URL") and one with the
//!   brackets as `%5B`/`%5D`.
//! - Every repository path the README and `docs/` name in backticks exists.
//! - A list of "all scopes" names every scope a token can have.

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

/// The repository paths `text` names in backticks: a word that starts with one of the
/// workspace's top-level directories and names a file or directory below it (a line number,
/// an anchor or a test name after `:` or `#` left out; patterns with `*`, `<` or `...` skipped).
fn named_paths(text: &str) -> Vec<String> {
    let tops: Vec<String> = std::fs::read_dir(root())
        .expect("the workspace root lists")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| format!("{}/", e.file_name().to_string_lossy()))
        .filter(|d| !d.starts_with("target") && d != "data/")
        .collect();
    let mut out = Vec::new();
    for quoted in text.split('`').skip(1).step_by(2) {
        for word in quoted.split_whitespace() {
            let word = word.trim_matches(|c: char| "()[],;\"'".contains(c));
            let word = word.split([':', '#']).next().unwrap_or_default();
            if tops.iter().any(|t| word.starts_with(t.as_str()))
                && word.len() > word.find('/').unwrap_or(0) + 1
                && !word.contains(['*', '<', '{', '$'])
                && !word.contains("...")
            {
                out.push(word.to_string());
            }
        }
    }
    out
}

/// Every repository path the README and `docs/` name exists: a renamed or moved file shows
/// here, not to a reader who follows the path.
#[test]
fn every_path_the_docs_name_exists() {
    let mut docs = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).expect("docs/ lists") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path);
        }
    }
    let mut missing = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("the doc reads");
        for path in named_paths(&text) {
            if !root().join(&path).exists() {
                let name = doc
                    .strip_prefix(root())
                    .unwrap_or(doc)
                    .display()
                    .to_string();
                missing.push(format!("{name}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
}

/// Where the docs list "all scopes", they list every scope a token can have.
#[test]
fn a_list_of_all_scopes_names_every_scope() {
    use payments_core::auth::token::Scope;
    let mut lists = 0;
    for doc in ["README.md", "docs/operations.md", "docs/api.md"] {
        for line in read(doc).lines() {
            let Some((_, rest)) = line.split_once("all scopes (") else {
                continue;
            };
            lists += 1;
            let listed = rest.split(')').next().unwrap_or_default();
            for scope in Scope::ALL {
                assert!(
                    listed.contains(&format!("`{}`", scope.as_str())),
                    "{doc}: `{}` missing from {line}",
                    scope.as_str()
                );
            }
        }
    }
    assert!(lists > 0, "the bootstrap's scopes are listed somewhere");
}

/// The README's table of ignored tests: each row's count is the number of `#[ignore = "..."]`
/// attributes in the source whose reason starts with one of the row's prefixes, and every
/// ignored test is in a row, except the three the README says `--skip` leaves out. Seen
/// failing on the table of before (PostgreSQL 18 for 31, Chromium 6 for 16, promtool and the
/// previous release missing).
#[test]
fn the_readme_counts_every_ignored_test() {
    let reasons = ignore_reasons(&root());
    let readme = read("README.md");
    let table = readme
        .split_once("| the tests | need | `#[ignore = ...]` |")
        .expect("the README's table of ignored tests")
        .1;
    let mut counted = 0;
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').collect();
        let said: usize = cells[1]
            .rsplit_once('(')
            .and_then(|(_, n)| n.trim().trim_end_matches(')').parse().ok())
            .unwrap_or_else(|| panic!("no (count) in {row}"));
        let prefixes: Vec<&str> = cells[3]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|p| p.trim_end_matches("...").trim())
            .collect();
        let found = reasons
            .iter()
            .filter(|r| prefixes.iter().any(|p| r.starts_with(p)))
            .count();
        assert_eq!(
            found, said,
            "{prefixes:?}: the source has {found}, the README says {said}"
        );
        counted += found;
    }
    let skipped = [
        "writes the seed",
        "writes the documentation's",
        "not a test",
    ];
    let rest: Vec<&String> = reasons
        .iter()
        .filter(|r| !skipped.iter().any(|s| r.starts_with(s)))
        .collect();
    assert_eq!(
        counted,
        rest.len(),
        "ignored tests in no row of the README's table: {rest:#?}"
    );
}

/// The reason of every `#[ignore = "..."]` in the workspace's Rust files (comments aside).
fn ignore_reasons(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a directory lists") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !name.starts_with('.') && !["target", "node_modules"].contains(&name) {
                out.extend(ignore_reasons(&path));
            }
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for line in text.lines().map(str::trim) {
                if line.starts_with("//") {
                    continue;
                }
                if let Some(rest) = line.strip_prefix("#[ignore = \"") {
                    out.push(rest.to_string());
                }
            }
        }
    }
    out
}
