//! The formats of data files, and an input's files in one.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The format of a candidate's or an input's data files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Comma-separated values with a header row.
    Csv,
    /// JSON Lines: one JSON object per line.
    Jsonl,
    /// Apache Parquet: typed columns in row groups.
    Parquet,
}

impl Format {
    /// The file name extension of the format, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Jsonl => "jsonl",
            Self::Parquet => "parquet",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.extension())
    }
}

/// An input a reconcile gate can read: its format and its files.
#[derive(Debug, Clone)]
pub struct InputData {
    /// The format of every file.
    pub format: Format,
    /// The data files.
    pub files: Vec<PathBuf>,
}
