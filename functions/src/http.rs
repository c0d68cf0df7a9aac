//! The HTTP functions through lambda_http: `webhook` (a Function URL request becomes a
//! [`WebhookRequest`]) and `api` (the same axum router as `gannet up`).

use gannet_controller::{error_chain, WebhookRequest, WebhookResponse};
use lambda_http::http::{header, Method, StatusCode};
use lambda_http::{Body, Request, Response};
use serde_json::json;

use crate::Runtime;

/// Answers one webhook delivery: checks, deduplicates and queues it (the controller's
/// webhook handler), then says so in JSON.
pub async fn webhook(runtime: &Runtime, request: Request) -> Response<Body> {
    if request.method() != Method::POST {
        return respond(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"status": "rejected", "reason": "GitHub webhooks are POSTed"}),
        );
    }
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let delivery = WebhookRequest {
        event: header("x-github-event"),
        delivery: header("x-github-delivery"),
        signature: header("x-hub-signature-256"),
        body: request.body().to_vec(),
    };
    match runtime.controller().webhook(delivery).await {
        Ok(WebhookResponse { status, body }) => respond(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            &body,
        ),
        Err(err) => {
            tracing::error!(error = %error_chain(&err), "webhook failed");
            respond(
                StatusCode::INTERNAL_SERVER_ERROR,
                &json!({"status": "error", "reason": "internal error; see the function's log"}),
            )
        }
    }
}

/// The JSON API: `gannet up`'s router, served through lambda_http.
pub fn api(runtime: &Runtime) -> axum::Router {
    gannet_controller::http::router(runtime.controller().clone())
}

fn respond(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::Text(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}
