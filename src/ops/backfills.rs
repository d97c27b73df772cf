//! Backfills in flight, for `weir status` and the console: each declared
//! backfill that is steered (paused, cancelled) or whose latest run has
//! not finished, with that run's progress and ETA. Reads only: the
//! steering records and the newest run logs.

use serde::Serialize;

use crate::events::progress::{self, Progress};
use crate::events::State;
use crate::manifest::Manifest;
use crate::store::steering::{self, Steering};
use crate::store::{StoreError, Warehouse};

/// Newest run logs read to find each backfill's latest run.
const RECENT_RUNS: usize = 20;

/// One backfill in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackfillState {
    /// The backfill.
    pub name: String,
    /// Paused or cancelled, since when and by whom.
    pub steering: Option<Steering>,
    /// Its latest run, while it has not finished.
    pub run: Option<Progress>,
}

/// Every declared backfill in flight, in manifest order, at `now_ms`.
pub fn gather(
    manifest: &Manifest,
    warehouse: &Warehouse,
    now_ms: i64,
) -> Result<Vec<BackfillState>, StoreError> {
    if manifest.backfills.is_empty() {
        return Ok(Vec::new());
    }
    let store = warehouse.events();
    let mut runs = store.runs()?;
    runs.sort_by(|a, b| b.last_written.cmp(&a.last_written).then(b.id.cmp(&a.id)));
    let mut latest: std::collections::HashMap<String, Progress> = Default::default();
    for run in runs.iter().take(RECENT_RUNS) {
        let Some((records, _)) = crate::events::read_run(&store, &run.id)? else {
            continue;
        };
        let name = records
            .iter()
            .find(|r| r.state == State::RunStarted)
            .and_then(|r| {
                r.data
                    .get("backfill")?
                    .get("name")?
                    .as_str()
                    .map(str::to_owned)
            });
        if let Some(name) = name {
            latest
                .entry(name)
                .or_insert_with(|| progress::of(&records, now_ms));
        }
    }
    let mut out = Vec::new();
    for name in manifest.backfills.keys() {
        let steering = steering::read(warehouse, name)?;
        let run = latest.remove(name).filter(|p| !p.finished);
        if steering.is_some() || run.is_some() {
            out.push(BackfillState {
                name: name.clone(),
                steering,
                run,
            });
        }
    }
    Ok(out)
}
