//! The HTTP surface: `POST /hooks/github` and the JSON API under `/api/v1`. One router serves
//! `gannet up` and the AWS `api` function.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use gannet_core::deployment::{CancelMode, DeploymentStatus};
use serde::Deserialize;
use serde_json::json;

use crate::{error_chain, ApiError, Controller, SyncRequest, WebhookRequest, MAX_WEBHOOK_BODY};

/// The whole HTTP app; tests call it with `oneshot`, without a socket.
pub fn router(controller: Controller) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/hooks/github", post(github_hook))
        .route("/api/v1/apps", get(list_apps))
        .route("/api/v1/apps/{app}", get(show_app))
        .route("/api/v1/apps/{app}/sync", post(sync))
        .route("/api/v1/deployments", get(list_deployments))
        .route("/api/v1/deployments/{id}", get(show_deployment))
        .route("/api/v1/deployments/{id}/cancel", post(cancel))
        .route("/api/v1/deployments/{id}/approve", post(approve))
        .route("/api/v1/deployments/{id}/stages/{stage}/logs", get(logs))
        // One byte over GitHub's cap still reaches the handler, which answers 413 itself.
        .layer(DefaultBodyLimit::max(MAX_WEBHOOK_BODY + 1))
        .with_state(controller)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(json!({"error": self.public_message()}))).into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn github_hook(
    State(c): State<Controller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // A body past the router's limit never reaches the handler; answer it in the handler's
    // shape all the same, so every refusal carries a JSON reason.
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let status = rejection.status();
            let reason = if status == StatusCode::PAYLOAD_TOO_LARGE {
                format!(
                    "payload larger than {} MB",
                    MAX_WEBHOOK_BODY / (1024 * 1024)
                )
            } else {
                rejection.body_text()
            };
            return (
                status,
                Json(json!({"status": "rejected", "reason": reason})),
            )
                .into_response();
        }
    };
    let req = WebhookRequest {
        event: header(&headers, "x-github-event"),
        delivery: header(&headers, "x-github-delivery"),
        signature: header(&headers, "x-hub-signature-256"),
        body: body.to_vec(),
    };
    match c.webhook(req).await {
        Ok(res) => {
            let status =
                StatusCode::from_u16(res.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, Json(res.body)).into_response()
        }
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

async fn list_apps(State(c): State<Controller>) -> ApiResult<serde_json::Value> {
    Ok(Json(json!({"apps": c.list_apps().await?})))
}

async fn show_app(
    State(c): State<Controller>,
    Path(app): Path<String>,
) -> ApiResult<serde_json::Value> {
    let app = c.find_app(&app).await?;
    Ok(Json(json!({"app": crate::AppView::from(app)})))
}

#[derive(Deserialize)]
struct DeploymentQuery {
    app: Option<String>,
    /// Comma-separated statuses.
    status: Option<String>,
    limit: Option<usize>,
}

async fn list_deployments(
    State(c): State<Controller>,
    Query(q): Query<DeploymentQuery>,
) -> ApiResult<serde_json::Value> {
    let mut statuses = Vec::new();
    for s in q
        .status
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.is_empty())
    {
        let status = DeploymentStatus::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ApiError::BadRequest(format!("unknown status {s}")))?;
        statuses.push(status);
    }
    let list = c
        .list_deployments(q.app.as_deref(), statuses, q.limit.unwrap_or(50).min(1000))
        .await?;
    Ok(Json(json!({"deployments": list})))
}

async fn show_deployment(
    State(c): State<Controller>,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    Ok(Json(json!({"deployment": c.get_deployment(&id).await?})))
}

async fn sync(
    State(c): State<Controller>,
    Path(app): Path<String>,
    body: Option<Json<SyncRequest>>,
) -> ApiResult<serde_json::Value> {
    let req = body.map(|Json(r)| r).unwrap_or_default();
    Ok(Json(json!({"deployment": c.sync(&app, req).await?})))
}

#[derive(Deserialize, Default)]
struct CancelBody {
    #[serde(default)]
    no_rollback: bool,
    #[serde(default)]
    by: String,
}

async fn cancel(
    State(c): State<Controller>,
    Path(id): Path<String>,
    body: Option<Json<CancelBody>>,
) -> ApiResult<serde_json::Value> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let mode = if body.no_rollback {
        CancelMode::WithoutRollback
    } else {
        CancelMode::WithRollback
    };
    Ok(Json(
        json!({"deployment": c.cancel(&id, mode, &body.by).await?}),
    ))
}

#[derive(Deserialize)]
struct ApproveBody {
    stage: Option<String>,
    user: String,
}

async fn approve(
    State(c): State<Controller>,
    Path(id): Path<String>,
    Json(body): Json<ApproveBody>,
) -> ApiResult<serde_json::Value> {
    if body.user.trim().is_empty() {
        return Err(ApiError::BadRequest("an approval needs a user".into()));
    }
    Ok(Json(
        json!({"deployment": c.approve(&id, body.stage.as_deref(), &body.user).await?}),
    ))
}

#[derive(Deserialize)]
struct LogQuery {
    after: Option<u64>,
}

async fn logs(
    State(c): State<Controller>,
    Path((id, stage)): Path<(String, String)>,
    Query(q): Query<LogQuery>,
) -> ApiResult<serde_json::Value> {
    Ok(Json(
        json!({"lines": c.stage_logs(&id, &stage, q.after.unwrap_or(0)).await?}),
    ))
}
