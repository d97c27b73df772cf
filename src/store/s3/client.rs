//! The object_store client of `S3Backend::open_with`: configured from the
//! `AWS_*` environment, with how long it waits for a request and for how
//! long it retries set deliberately, and a checksum on every PUT.

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, Checksum};
use object_store::{BackoffConfig, ClientConfigKey, RetryConfig};

/// The longest one request may take, from connecting to the last byte of
/// its reply: a 16 MiB part needs 1.6 MB/s to fit.
pub(super) const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The longest a connection may take to open.
pub(super) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// A failed request (5xx, reset, a timeout of one safe to repeat) is
/// retried while less than RETRY_BUDGET has passed since the call's first
/// try; this many retries is only a backstop, more than the backoff below
/// fits in the budget, so the budget is what ends a burst of 503s (three
/// retries gave up after about 0.4 s of a 15 s budget).
pub(super) const MAX_RETRIES: usize = 40;

/// How long after a call's first try a retry may still start: with
/// MAX_BACKOFF and REQUEST_TIMEOUT, a call ends within 27 s, below the
/// default lease timeout of 30 s.
pub(super) const RETRY_BUDGET: std::time::Duration = std::time::Duration::from_secs(15);

/// The first wait before a retry; each next one is drawn between it and
/// twice the previous one (object_store's decorrelated jitter, so engines
/// refused together do not retry together), at most MAX_BACKOFF: about 3 s
/// of waits by the 6th retry, 15 s by the 14th.
pub(super) const FIRST_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);

/// The longest wait before one retry: short enough that a store back after
/// a burst is tried again within 2 s, and that the last wait ends soon
/// after RETRY_BUDGET.
pub(super) const MAX_BACKOFF: std::time::Duration = std::time::Duration::from_secs(2);

/// The retry policy of every object_store call (see the constants).
pub(super) fn retry_config() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: FIRST_BACKOFF,
            max_backoff: MAX_BACKOFF,
            base: 2.0,
        },
        max_retries: MAX_RETRIES,
        retry_timeout: RETRY_BUDGET,
    }
}

/// A duration as object_store's configuration parses it.
fn humantime_secs(d: std::time::Duration) -> String {
    format!("{}s", d.as_secs())
}

/// object_store panics on an endpoint that is not an absolute URL (an empty
/// `AWS_ENDPOINT=` from a script, a bare host name): refused here instead.
pub(super) fn check_endpoint_vars() -> Result<(), String> {
    for var in ["AWS_ENDPOINT", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"] {
        if let Ok(value) = std::env::var(var) {
            if !value.starts_with("http://") && !value.starts_with("https://") {
                return Err(format!(
                    "{var} is `{value}`, not an http:// or https:// URL (unset it for AWS itself)"
                ));
            }
        }
    }
    Ok(())
}

/// The client for `bucket`, from the `AWS_*` environment, with its timeouts
/// and retries set.
///
/// Every store call blocks an engine thread until the client gives
/// up, so how long that can take is set here, not left at
/// object_store's defaults (30 s a request, retries for up to three
/// minutes): a request that hangs fails after REQUEST_TIMEOUT, and
/// retries start only within RETRY_BUDGET (spread over it by a backoff
/// with jitter), so one call returns within about 27 s, below the default lease timeout (3 heartbeats of 10 s).
/// A stalled store then ends the run with an error naming it instead
/// of freezing it, and a heartbeat held up by it is known failed
/// before the lease looks expired. Timeouts and Ctrl-C never wait for
/// the store at all (exec::timer).
pub(super) fn builder(bucket: &str) -> AmazonS3Builder {
    AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
            humantime_secs(REQUEST_TIMEOUT),
        )
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
            humantime_secs(CONNECT_TIMEOUT),
        )
        .with_retry(retry_config())
        // Every PUT carries the SHA-256 of its body in
        // `x-amz-checksum-sha256`, which the store checks before it
        // stores the object: an upload that succeeds holds those bytes,
        // with no need to read it back (`put_file_checked`).
        .with_checksum_algorithm(Checksum::SHA256)
}

/// The bucket's URL as object_store addresses it, and the region.
pub(super) fn bucket_url(builder: &AmazonS3Builder, bucket: &str) -> (String, String) {
    let setting = |key: AmazonS3ConfigKey| builder.get_config_value(&key);
    let region = setting(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".to_owned());
    let virtual_hosted = setting(AmazonS3ConfigKey::VirtualHostedStyleRequest)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let url = match (setting(AmazonS3ConfigKey::Endpoint), virtual_hosted) {
        (Some(endpoint), true) => endpoint.trim_end_matches('/').to_owned(),
        (Some(endpoint), false) => format!("{}/{bucket}", endpoint.trim_end_matches('/')),
        (None, true) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
        (None, false) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
    };
    (url, region)
}
