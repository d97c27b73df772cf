//! What S3 sends and expects on the wire: its XML replies (read without an
//! XML parser: weir reads a handful of known elements), its refusals and its
//! URL encoding.

/// The text of the first `<name>…</name>` in `xml`, unescaped.
pub(super) fn tag(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    Some(unescape(&xml[start..end]))
}

/// Each `<name>…</name>` element of `xml`, its inner text raw.
pub(super) fn elements<'x>(xml: &'x str, name: &str) -> Vec<&'x str> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find(&open) {
        let inner = &rest[i + open.len()..];
        let Some(j) = inner.find(&close) else { break };
        out.push(&inner[..j]);
        rest = &inner[j + close.len()..];
    }
    out
}

/// XML's predefined and numeric character references.
pub(super) fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(j) = after.find(';') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let entity = &after[..j];
        let ch = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .map(|h| u32::from_str_radix(h, 16))
                .or_else(|| entity.strip_prefix('#').map(str::parse::<u32>))
                .and_then(Result::ok)
                .and_then(char::from_u32),
        };
        match ch {
            Some(c) => {
                out.push(c);
                rest = &after[j + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Percent-encodes everything but S3's unreserved characters (and `/`
/// when `slash` is kept, for a key in a URL's path).
pub(super) fn encode(text: &str, slash: bool) -> String {
    use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
    const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    const PATH: &AsciiSet = &UNRESERVED.remove(b'/');
    utf8_percent_encode(text, if slash { PATH } else { UNRESERVED }).to_string()
}

/// Undoes object_store's percent-encoding of a path (which encodes `%`
/// itself, so decoding once gives the key back exactly).
pub(super) fn percent_decode(raw: &str) -> Option<String> {
    // The crate keeps a malformed escape as text; object_store never writes
    // one, so a path that holds one is not a key weir can name: refuse it.
    let well_formed = raw.match_indices('%').all(|(at, _)| {
        raw.get(at + 1..at + 3)
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    if !well_formed {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()?;
    Some(decoded.into_owned())
}

/// A reply other than 2xx to a signed request.
#[derive(Debug, thiserror::Error)]
#[error("{request}: HTTP {status}: {code}")]
pub(super) struct Refused {
    /// The method and URL.
    pub(super) request: String,
    /// The HTTP status with its reason ("404 Not Found").
    pub(super) status: String,
    /// S3's error code (`NoSuchUpload`), if the body had one.
    pub(super) code: String,
}
