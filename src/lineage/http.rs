//! One HTTP/1.1 POST of a JSON body over a std `TcpStream`, `http://` only.
//!
//! Hand-written rather than a client crate: lineage needs exactly one
//! request shape to a collector (Marquez, DataHub, OpenMetadata, or a local
//! relay), no TLS, redirects, cookies or pooling, and bounded timeouts on
//! connect, write and read. That is this file; a client crate would add a
//! dependency tree to the engine for it.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Connect, write and read timeout of one try.
const TIMEOUT: Duration = Duration::from_secs(2);

/// POSTs `body` as `application/json` to `url` (`http://[user:pass@]host[:port]/path`);
/// Ok on a 2xx status. Userinfo is sent as HTTP Basic authentication, never
/// in a message: errors name the host only.
pub(super) fn post_json(url: &str, body: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("`{}` is not an http:// URL", super::redact_url(url)))?;
    // The authority ends at the first `/`, `?` or `#`.
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = (&rest[..end], &rest[end..]);
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('/') => p.to_string(),
        p => format!("/{p}"),
    };
    // Without its fragment: that is the client's, never sent.
    let path = path.split('#').next().unwrap_or("/");
    let (userinfo, authority) = match authority.rsplit_once('@') {
        Some((userinfo, host)) => (Some(userinfo), host),
        None => (None, authority),
    };
    let authorization = userinfo
        .map(|u| format!("Authorization: Basic {}\r\n", base64(&percent_decode(u))))
        .unwrap_or_default();
    let with_port = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let address = with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{authority}`: {e}"))?
        .next()
        .ok_or_else(|| format!("`{authority}` has no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, TIMEOUT)
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    let io = |e: std::io::Error| format!("{authority}: {e}");
    stream.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
    stream.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\n{authorization}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\nUser-Agent: weir/{}\r\n\r\n{body}",
        body.len(),
        env!("CARGO_PKG_VERSION"),
    );
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut head = [0u8; 64];
    let mut read = 0;
    while read < 12 {
        let n = stream.read(&mut head[read..]).map_err(io)?;
        if n == 0 {
            break;
        }
        read += n;
    }
    let status_line = String::from_utf8_lossy(&head[..read]);
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| format!("{authority}: no HTTP status in the response"))?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("{authority}: HTTP {status}"))
    }
}

/// `%41` → `A`; other bytes as they are.
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// Standard base64 with padding (RFC 4648), for one header.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_encode_as_rfc_4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(
            base64(b"Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(percent_decode("us%40er:p%3Ass%"), b"us@er:p:ss%");
    }
}
