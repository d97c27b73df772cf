//! Who may read the console: the token, checked on every request, or
//! without one a loopback `Host`.

use axum::http::{header, HeaderMap, HeaderValue, Uri};
use sha2::{Digest, Sha256};

/// The cookie a `?token=` visit sets, so the page's links and its refresh
/// need not carry the token.
pub(super) const COOKIE: &str = "weir_console_token";

/// The console's token, kept as its SHA-256: presented tokens are hashed
/// and compared in constant time, so neither a wrong length nor a wrong
/// prefix answers faster.
pub(super) struct Token {
    digest: [u8; 32],
}

/// How a request proved it may read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Granted {
    /// No token configured, loopback bind, loopback Host.
    Loopback,
    /// The token came in the header or the cookie.
    Presented,
    /// The token came as `?token=`: the response sets the cookie.
    Query(String),
}

impl Token {
    pub(super) fn new(token: &str) -> Token {
        Token {
            digest: Sha256::digest(token.as_bytes()).into(),
        }
    }

    fn matches(&self, presented: &str) -> bool {
        let other: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        // No early exit: every byte is compared whatever the first differs.
        self.digest
            .iter()
            .zip(other.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// Whether the request may read, and how; `None` is a refusal.
pub(super) fn check(token: Option<&Token>, headers: &HeaderMap, uri: &Uri) -> Option<Granted> {
    let Some(token) = token else {
        return loopback_host(headers).then_some(Granted::Loopback);
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if bearer.is_some_and(|b| token.matches(b)) {
        return Some(Granted::Presented);
    }
    if let Some(q) = query_token(uri) {
        if token.matches(&q) {
            return Some(Granted::Query(q));
        }
    }
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned());
    cookie
        .filter(|c| token.matches(c))
        .map(|_| Granted::Presented)
}

/// The `token` query parameter, percent-decoded.
fn query_token(uri: &Uri) -> Option<String> {
    let axum::extract::Query(pairs) =
        axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri).ok()?;
    pairs
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
}

/// A `Host` that names this machine's loopback: `localhost`, `127.x.y.z`
/// or `[::1]`, with any port. Another name reaching a loopback-only
/// console was pointed at it by someone else's DNS.
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The `Set-Cookie` value that keeps a `?token=` visit signed in.
pub(super) fn cookie(token: &str) -> Option<HeaderValue> {
    // A token that is not a cookie value (spaces, semicolons) is simply
    // not remembered: the link with `?token=` still works.
    if !token
        .bytes()
        .all(|b| b.is_ascii_graphic() && !matches!(b, b';' | b',' | b'"' | b'\\'))
    {
        return None;
    }
    HeaderValue::from_str(&format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    ))
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_token_is_required_in_one_of_three_places() {
        let t = Token::new("s3cret");
        let uri: Uri = "/".parse().unwrap();
        let host = (header::HOST, "127.0.0.1:8080");
        assert_eq!(
            check(Some(&t), &headers(std::slice::from_ref(&host)), &uri),
            None
        );
        assert_eq!(
            check(
                Some(&t),
                &headers(&[host.clone(), (header::AUTHORIZATION, "Bearer s3cret")]),
                &uri
            ),
            Some(Granted::Presented)
        );
        assert_eq!(
            check(
                Some(&t),
                &headers(&[host.clone(), (header::AUTHORIZATION, "Bearer s3cre")]),
                &uri
            ),
            None
        );
        let q: Uri = "/grid?task=a&token=s3cret".parse().unwrap();
        assert_eq!(
            check(Some(&t), &headers(std::slice::from_ref(&host)), &q),
            Some(Granted::Query("s3cret".into()))
        );
        assert_eq!(
            check(
                Some(&t),
                &headers(&[host, (header::COOKIE, "a=b; weir_console_token=s3cret")]),
                &uri
            ),
            Some(Granted::Presented)
        );
    }

    #[test]
    fn without_a_token_only_loopback_names_are_served() {
        let uri: Uri = "/".parse().unwrap();
        for ok in ["127.0.0.1:8080", "localhost:1", "[::1]:80", "127.3.4.5"] {
            assert_eq!(
                check(None, &headers(&[(header::HOST, ok)]), &uri),
                Some(Granted::Loopback),
                "{ok}"
            );
        }
        for bad in ["evil.example:8080", "10.0.0.1:8080", "[fe80::1]:80"] {
            assert_eq!(check(None, &headers(&[(header::HOST, bad)]), &uri), None);
        }
        assert_eq!(check(None, &HeaderMap::new(), &uri), None);
    }
}
