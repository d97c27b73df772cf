//! What an operator reaches for: held and quarantined instances, certification,
//! rollback, evidence (`explain`), garbage collection and verification.

pub mod explain;
pub mod gc;
pub mod rollback;
pub mod verify;

use crate::events::EventLog;
use crate::store::Warehouse;

/// The event log of one operator action (its run id starts with `op-`).
pub fn operator_log(warehouse: &Warehouse) -> std::io::Result<EventLog> {
    let id = crate::exec::new_run_id().replacen("run-", "op-", 1);
    EventLog::open_in(&warehouse.events(), &id)
}
