//! weir's exit codes, in one place. Scripts and schedulers branch on them.
//! [`CODES`] says what each means; `docs/reference/exit-codes.md` is
//! generated from it.

/// Every exit code and what it means: the one list the reference shows.
pub const CODES: &[(&str, &str)] = &[
    ("0", "success"),
    ("1", "a task instance did not publish (quarantined, held, skipped, gate failure, a failed sensor; not one WAITING for its inputs), or `show`/`verify`/`files` of a partition that has nothing published"),
    ("2", "invalid manifest, arguments or usage"),
    ("3", "a publish or an operator action was refused (a stale token while readers see something else than it would have published, nothing to roll back to)"),
    ("4", "`status --check` found something that needs attention (LATE, HELD, QUARANTINED), `verify` found a Delta table that does not show the visible generation, or `simulate` found an invariant broken"),
    ("5", "the engine could not do its own work (warehouse or event-log I/O: disk full, EIO, permission denied; a corrupt or missing record), a published file drifted from its commit record (its sums, digest or token), or a commit's outcome had to be settled by rereading the log; it wins over 1 and 3"),
    ("130, 143", "a run, backfill or retry was interrupted by SIGINT, SIGTERM (it wins over every other code)"),
];

/// Success.
pub const OK: u8 = 0;
/// A task instance did not publish.
pub const TASK_FAILED: u8 = 1;
/// Bad manifest or arguments.
pub const INVALID: u8 = 2;
/// A refused publish or operator action.
pub const REFUSED: u8 = 3;
/// `status --check` found a problem.
pub const ATTENTION: u8 = 4;
/// The engine's own I/O failed.
pub const ENGINE: u8 = 5;

/// An error that knows which of the codes above it ends weir with: the
/// code is decided once, from the error's kind, wherever it is reported.
pub(crate) trait Coded {
    /// The exit code.
    fn exit_code(&self) -> u8;
}

impl Coded for crate::ops::verify::VerifyError {
    fn exit_code(&self) -> u8 {
        use crate::ops::verify::VerifyError as E;
        match self {
            E::UnknownTask { .. } => INVALID,
            E::Drift(_) | E::Unproven(_) | E::Store { .. } => ENGINE,
            E::NothingPublished { .. }
            | E::InputChanged { .. }
            | E::InputMissing { .. }
            | E::TaskFailed { .. }
            | E::Environment(_)
            | E::Audit { .. } => TASK_FAILED,
        }
    }
}

impl Coded for crate::exec::ExecError {
    fn exit_code(&self) -> u8 {
        match self {
            crate::exec::ExecError::Plan(_)
            | crate::exec::ExecError::Code(_)
            | crate::exec::ExecError::Settings(_) => INVALID,
            crate::exec::ExecError::Warehouse(_)
            | crate::exec::ExecError::EventLog(_)
            | crate::exec::ExecError::Pools(_)
            | crate::exec::ExecError::Signals(_) => ENGINE,
        }
    }
}

impl Coded for crate::ops::rollback::RollbackError {
    fn exit_code(&self) -> u8 {
        use crate::ops::rollback::RollbackError as E;
        match self {
            E::Warehouse { .. } | E::Publish(crate::store::PublishError::Store(_)) => ENGINE,
            E::NoSuchGeneration { .. } => INVALID,
            E::NothingPublished { .. } | E::BadTarget { .. } | E::Publish(_) => REFUSED,
        }
    }
}
