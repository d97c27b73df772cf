//! The contract every store backend keeps, one test per promise per
//! backend: `store_contract::<backend>::<check>` names which promise broke
//! where. It lives here, not in the library, so that none of it ships in
//! the binary.
//!
//! It is the one thing a new backend must pass (`store::Backend` says
//! so): add a module here like `memory`, `filesystem` or `s3`, running
//! [`for_each_check!`], and [`for_each_race!`] too where its conditional
//! writes are atomic under heavy races. Nothing above `store` asks which
//! backend it runs on, so a backend that passes is a backend weir can use.
//!
//! The checks (`checks.rs`) run on a fresh, empty backend. [`for_each_check!`]
//! lists the single-writer semantics plus light concurrency that every
//! backend must survive; [`for_each_race!`] hammers the protocol (many
//! threads allocating tokens and committing at once) and runs where
//! conditional writes are truly atomic (memory, filesystem): moto's are not
//! under heavy races, so S3 runs only the checks.

mod checks;

/// Calls `$test!(check)` for each check every backend keeps.
macro_rules! for_each_check {
    ($test:ident) => {
        $test!(put_if_absent_creates_once);
        $test!(get_object_has_metadata);
        $test!(replace_only_at_the_expected_version);
        $test!(put_overwrites_whatever_is_there);
        $test!(list_is_a_sorted_directory_view);
        $test!(list_objects_is_recursive_with_metadata);
        $test!(list_after_starts_after_a_name);
        $test!(files_round_trip);
        $test!(delete_and_delete_prefix);
        $test!(bad_keys_are_refused);
        $test!(protocol_tokens_and_fenced_commit);
        $test!(capabilities_keep_their_promises);
    };
}

/// Calls `$test!(race)` for each of the protocol's races.
macro_rules! for_each_race {
    ($test:ident) => {
        $test!(concurrent_put_if_absent_has_one_winner);
        $test!(race_put_if_absent_many_keys);
        $test!(race_replace_loses_no_update);
        $test!(race_token_allocation_is_dense_and_unique);
        $test!(race_fenced_commit_keeps_tokens_increasing);
    };
}

/// One `#[test]` named after the check, running it on `backend()`.
macro_rules! on_backend {
    ($check:ident) => {
        #[test]
        fn $check() {
            let (b, _keep) = backend();
            super::checks::$check(b);
        }
    };
}

mod memory {
    use std::sync::Arc;

    use weir::store::{Backend, MemoryBackend};

    fn backend() -> (Arc<dyn Backend>, ()) {
        (Arc::new(MemoryBackend::new()), ())
    }

    for_each_check!(on_backend);
    for_each_race!(on_backend);
}

mod filesystem {
    use std::sync::Arc;

    use weir::store::{Backend, FsBackend};

    // The test keeps the directory until the check is done.
    fn backend() -> (Arc<dyn Backend>, tempfile::TempDir) {
        let tmp = tempfile::tempdir().unwrap();
        (Arc::new(FsBackend::new(tmp.path())), tmp)
    }

    for_each_check!(on_backend);
    // Races included: link and flock are atomic across processes.
    for_each_race!(on_backend);
}

/// Memory with random pauses between every step, so that racing token
/// allocations and fenced commits interleave in every order; each race runs
/// three times.
mod memory_jitter {
    use std::sync::Arc;

    use weir::store::MemoryBackend;

    use super::checks::{self, Jitter};

    macro_rules! jittered {
        ($race:ident) => {
            #[test]
            fn $race() {
                for _ in 0..3 {
                    checks::$race(Arc::new(Jitter(MemoryBackend::new())));
                }
            }
        };
    }

    for_each_race!(jittered);

    // Markers and certifications are replaced whole by
    // create-or-replace-the-version-read; racing writers (two engines
    // marking one instance) never fail, never lose the key, and the last
    // one's bytes stand whole.
    #[test]
    fn racing_replacements_leave_one_whole_write() {
        use weir::store::Backend;
        let b = Jitter(MemoryBackend::new());
        std::thread::scope(|s| {
            for i in 0..6u8 {
                let b = &b;
                s.spawn(move || {
                    for j in 0..10u8 {
                        let bytes = vec![i; 64 + usize::from(j)];
                        weir::store::backend::put_replacing(b, "_instances/t/p.json", &bytes)
                            .unwrap();
                        let now = b
                            .get("_instances/t/p.json")
                            .unwrap()
                            .expect("never missing");
                        assert!(now.iter().all(|&x| x == now[0]), "a torn write");
                    }
                });
            }
        });
        let last = b.get("_instances/t/p.json").unwrap().unwrap();
        assert!(last.iter().all(|&x| x == last[0]) && last.len() >= 64);
    }
}

/// S3 on a real S3 protocol server, each check under its own key prefix of
/// one bucket per test.
#[cfg(feature = "s3")]
mod s3 {
    use std::sync::Arc;

    use weir::store::Backend;

    use crate::support::s3::S3;

    macro_rules! on_s3 {
        ($check:ident) => {
            #[cfg_attr(
                not(any(weir_has_s3, weir_ci)),
                ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
            )]
            #[test]
            fn $check() {
                let Some(s3) = S3::sandbox("wh/0") else {
                    return;
                };
                let b: Arc<dyn Backend> = Arc::new(s3.backend());
                super::checks::$check(b);
            }
        };
    }

    for_each_check!(on_s3);
}
