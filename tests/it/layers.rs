//! The module layering of `src/lib.rs`, enforced: every `crate::` (and
//! `super::`/`self::`) path in `src/**/*.rs` outside comments and
//! `#[cfg(test)]` modules is an edge, and the test fails naming file and
//! line of
//!
//! - an edge from a module to one on a higher layer, or to another module
//!   on the same layer (modules on one layer do not know each other);
//! - an edge between siblings of one folder (`a.rs` naming `super::b` or
//!   `crate::folder::b`, a subfolder counting as one sibling) that lies on a
//!   circle: siblings may depend on each other one way only. A folder's
//!   `mod.rs` is their parent, not a sibling, so it and its children may
//!   name each other.
//!
//! The layer list is read from `src/lib.rs`'s module doc, so the doc a
//! newcomer reads and the rule the build checks cannot drift apart.
//!
//! Not seen: an item a sibling reaches through its parent's re-export
//! (`super::Thing` defined in `b.rs`); macros that expand to paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Imports known to point up, each with why it is still there: `(file,
/// target, why)`, the target as the module path it names. Empty is the goal.
const ALLOWED_UP: &[(&str, &str, &str)] = &[];

/// Sibling edges that still close a circle, left out of the circle check:
/// `(folder, from, to, why)`, `*` for any file of the folder. Empty is the
/// goal; an entry no edge needs any more fails the test, so the list only
/// shrinks (a `*` entry is needed while its folder has any sibling edge).
const ALLOWED_CIRCLES: &[(&str, &str, &str, &str)] = &[];

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of `src/lib.rs`'s `# Layers` list, bottom first, without
/// their `//! `: `N. `a`, `b` — why`.
fn layer_lines() -> Vec<String> {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let mut out = Vec::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim();
        if doc.starts_with('#') {
            inside = doc == "# Layers";
            continue;
        }
        if inside
            && doc
                .split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        {
            out.push(doc.to_owned());
        }
    }
    out
}

/// The layers, bottom first: the modules each line of [`layer_lines`] names.
fn layers() -> Vec<Vec<String>> {
    layer_lines()
        .iter()
        .map(|line| {
            let (_, rest) = line.split_once(". ").unwrap();
            let names = rest.split(" — ").next().unwrap();
            names
                .split(',')
                .map(|n| n.trim().trim_matches('`').to_owned())
                .collect()
        })
        .collect()
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src/`: `a/b/c.rs` → `[a, b, c]`,
/// `a/b/mod.rs` → `[a, b]`, `lib.rs` → `[]`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The lines of `text` that are code: comments dropped, and the body of
/// every `#[cfg(test)]` module skipped (up to the `}` at its indentation).
pub(crate) fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut test_attribute = false;
    let mut skip_until: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(end) = &skip_until {
            if line == end {
                skip_until = None;
            }
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            test_attribute = true;
            continue;
        }
        if test_attribute {
            test_attribute = false;
            let indent = &line[..line.len() - trimmed.len()];
            if (trimmed.starts_with("mod ") || trimmed.starts_with("pub(crate) mod "))
                && trimmed.ends_with('{')
            {
                skip_until = Some(format!("{indent}}}"));
                continue;
            }
            if trimmed.starts_with("mod ") && trimmed.ends_with(';') {
                continue;
            }
        }
        let code = match line.find("//") {
            // A `//` inside a string is rare in paths' company; cut it anyway.
            Some(at) => &line[..at],
            None => line,
        };
        out.push((i + 1, code.to_owned()));
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path starting `crate::`, `super::` or `self::` on `line`, as
/// absolute module paths (as far as they are written: `crate::a::{b, c}`
/// gives `a::b` and `a::c`), resolved from `module` (the file's module;
/// `is_mod` when the file is a `mod.rs` or `lib.rs`).
fn paths(line: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < line.len() {
        let rest = &line[i..];
        let before_ok = i == 0 || !is_ident(bytes[i - 1] as char) && bytes[i - 1] != b':';
        let start = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|p| rest.starts_with(p));
        let (Some(_), true) = (start, before_ok) else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        // Segments up to the first non-path character; `{` opens a group.
        let mut segments: Vec<String> = Vec::new();
        let mut j = i;
        loop {
            let word: String = line[j..].chars().take_while(|c| is_ident(*c)).collect();
            if word.is_empty() {
                break;
            }
            segments.push(word.clone());
            j += word.len();
            if line[j..].starts_with("::") {
                j += 2;
            } else {
                break;
            }
        }
        let mut groups = vec![Vec::new()];
        if line[j..].starts_with('{') {
            // One level: the first segment of each member.
            let inner: String = line[j + 1..].chars().take_while(|c| *c != '}').collect();
            groups = inner
                .split(',')
                .map(|m| m.trim().split("::").next().unwrap_or("").trim().to_owned())
                .filter(|m| !m.is_empty() && m.chars().all(is_ident))
                .map(|m| vec![m])
                .collect();
        }
        let mut base: Vec<String> = module.to_vec();
        let mut rest_segments = segments.as_slice();
        match rest_segments.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest_segments = &rest_segments[1..];
            }
            _ => {
                while let Some(first) = rest_segments.first() {
                    match first.as_str() {
                        "super" => {
                            base.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    rest_segments = &rest_segments[1..];
                }
            }
        }
        for group in groups {
            let mut full = base.clone();
            full.extend(rest_segments.iter().cloned());
            full.extend(group);
            if full != module {
                out.push(full);
            }
        }
        i = j.max(i + 1);
    }
    out
}

struct Edge {
    file: String,
    line: usize,
    text: String,
    target: Vec<String>,
}

#[test]
fn no_module_imports_from_a_layer_above_it_and_no_folder_has_a_circle() {
    let layers = layers();
    assert!(
        layers.len() > 3,
        "src/lib.rs has no `# Layers` list: {layers:?}"
    );
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(n, ms)| ms.iter().map(move |m| (m.as_str(), n)))
        .collect();
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();

    let mut problems = Vec::new();
    // Every top-level module of the crate is on exactly one layer.
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let module = module_of(relative);
        if module.len() == 1 && !layer_of.contains_key(module[0].as_str()) {
            problems.push(format!(
                "src/{}: module `{}` is on no layer of src/lib.rs's `# Layers`",
                relative.display(),
                module[0]
            ));
        }
    }

    let mut edges: Vec<(Vec<String>, Edge)> = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        if relative == Path::new("lib.rs") || relative == Path::new("main.rs") {
            continue;
        }
        let module = module_of(relative);
        let text = std::fs::read_to_string(file).unwrap();
        for (line, code) in code_lines(&text) {
            for target in paths(&code, &module) {
                edges.push((
                    module.clone(),
                    Edge {
                        file: format!("src/{}", relative.display()),
                        line,
                        text: code.trim().to_owned(),
                        target,
                    },
                ));
            }
        }
    }
    let used_up = std::cell::RefCell::new(BTreeSet::new());
    let allowed = |e: &Edge| {
        let entry = ALLOWED_UP.iter().position(|(f, t, _)| {
            *f == e.file && format!("crate::{}", e.target.join("::")).starts_with(t)
        });
        entry.inspect(|n| {
            used_up.borrow_mut().insert(*n);
        });
        entry.is_some()
    };

    // Across top-level modules: only down.
    for (module, edge) in &edges {
        let (Some(from), Some(to)) = (module.first(), edge.target.first()) else {
            continue;
        };
        if from == to || allowed(edge) {
            continue;
        }
        let (Some(&a), Some(&b)) = (layer_of.get(from.as_str()), layer_of.get(to.as_str())) else {
            continue;
        };
        if b >= a {
            problems.push(format!(
                "{}:{}: `{from}` (layer {}) imports `{to}` (layer {}{}): {}",
                edge.file,
                edge.line,
                a + 1,
                b + 1,
                if a == b { ", the same" } else { ", above it" },
                edge.text
            ));
        }
    }

    // Inside each folder: sibling edges, then those on a circle.
    // folder → (from child, to child) → first edge seen.
    let mut folders: BTreeMap<Vec<String>, BTreeMap<(String, String), &Edge>> = BTreeMap::new();
    let children = |folder: &[String]| -> BTreeSet<String> {
        let dir = folder.iter().fold(src.clone(), |d, p| d.join(p));
        std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
                    .map(|p| {
                        p.file_name()
                            .unwrap()
                            .to_string_lossy()
                            .trim_end_matches(".rs")
                            .to_owned()
                    })
                    .filter(|n| n != "mod")
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut known: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    let mut used_circles = BTreeSet::new();
    for (module, edge) in &edges {
        // Each folder above the file. A `mod.rs` is not a node of its own
        // folder, but it is its folder's node in the folder above: its
        // module path ends with the folder's name, so the same walk counts
        // it there (`manifest/tasks/mod.rs` is `tasks` in `manifest`).
        for d in 1..module.len() {
            let folder = &module[..d];
            let node = &module[d];
            if !edge.target.starts_with(folder) || edge.target.len() <= d {
                continue;
            }
            let to = &edge.target[d];
            let kids = known
                .entry(folder.to_vec())
                .or_insert_with(|| children(folder));
            if to == node || !kids.contains(to) {
                continue;
            }
            let name = folder.join("/");
            if let Some(entry) = ALLOWED_CIRCLES.iter().position(|(f, a, b, _)| {
                *f == name && (*a == "*" || a == node) && (*b == "*" || b == to)
            }) {
                used_circles.insert(entry);
                continue;
            }
            folders
                .entry(folder.to_vec())
                .or_default()
                .entry((node.clone(), to.clone()))
                .or_insert(edge);
        }
    }
    for (folder, graph) in &folders {
        let reaches = |from: &str, goal: &str| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![from.to_owned()];
            while let Some(n) = stack.pop() {
                if n == goal {
                    return true;
                }
                if seen.insert(n.clone()) {
                    stack.extend(
                        graph
                            .keys()
                            .filter(|(a, _)| *a == n)
                            .map(|(_, b)| b.clone()),
                    );
                }
            }
            false
        };
        for ((a, b), edge) in graph {
            if reaches(b, a) {
                problems.push(format!(
                    "{}:{}: in folder `{}`, `{a}` → `{b}` lies on a circle: {}",
                    edge.file,
                    edge.line,
                    folder.join("/"),
                    edge.text
                ));
            }
        }
    }

    for (n, entry) in ALLOWED_UP.iter().enumerate() {
        if !used_up.borrow().contains(&n) {
            problems.push(format!("ALLOWED_UP {entry:?} is needed no more: remove it"));
        }
    }
    for (n, entry) in ALLOWED_CIRCLES.iter().enumerate() {
        if !used_circles.contains(&n) {
            problems.push(format!(
                "ALLOWED_CIRCLES {entry:?} is needed no more: remove it"
            ));
        }
    }

    assert!(
        problems.is_empty(),
        "{} layering problems (order in src/lib.rs `# Layers`):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_path_reader_resolves_groups_and_relative_paths() {
    let m = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
    let module = m("exec::snapshot");
    assert_eq!(
        paths("use crate::store::{Warehouse, delta::X};", &module),
        vec![m("store::Warehouse"), m("store::delta")]
    );
    assert_eq!(
        paths("let a = super::inputs::pin(x);", &module),
        vec![m("exec::inputs::pin")]
    );
    assert_eq!(paths("use self::b::C;", &m("a")), vec![m("a::b::C")]);
    assert!(paths("my_crate::x::y", &module).is_empty());
    let skipped = code_lines("use a;\n#[cfg(test)]\nmod tests {\n    use crate::x;\n}\nuse b;\n");
    assert_eq!(
        skipped.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        vec![1, 6]
    );
}

// The book's page on layers copies `src/lib.rs`'s list for readers who
// never open the source; a layer added or moved in one and not the other
// fails here.
#[test]
fn the_book_lists_the_layers_of_lib_rs() {
    let lib = layer_lines();
    assert!(
        lib.len() > 10,
        "no layer list read from src/lib.rs: {lib:?}"
    );
    let book = std::fs::read_to_string(root().join("docs/dev/layers.md")).unwrap();
    let listed: Vec<&str> = book
        .lines()
        .filter(|l| {
            l.split_once(". `")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .collect();
    assert_eq!(listed, lib, "docs/dev/layers.md's list is not src/lib.rs's");
}
