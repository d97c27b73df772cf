//! What a publication marker's name says of its record: enough to tell
//! whether an instance is current, and to pin it as an input, from a
//! listing of the log alone, without reading the record.
//!
//! A commit leaves `<g>.published-<token>` beside its record (see
//! `layout::published_name`); the name goes on with
//! `.<proof>.<digest>.<attempt>.<run id>`. The proof is a hash of what
//! [`crate::exec::is_current`] compares (input snapshot digest, code
//! version, code fingerprint). A summary is only ever a shortcut for an
//! exact match: a proof that differs sends the reader to the record, which
//! decides as before (early cutoff, a record without a fingerprint). A
//! name without a summary (an older marker, a digest or run id a name
//! cannot hold) is read as before too.

use sha2::{Digest, Sha256};

use crate::store::log::CommitRecord;
use crate::store::token::{FencingToken, Generation};

/// A committed generation as its marker's name summarises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The generation.
    pub generation: Generation,
    /// Its token.
    pub token: FencingToken,
    /// [`currency_proof`] of its record.
    pub proof: String,
    /// Its canonical digest (`sha256:...`).
    pub digest: String,
    /// The attempt that published it.
    pub attempt: u32,
    /// The run that published it.
    pub run_id: String,
}

/// Hex digits of the proof kept in a name (128 bits).
const PROOF_LEN: usize = 32;

/// The hash an instance compares with its marker's to know it is current:
/// over the input snapshot digest, code version and code fingerprint (none
/// for a record from before fingerprints, which then never matches).
pub fn currency_proof(
    input_snapshot_digest: &str,
    code_version: &str,
    code_fingerprint: Option<&str>,
) -> String {
    let mut hasher = Sha256::new();
    for part in [
        "weir-currency-1",
        input_snapshot_digest,
        code_version,
        code_fingerprint.unwrap_or("\0none"),
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let hex = format!("{:x}", hasher.finalize());
    hex[..PROOF_LEN].to_owned()
}

impl Summary {
    /// The summary of `record`, if a name can hold it.
    pub fn of(record: &CommitRecord) -> Option<Summary> {
        let digest_ok = record.digest.split_once(':').is_some_and(|(algo, hex)| {
            !algo.is_empty()
                && algo.bytes().all(|b| b.is_ascii_alphanumeric())
                && !hex.is_empty()
                && hex.len() <= 128
                && hex.bytes().all(|b| b.is_ascii_hexdigit())
        });
        let run_ok = !record.run_id.is_empty()
            && record.run_id.len() <= 128
            && record
                .run_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        (digest_ok && run_ok).then(|| Summary {
            generation: record.generation,
            token: record.token,
            proof: currency_proof(
                &record.input_snapshot_digest,
                &record.code_version,
                record.code_fingerprint.as_deref(),
            ),
            digest: record.digest.clone(),
            attempt: record.attempt,
            run_id: record.run_id.clone(),
        })
    }

    /// What the marker's name carries after its token.
    pub(crate) fn name_suffix(&self) -> String {
        format!(
            ".{}.{}.{}.{}",
            self.proof,
            self.digest.replacen(':', "-", 1),
            self.attempt,
            self.run_id
        )
    }

    /// The summary a marker's `suffix` (after its token) carries, if any.
    pub(crate) fn parse_suffix(
        generation: Generation,
        token: FencingToken,
        suffix: &str,
    ) -> Option<Summary> {
        let mut parts = suffix.strip_prefix('.')?.splitn(4, '.');
        let proof = parts.next()?;
        let digest = parts.next()?.replacen('-', ":", 1);
        let attempt = parts.next()?.parse().ok()?;
        let run_id = parts.next()?;
        let ok = proof.len() == PROOF_LEN && proof.bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| Summary {
            generation,
            token,
            proof: proof.to_owned(),
            digest,
            attempt,
            run_id: run_id.to_owned(),
        })
    }

    /// Whether the record it summarises was published from these reads and
    /// this code: true only for an exact match (see the module's doc).
    pub fn is_current(&self, snapshot_digest: &str, code_version: &str, fingerprint: &str) -> bool {
        self.proof == currency_proof(snapshot_digest, code_version, Some(fingerprint))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_back_from_its_name() {
        let s = Summary {
            generation: Generation::from_raw(3),
            token: FencingToken::from_raw(7),
            proof: currency_proof("sha256:ab", "1", Some("fp")),
            digest: format!("sha256:{}", "e3".repeat(32)),
            attempt: 2,
            run_id: "run-2026.12.02-ab".to_owned(),
        };
        let suffix = s.name_suffix();
        assert_eq!(
            Summary::parse_suffix(s.generation, s.token, &suffix),
            Some(s.clone())
        );
        assert!(s.is_current("sha256:ab", "1", "fp"));
        assert!(!s.is_current("sha256:ab", "2", "fp"));
        assert!(!s.is_current("sha256:ac", "1", "fp"));
        assert!(!s.is_current("sha256:ab", "1", "fq"));
        for bad in [
            "",
            ".",
            ".short.sha256-ab.1.r",
            &suffix.replace(".2.", ".x."),
        ] {
            assert_eq!(
                Summary::parse_suffix(s.generation, s.token, bad),
                None,
                "{bad}"
            );
        }
    }

    #[test]
    fn parts_cannot_run_into_each_other() {
        assert_ne!(
            currency_proof("a", "bc", Some("d")),
            currency_proof("ab", "c", Some("d"))
        );
        // A record without a fingerprint never matches one with any.
        assert_ne!(
            currency_proof("a", "b", None),
            currency_proof("a", "b", Some(""))
        );
    }
}
