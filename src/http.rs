//! The one HTTP client for everything weir sends over the network itself
//! (notifications, OpenLineage): reqwest over rustls (the client the S3
//! backend already links), with proxies from `HTTPS_PROXY`/`HTTP_PROXY`/
//! `NO_PROXY`, the platform's trusted roots, and bounded connect and
//! request timeouts. One client per process: connections are pooled.
//!
//! It follows no redirect: a redirect would carry the target's secret
//! headers to whatever host and port the answer names (and turn a POST
//! into a body-less GET on a 302/303). A 3xx is a failed delivery naming
//! its `Location`; the notification stays pending.
//!
//! Built only with the `http` feature (part of the default `s3`); without
//! it a manifest naming a URL is refused at validation, and [`post_json`]
//! says why if called anyway.

use std::path::Path;
use std::time::Duration;

use crate::manifest::HttpEndpoint;
use crate::secrets::{read_value, Secrets};

/// Connect timeout of one request.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Whole-request timeout (connect, send, status line).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// An endpoint with its header values read: ready to send to, and a
/// redactor that keeps those values out of every message.
pub struct ResolvedEndpoint {
    /// The URL.
    pub url: String,
    /// Header names and values (secrets included).
    pub headers: Vec<(String, String)>,
    /// Replaces every secret header value in a text.
    pub secrets: Secrets,
}

impl std::fmt::Debug for ResolvedEndpoint {
    // Never the header values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedEndpoint")
            .field("url", &redact_url(&self.url))
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Reads `endpoint`'s header values (`env:`/`file:` relative to `dir`).
/// The error names the header and its reference, never a value.
pub fn resolve(endpoint: &HttpEndpoint, dir: &Path) -> Result<ResolvedEndpoint, HeaderError> {
    let mut headers = Vec::new();
    let mut secrets = Vec::new();
    for (name, value) in &endpoint.headers {
        let (text, secret) = read_value(value, dir).map_err(|why| HeaderError {
            header: name.clone(),
            why,
        })?;
        if secret {
            secrets.push(text.clone());
        }
        headers.push((name.clone(), text));
    }
    Ok(ResolvedEndpoint {
        url: endpoint.url.clone(),
        headers,
        secrets: Secrets::new(secrets),
    })
}

/// A header of an endpoint whose value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("header `{header}`: {why}")]
pub struct HeaderError {
    /// The header's name.
    pub header: String,
    /// Why its reference could not be read.
    pub why: crate::secrets::ReferenceError,
}

/// POSTs `body` as `application/json` with `headers`; Ok on a 2xx status.
/// The error names the URL redacted (no userinfo, no query values) and
/// never a header value.
pub fn post_json(endpoint: &ResolvedEndpoint, body: &str) -> Result<(), String> {
    let shown = redact_url(&endpoint.url);
    send(endpoint, body)
        .map_err(|e| endpoint.secrets.redact(&redact_url_in(&e)))
        .map_err(|e| format!("{shown}: {e}"))
}

#[cfg(feature = "http")]
fn client() -> Result<&'static reqwest::blocking::Client, String> {
    static CLIENT: std::sync::OnceLock<Result<reqwest::blocking::Client, String>> =
        std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // The build has no other provider; without one building panics.
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::blocking::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(REQUEST_TIMEOUT)
                .user_agent(concat!("weir/", env!("CARGO_PKG_VERSION")))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {}", chain(&e)))
        })
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(feature = "http")]
fn send(endpoint: &ResolvedEndpoint, body: &str) -> Result<(), String> {
    let mut request = client()?
        .post(&endpoint.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    for (name, value) in &endpoint.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    // The URL is named by the caller, redacted; reqwest's own text has it whole.
    let response = request
        .body(body.to_owned())
        .send()
        .map_err(|e| chain(&e.without_url()))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else if status.is_redirection() {
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned());
        Err(match location {
            Some(to) => format!(
                "HTTP {}: redirected to {}, which is not followed (point the target at the final URL)",
                status.as_u16(),
                redact_url(&to)
            ),
            None => format!("HTTP {}: a redirect, which is not followed", status.as_u16()),
        })
    } else {
        Err(format!("HTTP {}", status.as_u16()))
    }
}

#[cfg(not(feature = "http"))]
fn send(_: &ResolvedEndpoint, _: &str) -> Result<(), String> {
    Err("this weir was built without the `http` feature: it cannot send to URLs".to_owned())
}

/// An error and its causes, "a: b: c" (reqwest's own text is only the outermost).
#[cfg(feature = "http")]
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// `url` fit for a message: its userinfo (`user:pass@`) and every query
/// value (`?api_key=…`) replaced by `***`; anything without `://` as it is.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_string(),
    };
    let (tail, fragment) = match tail.split_once('#') {
        Some((t, f)) => (t, Some(f)),
        None => (tail, None),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) => format!("{k}=***"),
                    None if pair.is_empty() => String::new(),
                    None => "***".to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    let fragment = fragment.map(|_| "#***").unwrap_or_default();
    format!("{scheme}://{authority}{tail}{fragment}")
}

/// `text` with every `http://` and `https://` URL in it redacted ([`redact_url`]).
pub fn redact_url_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let next = |t: &str| {
        [t.find("http://"), t.find("https://")]
            .into_iter()
            .flatten()
            .min()
    };
    while let Some(at) = next(rest) {
        out.push_str(&rest[..at]);
        let url = &rest[at..];
        let end = url
            .find(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | ')' | '>'))
            .unwrap_or(url.len());
        // Punctuation after a URL in a sentence is the sentence's.
        let end = url[..end].trim_end_matches([':', ',', '.', ';']).len();
        out.push_str(&redact_url(&url[..end]));
        rest = &url[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Credentials in a lineage URL never reach a message
    #[test]
    fn urls_lose_userinfo_and_query_values() {
        assert_eq!(
            redact_url("http://alice:s3cret@collector:5000/api/v1/lineage?api_key=k3y&x=1#frag"),
            "http://***@collector:5000/api/v1/lineage?api_key=***&x=***#***"
        );
        assert_eq!(
            redact_url("http://collector/api?token"),
            "http://collector/api?***"
        );
        assert_eq!(redact_url("http://h:1/p"), "http://h:1/p");
        assert_eq!(redact_url("/tmp/lineage.jsonl"), "/tmp/lineage.jsonl");
        assert_eq!(
            redact_url_in("not delivered to http://u:p@h/x?k=v: refused"),
            "not delivered to http://***@h/x?k=***: refused"
        );
    }
}
