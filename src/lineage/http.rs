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

/// POSTs `body` as `application/json` to `url` (`http://host[:port]/path`);
/// Ok on a 2xx status.
pub(super) fn post_json(url: &str, body: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("`{url}` is not an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
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
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
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
