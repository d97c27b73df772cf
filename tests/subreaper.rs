//! The engine is a child subreaper: it reaps the zombies of escaped task
//! descendants reparented to it, while other threads wait for the engine's
//! own short commands (`sbatch`, `scontrol`, …). The sweep must never reap
//! one of those behind its wait: the wait then fails (ECHILD), and a poll
//! of a running Slurm job read as "the controller no longer knows it" made
//! a restarted engine submit a duplicate of a job it should have adopted.
//!
//! A test binary of its own: the sweep reaps any zombie child the process
//! has not registered, so it would race the other tests' commands.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use weir::process::tree;

// A sweep beside the engine's commands never takes their exit status
#[test]
fn the_zombie_sweep_never_reaps_an_engine_command() {
    tree::become_subreaper();
    let done = AtomicBool::new(false);
    let sweeps = AtomicUsize::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                // No process carries this tag: only the final sweep acts.
                tree::stop_orphans("weir-test-no-such-tag");
                sweeps.fetch_add(1, Ordering::SeqCst);
            }
        });
        // Collected, not asserted, inside the scope: a panic here would
        // leave the sweep running and the scope waiting for it.
        let outs: Vec<_> = (0..20)
            .map(|_| {
                // `sh` exits at once (a zombie) while its background child
                // keeps the output pipe open for 50 ms, so the wait comes
                // late: the window in which a sweep used to take the status.
                // The child, reparented to this process, is the sweep's.
                tree::output(Command::new("sh").args(["-c", "(sleep 0.05) & echo $$"]))
            })
            .collect();
        done.store(true, Ordering::SeqCst);
        for (i, out) in outs.into_iter().enumerate() {
            let out = out.unwrap_or_else(|e| panic!("command {i}: {e}"));
            assert!(out.status.success(), "command {i}: {:?}", out.status);
            assert!(!out.stdout.is_empty(), "command {i} printed nothing");
        }
    });
    assert!(
        sweeps.load(Ordering::SeqCst) > 20,
        "the sweep ran beside the commands"
    );
    // The escaped children were reaped: no zombie is left behind.
    std::thread::sleep(Duration::from_millis(100));
    tree::stop_orphans("weir-test-no-such-tag");
    assert_eq!(zombie_children(), 0, "zombie children left");
}

/// Zombie processes whose parent is this process.
fn zombie_children() -> usize {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // "pid (comm) S ppid …": the fields after the last ')'.
            let rest: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, r)| r.split_whitespace().collect())
                .unwrap_or_default();
            rest.first() == Some(&"Z") && rest.get(1) == Some(&me.as_str())
        })
        .count()
}
