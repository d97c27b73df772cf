//! The reference pages in `docs/reference/` are what the code generates
//! (`weir::cli::reference`): commands and flags from clap, manifest keys
//! from the schema, exit codes, event states and the task environment.
//! A difference fails; `WEIR_BLESS=1` rewrites them. Every relative link
//! in README.md and docs/ resolves, and docs/README.md links every page.

use std::path::{Path, PathBuf};

use crate::support::{assert_snapshot, repo};

#[test]
fn the_reference_pages_are_what_the_code_generates() {
    let pages = weir::cli::reference::pages();
    let dir = repo().join("docs/reference");
    for (name, text) in &pages {
        assert_snapshot(&dir.join(name), text);
    }
    // A page the generator no longer makes is not left behind.
    let mut stale = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !pages.iter().any(|(p, _)| *p == name) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "docs/reference/ holds pages nothing generates: {stale:?}"
    );
}

#[test]
fn the_docs_index_links_every_reference_page() {
    let index = std::fs::read_to_string(repo().join("docs/README.md")).unwrap();
    for (name, _) in weir::cli::reference::pages() {
        assert!(
            index.contains(&format!("](reference/{name})")),
            "docs/README.md does not link reference/{name}"
        );
    }
}

/// The targets of `[text](target)` links in Markdown `text`, code spans
/// and fenced blocks left out.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans may hold `](` that is no link.
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push((n + 1, rest[..end].trim().to_owned()));
                rest = &rest[end..];
            }
        }
    }
    out
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let mut files = vec![repo().join("README.md")];
    markdown_files(&repo().join("docs"), &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, target) in links(&text) {
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !file.parent().unwrap().join(path).exists() {
                broken.push(format!(
                    "{}:{line}: `{target}` does not resolve",
                    file.strip_prefix(repo()).unwrap().display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_link_reader_skips_code_and_finds_every_link() {
    let text = "a [x](one.md) and [y](two.md#part)\n`[no](code.md)`\n```\n[no](fenced.md)\n```\n";
    assert_eq!(
        links(text),
        [(1, "one.md".to_owned()), (1, "two.md#part".to_owned())]
    );
}
