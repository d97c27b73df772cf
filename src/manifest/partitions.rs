//! `[partitions.NAME]`: the raw scheme as written and its validation into a
//! [`PartitionScheme`].

use std::collections::HashMap;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use super::de::date_like;
use super::validator::{abbreviated, Validator};
use super::{Entry, ManifestError, ManifestErrorKind};
use crate::partition::{
    time::offset_text, time::parse_day, Grain, PartitionScheme, TimeScheme, Zone,
};

/// A calendar date `YYYY-MM-DD` that exists: 31 days in seven months, 30 in
/// four, 28 in February and 29 in a leap year (every fourth, centuries only
/// when divisible by 400). Without anchors, to build the patterns below.
macro_rules! real_date {
    () => {
        concat!(
            "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])",
            "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)",
            "|02-(?:0[1-9]|1[0-9]|2[0-8]))",
            "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)"
        )
    };
}
/// An hourly key: a date, `T`, an hour, and the offset of a repeated hour.
const HOUR_PATTERN: &str = concat!(
    "^",
    real_date!(),
    "T(?:[01][0-9]|2[0-3])(?:[+-][0-9]{2}:[0-5][0-9](?::[0-5][0-9])?)?$"
);
/// A minutely key: a date, `T`, hour and minute, and the offset of a
/// repeated hour.
const MINUTE_PATTERN: &str = concat!(
    "^",
    real_date!(),
    "T(?:[01][0-9]|2[0-3]):[0-5][0-9](?:[+-][0-9]{2}:[0-5][0-9](?::[0-5][0-9])?)?$"
);
/// The lengths in minutes a minutely scheme may have: those that tile an
/// hour (60 itself is `hourly`).
const MINUTE_STEPS: [u32; 11] = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30];
/// A daily key.
const DAY_PATTERN: &str = concat!("^", real_date!(), "$");
/// An ISO week `YYYY-Www` (weeks 01 to 53), or a date.
const WEEK_PATTERN: &str = concat!(
    "^(?:[0-9]{4}-W(?:0[1-9]|[1-4][0-9]|5[0-3])|",
    real_date!(),
    ")$"
);
/// A month `YYYY-MM`, or a date.
const MONTH_PATTERN: &str = concat!("^(?:[0-9]{4}-(?:0[1-9]|1[0-2])|", real_date!(), ")$");

/// `[partitions.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// `start`/`end` take the key form of their kind, with real dates only (no
// month 13, day 32 or 30 February); a static scheme needs keys.
#[schemars(extend("allOf" = [
    { "if": { "properties": { "kind": { "const": "minutely" } } },
      "then": { "required": ["every"],
                "properties": { "every": { "enum": MINUTE_STEPS },
                                "start": { "pattern": MINUTE_PATTERN }, "end": { "pattern": MINUTE_PATTERN } } },
      "else": { "not": { "required": ["every"] } } },
    { "if": { "properties": { "kind": { "const": "hourly" } } },
      "then": { "properties": { "start": { "pattern": HOUR_PATTERN }, "end": { "pattern": HOUR_PATTERN } } } },
    { "if": { "properties": { "kind": { "const": "daily" } } },
      "then": { "properties": { "start": { "pattern": DAY_PATTERN }, "end": { "pattern": DAY_PATTERN } } } },
    { "if": { "properties": { "kind": { "const": "weekly" } } },
      "then": { "properties": { "start": { "pattern": WEEK_PATTERN }, "end": { "pattern": WEEK_PATTERN } } } },
    { "if": { "properties": { "kind": { "const": "monthly" } } },
      "then": { "properties": { "start": { "pattern": MONTH_PATTERN }, "end": { "pattern": MONTH_PATTERN } } } },
    { "if": { "properties": { "kind": { "const": "static" } } },
      "then": { "required": ["keys"], "properties": { "keys": { "minItems": 1 } } } }
]))]
pub struct RawPartitionScheme {
    /// `minutely` (every `every` minutes), `hourly`, `daily`, `weekly` (ISO
    /// weeks), `monthly` (time periods) or `static` (a list of keys).
    pub kind: PartitionKind,
    /// Minutes per period of a minutely scheme, a divisor of 60: 1, 2, 3, 4,
    /// 5, 6, 10, 12, 15, 20 or 30.
    pub every: Option<i64>,
    /// First period, inclusive, as a key of the kind (`2026-09-20T13:05`,
    /// `2026-09-20T13`,
    /// `2026-09-20`, `2026-W38`, `2026-09`); weekly and monthly also take a
    /// date (the period containing it).
    #[serde(default, deserialize_with = "date_like")]
    #[schemars(with = "Option<String>")]
    pub start: Option<String>,
    /// Last period, inclusive, in the same form; omitted = up to the latest
    /// complete period.
    #[serde(default, deserialize_with = "date_like")]
    #[schemars(with = "Option<String>")]
    pub end: Option<String>,
    /// IANA timezone whose local periods these are, e.g. `Europe/Paris`
    /// (time kinds; default `UTC`).
    pub timezone: Option<String>,
    /// The keys (static).
    pub keys: Option<Vec<String>>,
}

/// The kinds of partition scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PartitionKind {
    /// One partition per `every` minutes of the clock.
    Minutely,
    /// One partition per clock hour.
    Hourly,
    /// One partition per calendar day.
    Daily,
    /// One partition per ISO 8601 week (Monday to Sunday).
    Weekly,
    /// One partition per calendar month.
    Monthly,
    /// A fixed list of keys.
    Static,
}

impl PartitionKind {
    /// The grain of a time kind; minutely ones take theirs from `every`.
    fn grain(self) -> Option<Grain> {
        match self {
            PartitionKind::Minutely => Some(Grain::Minutely(1)),
            PartitionKind::Hourly => Some(Grain::Hourly),
            PartitionKind::Daily => Some(Grain::Daily),
            PartitionKind::Weekly => Some(Grain::Weekly),
            PartitionKind::Monthly => Some(Grain::Monthly),
            PartitionKind::Static => None,
        }
    }
}

impl Validator<'_, '_, '_, '_> {
    pub(super) fn partitions(
        &mut self,
        entries: &[Entry<RawPartitionScheme>],
    ) -> IndexMap<String, PartitionScheme> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            let grain = match raw.kind.grain() {
                Some(Grain::Minutely(_)) => self.every(&entry.name, raw).map(Some),
                Some(grain) => self.no_every(&entry.name, raw).then_some(Some(grain)),
                None => self.no_every(&entry.name, raw).then_some(None),
            };
            let scheme = match grain {
                Some(Some(grain)) => self.time_scheme(&entry.name, raw, grain),
                Some(None) => self.static_scheme(&entry.name, raw),
                None => None,
            };
            if let Some(scheme) = scheme {
                out.insert(entry.name.clone(), scheme);
            }
        }
        out
    }

    /// The grain of a minutely scheme: `every` minutes, which must tile an
    /// hour.
    fn every(&mut self, name: &str, raw: &RawPartitionScheme) -> Option<Grain> {
        let steps = MINUTE_STEPS.map(|n| n.to_string()).join(", ");
        let Some(every) = raw.every else {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::MissingKey,
                    format!("minutely scheme `{name}` needs `every`"),
                )
                .at(self.key(&["partitions", name]), "no `every`")
                .help(format!("add `every = 5` (minutes per partition: {steps})")),
            );
            return None;
        };
        let fits = u32::try_from(every)
            .ok()
            .filter(|n| MINUTE_STEPS.contains(n));
        if fits.is_none() {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::BadEvery,
                    format!("minutely scheme `{name}` cannot have periods of {every} minutes"),
                )
                .at(
                    self.value(&["partitions", name, "every"]),
                    "not a divisor of 60 below 60",
                )
                .help(if every == 60 {
                    "for one partition per hour, write `kind = \"hourly\"`".to_string()
                } else {
                    format!("periods must tile the hour: write one of {steps}")
                }),
            );
        }
        fits.map(Grain::Minutely)
    }

    /// Whether a scheme that is not minutely leaves `every` out (it is
    /// reported if not).
    fn no_every(&mut self, name: &str, raw: &RawPartitionScheme) -> bool {
        if raw.every.is_none() {
            return true;
        }
        self.err(
            ManifestError::new(
                ManifestErrorKind::UnexpectedKey,
                format!(
                    "{} scheme `{name}` cannot have `every`",
                    kind_word(raw.kind)
                ),
            )
            .at(
                self.key(&["partitions", name, "every"]),
                "only for `kind = \"minutely\"`",
            )
            .help("remove `every`, or make the scheme `kind = \"minutely\"`"),
        );
        false
    }

    fn time_scheme(
        &mut self,
        name: &str,
        raw: &RawPartitionScheme,
        grain: Grain,
    ) -> Option<PartitionScheme> {
        let p = |k: &'static str| ["partitions", name, k];
        if raw.keys.is_some() {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::UnexpectedKey,
                    format!("{grain} scheme `{name}` cannot have `keys`"),
                )
                .at(self.key(&p("keys")), "only for `kind = \"static\"`")
                .help("remove `keys`, or make the scheme `kind = \"static\"`"),
            );
        }
        let zone = self.scheme_zone(name, raw);
        let Some(start_text) = &raw.start else {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::MissingKey,
                    if grain == Grain::Daily {
                        format!("daily scheme `{name}` needs a `start` date")
                    } else {
                        format!("{grain} scheme `{name}` needs a `start`")
                    },
                )
                .at(self.key(&["partitions", name]), "no `start`")
                .help(if grain == Grain::Daily {
                    "add `start = \"YYYY-MM-DD\"` (and optionally `end`)".to_string()
                } else {
                    format!(
                        "add `start = \"{}\"` (and optionally `end`)",
                        grain.example()
                    )
                }),
            );
            return None;
        };
        let zone = zone?;
        let probe = TimeScheme::probe(grain, zone, start_text);
        let start = self.bound(&probe, start_text, &p("start"));
        if let (Some(start), Some(end)) = (start, &raw.end) {
            // An `end` that names a local time the zone's fractional change
            // skips is no key only because of the zone: say that alone.
            let unbounded = probe.clone().with_range(start, None);
            if probe.parse_bound(end).is_none() && !self.whole_periods(name, grain, &unbounded) {
                return None;
            }
        }
        let end = raw
            .end
            .as_ref()
            .and_then(|e| self.bound(&probe, e, &p("end")));
        let start = start?;
        if let Some(end) = end {
            if end < start {
                let (s, e) = (probe.key(start), probe.key(end));
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadRange,
                        format!("{grain} scheme `{name}` ends ({e}) before it starts ({s})"),
                    )
                    .at(self.value(&p("end")), "before `start`")
                    .also(self.value(&p("start")), "starts here")
                    .help("swap `start` and `end`, or fix the dates"),
                );
                return None;
            }
        }
        let scheme = probe.with_range(start, end);
        if !self.whole_periods(name, grain, &scheme) {
            return None;
        }
        Some(PartitionScheme::Time(scheme))
    }

    /// The scheme's timezone, UTC unless it names one.
    fn scheme_zone(&mut self, name: &str, raw: &RawPartitionScheme) -> Option<Zone> {
        let p = |k: &'static str| ["partitions", name, k];
        match &raw.timezone {
            None => Some(Zone::utc()),
            Some(tz) => {
                let zone = Zone::get(tz);
                if zone.is_none() {
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::UnknownTimezone,
                            format!("unknown timezone `{tz}`"),
                        )
                        .at(self.value(&p("timezone")), "not an IANA timezone")
                        .help(timezone_help(tz)),
                    );
                }
                zone
            }
        }
    }

    /// Whether the periods of a scheme stay whole in its zone: a zone whose
    /// clocks change by a fraction of a period would split one.
    fn whole_periods(&mut self, name: &str, grain: Grain, scheme: &TimeScheme) -> bool {
        let p = |k: &'static str| ["partitions", name, k];
        if let Some((at, before, after)) = scheme.fractional_offset_change() {
            let zone = scheme.zone.name();
            let when = jiff::Timestamp::from_second(at)
                .map(|t| t.to_string())
                .unwrap_or_else(|_| at.to_string());
            let (fraction, help) = match grain {
                Grain::Minutely(n) => (
                    format!("a fraction of {n} minutes"),
                    format!("its local periods would not stay whole {n}-minute periods: choose an `every` that divides the change, or a zone such as \"UTC\""),
                ),
                _ => (
                    "a fraction of an hour".to_string(),
                    "its local hours would not stay whole hours: make the scheme `kind = \"daily\"`, or hourly in a zone such as \"UTC\"".to_string(),
                ),
            };
            self.err(
                ManifestError::new(
                    ManifestErrorKind::FractionalOffsetChange,
                    format!(
                        "{grain} scheme `{name}` cannot be in `{zone}`: its clocks change by {fraction} ({} to {} at {when})",
                        offset_text(before),
                        offset_text(after)
                    ),
                )
                .at(self.value(&p("timezone")), format!("offsets change by {fraction}"))
                .also(self.value(&p("start")), "from here on")
                .help(help),
            );
            return false;
        }
        true
    }

    /// A `start`/`end` of a time scheme. Daily bounds keep the date
    /// diagnostics they always had.
    fn bound(&mut self, probe: &TimeScheme, text: &str, path: &[&str]) -> Option<i64> {
        if probe.grain == Grain::Daily {
            return self.date(text, path).and(parse_day(text));
        }
        let parsed = probe.parse_bound(text);
        if parsed.is_none() {
            let grain = probe.grain;
            let also_date = matches!(grain, Grain::Weekly | Grain::Monthly);
            self.err(
                ManifestError::new(
                    ManifestErrorKind::BadPartitionKey,
                    format!("`{text}` is not a {grain} partition key"),
                )
                .at(self.value(path), format!("not a {grain} key"))
                .help(if also_date {
                    format!(
                        "write a key such as \"{}\", or a date such as \"2026-09-20\" for the {} containing it",
                        grain.example(),
                        grain.unit()
                    )
                } else if let Grain::Minutely(n) = grain {
                    format!(
                        "write a key such as \"{}\" (local time, minutes a multiple of {n}; a repeated hour's time ends with its offset, \"-04:00\")",
                        grain.example()
                    )
                } else {
                    format!("write a key such as \"{}\"", grain.example())
                }),
            );
        }
        parsed
    }

    fn static_scheme(&mut self, name: &str, raw: &RawPartitionScheme) -> Option<PartitionScheme> {
        for (k, present) in [
            ("start", raw.start.is_some()),
            ("end", raw.end.is_some()),
            ("timezone", raw.timezone.is_some()),
        ] {
            if present {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::UnexpectedKey,
                        format!("static scheme `{name}` cannot have `{k}`"),
                    )
                    .at(
                        self.key(&["partitions", name, k]),
                        "only for time kinds (`daily` …)",
                    )
                    .help("list the partitions in `keys`, or make the scheme `kind = \"daily\"`"),
                );
            }
        }
        let Some(keys) = &raw.keys else {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::MissingKey,
                    format!("static scheme `{name}` needs `keys`"),
                )
                .at(self.key(&["partitions", name]), "no `keys`")
                .help("add `keys = [\"eu\", \"us\"]`"),
            );
            return None;
        };
        if keys.is_empty() {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::EmptyValue,
                    format!("static scheme `{name}` has no keys"),
                )
                .at(self.value(&["partitions", name, "keys"]), "empty")
                .help("list at least one key"),
            );
        }
        let mut seen = HashMap::new();
        for (i, key) in keys.iter().enumerate() {
            let idx = i.to_string();
            let safe = self.safe_name(
                "partition key",
                key,
                &["partitions", name, "keys", &idx],
                false,
            );
            // The warehouse's own rule, before any run: a key it cannot
            // name would validate, then fail every run.
            if let Some(why) = safe.then(|| crate::store::partition_problem(key)).flatten() {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::KeyTooLong,
                        format!(
                            "partition key `{}` of `{name}` is too long for the warehouse",
                            abbreviated(key)
                        ),
                    )
                    .at(
                        self.value(&["partitions", name, "keys", &idx]),
                        format!("{} bytes", key.len()),
                    )
                    .help(format!("{why}; shorten the key")),
                );
            }
            if let Some(first) = seen.insert(key.as_str(), i) {
                let first = first.to_string();
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::Duplicate,
                        format!("partition key `{key}` is listed twice in `{name}`"),
                    )
                    .at(
                        self.value(&["partitions", name, "keys", &idx]),
                        "listed again",
                    )
                    .also(
                        self.value(&["partitions", name, "keys", &first]),
                        "first here",
                    )
                    .help("remove the repeated key"),
                );
            }
        }
        Some(PartitionScheme::Static { keys: keys.clone() })
    }
}

/// The manifest's word for a kind, for messages.
fn kind_word(kind: PartitionKind) -> &'static str {
    kind.grain().map_or("static", Grain::as_str)
}

fn timezone_help(name: &str) -> String {
    let db = jiff::tz::TimeZoneDatabase::bundled();
    let known: Vec<String> = db.available().map(|n| n.as_str().to_string()).collect();
    match super::suggest::closest(name, known.iter().map(String::as_str)) {
        Some(best) => format!("did you mean `{best}`?"),
        None => "write an IANA timezone name such as \"Europe/Paris\" or \"America/New_York\" (default \"UTC\")".into(),
    }
}
