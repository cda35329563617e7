//! The web server: routes, sessions, CSRF, and the rules that follow a submission (qualification, censoring).
//!
//! People: the admin signs in with the study's password; annotators enter by their invite link, which opens a
//! session for that person only. Every state-changing request is a POST form carrying the session's CSRF token
//! (the sign-in form: a double-submit cookie). Cookies are HttpOnly; the session cookie is SameSite=Lax (an
//! invite link clicked in a mail or chat is a cross-site navigation: Strict would drop the cookie on its
//! redirect; every POST carries its CSRF token anyway), the sign-in cookie Strict. Sessions expire (admin 12 h,
//! annotators 30 days). At most two password checks run at once (Argon2id takes 19 MiB each); more get 429.
//! Bodies are limited to 64 KiB; a bad request gets a 4xx page saying what is wrong. Database failures answer
//! 503.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Extension, Form, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use stepwise_core::Error;

use crate::db::{
    self, AssignmentRow, DISCARDED, DONE, Db, OPEN, SessionRow, Submitted, WORKER_ACTIVE, WORKER_CENSORED,
    WORKER_FAILED, WORKER_QUALIFYING, WorkerRow, db_error, task_spec,
};
use crate::judgements::{self, Answer, Submission};
use crate::pages;
use crate::queue;
use crate::schedule;
use crate::study::{Study, StudyKind};
use crate::tls::{Peer, TlsListener, Transport};

const SESSION_COOKIE: &str = "sw_session";
const LOGIN_COOKIE: &str = "sw_login";
/// Largest request body (a submission is a few hundred bytes; 24 alternatives of 20 items stay far below).
pub const BODY_LIMIT: usize = 64 * 1024;
/// Most invite links made by one request.
pub const MAX_INVITES: usize = 500;
const ADMIN_SESSION_MS: i64 = 12 * 3600 * 1000;
const ANNOTATOR_SESSION_MS: i64 = 30 * 24 * 3600 * 1000;

pub struct AppState {
    pub db: Db,
    pub study: Arc<Study>,
    /// HITs are handed out one at a time in this process (see `current_assignment`).
    assign: tokio::sync::Mutex<()>,
    /// Password checks running at once (each holds 19 MiB for Argon2id).
    logins: tokio::sync::Semaphore,
    /// Image paths the study's items name, each a relative path inside the image root (nothing else is served).
    images: BTreeSet<String>,
    /// Whether requests arrive over HTTPS (cookies `Secure`, HSTS).
    transport: Transport,
}

impl AppState {
    /// A server reached over plain HTTP (tests, or behind a proxy it does not trust).
    pub fn new(db: Db, study: Study) -> Arc<AppState> {
        AppState::serving(db, study, Transport::default())
    }

    pub fn serving(db: Db, study: Study, transport: Transport) -> Arc<AppState> {
        let images = study
            .image_paths()
            .into_iter()
            .filter(|p| stepwise_core::paths::safe_relative(p))
            .map(str::to_string)
            .collect();
        Arc::new(AppState {
            db,
            study: Arc::new(study),
            assign: tokio::sync::Mutex::new(()),
            logins: tokio::sync::Semaphore::new(2),
            images,
            transport,
        })
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// What a handler answers when it cannot do what was asked.
#[derive(Debug)]
pub enum AppError {
    BadRequest(String),
    /// Not signed in (or not as the right kind of person).
    Forbidden(String),
    NotFound(String),
    Conflict(String),
    /// Too many password checks at once.
    Busy,
    /// The database (or another resource) failed: not the request's fault.
    Unavailable(String),
    /// Making the export download failed (the log has the cause).
    ExportFailed,
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        tracing::error!("{e}");
        AppError::Unavailable(e.to_string())
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, title, text) = match self {
            AppError::BadRequest(m) => (StatusCode::BAD_REQUEST, "Bad request", m),
            AppError::Forbidden(m) => (StatusCode::FORBIDDEN, "Not allowed", m),
            AppError::NotFound(m) => (StatusCode::NOT_FOUND, "Not found", m),
            AppError::Conflict(m) => (StatusCode::CONFLICT, "Already answered", m),
            AppError::Busy => (
                StatusCode::TOO_MANY_REQUESTS,
                "Busy",
                "Too many sign-in attempts at once; wait a moment and try again.".into(),
            ),
            AppError::ExportFailed => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Export failed",
                "The export could not be made (the server's log says why); nothing was changed. Try again, or run \
                 `stepwise annotate export` on the server."
                    .into(),
            ),
            AppError::Unavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again",
                "The server could not reach its database; nothing was saved. Please try again in a moment.".into(),
            ),
        };
        (status, Html(pages::message(title, &text))).into_response()
    }
}

type Answered = Result<Response, AppError>;

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/join/{token}", get(join))
        .route("/work", get(work))
        .route("/work/{id}", post(submit))
        .route("/img/{*path}", get(image))
        .route("/logout", post(logout))
        .route("/admin", get(dashboard))
        .route("/admin/login", get(login_form).post(login))
        .route("/admin/invites", post(invites))
        .route("/admin/export.zip", get(export_zip))
        .route("/static/app.js", get(|| async { static_file("text/javascript; charset=utf-8", pages::APP_JS) }))
        .route("/static/app.css", get(|| async { static_file("text/css; charset=utf-8", pages::APP_CSS) }))
        .fallback(|| async { AppError::NotFound("There is no page here.".into()) })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::map_response(security_headers))
        .layer(axum::middleware::from_fn_with_state(state.clone(), https_marks))
        .with_state(state)
}

/// The scheme the person's browser used (links the server hands out use it too).
#[derive(Debug, Clone, Copy)]
struct Scheme(&'static str);

/// Over HTTPS, every cookie is `Secure` (never sent in clear afterwards) and browsers are told to keep to
/// HTTPS (HSTS, one year).
async fn https_marks(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<ConnectInfo<Peer>>().map(|c| c.0.0.ip());
    let proto = req.headers().get("x-forwarded-proto").and_then(|v| v.to_str().ok());
    let https = state.transport.is_https(peer, proto);
    req.extensions_mut().insert(Scheme(if https { "https" } else { "http" }));
    let mut r = next.run(req).await;
    if https {
        let h = r.headers_mut();
        let cookies: Vec<HeaderValue> = h.get_all(header::SET_COOKIE).iter().cloned().collect();
        h.remove(header::SET_COOKIE);
        for c in cookies {
            let secure = c.to_str().ok().and_then(|c| HeaderValue::from_str(&format!("{c}; Secure")).ok());
            h.append(header::SET_COOKIE, secure.unwrap_or(c));
        }
        h.insert(header::STRICT_TRANSPORT_SECURITY, HeaderValue::from_static("max-age=31536000"));
    }
    r
}

async fn security_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'; \
             form-action 'self'",
        ),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    r
}

fn static_file(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "max-age=300")], body).into_response()
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn set_cookie(name: &str, value: &str, path: &str, max_age: Option<u64>) -> String {
    let age = max_age.map(|a| format!("; Max-Age={a}")).unwrap_or_default();
    let same_site = if name == SESSION_COOKIE { "Lax" } else { "Strict" };
    format!("{name}={value}; Path={path}; HttpOnly; SameSite={same_site}{age}")
}

fn see_other(to: &str, cookies: &[String]) -> Response {
    let mut r = Redirect::to(to).into_response();
    for c in cookies {
        if let Ok(v) = HeaderValue::from_str(c) {
            r.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    r
}

async fn session(state: &AppState, headers: &HeaderMap) -> Result<Option<SessionRow>, AppError> {
    match cookie(headers, SESSION_COOKIE) {
        Some(token) if token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit()) => {
            let now = now_ms();
            Ok(state
                .db
                .session(token)
                .await?
                .filter(|s| now - s.created_ms < if s.admin { ADMIN_SESSION_MS } else { ANNOTATOR_SESSION_MS }))
        }
        _ => Ok(None),
    }
}

fn check_csrf(s: &SessionRow, form: &HashMap<String, String>) -> Result<(), AppError> {
    match form.get("csrf") {
        Some(t) if crate::auth::same_secret(t, &s.csrf) => Ok(()),
        _ => Err(AppError::Forbidden("This form has expired or did not come from this site; reload the page.".into())),
    }
}

async fn annotator(state: &AppState, headers: &HeaderMap) -> Result<(SessionRow, WorkerRow), AppError> {
    let denied = || AppError::Forbidden("Open the invite link you were given to start.".into());
    let s = session(state, headers).await?.ok_or_else(denied)?;
    let id = s.worker_id.ok_or_else(denied)?;
    let w = state.db.worker(id).await?.ok_or_else(denied)?;
    Ok((s, w))
}

async fn admin(state: &AppState, headers: &HeaderMap) -> Result<Option<SessionRow>, AppError> {
    Ok(session(state, headers).await?.filter(|s| s.admin))
}

async fn index(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Answered {
    match session(&state, &headers).await? {
        Some(s) if s.admin => Ok(Redirect::to("/admin").into_response()),
        Some(s) if s.worker_id.is_some() => Ok(Redirect::to("/work").into_response()),
        _ => Ok(Html(pages::message(
            "stepwise annotate",
            "Annotators: open the invite link you were given. Admin: sign in at /admin/login.",
        ))
        .into_response()),
    }
}

async fn join(State(state): State<Arc<AppState>>, Path(token): Path<String>) -> Answered {
    let bad = || AppError::NotFound("This invite link is not valid (check that it was copied whole).".into());
    if token.len() != 32 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let w = state.db.worker_by_invite(&token).await?.ok_or_else(bad)?;
    let s = state.db.create_session(Some(w.id), false, now_ms()).await?;
    Ok(see_other("/work", &[set_cookie(SESSION_COOKIE, &s.token, "/", None)]))
}

async fn work(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Answered {
    let (s, w) = annotator(&state, &headers).await?;
    match w.status.as_str() {
        WORKER_FAILED => {
            return Ok(Html(pages::message(
                "Thank you",
                "Your qualification answers did not reach the study's threshold, so there are no more items for you.",
            ))
            .into_response());
        }
        WORKER_CENSORED => {
            return Ok(Html(pages::message(
                "Thank you",
                "Your answers fell below the study's accuracy floor, so there are no more items for you.",
            ))
            .into_response());
        }
        _ => {}
    }
    let Some((a, hit)) = current_assignment(&state, &w).await? else {
        return Ok(Html(pages::message("All done", "There are no more items for you in this study. Thank you!"))
            .into_response());
    };
    let study = &state.study;
    let Some((instance, modality, qualification)) = task_spec(study, a.task_id) else {
        return Err(AppError::NotFound("This item is not part of the study.".into()));
    };
    let inst = &study.instances[instance];
    let alternatives = study.rules.kind == StudyKind::Alternatives;
    let items: Vec<(usize, &stepwise_core::sequencing::SequencingItem)> = if alternatives && !qualification {
        inst.references[0].iter().map(|&i| (i, &inst.items[i])).collect()
    } else {
        inst.items.iter().enumerate().collect()
    };
    let html = pages::work_page(&pages::WorkView {
        assignment: a.id,
        csrf: &s.csrf,
        modality,
        position: hit.iter().position(|x| x.id == a.id).unwrap_or(0),
        hit_items: hit.len(),
        hit_seq: a.hit_seq,
        qualification,
        items,
        alternatives: alternatives && !qualification,
    });
    Ok(Html(html).into_response())
}

/// The person's first open item (and its whole HIT), handing out a new HIT when none is open.
async fn current_assignment(
    state: &AppState,
    w: &WorkerRow,
) -> Result<Option<(AssignmentRow, Vec<AssignmentRow>)>, AppError> {
    let study = &state.study;
    let first_open = |hit: Vec<AssignmentRow>| -> Option<(AssignmentRow, Vec<AssignmentRow>)> {
        let a = hit.iter().filter(|a| a.status == OPEN).min_by_key(|a| a.position)?.clone();
        Some((a, hit))
    };
    let timeout = study.rules.assignment_timeout_minutes.saturating_mul(60_000) as i64;
    // An item held past the timeout was offered to others; once they gave every wanted judgement, it is
    // withdrawn from this person instead of collecting one judgement too many.
    while let Some((a, hit)) = first_open(state.db.last_hit(w.id).await?) {
        let stale = now_ms() - a.created_ms > timeout;
        let full = match task_spec(study, a.task_id) {
            Some((_, _, false)) if stale => db::done_count(&state.db.pool, a.task_id).await? >= study.rules.judgements,
            _ => false,
        };
        if !full {
            return Ok(Some((a, hit)));
        }
        state.db.release(a.id).await?;
    }
    // One HIT at a time per process (SQLite has one writer anyway); across processes the person's row lock
    // and the queue's conditional counts keep HITs apart.
    let _one_at_a_time = state.assign.lock().await;
    let mut wtx = state.db.begin_write().await?;
    let tx = &mut wtx.tx;
    // Lock the person's row first, then look again: another request or process may have handed them a HIT
    // meanwhile.
    let status = db::lock_worker(tx, w.id).await?;
    let (last_seq, open) = db::last_hit_state(tx, w.id).await?;
    if !open {
        let mut tally = queue::Tally::default();
        let now = now_ms();
        let (tasks, qualification) = match status.as_str() {
            WORKER_QUALIFYING if last_seq == 0 => (schedule::qualification_hit(study), true),
            WORKER_ACTIVE => {
                queue::expire(tx, &mut tally, now - timeout).await?;
                (queue::next_hit(tx, &mut tally, study, w.id, last_seq + 1).await?, false)
            }
            _ => (Vec::new(), false),
        };
        if !tasks.is_empty() {
            db::insert_hit(tx, w.id, last_seq + 1, qualification, &tasks, now).await?;
        }
        queue::settle(tx, tally).await?;
    }
    // Also with nothing handed out: the expiry stands.
    wtx.commit().await?;
    Ok(first_open(state.db.last_hit(w.id).await?))
}

async fn submit(
    State(state): State<Arc<AppState>>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Answered {
    let (s, w) = annotator(&state, &headers).await?;
    check_csrf(&s, &form)?;
    let study = &state.study;
    let a = state.db.assignment(id).await?.filter(|a| a.worker_id == w.id);
    let Some(a) = a else {
        return Err(AppError::NotFound("No such item among yours.".into()));
    };
    let Some((instance, modality, qualification)) = task_spec(study, a.task_id) else {
        return Err(AppError::NotFound("This item is not part of the study.".into()));
    };
    let sub = Submission {
        order: form.get("order").map(String::as_str),
        confidence: form.get("confidence").map(String::as_str),
        helped: form.get("helped").map(String::as_str),
        alternatives: form.get("alternatives").map(String::as_str),
    };
    // Qualification items are always ordered (they have known answers), in either kind of study.
    let kind = if qualification { StudyKind::Ordering } else { study.rules.kind };
    let answer = judgements::validate(study, kind, instance, modality, &sub).map_err(AppError::BadRequest)?;
    let now = now_ms();
    let mut wtx = state.db.begin_write().await?;
    let tx = &mut wtx.tx;
    // Lock the person's row first: two of their submissions then run one after the other, so the qualification
    // verdict and censoring always see every answer.
    let status = db::lock_worker(tx, w.id).await?;
    if !qualification && a.status == OPEN && db::done_count(&mut **tx, a.task_id).await? >= study.rules.judgements {
        drop(wtx);
        state.db.release(a.id).await?;
        return Err(AppError::Conflict(
            "This item was held too long and others have answered it meanwhile; go on with the next one at /work."
                .into(),
        ));
    }
    match db::store_answer(tx, id, &answer.to_json(), now).await? {
        Submitted::Stored => {
            let mut tally = queue::Tally::default();
            if !qualification {
                queue::count_again(tx, &mut tally, id).await?;
            }
            after_submission(tx, &mut tally, study, &w, &status, qualification).await?;
            queue::settle(tx, tally).await?;
            wtx.commit().await?;
        }
        Submitted::Repeated => {}
        Submitted::Conflict(m) => return Err(AppError::Conflict(m)),
    }
    Ok(Redirect::to("/work").into_response())
}

/// What follows from a stored answer, in its transaction: the HIT's completion, the qualification verdict once
/// every qualification item is answered, and censoring below the accuracy floor (items re-queued).
async fn after_submission(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    tally: &mut queue::Tally,
    study: &Study,
    w: &WorkerRow,
    status: &str,
    qualification: bool,
) -> Result<(), Error> {
    let censoring = study.rules.kind == StudyKind::Ordering && study.rules.censor_floor > 0.0;
    if !qualification && !censoring {
        return Ok(());
    }
    let rows = sqlx::query("SELECT task_id, status, answer FROM assignments WHERE worker_id = $1")
        .bind(w.id)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)?;
    // (qualification?, status, exact?) per assignment of this person
    let mine: Vec<(bool, String, Option<bool>)> = rows
        .iter()
        .filter_map(|r| {
            let (instance, _, q) = task_spec(study, db::col::<i64>(r, 0).ok()?)?;
            let answer: Option<Answer> =
                db::col::<Option<String>>(r, 2).ok()?.and_then(|t| serde_json::from_str(&t).ok());
            let exact = answer.and_then(|ans| ans.order).map(|o| study.is_reference(instance, &o));
            Some((q, db::col::<String>(r, 1).ok()?, exact))
        })
        .collect();
    let share = |v: &[Option<bool>]| v.iter().filter(|e| **e == Some(true)).count() as f64 / v.len().max(1) as f64;
    if qualification {
        let quals: Vec<&(bool, String, Option<bool>)> = mine.iter().filter(|m| m.0).collect();
        if quals.iter().all(|m| m.1 == DONE) && status == WORKER_QUALIFYING {
            let exacts: Vec<Option<bool>> = quals.iter().map(|m| m.2).collect();
            let score = share(&exacts);
            let status = if score >= study.rules.qualification_threshold { WORKER_ACTIVE } else { WORKER_FAILED };
            sqlx::query("UPDATE workers SET status = $1, qualification_score = $2 WHERE id = $3")
                .bind(status)
                .bind(score)
                .bind(w.id)
                .execute(&mut **tx)
                .await
                .map_err(db_error)?;
        }
        return Ok(());
    }
    let done: Vec<Option<bool>> = mine.iter().filter(|m| !m.0 && m.1 == DONE).map(|m| m.2).collect();
    if done.len() >= study.rules.censor_min_items.max(1) && share(&done) < study.rules.censor_floor {
        sqlx::query("UPDATE workers SET status = $1 WHERE id = $2")
            .bind(WORKER_CENSORED)
            .bind(w.id)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
        // Their study items (answered or not) stop counting: the scheduler re-queues them for others.
        let held = sqlx::query(
            "UPDATE assignments SET status = $1, holds = 0 WHERE worker_id = $2 AND status IN ($3, $4) \
             AND holds = 1 RETURNING task_id",
        )
        .bind(DISCARDED)
        .bind(w.id)
        .bind(OPEN)
        .bind(DONE)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)?;
        queue::give_back(tx, tally, &held).await?;
        sqlx::query(
            "UPDATE assignments SET status = $1 WHERE worker_id = $2 AND status IN ($3, $4) \
             AND task_id IN (SELECT id FROM tasks WHERE qualification = 0)",
        )
        .bind(DISCARDED)
        .bind(w.id)
        .bind(OPEN)
        .bind(DONE)
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    }
    Ok(())
}

async fn image(State(state): State<Arc<AppState>>, headers: HeaderMap, Path(path): Path<String>) -> Answered {
    if session(&state, &headers).await?.is_none() {
        return Err(AppError::Forbidden("Sign in to see the study's images.".into()));
    }
    let not_found = || AppError::NotFound("No such image in this study.".into());
    // `path` is already percent-decoded by the router. Only paths the study's items name are read, and only
    // when they resolve inside the image root (a symlink out of it is refused too).
    let rel = path;
    if !state.images.contains(&rel) {
        return Err(not_found());
    }
    let root: PathBuf = state.study.image_root.clone().ok_or_else(not_found)?;
    let file = root.join(&rel);
    let bytes = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Vec<u8>>> {
        let (root, file) = (root.canonicalize()?, file.canonicalize()?);
        if !file.starts_with(&root) {
            return Ok(None);
        }
        // Not a pipe or a device, which would never end: a study only names files.
        Ok(stepwise_core::paths::read_regular_file(&file).ok())
    })
    .await
    .map_err(|e| AppError::Unavailable(e.to_string()))?
    .ok()
    .flatten()
    .ok_or_else(not_found)?;
    let ext = rel.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    let content_type = match ext.as_str() {
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "webp" => "image/webp",
        "gif" => "image/gif",
        _ => "application/octet-stream",
    };
    Ok(([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "private, max-age=3600")], Body::from(bytes))
        .into_response())
}

async fn logout(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Answered {
    if let Some(s) = session(&state, &headers).await? {
        check_csrf(&s, &form)?;
        state.db.delete_session(&s.token).await?;
    }
    Ok(see_other("/", &[set_cookie(SESSION_COOKIE, "", "/", Some(0))]))
}

async fn login_form(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Answered {
    if admin(&state, &headers).await?.is_some() {
        return Ok(Redirect::to("/admin").into_response());
    }
    let token = crate::auth::new_token(16);
    let mut r = Html(pages::login_page(&token, None)).into_response();
    if let Ok(v) = HeaderValue::from_str(&set_cookie(LOGIN_COOKIE, &token, "/admin/login", Some(3600))) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(r)
}

async fn login(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Answered {
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or("");
    match form.get("csrf") {
        Some(t) if !expected.is_empty() && crate::auth::same_secret(t, expected) => {}
        _ => return Err(AppError::Forbidden("The sign-in form expired; reload /admin/login.".into())),
    }
    let password = form.get("password").cloned().unwrap_or_default();
    let hash = state.study.admin_password_hash.clone();
    let _permit = state.logins.try_acquire().map_err(|_| AppError::Busy)?;
    let ok = tokio::task::spawn_blocking(move || crate::auth::verify_password(&hash, &password))
        .await
        .map_err(|e| AppError::Unavailable(e.to_string()))?;
    if !ok {
        // Held with the permit: at most a few guesses per second, whatever the number of connections.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let mut r =
            (StatusCode::UNAUTHORIZED, Html(pages::login_page(expected, Some("Wrong password.")))).into_response();
        r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return Ok(r);
    }
    let s = state.db.create_session(None, true, now_ms()).await?;
    Ok(see_other(
        "/admin",
        &[set_cookie(SESSION_COOKIE, &s.token, "/", None), set_cookie(LOGIN_COOKIE, "", "/admin/login", Some(0))],
    ))
}

async fn dashboard(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Answered {
    let Some(s) = admin(&state, &headers).await? else {
        return Ok(Redirect::to("/admin/login").into_response());
    };
    let html = crate::dashboard::render(&state.study, &state.db, &s.csrf, None).await?;
    Ok(Html(html).into_response())
}

/// The study's export as a zip (what `stepwise annotate export` writes, default options), for the admin only.
async fn export_zip(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Answered {
    if admin(&state, &headers).await?.is_none() {
        return Ok(Redirect::to("/admin/login").into_response());
    }
    let workers = state.db.workers().await?;
    let assignments = state.db.assignments(None).await?;
    let state2 = state.clone();
    let made = tokio::task::spawn_blocking(move || {
        crate::export::export_zip(&state2.study, &workers, &assignments, &crate::export::ExportOptions::default())
    })
    .await;
    let bytes = made.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| e.to_string())).map_err(|why| {
        tracing::error!("export download: {why}");
        AppError::ExportFailed
    })?;
    let mut r = Response::new(Body::from(bytes));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/zip"));
    h.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment; filename=\"stepwise-export.zip\""));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

async fn invites(
    State(state): State<Arc<AppState>>,
    Extension(Scheme(scheme)): Extension<Scheme>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Answered {
    let Some(s) = admin(&state, &headers).await? else {
        return Err(AppError::Forbidden("Only the admin can make invite links.".into()));
    };
    check_csrf(&s, &form)?;
    let count: usize = form
        .get("count")
        .and_then(|c| c.trim().parse().ok())
        .filter(|c| (1..=MAX_INVITES).contains(c))
        .ok_or_else(|| AppError::BadRequest(format!("count: a number from 1 to {MAX_INVITES}")))?;
    let prefix = form.get("label").map(|l| l.trim()).filter(|l| !l.is_empty()).unwrap_or("annotator");
    if prefix.chars().count() > 60 || prefix.chars().any(char::is_control) {
        return Err(AppError::BadRequest("label: at most 60 printable characters".into()));
    }
    let status = if state.study.rules.qualification_items > 0 { WORKER_QUALIFYING } else { WORKER_ACTIVE };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    let mut made = Vec::with_capacity(count);
    for _ in 0..count {
        let w = state.db.invite_worker(prefix, status, now_ms()).await?;
        made.push((w.label, format!("{scheme}://{host}/join/{}", w.invite)));
    }
    let html = crate::dashboard::render(&state.study, &state.db, &s.csrf, Some(&made)).await?;
    Ok(Html(html).into_response())
}

/// The runtime the annotation commands and their benchmark run on (two workers: this machine's cores).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
}

/// Serve a study until Ctrl-C or SIGTERM, over TLS with `tls`. `on_ready` gets the bound address (port 0 picks
/// a free one).
pub async fn serve(
    state: Arc<AppState>,
    bind: SocketAddr,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), Error> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| Error::usage(format!("--bind {bind}: cannot listen: {e}")))?;
    let addr = listener.local_addr().map_err(|e| Error::runtime(e.to_string()))?;
    let app = router(state).into_make_service_with_connect_info::<Peer>();
    let served = match tls {
        Some(config) => {
            let listener = TlsListener::new(listener, config).map_err(|e| Error::runtime(e.to_string()))?;
            on_ready(addr);
            axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await
        }
        None => {
            on_ready(addr);
            axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await
        }
    };
    served.map_err(|e| Error::runtime(format!("server: {e}")))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
