//! The reference pages in `docs/reference/` are what the code generates
//! (`weir::cli::reference`): commands and flags from clap, manifest keys
//! from the schema, exit codes, event states and the task environment.
//! A difference fails; `WEIR_BLESS=1` rewrites them. The book's summary
//! (`docs/SUMMARY.md`) lists every page of docs/, the reference pages
//! included, and every relative link in README.md, BENCHMARKS.md and docs/
//! resolves, to a file and, with `#`, to one of its headings.

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
fn the_summary_links_every_reference_page() {
    let summary = std::fs::read_to_string(repo().join("docs/SUMMARY.md")).unwrap();
    for (name, _) in weir::cli::reference::pages() {
        assert!(
            summary.contains(&format!("](reference/{name})")),
            "docs/SUMMARY.md does not link reference/{name}"
        );
    }
}

// mdBook renders only what SUMMARY.md lists: a page left out of it is not in
// the book, and a page it lists that is missing fails the build.
#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let docs = repo().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let listed: Vec<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    let mut files = Vec::new();
    markdown_files(&docs, &mut files);
    let mut missing = Vec::new();
    for file in files {
        let page = file
            .strip_prefix(&docs)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if page != "SUMMARY.md" && !listed.contains(&page) {
            missing.push(page);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/SUMMARY.md does not list {missing:?}"
    );
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

/// The anchors of a Markdown page's headings, as mdBook and GitHub make
/// them: code marks dropped, lower case, spaces to `-`, other punctuation
/// but `-` and `_` dropped; a repeated anchor gets `-1`, `-2` …
fn anchors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashMap::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(title) = line
            .strip_prefix('#')
            .map(|t| t.trim_start_matches('#'))
            .and_then(|t| t.strip_prefix(' '))
        else {
            continue;
        };
        if fenced {
            continue;
        }
        let mut id = String::new();
        for c in title.trim().chars() {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                id.extend(c.to_lowercase());
            } else if c.is_whitespace() {
                id.push('-');
            }
        }
        let seen = seen.entry(id.clone()).or_insert(0);
        if *seen > 0 {
            id = format!("{id}-{seen}");
        }
        *seen += 1;
        out.push(id);
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

/// Every relative link of `file` (holding `text`) that does not resolve: a
/// path that does not exist, or an anchor that no heading of the page makes.
fn broken_links(file: &Path, text: &str) -> Vec<String> {
    let mut broken = Vec::new();
    for (line, target) in links(text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
        let page = if path.is_empty() {
            file.to_owned()
        } else {
            file.parent().unwrap().join(path)
        };
        let fault = if !page.exists() {
            "does not resolve"
        } else if anchor.is_empty()
            || page.extension().is_some_and(|e| e == "md")
                && anchors(&std::fs::read_to_string(&page).unwrap()).contains(&anchor.to_owned())
        {
            continue;
        } else {
            "names no heading of its page"
        };
        broken.push(format!("{}:{line}: `{target}` {fault}", file.display()));
    }
    broken
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let mut files = vec![repo().join("README.md"), repo().join("BENCHMARKS.md")];
    markdown_files(&repo().join("docs"), &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for fault in broken_links(file, &text) {
            broken.push(fault.replace(&format!("{}/", repo().display()), ""));
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

#[test]
fn a_link_to_a_missing_page_or_heading_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.md");
    let text = "# The `weir run` page\n\n## Exit codes: 5\n\n```sh\n# not a heading\n```\n\
                [a](page.md#the-weir-run-page) [b](#exit-codes-5) [c](gone.md)\n\
                [d](page.md#not-a-heading) [e](#exit-codes)\n";
    std::fs::write(&page, text).unwrap();
    let broken: Vec<String> = broken_links(&page, text)
        .into_iter()
        .map(|b| b.rsplit(": ").next().unwrap().to_owned())
        .collect();
    assert_eq!(
        broken,
        [
            "`gone.md` does not resolve",
            "`page.md#not-a-heading` names no heading of its page",
            "`#exit-codes` names no heading of its page",
        ]
    );
}
