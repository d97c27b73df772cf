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
//! async-signal-unsafe runs in them. Nothing polls them either: a thread
//! of signal-hook's iterator wakes whoever waits ([`subscribe`]: the run
//! loop's channel, the command watchdogs' timer), and they read
//! [`requested`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

/// How often a slot or lease wait looks for a request (they poll the
/// warehouse anyway).
pub const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Woken on every stop request, on the signal thread.
type Waker = Box<dyn Fn() + Send + Sync>;

static WAKERS: std::sync::Mutex<Vec<(u64, Waker)>> = std::sync::Mutex::new(Vec::new());
static NEXT_WAKER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A subscription to stop requests; dropping it ends it.
pub struct Subscription(u64);

impl Drop for Subscription {
    fn drop(&mut self) {
        WAKERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(id, _)| *id != self.0);
    }
}

/// Calls `wake` (on the signal thread; it must not block) on every stop
/// request from now on. A request made before this returns is not
/// announced: read [`requested`] after subscribing.
pub fn subscribe(wake: impl Fn() + Send + Sync + 'static) -> Subscription {
    let id = NEXT_WAKER.fetch_add(1, Ordering::SeqCst);
    WAKERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((id, Box::new(wake)));
    Subscription(id)
}

fn wake_all() {
    for (_, wake) in WAKERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        wake();
    }
}

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
    // Registered after the flags: a woken waiter finds its flag set.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("weir-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                super::timer::wake_watchdogs();
                wake_all();
            }
        })?;
    let _ = FLAGS.set(Flags { any, term });
    Ok(())
}

/// Asks the run to stop as `signal` would (a cancelled backfill): the
/// same flags, the same wake-ups; no second request exits at once.
pub fn request(signal: Signal) {
    let flags = FLAGS.get_or_init(|| Flags {
        any: Arc::new(AtomicBool::new(false)),
        term: Arc::new(AtomicBool::new(false)),
    });
    if flags.any.load(Ordering::SeqCst) {
        return;
    }
    if signal == Signal::Term {
        flags.term.store(true, Ordering::SeqCst);
    }
    flags.any.store(true, Ordering::SeqCst);
    super::timer::wake_watchdogs();
    wake_all();
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
