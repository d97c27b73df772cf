//! The live console: a read-only web view of one or more pipelines'
//! warehouses as they are now, opening on what needs a person.
//!
//! ```text
//!   /                      what needs a person (ops::problems), per pipeline
//!   /grid?task=&state=&from=&to=   the partition grid, filtered; summarised when large
//!   /runs, /runs/<id>      runs, and one run's Gantt chart and events
//!   /instance?task=&partition=     attempts, stderr tail, input snapshot, generations
//!   /api/status            exactly `weir status --json` (ops::status::Status)
//!   /api/problems, /api/grid, /api/runs, /api/runs/<id>, /api/instance
//! ```
//!
//! Every page is rendered from the same library calls the CLI makes
//! (`ops::status`, `ops::problems`, `ops::explain`, `report::grid`), through
//! minijinja templates that escape every value: task names, partition keys,
//! stderr and gate messages are untrusted text. Pages refresh themselves by
//! polling (a small script served from `/static/`, allowed by the page's
//! Content-Security-Policy; no inline script runs).
//!
//! Access: a loopback bind without a token serves only requests whose `Host`
//! is a loopback name (a page elsewhere cannot rebind a DNS name to it); any
//! other bind needs a token, checked on every request in constant time
//! (`Authorization: Bearer`, `?token=`, or the cookie a `?token=` visit sets).
//!
//! The server runs on its own thread with a one-thread tokio runtime; the
//! warehouse is read on tokio's blocking pool, a few pages at a time.
//! [`serve`] returns once the address is bound; dropping the [`Console`]
//! stops it within a short grace, whatever its clients do (`server`: a
//! header read timeout, an idle timeout, a cap on open connections).

mod auth;
mod pages;
mod server;
mod view;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::manifest::Manifest;

/// The address `weir console` and `weir serve --http` bind by default.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

/// The environment variable a token may come from instead of `--token`
/// (which would show in `ps`).
pub const TOKEN_ENV: &str = "WEIR_CONSOLE_TOKEN";

/// Why the console could not start.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ConsoleError {
    /// A non-loopback address without a token.
    #[error(
        "refusing to serve the console on {addr} without a token: it is not a loopback address"
    )]
    #[diagnostic(
        code(weir::console::no_token),
        help("pass `--token …` (or set {TOKEN_ENV}); clients then send `Authorization: Bearer …` or open `http://{addr}/?token=…`; or bind 127.0.0.1")
    )]
    NoToken {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// An empty token protects nothing.
    #[error("the console token is empty")]
    #[diagnostic(
        code(weir::console::empty_token),
        help("give a long random token, e.g. `--token \"$(openssl rand -hex 32)\"`")
    )]
    EmptyToken,
    /// No pipeline to show.
    #[error("the console needs at least one manifest")]
    NoManifest,
    /// Two manifests with one pipeline name: `?pipeline=` could not tell them apart.
    #[error("two manifests name the pipeline `{0}`")]
    DuplicatePipeline(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    #[diagnostic(code(weir::console::bind))]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
}

/// A running console; dropping it (or [`Console::shutdown`]) stops the
/// server and waits for its thread.
pub struct Console {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Console {
    /// The bound address (the port the OS chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving: new connections are refused, requests under way are
    /// given a short grace to finish, then their connections are closed.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    /// Blocks until the server's thread ends (it ends only on shutdown or
    /// when its runtime fails).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Serves the console of `manifests` on `addr` from a background thread.
///
/// A non-loopback `addr` needs a `token`; with a token every request must
/// present it, wherever the console listens.
pub fn serve(
    addr: SocketAddr,
    manifests: Vec<Manifest>,
    token: Option<&str>,
) -> Result<Console, ConsoleError> {
    if token == Some("") {
        return Err(ConsoleError::EmptyToken);
    }
    if token.is_none() && !addr.ip().is_loopback() {
        return Err(ConsoleError::NoToken { addr });
    }
    if manifests.is_empty() {
        return Err(ConsoleError::NoManifest);
    }
    for (i, m) in manifests.iter().enumerate() {
        if manifests[..i]
            .iter()
            .any(|o| o.pipeline.name == m.pipeline.name)
        {
            return Err(ConsoleError::DuplicatePipeline(m.pipeline.name.clone()));
        }
    }
    // Bound here, before the thread: a busy port is the caller's error now,
    // not a log line later.
    let listener = TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| ConsoleError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ConsoleError::Bind { addr, source })?;
    let app = Arc::new(pages::App::new(manifests, token.map(auth::Token::new)));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("weir-console".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!("the console cannot start its runtime: {e}");
                    return;
                }
            };
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!("the console cannot listen: {e}");
                        return;
                    }
                };
                server::run(
                    listener,
                    pages::router(app),
                    stopped,
                    server::Limits::of_process(),
                )
                .await;
            });
            // A page still reading the warehouse is not waited for: the
            // process may be on its way out.
            runtime.shutdown_background();
        })
        .map_err(|source| ConsoleError::Bind { addr, source })?;
    Ok(Console {
        addr: bound,
        stop: Some(stop),
        thread: Some(thread),
    })
}
