//! Durations as written in manifests and on the command line: one or more
//! `<integer><unit>` parts, units `ms`, `s`, `m`, `h`, `d` ("90s", "10m",
//! "1h30m"). Hand-written because the grammar is this small and the error
//! must say exactly what is accepted.

use std::time::Duration;

/// The longest duration weir accepts (3650 days, about 10 years): beyond
/// it a timeout or SLA is a typo, and deadlines computed from it (an
/// `Instant` plus it, twice it for gc) would overflow.
pub const MAX: Duration = Duration::from_secs(3650 * 86_400);

/// How [`MAX`] is written in messages.
pub const MAX_TEXT: &str = "3650d";

/// Why a text is not a duration weir accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing but whitespace.
    #[error("empty duration")]
    Empty,
    /// Not `<integer><unit>` parts: `10 minutes`, `s`.
    #[error("`{text}` is not a duration")]
    Malformed {
        /// The duration as written (trimmed).
        text: String,
    },
    /// A bare number: `10`.
    #[error("`{text}` has a number without a unit")]
    NoUnit {
        /// The duration as written (trimmed).
        text: String,
    },
    /// A unit other than `ms`, `s`, `m`, `h`, `d`.
    #[error("`{unit}` is not a duration unit")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
    },
    /// A number beyond what 64 bits hold.
    #[error("`{number}` is too large")]
    NumberTooLarge {
        /// The digits as written.
        number: String,
    },
    /// Longer than [`MAX`].
    #[error("`{text}` is longer than the maximum of {MAX_TEXT}")]
    TooLong {
        /// The duration as written (trimmed).
        text: String,
    },
}

/// Parses a duration of at most [`MAX`], or says what is wrong with it.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let d = parse_unbounded(text)?;
    if d > MAX {
        return Err(DurationError::TooLong {
            text: text.trim().to_string(),
        });
    }
    Ok(d)
}

/// Parses a duration of any length (saturating), or says what is wrong with
/// its syntax; the manifest checks the length itself, to locate it.
pub(crate) fn parse_unbounded(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let malformed = || DurationError::Malformed {
        text: text.to_string(),
    };
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(malformed());
        }
        let (number, after) = rest.split_at(digits);
        let unit_len = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, after) = after.split_at(unit_len);
        let n: u64 = number.parse().map_err(|_| DurationError::NumberTooLarge {
            number: number.to_string(),
        })?;
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            "" if after.is_empty() => {
                return Err(DurationError::NoUnit {
                    text: text.to_string(),
                })
            }
            "" => return Err(malformed()),
            other => {
                return Err(DurationError::UnknownUnit {
                    unit: other.to_string(),
                })
            }
        };
        total = total.saturating_add(part);
        rest = after;
    }
    Ok(total)
}

/// Renders a duration compactly for plans and messages ("1h 1m", "10m", "250ms").
pub fn render(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut parts = Vec::new();
    if h > 0 {
        parts.push(format!("{h}h"));
    }
    if m > 0 {
        parts.push(format!("{m}m"));
    }
    if s > 0 || parts.is_empty() {
        parts.push(format!("{s}s"));
    }
    parts.join(" ")
}

/// A duration as people read it in events and explanations: `850ms` under a
/// second, `12.3s` under a minute (tenths), then `1h 2m 3s` (`render`).
pub fn human(d: Duration) -> String {
    if d.as_millis() < 1000 {
        return render(d);
    }
    if d.as_secs() < 60 {
        return format!("{:.1}s", d.as_secs_f64());
    }
    render(d)
}

/// Serializes a `Duration` as whole milliseconds (JSON plans, records).
pub mod serde_millis {
    use std::time::Duration;

    /// Serializer half.
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_compounds() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn rejects_malformed_naming_what_is_wrong() {
        let text = |t: &str| t.to_string();
        assert_eq!(parse("10"), Err(DurationError::NoUnit { text: text("10") }));
        assert_eq!(
            parse("10 minutes"),
            Err(DurationError::Malformed {
                text: text("10 minutes")
            })
        );
        assert_eq!(
            parse("5y"),
            Err(DurationError::UnknownUnit { unit: text("y") })
        );
        assert_eq!(
            parse("s"),
            Err(DurationError::Malformed { text: text("s") })
        );
        assert_eq!(parse(""), Err(DurationError::Empty));
        assert_eq!(
            parse("99999999999999999999s"),
            Err(DurationError::NumberTooLarge {
                number: text("99999999999999999999")
            })
        );
        assert_eq!(
            parse(" 99999999999999999d"),
            Err(DurationError::TooLong {
                text: text("99999999999999999d")
            })
        );
        let says = |t: &str| parse(t).unwrap_err().to_string();
        assert_eq!(says("10"), "`10` has a number without a unit");
        assert_eq!(says("10 minutes"), "`10 minutes` is not a duration");
        assert_eq!(says("5y"), "`y` is not a duration unit");
        assert_eq!(says(""), "empty duration");
        assert_eq!(
            says("99999999999999999d"),
            "`99999999999999999d` is longer than the maximum of 3650d"
        );
        assert_eq!(parse("3650d"), Ok(MAX));
    }

    #[test]
    fn renders_compactly() {
        assert_eq!(render(Duration::from_secs(3650 * 60)), "60h 50m");
        assert_eq!(render(Duration::from_secs(600)), "10m");
        assert_eq!(render(Duration::from_millis(5)), "5ms");
    }
}
