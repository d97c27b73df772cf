//! The module layering of `src/lib.rs`, enforced: every `crate::` (and
//! `super::`/`self::`) path in `src/**/*.rs` outside comments and
//! `#[cfg(test)]` modules is an edge, and the test fails naming file and
//! line of
//!
//! - an edge from a module to one on a higher layer, or to another module
//!   on the same layer (modules on one layer do not know each other);
//! - an edge between the nodes of one folder that lies on a circle: the
//!   nodes are its files (a subfolder counting as one) and its `mod.rs` as
//!   `mod` (or `a.rs` beside `a/`). `a.rs` naming `super::b` or
//!   `crate::folder::b` is `a` → `b`; naming an item of the folder's module
//!   is `a` → `mod`, or `a` → `b` when `mod.rs` only imports it from `b`;
//!   `mod.rs`'s code naming a child (`b::f()`, `use b::X;`) is `mod` → `b`,
//!   but its `mod b;` and re-exports (`pub use b::X;`, any visibility) are
//!   not edges: a folder's entry point declares, re-exports and dispatches
//!   downward, and its children depend on each other one way only.
//!
//! The layer list is read from `src/lib.rs`'s module doc, so the doc a
//! newcomer reads and the rule the build checks cannot drift apart. A `use`
//! spanning lines is read whole; `tests.rs` files are test modules.
//!
//! Not seen: macros that expand to paths; a glob re-export's names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Imports known to point up, each with why it is still there: `(file,
/// target, why)`, the target as the module path it names. Empty is the goal.
const ALLOWED_UP: &[(&str, &str, &str)] = &[];

/// Sibling edges that still close a circle, left out of the circle check:
/// `(folder, from, to, why)`, `*` for any file of the folder. Empty is the
/// goal; an entry no edge needs any more fails the test, so the list only
/// shrinks (a `*` entry is needed while its folder has any sibling edge).
const ALLOWED_CIRCLES: &[(&str, &str, &str, &str)] = &[
    ("exec", "*", "*", "job.rs and scheduler.rs are mod.rs's body split out (`use super::*`), and lease and attempt take mod.rs's `Context`; next"),
    ("exec/attempt", "*", "*", "audited.rs and publish.rs are mod.rs's body split out (`use super::*`), and batch calls mod.rs's steps; next"),
    ("sim", "*", "*", "engine and report work on mod.rs's `Sim`; next"),
    ("store", "*", "*", "sibling circles seen through store's re-exports (log and file_sum, backend and file_sum, partition and epoch, fs, leases, summary); next"),
    ("store/delta", "*", "*", "replay.rs is mod.rs's body split out (`use super::*`, `use replay::*`); next"),
];

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

/// `text`'s code lines with each `use` that spans lines joined into one,
/// numbered by its first line, so a group's members are read with their
/// prefix.
fn statements(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (line, code) in code_lines(text) {
        if open {
            let last = out.last_mut().unwrap();
            last.1.push(' ');
            last.1.push_str(code.trim());
            open = !code.contains(';');
            continue;
        }
        open = use_tree(&code).is_some() && !code.contains(';');
        out.push((line, code));
    }
    out
}

/// The tree of a `use` statement and whether it is visible outside its
/// module (`pub`, `pub(crate)`, … use): `pub(crate) use a::{b, c};` →
/// `(true, "a::{b, c}")`.
fn use_tree(statement: &str) -> Option<(bool, &str)> {
    let mut rest = statement.trim_start();
    let public = rest.starts_with("pub");
    if public {
        rest = rest["pub".len()..].trim_start();
        if rest.starts_with('(') {
            rest = &rest[rest.find(')')? + 1..];
        }
        rest = rest.trim_start();
    }
    let tree = rest.strip_prefix("use ")?;
    Some((public, tree.trim().trim_end_matches(';').trim()))
}

/// `list` cut at the commas outside braces.
fn split_top(list: &str) -> Vec<&str> {
    let (mut out, mut depth, mut from) = (Vec::new(), 0, 0);
    for (i, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&list[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&list[from..]);
    out.into_iter().filter(|m| !m.trim().is_empty()).collect()
}

/// The leaves of a use tree: each path as written and the name it binds
/// (`a::{b::C as D, self}` → `(a::b::C, D)` and `(a, a)`).
fn use_leaves(tree: &str) -> Vec<(Vec<String>, String)> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let (path, alias) = match tree.split_once(" as ") {
            Some((p, a)) => (p, Some(a.trim())),
            None => (tree, None),
        };
        let segments: Vec<String> = path
            .split("::")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let Some(last) = segments.last() else {
            return Vec::new();
        };
        let name = alias.unwrap_or(last).to_owned();
        return vec![(segments, name)];
    };
    let prefix: Vec<String> = tree[..open]
        .split("::")
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let close = tree.rfind('}').unwrap_or(tree.len()).max(open + 1);
    let mut out = Vec::new();
    for member in split_top(&tree[open + 1..close]) {
        for (path, name) in use_leaves(member) {
            let mut full = prefix.clone();
            if path == ["self"] {
                let name = prefix.last().cloned().unwrap_or(name);
                out.push((full, name));
                continue;
            }
            full.extend(path);
            out.push((full, name));
        }
    }
    out
}

/// A path as written in `module`, made absolute: `crate::`, `super::` and
/// `self::` resolved, a first segment naming one of `kids` (the module's
/// own children, for a `mod.rs`) taken as relative; `None` for a path
/// outside the crate.
fn resolve(segments: &[String], module: &[String], kids: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut base = module.to_vec();
    let mut rest = segments;
    match rest.first().map(String::as_str)? {
        "crate" => {
            base.clear();
            rest = &rest[1..];
        }
        "super" | "self" => {
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        base.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        first if kids.contains(first) => {}
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Every `kid::` path on a `mod.rs`'s `line` (one not preceded by `::`),
/// as `module::kid`: the children a folder's entry point names directly.
fn bare_children(line: &str, module: &[String], kids: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for kid in kids {
        let pattern = format!("{kid}::");
        let mut from = 0;
        while let Some(at) = line[from..].find(&pattern) {
            let i = from + at;
            let before = line[..i].chars().next_back();
            if before.is_none_or(|c| !is_ident(c) && c != ':') {
                let mut target = module.to_vec();
                target.push(kid.clone());
                out.push(target);
            }
            from = i + pattern.len();
        }
    }
    out
}

struct Edge {
    file: String,
    line: usize,
    text: String,
    target: Vec<String>,
    /// The edge is a `use` its module makes visible to others (`pub use`,
    /// any visibility): a facade's re-export, not the module's own code.
    reexport: bool,
}

/// A source file: its path under `src/` and its text.
type Source = (PathBuf, String);

/// Each module's children, from the files' paths: `a/b.rs` and `a/c/d.rs`
/// give `a` → `{b, c}` (a `mod.rs` is no child).
fn children_of(sources: &[Source]) -> BTreeMap<Vec<String>, BTreeSet<String>> {
    let mut out: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for (relative, _) in sources {
        let parts: Vec<String> = relative
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
            .collect();
        for d in 0..parts.len() {
            if parts[d] != "mod" && parts[d] != "lib" && parts[d] != "main" {
                out.entry(parts[..d].to_vec())
                    .or_default()
                    .insert(parts[d].clone());
            }
        }
    }
    out
}

/// Every edge of every source (not `lib.rs`, `main.rs`), with its module.
fn edges_of(sources: &[Source]) -> Vec<(Vec<String>, Edge)> {
    let children = children_of(sources);
    let none = BTreeSet::new();
    let mut edges = Vec::new();
    for (relative, text) in sources {
        // `tests.rs` is a `#[cfg(test)]` module of its folder.
        let tests = relative.file_name().is_some_and(|n| n == "tests.rs");
        if tests || relative == Path::new("lib.rs") || relative == Path::new("main.rs") {
            continue;
        }
        let module = module_of(relative);
        let kids = children.get(&module).unwrap_or(&none);
        for (line, code) in statements(text) {
            let (reexport, targets) = match use_tree(&code) {
                Some((public, tree)) => (
                    public,
                    use_leaves(tree)
                        .iter()
                        .filter_map(|(path, _)| resolve(path, &module, kids))
                        .collect(),
                ),
                None => {
                    let mut targets = paths(&code, &module);
                    targets.extend(bare_children(&code, &module, kids));
                    (false, targets)
                }
            };
            for target in targets {
                if target.is_empty() || target == module {
                    continue;
                }
                edges.push((
                    module.clone(),
                    Edge {
                        file: format!("src/{}", relative.display()),
                        line,
                        text: code.trim().to_owned(),
                        target,
                        reexport,
                    },
                ));
            }
        }
    }
    edges
}

/// For each module with children, the names its own `use` lines bind and
/// the child each comes from (`None`: from outside the module).
fn imported_names(sources: &[Source]) -> BTreeMap<Vec<String>, BTreeMap<String, Option<String>>> {
    let children = children_of(sources);
    let mut out: BTreeMap<Vec<String>, BTreeMap<String, Option<String>>> = BTreeMap::new();
    for (relative, text) in sources {
        let module = module_of(relative);
        let Some(kids) = children.get(&module) else {
            continue;
        };
        for (_, code) in statements(text) {
            let Some((_, tree)) = use_tree(&code) else {
                continue;
            };
            for (path, name) in use_leaves(tree) {
                let from = resolve(&path, &module, kids)
                    .filter(|t| t.len() > module.len() && t.starts_with(&module))
                    .map(|t| t[module.len()].clone())
                    .filter(|kid| kids.contains(kid));
                if name != "*" {
                    out.entry(module.clone()).or_default().insert(name, from);
                }
            }
        }
    }
    out
}

/// The edges between the nodes of each folder that lie on a circle, as
/// the test's messages, and the entries of `allowed` that left one out.
/// A folder's nodes are its children (a subfolder is one node) and its
/// `mod.rs` as `mod`: a child naming an item of the folder's module is an
/// edge to `mod`, or to the child it is re-exported from; `mod.rs`'s code
/// naming a child is an edge `mod` → child, its re-exports are not edges.
fn circles(
    sources: &[Source],
    allowed: &[(&str, &str, &str, &str)],
) -> (Vec<String>, BTreeSet<usize>) {
    let edges = edges_of(sources);
    let children = children_of(sources);
    let names = imported_names(sources);
    // folder → (from node, to node) → first edge seen.
    let mut folders: BTreeMap<Vec<String>, BTreeMap<(String, String), &Edge>> = BTreeMap::new();
    let mut used = BTreeSet::new();
    for (module, edge) in &edges {
        // Each folder above the file, and the file's own folder when it is
        // the folder's module (`mod.rs`, or `a.rs` beside `a/`).
        let own = usize::from(children.contains_key(module));
        for d in 1..module.len() + own {
            let folder = &module[..d];
            let node = module.get(d).map_or("mod", String::as_str);
            if d == module.len() && edge.reexport {
                continue;
            }
            if !edge.target.starts_with(folder) || edge.target.len() <= d {
                continue;
            }
            let Some(kids) = children.get(folder) else {
                continue;
            };
            let name = &edge.target[d];
            let to = if kids.contains(name) {
                name.as_str()
            } else {
                match names.get(folder).and_then(|n| n.get(name)) {
                    Some(Some(kid)) => kid.as_str(),
                    Some(None) => continue,
                    None => "mod",
                }
            };
            if to == node {
                continue;
            }
            let folder_name = folder.join("/");
            if let Some(entry) = allowed.iter().position(|(f, a, b, _)| {
                *f == folder_name && (*a == "*" || *a == node) && (*b == "*" || *b == to)
            }) {
                used.insert(entry);
                continue;
            }
            folders
                .entry(folder.to_vec())
                .or_default()
                .entry((node.to_owned(), to.to_owned()))
                .or_insert(edge);
        }
    }
    let mut problems = Vec::new();
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
    (problems, used)
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
    let sources: Vec<Source> = files
        .iter()
        .map(|f| {
            let relative = f.strip_prefix(&src).unwrap().to_path_buf();
            (relative, std::fs::read_to_string(f).unwrap())
        })
        .collect();

    let mut problems = Vec::new();
    // Every top-level module of the crate is on exactly one layer.
    for (relative, _) in &sources {
        let module = module_of(relative);
        if module.len() == 1 && !layer_of.contains_key(module[0].as_str()) {
            problems.push(format!(
                "src/{}: module `{}` is on no layer of src/lib.rs's `# Layers`",
                relative.display(),
                module[0]
            ));
        }
    }

    let edges = edges_of(&sources);
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

    // Inside each folder: the edges on a circle.
    let (circled, used_circles) = circles(&sources, ALLOWED_CIRCLES);
    problems.extend(circled);

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

// A folder's module is a node of its folder: a child naming what `mod.rs`
// defines, while `mod.rs`'s code names that child, is a circle; `mod.rs`
// re-exporting a child is not, and a name it re-exports leads to the child
// it comes from.
#[test]
fn a_folder_module_and_its_child_naming_each_other_is_a_circle() {
    let source = |p: &str, t: &str| (PathBuf::from(p), t.to_owned());
    let facade = [
        source(
            "a/mod.rs",
            "mod b;\nmod c;\npub use b::Shared;\npub fn run() {}\n",
        ),
        source("a/b.rs", "pub struct Shared;\n"),
        source("a/c.rs", "use super::Shared;\n"),
    ];
    assert_eq!(circles(&facade, &[]).0, Vec::<String>::new());
    let circle = [
        source(
            "a/mod.rs",
            "mod b;\npub struct Settings;\npub fn run() {\n    b::go();\n}\n",
        ),
        source("a/b.rs", "use super::Settings;\npub fn go() {}\n"),
    ];
    assert_eq!(
        circles(&circle, &[]).0,
        vec![
            "src/a/b.rs:1: in folder `a`, `b` → `mod` lies on a circle: use super::Settings;",
            "src/a/mod.rs:4: in folder `a`, `mod` → `b` lies on a circle: b::go();",
        ]
    );
    // Through the re-export: `c` names `b`'s item by the parent's name.
    let through = [
        source(
            "a/mod.rs",
            "mod b;\nmod c;\npub use self::{\n    b::Shared,\n};\n",
        ),
        source("a/b.rs", "pub fn go() {\n    super::c::f();\n}\n"),
        source("a/c.rs", "use crate::a::Shared;\npub fn f() {}\n"),
    ];
    assert_eq!(circles(&through, &[]).0.len(), 2);
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
    // A `use` over lines is read whole, nested groups and renames too.
    let joined = statements(
        "pub(crate) use crate::{\n    store::{a, b as c},\n    exec::D,\n};\nfn f() {}\n",
    );
    assert_eq!(joined.len(), 2);
    let (public, tree) = use_tree(&joined[0].1).unwrap();
    assert!(public);
    let leaves: Vec<(Vec<String>, String)> = use_leaves(tree);
    assert_eq!(
        leaves,
        vec![
            (m("crate::store::a"), "a".to_owned()),
            (m("crate::store::b"), "c".to_owned()),
            (m("crate::exec::D"), "D".to_owned()),
        ]
    );
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
