//! The HTTP functions through lambda_http: `webhook` (a Function URL request becomes a
//! [`WebhookRequest`](gannet_controller::WebhookRequest), its headers read as `gannet up`
//! reads them) and `api` (the same axum router as `gannet up`).

use std::sync::Arc;

use axum::response::IntoResponse;
use gannet_aws::IamCallers;
use gannet_controller::http::{Access, Hosts, IamPrincipal};
use gannet_controller::{error_chain, WebhookHeaders, WebhookResponse};
use lambda_http::http::{header, Method, StatusCode};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, Response};
use serde_json::json;

use crate::config::HttpApiSource;
use crate::Runtime;
use gannet_domain::report::cut;

/// Answers one webhook delivery: checks, deduplicates and queues it (the controller's
/// webhook handler), then says so in JSON.
pub async fn webhook(runtime: &Runtime, request: Request) -> Response<Body> {
    if request.method() != Method::POST {
        return respond(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"status": "rejected", "reason": "GitHub webhooks are POSTed"}),
        );
    }
    let delivery = WebhookHeaders::read(request.headers()).with_body(request.body().to_vec());
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

/// The JSON API and the web console ([`Runtime::console`]): `gannet up`'s router, served
/// through lambda_http, for events from the stack's own HTTP API only ([`from_the_api`]). The
/// caller is the IAM principal API Gateway authorised; its name and role follow
/// `GANNET_CALLER_NAMES` or the rule of [`IamCallers`].
pub fn api(runtime: &Runtime) -> axum::Router {
    let access = Access {
        callers: Arc::new(IamCallers::new(runtime.caller_names().clone())),
        hosts: Hosts::Any,
    };
    let source = Arc::new(runtime.http_api().cloned());
    gannet_controller::http::router(runtime.controller().clone(), access, runtime.console())
        .layer(axum::middleware::from_fn_with_state(source, from_the_api))
}

/// Answers only events API Gateway sent for the stack's HTTP API, and puts the IAM principal
/// it authorised on the request.
///
/// Whoever may invoke the function directly (`lambda:InvokeFunction`) can write any event,
/// naming any principal: an event whose `apiId` or account is not the stack's, or that has no
/// HTTP API context, is refused here with 403 and logged. One that copies the right ids is
/// indistinguishable from API Gateway's, so direct invoke rights are admin rights.
async fn from_the_api(
    axum::extract::State(source): axum::extract::State<Arc<Option<HttpApiSource>>>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let context = match req.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => Some(ctx),
        _ => None,
    };
    let sent_by_the_api = context.is_some_and(|ctx| {
        source.as_ref().as_ref().is_some_and(|api| {
            ctx.apiid.as_deref() == Some(api.api_id.as_str())
                && ctx.account_id.as_deref() == Some(api.account_id.as_str())
        })
    });
    if !sent_by_the_api {
        let field = |value: Option<&String>| cut(value.map_or("", String::as_str), 80);
        tracing::warn!(
            api_id = %field(context.and_then(|c| c.apiid.as_ref())),
            account = %field(context.and_then(|c| c.account_id.as_ref())),
            method = %req.method(),
            path = %cut(req.uri().path(), 200),
            "refused an event that did not come from this stack's HTTP API"
        );
        let message = "this function answers only requests through its own HTTP API \
                       (a direct invocation, or another API's, is refused)";
        return (
            StatusCode::FORBIDDEN,
            [
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            axum::Json(json!({ "error": message })),
        )
            .into_response();
    }
    let arn = context
        .and_then(|ctx| ctx.authorizer.as_ref())
        .and_then(|a| a.iam.as_ref())
        .and_then(|iam| iam.user_arn.clone());
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
