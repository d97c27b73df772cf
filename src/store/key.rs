//! Keys: the `/`-separated relative names every backend understands.
//!
//! Validation is the only thing standing between a dataset or partition name
//! taken from a manifest and a path outside the warehouse root, so it is
//! strict: no leading `/`, no empty segments, no segment starting with
//! `.` (which rules out `.` and `..` and keeps dot-names free for the
//! backend's temp files, which listings hide), and no segment longer than
//! a directory entry may be.
//!
//! These rules are the store's, stated once: the audit refuses a candidate
//! file the store would refuse ([`segment_problem`]), and `validate`
//! refuses a partition key whose names would not fit
//! ([`partition_problem`]), so neither waits for a commit to fail.

use std::path::{Path, PathBuf};

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::store::error::StoreError;

/// The longest segment a key may have, in bytes: NAME_MAX of the
/// filesystems a local warehouse lives on (ext4, xfs, tmpfs), kept by every
/// backend so a warehouse can move between them.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// The suffix of the files named after a partition (an instance's marker,
/// a certification): `<partition>.json`.
const PARTITION_FILE_SUFFIX: &str = ".json";

/// Why the store refuses `segment` as one segment of a key (a dataset, a
/// partition's directory, a file name), if it does.
pub fn segment_problem(segment: &str) -> Option<&'static str> {
    if segment.is_empty() {
        Some("empty segment")
    } else if segment.contains('/') {
        Some("a name may not contain '/'")
    } else if segment.starts_with('.') {
        Some("a segment may not start with '.'")
    } else if segment.contains('\\') || segment.contains('\0') {
        Some("a segment may not contain '\\' or NUL")
    } else if segment.len() > MAX_SEGMENT_BYTES {
        Some("a segment may not be longer than 255 bytes")
    } else {
        None
    }
}

/// The directory of a Delta table dataset that holds its partitions'
/// directories (`store::layout`), so no partition's own name.
pub const TABLE_STATE_DIR: &str = "_weir";

/// Why the store cannot hold partition `key`, if it cannot: its encoded
/// segment ([`encode_partition`]) is a directory name and, with `.json`
/// after it, the name of a marker and of a certification, and each must be
/// a valid segment.
pub fn partition_problem(key: &str) -> Option<String> {
    let segment = encode_partition(key);
    if segment == TABLE_STATE_DIR {
        // A dataset holding it at its top would be read as a table
        // keeping its partitions below it.
        return Some(format!(
            "`{segment}` names the directory where a Delta table keeps weir's state"
        ));
    }
    let longest = format!("{segment}{PARTITION_FILE_SUFFIX}");
    segment_problem(&segment)
        .or_else(|| segment_problem(&longest))
        .map(|reason| match segment.len() + PARTITION_FILE_SUFFIX.len() {
            n if n > MAX_SEGMENT_BYTES => format!(
                "its name in the warehouse is {} bytes, over the {} a partition may have ({MAX_SEGMENT_BYTES} bytes a name, less `{PARTITION_FILE_SUFFIX}` of its marker file)",
                segment.len(),
                MAX_SEGMENT_BYTES - PARTITION_FILE_SUFFIX.len()
            ),
            _ => reason.to_owned(),
        })
}

/// Checks one segment (a dataset, partition or file name).
pub(crate) fn validate_segment(segment: &str) -> Result<(), StoreError> {
    let reason = segment_problem(segment);
    match reason {
        Some(reason) => Err(StoreError::InvalidKey {
            key: segment.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks a whole key: one or more valid segments joined by `/`.
pub(crate) fn validate_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() {
        return Err(StoreError::InvalidKey {
            key: String::new(),
            reason: "empty key",
        });
    }
    if key.starts_with('/') {
        return Err(StoreError::InvalidKey {
            key: key.to_owned(),
            reason: "a key may not start with '/'",
        });
    }
    for segment in key.split('/') {
        validate_segment(segment).map_err(|e| match e {
            StoreError::InvalidKey { reason, .. } => StoreError::InvalidKey {
                key: key.to_owned(),
                reason,
            },
            other => other,
        })?;
    }
    Ok(())
}

/// A partition key as one path segment: bytes other than ASCII letters,
/// digits, `-`, `_` and `.` (and a leading `.`) become `%XX`, so `|` of a
/// multi-dimension key, `+` and `:` of an hour's offset, or anything a
/// future scheme allows can never split, hide or escape a path, and the
/// segment decodes back to exactly one key. Keys of daily and static
/// schemes are unchanged by it, so existing warehouses stay readable.
pub fn encode_partition(key: &str) -> String {
    // `~` is encoded too: segments written before the crate did so, and a
    // stored key must not change.
    const KEPT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');
    match key.strip_prefix('.') {
        // A leading `.` would make the segment `.`, `..` or a hidden name.
        Some(rest) => format!("%2E{}", utf8_percent_encode(rest, KEPT)),
        None => utf8_percent_encode(key, KEPT).to_string(),
    }
}

/// The key a segment made by [`encode_partition`] stands for; `None` for a
/// name it cannot have made.
pub fn decode_partition(segment: &str) -> Option<String> {
    // A `%` not followed by two hex digits decodes as itself, and then
    // the round trip below tells the segment from one encode made.
    let key = percent_decode_str(segment).decode_utf8().ok()?.into_owned();
    (encode_partition(&key) == segment).then_some(key)
}

/// Maps a validated key to a path under `root`, segment by segment so the
/// separator is the platform's.
pub(crate) fn key_path(root: &Path, key: &str) -> PathBuf {
    let mut path = root.to_path_buf();
    path.extend(key.split('/'));
    path
}

/// Joins two key parts.
pub(crate) fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(key: &str) -> bool {
        matches!(validate_key(key), Err(StoreError::InvalidKey { .. }))
    }

    #[test]
    fn accepts_ordinary_keys() {
        validate_key("sales/2024-01-01/log/00000000000000000001.json").unwrap();
        validate_key("a").unwrap();
        validate_key("region=eu/x y").unwrap();
    }

    #[test]
    fn rejects_escapes_and_empty_segments() {
        for key in [
            "", "/abs", "a//b", "a/", "../x", "a/../b", "a/./b", "a/.tmp", "a\\b", "a\0b",
        ] {
            assert!(rejected(key), "{key:?} accepted");
        }
    }

    #[test]
    fn segment_rejects_slash() {
        assert!(validate_segment("a/b").is_err());
        assert!(validate_segment("").is_err());
        validate_segment("2024-01-01").unwrap();
    }

    // A segment longer than a directory entry may be is refused,
    // and so is a partition whose marker's name would be
    #[test]
    fn long_segments_and_partitions_are_refused() {
        validate_segment(&"a".repeat(255)).unwrap();
        assert_eq!(
            segment_problem(&"a".repeat(256)),
            Some("a segment may not be longer than 255 bytes")
        );
        assert_eq!(partition_problem(&"k".repeat(250)), None);
        assert_eq!(
            partition_problem(&"k".repeat(251)).as_deref(),
            Some("its name in the warehouse is 251 bytes, over the 250 a partition may have (255 bytes a name, less `.json` of its marker file)")
        );
        // Encoded: `|` is three bytes.
        let multi = format!("{}|{}", "a".repeat(123), "b".repeat(123));
        assert_eq!(encode_partition(&multi).len(), 249);
        assert_eq!(partition_problem(&multi), None);
        assert!(partition_problem("_weir").is_some());
        assert_eq!(partition_problem("_weir2"), None);
        assert!(partition_problem(&format!("{multi}c|")).is_some());
        assert_eq!(
            segment_problem("a\\b.csv"),
            Some("a segment may not contain '\\' or NUL")
        );
    }

    // Any partition key is one safe segment and decodes back
    #[test]
    fn partition_keys_encode_to_one_reversible_segment() {
        for key in ["2026-09-20", "eu", "all", "a.b"] {
            assert_eq!(encode_partition(key), key, "unchanged");
        }
        for key in [
            "eu|2026-09-20",
            "2026-10-25T02+01:00",
            ".hidden",
            "..",
            "a/b",
            "x%7C",
            "é|ü",
            "",
        ] {
            let seg = encode_partition(key);
            if !key.is_empty() {
                validate_segment(&seg).unwrap();
            }
            assert!(!seg.contains(['/', '|', ':', '+']), "{seg}");
            assert_eq!(decode_partition(&seg).as_deref(), Some(key));
        }
        assert_ne!(encode_partition("eu|x"), encode_partition("eu%7Cx"));
        assert_eq!(decode_partition("eu%7c2026"), None, "only canonical names");
    }

    #[test]
    fn stored_segments_keep_their_exact_spelling() {
        // Segments are stored: the encoder may change, these may not.
        for (key, segment) in [
            (".hidden", "%2Ehidden"),
            ("..", "%2E."),
            ("a~b c", "a%7Eb%20c"),
            ("eu|2026-09-20", "eu%7C2026-09-20"),
            ("2026-10-25T02+01:00", "2026-10-25T02%2B01%3A00"),
            ("é", "%C3%A9"),
            ("a.b_c-d", "a.b_c-d"),
        ] {
            assert_eq!(encode_partition(key), segment, "{key}");
            assert_eq!(decode_partition(segment).as_deref(), Some(key));
        }
        assert_eq!(decode_partition("a%zz"), None, "a malformed escape");
        assert_eq!(decode_partition("%FF"), None, "not UTF-8");
    }

    proptest::proptest! {
        // Any key, any bytes: one valid segment that decodes back
        #[test]
        fn partition_encoding_round_trips(key in "\\PC{1,40}") {
            let seg = encode_partition(&key);
            // Within the length limit, every key is one valid segment; over
            // it, `validate` refuses the key before the store sees it.
            if seg.len() <= MAX_SEGMENT_BYTES {
                proptest::prop_assert!(validate_segment(&seg).is_ok(), "{seg}");
            } else {
                proptest::prop_assert!(partition_problem(&key).is_some(), "{seg}");
            }
            proptest::prop_assert_eq!(decode_partition(&seg), Some(key));
        }
    }

    #[test]
    fn key_path_stays_under_root() {
        let p = key_path(Path::new("/w"), "d/p/log");
        assert_eq!(p, PathBuf::from("/w/d/p/log"));
        assert_eq!(join("", "x"), "x");
        assert_eq!(join("a/b", "x"), "a/b/x");
    }
}
