//! `weir accept`: placeholder replaced below.
use super::args::AcceptArgs;
use super::error::CliError;

pub(crate) fn run(_args: &AcceptArgs) -> Result<u8, CliError> {
    Err(CliError::Usage("weir accept: not yet".into()))
}
