//! The checks of the store contract, each a function of a fresh, empty
//! backend that panics on a broken promise; `super` turns each into one
//! test per backend. [`Jitter`] widens the windows between a protocol's
//! steps.

// Every check has one signature (a fresh backend, owned), so that one macro
// runs them all; most only borrow it.
#![allow(clippy::needless_pass_by_value)]

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use weir::store::{
    Backend, CommitKind, FencingToken, IncompleteUpload, NewCommit, Object, ObjectMeta,
    PublishError, StoreError, TokenOwner, Version, Warehouse,
};

/// A backend that sleeps a random few microseconds before every call, so
/// that the steps of racing protocol runs interleave in every order.
pub(crate) struct Jitter<B>(pub(crate) B);

impl<B: Backend> Jitter<B> {
    fn pause(&self) {
        std::thread::sleep(Duration::from_micros(fastrand::u64(0..200)));
    }
}

impl<B: Backend> Backend for Jitter<B> {
    fn durable(&self) -> Option<&dyn weir::store::DurableDirectories> {
        self.0.durable()
    }

    fn multipart(&self) -> Option<&dyn weir::store::MultipartHygiene> {
        self.0.multipart()
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        self.pause();
        self.0.put_if_absent(key, bytes)
    }
    fn put_if_version_matches(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<Option<Version>, StoreError> {
        self.pause();
        self.0.put_if_version_matches(key, bytes, expected)
    }
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.pause();
        self.0.put(key, bytes)
    }
    fn get_object(&self, key: &str) -> Result<Option<Object>, StoreError> {
        self.pause();
        self.0.get_object(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.pause();
        self.0.list(prefix)
    }
    fn list_objects(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        self.pause();
        self.0.list_objects(prefix)
    }
    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.pause();
        self.0.delete(key)
    }
    fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        self.pause();
        self.0.delete_prefix(prefix)
    }
}

pub(crate) fn put_if_absent_creates_once(b: Arc<dyn Backend>) {
    assert!(b.put_if_absent("d/p/log/k", b"first").unwrap());
    assert!(!b.put_if_absent("d/p/log/k", b"second").unwrap());
    assert_eq!(b.get("d/p/log/k").unwrap().unwrap(), b"first");
    assert_eq!(b.get("d/p/log/missing").unwrap(), None);
    // An empty object is an object.
    assert!(b.put_if_absent("d/p/empty", b"").unwrap());
    assert_eq!(b.get("d/p/empty").unwrap().unwrap(), b"");
}

pub(crate) fn get_object_has_metadata(b: Arc<dyn Backend>) {
    let before = jiff::Timestamp::now();
    assert!(b.put_if_absent("a/k", b"hello").unwrap());
    let o = b.get_object("a/k").unwrap().unwrap();
    assert_eq!(o.bytes, b"hello");
    assert_eq!((o.meta.key.as_str(), o.meta.size), ("a/k", 5));
    // The store's clock may differ from ours, but not by hours.
    let skew = o.meta.last_modified.duration_since(before).as_secs().abs();
    assert!(
        skew < 3600,
        "last_modified {} vs {before}",
        o.meta.last_modified
    );
    // Metadata is stable while nobody writes.
    assert_eq!(b.get_object("a/k").unwrap().unwrap().meta, o.meta);
    assert!(b.get_object("a/none").unwrap().is_none());
}

pub(crate) fn replace_only_at_the_expected_version(b: Arc<dyn Backend>) {
    assert!(b.put_if_absent("lease", b"v1").unwrap());
    let v1 = b.get_object("lease").unwrap().unwrap().meta.version;
    let v2 = b
        .put_if_version_matches("lease", b"v2", &v1)
        .unwrap()
        .expect("replace at the current version");
    assert_ne!(v1, v2);
    let o = b.get_object("lease").unwrap().unwrap();
    assert_eq!((o.bytes.as_slice(), &o.meta.version), (&b"v2"[..], &v2));
    // A writer still holding v1 lost: refused, bytes untouched.
    assert_eq!(b.put_if_version_matches("lease", b"v3", &v1).unwrap(), None);
    assert_eq!(b.get("lease").unwrap().unwrap(), b"v2");
    // A missing key has no version to match.
    assert_eq!(b.put_if_version_matches("nope", b"x", &v2).unwrap(), None);
    assert_eq!(b.get("nope").unwrap(), None);
    // Deleted and recreated with other bytes: the old version is dead.
    // (S3's version is an ETag, a digest of the bytes: writers that need a
    // new version per write, like a lease's heartbeat, change the bytes.)
    b.delete("lease").unwrap();
    assert!(b.put_if_absent("lease", b"v3").unwrap());
    assert_eq!(b.put_if_version_matches("lease", b"x", &v2).unwrap(), None);
    assert_eq!(b.get("lease").unwrap().unwrap(), b"v3");
}

pub(crate) fn put_overwrites_whatever_is_there(b: Arc<dyn Backend>) {
    b.put("a/lease", b"beat 1").unwrap();
    let v1 = b.get_object("a/lease").unwrap().unwrap().meta.version;
    b.put("a/lease", b"beat 2").unwrap();
    let o = b.get_object("a/lease").unwrap().unwrap();
    assert_eq!(o.bytes, b"beat 2");
    assert_ne!(o.meta.version, v1);
    // A put-if-absent now finds it taken; the conditional replace of the
    // overwritten version is refused.
    assert!(!b.put_if_absent("a/lease", b"x").unwrap());
    assert_eq!(
        b.put_if_version_matches("a/lease", b"x", &v1).unwrap(),
        None
    );
    assert_eq!(b.list("a").unwrap(), vec!["lease"]);
    assert!(matches!(
        b.put("../x", b"x"),
        Err(StoreError::InvalidKey { .. })
    ));
}

pub(crate) fn list_is_a_sorted_directory_view(b: Arc<dyn Backend>) {
    for k in ["a/c", "a/b", "a/d/e", "a/x-1", "a/x/y", "z"] {
        assert!(b.put_if_absent(k, b"x").unwrap());
    }
    assert_eq!(b.list("a").unwrap(), vec!["b", "c", "d", "x", "x-1"]);
    assert_eq!(b.list("").unwrap(), vec!["a", "z"]);
    assert_eq!(b.list("a/d").unwrap(), vec!["e"]);
    assert!(b.list("nope").unwrap().is_empty());
    // "a/x" does not list "a/x-1". (Listing under a key is not part of
    // the contract: an object store has nothing there, a filesystem sees
    // a file where a directory belongs, which is damage, and says so.)
    assert_eq!(b.list("a/x").unwrap(), vec!["y"]);
}

pub(crate) fn list_after_starts_after_a_name(b: Arc<dyn Backend>) {
    for k in [
        "l/0001.json",
        "l/0002.json",
        "l/0003.json",
        "l/0010.json",
        "l-x",
    ] {
        assert!(b.put_if_absent(k, b"x").unwrap());
    }
    assert_eq!(
        b.list_after("l", "0002.json").unwrap(),
        vec!["0003.json", "0010.json"]
    );
    assert!(b.list_after("l", "0010.json").unwrap().is_empty());
    assert_eq!(b.list_after("l", "").unwrap().len(), 4);
    assert!(b.list_after("nope", "0").unwrap().is_empty());
    // A few keys fit one page: all of them, as `list` has them.
    assert_eq!(b.list_first_page("l").unwrap(), Some(b.list("l").unwrap()));
    assert_eq!(b.list_first_page("nope").unwrap(), Some(Vec::new()));
}

/// A candidate's file goes up and comes back byte for byte, a large one
/// (past one multipart part) included; a missing object is `false`.
pub(crate) fn files_round_trip(b: Arc<dyn Backend>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let small = dir.join("small.csv");
    std::fs::write(&small, b"id\n1\n").unwrap();
    let large = dir.join("large.csv");
    let bytes: Vec<u8> = (0..17 * 1024 * 1024 + 3).map(|i| (i % 251) as u8).collect();
    std::fs::write(&large, &bytes).unwrap();
    b.put_file("f/small.csv", &small).unwrap();
    b.put_file("f/large.csv", &large).unwrap();
    let back = dir.join("back");
    assert!(b.get_file("f/small.csv", &back).unwrap());
    assert_eq!(std::fs::read(&back).unwrap(), b"id\n1\n");
    assert!(b.get_file("f/large.csv", &back).unwrap());
    assert!(
        std::fs::read(&back).unwrap() == bytes,
        "the large file differs"
    );
    assert_eq!(
        b.get_object("f/large.csv").unwrap().unwrap().meta.size,
        bytes.len() as u64
    );
    assert!(!b.get_file("f/none.csv", &dir.join("none")).unwrap());
    // Checked uploads: `true` only for the bytes the sum describes.
    let sum = weir::store::FileSum::of(&small, "small.csv").unwrap();
    b.put_file_checked("f/checked.csv", &small, &sum).unwrap();
    assert_eq!(b.get("f/checked.csv").unwrap().unwrap(), b"id\n1\n");
    let wrong = weir::store::FileSum {
        sha256: format!("sha256:{}", "0".repeat(64)),
        ..sum
    };
    assert!(
        !matches!(b.put_file_checked("f/wrong.csv", &small, &wrong), Ok(true)),
        "an upload is never vouched for against a sum its bytes do not have"
    );
}

pub(crate) fn list_objects_is_recursive_with_metadata(b: Arc<dyn Backend>) {
    for (k, v) in [
        ("r/1", &b"a"[..]),
        ("r/2/x", b"bb"),
        ("r/2/y/z", b"ccc"),
        ("r-2", b"d"),
    ] {
        assert!(b.put_if_absent(k, v).unwrap());
    }
    let all = b.list_objects("r").unwrap();
    let keys: Vec<(&str, u64)> = all.iter().map(|m| (m.key.as_str(), m.size)).collect();
    assert_eq!(keys, vec![("r/1", 1), ("r/2/x", 2), ("r/2/y/z", 3)]);
    for m in &all {
        assert_eq!(b.get_object(&m.key).unwrap().unwrap().meta, *m);
    }
    let whole: Vec<String> = b
        .list_objects("")
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .collect();
    assert_eq!(whole, vec!["r-2", "r/1", "r/2/x", "r/2/y/z"]);
    // A whole key lists itself.
    let one: Vec<String> = b
        .list_objects("r/2/x")
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .collect();
    assert_eq!(one, vec!["r/2/x"]);
    assert!(b.list_objects("none").unwrap().is_empty());
}

pub(crate) fn delete_and_delete_prefix(b: Arc<dyn Backend>) {
    for k in [
        "d/p/attempts/1/data/f",
        "d/p/attempts/1/c",
        "d/p/attempts/10/c",
        "d/p/k",
    ] {
        assert!(b.put_if_absent(k, b"x").unwrap());
    }
    b.delete("d/p/k").unwrap();
    b.delete("d/p/k").unwrap();
    assert_eq!(b.get("d/p/k").unwrap(), None);
    b.delete_prefix("d/p/attempts/1").unwrap();
    assert_eq!(b.list("d/p/attempts").unwrap(), vec!["10"]);
    b.delete_prefix("d/p/attempts/1").unwrap();
    // Several keys at once, a missing one among them.
    for k in ["d/q/1", "d/q/2", "d/q/3"] {
        assert!(b.put_if_absent(k, b"x").unwrap());
    }
    b.delete_keys(&["d/q/1".into(), "d/q/none".into(), "d/q/3".into()])
        .unwrap();
    assert_eq!(b.list("d/q").unwrap(), vec!["2"]);
    // Gone means gone: it can be created afresh.
    assert!(b.put_if_absent("d/p/attempts/1/data/f", b"y").unwrap());
    assert_eq!(b.get("d/p/attempts/1/data/f").unwrap().unwrap(), b"y");
}

pub(crate) fn bad_keys_are_refused(b: Arc<dyn Backend>) {
    for key in [
        "../x",
        "/etc/passwd",
        "a//b",
        "a/",
        "",
        "a/../../x",
        "a/.hidden",
    ] {
        let refused = |r: Result<(), StoreError>| matches!(r, Err(StoreError::InvalidKey { .. }));
        assert!(refused(b.put_if_absent(key, b"x").map(drop)), "{key:?}");
        assert!(refused(b.get(key).map(drop)), "{key:?}");
        assert!(refused(b.delete(key)), "{key:?}");
    }
    assert!(matches!(
        b.delete_prefix(""),
        Err(StoreError::InvalidKey { .. })
    ));
    assert!(matches!(b.list("../"), Err(StoreError::InvalidKey { .. })));
    assert!(b.list_objects("").unwrap().is_empty());
}

pub(crate) fn concurrent_put_if_absent_has_one_winner(b: Arc<dyn Backend>) {
    // The volatile kind (liveness records) is exactly as atomic.
    for volatile in [false, true] {
        let n = 8u8;
        let barrier = Barrier::new(usize::from(n));
        let winners: Vec<u8> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let (b, barrier) = (&b, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let key = format!("d/p/log/k{volatile}");
                        let won = if volatile {
                            b.put_if_absent_volatile(&key, &[i])
                        } else {
                            b.put_if_absent(&key, &[i])
                        };
                        won.unwrap().then_some(i)
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().unwrap())
                .collect()
        });
        assert_eq!(winners.len(), 1, "{winners:?}");
        let key = format!("d/p/log/k{volatile}");
        assert_eq!(b.get(&key).unwrap().unwrap(), vec![winners[0]]);
    }
    assert_eq!(b.list("d/p/log").unwrap(), vec!["kfalse", "ktrue"]);
}

fn owner(attempt: u32) -> TokenOwner {
    TokenOwner {
        run_id: "run".into(),
        task: "task".into(),
        attempt,
    }
}

fn commit(token: FencingToken) -> NewCommit {
    NewCommit {
        token,
        dataset: "d".into(),
        partition: "p".into(),
        kind: CommitKind::Publish,
        run_id: "run".into(),
        task: "task".into(),
        attempt: 1,
        attempt_dir: format!("d/p/attempts/{}", token.key_name()),
        data_dir: None,
        files: vec!["part-0.csv".into()],
        file_sums: Vec::new(),
        rows: 1,
        digest: "sha256:00".into(),
        input_snapshot: serde_json::json!({}),
        input_snapshot_digest: "sha256:11".into(),
        code_version: "v1".into(),
        code_fingerprint: None,
    }
}

fn warehouse(b: Arc<dyn Backend>) -> Warehouse {
    Warehouse::with_backend(b, std::env::temp_dir().join("weir-contract-unused"))
}

pub(crate) fn protocol_tokens_and_fenced_commit(b: Arc<dyn Backend>) {
    let p = warehouse(b).partition("d", "p");
    let t: Vec<FencingToken> = (1..=3)
        .map(|i| p.allocate_token(&owner(i)).unwrap())
        .collect();
    assert_eq!(t.iter().map(|t| t.get()).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(p.commit(commit(t[0])).unwrap().generation.get(), 1);
    assert_eq!(p.commit(commit(t[2])).unwrap().generation.get(), 2);
    match p.commit(commit(t[1])) {
        Err(PublishError::Stale {
            mine, committed, ..
        }) => assert_eq!((mine, committed), (t[1], t[2])),
        other => panic!("expected stale, got {other:?}"),
    }
    let tokens: Vec<u64> = p.history().unwrap().iter().map(|r| r.token.get()).collect();
    assert_eq!(tokens, vec![1, 3]);
}

pub(crate) fn race_put_if_absent_many_keys(b: Arc<dyn Backend>) {
    let (threads, keys) = (8usize, 40usize);
    let barrier = Barrier::new(threads);
    let won: Vec<Vec<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (b, barrier) = (&b, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    (0..keys)
                        .filter(|k| b.put_if_absent(&format!("k/{k:03}"), &[i as u8]).unwrap())
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Every key has exactly one winner, and holds the winner's bytes.
    let mut winners = vec![None; keys];
    for (i, ks) in won.iter().enumerate() {
        for &k in ks {
            assert!(winners[k].replace(i).is_none(), "key {k} won twice");
        }
    }
    for (k, w) in winners.iter().enumerate() {
        let w = w.unwrap_or_else(|| panic!("key {k} has no winner"));
        assert_eq!(b.get(&format!("k/{k:03}")).unwrap().unwrap(), vec![w as u8]);
    }
}

pub(crate) fn race_replace_loses_no_update(b: Arc<dyn Backend>) {
    assert!(b.put_if_absent("counter", b"0").unwrap());
    let (threads, each) = (6u64, 15u64);
    std::thread::scope(|s| {
        for _ in 0..threads {
            let b = &b;
            s.spawn(move || {
                for _ in 0..each {
                    loop {
                        let o = b.get_object("counter").unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&o.bytes).unwrap().parse().unwrap();
                        let next = (n + 1).to_string();
                        if b.put_if_version_matches("counter", next.as_bytes(), &o.meta.version)
                            .unwrap()
                            .is_some()
                        {
                            break;
                        }
                    }
                }
            });
        }
    });
    let total = (threads * each).to_string();
    assert_eq!(b.get("counter").unwrap().unwrap(), total.as_bytes());
}

pub(crate) fn race_token_allocation_is_dense_and_unique(b: Arc<dyn Backend>) {
    let p = warehouse(b).partition("d", "p");
    let (threads, each) = (8u32, 8u32);
    let barrier = Barrier::new(threads as usize);
    let all: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (p, barrier) = (p.clone(), &barrier);
                s.spawn(move || {
                    barrier.wait();
                    (0..each)
                        .map(|j| p.allocate_token(&owner(i * 100 + j)).unwrap().get())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let set: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(set.len(), all.len(), "a token was handed out twice");
    assert_eq!(set, (1..=u64::from(threads * each)).collect());
}

pub(crate) fn race_fenced_commit_keeps_tokens_increasing(b: Arc<dyn Backend>) {
    let p = warehouse(b).partition("d", "p");
    let threads = 8;
    let barrier = Barrier::new(threads);
    let outcomes: Vec<(FencingToken, Result<u64, PublishError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (p, barrier) = (p.clone(), &barrier);
                s.spawn(move || {
                    let t = p.allocate_token(&owner(i as u32)).unwrap();
                    barrier.wait();
                    (t, p.commit(commit(t)).map(|r| r.generation.get()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut generations = BTreeSet::new();
    for (t, outcome) in &outcomes {
        match outcome {
            Ok(g) => assert!(generations.insert(*g), "generation {g} committed twice"),
            Err(PublishError::Stale {
                mine, committed, ..
            }) => {
                assert_eq!(mine, t);
                assert!(committed > mine);
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    let k = generations.len() as u64;
    assert_eq!(generations, (1..=k).collect());
    let history = p.history().unwrap();
    assert!(history.windows(2).all(|w| w[0].token < w[1].token));
    let max = outcomes.iter().map(|(t, _)| *t).max().unwrap();
    assert_eq!(
        p.latest().unwrap().unwrap().token,
        max,
        "the newest token wins"
    );
}

/// A capability a backend claims is one it keeps: directories made before
/// any key and keys made durable when asked (a key that is not there
/// cannot be, and saying so is an error, never a quiet success);
/// incomplete uploads listed, and one already gone aborted without error.
/// A backend without them answers `None` and the rest of the contract is
/// all it owes.
pub(crate) fn capabilities_keep_their_promises(b: Arc<dyn Backend>) {
    if let Some(dirs) = b.durable() {
        dirs.prepare_dirs("c/p", &["log", "tokens"]).unwrap();
        assert_eq!(b.list("c/p").unwrap(), vec!["log", "tokens"]);
        assert!(b.put_if_absent("c/p/log/1", b"x").unwrap());
        dirs.make_durable(&["c/p/log/1".into(), "c/p/log".into()])
            .unwrap();
        assert!(dirs.make_durable(&["c/p/log/none".into()]).is_err());
        assert!(matches!(
            dirs.prepare_dirs("c/p", &["../x"]),
            Err(StoreError::InvalidKey { .. })
        ));
        assert!(b.list("c").unwrap() == vec!["p"]);
    }
    if let Some(multipart) = b.multipart() {
        assert_eq!(multipart.incomplete_uploads().unwrap(), Vec::new());
        multipart
            .abort_upload(&IncompleteUpload {
                key: "c/gone".into(),
                id: "no-such-upload".into(),
                initiated: jiff::Timestamp::now(),
            })
            .unwrap();
    }
}
