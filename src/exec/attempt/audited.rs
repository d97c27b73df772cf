//! The audit of a candidate the task left: its files read and checked by
//! the gates (and a Delta table's schema policy), `candidate.json` written
//! either way; only what passes becomes an `AuditedCandidate`.

use super::*;

/// An I/O error that says the storage failed (not that a file is wrong).
fn storage_fault(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::ENOSPC | libc::EDQUOT | libc::EROFS | libc::ESTALE)
    )
}

/// Reads the candidate and runs the gates; writes `candidate.json` either way.
pub(super) fn audit_candidate(
    at: &Attempt<'_, '_>,
    snapshot: &InputSnapshot,
    copies: &[inputs::Materialized],
    candidate: Candidate,
) -> Step<AuditedCandidate> {
    let (cx, task, partition) = (at.cx, at.task, at.partition);
    let fail = |token: Option<FencingToken>, reason: String| at.fail(token, reason);
    let token = candidate.token;
    // Reconcile gates read what the task read: its copies.
    let inputs = copies
        .iter()
        .map(|i| (i.name.clone(), i.data.clone()))
        .collect();
    let spec = AuditSpec {
        format: task.output.format,
        grain: &task.output.grain,
        gates: &task.gates,
        inputs: &inputs,
    };
    // `audit` rehearses a panic (or a crash) on a thread reading the files.
    let faults = &cx.faults;
    let probe = |_: &std::path::Path| {
        let _ = faults.hit(Point::Audit, &task.name, partition);
    };
    let report = match audit::audit_with(&candidate.files, &spec, &probe) {
        // Redacted once here: candidate.json, the GATE_FAILED event and the
        // reason the outcome carries on (markers, summaries, notifications)
        // are all made from it.
        Ok(mut r) => {
            r.redact(&|text| cx.secrets.redact(text));
            r
        }
        // The disk under the warehouse failing is the engine's problem,
        // not a property of the candidate.
        Err(audit::AuditError::Io { path, source }) if storage_fault(&source) => {
            return Err(fail(
                Some(token),
                format!("cannot read {}: {source}", path.display()),
            ));
        }
        Err(e) => {
            // Unreadable data (bad CSV, mismatched headers) is a property of
            // this candidate: the same input reproduces it.
            let reason = format!("candidate cannot be read: {}", chain(&e));
            return Err(at.gate_failed(&candidate, &reason, None));
        }
    };
    write_candidate_json(at, snapshot, &candidate, &report)?;
    if !report.passed() {
        let failures: Vec<&GateOutcome> = report.failures().collect();
        let detail = failures
            .iter()
            .map(|g| format!("{}: expected {}, got {}", g.gate, g.expected, g.actual))
            .collect::<Vec<_>>()
            .join("; ");
        let data = json!({ "gates": failures });
        return Err(at.gate_failed(&candidate, &detail, Some(data)));
    }
    admitted_by_table(at, &candidate)?;
    cx.emit(
        State::Audited,
        at.event(token)
            .detail(format!(
                "{} gates passed: {} rows, {}",
                report.gates.len(),
                report.rows,
                report.digest.as_str()
            ))
            .data(json!({ "rows": report.rows, "digest": report.digest.as_str() })),
    );
    if let Err(e) = cx.faults.hit(Point::AfterCandidate, &task.name, partition) {
        return Err(fail(Some(token), e));
    }
    Ok(AuditedCandidate { candidate, report })
}

/// `candidate.json`: what the audit saw, passed or not. Not fsynced, here
/// or at publish: evidence, not data (the record carries the rows, digest
/// and file sums); see `PartitionStore::make_durable`.
fn write_candidate_json(
    at: &Attempt<'_, '_>,
    snapshot: &InputSnapshot,
    candidate: &Candidate,
    report: &AuditReport,
) -> Step<()> {
    let token = candidate.token;
    let manifest = json!({
        "task": at.task.name,
        "dataset": at.task.output.dataset,
        "partition": at.partition,
        "run_id": at.cx.run_id,
        "attempt": at.number,
        "token": token.get(),
        "code_version": at.task.code_version,
        "code_fingerprint": candidate.code,
        "input_snapshot": snapshot.to_json(),
        "input_snapshot_digest": snapshot.digest(),
        "files": file_names(&candidate.files),
        "rows": report.rows,
        "columns": report.columns,
        "digest": report.digest.as_str(),
        "gates": report.gates,
        "passed": report.passed(),
    });
    let bytes =
        serde_json::to_vec_pretty(&manifest).expect("a candidate manifest always serializes");
    std::fs::write(candidate.dir.join(layout::CANDIDATE_FILE), &bytes)
        .map_err(|e| at.fail(Some(token), format!("cannot write candidate.json: {e}")))
}

/// A Delta table output: a candidate whose schema the table's policy does
/// not admit fails its audit, before anything is published.
fn admitted_by_table(at: &Attempt<'_, '_>, candidate: &Candidate) -> Step<()> {
    let task = at.task;
    let (Some((columns, _)), Some(crate::manifest::TableFormat::Delta { schema: policy, .. })) = (
        crate::store::delta::columns_of(task, at.partition),
        task.output.table,
    ) else {
        return Ok(());
    };
    let store = at
        .cx
        .warehouse
        .partition(&task.output.dataset, at.partition);
    match crate::store::delta::admits(&store, &columns, policy, &candidate.files) {
        Ok(()) => Ok(()),
        Err(Ok(why)) => Err(at.gate_failed(candidate, &format!("table_schema: {why}"), None)),
        Err(Err(e)) => Err(at.fail(
            Some(candidate.token),
            format!("cannot check the Delta table's schema: {}", chain(&e)),
        )),
    }
}
