//! One command for several partitions (`batch = { max_partitions = N }`):
//! each member is an attempt of its own (token, staging, lease, audit,
//! publish, fenced as any attempt), and they meet before the command.
//!
//! ```text
//!  member: claim ─► stage ─► meet ─┬─ last to arrive: runs the command for all
//!                                  └─ the others: wait for its ending
//!          ◄── ending ── audit its own directory ─► publish its own partition
//!  a member with nothing to run (current, held, failed before) leaves;
//!  a gap it leaves splits the rest into runs of consecutive keys, one
//!  command each, one after another in the batch's one slot
//! ```
//!
//! The command sees `WEIR_PARTITIONS` (the keys, one a line, in order),
//! `WEIR_OUTPUT_DIR/<key>/` (a link to that member's own staging, so each
//! audit sees only its own files) and `WEIR_INPUT_<NAME>/<key>` (a link to
//! that member's private input copy). The runner holds the pool's one slot
//! until every member has told how its command ended, so the log never
//! shows more commands than slots.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::{chain, execute, submit, take_slot, Attempt, AttemptOutcome, Claim, Step};
use crate::events::payload::{self, Payload};
use crate::events::State;
use crate::exec::classify::Ending;
use crate::exec::launch::{Contract, ContractInput, Launcher, TaskLaunch};
use crate::exec::pool::{Permit, Slots};
use crate::inputs::materialize::Materialized;
use crate::inputs::InputSnapshot;
use crate::manifest::fingerprint::{fingerprint, FingerprintError};
use crate::store::layout::DATA_DIR;
use crate::store::{FencingToken, PartitionStore};

/// The batch's directory in the runner's staging: links only.
const BATCH_DIR: &str = "batch";

/// Members started together, meeting before their one command.
pub(crate) struct Batch {
    size: usize,
    state: Mutex<Gather>,
    turn: Condvar,
}

#[derive(Default)]
struct Gather {
    /// Arrived members by seat.
    members: Vec<Option<Member>>,
    /// Members arrived or gone.
    settled: usize,
    runner: bool,
    /// How each member's command ended and how long it took, by seat.
    ended: Vec<Option<(Ending, u64)>>,
    /// Members that have yet to tell how their command ended.
    untold: usize,
}

/// What the runner needs of a member.
#[derive(Clone)]
struct Member {
    seat: usize,
    key: String,
    attempt: u32,
    token: FencingToken,
    /// Its attempt directory (logs) and staging.
    dir: PathBuf,
    data_dir: PathBuf,
    inputs: Vec<(String, PathBuf)>,
    snapshot: serde_json::Value,
}

/// One member's place in a batch; leaving it unused (the attempt ended
/// before its command) tells the others not to wait for it.
pub(crate) struct Seat {
    batch: Arc<Batch>,
    index: usize,
    arrived: bool,
}

impl Batch {
    /// Seats for `size` members, in the order of their keys.
    pub(crate) fn seats(size: usize) -> Vec<Seat> {
        let batch = Arc::new(Batch {
            size,
            state: Mutex::new(Gather {
                members: vec![None; size],
                ended: vec![None; size],
                ..Gather::default()
            }),
            turn: Condvar::new(),
        });
        (0..size)
            .map(|index| Seat {
                batch: Arc::clone(&batch),
                index,
                arrived: false,
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, Gather> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        if !self.arrived {
            self.batch.lock().settled += 1;
            self.batch.turn.notify_all();
        }
    }
}

/// What holds the slot's end of a member's command: dropped once the
/// member told how the command ended; the runner's waits for every
/// member's before it gives the slot back.
pub(crate) struct Told<'s> {
    batch: Arc<Batch>,
    permit: Option<Permit<'s>>,
}

impl Drop for Told<'_> {
    fn drop(&mut self) {
        let mut g = self.batch.lock();
        g.untold = g.untold.saturating_sub(1);
        self.batch.turn.notify_all();
        if self.permit.is_some() {
            while g.untold > 0 {
                g = self.batch.turn.wait(g).unwrap_or_else(|p| p.into_inner());
            }
        }
    }
}

/// Ends the batch for the waiting members if the runner panics (its own
/// thread reports the panic).
struct EndOnPanic(Arc<Batch>);

impl Drop for EndOnPanic {
    fn drop(&mut self) {
        let mut g = self.0.lock();
        for ended in g.ended.iter_mut().filter(|e| e.is_none()) {
            *ended = Some((Ending::Engine("the batch's runner panicked".into()), 0));
        }
        self.0.turn.notify_all();
    }
}

/// What gives the command's slot back once dropped: a slot of its own, or
/// its batch's part in one.
pub(super) struct Slot<'s> {
    _own: Option<Permit<'s>>,
    _batch: Option<Told<'s>>,
}

/// Runs the attempt's command: alone, in a slot of its own, or with its
/// batch (`seat`). How it ended, how long it took, the code's fingerprint
/// at launch, and what holds the slot. What the command runs is what its
/// output is published as: the code is fingerprinted now, as the command
/// launches, not when the run started (a deploy may land in between, and
/// be reverted before the run ends), and again once it exits
/// (`code_moved`).
#[allow(clippy::type_complexity)]
pub(super) fn command<'s>(
    at: &Attempt<'_, '_>,
    (store, claim): (&PartitionStore, &mut Claim),
    snapshot: &InputSnapshot,
    (inputs, command): (&[Materialized], &TaskLaunch<'_>),
    slots: &'s Slots,
    seat: Option<Seat>,
) -> Step<(Ending, u64, Result<String, FingerprintError>, Slot<'s>)> {
    let Some(seat) = seat else {
        // The slot is the command's (for a scheduler's job: from submission
        // until it is seen to end), and the pool's across engines
        // (`pool.rs`, `store::slots`).
        let permit = take_slot(at, slots, claim.token)?;
        let started = Instant::now();
        let launched = fingerprint(&at.cx.manifest.dir, at.task);
        let ending = execute(at, store, claim, snapshot, command, &launched)?;
        let slot = Slot {
            _own: Some(permit),
            _batch: None,
        };
        return Ok((ending, started.elapsed().as_millis() as u64, launched, slot));
    };
    let launched = fingerprint(&at.cx.manifest.dir, at.task);
    let (ending, ms, told) = meet(at, seat, claim, snapshot, inputs, slots)?;
    let ending = match &launched {
        Err(e) => Ending::CodeMoved(format!(
            "the task's code cannot be fingerprinted at launch: {}; the next attempt fingerprints it again",
            chain(e)
        )),
        Ok(_) => ending,
    };
    let slot = Slot {
        _own: None,
        _batch: Some(told),
    };
    Ok((ending, ms, launched, slot))
}

/// Meets the other members, and runs the command for all of them if this
/// one is the last to arrive: how it ended and how long it took.
#[allow(clippy::too_many_arguments)]
fn meet<'s>(
    at: &Attempt<'_, '_>,
    mut seat: Seat,
    claim: &mut Claim,
    snapshot: &InputSnapshot,
    inputs: &[Materialized],
    slots: &'s Slots,
) -> Step<(Ending, u64, Told<'s>)> {
    let me = Member {
        seat: seat.index,
        key: at.partition.to_string(),
        attempt: at.number,
        token: claim.token,
        dir: claim.dir.clone(),
        data_dir: claim.dir.join(DATA_DIR),
        inputs: inputs
            .iter()
            .map(|i| (i.name.clone(), i.location.clone()))
            .collect(),
        snapshot: snapshot.to_json(),
    };
    seat.arrived = true;
    let batch = Arc::clone(&seat.batch);
    let mut g = batch.lock();
    g.members[seat.index] = Some(me);
    g.settled += 1;
    g.untold += 1;
    loop {
        if let Some((ending, ms)) = g.ended[seat.index].clone() {
            drop(g);
            let told = Told {
                batch,
                permit: None,
            };
            return Ok((ending, ms, told));
        }
        if g.settled == batch.size && !g.runner {
            g.runner = true;
            break;
        }
        g = batch.turn.wait(g).unwrap_or_else(|p| p.into_inner());
    }
    let members: Vec<Member> = g.members.iter().flatten().cloned().collect();
    drop(g);
    let unwinding = EndOnPanic(Arc::clone(&batch));
    let ran = run_all(at, claim, snapshot, &members, slots, &batch);
    // Ended: the guard finds it so.
    drop(unwinding);
    let ((ending, ms), permit) = ran?;
    Ok((
        ending,
        ms,
        Told {
            batch,
            permit: Some(permit),
        },
    ))
}

/// Shares how the command of `group` ended with its members, once their
/// logs are the command's (their FAILED events' stderr tail).
fn share(claim: &Claim, group: &[Member], ended: &(Ending, u64), batch: &Batch) {
    for m in group.iter().filter(|m| m.dir != claim.dir) {
        for log in crate::exec::launch::LOGS {
            let _ = std::fs::copy(claim.dir.join(log), m.dir.join(log));
        }
    }
    let mut g = batch.lock();
    for m in group {
        g.ended[m.seat] = Some(ended.clone());
    }
    drop(g);
    batch.turn.notify_all();
}

/// The runner's part: one slot, then one command per run of consecutive
/// keys among the members that came (one left between others splits the
/// batch), the runner's own last, so its logs stay its command's. Its own
/// ending and the slot, or how it failed.
fn run_all<'s>(
    at: &Attempt<'_, '_>,
    claim: &mut Claim,
    snapshot: &InputSnapshot,
    members: &[Member],
    slots: &'s Slots,
    batch: &Batch,
) -> Step<((Ending, u64), Permit<'s>)> {
    let ending_of = |outcome: &AttemptOutcome| match outcome {
        AttemptOutcome::Failed { ending, .. } => (ending.clone(), 0),
        _ => (Ending::Engine("the batch's command did not run".into()), 0),
    };
    let permit = match take_slot(at, slots, claim.token) {
        Ok(permit) => permit,
        Err(outcome) => {
            share(claim, members, &ending_of(&outcome), batch);
            return Err(outcome);
        }
    };
    let mut groups: Vec<Vec<Member>> = Vec::new();
    for m in members {
        match groups.last_mut() {
            Some(g)
                if at.task.dims.previous(&m.key).as_deref() == g.last().map(|l| l.key.as_str()) =>
            {
                g.push(m.clone())
            }
            _ => groups.push(vec![m.clone()]),
        }
    }
    groups.sort_by_key(|g| g.iter().any(|m| m.dir == claim.dir));
    let mut own = None;
    for group in &groups {
        let ran = run(at, claim, snapshot, group);
        let ended = match &ran {
            Ok(ended) => ended.clone(),
            Err(outcome) => ending_of(outcome),
        };
        share(claim, group, &ended, batch);
        own = Some(ran);
    }
    let own = own.expect("the runner is a member: there is a group");
    Ok((own?, permit))
}

/// One command for `members`, consecutive keys: the links, every
/// member's RUNNING, the command.
fn run(
    at: &Attempt<'_, '_>,
    claim: &mut Claim,
    snapshot: &InputSnapshot,
    members: &[Member],
) -> Step<(Ending, u64)> {
    let token = claim.token;
    let root = claim.dir.join(BATCH_DIR);
    let (out, inputs) = link(&root, members)
        .map_err(|e| at.fail(Some(token), format!("cannot lay out the batch: {e}")))?;
    let contract = Contract {
        launcher: Launcher::Attempt {
            run_id: &at.cx.run_id,
            attempt: at.number,
            token: token.get(),
        },
        partition: &members[0].key,
        output_dir: &out,
        inputs: inputs
            .iter()
            .map(|(name, dir)| ContractInput {
                name,
                location: dir,
                watermark: None,
            })
            .collect(),
    };
    let program = at.cx.program(at.task).map(Path::to_path_buf);
    let mut command = TaskLaunch::new(at.cx.manifest, at.task, &contract, program)
        .map_err(|e| at.failed(Ending::Environment(e.to_string()), token))?;
    let keys: Vec<&str> = members.iter().map(|m| m.key.as_str()).collect();
    command.env.set(
        crate::exec::env::listed("WEIR_PARTITIONS"),
        &keys.join("\n"),
    );
    let started = Instant::now();
    let first = &members[0].key;
    let executor = at.cx.executor(at.task);
    let running = |job_id: Option<&str>| -> Result<(), String> {
        for m in members {
            let e = crate::events::Event::instance(&at.task.name, &m.key)
                .attempt(m.attempt, Some(m.token.get()))
                .detail(format!(
                    "staging {}; batch of {} from {first}{}",
                    m.data_dir.display(),
                    members.len(),
                    job_id
                        .map(|id| format!("; {}", executor.job_name(id)))
                        .unwrap_or_default()
                ))
                .data(
                    Payload::Running(payload::Running {
                        input_snapshot: m.snapshot.clone(),
                        job_id: job_id.map(str::to_string),
                        batch: Some(first.clone()),
                        batch_size: Some(members.len() as u32),
                    })
                    .to_json(),
                );
            at.cx.emit_flushed(State::Running, e)?;
        }
        Ok(())
    };
    let ending = submit(
        at,
        // The first command takes the runner's open logs; a later one (the
        // runner's own comes last) creates them again, as every command
        // starts with empty logs.
        (token, &claim.dir, &claim.tag, claim.logs.take()),
        &mut claim.heartbeat,
        snapshot,
        &command,
        running,
    );
    let _ = std::fs::remove_dir_all(&root);
    let ending = ending?;
    Ok((ending, started.elapsed().as_millis() as u64))
}

/// `root/out/<key>` → each member's staging, `root/in/<NAME>/<key>` → its
/// copy of input NAME: the batch's output directory and its inputs'.
fn link(root: &Path, members: &[Member]) -> std::io::Result<(PathBuf, Vec<(String, PathBuf)>)> {
    let _ = std::fs::remove_dir_all(root);
    let out = root.join("out");
    std::fs::create_dir_all(&out)?;
    let mut inputs: Vec<(String, PathBuf)> = Vec::new();
    for m in members {
        std::os::unix::fs::symlink(&m.data_dir, out.join(&m.key))?;
        for (name, location) in &m.inputs {
            let dir = root.join("in").join(name);
            if !inputs.iter().any(|(n, _)| n == name) {
                std::fs::create_dir_all(&dir)?;
                inputs.push((name.clone(), dir.clone()));
            }
            std::os::unix::fs::symlink(location, dir.join(&m.key))?;
        }
    }
    Ok((out, inputs))
}
