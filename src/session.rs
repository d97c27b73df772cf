//! One run, assembled the same way for every front end (`weir run`,
//! `backfill`, `retry`, `repair`, each batch of `weir serve`): what a run
//! tells the outside and repairs after it is decided here once, so a front
//! end cannot forget a part of it.
//!
//! ```text
//!  front end ──► session::run(manifest, options, observer)
//!                  1. stop signals installed (SIGINT / SIGTERM stop the run cleanly)
//!                  2. the lineage emitter watches every event record, beside the observer
//!                  3. exec runs with the notify outbox (notify::run_notifying)
//!                  4. lineage delivery finished and noted for `weir status`
//!                  5. Delta tables that missed an already published instance get its commit
//!              ◄── Finished { summary, lineage, warnings }: the front end only shows it
//! ```

use std::sync::Arc;

use crate::events::{EventRecord, Observer};
use crate::exec::{self, ExecError, InstanceResult, RunOptions, RunSummary};
use crate::lineage;
use crate::manifest::Manifest;

/// A run that ended, with what its session did around it.
#[derive(Debug)]
pub struct Finished {
    /// What the engine decided.
    pub summary: RunSummary,
    /// What OpenLineage delivery achieved, when `[lineage]` is configured
    /// (a shortfall is already warned about and logged by [`lineage::record`]).
    pub lineage: Option<lineage::Delivery>,
    /// Problems after the run that did not fail it (a Delta table left
    /// unrepaired), for the front end to show.
    pub warnings: Vec<String>,
}

impl std::ops::Deref for Finished {
    type Target = RunSummary;

    fn deref(&self) -> &RunSummary {
        &self.summary
    }
}

/// Runs `options` on `manifest` with everything a run owes the outside:
/// the `[notify]` outbox, OpenLineage events, the Delta tables' repair.
/// `observe` sees every event record as it is written (a front end's
/// progress display). An error means the run could not start or its log
/// could not be opened; lineage and table problems never fail a run.
pub fn run(
    manifest: &Manifest,
    options: &RunOptions,
    observe: Option<Observer>,
) -> Result<Finished, ExecError> {
    // A first Ctrl-C / SIGTERM stops the run cleanly, a second exits at once.
    exec::interrupt::install().map_err(ExecError::Signals)?;
    // Lineage watches the same typed events; it never blocks them.
    let emitter = lineage::Emitter::start(manifest).map(Arc::new);
    let observer: Option<Observer> = match (&emitter, observe) {
        (Some(emitter), shown) => {
            let emitter = Arc::clone(emitter);
            Some(Box::new(move |record: &EventRecord| {
                if let Some(shown) = &shown {
                    shown(record);
                }
                emitter.observe(record);
            }))
        }
        (None, shown) => shown,
    };
    let summary = crate::notify::run_notifying(manifest, options, observer);
    let delivery = emitter.map(|emitter| {
        let delivery = emitter.finish();
        let run_id = summary.as_ref().ok().map(|s| s.run_id.as_str());
        lineage::record(manifest, run_id, &delivery);
        delivery
    });
    let summary = summary?;
    let warnings = repair_tables(manifest, &summary);
    Ok(Finished {
        summary,
        lineage: delivery,
        warnings,
    })
}

/// The Delta commits of instances that were already published: a table
/// that missed one (a crash after weir's commit record and before the
/// table's) gets it now; a table that has it is left as it is. Failures are
/// warnings, as after a publication.
fn repair_tables(manifest: &Manifest, summary: &RunSummary) -> Vec<String> {
    let mut warehouse = None;
    for (task, partition, result) in &summary.instances {
        let Some(task) = manifest.tasks.get(task) else {
            continue;
        };
        if *result != InstanceResult::AlreadyPublished || task.output.table.is_none() {
            continue;
        }
        if warehouse.is_none() {
            match crate::store::Warehouse::open_to_read(&manifest.pipeline) {
                Ok(w) => warehouse = Some(w),
                Err(e) => {
                    return vec![format!(
                        "cannot open the warehouse to check the Delta tables: {e}"
                    )]
                }
            }
        }
        let Some(warehouse) = &warehouse else {
            return Vec::new();
        };
        let store = warehouse.partition(&task.output.dataset, partition);
        if let Ok(Some(record)) = store.latest() {
            crate::store::delta::follow_task(&store, task, &record);
        }
    }
    Vec::new()
}
