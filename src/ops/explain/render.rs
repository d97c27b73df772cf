//! `weir explain`'s evidence for people: the instance, its publication
//! and mark, every attempt, the input snapshot, upstream, and what to do.

use serde_json::Value;

use super::{AttemptEvidence, Explanation};
use crate::store::marks as state;

/// Renders for people.
pub fn render(x: &Explanation) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    render_head(&mut out, x);
    let _ = writeln!(out);
    let _ = writeln!(out, "attempts:");
    if x.attempts.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for a in &x.attempts {
        render_attempt(&mut out, a);
    }
    let _ = writeln!(out);
    render_inputs(&mut out, x);
    let _ = writeln!(out);
    render_upstream(&mut out, x);
    let _ = writeln!(out);
    let _ = writeln!(out, "recommended: {}", x.recommendation);
    // Tails and details are a task's bytes: nothing in them reaches the
    // operator's terminal as a control sequence.
    crate::ops::printable(&out).into_owned()
}

/// The instance, its publication and its operator state.
fn render_head(out: &mut String, x: &Explanation) {
    use std::fmt::Write;
    let _ = writeln!(out, "{} {} (dataset `{}`)", x.task, x.partition, x.dataset);
    let _ = writeln!(out);
    match &x.published {
        Some(p) => {
            let _ = writeln!(
                out,
                "published: generation {} (token {}, run {}, attempt {}), {} {}, {}, code_version {}{}",
                p["generation"], p["token"], p["run_id"].as_str().unwrap_or(""), p["attempt"], p["rows"],
                if p["rows"] == 1 { "row" } else { "rows" },
                p["digest"].as_str().unwrap_or(""), p["code_version"].as_str().unwrap_or(""),
                if p["certified"] == Value::Bool(false) { ", UNCERTIFIED" } else { "" }
            );
        }
        None => {
            let _ = writeln!(out, "published: nothing");
        }
    }
    if let Some(m) = x.mark.as_ref().filter(|m| state::is_unreadable(m)) {
        let _ = writeln!(out, "state: {}: {}", m.mark.as_str(), m.reason);
    } else if let Some(m) = &x.mark {
        let _ = writeln!(
            out,
            "state: {} since {} (run {}): {}",
            m.mark.as_str(),
            m.since,
            m.run_id,
            m.reason
        );
    }
}

/// One attempt: its outcome, details, failed gates and stderr.
fn render_attempt(out: &mut String, a: &AttemptEvidence) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "  run {} attempt {} token {}: {}{}{}{}{}",
        a.run_id,
        a.attempt,
        a.token.map_or("-".into(), |t| t.to_string()),
        if a.state.is_empty() {
            "RUNNING"
        } else {
            &a.state
        },
        a.decision
            .as_ref()
            .map(|d| format!(" -> {d}"))
            .unwrap_or_default(),
        a.class
            .as_ref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default(),
        a.exit_code
            .map(|c| format!(", exit code {c}"))
            .or(a.signal.map(|s| format!(", signal {s}")))
            .unwrap_or_default(),
        a.duration_ms
            .map(|d| {
                format!(
                    ", {}",
                    crate::manifest::duration::human(std::time::Duration::from_millis(d))
                )
            })
            .unwrap_or_default(),
    );
    let _ = writeln!(out, "    started {}", a.started);
    if let Some(id) = &a.job_id {
        let _ = writeln!(out, "    Slurm job {id}");
    }
    if let Some((first, size)) = &a.batch {
        let _ = writeln!(
            out,
            "    ran in a batch of {size} partitions from {first} (one command)"
        );
    }
    // The header already says "exit code 65": a detail that only
    // repeats it is left out.
    let repeated = a
        .exit_code
        .is_some_and(|c| a.detail == format!("exit code {c}"));
    if !a.detail.is_empty() && !repeated {
        let _ = writeln!(out, "    {}", a.detail);
    }
    if let Some(gates) = a.failed_gates.as_array() {
        for g in gates {
            let _ = writeln!(
                out,
                "    gate {}: expected {}, actual {}",
                g["gate"].as_str().unwrap_or(""),
                g["expected"].as_str().unwrap_or(""),
                g["actual"].as_str().unwrap_or("")
            );
            for o in g["offending"].as_array().into_iter().flatten() {
                let _ = writeln!(out, "      {}", o.as_str().unwrap_or(""));
            }
        }
    }
    if !a.stderr_tail.is_empty() {
        let _ = writeln!(out, "    stderr (tail):");
        for line in a.stderr_tail.lines() {
            let _ = writeln!(out, "      | {line}");
        }
    }
}

/// The input snapshot that explains the instance.
fn render_inputs(out: &mut String, x: &Explanation) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "input snapshot{}:",
        x.input_snapshot_of
            .as_ref()
            .map(|o| format!(" (of the {o})"))
            .unwrap_or_default()
    );
    match x
        .input_snapshot
        .as_ref()
        .and_then(|s| s["inputs"].as_array())
    {
        Some(inputs) if !inputs.is_empty() => {
            for i in inputs {
                let _ = writeln!(
                    out,
                    "  {} ({}){}{}: {}",
                    i["name"].as_str().unwrap_or(""),
                    i["kind"].as_str().unwrap_or(""),
                    i.get("generation")
                        .map(|g| format!(" generation {g}"))
                        .unwrap_or_default(),
                    i.get("watermark")
                        .and_then(Value::as_str)
                        .map(|w| format!(" watermark {w}"))
                        .unwrap_or_default(),
                    i["digest"].as_str().unwrap_or("")
                );
            }
        }
        _ => {
            let _ = writeln!(out, "  no inputs recorded");
        }
    }
}

/// The upstream tasks' publications.
fn render_upstream(out: &mut String, x: &Explanation) {
    use std::fmt::Write;
    let _ = writeln!(out, "upstream:");
    if x.upstream.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for u in &x.upstream {
        let _ = writeln!(
            out,
            "  {} -> `{}`{}: {}",
            u.task,
            u.dataset,
            if u.partition == x.partition {
                String::new()
            } else {
                format!(" {}", u.partition)
            },
            match (&u.generation, &u.digest) {
                (Some(g), Some(d)) => format!(
                    "generation {g}, {d}{}",
                    if u.certified { "" } else { ", UNCERTIFIED" }
                ),
                _ => "not published".into(),
            }
        );
    }
    if let Some(t) = &x.last_successful_upstream {
        let _ = writeln!(out, "  last successful task upstream: {t}");
    }
}
