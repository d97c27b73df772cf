//! Routes: pages rendered by minijinja (auto-escaped), the `/api/`
//! documents, the static script and style, and the access check in front
//! of all but the static files.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use minijinja::{context, Environment, Value};
use serde::Serialize;

use super::auth::{self, Granted, Token};
use super::view::{self, GridFilter, ViewError};
use crate::manifest::Manifest;

/// Seconds between a page's refreshes.
const REFRESH_SECONDS: u64 = 5;

/// Pages read from the warehouse at once; more wait their turn, so that a
/// crowd of clients takes neither threads nor descriptors from the engine.
const READERS: usize = 4;

/// What every handler shares.
pub(super) struct App {
    manifests: Vec<Manifest>,
    token: Option<Token>,
    templates: Environment<'static>,
    readers: tokio::sync::Semaphore,
}

impl App {
    pub(super) fn new(manifests: Vec<Manifest>, token: Option<Token>) -> App {
        // The report's environment: the same escaping (every value of a
        // `*.html` template), and its fragments (`report/gantt.html`)
        // included by name rather than pasted in as rendered markup.
        let mut templates = crate::report::html::environment();
        for (name, source) in [
            ("base.html", include_str!("templates/base.html")),
            ("index.html", include_str!("templates/index.html")),
            ("grid.html", include_str!("templates/grid.html")),
            ("runs.html", include_str!("templates/runs.html")),
            ("run.html", include_str!("templates/run.html")),
            ("instance.html", include_str!("templates/instance.html")),
            ("error.html", include_str!("templates/error.html")),
        ] {
            templates
                .add_template(name, source)
                .expect("the console's templates are valid (tests render each)");
        }
        App {
            manifests,
            token,
            templates,
            readers: tokio::sync::Semaphore::new(READERS),
        }
    }

    /// The pipeline `?pipeline=` names (the first by default).
    fn manifest(&self, q: &HashMap<String, String>) -> Result<&Manifest, ViewError> {
        match q.get("pipeline").filter(|p| !p.is_empty()) {
            None => Ok(&self.manifests[0]),
            Some(name) => self
                .manifests
                .iter()
                .find(|m| &m.pipeline.name == name)
                .ok_or_else(|| ViewError::not_found(format!("no pipeline `{name}` here"))),
        }
    }

    fn render(&self, name: &str, page: &str, q: &HashMap<String, String>, view: Value) -> Response {
        let pipelines: Vec<String> = self
            .manifests
            .iter()
            .map(|m| m.pipeline.name.clone())
            .collect();
        let pipeline = q.get("pipeline").cloned().unwrap_or_default();
        let rendered = self.templates.get_template(name).and_then(|t| {
            t.render(context! {
                view,
                page,
                pipelines,
                pipeline,
                refresh => REFRESH_SECONDS,
            })
        });
        match rendered {
            Ok(html) => Html(html).into_response(),
            Err(e) => error_page(self, 500, &format!("cannot render the page: {e}")),
        }
    }
}

fn error_page(app: &App, status: u16, message: &str) -> Response {
    let html = app
        .templates
        .get_template("error.html")
        .and_then(|t| t.render(context! { message, status }))
        .unwrap_or_else(|_| "error".to_owned());
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Html(html)).into_response()
}

pub(super) fn router(app: Arc<App>) -> Router {
    let guarded = Router::new()
        .route("/", get(index))
        .route("/grid", get(grid))
        .route("/runs", get(runs))
        .route("/runs/{id}", get(run))
        .route("/instance", get(instance))
        .route("/api/status", get(api_status))
        .route("/api/problems", get(api_problems))
        .route("/api/grid", get(api_grid))
        .route("/api/runs", get(api_runs))
        .route("/api/runs/{id}", get(api_run))
        .route("/api/instance", get(api_instance))
        .route_layer(middleware::from_fn_with_state(app.clone(), guard));
    Router::new()
        .route("/static/console.js", get(script))
        .route("/static/console.css", get(style))
        .merge(guarded)
        .layer(middleware::from_fn(headers))
        .with_state(app)
}

/// Refuses a request without the token (or, without one, from a
/// non-loopback `Host`); a `?token=` visit gets the cookie.
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let granted = auth::check(app.token.as_ref(), request.headers(), request.uri());
    let Some(granted) = granted else {
        let why = if app.token.is_some() {
            "this console needs its token: send `Authorization: Bearer …` or open the page with `?token=…`"
        } else {
            "this console answers only to a loopback host name (localhost, 127.0.0.1, [::1])"
        };
        let mut response = (StatusCode::UNAUTHORIZED, format!("{why}\n")).into_response();
        if app.token.is_some() {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"weir console\""),
            );
        }
        return response;
    };
    let mut response = next.run(request).await;
    if let Granted::Query(token) = granted {
        if let Some(cookie) = auth::cookie(&token) {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
    }
    response
}

/// No inline script, no other origin, no framing; the token never leaves
/// in a Referer. Style attributes alone are allowed inline (not `<style>`,
/// not scripts): the Gantt chart places its bars with them, and their values
/// are numbers the code computes (`report::html::place`), escaped besides.
async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("templates/console.js"),
    )
        .into_response()
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        format!(
            "{}\n{}",
            crate::report::html::STYLE,
            include_str!("templates/console.css")
        ),
    )
        .into_response()
}

type Q = Query<HashMap<String, String>>;

/// A serde value as a template value (its strings are escaped on output).
fn val<T: Serialize>(x: &T) -> Value {
    Value::from(minijinja::value::Serde(x))
}

/// Runs `f` on the blocking pool (it reads the warehouse) and turns its
/// outcome into a page or a JSON document.
async fn blocking<T: Send + 'static>(
    app: &Arc<App>,
    f: impl FnOnce(&App) -> Result<T, ViewError> + Send + 'static,
) -> Result<T, ViewError> {
    let Ok(_turn) = app.readers.acquire().await else {
        return Err(ViewError {
            status: 503,
            message: "the console is stopping".into(),
        });
    };
    let app = app.clone();
    tokio::task::spawn_blocking(move || f(&app))
        .await
        .unwrap_or_else(|e| {
            Err(ViewError {
                status: 500,
                message: format!("the page's reader failed: {e}"),
            })
        })
}

fn page(
    app: &App,
    name: &str,
    nav: &str,
    q: &HashMap<String, String>,
    v: Result<Value, ViewError>,
) -> Response {
    match v {
        Ok(view) => app.render(name, nav, q, view),
        Err(e) => error_page(app, e.status, &e.message),
    }
}

fn json<T: Serialize>(v: Result<T, ViewError>) -> Response {
    match v {
        Ok(doc) => Json(doc).into_response(),
        Err(e) => (
            StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Json(serde_json::json!({ "error": e.message })),
        )
            .into_response(),
    }
}

async fn index(State(app): State<Arc<App>>, Query(q): Q) -> Response {
    // Every pipeline's problems, unless one is chosen.
    let chosen = q.get("pipeline").filter(|p| !p.is_empty()).cloned();
    let v = blocking(&app, move |app| {
        app.manifests
            .iter()
            .filter(|m| chosen.as_ref().is_none_or(|c| *c == m.pipeline.name))
            .map(view::problems)
            .collect::<Result<Vec<_>, _>>()
    })
    .await;
    page(&app, "index.html", "problems", &q, v.map(|x| val(&x)))
}

async fn api_problems(State(app): State<Arc<App>>, Query(q): Q) -> Response {
    json(blocking(&app, move |app| view::problems(app.manifest(&q)?)).await)
}

async fn api_status(State(app): State<Arc<App>>, Query(q): Q) -> Response {
    json(blocking(&app, move |app| view::status(app.manifest(&q)?)).await)
}

fn filter_of(q: &HashMap<String, String>) -> GridFilter {
    let get = |k: &str| q.get(k).cloned().unwrap_or_default();
    GridFilter {
        task: get("task"),
        state: get("state"),
        from: get("from"),
        to: get("to"),
    }
}

async fn grid(State(app): State<Arc<App>>, Query(q): Q) -> Response {
    let query = q.clone();
    let v = blocking(&app, move |app| {
        view::grid(app.manifest(&query)?, filter_of(&query))
    })
    .await;
    page(&app, "grid.html", "grid", &q, v.map(|x| val(&x)))
}

async fn api_grid(State(app): State<Arc<App>>, Query(q): Q) -> Response {
    json(
        blocking(&app, move |app| {
            view::grid(app.manifest(&q)?, filter_of(&q))
        })
        .await,
    )
}

async fn runs(State(app): State<Arc<App>>, Query(q): Q) -> Response {
    let query = q.clone();
    let v = blocking(&app, move |app| view::runs(app.manifest(&query)?)).await;
    page(&app, "runs.html", "runs", &q, v.map(|x| val(&x)))
}

async fn api_runs(State(app): State<Arc<App>>, Query(q): Q) -> Response {
    json(blocking(&app, move |app| view::runs(app.manifest(&q)?)).await)
}

async fn run(State(app): State<Arc<App>>, Path(id): Path<String>, Query(q): Q) -> Response {
    let query = q.clone();
    let v = blocking(&app, move |app| view::run(app.manifest(&query)?, &id)).await;
    page(
        &app,
        "run.html",
        "runs",
        &q,
        v.map(|x| {
            context! {
                run => val(&x),
                gantt => val(&x.gantt),
            }
        }),
    )
}

async fn api_run(State(app): State<Arc<App>>, Path(id): Path<String>, Query(q): Q) -> Response {
    json(blocking(&app, move |app| view::run(app.manifest(&q)?, &id)).await)
}

fn instance_of(app: &App, q: &HashMap<String, String>) -> Result<view::InstanceView, ViewError> {
    let (Some(task), Some(partition)) = (q.get("task"), q.get("partition")) else {
        return Err(ViewError {
            status: 400,
            message: "an instance is named by `?task=…&partition=…`".into(),
        });
    };
    view::instance(app.manifest(q)?, task, partition)
}

async fn instance(State(app): State<Arc<App>>, Query(q): Q) -> Response {
    let query = q.clone();
    let v = blocking(&app, move |app| instance_of(app, &query)).await;
    page(&app, "instance.html", "grid", &q, v.map(|x| val(&x)))
}

async fn api_instance(State(app): State<Arc<App>>, Query(q): Q) -> Response {
    json(blocking(&app, move |app| instance_of(app, &q)).await)
}
