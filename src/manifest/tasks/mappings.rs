//! Checks of how tasks' partitions map onto their upstreams': a shift needs
//! a time dimension on both sides, and a mapping across timezones is
//! warned of.

use indexmap::IndexMap;

use super::super::model::*;
use super::super::validator::Validator;
use super::super::{Entry, ManifestError, ManifestErrorKind};
use super::RawTask;

impl Validator<'_, '_, '_, '_> {
    /// and the upstream it reads need one.
    pub(in crate::manifest) fn shifts_need_time(
        &mut self,
        tasks: &IndexMap<String, Task>,
        entries: &[Entry<RawTask>],
    ) {
        for entry in entries {
            let (Some(raw), Some(task)) = (&entry.raw, tasks.get(&entry.name)) else {
                continue;
            };
            for (i, raw_input) in raw.inputs.iter().enumerate() {
                if raw_input.offset.is_none() && raw_input.window.is_none() {
                    continue;
                }
                let Some(up) = self
                    .producers
                    .get(&raw_input.dataset)
                    .and_then(|p| tasks.get(p))
                else {
                    continue;
                };
                let missing = match (task.dims.time_dim(), up.dims.time_dim()) {
                    (Some(_), Some(_)) => continue,
                    (None, _) => format!("task `{}` has no time dimension", task.name),
                    (_, None) => format!(
                        "`{}` (from task `{}`) has no time dimension",
                        raw_input.dataset, up.name
                    ),
                };
                let idx = i.to_string();
                let key = if raw_input.offset.is_some() {
                    "offset"
                } else {
                    "window"
                };
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::InvalidShift,
                        format!("input `{}` of task `{}` sets `{key}`, but {missing}", raw_input.dataset, task.name),
                    )
                    .at(self.key(&["tasks", &task.name, "inputs", &idx, key]), "needs time on both sides")
                    .help("`offset` and `window` count periods of a time scheme (hourly, daily, weekly, monthly); remove it or partition both tasks by one"),
                );
            }
        }
    }

    /// Warns of an input (or a `depends_on` task) mapped across timezones
    /// (New York hours into UTC days): valid, and each period takes what the
    /// mapping table says, but the periods' boundaries differ by hours, so
    /// data lands a day apart from where a reader of either zone expects it.
    pub(in crate::manifest) fn mappings_across_zones(
        &mut self,
        tasks: &IndexMap<String, Task>,
        entries: &[Entry<RawTask>],
    ) {
        for entry in entries {
            let (Some(raw), Some(task)) = (&entry.raw, tasks.get(&entry.name)) else {
                continue;
            };
            let inputs = raw.inputs.iter().enumerate().filter_map(|(i, input)| {
                let up = self.producers.get(&input.dataset)?;
                Some((
                    up.clone(),
                    "inputs",
                    i,
                    format!("input `{}`", input.dataset),
                ))
            });
            // A `depends_on` that is also an input's producer is warned of there.
            let inputs: Vec<_> = inputs.collect();
            let deps: Vec<_> = raw
                .depends_on
                .iter()
                .enumerate()
                .filter(|(_, d)| !inputs.iter().any(|(up, ..)| up == *d))
                .map(|(i, d)| (d.clone(), "depends_on", i, format!("upstream task `{d}`")))
                .collect();
            for (up, key, i, what) in inputs.into_iter().chain(deps) {
                if let Some(up) = tasks.get(&up) {
                    self.zone_warning(task, up, &[key, &i.to_string()], &what);
                }
            }
        }
    }

    /// The warning of [`Self::mappings_across_zones`] for one upstream
    /// `up` of `task`, at `tasks.<task>.<at>`.
    fn zone_warning(&mut self, task: &Task, up_task: &Task, at: &[&str], what: &str) {
        let Some(down) = task
            .dims
            .time_dim()
            .and_then(|d| task.dims.0[d].scheme.time())
        else {
            return;
        };
        let Some(dim) = up_task.dims.time_dim().map(|u| &up_task.dims.0[u]) else {
            return;
        };
        // The same scheme maps key to key; only a mapping between schemes
        // meets two zones.
        let Some(up) = dim.scheme.time() else { return };
        if task.dims.position(&dim.name).is_some() || up.zone == down.zone {
            return;
        }
        let (a, b) = crate::partition::mapping::across(down, down.start, up);
        let taken = match a.cmp(&b) {
            std::cmp::Ordering::Equal => up.key(a),
            std::cmp::Ordering::Less => format!("{} … {}", up.key(a), up.key(b)),
            std::cmp::Ordering::Greater => "nothing".to_string(),
        };
        let (dz, uz) = (down.zone.name(), up.zone.name());
        let mut path = vec!["tasks", task.name.as_str()];
        path.extend_from_slice(at);
        let rule = crate::partition::mapping::rule(down, up);
        self.warn(
            ManifestError::new(
                ManifestErrorKind::CrossTimezoneMapping,
                format!(
                    "{what} of task `{}` maps `{uz}` {}s into `{dz}` {}s",
                    task.name,
                    up.grain.unit(),
                    down.grain.unit()
                ),
            )
            .at(self.value(&path), rule)
            .help(format!(
                "{dz} {} {} takes `{}` {taken}; if you meant the same local {}, partition both tasks in one timezone",
                down.grain.unit(),
                down.key(down.start),
                up_task.output.dataset,
                down.grain.unit()
            )),
        );
    }
}
