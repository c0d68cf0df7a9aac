//! The HTTP surface: `POST /hooks/github`, the JSON API under `/api/v1` and the web console
//! (`console`, whose files the serving binary hands in). One router serves `gannet up` and the
//! AWS `api` function.
//!
//! Every API call names its caller ([`Access::callers`]: a token on `gannet up`, the IAM
//! principal on AWS) and needs a role for what it does; the person recorded for a sync, a
//! cancel or an approval is that caller. Calls carrying a foreign `Origin`, or a `Host` the
//! server does not serve, are refused. Each route reads at most its own body limit (25 MB
//! only for the webhook), free-text fields are capped, and every refusal is JSON.

mod plan_previews;

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Extension, Path, Query, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use gannet_domain::callers::{Caller, CallerError, Callers, Credentials, Need};
use gannet_domain::chain::ChainStatus;
use gannet_domain::deployment::{CancelMode, DeploymentStatus};
use gannet_domain::report::cut;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::{
    error_chain, ApiError, Console, Controller, RollbackRequest, SyncRequest, WebhookHeaders,
    MAX_WEBHOOK_BODY,
};

/// The most an API request body may hold.
pub const MAX_API_BODY: usize = 64 * 1024;
/// The longest free-text field (a stage id, an idempotency key, a name).
pub const MAX_FIELD: usize = 256;
/// Webhook bodies larger than this are read a few at a time, so memory stays bounded.
const LARGE_BODY: usize = 1024 * 1024;
/// How many large webhook bodies are read at once.
const LARGE_BODIES_AT_ONCE: usize = 2;
/// A request that has not been answered in this long is answered 408.
const REQUEST_DEADLINE: Duration = Duration::from_secs(60);

/// Who may call the API, and through which names the server is reached.
#[derive(Clone)]
pub struct Access {
    pub callers: Arc<dyn Callers>,
    pub hosts: Hosts,
}

/// The `Host` names the server answers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hosts {
    /// Any (behind API Gateway, which has already routed by host).
    Any,
    /// These `host:port` names (lower case), and, with `ip_port`, any IP literal on that port
    /// (a server listening on every interface; an IP literal cannot be a rebound DNS name).
    Only {
        names: Vec<String>,
        ip_port: Option<u16>,
    },
}

impl Hosts {
    /// True when a request with this `Host` (or `Origin` authority) is for this server.
    pub fn allows(&self, authority: &str) -> bool {
        let authority = authority.trim().to_ascii_lowercase();
        match self {
            Self::Any => true,
            Self::Only { names, ip_port } => {
                names.contains(&authority)
                    || ip_port.is_some_and(|port| {
                        authority
                            .parse::<std::net::SocketAddr>()
                            .is_ok_and(|a| a.port() == port)
                    })
            }
        }
    }
}

/// The IAM principal API Gateway authorised, put on the request by the AWS `api` function.
#[derive(Clone, Debug)]
pub struct IamPrincipal(pub String);

#[derive(Clone)]
struct AppState {
    controller: Controller,
    access: Access,
    large_bodies: Arc<Semaphore>,
}

/// The whole HTTP app, with the web console's routes when the binary serving it has one;
/// tests call it with `oneshot`, without a socket.
pub fn router(controller: Controller, access: Access, console: Option<Console>) -> Router {
    let state = AppState {
        controller,
        access,
        large_bodies: Arc::new(Semaphore::new(LARGE_BODIES_AT_ONCE)),
    };
    let api = Router::new()
        .route("/api/v1/apps", get(list_apps))
        .route("/api/v1/apps/{app}", get(show_app))
        .route("/api/v1/whoami", get(whoami))
        .route("/api/v1/secrets/public-key", get(public_key))
        .route("/api/v1/apps/{app}/sync", post(sync))
        .route("/api/v1/apps/{app}/rollback", post(rollback))
        .route("/api/v1/apps/{app}/pause", post(pause))
        .route("/api/v1/apps/{app}/resume", post(resume))
        .route("/api/v1/apps/{app}/diff", get(diff))
        .route("/api/v1/deployments", get(list_deployments))
        .route("/api/v1/deployments/{id}", get(show_deployment))
        .route("/api/v1/deployments/{id}/cancel", post(cancel))
        .route("/api/v1/deployments/{id}/approve", post(approve))
        .route("/api/v1/deployments/{id}/stages/{stage}/logs", get(logs))
        .route("/api/v1/chains", get(list_chains))
        .route("/api/v1/chains/{id}", get(show_chain))
        .route("/api/v1/chains/{id}/cancel", post(cancel_chain))
        .route(
            "/api/v1/plan-previews",
            get(plan_previews::list).post(plan_previews::request),
        )
        .route("/api/v1/plan-previews/{id}", get(plan_previews::show))
        .layer(DefaultBodyLimit::max(MAX_API_BODY))
        .route_layer(middleware::from_fn_with_state(state.clone(), guard));
    let mut app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/hooks/github",
            post(github_hook).layer(DefaultBodyLimit::disable()),
        )
        .merge(api);
    if let Some(console) = console {
        app = app.merge(crate::console::routes(console));
    }
    app.fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(middleware::from_fn(json_errors))
        .layer(middleware::from_fn(deadline))
        .layer(middleware::from_fn(answer_headers))
        .with_state(state)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(json!({"error": self.public_message()}))).into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Every API call: a `Host` this server serves, no foreign `Origin` on a change, and an
/// identified caller (put on the request for the handler to check its role).
async fn guard(State(s): State<AppState>, mut req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = header_text(headers, "host").unwrap_or("");
    if !s.access.hosts.allows(host) {
        return ApiError::Forbidden(format!(
            "this server does not serve the host {:?}; add it to api.hosts in gannet.yaml",
            cut(host, 80)
        ))
        .into_response();
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        if let Some(origin) = header_text(headers, "origin") {
            let authority = origin
                .split_once("://")
                .map(|(_, rest)| rest.trim_end_matches('/'));
            if !authority.is_some_and(|a| s.access.hosts.allows(a)) {
                return ApiError::Forbidden(format!(
                    "requests from the origin {:?} may not change anything here",
                    cut(origin, 80)
                ))
                .into_response();
            }
        }
    }
    let bearer = header_text(headers, "authorization").and_then(|v| {
        v.strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
            .map(str::trim)
    });
    let principal = req.extensions().get::<IamPrincipal>().map(|p| p.0.clone());
    let credentials = Credentials {
        bearer,
        iam_principal: principal.as_deref(),
    };
    match s.access.callers.identify(&credentials) {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(err @ CallerError::Missing { .. }) => {
            ApiError::Unauthorized(err.to_string()).into_response()
        }
        Err(CallerError::Unknown) => ApiError::Unauthorized(
            "the token is not valid for this server; check GANNET_TOKEN".into(),
        )
        .into_response(),
    }
}

/// The caller's role must allow `need`.
fn require(caller: &Caller, need: Need) -> Result<(), ApiError> {
    if caller.role.allows(need) {
        return Ok(());
    }
    let what = match need {
        Need::Read => "reading",
        Need::Deploy => "syncing or cancelling",
        Need::Approve => "approving",
    };
    Err(ApiError::Forbidden(format!(
        "{} has the role {}; {what} needs the role {}",
        caller.name,
        caller.role,
        need.roles()
    )))
}

/// A body may name a person only as the caller: nobody acts for someone else.
fn as_caller(caller: &Caller, field: &str, named: Option<&str>) -> Result<(), ApiError> {
    match named.map(str::trim).filter(|n| !n.is_empty()) {
        Some(n) if n != caller.name => Err(ApiError::Forbidden(format!(
            "{field}: you are {} (your credentials say so); you cannot act as {:?}",
            caller.name,
            cut(n, 64)
        ))),
        _ => Ok(()),
    }
}

/// A free-text field must fit [`MAX_FIELD`].
fn capped<'a>(field: &str, value: Option<&'a str>) -> Result<Option<&'a str>, ApiError> {
    match value {
        Some(v) if v.chars().count() > MAX_FIELD => Err(ApiError::BadRequest(format!(
            "{field}: too long ({} characters; at most {MAX_FIELD})",
            v.chars().count()
        ))),
        other => Ok(other),
    }
}

/// Refusals from the framework itself (a bad path, JSON that does not parse, a body over the
/// limit, a wrong method) are plain text; give them the API's `{"error": "..."}` shape.
async fn json_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let message = match text.trim() {
        "" => status.canonical_reason().unwrap_or("error").to_owned(),
        t => cut(t, 200),
    };
    (status, Json(json!({"error": message}))).into_response()
}

/// Every answer, refusals included: `nosniff`, so a browser never runs a JSON answer as a
/// script or a page; and `no-store` on everything but the console's files (which say how
/// they are cached themselves), so no cache keeps an answer that holds deployment data.
async fn answer_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
    }
    response
}

/// Answers 408 to a request still unanswered after [`REQUEST_DEADLINE`] (a body trickling in).
async fn deadline(req: Request, next: Next) -> Response {
    match tokio::time::timeout(REQUEST_DEADLINE, next.run(req)).await {
        Ok(response) => response,
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            Json(json!({"error": "the request took too long to arrive"})),
        )
            .into_response(),
    }
}

fn webhook_answer(res: crate::WebhookResponse) -> Response {
    let status = StatusCode::from_u16(res.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(res.body)).into_response()
}

fn rejected(status: StatusCode, reason: impl Into<String>) -> Response {
    (
        status,
        Json(json!({"status": "rejected", "reason": reason.into()})),
    )
        .into_response()
}

/// Reads a body of at most `max` bytes in the parts it arrives in (no large allocation until
/// the caller joins them); `None` when it is longer (the rest is read and dropped as it
/// arrives, so the client sees the answer).
async fn read_parts(mut body: Body, max: usize) -> Option<Vec<Bytes>> {
    use http_body_util::BodyExt;
    let mut parts = Vec::new();
    let mut len = 0;
    while let Some(frame) = body.frame().await {
        let chunk = frame.ok()?.into_data().unwrap_or_default();
        len += chunk.len();
        if len > max {
            parts.clear();
            continue;
        }
        parts.push(chunk);
    }
    (len <= max).then_some(parts)
}

async fn github_hook(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let delivery = WebhookHeaders::read(&headers);
    // Nothing can be verified without a secret or a signature: refuse before reading the body.
    if !s.controller.accepts_webhooks() {
        return rejected(StatusCode::UNAUTHORIZED, "no webhook secret is configured");
    }
    if delivery.signature.is_none() {
        return rejected(
            StatusCode::UNAUTHORIZED,
            "missing X-Hub-Signature-256 header",
        );
    }
    let length = header_text(&headers, "content-length").and_then(|l| l.parse::<usize>().ok());
    // Large (or unannounced) bodies wait for one of a few permits before they are read.
    let _permit = match length {
        Some(l) if l <= LARGE_BODY => None,
        _ => s.large_bodies.clone().acquire_owned().await.ok(),
    };
    let Some(parts) = read_parts(body, MAX_WEBHOOK_BODY).await else {
        return rejected(StatusCode::PAYLOAD_TOO_LARGE, "payload larger than 25 MB");
    };
    // A forged signature is refused before the parts are joined into one large buffer.
    let slices: Vec<&[u8]> = parts.iter().map(|p| p.as_ref()).collect();
    if let Err(refused) = s.controller.verify_webhook(
        &slices,
        delivery.signature.as_deref(),
        delivery.delivery.as_deref(),
    ) {
        return webhook_answer(refused);
    }
    let body = slices.concat();
    drop(parts);
    match s.controller.webhook(delivery.with_body(body)).await {
        Ok(res) => webhook_answer(res),
        Err(err) => {
            tracing::error!(error = %error_chain(&err), "webhook failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"status": "error", "reason": "internal error; see the server log"})),
            )
                .into_response()
        }
    }
}

async fn list_apps(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    Ok(Json(json!({"apps": s.controller.list_apps().await?})))
}

async fn show_app(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    let app = s.controller.find_app(&app).await?;
    Ok(Json(json!({"app": s.controller.app_view(app).await?})))
}

#[derive(Deserialize)]
struct DeploymentQuery {
    app: Option<String>,
    /// Comma-separated statuses.
    status: Option<String>,
    limit: Option<usize>,
    /// A deployment id (or a unique prefix): the page of those older than it.
    before: Option<String>,
}

async fn list_deployments(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<DeploymentQuery>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    let statuses = statuses_in(q.status.as_deref(), &DeploymentStatus::ALL, |s| s.as_str())?;
    let limit = q.limit.unwrap_or(50).clamp(1, 1000);
    let (list, next) = s
        .controller
        .list_deployments(q.app.as_deref(), statuses, limit, q.before.as_deref())
        .await?;
    Ok(Json(match next {
        Some(next) => json!({"deployments": list, "next": next}),
        None => json!({"deployments": list}),
    }))
}

async fn show_deployment(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    Ok(Json(
        json!({"deployment": s.controller.get_deployment(&id).await?}),
    ))
}

async fn sync(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
    body: Option<Json<SyncRequest>>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Deploy)?;
    let mut req = body.map(|Json(r)| r).unwrap_or_default();
    as_caller(&caller, "commander", Some(&req.commander))?;
    capped("key", req.key.as_deref())?;
    capped("reason", req.reason.as_deref())?;
    req.commander = caller.name.clone();
    let d = s.controller.sync(&app, req, &caller).await?;
    audit("sync requested", &d.app, &caller, &d.id);
    Ok(Json(json!({ "deployment": d })))
}

/// One INFO line per person's action, naming the app by name, who did it and the deployment:
/// the audit trail an operator greps for (`sync requested app=web by=dave`).
fn audit(action: &str, app: &str, caller: &Caller, deployment: &impl std::fmt::Display) {
    tracing::info!(target: "gannet::audit", app = %app, by = %caller.name, role = %caller.role.as_str(), %deployment, "{action}");
}

/// Who the caller is and what the role lets them do (the web console shows only the controls
/// the caller may use).
async fn whoami(Extension(caller): Extension<Caller>) -> ApiResult<serde_json::Value> {
    Ok(Json(json!({
        "caller": {"name": caller.name, "role": caller.role.as_str()},
        "may": {
            "read": caller.role.allows(Need::Read),
            "deploy": caller.role.allows(Need::Deploy),
            "approve": caller.role.allows(Need::Approve),
        },
    })))
}

/// The public key apps seal secrets for (`gannet encrypt` reads it): any caller may read it.
async fn public_key(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    let key = s.controller.sealing_public_key().ok_or_else(|| {
        ApiError::NotFound(
            "this gannet has no key for sealed secrets: set secretManagement in gannet.yaml, or on AWS the stack's SealingKeyArn"
                .into(),
        )
    })?;
    Ok(Json(json!({ "publicKey": key })))
}

async fn rollback(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
    body: Option<Json<RollbackRequest>>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Deploy)?;
    let req = body.map(|Json(r)| r).unwrap_or_default();
    capped("to", req.to.as_deref())?;
    capped("key", req.key.as_deref())?;
    capped("reason", req.reason.as_deref())?;
    let d = s.controller.rollback(&app, req, &caller).await?;
    audit("rollback requested", &d.app, &caller, &d.id);
    Ok(Json(json!({ "deployment": d })))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PauseBody {
    reason: Option<String>,
}

async fn pause(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
    body: Option<Json<PauseBody>>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Deploy)?;
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let reason = capped("reason", body.reason.as_deref())?;
    let view = s.controller.pause_app(&app, &caller.name, reason).await?;
    audit("paused", &view.name, &caller, &"-");
    Ok(Json(json!({ "app": view })))
}

async fn resume(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Deploy)?;
    let view = s.controller.resume_app(&app).await?;
    audit("resumed", &view.name, &caller, &"-");
    Ok(Json(json!({ "app": view })))
}

#[derive(Deserialize)]
struct DiffQuery {
    /// On the watched branch; a commit other than the head needs the deploy role.
    commit: Option<String>,
}

async fn diff(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
    Query(q): Query<DiffQuery>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    let commit = capped("commit", q.commit.as_deref())?;
    Ok(Json(
        json!({"diff": s.controller.diff(&app, commit, &caller).await?}),
    ))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    #[serde(default)]
    no_rollback: bool,
    /// Who cancels: only ever the caller.
    #[serde(default)]
    by: Option<String>,
}

async fn cancel(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Option<Json<CancelBody>>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Deploy)?;
    let body = body.map(|Json(b)| b).unwrap_or_default();
    as_caller(&caller, "by", body.by.as_deref())?;
    let mode = if body.no_rollback {
        CancelMode::WithoutRollback
    } else {
        CancelMode::WithRollback
    };
    let d = s.controller.cancel(&id, mode, &caller.name).await?;
    audit("cancelled", &d.app, &caller, &d.id);
    Ok(Json(json!({ "deployment": d })))
}

/// The statuses a comma-separated `?status=` names (any case), each one of `all`.
fn statuses_in<T: Copy>(
    text: Option<&str>,
    all: &[T],
    name: fn(&T) -> &'static str,
) -> Result<Vec<T>, ApiError> {
    let words = text.into_iter().flat_map(|t| t.split(','));
    words
        .filter(|w| !w.is_empty())
        .map(|w| {
            all.iter()
                .find(|s| name(s).eq_ignore_ascii_case(w))
                .copied()
                .ok_or_else(|| {
                    let names: Vec<&str> = all.iter().map(name).collect();
                    ApiError::BadRequest(format!(
                        "unknown status {}; one of {}",
                        cut(w, 40),
                        names.join(", ")
                    ))
                })
        })
        .collect()
}

#[derive(Deserialize)]
struct ChainQuery {
    /// Comma-separated statuses; every status when absent.
    status: Option<String>,
    limit: Option<usize>,
}

async fn list_chains(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<ChainQuery>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    let statuses = statuses_in(q.status.as_deref(), &ChainStatus::ALL, |s| s.as_str())?;
    let limit = q.limit.unwrap_or(50).clamp(1, 1000);
    let chains = s.controller.list_chains(statuses, limit).await?;
    Ok(Json(json!({ "chains": chains })))
}

async fn show_chain(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    Ok(Json(json!({"chain": s.controller.chain_view(&id).await?})))
}

async fn cancel_chain(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Option<Json<CancelBody>>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Deploy)?;
    let body = body.map(|Json(b)| b).unwrap_or_default();
    as_caller(&caller, "by", body.by.as_deref())?;
    if body.no_rollback {
        return Err(ApiError::BadRequest(
            "no_rollback: a chain's deployments are cancelled with their rollback; cancel one \
             deployment to skip it"
                .into(),
        ));
    }
    let chain = s.controller.cancel_chain(&id, &caller.name).await?;
    audit("chain cancelled", &chain.app, &caller, &chain.id);
    Ok(Json(json!({ "chain": chain })))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    stage: Option<String>,
    /// Who approves: only ever the caller.
    #[serde(default)]
    user: Option<String>,
}

async fn approve(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Option<Json<ApproveBody>>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Approve)?;
    let body = body.map(|Json(b)| b).unwrap_or_default();
    as_caller(&caller, "user", body.user.as_deref())?;
    let stage = capped("stage", body.stage.as_deref())?;
    let d = s.controller.approve(&id, stage, &caller.name).await?;
    audit("approved", &d.app, &caller, &d.id);
    Ok(Json(json!({ "deployment": d })))
}

#[derive(Deserialize)]
struct LogQuery {
    after: Option<u64>,
}

async fn logs(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((id, stage)): Path<(String, String)>,
    Query(q): Query<LogQuery>,
) -> ApiResult<serde_json::Value> {
    require(&caller, Need::Read)?;
    Ok(Json(
        json!({"lines": s.controller.stage_logs(&id, &stage, q.after.unwrap_or(0)).await?}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let only = Hosts::Only {
            names: vec!["127.0.0.1:7070".into(), "localhost:7070".into()],
            ip_port: None,
        };
        assert!(only.allows("127.0.0.1:7070"));
        assert!(only.allows("LOCALHOST:7070"));
        assert!(!only.allows("evil.example:7070"));
        assert!(!only.allows("127.0.0.1:8080"));
        assert!(!only.allows(""));
        let every_interface = Hosts::Only {
            names: vec!["gannet.example.com".into()],
            ip_port: Some(7070),
        };
        assert!(every_interface.allows("10.1.2.3:7070"));
        assert!(every_interface.allows("[::1]:7070"));
        assert!(every_interface.allows("gannet.example.com"));
        assert!(!every_interface.allows("rebound.example:7070"));
        assert!(Hosts::Any.allows("anything"));
    }

    #[test]
    fn cut_keeps_short_text_and_marks_cut_text() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("ééé", 2), "éé…");
    }
}
