//! Finds, at build time, the services some integration tests need (an S3
//! server, Slurm, Chromium, Python's deltalake and polars), so that a test
//! whose service is absent is marked ignored with the reason and shows up by
//! name as `ignored, needs …` instead of passing without running. libtest has
//! no way to skip at run time, and no test-harness crate is a dependency.
//!
//! Under `CI=true` nothing is probed and `weir_ci` is set: no test is ignored,
//! and one whose service is missing fails (CI installs every service).
//!
//! A release build (`cargo install`, `cargo run --release`) probes nothing:
//! those services only decide which tests run, and a build for users must
//! not wait on a hung `sinfo` or import Python packages. The test suite runs
//! in the dev profile (`cargo test`).
//!
//! The result is cached with the build: it is probed again when `CI`, `PATH`
//! or `WEIR_S3_TEST_ENDPOINT` change. After installing a service some other
//! way, `touch build.rs` (or run `cargo test -- --include-ignored`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SERVICES: [&str; 5] = [
    "weir_ci",
    "weir_has_s3",
    "weir_has_slurm",
    "weir_has_chromium",
    "weir_has_delta_readers",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for cfg in SERVICES {
        println!("cargo:rustc-check-cfg=cfg({cfg})");
    }
    println!("cargo:rerun-if-env-changed=CI");
    if std::env::var("CI").as_deref() == Ok("true") {
        // Nothing else is read: CI's later exports (moto's endpoint) must not
        // rebuild the crate.
        println!("cargo:rustc-cfg=weir_ci");
        return;
    }
    if std::env::var("PROFILE").as_deref() == Ok("release") {
        return;
    }
    println!("cargo:rerun-if-env-changed=PATH");
    println!("cargo:rerun-if-env-changed=WEIR_S3_TEST_ENDPOINT");
    if std::env::var("WEIR_S3_TEST_ENDPOINT").is_ok_and(|e| !e.is_empty()) {
        println!("cargo:rustc-cfg=weir_has_s3");
    }
    // The same probes as the tests' own (tests/it/slurm.rs, report.rs, tables.rs).
    if answers("sinfo", &["-h", "-o", "%T"], true) {
        println!("cargo:rustc-cfg=weir_has_slurm");
    }
    if answers("chromium", &["--version"], false)
        || answers("chromium-browser", &["--version"], false)
    {
        println!("cargo:rustc-cfg=weir_has_chromium");
    }
    if answers("python3", &["-c", "import deltalake, polars"], false) {
        println!("cargo:rustc-cfg=weir_has_delta_readers");
    }
}

/// Whether `program args` exits 0 within 15 s (a dead Slurm controller makes
/// sinfo wait about 10 s), with some output when `needs_output`.
fn answers(program: &str, args: &[&str], needs_output: bool) -> bool {
    let Ok(mut child) = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = Vec::new();
                if let Some(mut stdout) = child.stdout.take() {
                    let _ = std::io::Read::read_to_end(&mut stdout, &mut out);
                }
                return status.success() && (!needs_output || !out.is_empty());
            }
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}
