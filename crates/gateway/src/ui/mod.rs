//! The memory page (seed 001 sections 3.5.4 and 4, seed 003's memory panel): what each AI
//! employee remembers about a user, by type, with its confidence, evidence, freshness and
//! source; search; a memory's history; correct, suppress, freeze, restore, delete, adjust its
//! importance; the candidate queue; pending conflicts to confirm; the last session's summary;
//! and for a recent turn, which memories its context used and why. Served on
//! `gateway.ui_listen` (off by default), in Chinese or English following the user's language.
//!
//! Server-rendered HTML and one small script. Safe by default:
//! - the same keys as the REST facade: an API key entered once is kept in the session, sealed
//!   (encrypted and authenticated) in an HttpOnly, SameSite=Strict cookie that every replica
//!   sharing `gateway.ui_session_secret` accepts ([`session`]), and checked again on every
//!   request, so a revoked key stops working at once; in dev mode a loopback visitor needs none;
//! - every form carries the session's CSRF token (derived from the session with the same
//!   secret), checked before anything changes;
//! - every text from data is escaped; the content security policy allows only the page's own
//!   script and style (no inline code), no framing;
//! - a user the key may not act for, or an id of another user, is NOT_FOUND (the page does not
//!   say whether it exists).
//!
//! Changes made here are recorded as the user's (`user:<id>`), whatever role owns the memory.

pub mod html;
pub mod phrases;
pub mod session;
pub mod words;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use thinkus_backends::sql::CandidateStatus;
use thinkus_common::auth::{Authenticator, Origin, Principal, UserGrant, with_forwarded_credential};
use thinkus_common::limits::{Admission, Seat, TenantLimits};
use thinkus_common::model::{Language, Memory, MemoryStatus, MemoryType, Owner, RetrievalMode, Scope, Visibility};
use thinkus_common::text::{detect_language_of, summarize_to};
use thinkus_common::time::relative;
use thinkus_common::{ApiError, ErrorCode};
use thinkus_knowledge_manager::api::{ConflictChoice, CorrectRequest, CorrectionAction, ListRequest};
use thinkus_retriever::api::RecallRequest;
use thinkus_summary::api::ListRequest as SummaryList;

use crate::api::TraceKind;
use crate::service::Gateway;
use html::{button_form, csrf_field, esc, meter, page, seg};
use session::{SESSION_LIFETIME, Session, SessionKeys, same_bytes};
use words::{
    Words, change_label, date_time, mode_label, need_label, source_label, status_label, time_range_label, type_heading,
    visibility_label, words,
};

/// The session cookie's name.
pub const COOKIE: &str = "thinkus_ui";
/// The most memories of a turn's trace whose content is looked up for its page.
const MAX_TRACE_LOOKUPS: usize = 40;

const CSS: &str = include_str!("app.css");
const JS: &str = include_str!("app.js");

/// The order of the types on the page.
const TYPE_ORDER: [MemoryType; 13] = [
    MemoryType::UserPreference,
    MemoryType::Constraint,
    MemoryType::ProjectDecision,
    MemoryType::Fact,
    MemoryType::Feedback,
    MemoryType::DiscussionConclusion,
    MemoryType::ActionItem,
    MemoryType::Risk,
    MemoryType::Insight,
    MemoryType::Issue,
    MemoryType::Learning,
    MemoryType::Pattern,
    MemoryType::ConversationTurn,
];

/// The fields of an `application/x-www-form-urlencoded` body (`+` is a space, `%XX` a byte);
/// a repeated name keeps its first value.
fn parse_form(body: &[u8]) -> HashMap<String, String> {
    fn decode(part: &str) -> String {
        let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
        let bytes = part.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(high), Some(low)) => {
                        out.push(high * 16 + low);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                },
                byte => out.push(byte),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    let mut fields = HashMap::new();
    for pair in String::from_utf8_lossy(body).split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        fields.entry(decode(name)).or_insert_with(|| decode(value));
    }
    fields
}

/// What the page's handlers share.
#[derive(Clone)]
pub struct UiState {
    pub gateway: Arc<Gateway>,
    pub authenticator: Arc<Authenticator>,
    /// The process's admission, shared with its gRPC services and the REST facade.
    pub admission: Admission,
    /// The address the page is bound to (dev mode needs it on loopback).
    pub listener: Option<SocketAddr>,
    /// The longest a request waits for a seat.
    pub request_timeout: Duration,
    /// What sessions are sealed with: the same on every replica sharing the secret.
    pub sessions: Arc<SessionKeys>,
}

impl UiState {
    pub fn new(
        gateway: Arc<Gateway>,
        authenticator: Arc<Authenticator>,
        admission: Admission,
        listener: Option<SocketAddr>,
        request_timeout: Duration,
    ) -> Self {
        let sessions = match gateway.config.ui_session_secret.as_str() {
            "" => SessionKeys::random(),
            secret => SessionKeys::new(secret.as_bytes()),
        };
        Self {
            gateway,
            authenticator,
            admission,
            listener,
            request_timeout,
            sessions: Arc::new(sessions),
        }
    }

    /// The session of a request's cookie, or a new one; with the cookie to set when it is new
    /// or its expiry was moved on.
    fn session_of(&self, headers: &HeaderMap) -> (Session, Option<String>, bool) {
        let now = Utc::now().timestamp();
        match cookie_value(headers).and_then(|c| self.sessions.open(&c, now)) {
            Some(session) if !session.needs_refresh(now) => (session, None, false),
            Some(session) => {
                let session = Session {
                    expires: Session::new(now).expires,
                    ..session
                };
                let cookie = set_cookie(&self.sessions.seal(&session));
                (session, Some(cookie), false)
            }
            None => {
                let session = Session::new(now);
                let cookie = set_cookie(&self.sessions.seal(&session));
                (session, Some(cookie), true)
            }
        }
    }
}

/// The router of the page.
pub fn router(state: UiState) -> Router {
    Router::new()
        .route(
            "/static/app.css",
            get(|| async { asset("text/css; charset=utf-8", CSS) }),
        )
        .route(
            "/static/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", JS) }),
        )
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .route("/", get(home))
        .route("/open", get(open_user))
        .route("/u/{user}", get(user_page))
        .route("/u/{user}/r/{role}", get(role_page))
        .route("/u/{user}/m/{id}", get(memory_page))
        .route("/u/{user}/m/{id}/{action}", post(memory_action))
        .route("/u/{user}/c/{id}/{action}", post(candidate_action))
        .route("/u/{user}/k/{id}/{keep}", post(conflict_action))
        .route("/u/{user}/t/{id}", get(trace_page))
        .route("/u/{user}/export", get(export_page))
        .route("/u/{user}/export.tar", get(export_archive))
        .route("/u/{user}/export.json", get(export_everything))
        .fallback(|| async { UiError::NotFound.into_response() })
        .layer(axum::middleware::from_fn(localize_errors))
        .with_state(state)
}

/// Serves the page on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: UiState,
    tls: Option<thinkus_common::tls::ServerTls>,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    thinkus_common::tls::serve_http(listener, tls.as_ref(), router(state), shutdown).await
}

/// Headers every answer carries.
fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: &'static str, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "x-frame-options", "DENY");
    set(headers, "referrer-policy", "no-referrer");
    set(headers, "cache-control", "no-store");
    response
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = secure(body.into_response());
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    response
}

/// Why a request is not answered with its page.
#[derive(Debug)]
pub enum UiError {
    /// No credentials (API key mode): the sign-in form, keeping a new session's cookie.
    SignIn(Option<String>),
    /// The CSRF token is missing or wrong.
    Forbidden,
    NotFound,
    Api(ApiError),
}

impl From<ApiError> for UiError {
    fn from(err: ApiError) -> Self {
        match err.code {
            ErrorCode::Unauthenticated => UiError::SignIn(None),
            // Another tenant's user or id: the page does not say it exists.
            ErrorCode::NotFound | ErrorCode::PermissionDenied => UiError::NotFound,
            _ => UiError::Api(err),
        }
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let (status, failure) = match self {
            UiError::SignIn(cookie) => {
                let mut response = StatusCode::SEE_OTHER.into_response();
                response
                    .headers_mut()
                    .insert(header::LOCATION, HeaderValue::from_static("/login"));
                if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
                    response.headers_mut().insert(header::SET_COOKIE, value);
                }
                return secure(response);
            }
            UiError::Forbidden => (StatusCode::FORBIDDEN, Failure::Forbidden),
            UiError::NotFound => (StatusCode::NOT_FOUND, Failure::NotFound),
            UiError::Api(err) => {
                let status = StatusCode::from_u16(err.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let message = if status == StatusCode::INTERNAL_SERVER_ERROR {
                    tracing::error!(error = %err.message, "internal error on the memory page");
                    "internal error".to_string()
                } else {
                    err.message
                };
                (status, Failure::Api(message))
            }
        };
        failure_page(status, &failure, None)
    }
}

/// What an error page says, kept on its response so that [`localize_errors`] can say it again in
/// the visitor's language.
#[derive(Debug, Clone)]
enum Failure {
    Forbidden,
    NotFound,
    /// The service's message.
    Api(String),
}

/// An error page: in `language`, or in both when the visitor named neither.
fn failure_page(status: StatusCode, failure: &Failure, language: Option<Language>) -> Response {
    let pick = |zh: &str, en: &str| match language {
        Some(Language::Zh) => zh.to_string(),
        Some(Language::En) => en.to_string(),
        None => format!("{zh} / {en}"),
    };
    let (zh, en) = (&words::ZH, &words::EN);
    let (title, text) = match failure {
        Failure::Forbidden => (
            pick(zh.forbidden, en.forbidden),
            pick(zh.forbidden_hint, en.forbidden_hint),
        ),
        Failure::NotFound => (
            pick(zh.not_found, en.not_found),
            pick(zh.not_found_hint, en.not_found_hint),
        ),
        Failure::Api(message) => (
            pick(zh.error, en.error),
            match language {
                Some(language) => phrases::localize(message, language),
                None => message.clone(),
            },
        ),
    };
    let body = format!(
        "<h1>{}</h1><p>{}</p><p><a href=\"/\">←</a></p>",
        esc(&title),
        esc(&text)
    );
    let lang = if language == Some(Language::Zh) { "zh" } else { "en" };
    let html = page(lang, &title, "<a class=\"brand\" href=\"/\">Thinkus</a>", &body);
    let mut response = secure((status, axum::response::Html(html)).into_response());
    response.extensions_mut().insert(failure.clone());
    response
}

/// Writes an error page again in the language the request names (`?lang=`, else the browser's
/// `Accept-Language`): an error can happen before the page knows whose it is.
async fn localize_errors(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let asked = request
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("lang=")))
        .and_then(|l| l.parse::<Language>().ok())
        .or_else(|| named_language(request.headers()));
    let response = next.run(request).await;
    match (asked, response.extensions().get::<Failure>()) {
        (Some(language), Some(failure)) => failure_page(response.status(), &failure.clone(), Some(language)),
        _ => response,
    }
}

/// One request's visitor: their session and principal.
struct Visit {
    csrf: String,
    principal: Principal,
    /// The session's cookie to set (a new session, or a later expiry).
    cookie: Option<String>,
    /// The session began with this request: no form of it can carry its token yet.
    new: bool,
    /// The request's seat in the process's admission, held while it is answered (none for
    /// the sign-in form, which reads no data).
    _seat: Option<Seat>,
}

/// The first of Chinese and English the browser asks for (`Accept-Language`, most wanted
/// first), for a page of no user; Chinese when it names neither.
fn accepted_language(headers: &HeaderMap) -> Language {
    named_language(headers).unwrap_or(Language::Zh)
}

/// The first of Chinese and English `Accept-Language` names, if it names either.
fn named_language(headers: &HeaderMap) -> Option<Language> {
    let mut asked: Vec<(f32, usize, Language)> = headers
        .get_all(header::ACCEPT_LANGUAGE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .enumerate()
        .filter_map(|(n, item)| {
            let mut parts = item.split(';');
            let tag = parts.next()?.trim().to_ascii_lowercase();
            let weight = parts
                .find_map(|p| p.trim().strip_prefix("q=").and_then(|q| q.parse::<f32>().ok()))
                .unwrap_or(1.0);
            let language = match tag.split('-').next()? {
                "zh" => Language::Zh,
                "en" => Language::En,
                _ => return None,
            };
            Some((weight, n, language))
        })
        .collect();
    asked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    asked.first().map(|(_, _, language)| *language)
}

fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

fn set_cookie(sealed: &str) -> String {
    format!(
        "{COOKIE}={sealed}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        SESSION_LIFETIME.as_secs()
    )
}

impl UiState {
    /// The visitor of a request: their session (a new one when they have none), authenticated
    /// with the key it holds, admitted as every request of the process is (its tenant's rate
    /// and a seat).
    async fn visit(&self, headers: &HeaderMap, peer: SocketAddr) -> Result<Visit, UiError> {
        let (session, cookie, new) = self.session_of(headers);
        let csrf = self.sessions.csrf(&session);
        let origin = Origin::of(self.listener, Some(peer), headers);
        let principal = match self.authenticator.authenticate(session.key.as_deref(), &origin) {
            Ok(principal) => principal,
            // The sign-in form needs the session's cookie for its CSRF token.
            Err(err) if err.code == ErrorCode::Unauthenticated => return Err(UiError::SignIn(cookie)),
            Err(err) => return Err(err.into()),
        };
        let limits = TenantLimits {
            rate_per_second: principal.rate_per_second,
            concurrency: principal.max_concurrency,
        };
        let seat = self
            .admission
            .admit(
                &principal.tenant,
                limits,
                "memory page",
                Some(Instant::now() + self.request_timeout),
            )
            .await?;
        Ok(Visit {
            csrf,
            principal,
            cookie,
            new,
            _seat: Some(seat),
        })
    }

    /// Like [`Self::visit`], and checks the form's CSRF token.
    async fn posted(
        &self,
        headers: &HeaderMap,
        peer: SocketAddr,
        form: &HashMap<String, String>,
    ) -> Result<Visit, UiError> {
        let visit = self.visit(headers, peer).await?;
        match form.get("csrf") {
            Some(token) if !visit.new && same_bytes(token.as_bytes(), visit.csrf.as_bytes()) => Ok(visit),
            _ => Err(UiError::Forbidden),
        }
    }
}

fn html_response(visit: &Visit, html: String) -> Response {
    let mut response = secure(axum::response::Html(html).into_response());
    if let Some(cookie) = &visit.cookie
        && let Ok(value) = HeaderValue::from_str(cookie)
    {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

impl UiState {
    /// A redirect to `location` that gives the visitor a new session holding `key`.
    fn new_session(&self, key: Option<String>, location: &str) -> Response {
        let session = Session {
            key,
            ..Session::new(Utc::now().timestamp())
        };
        let mut response = redirect(location);
        if let Ok(value) = HeaderValue::from_str(&set_cookie(&self.sessions.seal(&session))) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        response
    }
}

fn redirect(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    secure(response)
}

impl Visit {
    /// A scope of `user` in the visitor's own tenant (a service key included: the page never
    /// reaches into another tenant), checked against what the key may act for.
    fn scope(&self, user: &str, role: &str, project: Option<&str>) -> Result<Scope, UiError> {
        let mut scope = Scope {
            tenant_id: self.principal.tenant.clone(),
            user_id: user.to_string(),
            role_id: role.to_string(),
            project_id: project.filter(|p| !p.is_empty()).map(str::to_string),
            session_id: None,
        };
        self.principal.authorize(&mut scope)?;
        Ok(scope)
    }

    /// The scope of a person acting for a user: changes are recorded as the user's.
    fn person(&self, user: &str) -> Result<Scope, UiError> {
        self.scope(user, "", None)
    }
}

/// Query parameters every page reads.
#[derive(Debug, Default, serde::Deserialize)]
struct PageQuery {
    lang: Option<String>,
    /// A project to narrow to.
    p: Option<String>,
    /// A search.
    q: Option<String>,
    /// Show memories in every status.
    all: Option<String>,
    /// Show the conversation turns.
    turns: Option<String>,
    /// What was just done (a code: corrected, suppressed...).
    done: Option<String>,
}

impl PageQuery {
    fn language(&self) -> Option<Language> {
        self.lang.as_deref().and_then(|l| l.parse().ok())
    }

    /// The query string that keeps the page's language and project.
    fn keep(&self) -> String {
        let mut parts = Vec::new();
        if let Some(lang) = self.language() {
            parts.push(format!("lang={}", lang.as_str()));
        }
        if let Some(project) = self.p.as_deref().filter(|p| !p.is_empty()) {
            parts.push(format!("p={}", seg(project)));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("?{}", parts.join("&"))
        }
    }
}

fn done_text(w: &Words, code: Option<&str>) -> Option<&'static str> {
    Some(match code? {
        "corrected" => w.done_corrected,
        "suppressed" => w.done_suppressed,
        "frozen" => w.done_frozen,
        "restored" => w.done_restored,
        "deleted" => w.done_deleted,
        "importance" => w.done_importance,
        "approved" => w.done_approved,
        "rejected" => w.done_rejected,
        "resolved" => w.done_resolved,
        _ => return None,
    })
}

impl UiState {
    async fn forward<F: Future>(&self, visit: &Visit, work: F) -> F::Output {
        with_forwarded_credential(visit.principal.credential.clone(), work).await
    }

    /// The language of the user's memories (the page's language unless `?lang=` says otherwise).
    async fn language_of(&self, visit: &Visit, user: &str, asked: Option<Language>) -> Result<Language, UiError> {
        if let Some(language) = asked {
            return Ok(language);
        }
        let knowledge = &self.gateway.upstreams.knowledge;
        let recent = self
            .forward(
                visit,
                knowledge.list_memories(ListRequest {
                    scope: visit.person(user)?,
                    limit: 100,
                    ..Default::default()
                }),
            )
            .await?;
        let curated: Vec<&str> = recent
            .iter()
            .filter(|m| m.memory_type != MemoryType::ConversationTurn)
            .map(|m| m.content.as_str())
            .collect();
        Ok(if curated.is_empty() {
            detect_language_of(recent.iter().map(|m| m.content.as_str()))
        } else {
            detect_language_of(curated)
        })
    }
}

/// The header of a user's pages: the brand, the language switch, sign out.
fn top(visit: &Visit, w: &Words, user: Option<&str>, here: &str) -> String {
    let other = if w.lang == "zh" { "en" } else { "zh" };
    let separator = if here.contains('?') { '&' } else { '?' };
    let switch = format!("{here}{separator}lang={other}");
    let mut out = String::from("<a class=\"brand\" href=\"/\">Thinkus · ");
    out.push_str(esc(w.title).as_str());
    out.push_str("</a>");
    if let Some(user) = user {
        let _ = write!(out, "<a href=\"/u/{}?lang={}\">{}</a>", seg(user), w.lang, esc(user));
    }
    out.push_str("<span class=\"spacer\"></span>");
    let _ = write!(
        out,
        "<a href=\"{}\" id=\"switch-language\">{}</a>",
        esc(&switch),
        esc(w.other_language)
    );
    if visit.principal.credential.is_some() {
        out.push_str(&button_form("/logout", &visit.csrf, w.sign_out, "", &[], None));
    }
    out
}

async fn login_form(State(state): State<UiState>, headers: HeaderMap) -> Response {
    let (session, cookie, new) = state.session_of(&headers);
    let csrf = state.sessions.csrf(&session);
    let body = format!(
        "<h1>{zh} / {en}</h1><p>{hint_zh}<br>{hint_en}</p>\
         <form method=\"post\" action=\"/login\" class=\"stack\">{csrf}\
         <label>{key_zh} / {key_en} <input type=\"password\" name=\"key\" autocomplete=\"off\" required></label>\
         <button type=\"submit\" class=\"primary\">{zh} / {en}</button></form>",
        zh = words::ZH.sign_in,
        en = words::EN.sign_in,
        hint_zh = words::ZH.sign_in_hint,
        hint_en = words::EN.sign_in_hint,
        key_zh = words::ZH.api_key,
        key_en = words::EN.api_key,
        csrf = csrf_field(&csrf),
    );
    let visit = Visit {
        csrf,
        principal: Principal::dev(),
        cookie,
        new,
        _seat: None,
    };
    html_response(
        &visit,
        page("en", "Thinkus", "<a class=\"brand\" href=\"/\">Thinkus</a>", &body),
    )
}

async fn login(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = parse_form(&body);
    let (session, _, new) = state.session_of(&headers);
    let csrf = state.sessions.csrf(&session);
    if new
        || !form
            .get("csrf")
            .is_some_and(|t| same_bytes(t.as_bytes(), csrf.as_bytes()))
    {
        return UiError::Forbidden.into_response();
    }
    let key = form.get("key").map(|k| k.trim().to_string()).filter(|k| !k.is_empty());
    if key.as_ref().is_some_and(|k| k.len() > session::MAX_KEY_BYTES) {
        return UiError::Api(ApiError::invalid(
            "key",
            format!("is longer than {} bytes", session::MAX_KEY_BYTES),
        ))
        .into_response();
    }
    let origin = Origin::of(state.listener, Some(peer), &headers);
    match state.authenticator.authenticate(key.as_deref(), &origin) {
        // A new session (a new id, so a new CSRF token) holding the key.
        Ok(_) => state.new_session(key, "/"),
        Err(err) => UiError::Api(err).into_response(),
    }
}

async fn logout(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = parse_form(&body);
    match state.posted(&headers, peer, &form).await {
        // A new session without the key.
        Ok(_) => state.new_session(None, "/login"),
        Err(err) => err.into_response(),
    }
}

async fn home(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> Response {
    let visit = match state.visit(&headers, peer).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    let w = words(query.language().unwrap_or_else(|| accepted_language(&headers)));
    let mut body = format!("<h1>{}</h1>", esc(w.users));
    if let UserGrant::Only(users) = &visit.principal.users {
        let mut users: Vec<&String> = users.iter().collect();
        users.sort();
        body.push_str("<div class=\"roles\">");
        for user in users {
            let _ = write!(body, "<a href=\"/u/{}\">{}</a>", seg(user), esc(user));
        }
        body.push_str("</div>");
    }
    let _ = write!(
        body,
        "<form method=\"get\" action=\"/open\" class=\"card\"><label>{} <input type=\"text\" name=\"user\" required></label> <button type=\"submit\" class=\"primary\">{}</button></form>",
        esc(w.user_id),
        esc(w.open)
    );
    let html = page(w.lang, w.title, &top(&visit, w, None, "/"), &body);
    html_response(&visit, html)
}

#[derive(serde::Deserialize)]
struct OpenQuery {
    user: String,
}

async fn open_user(Query(query): Query<OpenQuery>) -> Response {
    redirect(&format!("/u/{}", seg(query.user.trim())))
}

async fn user_page(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(user): Path<String>,
    Query(query): Query<PageQuery>,
) -> Response {
    let visit = match state.visit(&headers, peer).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    match user_body(&state, &visit, &user, &query).await {
        Ok(html) => html_response(&visit, html),
        Err(err) => err.into_response(),
    }
}

async fn user_body(state: &UiState, visit: &Visit, user: &str, query: &PageQuery) -> Result<String, UiError> {
    visit.principal.authorize_user(user)?;
    let language = state.language_of(visit, user, query.language()).await?;
    let w = words(language);
    let knowledge = &state.gateway.upstreams.knowledge;
    let roles = state
        .forward(visit, knowledge.list_roles(visit.person(user)?.owner()))
        .await?;
    let mut body = format!("<h1>{}</h1>", esc(user));
    if let Some(done) = done_text(w, query.done.as_deref()) {
        let _ = write!(body, "<p class=\"flash\" id=\"flash\">{}</p>", esc(done));
    }
    let _ = write!(body, "<h2>{}</h2>", esc(w.roles));
    if roles.is_empty() {
        let _ = write!(body, "<p class=\"muted\">{}</p>", esc(w.no_roles));
    } else {
        body.push_str("<div class=\"roles\" id=\"roles\">");
        for role in &roles {
            let _ = write!(
                body,
                "<a href=\"/u/{}/r/{}?lang={}\">{}</a>",
                seg(user),
                seg(role),
                w.lang,
                esc(role)
            );
        }
        body.push_str("</div>");
    }
    let _ = write!(
        body,
        "<p><a id=\"export\" href=\"/u/{}/export?lang={}\">{}</a></p>",
        seg(user),
        w.lang,
        esc(w.export)
    );
    let here = format!("/u/{}", seg(user));
    body.push_str(&conflicts_section(state, visit, w, user, None, None, &here).await?);
    body.push_str(&candidates_section(state, visit, w, user, None, &here).await?);
    Ok(page(
        w.lang,
        &format!("{user} · {}", w.title),
        &top(visit, w, Some(user), &here),
        &body,
    ))
}

async fn role_page(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((user, role)): Path<(String, String)>,
    Query(query): Query<PageQuery>,
) -> Response {
    let visit = match state.visit(&headers, peer).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    match role_body(&state, &visit, &user, &role, &query).await {
        Ok(html) => html_response(&visit, html),
        Err(err) => err.into_response(),
    }
}

/// One memory as a list item.
fn memory_item(
    w: &Words,
    language: Language,
    user: &str,
    memory: &Memory,
    now: chrono::DateTime<Utc>,
    keep: &str,
) -> String {
    let stars = "★".repeat(memory.importance as usize) + &"☆".repeat(5usize.saturating_sub(memory.importance as usize));
    let mut item = format!(
        "<li id=\"{id}\" data-memory=\"{id}\"><div class=\"content\">{content}</div><div class=\"meta\">",
        id = esc(&memory.id),
        content = esc(&memory.content),
    );
    if memory.status != MemoryStatus::Active {
        let _ = write!(
            item,
            "<span class=\"badge {}\">{}</span>",
            memory.status.as_str(),
            esc(status_label(memory.status, language))
        );
    }
    let _ = write!(
        item,
        "<span title=\"{imp}\">{stars}</span><span>{conf_label} {meter} {conf:.0}%</span><span>{ev_label} {ev}</span>\
         <span>{fresh_label} {fresh:.1}/5</span><span>{src}</span><span>{vis}</span><span>{role}</span><span>{when}</span>\
         <a href=\"/u/{user}/m/{id}{keep}\">{details}</a></div></li>",
        imp = esc(w.importance),
        conf_label = esc(w.confidence),
        meter = meter(memory.confidence, w.confidence),
        conf = memory.confidence * 100.0,
        ev_label = esc(w.evidence),
        ev = memory.evidence_count,
        fresh_label = esc(w.freshness),
        fresh = memory.freshness,
        src = esc(source_label(memory.source, language)),
        vis = esc(visibility_label(memory.visibility, language)),
        role = esc(&memory.scope.role_id),
        when = esc(&relative(memory.occurred_at, now, language)),
        user = seg(user),
        id = seg(&memory.id),
        keep = esc(keep),
        details = esc(w.details),
    );
    item
}

async fn role_body(
    state: &UiState,
    visit: &Visit,
    user: &str,
    role: &str,
    query: &PageQuery,
) -> Result<String, UiError> {
    visit.principal.authorize_user(user)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    let project = query.p.clone().filter(|p| !p.is_empty());
    let scope = visit.scope(user, role, project.as_deref())?;
    let show_all = query.all.is_some();
    let statuses = if show_all {
        MemoryStatus::ALL.to_vec()
    } else {
        vec![MemoryStatus::Active]
    };
    let types = if query.turns.is_some() {
        Vec::new()
    } else {
        TYPE_ORDER
            .iter()
            .copied()
            .filter(|t| *t != MemoryType::ConversationTurn)
            .collect()
    };
    // In one project: what the role sees there. Across projects: what it owns anywhere and
    // what is shared with it (with a project's roles or every role).
    let memories: Vec<Memory> = state
        .forward(
            visit,
            knowledge.list_memories(ListRequest {
                scope: if project.is_some() {
                    scope.clone()
                } else {
                    visit.person(user)?
                },
                types,
                statuses,
                limit: 500,
                offset: 0,
            }),
        )
        .await?
        .into_iter()
        .filter(|m| project.is_some() || m.scope.role_id == role || m.visibility != Visibility::Private)
        .collect();
    let language = match query.language() {
        Some(language) => language,
        None => {
            let curated: Vec<&str> = memories
                .iter()
                .filter(|m| m.memory_type != MemoryType::ConversationTurn)
                .map(|m| m.content.as_str())
                .collect();
            if curated.is_empty() {
                state.language_of(visit, user, None).await?
            } else {
                detect_language_of(curated)
            }
        }
    };
    let w = words(language);
    let now = Utc::now();
    let keep = query.keep();
    let here = format!("/u/{}/r/{}{}", seg(user), seg(role), keep);
    let roles = state
        .forward(visit, knowledge.list_roles(visit.person(user)?.owner()))
        .await?;

    let mut body = String::new();
    let _ = write!(
        body,
        "<h1 id=\"title\">{}</h1>",
        esc(&if language == Language::Zh {
            format!("{role} {}", w.what_remembers)
        } else {
            format!("What {role} {}", w.what_remembers)
        })
    );
    body.push_str("<div class=\"roles\">");
    for other in &roles {
        let _ = write!(
            body,
            "<a href=\"/u/{}/r/{}?lang={}\" class=\"{}\">{}</a>",
            seg(user),
            seg(other),
            w.lang,
            if other == role { "on" } else { "" },
            esc(other)
        );
    }
    body.push_str("</div>");
    if let Some(done) = done_text(w, query.done.as_deref()) {
        let _ = write!(body, "<p class=\"flash\" id=\"flash\">{}</p>", esc(done));
    }

    // Projects seen in these memories, to narrow to one.
    let mut projects: Vec<String> = memories.iter().filter_map(|m| m.scope.project_id.clone()).collect();
    projects.sort();
    projects.dedup();
    let _ = write!(
        body,
        "<form method=\"get\" action=\"/u/{}/r/{}\" class=\"actions\" id=\"search\">\
         <input type=\"hidden\" name=\"lang\" value=\"{}\">\
         <input type=\"search\" name=\"q\" value=\"{}\" placeholder=\"{}\">",
        seg(user),
        seg(role),
        w.lang,
        esc(query.q.as_deref().unwrap_or("")),
        esc(w.search_placeholder)
    );
    if !projects.is_empty() || project.is_some() {
        let _ = write!(
            body,
            "<select name=\"p\"><option value=\"\">{}</option>",
            esc(w.all_projects)
        );
        if let Some(chosen) = &project
            && !projects.contains(chosen)
        {
            projects.push(chosen.clone());
        }
        for p in &projects {
            let selected = if Some(p) == project.as_ref() { " selected" } else { "" };
            let _ = write!(body, "<option value=\"{}\"{selected}>{}</option>", esc(p), esc(p));
        }
        body.push_str("</select>");
    }
    let _ = write!(
        body,
        "<button type=\"submit\" class=\"primary\">{}</button></form>",
        esc(w.search)
    );

    if let Some(q) = query.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        // Across projects, the role's cross-project layer and each of its projects (a few).
        let mut scopes = vec![scope.clone()];
        if project.is_none() {
            for p in projects.iter().take(5) {
                scopes.push(Scope {
                    project_id: Some(p.clone()),
                    ..scope.clone()
                });
            }
        }
        let mut found: BTreeMap<String, thinkus_retriever::api::CatalogEntry> = BTreeMap::new();
        for scope in scopes {
            let recalled = state
                .forward(
                    visit,
                    state.gateway.upstreams.retriever.recall(RecallRequest {
                        scope,
                        query: q.to_string(),
                        mode: RetrievalMode::Catalog,
                        budget_tokens: Some(4000),
                        limit: Some(20),
                        language: Some(language),
                        ..Default::default()
                    }),
                )
                .await?;
            for entry in recalled.catalog {
                let better = found
                    .get(&entry.id)
                    .is_none_or(|seen| seen.score.score < entry.score.score);
                if better {
                    found.insert(entry.id.clone(), entry);
                }
            }
        }
        let mut catalog: Vec<_> = found.into_values().collect();
        catalog.sort_by(|a, b| b.score.score.total_cmp(&a.score.score));
        catalog.truncate(20);
        let _ = write!(body, "<h2>{}</h2>", esc(w.results));
        if catalog.is_empty() {
            let _ = write!(body, "<p class=\"muted\" id=\"results\">{}</p>", esc(w.no_results));
        } else {
            body.push_str("<ul class=\"memories\" id=\"results\">");
            for entry in &catalog {
                let _ = write!(
                    body,
                    "<li data-memory=\"{id}\"><div class=\"content\">{summary}</div><div class=\"meta\"><span class=\"badge\">{kind}</span>\
                     <span>{score_label} {score:.2}</span><span>{conf_label} {conf:.0}%</span><span>{role}</span><span>{when}</span>\
                     <a href=\"/u/{user}/m/{sid}{keep}\">{details}</a></div></li>",
                    id = esc(&entry.id),
                    summary = esc(&entry.summary),
                    kind = esc(type_heading(entry.memory_type, language)),
                    score_label = esc(w.score),
                    score = entry.score.score,
                    conf_label = esc(w.confidence),
                    conf = entry.confidence * 100.0,
                    role = esc(&entry.role_id),
                    when = esc(&entry.relative_time),
                    user = seg(user),
                    sid = seg(&entry.id),
                    keep = esc(&keep),
                    details = esc(w.details),
                );
            }
            body.push_str("</ul>");
        }
    }

    body.push_str(&conflicts_section(state, visit, w, user, Some(role), project.as_deref(), &here).await?);
    body.push_str(&candidates_section(state, visit, w, user, Some(role), &here).await?);

    // Memories by type.
    let _ = write!(body, "<h2>{}</h2><div id=\"memories\">", esc(w.memories));
    let toggles = {
        let base = format!(
            "/u/{}/r/{}?lang={}{}",
            seg(user),
            seg(role),
            w.lang,
            project.as_deref().map(|p| format!("&p={}", seg(p))).unwrap_or_default()
        );
        let all = if show_all {
            format!(
                "<a href=\"{}{}\">{}</a>",
                esc(&base),
                if query.turns.is_some() { "&amp;turns=1" } else { "" },
                esc(w.show_active)
            )
        } else {
            format!(
                "<a href=\"{}&amp;all=1{}\">{}</a>",
                esc(&base),
                if query.turns.is_some() { "&amp;turns=1" } else { "" },
                esc(w.show_inactive)
            )
        };
        let turns = if query.turns.is_some() {
            format!(
                "<a href=\"{}{}\">{}</a>",
                esc(&base),
                if show_all { "&amp;all=1" } else { "" },
                esc(w.hide_turns)
            )
        } else {
            format!(
                "<a href=\"{}&amp;turns=1{}\">{}</a>",
                esc(&base),
                if show_all { "&amp;all=1" } else { "" },
                esc(w.show_turns)
            )
        };
        format!("<p class=\"actions\">{all} · {turns}</p>")
    };
    body.push_str(&toggles);
    let mut by_type: BTreeMap<usize, Vec<&Memory>> = BTreeMap::new();
    for memory in &memories {
        if memory.memory_type == MemoryType::ConversationTurn && query.turns.is_none() {
            continue;
        }
        let rank = TYPE_ORDER
            .iter()
            .position(|t| *t == memory.memory_type)
            .unwrap_or(TYPE_ORDER.len());
        by_type.entry(rank).or_default().push(memory);
    }
    if by_type.is_empty() {
        let _ = write!(body, "<p class=\"muted\">{}</p>", esc(w.no_memories));
    }
    for (rank, list) in &by_type {
        let memory_type = TYPE_ORDER.get(*rank).copied().unwrap_or(MemoryType::Fact);
        let _ = write!(
            body,
            "<h3 data-type=\"{}\">{} ({})</h3><ul class=\"memories\">",
            memory_type.as_str(),
            esc(type_heading(memory_type, language)),
            list.len()
        );
        for memory in list {
            body.push_str(&memory_item(w, language, user, memory, now, &keep));
        }
        body.push_str("</ul>");
    }
    body.push_str("</div>");

    body.push_str("<div class=\"grid2\">");
    body.push_str(&summary_card(state, visit, w, language, user, role, project.as_deref(), now).await?);
    body.push_str(&turns_card(state, w, language, &scope.owner(), role, now, &keep));
    body.push_str("</div>");
    Ok(page(
        w.lang,
        &format!("{role} · {user} · {}", w.title),
        &top(
            visit,
            w,
            Some(user),
            &format!(
                "/u/{}/r/{}{}",
                seg(user),
                seg(role),
                project.as_deref().map(|p| format!("?p={}", seg(p))).unwrap_or_default()
            ),
        ),
        &body,
    ))
}

async fn conflicts_section(
    state: &UiState,
    visit: &Visit,
    w: &Words,
    user: &str,
    role: Option<&str>,
    project: Option<&str>,
    here: &str,
) -> Result<String, UiError> {
    let scope = visit.scope(user, role.unwrap_or_default(), project)?;
    let conflicts = state
        .forward(visit, state.gateway.upstreams.knowledge.list_conflicts(scope, 50))
        .await?;
    let mut out = format!(
        "<h2>⚠️ {} ({})</h2><div id=\"conflicts\">",
        esc(w.conflicts),
        conflicts.len()
    );
    if conflicts.is_empty() {
        let _ = write!(out, "<p class=\"muted\">{}</p>", esc(w.no_conflicts));
    }
    for conflict in &conflicts {
        let current = conflict
            .current
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join(" / ");
        let _ = write!(
            out,
            "<div class=\"card warn\" data-conflict=\"{id}\"><div class=\"question\">{question}</div>\
             <div class=\"meta\"><span>{cur_label}: {current}</span></div><div class=\"meta\"><span>{new_label}: {proposed}</span>\
             <span>{seen} {n}</span><span>{role}</span></div><div class=\"actions\">",
            id = esc(&conflict.id),
            question = esc(&thinkus_knowledge_manager::conflicts::question_in(
                &conflict.subject,
                &conflict.current,
                &conflict.proposed.content,
                w.language()
            )),
            cur_label = esc(w.current_value),
            current = esc(&current),
            new_label = esc(w.new_value),
            proposed = esc(&conflict.proposed.content),
            seen = esc(w.seen_times),
            n = conflict.evidence_count,
            role = esc(&conflict.scope.role_id),
        );
        let action = |keep: &str| format!("/u/{}/k/{}/{keep}", seg(user), seg(&conflict.id));
        out.push_str(&button_form(
            &action("proposed"),
            &visit.csrf,
            &format!("{} {}", w.keep, summarize_to(&conflict.proposed.content, 40)),
            "keep",
            &[("back", here)],
            None,
        ));
        out.push_str(&button_form(
            &action("current"),
            &visit.csrf,
            &format!("{} {}", w.keep, summarize_to(&current, 40)),
            "keep",
            &[("back", here)],
            None,
        ));
        out.push_str("</div></div>");
    }
    out.push_str("</div>");
    Ok(out)
}

async fn candidates_section(
    state: &UiState,
    visit: &Visit,
    w: &Words,
    user: &str,
    role: Option<&str>,
    here: &str,
) -> Result<String, UiError> {
    let scope = visit.scope(user, role.unwrap_or_default(), None)?;
    let listed = state
        .forward(
            visit,
            state
                .gateway
                .upstreams
                .knowledge
                .list_candidates(scope, CandidateStatus::Pending, 100, 0),
        )
        .await?;
    let waiting: Vec<_> = listed.iter().filter(|c| c.conflicts_with.is_empty()).collect();
    let mut out = format!(
        "<h2>{} ({})</h2><div id=\"candidates\">",
        esc(w.candidates),
        waiting.len()
    );
    if waiting.is_empty() {
        let _ = write!(out, "<p class=\"muted\">{}</p>", esc(w.no_candidates));
    }
    for candidate in waiting {
        let action = |what: &str| format!("/u/{}/c/{}/{what}", seg(user), seg(&candidate.id));
        let _ = write!(
            out,
            "<div class=\"card\" data-candidate=\"{id}\"><div class=\"content\">{content}</div>\
             <div class=\"meta\"><span class=\"badge\">{kind}</span><span>{why_label}: {why}</span><span>{seen} {n}</span>\
             <span>{score_label} {score:.2}</span><span>{role}</span></div>\
             <form method=\"post\" action=\"{approve}\" class=\"stack\">{csrf}<input type=\"hidden\" name=\"back\" value=\"{here}\">\
             <details><summary>{edit}</summary><textarea name=\"content\">{content}</textarea></details>\
             <div class=\"actions\"><button type=\"submit\" class=\"primary\" name=\"do\" value=\"approve\">{approve_label}</button></div></form>\
             <div class=\"actions\">{reject}</div></div>",
            id = esc(&candidate.id),
            content = esc(&candidate.draft.content),
            kind = esc(type_heading(candidate.draft.memory_type, w.language())),
            why_label = esc(w.queued_because),
            why = esc(&phrases::localize(&candidate.reason, w.language())),
            seen = esc(w.seen_times),
            n = candidate.evidence_count,
            score_label = esc(w.score),
            score = candidate.score,
            role = esc(&candidate.scope.role_id),
            approve = esc(&action("approve")),
            csrf = csrf_field(&visit.csrf),
            here = esc(here),
            edit = esc(w.edit_before_approving),
            approve_label = esc(w.approve),
            reject = button_form(
                &action("reject"),
                &visit.csrf,
                w.reject,
                "danger",
                &[("back", here)],
                None
            ),
        );
    }
    out.push_str("</div>");
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
async fn summary_card(
    state: &UiState,
    visit: &Visit,
    w: &Words,
    language: Language,
    user: &str,
    role: &str,
    project: Option<&str>,
    now: chrono::DateTime<Utc>,
) -> Result<String, UiError> {
    let mut out = format!(
        "<div class=\"card\" id=\"last-session\"><h2>{}</h2>",
        esc(w.last_session)
    );
    let summaries = match &state.gateway.upstreams.summary_api {
        Some(api) => {
            state
                .forward(
                    visit,
                    api.list(SummaryList {
                        scope: visit.scope(user, role, project)?,
                        limit: 10,
                        other_roles_only: false,
                    }),
                )
                .await?
        }
        None => Vec::new(),
    };
    // The role's own last session, else the project's.
    let last = summaries
        .iter()
        .find(|s| s.scope.role_id == role)
        .or_else(|| summaries.first());
    let Some(last) = last else {
        let _ = write!(out, "<p class=\"muted\">{}</p></div>", esc(w.no_summary));
        return Ok(out);
    };
    let _ = write!(
        out,
        "<p class=\"muted\">{} · {} · {}</p>",
        esc(last.scope.session_id.as_deref().unwrap_or("")),
        esc(&last.scope.role_id),
        esc(&relative(last.updated_at, now, language))
    );
    if !last.goal.is_empty() {
        let _ = write!(out, "<p><b>{}:</b> {}</p>", esc(w.goal), esc(&last.goal));
    }
    let list = |out: &mut String, title: &str, items: Vec<String>| {
        if items.is_empty() {
            return;
        }
        let _ = write!(out, "<p><b>{}</b></p><ul>", esc(title));
        for item in items {
            let _ = write!(out, "<li>{}</li>", esc(&item));
        }
        out.push_str("</ul>");
    };
    list(
        &mut out,
        w.decisions,
        last.decisions.iter().map(|d| d.what.clone()).collect(),
    );
    list(&mut out, w.progress, last.progress.clone());
    list(&mut out, w.next_actions, last.next_actions.clone());
    list(&mut out, w.open_questions, last.open_questions.clone());
    out.push_str("</div>");
    Ok(out)
}

fn turns_card(
    state: &UiState,
    w: &Words,
    language: Language,
    owner: &Owner,
    role: &str,
    now: chrono::DateTime<Utc>,
    keep: &str,
) -> String {
    let user = owner.user_id.as_str();
    let mut out = format!(
        "<div class=\"card\" id=\"recent-turns\"><h2>{}</h2>",
        esc(w.recent_turns)
    );
    let traces = state
        .gateway
        .traces
        .as_ref()
        .map(|log| log.recent(owner, Some(role), 10))
        .unwrap_or_default();
    if traces.is_empty() {
        let _ = write!(out, "<p class=\"muted\">{}</p></div>", esc(w.no_turns));
        return out;
    }
    out.push_str("<ul>");
    for trace in traces {
        let used = trace
            .prepared
            .items
            .iter()
            .filter(|i| i.included && i.kind == TraceKind::Memory)
            .count();
        let _ = write!(
            out,
            "<li><a href=\"/u/{}/t/{}{}\">{}</a> <span class=\"muted\">· {} · {} {} · {}/{} {}</span></li>",
            seg(user),
            seg(&trace.id),
            esc(keep),
            esc(&summarize_to(&trace.message, 60)),
            esc(&relative(trace.at, now, language)),
            used,
            esc(w.memories),
            trace.prepared.tokens_used,
            trace.prepared.budget_tokens,
            esc(w.tokens)
        );
    }
    out.push_str("</ul></div>");
    out
}

async fn memory_page(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((user, id)): Path<(String, String)>,
    Query(query): Query<PageQuery>,
) -> Response {
    let visit = match state.visit(&headers, peer).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    match memory_body(&state, &visit, &user, &id, &query).await {
        Ok(html) => html_response(&visit, html),
        Err(err) => err.into_response(),
    }
}

async fn memory_body(
    state: &UiState,
    visit: &Visit,
    user: &str,
    id: &str,
    query: &PageQuery,
) -> Result<String, UiError> {
    visit.principal.authorize_user(user)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    let memory = state
        .forward(visit, knowledge.get_memory(visit.person(user)?, id.to_string()))
        .await?;
    let history = state
        .forward(visit, knowledge.history(visit.person(user)?, id.to_string()))
        .await?;
    let language = query.language().unwrap_or(memory.language);
    let w = words(language);
    let now = Utc::now();
    let keep = query.keep();
    let here = format!("/u/{}/m/{}{}", seg(user), seg(id), keep);
    let role_page = format!("/u/{}/r/{}{}", seg(user), seg(&memory.scope.role_id), keep);
    let mut body = format!(
        "<p><a href=\"{}\">← {} · {}</a></p><h1>{}</h1>",
        esc(&role_page),
        esc(w.back),
        esc(&memory.scope.role_id),
        esc(type_heading(memory.memory_type, language))
    );
    if let Some(done) = done_text(w, query.done.as_deref()) {
        let _ = write!(body, "<p class=\"flash\" id=\"flash\">{}</p>", esc(done));
    }
    let _ = write!(
        body,
        "<div class=\"card\"><div class=\"content\" id=\"memory-content\">{}</div></div><table class=\"card\">",
        esc(&memory.content)
    );
    let row = |body: &mut String, label: &str, value: String| {
        let _ = write!(body, "<tr><th>{}</th><td>{}</td></tr>", esc(label), value);
    };
    row(
        &mut body,
        w.status,
        format!(
            "<span id=\"memory-status\">{}</span>",
            esc(status_label(memory.status, language))
        ),
    );
    if let Some(next) = &memory.superseded_by {
        row(
            &mut body,
            w.replaced_by,
            format!(
                "<a href=\"/u/{}/m/{}{}\">{}</a>",
                seg(user),
                seg(next),
                esc(&keep),
                esc(next)
            ),
        );
    }
    row(&mut body, w.importance, format!("{}/5", memory.importance));
    row(
        &mut body,
        w.confidence,
        format!(
            "{} {:.0}%",
            meter(memory.confidence, w.confidence),
            memory.confidence * 100.0
        ),
    );
    row(&mut body, w.evidence, memory.evidence_count.to_string());
    row(&mut body, w.freshness, format!("{:.2}/5", memory.freshness));
    row(&mut body, w.source, esc(source_label(memory.source, language)));
    row(
        &mut body,
        w.visibility,
        esc(visibility_label(memory.visibility, language)),
    );
    row(
        &mut body,
        w.project,
        esc(memory.scope.project_id.as_deref().unwrap_or("-")),
    );
    row(
        &mut body,
        w.said,
        match language {
            Language::Zh => format!(
                "{}（{}）",
                esc(&date_time(memory.occurred_at, language)),
                esc(&relative(memory.occurred_at, now, language))
            ),
            Language::En => format!(
                "{} ({})",
                esc(&date_time(memory.occurred_at, language)),
                esc(&relative(memory.occurred_at, now, language))
            ),
        },
    );
    row(&mut body, w.changed, esc(&date_time(memory.updated_at, language)));
    row(&mut body, "id", esc(&memory.id));
    body.push_str("</table>");

    let action = |what: &str| format!("/u/{}/m/{}/{what}", seg(user), seg(id));
    if memory.status != MemoryStatus::Replaced {
        let _ = write!(
            body,
            "<h2>{correct}</h2><form method=\"post\" action=\"{to}\" class=\"stack card\" id=\"correct\">{csrf}\
             <input type=\"hidden\" name=\"back\" value=\"{here}\">\
             <label>{hint}<textarea name=\"content\" required>{content}</textarea></label>\
             <label>{evidence} <input type=\"text\" name=\"evidence\"></label>\
             <div class=\"actions\"><button type=\"submit\" class=\"primary\">{save}</button></div></form>",
            correct = esc(w.correct),
            to = esc(&action("correct")),
            csrf = csrf_field(&visit.csrf),
            here = esc(&here),
            hint = esc(w.correct_hint),
            content = esc(&memory.content),
            evidence = esc(w.evidence_hint),
            save = esc(w.save),
        );
    }
    body.push_str("<div class=\"actions card\" id=\"memory-actions\">");
    match memory.status {
        MemoryStatus::Active => {
            body.push_str(&button_form(
                &action("suppress"),
                &visit.csrf,
                w.suppress,
                "",
                &[("back", &here)],
                None,
            ));
            body.push_str(&button_form(
                &action("freeze"),
                &visit.csrf,
                w.freeze,
                "",
                &[("back", &here)],
                None,
            ));
        }
        MemoryStatus::Suppressed | MemoryStatus::Frozen => {
            body.push_str(&button_form(
                &action("restore"),
                &visit.csrf,
                w.restore,
                "",
                &[("back", &here)],
                None,
            ));
        }
        MemoryStatus::Replaced | MemoryStatus::Forgotten => {}
    }
    let _ = write!(
        body,
        "<form method=\"post\" action=\"{}\" class=\"inline\">{}<input type=\"hidden\" name=\"back\" value=\"{}\"><select name=\"importance\">",
        esc(&action("importance")),
        csrf_field(&visit.csrf),
        esc(&here)
    );
    for level in 1..=5u8 {
        let selected = if level == memory.importance { " selected" } else { "" };
        let _ = write!(body, "<option value=\"{level}\"{selected}>{level}</option>");
    }
    let _ = write!(
        body,
        "</select> <button type=\"submit\">{}</button></form>",
        esc(w.set_importance)
    );
    body.push_str(&button_form(
        &action("delete"),
        &visit.csrf,
        w.delete,
        "danger",
        &[("back", &role_page)],
        Some(w.confirm_delete),
    ));
    body.push_str("</div>");

    let _ = write!(
        body,
        "<h2>{}</h2><table id=\"history\"><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr>",
        esc(w.history),
        esc(w.when),
        esc(w.kind),
        esc(w.who),
        esc(w.why)
    );
    for change in &history {
        let _ = write!(
            body,
            "<tr data-change=\"{}\"><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            change.kind.as_str(),
            esc(&date_time(change.at, language)),
            esc(change_label(change.kind, language)),
            esc(&phrases::actor(&change.actor, language)),
            esc(&phrases::localize(&change.reason, language))
        );
    }
    body.push_str("</table>");
    Ok(page(
        w.lang,
        &format!("{} · {}", memory.id, w.title),
        &top(visit, w, Some(user), &here),
        &body,
    ))
}

async fn trace_page(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((user, id)): Path<(String, String)>,
    Query(query): Query<PageQuery>,
) -> Response {
    let visit = match state.visit(&headers, peer).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    match trace_body(&state, &visit, &user, &id, &query).await {
        Ok(html) => html_response(&visit, html),
        Err(err) => err.into_response(),
    }
}

async fn trace_body(
    state: &UiState,
    visit: &Visit,
    user: &str,
    id: &str,
    query: &PageQuery,
) -> Result<String, UiError> {
    let owner = visit.person(user)?.owner();
    let trace = state
        .gateway
        .traces
        .as_ref()
        .and_then(|log| log.get(&owner, id))
        .ok_or(UiError::NotFound)?;
    let language = query.language().unwrap_or(trace.prepared.decision.language);
    let w = words(language);
    let keep = query.keep();
    let decision = &trace.prepared.decision;
    let role_page = format!("/u/{}/r/{}{}", seg(user), seg(&trace.scope.role_id), keep);
    let mut body = format!(
        "<p><a href=\"{}\">← {} · {}</a></p><h1>{} · {}</h1><div class=\"card\"><b>{}:</b> {}</div>",
        esc(&role_page),
        esc(w.back),
        esc(&trace.scope.role_id),
        esc(w.turn),
        esc(&date_time(trace.at, language)),
        esc(w.message),
        esc(&trace.message)
    );
    let _ = write!(
        body,
        "<h2>{}</h2><p class=\"meta\"><span>{}: {}</span><span>{}: {}</span><span>{}: {}</span><span>{}: {}</span>\
         <span>{} {}/{}</span></p><p id=\"decision-reason\">{}</p>",
        esc(w.decision),
        esc(w.need_memory),
        esc(need_label(decision.need_memory, language)),
        esc(w.mode),
        esc(mode_label(decision.retrieval_mode, language)),
        esc(w.budget),
        decision.budget_tokens,
        esc(w.time_range),
        esc(&time_range_label(decision.time_range, language)),
        esc(w.tokens),
        trace.prepared.tokens_used,
        trace.prepared.budget_tokens,
        esc(&phrases::localize(&decision.reason, language))
    );
    let _ = write!(
        body,
        "<h2>{}</h2><table id=\"trace-items\"><tr><th></th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr>",
        esc(w.items),
        esc(w.memories),
        esc(w.score),
        esc(w.confidence),
        esc(w.tokens),
        esc(w.why)
    );
    // A memory is shown by what it says (its id on hover); one deleted since shows its id.
    let owner_scope = visit.person(user)?;
    let knowledge = &state.gateway.upstreams.knowledge;
    // A pending conflict the context asked about is shown by its question, while it waits.
    let conflicts: HashMap<String, String> = if trace.prepared.items.iter().any(|i| is_candidate(&i.id)) {
        let scope = visit.scope(user, &trace.scope.role_id, trace.scope.project_id.as_deref())?;
        state
            .forward(visit, knowledge.list_conflicts(scope, 50))
            .await?
            .into_iter()
            .map(|c| {
                let question = thinkus_knowledge_manager::conflicts::question_in(
                    &c.subject,
                    &c.current,
                    &c.proposed.content,
                    language,
                );
                (c.id, question)
            })
            .collect()
    } else {
        HashMap::new()
    };
    for (n, item) in trace.prepared.items.iter().enumerate() {
        let id = match item.kind {
            TraceKind::Memory if is_candidate(&item.id) => match conflicts.get(&item.id) {
                Some(question) => format!(
                    "<a href=\"{}#conflicts\" title=\"{}\">{}</a>",
                    esc(&role_page),
                    esc(&item.id),
                    esc(question)
                ),
                None => esc(&item.id),
            },
            TraceKind::Memory => {
                let content = if n < MAX_TRACE_LOOKUPS {
                    state
                        .forward(visit, knowledge.get_memory(owner_scope.clone(), item.id.clone()))
                        .await
                        .ok()
                        .map(|m| summarize_to(&m.content, 80))
                } else {
                    None
                };
                format!(
                    "<a href=\"/u/{}/m/{}{}\" title=\"{}\">{}</a>",
                    seg(user),
                    seg(&item.id),
                    esc(&keep),
                    esc(&item.id),
                    esc(content.as_deref().unwrap_or(&item.id))
                )
            }
            _ => esc(&item.id),
        };
        let _ = write!(
            body,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.0}%</td><td class=\"num\">{}</td><td>{}</td></tr>",
            if item.included { "in" } else { "out" },
            esc(if item.included { w.used } else { w.left_out }),
            id,
            item.score,
            item.confidence * 100.0,
            item.tokens,
            esc(&phrases::localize(&item.reason, language))
        );
    }
    body.push_str("</table>");
    let _ = write!(
        body,
        "<h2>{}</h2><pre class=\"context\" id=\"trace-context\">{}</pre>",
        esc(w.context),
        esc(&trace.prepared.context)
    );
    Ok(page(
        w.lang,
        &format!("{} · {}", w.turn, w.title),
        &top(visit, w, Some(user), &format!("/u/{}/t/{}", seg(user), seg(id))),
        &body,
    ))
}

/// Whether a trace item's id is a candidate's (a pending conflict the context asked about).
fn is_candidate(id: &str) -> bool {
    thinkus_common::ids::check_id(thinkus_common::ids::IdKind::Candidate, "id", id).is_ok()
}

/// The form's `back`, when it is a page of the same user (never another site or user).
/// The user's memory as the Markdown files `thinkus memory export` writes (of one project with
/// `?p=`), each shown in full, and the whole as one archive to download.
async fn export_page(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(user): Path<String>,
    Query(query): Query<PageQuery>,
) -> Response {
    let visit = match state.visit(&headers, peer).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    match export_body(&state, &visit, &user, &query).await {
        Ok(html) => html_response(&visit, html),
        Err(err) => err.into_response(),
    }
}

async fn export_body(state: &UiState, visit: &Visit, user: &str, query: &PageQuery) -> Result<String, UiError> {
    let scope = visit.scope(user, "", query.p.as_deref())?;
    let language = state.language_of(visit, user, query.language()).await?;
    let w = words(language);
    let files = state
        .forward(
            visit,
            state.gateway.upstreams.knowledge.export_markdown(scope, Some(language)),
        )
        .await?;
    let keep = query.keep();
    let here = format!("/u/{}/export{}", seg(user), keep);
    let mut body = format!(
        "<p><a href=\"/u/{user}?lang={lang}\">← {back}</a></p><h1>{title}</h1><p class=\"muted\">{hint}</p>\
         <p><a class=\"button primary\" id=\"download\" href=\"/u/{user}/export.tar{keep}\" download>{all}</a> \
         <a class=\"button\" id=\"download-json\" href=\"/u/{user}/export.json\" download>{json}</a></p><div id=\"files\">",
        user = seg(user),
        lang = w.lang,
        back = esc(w.back),
        title = esc(w.export),
        hint = esc(w.export_hint),
        keep = esc(&keep),
        all = esc(w.download_all),
        json = esc(w.download_json),
    );
    for file in files
        .iter()
        .filter(|f| f.path != thinkus_knowledge_manager::markdown::MANIFEST)
    {
        let _ = write!(
            body,
            "<details class=\"card\" data-file=\"{path}\"><summary><b>{path}</b> <span class=\"muted\">{n} {lines}</span></summary><pre>{content}</pre></details>",
            path = esc(&file.path),
            n = file.content.lines().count(),
            lines = esc(w.lines),
            content = esc(&file.content),
        );
    }
    body.push_str("</div>");
    Ok(page(
        w.lang,
        &format!("{user} · {}", w.export),
        &top(visit, w, Some(user), &here),
        &body,
    ))
}

/// The export as one tar archive: a folder `thinkus-memory-<user>/` holding the files and the
/// manifest, which `tar xf` unpacks and `thinkus memory import` reads back.
async fn export_archive(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(user): Path<String>,
    Query(query): Query<PageQuery>,
) -> Response {
    let visit = match state.visit(&headers, peer).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    let result = async {
        let scope = visit.scope(&user, "", query.p.as_deref())?;
        let files = state
            .forward(
                &visit,
                state
                    .gateway
                    .upstreams
                    .knowledge
                    .export_markdown(scope, query.language()),
            )
            .await?;
        let folder = format!("thinkus-memory-{}", file_name(&user));
        let entries: Vec<(String, &[u8])> = files
            .iter()
            .map(|f| (format!("{folder}/{}", f.path), f.content.as_bytes()))
            .collect();
        let archive = tar(&entries, Utc::now().timestamp().max(0) as u64)?;
        Ok::<_, UiError>((folder, archive))
    }
    .await;
    match result {
        Ok((folder, archive)) => {
            let mut response = secure(archive.into_response());
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-tar"));
            if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{folder}.tar\"")) {
                headers.insert(header::CONTENT_DISPOSITION, value);
            }
            response
        }
        Err(err) => err.into_response(),
    }
}

/// Everything the user owns as one JSON document (`ExportUser`: memories with their history,
/// candidates, sessions and messages, summaries, artifacts' metadata, jobs), to download.
async fn export_everything(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(user): Path<String>,
) -> Response {
    let visit = match state.visit(&headers, peer).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    let result = async {
        let owner = visit.person(&user)?.owner();
        let document = state
            .forward(&visit, state.gateway.upstreams.knowledge.export_user(owner))
            .await?;
        serde_json::to_vec_pretty(&document)
            .map_err(|err| UiError::from(ApiError::internal(format!("cannot serialise the export: {err}"))))
    }
    .await;
    match result {
        Ok(bytes) => {
            let mut response = secure(bytes.into_response());
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Ok(value) = HeaderValue::from_str(&format!(
                "attachment; filename=\"thinkus-user-{}.json\"",
                file_name(&user)
            )) {
                headers.insert(header::CONTENT_DISPOSITION, value);
            }
            response
        }
        Err(err) => err.into_response(),
    }
}

/// A user id as a file name: letters, digits, `-`, `_` and `.` kept, anything else `_`.
fn file_name(user: &str) -> String {
    let name: String = user
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.trim_matches('.').is_empty() {
        "user".into()
    } else {
        name
    }
}

/// A POSIX ustar archive of regular files (mode 0644), as `tar xf` unpacks it. A path longer
/// than 100 bytes is split at a `/` into the 155-byte prefix and the name; a path that cannot
/// be is INVALID_ARGUMENT.
fn tar(files: &[(String, &[u8])], mtime: u64) -> Result<Vec<u8>, ApiError> {
    fn octal(field: &mut [u8], value: u64) {
        let digits = format!("{value:0width$o}", width = field.len() - 1);
        field[..digits.len()].copy_from_slice(digits.as_bytes());
        field[digits.len()] = 0;
    }
    let mut out = Vec::new();
    for (path, data) in files {
        let bytes = path.as_bytes();
        let (prefix, name) = if bytes.len() <= 100 {
            (&[][..], bytes)
        } else {
            let split = bytes
                .iter()
                .enumerate()
                .filter(|(i, b)| **b == b'/' && *i <= 155 && bytes.len() - i - 1 <= 100)
                .map(|(i, _)| i)
                .next()
                .ok_or_else(|| ApiError::invalid("path", format!("{path:?} is too long for a tar archive")))?;
            (&bytes[..split], &bytes[split + 1..])
        };
        let mut header = [0u8; 512];
        header[..name.len()].copy_from_slice(name);
        octal(&mut header[100..108], 0o644);
        octal(&mut header[108..116], 0);
        octal(&mut header[116..124], 0);
        octal(&mut header[124..136], data.len() as u64);
        octal(&mut header[136..148], mtime);
        header[156] = b'0';
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        header[345..345 + prefix.len()].copy_from_slice(prefix);
        // The checksum is computed with its own field as spaces.
        header[148..156].fill(b' ');
        let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
        let checksum = format!("{sum:06o}\0 ");
        header[148..156].copy_from_slice(checksum.as_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    // Two empty blocks end the archive.
    out.resize(out.len() + 1024, 0);
    Ok(out)
}

fn safe_back(user: &str, form: &HashMap<String, String>) -> Option<String> {
    let prefix = format!("/u/{}", seg(user));
    form.get("back")
        .filter(|b| {
            (b.as_str() == prefix || b.starts_with(&format!("{prefix}/")) || b.starts_with(&format!("{prefix}?")))
                && !b.contains("//")
                && !b.contains("/..")
                && !b.contains(['\\', '\r', '\n'])
        })
        .cloned()
}

/// `target` with what was just done in its query (and the query of `keep_from`, if given).
fn with_done(target: &str, keep_from: Option<&str>, done: &str) -> String {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = keep_from
        .and_then(|k| k.split_once('?'))
        .map(|(_, q)| q)
        .unwrap_or(query);
    let mut kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("done="))
        .collect();
    let done = format!("done={done}");
    kept.push(&done);
    format!("{path}?{}", kept.join("&"))
}

/// Where to go after a change: the form's `back`, else `fallback`, saying what was done.
fn back_to(user: &str, form: &HashMap<String, String>, fallback: String, done: &str) -> String {
    with_done(&safe_back(user, form).unwrap_or(fallback), None, done)
}

async fn memory_action(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((user, id, action)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let form = parse_form(&body);
    let visit = match state.posted(&headers, peer, &form).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    let result = async {
        let owner = visit.person(&user)?;
        let knowledge = &state.gateway.upstreams.knowledge;
        let here = format!("/u/{}/m/{}", seg(&user), seg(&id));
        let evidence = form.get("evidence").cloned().unwrap_or_default();
        let correct = |action: CorrectionAction, content: Option<String>| CorrectRequest {
            scope: owner.clone(),
            memory_id: id.clone(),
            action,
            evidence: if evidence.trim().is_empty() {
                "corrected on the memory page".to_string()
            } else {
                evidence.clone()
            },
            new_content: content,
            new_summary: None,
            request_id: None,
        };
        let (request, done) = match action.as_str() {
            "correct" => {
                let content = form
                    .get("content")
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .ok_or_else(|| ApiError::invalid("content", "is required"))?;
                let result = state
                    .forward(
                        &visit,
                        knowledge.correct(correct(CorrectionAction::Replace, Some(content))),
                    )
                    .await?;
                let next = result.replacement.map(|m| m.id).unwrap_or(id.clone());
                // The replacement's page, in the same language.
                let back = safe_back(&user, &form);
                return Ok::<String, UiError>(with_done(
                    &format!("/u/{}/m/{}", seg(&user), seg(&next)),
                    Some(back.as_deref().unwrap_or("")),
                    "corrected",
                ));
            }
            "suppress" => (correct(CorrectionAction::Suppress, None), "suppressed"),
            "freeze" => (correct(CorrectionAction::Freeze, None), "frozen"),
            "restore" => (correct(CorrectionAction::Restore, None), "restored"),
            "importance" => {
                let importance: u8 = form
                    .get("importance")
                    .and_then(|i| i.parse().ok())
                    .filter(|i| (1..=5).contains(i))
                    .ok_or_else(|| ApiError::invalid("importance", "must be 1-5"))?;
                (correct(CorrectionAction::SetImportance(importance), None), "importance")
            }
            "delete" => {
                state
                    .forward(
                        &visit,
                        knowledge.delete(visit.person(&user)?, id.clone(), "deleted on the memory page".into()),
                    )
                    .await?;
                return Ok(back_to(&user, &form, format!("/u/{}", seg(&user)), "deleted"));
            }
            _ => return Err(UiError::NotFound),
        };
        state.forward(&visit, knowledge.correct(request)).await?;
        Ok(back_to(&user, &form, here, done))
    }
    .await;
    match result {
        Ok(location) => redirect(&location),
        Err(err) => err.into_response(),
    }
}

async fn candidate_action(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((user, id, action)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let form = parse_form(&body);
    let visit = match state.posted(&headers, peer, &form).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    let result = async {
        visit.principal.authorize_user(&user)?;
        let knowledge = &state.gateway.upstreams.knowledge;
        let fallback = format!("/u/{}", seg(&user));
        match action.as_str() {
            "approve" => {
                let edited = form
                    .get("content")
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty());
                state
                    .forward(
                        &visit,
                        knowledge.approve_candidate(visit.person(&user)?, id.clone(), edited),
                    )
                    .await?;
                Ok::<String, UiError>(back_to(&user, &form, fallback, "approved"))
            }
            "reject" => {
                state
                    .forward(
                        &visit,
                        knowledge.reject_candidate(
                            visit.person(&user)?,
                            id.clone(),
                            "rejected on the memory page".into(),
                        ),
                    )
                    .await?;
                Ok(back_to(&user, &form, fallback, "rejected"))
            }
            _ => Err(UiError::NotFound),
        }
    }
    .await;
    match result {
        Ok(location) => redirect(&location),
        Err(err) => err.into_response(),
    }
}

async fn conflict_action(
    State(state): State<UiState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((user, id, keep)): Path<(String, String, String)>,
    body: Bytes,
) -> Response {
    let form = parse_form(&body);
    let visit = match state.posted(&headers, peer, &form).await {
        Ok(visit) => visit,
        Err(err) => return err.into_response(),
    };
    let result = async {
        visit.principal.authorize_user(&user)?;
        let keep = match keep.as_str() {
            "current" => ConflictChoice::Current,
            "proposed" => ConflictChoice::Proposed,
            _ => return Err(UiError::NotFound),
        };
        let knowledge = &state.gateway.upstreams.knowledge;
        state
            .forward(
                &visit,
                knowledge.resolve_conflict(
                    visit.person(&user)?,
                    id.clone(),
                    keep,
                    "chosen on the memory page".into(),
                ),
            )
            .await?;
        Ok::<String, UiError>(back_to(&user, &form, format!("/u/{}", seg(&user)), "resolved"))
    }
    .await;
    match result {
        Ok(location) => redirect(&location),
        Err(err) => err.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_unpacks_with_tar() {
        let long = format!("thinkus-memory-alice/projects/{}.md", "课程平台".repeat(8));
        assert!(long.len() > 100);
        let files: Vec<(String, &[u8])> = vec![
            (
                "thinkus-memory-alice/BOSS.md".into(),
                "# BOSS\n\n- 结论先行\n".as_bytes(),
            ),
            ("thinkus-memory-alice/.thinkus-export.json".into(), b"{}"),
            (long.clone(), "- 预算是$500\n".as_bytes()),
            ("thinkus-memory-alice/memory/2026-11-24.md".into(), &[b'x'; 1300]),
        ];
        let archive = tar(&files, 1_764_000_000).unwrap();
        assert_eq!(archive.len() % 512, 0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("export.tar");
        std::fs::write(&path, &archive).unwrap();
        let status = std::process::Command::new("tar")
            .arg("-xf")
            .arg(&path)
            .arg("-C")
            .arg(dir.path())
            .status()
            .expect("tar runs");
        assert!(status.success());
        for (name, content) in &files {
            assert_eq!(&std::fs::read(dir.path().join(name)).unwrap(), content, "{name}");
        }
        let too_long = vec![("x".repeat(300), &b""[..])];
        assert_eq!(tar(&too_long, 0).unwrap_err().code, ErrorCode::InvalidArgument);
        assert_eq!(file_name("王/../x"), "__.._x", "no path separator survives");
        assert_eq!(file_name(".."), "user");
    }

    #[test]
    fn a_page_of_no_user_follows_the_browser() {
        let asked = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_LANGUAGE, HeaderValue::from_str(value).unwrap());
            accepted_language(&headers)
        };
        assert_eq!(asked("en-US,en;q=0.9,zh-CN;q=0.8"), Language::En);
        assert_eq!(asked("fr, zh-CN;q=0.5, en;q=0.4"), Language::Zh);
        assert_eq!(asked("zh;q=0.2, en;q=0.7"), Language::En);
        assert_eq!(asked("de"), Language::Zh);
        assert_eq!(accepted_language(&HeaderMap::new()), Language::Zh);
    }

    #[test]
    fn forms_are_decoded() {
        let form =
            parse_form("csrf=ab12&content=%E9%A2%84%E7%AE%97+%24800&x=1&x=2&bad=%zz&end=%4&cjk=%预算".as_bytes());
        assert_eq!(form["csrf"], "ab12");
        assert_eq!(form["content"], "预算 $800");
        assert_eq!(form["x"], "1");
        assert_eq!(form["bad"], "%zz");
        assert_eq!(form["end"], "%4");
        assert_eq!(form["cjk"], "%预算");
    }

    #[test]
    fn going_back_stays_on_the_same_users_pages() {
        let form = |back: &str| HashMap::from([("back".to_string(), back.to_string())]);
        assert_eq!(
            back_to(
                "alice",
                &form("/u/alice/r/cto?lang=zh&done=x"),
                "/u/alice".into(),
                "approved"
            ),
            "/u/alice/r/cto?lang=zh&done=approved"
        );
        assert_eq!(
            with_done("/u/alice/m/mem_2", Some("/u/alice/m/mem_1?lang=en"), "corrected"),
            "/u/alice/m/mem_2?lang=en&done=corrected"
        );
        for evil in [
            "https://evil.example/",
            "//evil.example/u/alice",
            "/u/bob/r/cto",
            "/u/alice/../bob",
            "/u/alicex/r/cto",
            "/u/alice/x\\y",
        ] {
            assert_eq!(
                back_to("alice", &form(evil), "/u/alice".into(), "done"),
                "/u/alice?done=done",
                "{evil}"
            );
        }
    }
}
