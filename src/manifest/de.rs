//! Deserializers and defaults the raw sections share (`raw.rs` and each
//! section's raw type), below all of them so that no section imports
//! `raw.rs`, which composes them.

use serde::{Deserialize, Deserializer};

use crate::audit::Format;

pub(super) fn default_format() -> Format {
    Format::Csv
}

/// Dates may be written as strings or as bare TOML dates.
pub(super) fn date_like<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    date_like_required(d).map(Some)
}

pub(super) fn date_like_required<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::de::Error;
    match toml::Value::deserialize(d)? {
        toml::Value::String(s) => Ok(s),
        toml::Value::Datetime(dt) => Ok(dt.to_string()),
        other => Err(D::Error::custom(format!(
            "wrong type: expected a date such as \"2026-09-20\", found {}",
            other.type_str()
        ))),
    }
}
