//! The HTTP functions through lambda_http: `webhook` (a Function URL request becomes a
//! [`WebhookRequest`]) and `api` (the same axum router as `gannet up`).

use std::sync::Arc;

use gannet_aws::IamCallers;
use gannet_controller::http::{Access, Hosts, IamPrincipal};
use gannet_controller::{error_chain, WebhookRequest, WebhookResponse};
use lambda_http::http::{header, Method, StatusCode};
use lambda_http::request::RequestContext;
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

/// The JSON API: `gannet up`'s router, served through lambda_http. The caller is the IAM
/// principal API Gateway authorised; its name follows `GANNET_CALLER_NAMES` or the rule of
/// [`IamCallers`].
pub fn api(runtime: &Runtime) -> axum::Router {
    let access = Access {
        callers: Arc::new(IamCallers::new(runtime.caller_names().clone())),
        hosts: Hosts::Any,
    };
    gannet_controller::http::router(runtime.controller().clone(), access)
        .layer(axum::middleware::from_fn(principal))
}

/// Puts the IAM principal of an API Gateway (HTTP API) request on the request.
async fn principal(
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let arn = match req.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx
            .authorizer
            .as_ref()
            .and_then(|a| a.iam.as_ref())
            .and_then(|iam| iam.user_arn.clone()),
        _ => None,
    };
    if let Some(arn) = arn {
        req.extensions_mut().insert(IamPrincipal(arn));
    }
    next.run(req).await
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
