//! The S3 [`Backend`], through the `object_store` crate: a warehouse at
//! `s3://bucket/prefix` on AWS S3 or anything that speaks its protocol with
//! conditional writes (MinIO, Ceph, R2, moto).
//!
//! - put-if-absent is a PUT with `If-None-Match: *`, a conditional replace a
//!   PUT with `If-Match: <etag>`; the version is the ETag.
//! - object_store retries a request after a 5xx or a timeout, so a create
//!   whose first try landed comes back `AlreadyExists` (412) from the retry,
//!   and a replace comes back `Precondition`. Either may be our own write:
//!   the backend rereads the key and calls it ours when the bytes it holds
//!   are the bytes it wrote (every record the store writes carries its
//!   writer's token, engine id or time, so two writers never write the same
//!   bytes by accident; and if they did, either one's is the same record).
//! - S3 has no conditional delete: delete is used only where the store's
//!   protocol never needs it to be conditional (gc, markers).
//! - The client is async and the engine is threaded: the backend owns a
//!   small tokio runtime and every call blocks on it, from any engine thread.
//!
//! Configuration is the standard `AWS_*` environment: `AWS_ENDPOINT_URL`,
//! `AWS_REGION` (or `AWS_DEFAULT_REGION`), `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, and `AWS_ALLOW_HTTP=true`
//! for a local server on plain http.

mod client;
mod wire;

use client::{bucket_url, builder, check_endpoint_vars, CONNECT_TIMEOUT, REQUEST_TIMEOUT};
use wire::{elements, encode, percent_decode, tag, Refused};

use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3ConfigKey;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, UpdateVersion};

use crate::store::backend::{
    Backend, DurableDirectories, IncompleteUpload, MultipartHygiene, Object, ObjectMeta, Version,
};
use crate::store::error::StoreError;
use crate::store::key::validate_key;

/// A [`Backend`] on an S3 bucket, under an optional key prefix.
pub struct S3Backend {
    store: Arc<dyn ObjectStore>,
    /// `prefix/` (or empty): prepended to every key.
    prefix: String,
    /// `s3://bucket/prefix`, for messages.
    url: String,
    runtime: tokio::runtime::Runtime,
    /// For the requests object_store does not make (incomplete multipart
    /// uploads); `None` for a backend over a store given by a test.
    raw: Option<RawClient>,
    /// Whether the client sends each PUT's SHA-256 for the store to check
    /// (the client built from the environment does; a store given by a test
    /// may not).
    checksummed: bool,
}

/// Signed requests to the bucket that object_store has no call for:
/// listing and aborting incomplete multipart uploads.
struct RawClient {
    /// `http(s)://host/bucket` or `https://bucket.host`, no trailing slash.
    bucket_url: String,
    region: String,
    credentials: object_store::aws::AwsCredentialProvider,
    http: reqwest::Client,
}

impl std::fmt::Debug for S3Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Backend")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// `s3://bucket/prefix` split into bucket and prefix (without slashes at
/// its ends); `None` if `url` is not an `s3://` URL with a bucket.
pub fn parse_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("s3://")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return None;
    }
    Some((bucket.to_owned(), prefix.trim_matches('/').to_owned()))
}

/// Installs the ring crypto provider for rustls, once per process (the
/// build has no other; without it building a client panics, even for http).
pub fn install_crypto_provider() {
    // Err = a provider is already installed: fine either way.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl S3Backend {
    /// A backend for `s3://bucket/prefix`, configured from the `AWS_*`
    /// environment. Lists the prefix once, so that a missing bucket, a wrong
    /// endpoint or bad credentials fail here, not later as "nothing there".
    pub fn open(url: &str) -> Result<S3Backend, StoreError> {
        S3Backend::open_with(url, &[])
    }

    /// [`S3Backend::open`] with `object_store` configuration keys on top of
    /// the environment (`aws_endpoint`, `aws_allow_http`, ...).
    pub fn open_with(url: &str, config: &[(&str, &str)]) -> Result<S3Backend, StoreError> {
        let remote = |message: String| StoreError::Remote {
            key: url.to_owned(),
            source: message.into(),
        };
        let (bucket, prefix) =
            parse_url(url).ok_or_else(|| remote("not an s3://bucket/prefix URL".to_owned()))?;
        if !prefix.is_empty() {
            validate_key(&prefix)?;
        }
        check_endpoint_vars().map_err(remote)?;
        install_crypto_provider();
        let mut builder = builder(&bucket);
        if let Some(endpoint) = super::s3_endpoint() {
            builder = builder.with_endpoint(endpoint);
        }
        for (key, value) in config {
            let key = key
                .parse::<AmazonS3ConfigKey>()
                .map_err(|e| StoreError::Remote {
                    key: url.to_owned(),
                    source: Box::new(e),
                })?;
            builder = builder.with_config(key, *value);
        }
        let (bucket_url, region) = bucket_url(&builder, &bucket);
        let store = builder.build().map_err(|e| StoreError::Remote {
            key: url.to_owned(),
            source: Box::new(e),
        })?;
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| StoreError::Remote {
                key: url.to_owned(),
                source: Box::new(e),
            })?;
        let raw = RawClient {
            bucket_url,
            region,
            credentials: Arc::clone(store.credentials()),
            http,
        };
        let mut backend = S3Backend::with_store(Arc::new(store), &prefix, url)?;
        backend.raw = Some(raw);
        backend.checksummed = true;
        let dir = backend.dir("")?;
        backend
            .runtime
            .block_on(backend.store.list_with_delimiter(dir.as_ref()))
            .map_err(|e| StoreError::Remote {
                key: url.to_owned(),
                source: Box::new(e),
            })?;
        Ok(backend)
    }

    /// A backend over any object store (tests wrap one to inject faults).
    pub fn with_store(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        url: &str,
    ) -> Result<S3Backend, StoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("weir-s3")
            .enable_all()
            .build()
            .map_err(StoreError::io(url))?;
        Ok(S3Backend {
            store,
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            },
            url: url.to_owned(),
            runtime,
            raw: None,
            checksummed: false,
        })
    }

    /// The `s3://` URL it was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn path(&self, key: &str) -> Result<ObjectPath, StoreError> {
        validate_key(key)?;
        Ok(ObjectPath::from(format!("{}{key}", self.prefix)))
    }

    /// The path of a prefix "directory" (`None` = the whole warehouse).
    fn dir(&self, prefix: &str) -> Result<Option<ObjectPath>, StoreError> {
        if prefix.is_empty() {
            let root = self.prefix.trim_end_matches('/');
            return Ok((!root.is_empty()).then(|| ObjectPath::from(root)));
        }
        self.path(prefix).map(Some)
    }

    /// Our key for an object's location; `None` outside our prefix.
    fn key_of(&self, location: &ObjectPath) -> Option<String> {
        let decoded = percent_decode(location.as_ref())?;
        decoded.strip_prefix(&self.prefix).map(str::to_owned)
    }

    fn meta(&self, meta: &object_store::ObjectMeta) -> Option<ObjectMeta> {
        let at = meta.last_modified;
        Some(ObjectMeta {
            key: self.key_of(&meta.location)?,
            size: meta.size,
            version: Version::new(meta.e_tag.clone().unwrap_or_default()),
            last_modified: jiff::Timestamp::new(
                at.timestamp(),
                i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
            )
            .unwrap_or_default(),
        })
    }

    fn error(&self, key: &str, e: object_store::Error) -> StoreError {
        StoreError::Remote {
            key: format!("{}{key}", self.url_prefix()),
            source: Box::new(e),
        }
    }

    fn url_prefix(&self) -> String {
        format!("{}/", self.url.trim_end_matches('/'))
    }

    /// Whether `key` now holds exactly `bytes`: after a create or replace
    /// refused by its own retry, that means the first try landed.
    fn holds(&self, key: &str, bytes: &[u8]) -> Result<Option<Version>, StoreError> {
        Ok(self
            .get_object(key)?
            .filter(|o| o.bytes == bytes)
            .map(|o| o.meta.version))
    }
}

impl S3Backend {
    /// Sends a signed request for `url` (already percent-encoded) and
    /// returns the reply's body; a reply other than 2xx is an error
    /// naming the method, the URL and the HTTP status.
    async fn signed(
        raw: &RawClient,
        method: reqwest::Method,
        url: &str,
    ) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
        use object_store::client::{HttpRequest, HttpRequestBody};
        let credential = raw.credentials.get_credential().await?;
        let mut request = HttpRequest::new(HttpRequestBody::empty());
        *request.method_mut() = method.clone();
        *request.uri_mut() = url.parse()?;
        object_store::aws::AwsAuthorizer::new(&credential, "s3", &raw.region)
            .try_authorize(&mut request, None)?;
        let reply = raw
            .http
            .request(method.clone(), url)
            .headers(request.headers().clone())
            .send()
            .await?;
        let status = reply.status();
        let body = reply.text().await?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(Box::new(Refused {
                request: format!("{method} {url}"),
                status: status.to_string(),
                code: tag(&body, "Code").unwrap_or_default(),
            }))
        }
    }

    /// [`S3Backend::signed`] under the store's retry policy: a 5xx or a
    /// request that never got a reply is sent again after a doubling pause
    /// while less than `RETRY_BUDGET` has passed (both requests it serves,
    /// listing and aborting uploads, are safe to repeat).
    fn signed_retried(
        &self,
        raw: &RawClient,
        method: &reqwest::Method,
        url: &str,
    ) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
        let started = std::time::Instant::now();
        for n in 0.. {
            let reply = self
                .runtime
                .block_on(S3Backend::signed(raw, method.clone(), url));
            let again = match &reply {
                Err(e) => match e.downcast_ref::<Refused>() {
                    Some(refused) => refused.status.starts_with('5'),
                    None => e.downcast_ref::<reqwest::Error>().is_some(),
                },
                Ok(_) => false,
            };
            if !again || started.elapsed() >= client::RETRY_BUDGET {
                return reply;
            }
            std::thread::sleep(crate::clock::doubling(
                client::FIRST_BACKOFF,
                client::MAX_BACKOFF,
                n,
            ));
        }
        unreachable!("the loop returns")
    }

    fn raw(&self) -> Result<&RawClient, StoreError> {
        self.raw.as_ref().ok_or_else(|| StoreError::Remote {
            key: self.url.clone(),
            source: "this S3 backend was built over a given store: it cannot list uploads".into(),
        })
    }
}

impl Backend for S3Backend {
    fn request_timeout(&self) -> Option<std::time::Duration> {
        // The client built from the environment (the one with `raw`) is
        // the one given REQUEST_TIMEOUT; a store given by a test is not.
        self.raw.as_ref().map(|_| REQUEST_TIMEOUT)
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        let path = self.path(key)?;
        let put = self.store.put_opts(
            &path,
            bytes.to_vec().into(),
            PutOptions::from(PutMode::Create),
        );
        match self.runtime.block_on(put) {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(self.holds(key, bytes)?.is_some()),
            Err(e) => Err(self.error(key, e)),
        }
    }

    fn put_if_version_matches(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<Option<Version>, StoreError> {
        let path = self.path(key)?;
        let mode = PutMode::Update(UpdateVersion {
            e_tag: Some(expected.as_str().to_owned()),
            version: None,
        });
        let put = self
            .store
            .put_opts(&path, bytes.to_vec().into(), PutOptions::from(mode));
        match self.runtime.block_on(put) {
            Ok(done) => Ok(Some(Version::new(done.e_tag.unwrap_or_default()))),
            Err(
                object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. },
            ) => {
                // Our own first try may have landed before a retry was
                // refused; else someone else changed (or deleted) it.
                self.holds(key, bytes)
            }
            Err(e) => Err(self.error(key, e)),
        }
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.path(key)?;
        let put = self.store.put(&path, bytes.to_vec().into());
        self.runtime
            .block_on(put)
            .map(drop)
            .map_err(|e| self.error(key, e))
    }

    fn get_object(&self, key: &str) -> Result<Option<Object>, StoreError> {
        let path = self.path(key)?;
        let read = async {
            let got = self.store.get(&path).await?;
            let meta = got.meta.clone();
            let bytes = got.bytes().await?;
            Ok::<_, object_store::Error>((meta, bytes))
        };
        match self.runtime.block_on(read) {
            Ok((meta, bytes)) => Ok(self.meta(&meta).map(|meta| Object {
                bytes: bytes.to_vec(),
                meta,
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(key, e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let dir = self.dir(prefix)?;
        let listed = self
            .runtime
            .block_on(self.store.list_with_delimiter(dir.as_ref()))
            .map_err(|e| self.error(prefix, e))?;
        let mut names: Vec<String> = listed
            .common_prefixes
            .iter()
            .chain(listed.objects.iter().map(|o| &o.location))
            .filter_map(|p| self.key_of(p))
            .filter_map(|k| k.rsplit('/').next().map(str::to_owned))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<String>, StoreError> {
        if after.is_empty() {
            return self.list(prefix);
        }
        // A flat listing from `after` on: the names directly under `prefix`.
        let dir = self.dir(prefix)?;
        let offset = self.path(&format!("{prefix}/{after}"))?;
        let listed: Vec<object_store::ObjectMeta> = self
            .runtime
            .block_on(
                self.store
                    .list_with_offset(dir.as_ref(), &offset)
                    .try_collect(),
            )
            .map_err(|e| self.error(prefix, e))?;
        let base = format!("{prefix}/");
        let mut names: Vec<String> = listed
            .iter()
            .filter_map(|m| self.key_of(&m.location))
            .filter_map(|k| {
                k.strip_prefix(&base)
                    .map(|rest| rest.split('/').next().unwrap_or(rest).to_owned())
            })
            .filter(|n| n.as_str() > after)
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn list_first_page(&self, prefix: &str) -> Result<Option<Vec<String>>, StoreError> {
        // The stream asks for its next page only when polled past this
        // one's last key: taking one page's worth never costs a second
        // request, and a full page may have a next one.
        let dir = self.dir(prefix)?;
        let listed: Vec<object_store::ObjectMeta> = self
            .runtime
            .block_on(self.store.list(dir.as_ref()).take(LIST_PAGE).try_collect())
            .map_err(|e| self.error(prefix, e))?;
        if listed.len() >= LIST_PAGE {
            return Ok(None);
        }
        let base = format!("{prefix}/");
        let mut names: Vec<String> = listed
            .iter()
            .filter_map(|m| self.key_of(&m.location))
            .filter_map(|k| {
                k.strip_prefix(&base)
                    .map(|rest| rest.split('/').next().unwrap_or(rest).to_owned())
            })
            .collect();
        names.sort();
        names.dedup();
        Ok(Some(names))
    }

    fn list_keys(
        &self,
        prefix: &str,
        after: &str,
        max: usize,
    ) -> Result<(Vec<String>, bool), StoreError> {
        let dir = self.dir(prefix)?;
        let listing = if after.is_empty() {
            self.store.list(dir.as_ref())
        } else {
            let offset = self.path(&format!("{prefix}/{after}"))?;
            self.store.list_with_offset(dir.as_ref(), &offset)
        };
        let listed: Vec<object_store::ObjectMeta> = self
            .runtime
            .block_on(listing.take(max).try_collect())
            .map_err(|e| self.error(prefix, e))?;
        let whole = listed.len() < max;
        let mut keys: Vec<String> = listed
            .iter()
            .filter_map(|m| self.meta(m))
            .map(|m| m.key)
            .collect();
        keys.sort();
        Ok((keys, whole))
    }

    fn list_objects(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        let dir = self.dir(prefix)?;
        let listed: Vec<object_store::ObjectMeta> = self
            .runtime
            .block_on(self.store.list(dir.as_ref()).try_collect())
            .map_err(|e| self.error(prefix, e))?;
        let mut out: Vec<ObjectMeta> = listed.iter().filter_map(|m| self.meta(m)).collect();
        // A listing covers what is under `prefix/`; the key itself too.
        if !prefix.is_empty() && !out.iter().any(|m| m.key == prefix) {
            let path = self.path(prefix)?;
            match self.runtime.block_on(self.store.head(&path)) {
                Ok(meta) => out.extend(self.meta(&meta)),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.error(prefix, e)),
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path(key)?;
        match self.runtime.block_on(self.store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(key, e)),
        }
    }

    fn delete_keys(&self, keys: &[String]) -> Result<(), StoreError> {
        let paths = keys
            .iter()
            .map(|k| self.path(k))
            .collect::<Result<Vec<_>, _>>()?;
        // object_store sends them as DeleteObjects batches.
        let stream = futures_util::stream::iter(paths.into_iter().map(Ok)).boxed();
        match self
            .runtime
            .block_on(self.store.delete_stream(stream).try_collect::<Vec<_>>())
        {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(keys.first().map_or("", String::as_str), e)),
        }
    }

    fn delete_known(&self, prefix: &str, keys: &[String]) -> Result<(), StoreError> {
        validate_key(prefix)?;
        self.delete_keys(keys)
    }

    fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        validate_key(prefix)?;
        for meta in self.list_objects(prefix)? {
            self.delete(&meta.key)?;
        }
        Ok(())
    }

    fn put_file(&self, key: &str, local: &std::path::Path) -> Result<(), StoreError> {
        let size = std::fs::metadata(local)
            .map_err(StoreError::io(local))?
            .len();
        // One request for a small file; a multipart upload in parts of
        // PART bytes (a few in flight) for a large one, never all in memory.
        if size <= PART as u64 {
            let bytes = std::fs::read(local).map_err(StoreError::io(local))?;
            return self.put(key, &bytes);
        }
        let path = self.path(key)?;
        let mut file = std::fs::File::open(local).map_err(StoreError::io(local))?;
        let upload = async {
            let mut upload = self
                .store
                .put_multipart(&path)
                .await
                .map_err(Failed::Store)?;
            let done = async {
                let mut inflight = tokio::task::JoinSet::new();
                loop {
                    let mut buf = vec![0; PART];
                    let n = read_full(&mut file, &mut buf)?;
                    if n == 0 {
                        break;
                    }
                    buf.truncate(n);
                    while inflight.len() >= PARTS_IN_FLIGHT {
                        joined(inflight.join_next().await)?;
                    }
                    inflight.spawn(upload.put_part(buf.into()));
                }
                while let Some(part) = inflight.join_next().await {
                    joined(Some(part))?;
                }
                upload.complete().await.map(drop).map_err(Failed::Store)
            }
            .await;
            if done.is_err() {
                // Its stored parts are kept (and billed) until the upload is
                // aborted; an abort that fails too is left to gc.
                let _ = upload.abort().await;
            }
            done
        };
        match self.runtime.block_on(upload) {
            Ok(()) => Ok(()),
            Err(Failed::Read(e)) => Err(StoreError::io(local)(e)),
            Err(Failed::Store(e)) => Err(self.error(key, e)),
        }
    }

    fn put_file_checked(
        &self,
        key: &str,
        local: &std::path::Path,
        sum: &crate::store::FileSum,
    ) -> Result<bool, StoreError> {
        let size = std::fs::metadata(local)
            .map_err(StoreError::io(local))?
            .len();
        if !self.checksummed || size > PART as u64 {
            // A multipart upload's checksum is per part: read it back.
            self.put_file(key, local)?;
            return Ok(false);
        }
        let bytes = std::fs::read(local).map_err(StoreError::io(local))?;
        // The bytes sent are the bytes audited, or nothing is sent.
        let (len, sha256) = crate::store::file_sum::hash_reader(&bytes[..], |_| Ok(()))
            .map_err(StoreError::io(local))?;
        if len != sum.size || sha256 != sum.sha256 {
            return Err(StoreError::Corrupt {
                key: key.to_owned(),
                message: format!(
                    "{} changed since its audit: {len} bytes with SHA-256 {sha256}, audited {} bytes with SHA-256 {}",
                    local.display(),
                    sum.size,
                    sum.sha256
                ),
            });
        }
        self.put(key, &bytes)?;
        Ok(true)
    }

    fn get_file(&self, key: &str, local: &std::path::Path) -> Result<bool, StoreError> {
        use std::io::Write;
        let path = self.path(key)?;
        let mut file = std::fs::File::create(local).map_err(StoreError::io(local))?;
        let download = async {
            let mut stream = self.store.get(&path).await?.into_stream();
            while let Some(chunk) = stream.try_next().await? {
                if let Err(e) = file.write_all(&chunk) {
                    return Ok(Err(e));
                }
            }
            Ok(Ok(()))
        };
        match self.runtime.block_on(download) {
            Ok(Ok(())) => Ok(true),
            Ok(Err(e)) => Err(StoreError::io(local)(e)),
            Err(object_store::Error::NotFound { .. }) => {
                let _ = std::fs::remove_file(local);
                Ok(false)
            }
            Err(e) => Err(self.error(key, e)),
        }
    }

    fn durable(&self) -> Option<&dyn DurableDirectories> {
        None
    }

    fn multipart(&self) -> Option<&dyn MultipartHygiene> {
        Some(self)
    }
}

/// Large files go up in parts (`put_file`), which an engine lost mid-way
/// leaves behind.
impl MultipartHygiene for S3Backend {
    fn incomplete_uploads(&self) -> Result<Vec<IncompleteUpload>, StoreError> {
        let raw = self.raw()?;
        let mut out = Vec::new();
        let mut markers: Option<(String, String)> = None;
        loop {
            let mut url = format!(
                "{}?uploads=&prefix={}",
                raw.bucket_url,
                encode(&self.prefix, false)
            );
            if let Some((key, id)) = &markers {
                url.push_str(&format!(
                    "&key-marker={}&upload-id-marker={}",
                    encode(key, false),
                    encode(id, false)
                ));
            }
            let body = self
                .signed_retried(raw, &reqwest::Method::GET, &url)
                .map_err(|source| StoreError::Remote {
                    key: format!("{} (incomplete multipart uploads)", self.url_prefix()),
                    source,
                })?;
            for upload in elements(&body, "Upload") {
                let (Some(stored), Some(id), Some(initiated)) = (
                    tag(upload, "Key"),
                    tag(upload, "UploadId"),
                    tag(upload, "Initiated"),
                ) else {
                    continue;
                };
                // The stored key is object_store's path, percent-encoded.
                let Some(key) = percent_decode(&stored)
                    .and_then(|k| k.strip_prefix(&self.prefix).map(str::to_owned))
                else {
                    continue;
                };
                let Ok(initiated) = initiated.parse::<jiff::Timestamp>() else {
                    continue;
                };
                out.push(IncompleteUpload { key, id, initiated });
            }
            let truncated = tag(&body, "IsTruncated").is_some_and(|t| t == "true");
            match (
                tag(&body, "NextKeyMarker"),
                tag(&body, "NextUploadIdMarker"),
            ) {
                (Some(key), Some(id)) if truncated => markers = Some((key, id)),
                _ => break,
            }
        }
        Ok(out)
    }

    fn abort_upload(&self, upload: &IncompleteUpload) -> Result<(), StoreError> {
        let raw = self.raw()?;
        let path = self.path(&upload.key)?;
        let url = format!(
            "{}/{}?uploadId={}",
            raw.bucket_url,
            encode(path.as_ref(), true),
            encode(&upload.id, false)
        );
        match self.signed_retried(raw, &reqwest::Method::DELETE, &url) {
            Ok(_) => Ok(()),
            // Completed or aborted meanwhile: nothing left to abort.
            Err(e)
                if e.downcast_ref::<Refused>()
                    .is_some_and(|r| r.code == "NoSuchUpload") =>
            {
                Ok(())
            }
            Err(source) => Err(StoreError::Remote {
                key: format!("{}{} (upload {})", self.url_prefix(), upload.key, upload.id),
                source,
            }),
        }
    }
}

/// The part size of a multipart upload (S3's minimum is 5 MiB).
const PART: usize = 16 << 20;

/// Keys in one page of S3's ListObjectsV2 (its default and maximum).
const LIST_PAGE: usize = 1000;

/// Parts of one upload sent at once.
const PARTS_IN_FLIGHT: usize = 4;

/// Why a multipart upload stopped: the local file, or the store.
enum Failed {
    Read(std::io::Error),
    Store(object_store::Error),
}

impl From<std::io::Error> for Failed {
    fn from(e: std::io::Error) -> Failed {
        Failed::Read(e)
    }
}

/// Reads until `buf` is full or the file ends; how many bytes were read.
fn read_full(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The outcome of one part's task.
fn joined(
    part: Option<Result<object_store::Result<()>, tokio::task::JoinError>>,
) -> Result<(), Failed> {
    match part {
        None | Some(Ok(Ok(()))) => Ok(()),
        Some(Ok(Err(e))) => Err(Failed::Store(e)),
        Some(Err(e)) => Err(Failed::Store(object_store::Error::Generic {
            store: "S3",
            source: Box::new(e),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::wire::unescape;
    use super::*;

    #[test]
    fn urls_split_into_bucket_and_prefix() {
        assert_eq!(parse_url("s3://b"), Some(("b".into(), String::new())));
        assert_eq!(parse_url("s3://b/"), Some(("b".into(), String::new())));
        assert_eq!(parse_url("s3://b/x/y/"), Some(("b".into(), "x/y".into())));
        assert_eq!(parse_url("s3:///x"), None);
        assert_eq!(parse_url("/tmp/wh"), None);
    }

    // What the upload listing is read with.
    #[test]
    fn list_uploads_reply_is_read_and_keys_encoded() {
        let xml = "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>\
            <NextKeyMarker>wh/a&amp;b</NextKeyMarker>\
            <Upload><Key>wh/d/2026%257Ceu/x&lt;1&gt;</Key><UploadId>u1</UploadId>\
            <Initiated>2026-12-02T04:00:00.000Z</Initiated></Upload>\
            <Upload><Key>wh/e&#x41;&#66;</Key><UploadId>u2</UploadId></Upload>\
            </ListMultipartUploadsResult>";
        let uploads = elements(xml, "Upload");
        assert_eq!(uploads.len(), 2);
        assert_eq!(
            tag(uploads[0], "Key").as_deref(),
            Some("wh/d/2026%257Ceu/x<1>")
        );
        assert_eq!(tag(uploads[1], "Key").as_deref(), Some("wh/eAB"));
        assert_eq!(tag(uploads[1], "Initiated"), None);
        assert_eq!(tag(xml, "NextKeyMarker").as_deref(), Some("wh/a&b"));
        assert_eq!(tag(xml, "IsTruncated").as_deref(), Some("true"));
        assert_eq!(unescape("a &bogus; & b"), "a &bogus; & b");
        assert_eq!(encode("wh/d/2026%7Ceu x", true), "wh/d/2026%257Ceu%20x");
        assert_eq!(encode("wh/", false), "wh%2F");
    }

    #[test]
    fn paths_decode_back_to_keys() {
        let encoded = ObjectPath::from("wh/d/2026%7Ceu/log");
        assert_eq!(encoded.as_ref(), "wh/d/2026%257Ceu/log");
        assert_eq!(
            percent_decode(encoded.as_ref()).as_deref(),
            Some("wh/d/2026%7Ceu/log")
        );
        assert_eq!(percent_decode("a%2"), None);
        assert_eq!(percent_decode("a%zz"), None);
        assert_eq!(percent_decode("a%2%41"), None);
        assert_eq!(percent_decode("%C3%A9t%C3%A9").as_deref(), Some("été"));
        assert_eq!(percent_decode("%FF"), None);
    }
}
