//! Why serve could not go on: each variant names what serve was doing; its
//! text carries the whole chain of the failure beneath, since serve's end is
//! reported as one line (stderr and the RUN_FINISHED event).

use crate::store::chain;

/// The failure beneath a serve error.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why serve stopped serving a manifest.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The manifest's warehouse could not be opened.
    #[error("cannot open the warehouse: {}", chain(.cause.as_ref()))]
    Warehouse {
        /// Why.
        cause: Cause,
    },
    /// Serve's own event log could not be opened.
    #[error("cannot open serve's event log: {cause}")]
    OpenLog {
        /// Why.
        cause: std::io::Error,
    },
    /// An event could not be appended to serve's event log.
    #[error("cannot append {state} to serve's event log: {cause}")]
    Append {
        /// The event's state.
        state: String,
        /// Why.
        cause: std::io::Error,
    },
    /// A task's stored progress could not be read.
    #[error("cannot read the serve progress of `{task}`: {}", chain(.cause.as_ref()))]
    ReadProgress {
        /// The task.
        task: String,
        /// Why.
        cause: Cause,
    },
    /// A task's progress could not be stored.
    #[error("cannot store the serve progress of `{task}`: {}", chain(.cause.as_ref()))]
    StoreProgress {
        /// The task.
        task: String,
        /// Why.
        cause: Cause,
    },
    /// An instance given up on could not be claimed to be recorded MISSED.
    #[error("cannot claim {task} {key} to record it MISSED: {}", chain(.cause.as_ref()))]
    ClaimMissed {
        /// The task.
        task: String,
        /// The instance's key.
        key: String,
        /// Why.
        cause: Cause,
    },
    /// An instance given up on could not be recorded MISSED.
    #[error("cannot record {task} {key} as MISSED: {}", chain(.cause.as_ref()))]
    RecordMissed {
        /// The task.
        task: String,
        /// The instance's key.
        key: String,
        /// Why.
        cause: Cause,
    },
    /// The thread serving the manifest panicked.
    #[error("serve's thread panicked")]
    Panicked,
}
