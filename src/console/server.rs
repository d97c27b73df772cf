//! The connection loop under the console's routes: what `axum::serve`
//! leaves open, bounded.
//!
//! ```text
//!  accept ──► a permit free? ── no ──► closed at once (the cap holds the descriptors)
//!                 │ yes
//!                 ▼
//!  one HTTP/1.1 connection: its request head within `header_read` (also
//!  the wait for the next request on a kept-alive connection), no byte
//!  either way for `idle` closes it
//!                 │ stop
//!                 ▼
//!  listener closed, open connections asked to finish, waited for at most
//!  `grace`, then dropped with the runtime
//! ```
//!
//! A console shares its process with `weir serve`'s engine: every
//! connection holds a descriptor, so the cap is a fraction of the
//! process's `RLIMIT_NOFILE`, and a client that sends half a request
//! neither keeps a descriptor past `header_read` nor keeps the process
//! from exiting.

use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// A request's head must arrive within this (and a kept-alive connection
/// send its next one).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection with no byte read or written for this long is closed (a
/// client that stopped reading its response, or sending its body).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a stopping console waits for its open connections.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The pause after a failed accept (out of descriptors): never a spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The cap on open connections is the open-file limit over this...
const CAP_SHARE: u64 = 8;
/// ...and at most this many: a console has few readers.
const CAP_MAX: u64 = 256;
/// The fewest connections served, whatever the limit.
const CAP_MIN: u64 = 4;

/// The bounds of the connection loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// For a request's head, and between two requests.
    pub(crate) header_read: Duration,
    /// For a connection that moves no byte.
    pub(crate) idle: Duration,
    /// For open connections, once stopping.
    pub(crate) grace: Duration,
    /// Connections open at once; more are closed as they come.
    pub(crate) max_connections: usize,
}

impl Limits {
    /// The console's bounds in this process.
    pub(crate) fn of_process() -> Limits {
        Limits {
            header_read: HEADER_READ_TIMEOUT,
            idle: IDLE_TIMEOUT,
            grace: SHUTDOWN_GRACE,
            max_connections: connection_cap(crate::process::open_file_limit()),
        }
    }
}

/// The connections a process with `nofile` descriptors serves at once: an
/// eighth of them, between [`CAP_MIN`] and [`CAP_MAX`] (128 under the usual
/// 1024), so the engine beside the console keeps the rest.
pub(crate) fn connection_cap(nofile: u64) -> usize {
    usize::try_from((nofile / CAP_SHARE).clamp(CAP_MIN, CAP_MAX)).unwrap_or(4)
}

/// Serves `router` on `listener` until `stop` fires (or its sender is
/// dropped), then waits for open connections at most `limits.grace`.
pub(crate) async fn run(
    listener: TcpListener,
    router: Router,
    stop: tokio::sync::oneshot::Receiver<()>,
    limits: Limits,
) {
    let max = limits.max_connections.max(1);
    let permits = Arc::new(Semaphore::new(max));
    let (closing, closed) = watch::channel(false);
    let mut stop = pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(_) => {
                // EMFILE and the like: the engine needs descriptors more
                // than a client needs an answer now.
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        tokio::spawn(connection(
            stream,
            router.clone(),
            limits,
            closed.clone(),
            permit,
        ));
    }
    drop(listener);
    let _ = closing.send(true);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(limits.grace, permits.acquire_many(all)).await;
}

/// Serves one connection until it ends, idles past `limits.idle`, or,
/// once `closed` says so, finishes the request under way.
async fn connection(
    stream: TcpStream,
    router: Router,
    limits: Limits,
    mut closed: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let born = Instant::now();
    let moved = Arc::new(AtomicU64::new(0));
    let io = TokioIo::new(Watched {
        stream,
        born,
        moved: Arc::clone(&moved),
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read);
    let mut conn = pin!(builder.serve_connection(io, TowerToHyperService::new(router)));
    let idle_until = |moved: &AtomicU64| {
        born + Duration::from_millis(moved.load(Ordering::Relaxed)) + limits.idle
    };
    let mut closing = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            () = tokio::time::sleep_until(idle_until(&moved)) => {
                if Instant::now() >= idle_until(&moved) {
                    return;
                }
            }
            _ = closed.changed(), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// A connection's stream, noting when a byte last moved (milliseconds
/// after `born`).
struct Watched {
    stream: TcpStream,
    born: Instant,
    moved: Arc<AtomicU64>,
}

impl Watched {
    fn touch(&self) {
        let ms = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.moved.store(ms, Ordering::Relaxed);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    #[test]
    fn the_cap_is_a_share_of_the_open_file_limit() {
        assert_eq!(connection_cap(1024), 128);
        assert_eq!(connection_cap(256), 32);
        assert_eq!(connection_cap(16), 4);
        assert_eq!(connection_cap(u64::MAX), 256);
    }

    /// A server of "ok" on a thread, with `limits`; stopped by the sender.
    fn serving(
        limits: Limits,
    ) -> (
        u16,
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                let router = Router::new().route("/", axum::routing::get(|| async { "ok" }));
                run(listener, router, stopped, limits).await;
            });
            rt.shutdown_background();
        });
        (port, stop, thread)
    }

    fn limits(max_connections: usize) -> Limits {
        Limits {
            header_read: Duration::from_millis(300),
            idle: Duration::from_millis(600),
            grace: Duration::from_millis(300),
            max_connections,
        }
    }

    /// What the server sends on `s` until it closes (or 10 s pass).
    fn rest(s: &mut std::net::TcpStream) -> String {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Whether the server closes `s` (within 10 s) without answering.
    fn closed_unanswered(s: &mut std::net::TcpStream) -> bool {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut out = Vec::new();
        match s.read_to_end(&mut out) {
            Ok(_) => !String::from_utf8_lossy(&out).contains("200 OK"),
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    fn get(port: u16) -> String {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        rest(&mut s)
    }

    // A half-sent request head and a silent connection are closed once the
    // header timeout passes, instead of holding a descriptor forever.
    #[test]
    fn a_half_sent_request_is_closed_after_the_header_timeout() {
        let mut l = limits(8);
        l.idle = Duration::from_secs(3600);
        let (port, stop, thread) = serving(l);
        let mut half = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        half.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
        let mut silent = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert!(closed_unanswered(&mut half));
        assert!(closed_unanswered(&mut silent));
        assert!(get(port).starts_with("HTTP/1.1 200 OK"));
        stop.send(()).unwrap();
        thread.join().unwrap();
    }

    // Connections past the cap are closed as they come; once the others
    // end, a client is served again.
    #[test]
    fn connections_past_the_cap_are_closed_at_once() {
        let (port, stop, thread) = serving(limits(2));
        let held: Vec<_> = (0..2)
            .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(get(port), "", "a third connection is closed unanswered");
        drop(held);
        let served = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(25));
            get(port).starts_with("HTTP/1.1 200 OK")
        });
        assert!(served, "the freed permits serve a client again");
        stop.send(()).unwrap();
        thread.join().unwrap();
    }

    // A kept-alive connection that goes quiet after its answer is closed
    // once no byte moved for the idle timeout, even when the header
    // timeout is far off.
    #[test]
    fn a_quiet_connection_is_closed_after_the_idle_timeout() {
        let mut l = limits(8);
        l.header_read = Duration::from_secs(3600);
        let (port, stop, thread) = serving(l);
        let mut quiet = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        quiet
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        quiet
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut answered = Vec::new();
        let ended = quiet.read_to_end(&mut answered);
        let answered = String::from_utf8_lossy(&answered);
        assert!(answered.starts_with("HTTP/1.1 200 OK"), "{answered}");
        assert!(ended.is_ok(), "the server never closed it: {ended:?}");
        stop.send(()).unwrap();
        thread.join().unwrap();
    }

    // A stopping server waits for a connection stuck in its request head
    // at most its grace.
    #[test]
    fn stopping_does_not_wait_for_a_stuck_connection() {
        let mut l = limits(8);
        l.header_read = Duration::from_secs(3600);
        l.idle = Duration::from_secs(3600);
        let (port, stop, thread) = serving(l);
        let mut half = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        half.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        stop.send(()).unwrap();
        thread.join().unwrap();
        assert!(closed_unanswered(&mut half), "dropped with the runtime");
    }
}
