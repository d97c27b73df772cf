//! SIGINT and SIGTERM during a run: the first one asks the run to stop
//! cleanly, a second one of either exits at once.
//!
//! ```text
//!  first signal ──► flag set: the scheduler admits nothing more, running
//!                   commands' process trees are stopped (`tree::stop`), each
//!                   attempt ends INTERRUPTED, RUN_FINISHED is written, and
//!                   weir exits 130 (SIGINT) or 143 (SIGTERM)
//!  second signal ─► exit 130 / 143 at once, from the handler
//! ```
//!
//! The handlers only store into atomics (signal-hook's `flag`), so nothing
//! async-signal-unsafe runs in them; the engine polls [`requested`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

/// How often the scheduler and a command's watchdog look for a request.
pub const POLL: std::time::Duration = std::time::Duration::from_millis(50);

struct Flags {
    any: Arc<AtomicBool>,
    term: Arc<AtomicBool>,
}

static FLAGS: OnceLock<Flags> = OnceLock::new();

/// Installs the handlers (once per process; later calls do nothing). Not
/// installed, a signal keeps its default action.
pub fn install() -> std::io::Result<()> {
    if FLAGS.get().is_some() {
        return Ok(());
    }
    let any = Arc::new(AtomicBool::new(false));
    let term = Arc::new(AtomicBool::new(false));
    // Registered first, so it runs before the flag is set: it exits only
    // on a signal that finds the flag already set (the second one).
    signal_hook::flag::register_conditional_shutdown(SIGINT, 130, any.clone())?;
    signal_hook::flag::register_conditional_shutdown(SIGTERM, 143, any.clone())?;
    signal_hook::flag::register(SIGTERM, term.clone())?;
    signal_hook::flag::register(SIGINT, any.clone())?;
    signal_hook::flag::register(SIGTERM, any.clone())?;
    let _ = FLAGS.set(Flags { any, term });
    Ok(())
}

/// The signal that asked the run to stop, if one did.
pub fn requested() -> Option<Signal> {
    let flags = FLAGS.get()?;
    if !flags.any.load(Ordering::SeqCst) {
        return None;
    }
    Some(if flags.term.load(Ordering::SeqCst) {
        Signal::Term
    } else {
        Signal::Int
    })
}

/// A stop request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGTERM.
    Term,
}

impl Signal {
    /// The signal's name.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }

    /// The shell's exit code for it: 128 + the signal number.
    pub fn exit_code(self) -> u8 {
        match self {
            Signal::Int => 130,
            Signal::Term => 143,
        }
    }
}
