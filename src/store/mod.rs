//! The warehouse: where candidates are staged and partitions are published.
//!
//! Every coordination step is built on one storage primitive,
//! put-if-absent ([`Backend::put_if_absent`]): create a key only if it does
//! not exist. Nothing relies on a lock held by a live process, so several
//! engine processes sharing one warehouse stay correct, a crashed process
//! leaves nothing to clean up before others can go on, and an object store
//! with conditional PUT can implement the same trait.
//!
//! Backends ([`Backend`], the object API, held to one contract by
//! `tests/it/store_contract`; what only some have is a capability trait,
//! [`DurableDirectories`] or [`MultipartHygiene`]): the filesystem
//! ([`FsBackend`]), memory ([`MemoryBackend`]) and, with the `s3` feature,
//! S3 (`s3::S3Backend`). Typed stores over them: the partition's
//! tokens, claims, leases and commit log ([`PartitionStore`]), instance
//! markers ([`marks`]), certifications ([`certs`]), the last answers of
//! sensors ([`sensed`]) and run event logs
//! ([`events`]).
//!
//! Layout (docs/spec/layout.md documents it; see [`layout`]):
//!
//! ```text
//! <root>/<dataset>/<partition>/tokens/<token 20-digit>          who got which token
//! <root>/<dataset>/<partition>/attempts/<token 20-digit>/       data/ stdout.log stderr.log candidate.json
//! <root>/<dataset>/<partition>/log/<generation 20-digit>.json   commit records, from 1
//! <root>/<dataset>/<partition>/log/<generation>.published-<token>  written after that record (object stores)
//! <root>/<dataset>/<partition>/tokens/<token>.committed-<generation>  the same (local disk)
//! ```
//!
//! (What the markers are for, and how the fence holds when files go:
//! [`partition`].)
//!
//! One attempt's lifecycle:
//!
//! ```text
//!  allocate_token            prepare_attempt + task        make_durable         commit
//! +------------------+      +-------------------------+   +-----------+   +--------------------------+
//! | tokens/<t>       | ---> | attempts/<t>/data/...   |-->| audit,    |-->| latest = log/<g>, token u|
//! | put-if-absent at |      | private: nobody reads it|   | rename to |   | t <= u ? Stale (fenced)  |
//! | max+1, retry +1  |      | until a record names it |   | data-<t>, |   | put-if-absent log/<g+1>  |
//! +------------------+      +-------------------------+   | fsync all |   |  taken? reread, re-check |
//!                                                         +-----------+   +------------+-------------+
//!                                                                                       |
//!          readers: latest() = highest log/<g> -> visible_files() = its data_key()      |
//!          rollback: a newer record whose attempt_dir is an older attempt's   <---------+
//! ```
//!
//! Tokens are strictly increasing per partition and never reused, and a
//! record is only written if its token beats the latest record's, so tokens
//! strictly increase along the log: a slow attempt that wakes up after a
//! newer one has published can never overwrite it.

pub mod allocation;
pub mod backend;
pub mod certs;
pub mod delta;
pub mod epoch;
pub mod error;
pub mod events;
pub mod file_sum;
pub mod fs;
pub mod full;
pub mod holder;
mod key;
pub use key::{
    decode_partition, encode_partition, partition_problem, segment_problem, MAX_SEGMENT_BYTES,
};
pub mod layout;
pub mod leases;
pub mod log;
pub mod marks;
pub mod memory;
pub mod partition;
#[cfg(feature = "s3")]
pub mod s3;
pub mod sensed;
pub mod slots;
pub mod steering;
pub mod summary;
pub mod token;
pub mod user_file;
pub mod warehouse;

pub use allocation::{TokenOwner, TokenRecord};
pub use backend::{
    Backend, DurableDirectories, IncompleteUpload, MultipartHygiene, Object, ObjectMeta, Version,
};
pub use error::{chain, PublishError, StoreError};
pub use file_sum::{Depth, Drift, DriftKind, FileSum};
pub use fs::FsBackend;
pub use full::{is_disk_full, DiskFullPause};
pub use holder::Holder;
pub use log::{CommitKind, CommitRecord, NewCommit, FORMAT_VERSION};
pub use memory::MemoryBackend;
pub use partition::{Allocation, Downloaded, Look, PartitionStore};
pub use token::{FencingToken, Generation};
pub use warehouse::{Location, Warehouse};

/// How old a look of this process's at the store (a listing, or its own
/// commit) may be and still stand for a fresh one: a reader acting on it
/// acts on a snapshot as of that look, what a fresh read would give had
/// another engine's write landed that much later, which no reader can
/// tell apart: a pin of `down` on `up`'s look (`inputs`).
pub const LOOK_REUSE: std::time::Duration = std::time::Duration::from_secs(2);

/// The S3 endpoint of the environment: `AWS_ENDPOINT_URL_S3` over
/// `AWS_ENDPOINT_URL` over `AWS_ENDPOINT`; `None` for AWS itself. The S3
/// client is given exactly this endpoint and the staging directory is named
/// after it, so the two cannot disagree (`object_store` alone takes whichever
/// of the last two comes later in the environment).
pub fn s3_endpoint() -> Option<String> {
    ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
}
