//! Headless Chromium for the pages weir serves and writes (Debian's
//! `chromium`, installed by .ci/run): the tests that need it are ignored by
//! name where build.rs finds none (`weir_has_chromium`), and fail under
//! `CI=true` instead.

use std::process::Command;

/// The browser's command, if one is on the PATH.
pub(crate) fn find() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|name| {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The browser, or `None` (the test returns) outside CI when none is
/// installed; under CI, which installs it, a missing browser fails.
pub(crate) fn or_skip() -> Option<&'static str> {
    let found = find();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not installed (.ci/run installs it)"
        );
        eprintln!("skipped: chromium is not installed (CI installs it)");
    }
    found
}

/// What the browser showed of a page.
pub(crate) struct Shown {
    /// The DOM after the page's scripts ran (`--dump-dom`).
    pub(crate) dom: String,
    /// The browser's log, where the page's console messages and uncaught
    /// errors appear (`CONSOLE`, `Uncaught`).
    pub(crate) log: String,
}

impl Shown {
    /// The lines of the log that are the page's console output or errors.
    pub(crate) fn console(&self) -> Vec<&str> {
        self.log
            .lines()
            .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
            .collect()
    }
}

/// Loads `url` in headless Chromium with a profile of its own (runs side by
/// side share nothing), its scripts given `budget_ms` of virtual time (0:
/// none, the load alone, since `--virtual-time-budget=0` keeps Chromium
/// waiting forever on a 401 page); panics unless the browser exits 0.
pub(crate) fn load(browser: &str, url: &str, budget_ms: u32) -> Shown {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        &format!("--user-data-dir={}", profile.path().display()),
    ]);
    if budget_ms > 0 {
        cmd.arg(format!("--virtual-time-budget={budget_ms}"));
    }
    let shown = cmd
        .args(["--dump-dom", url])
        .output()
        .expect("chromium runs");
    let (dom, log) = (super::stdout(&shown), super::stderr(&shown));
    assert!(shown.status.success(), "{log}");
    Shown { dom, log }
}
