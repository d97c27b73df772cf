//! `weir notify`: what the outbox holds, and `--flush` to deliver it now.

use super::args::NotifyArgs;
use super::error::{doing, CliError};
use super::exit;
use super::plural;

pub(crate) fn run(args: &NotifyArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    let warehouse = super::error::open(&manifest)?;
    if manifest.notify.is_empty() {
        println!("no `[notify.NAME]` targets in {}", args.manifest.display());
    }
    let mut code = exit::OK;
    if args.flush && !manifest.notify.is_empty() {
        let by = crate::exec::new_run_id().replacen("run-", "notify-", 1);
        let report = crate::notify::flush(&manifest, &warehouse, &by, &super::settings().faults);
        for (target, t) in &report.targets {
            println!(
                "{target}: {} delivered, {} not delivered{}",
                t.delivered,
                t.failed,
                t.last_error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            );
        }
        if report.targets.is_empty() {
            println!("nothing to deliver");
        }
        println!("events: run {by}");
    }
    let outbox = crate::notify::Outbox::new(std::sync::Arc::clone(warehouse.backend()));
    let undelivered = outbox
        .undelivered()
        .map_err(doing("cannot read the notification outbox"))?;
    for u in &undelivered {
        println!(
            "{} {} undelivered to {} since {}",
            u.count,
            plural(u.count, "notification", "notifications"),
            u.target,
            u.since
        );
        if args.flush {
            code = exit::ATTENTION;
        }
    }
    Ok(code)
}
