//! The reference pages under `docs/reference/`, generated from what the
//! code declares, so they cannot drift: every command and flag from the
//! clap definition, every manifest key from the JSON Schema the raw types
//! generate, the exit codes (`exit::CODES`), the event states
//! (`events::State::ALL`) and a task's environment variables
//! (`exec::env::TASK_VARIABLES`). `tests/it/reference.rs` regenerates them
//! and fails on a difference (`WEIR_BLESS=1` rewrites them).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use clap::CommandFactory;
use serde_json::Value;

use super::args::Cli;

/// Each page: its file name under `docs/reference/`, and its text.
pub fn pages() -> Vec<(&'static str, String)> {
    vec![
        ("cli.md", cli()),
        ("manifest.md", manifest()),
        ("exit-codes.md", exit_codes()),
        ("events.md", events()),
        ("task-environment.md", task_environment()),
    ]
}

const GENERATED: &str =
    "<!-- Generated from the code by `WEIR_BLESS=1 cargo test --test it -- reference`; do not edit. -->\n\n";

/// Text fit for one cell of a Markdown table.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn cli() -> String {
    let mut command = Cli::command();
    command.build();
    let mut out = format!(
        "{GENERATED}# Command line\n\n{}\n\nEvery command takes the global options:\n\n",
        command
            .get_about()
            .map(ToString::to_string)
            .unwrap_or_default()
    );
    out += &options(&command, true);
    for sub in command.get_subcommands() {
        command_section(&mut out, sub, "weir");
    }
    out
}

/// `## weir NAME`: what it does, its usage and its own arguments.
fn command_section(out: &mut String, command: &clap::Command, parent: &str) {
    if command.is_hide_set() || command.get_name() == "help" {
        return;
    }
    let name = format!("{parent} {}", command.get_name());
    let about = command
        .get_long_about()
        .or(command.get_about())
        .map(ToString::to_string)
        .unwrap_or_default();
    // Built with its parent, the usage names the whole path (`weir tables sync`).
    let usage = command.clone().render_usage().to_string();
    let usage = usage.trim_start_matches("Usage: ").trim();
    let _ = write!(
        out,
        "\n## `{name}`\n\n{}\n\n```text\n{usage}\n```\n\n",
        about.trim()
    );
    let own = options(command, false);
    if own.is_empty() {
        out.push_str("No arguments of its own.\n");
    } else {
        out.push_str(&own);
    }
    for sub in command.get_subcommands() {
        command_section(out, sub, &name);
    }
}

/// The table of `command`'s arguments: the global ones, or its own.
fn options(command: &clap::Command, global: bool) -> String {
    let mut rows = String::new();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if arg.is_hide_set() || id == "help" || id == "version" || arg.is_global_set() != global {
            continue;
        }
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        let mut notes = Vec::new();
        let possible: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !possible.is_empty() && arg.get_action().takes_values() {
            notes.push(format!("one of {}", possible.join(", ")));
        }
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        // A flag's `false` or `0` says nothing; a default the help names is said.
        let said = defaults.iter().all(|d| help.contains(&format!("`{d}`")));
        if !defaults.is_empty() && arg.get_action().takes_values() && !said {
            notes.push(format!("default `{}`", defaults.join(",")));
        }
        if arg.is_required_set() {
            notes.push("required".into());
        }
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        let _ = writeln!(
            rows,
            "| {} | {}{} |",
            cell(&spelling(arg)),
            cell(&help),
            notes
        );
    }
    if rows.is_empty() {
        return rows;
    }
    format!("| argument | meaning |\n|---|---|\n{rows}")
}

/// How an argument is written: `MANIFEST`, `-v, --verbose`, `--pool <NAME>`.
fn spelling(arg: &clap::Arg) -> String {
    let value = arg
        .get_value_names()
        .map(|names| {
            names
                .iter()
                .map(|n| format!("<{n}>"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| format!("<{}>", arg.get_id().as_str().to_uppercase()));
    if arg.is_positional() {
        let many = matches!(arg.get_num_args(), Some(r) if r.max_values() > 1);
        return format!("`{}{}`", value, if many { "..." } else { "" });
    }
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    let mut text = names.join(", ");
    if arg.get_action().takes_values() {
        text.push(' ');
        text.push_str(&value);
    }
    format!("`{text}`")
}

fn manifest() -> String {
    let schema: Value = serde_json::from_str(&crate::manifest::json_schema())
        .expect("the generated schema is JSON");
    let mut out = format!(
        "{GENERATED}# Manifest keys\n\nEvery key a manifest may hold, from the JSON Schema generated from the manifest's types \
         ([`schemas/pipeline.schema.json`](../../schemas/pipeline.schema.json)). `NAME` stands for a name you choose.\n"
    );
    let mut open = Vec::new();
    table(&mut out, &schema, &schema, TOP, &mut open);
    out
}

/// The definition `schema` refers to (`$ref`), or `schema` itself.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> (&'a Value, Option<&'a str>) {
    match schema["$ref"].as_str() {
        Some(r) => {
            let name = r.trim_start_matches("#/$defs/");
            (&root["$defs"][name], Some(name))
        }
        None => (schema, None),
    }
}

/// The object schema a key's value takes, if any: through `$ref`, the
/// non-null branch of `anyOf`, and the object branch of a shorthand.
fn object_of<'a>(root: &'a Value, schema: &'a Value) -> Option<&'a Value> {
    let (schema, _) = resolve(root, schema);
    if schema["properties"].is_object() {
        return Some(schema);
    }
    schema["anyOf"]
        .as_array()
        .or(schema["oneOf"].as_array())?
        .iter()
        .find_map(|branch| object_of(root, branch))
}

/// The heading of the manifest's top-level keys.
const TOP: &str = "Top level";

/// `## path`: the keys of one table, then each nested table's own section
/// (a table used in several places, like `env`, is shown at each). `open`
/// holds the tables being shown, so a schema that nested itself would stop.
fn table(out: &mut String, root: &Value, schema: &Value, path: &str, open: &mut Vec<*const Value>) {
    let Some(object) = object_of(root, schema) else {
        return;
    };
    let this: *const Value = object;
    if open.contains(&this) {
        return;
    }
    open.push(this);
    let _ = if path == TOP {
        write!(out, "\n## {path}\n\n")
    } else {
        write!(out, "\n## `{path}`\n\n")
    };
    if let Some(text) = object["description"]
        .as_str()
        .or(schema["description"].as_str())
    {
        let _ = write!(out, "{}\n\n", cell(text));
    }
    out.push_str("| key | type | meaning |\n|---|---|---|\n");
    let required: BTreeSet<&str> = object["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let properties = object["properties"].as_object().into_iter().flatten();
    let mut nested = Vec::new();
    for (key, property) in properties {
        let (target, _) = resolve(root, property);
        let description = property["description"]
            .as_str()
            .or(target["description"].as_str())
            .unwrap_or_default();
        let mut meaning = cell(description);
        if required.contains(key.as_str()) {
            meaning.insert_str(0, "**required.** ");
        }
        if let Some(default) = property.get("default").filter(|d| !d.is_null()) {
            let _ = write!(meaning, " (default `{default}`)");
        }
        let _ = writeln!(out, "| `{key}` | {} | {meaning} |", type_of(root, property));
        let child = if path == TOP {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        if let Some(map) = target.get("additionalProperties").filter(|v| v.is_object()) {
            nested.push((format!("{child}.NAME"), map));
        } else if let Some(items) = target.get("items") {
            nested.push((format!("{child}[]"), items));
        } else {
            nested.push((child, property));
        }
    }
    for (child, schema) in nested {
        table(out, root, schema, &child, open);
    }
    open.pop();
}

/// A key's type in words: `string`, `integer`, `table`, `one of ...`.
fn type_of(root: &Value, schema: &Value) -> String {
    let (schema, _) = resolve(root, schema);
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| {
                format!(
                    "`{}`",
                    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                )
            })
            .collect();
        return format!("one of {}", values.join(", "));
    }
    if let Some(value) = schema.get("const") {
        return format!(
            "`{}`",
            value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned)
        );
    }
    if let Some(branches) = schema["anyOf"].as_array().or(schema["oneOf"].as_array()) {
        let kinds: Vec<String> = branches
            .iter()
            .filter(|b| b["type"] != "null")
            .map(|b| type_of(root, b))
            .collect();
        let mut unique: Vec<String> = Vec::new();
        for kind in kinds {
            if !unique.contains(&kind) {
                unique.push(kind);
            }
        }
        return unique.join(" or ");
    }
    let names: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    let words: Vec<String> = names
        .iter()
        .map(|t| match *t {
            "object" => match schema.get("additionalProperties").filter(|v| v.is_object()) {
                Some(values) if object_of(root, values).is_some() => "tables by name".into(),
                Some(values) => format!("table of {}", type_of(root, values)),
                None => "table".into(),
            },
            "array" => match schema.get("items") {
                Some(items) => format!("array of {}", type_of(root, items)),
                None => "array".into(),
            },
            other => other.into(),
        })
        .collect();
    if words.is_empty() {
        "any".into()
    } else {
        words.join(" or ")
    }
}

fn exit_codes() -> String {
    let mut out = format!(
        "{GENERATED}# Exit codes\n\nScripts and schedulers may branch on them; each error decides its code once (`src/cli/exit.rs`).\n\n| code | meaning |\n|---|---|\n"
    );
    for (code, meaning) in super::exit::CODES {
        let _ = writeln!(out, "| {code} | {} |", cell(meaning));
    }
    out
}

fn events() -> String {
    let mut out = format!(
        "{GENERATED}# Event states\n\nThe `state` of a line of a run's event log (`_runs/<run-id>/events.jsonl`, `weir events`) or of the operator log.\n\n| state | meaning |\n|---|---|\n"
    );
    for state in crate::events::State::ALL {
        let _ = writeln!(out, "| `{}` | {} |", state.as_str(), cell(state.meaning()));
    }
    out
}

fn task_environment() -> String {
    let mut out = format!(
        "{GENERATED}# Task environment\n\nThe variables weir sets for a task's command, besides those its `env` passes or sets.\n\n| variable | value |\n|---|---|\n"
    );
    for (name, meaning) in crate::exec::env::TASK_VARIABLES {
        let _ = writeln!(out, "| `{name}` | {} |", cell(meaning));
    }
    out
}
