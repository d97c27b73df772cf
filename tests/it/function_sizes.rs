//! Functions a person can hold: no non-test function in
//! `src/**/*.rs` is longer than [`LIMIT`] lines, but those on
//! [`ALLOWED_LONG`], and every entry there is still over it, so the list
//! only shrinks.
//!
//! A function runs from its `fn` line to the first line that is its
//! indentation followed by `}`; a declaration without a body is none, a
//! body on one line is one line. Not counted: `tests.rs` files and an
//! inline `#[cfg(test)]` module (`#[cfg(test)]` then `mod name {` up to the
//! `}` in column 0), as `ci/long_functions.py` and `ci/sizes.sh` count.

use std::path::{Path, PathBuf};

/// The longest a function may be, in lines.
const LIMIT: usize = 100;

/// Functions still over [`LIMIT`]: `(file, function, why)`. Empty, and
/// meant to stay so; an entry whose function is cut (or gone) fails the
/// test.
const ALLOWED_LONG: &[(&str, &str, &str)] = &[];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The name and indentation of the function a line starts, if it does:
/// `[pub[(…)] ][const ][async ][unsafe ]fn name`.
fn function_start(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start();
    let indent = &line[..line.len() - rest.len()];
    let mut rest = rest;
    if let Some(after) = rest.strip_prefix("pub") {
        rest = match after.strip_prefix('(') {
            Some(scope) => scope.split_once(") ")?.1,
            None => after.strip_prefix(' ')?,
        };
    }
    for qualifier in ["const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    (end > 0).then(|| (indent, &name[..end]))
}

/// Lines of the function whose `fn` is `lines[at]`.
fn length(lines: &[&str], at: usize, indent: &str) -> usize {
    let mut j = at;
    while j < lines.len() {
        let line = lines[j].trim_end();
        if line.ends_with('{') {
            break;
        }
        if line.ends_with(';') && !line.contains('{') {
            return 0;
        }
        if line.ends_with('}') && line.contains('{') {
            return j - at + 1;
        }
        j += 1;
    }
    let close = format!("{indent}}}");
    while j < lines.len() && lines[j].trim_end() != close {
        j += 1;
    }
    j - at + 1
}

/// Every non-test function of one file's text longer than `limit`:
/// `(name, first line, lines)`.
fn long_functions(text: &str, limit: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    let mut test_attribute = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with("#[cfg(test)]") {
            test_attribute = true;
            i += 1;
            continue;
        }
        let inline_module = {
            let rest = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub(super) "))
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            rest.starts_with("mod ") && rest.trim_end().ends_with('{')
        };
        if test_attribute && inline_module {
            test_attribute = false;
            i += 1;
            while i < lines.len() && !lines[i].starts_with('}') {
                i += 1;
            }
            i += 1;
            continue;
        }
        test_attribute = false;
        if let Some((indent, name)) = function_start(line) {
            let n = length(&lines, i, indent);
            if n > limit {
                out.push((name.to_owned(), i + 1, n));
            }
        }
        i += 1;
    }
    out
}

/// Every non-test function in `src/` over [`LIMIT`]: `(file, name, first
/// line, lines)`, the file relative to the crate.
fn over_limit() -> Vec<(String, String, usize, usize)> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let relative = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        for (name, line, n) in long_functions(&text, LIMIT) {
            out.push((relative.clone(), name, line, n));
        }
    }
    out
}

#[test]
fn no_function_in_src_is_over_the_limit_unless_it_is_on_the_allow_list() {
    let unlisted: Vec<String> = over_limit()
        .into_iter()
        .filter(|(file, name, _, _)| !ALLOWED_LONG.iter().any(|(f, n, _)| f == file && n == name))
        .map(|(file, name, line, n)| format!("{file}:{line} `{name}`: {n} lines"))
        .collect();
    assert!(
        unlisted.is_empty(),
        "functions over {LIMIT} lines (cut each where a name explains the piece):\n  {}",
        unlisted.join("\n  ")
    );
}

#[test]
fn every_allowed_long_function_is_still_over_the_limit() {
    let over = over_limit();
    let stale: Vec<String> = ALLOWED_LONG
        .iter()
        .filter(|(file, name, _)| !over.iter().any(|(f, n, _, _)| f == file && n == name))
        .map(|(file, name, _)| format!("{file} `{name}`"))
        .collect();
    assert!(
        stale.is_empty(),
        "no longer over {LIMIT} lines (remove them from ALLOWED_LONG in tests/it/function_sizes.rs):\n  {}",
        stale.join("\n  ")
    );
}

#[test]
fn the_counter_skips_declarations_one_line_bodies_and_test_modules() {
    let text = "\
trait T {
    fn declared(&self);
    fn long(&self) {
        a();
        b();
    }
    fn short(&self) -> u32 { 1 }
}
#[cfg(test)]
mod tests {
    fn in_a_test() {
        a();
        b();
        c();
    }
}
pub(crate) fn outer(
    x: u32,
) -> u32 {
    x
}";
    assert_eq!(
        long_functions(text, 2),
        vec![("long".to_owned(), 3, 4), ("outer".to_owned(), 17, 5)]
    );
}
