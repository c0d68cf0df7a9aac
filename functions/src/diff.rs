//! `apps diff` on AWS. The `api` function has only the plugins' planning faces (it links no
//! platform SDK), so it cannot read live state; it asks the `drift` function, which has the
//! plugins whole and the roles to read every platform, with a synchronous Lambda invocation
//! (`GANNET_DIFF_FUNCTION`, the template's DriftFunction):
//!
//! - request: `{"diff": {"app": "<app id>", "commit": "<40 hex digits>"}}`
//! - answer: `{"diff": {...}}` (the [`DiffView`]), or `{"error": "...", "status": 409}`
//!
//! The drift function tells this payload apart from its timer's input and its SQS events.

use async_trait::async_trait;
use aws_sdk_lambda::primitives::Blob;
use gannet_controller::{ApiError, DiffView, RemoteDiff};
use gannet_domain::{AppId, CommitSha};
use serde_json::{json, Value};

/// How long the api function waits for the drift function's answer.
const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(25);

/// The `api` function's [`RemoteDiff`]: a synchronous invocation of the `drift` function.
pub struct LambdaDiff {
    client: aws_sdk_lambda::Client,
    /// The drift function's name or ARN.
    function: String,
}

/// The api function's remote diff ([`crate::DiffFactory`]). Only its `main` names it, so only
/// its zip links the Lambda SDK.
///
/// `AWS_ENDPOINT_URL_LAMBDA` (AWS's variable for one service's endpoint) points the invocation
/// elsewhere than `AWS_ENDPOINT_URL` (tests: the emulator's Invoke API, with the rest on moto).
pub fn lambda_diff(
    sdk: &aws_config::SdkConfig,
    function: String,
) -> std::sync::Arc<dyn RemoteDiff> {
    let mut config = aws_sdk_lambda::config::Builder::from(sdk);
    if let Some(url) = std::env::var("AWS_ENDPOINT_URL_LAMBDA")
        .ok()
        .filter(|u| !u.is_empty())
    {
        config = config.endpoint_url(url);
    }
    std::sync::Arc::new(LambdaDiff {
        client: aws_sdk_lambda::Client::from_conf(config.build()),
        function,
    })
}

/// The request the api function sends for `app` at `commit`.
pub fn request(app: &AppId, commit: &CommitSha) -> Value {
    json!({"diff": {"app": app.as_str(), "commit": commit.as_str()}})
}

#[async_trait]
impl RemoteDiff for LambdaDiff {
    async fn diff(&self, app: &AppId, commit: &CommitSha) -> Result<DiffView, ApiError> {
        let unavailable = |why: String| {
            tracing::error!(function = %self.function, error = %why, "the diff invocation failed");
            ApiError::Unavailable(format!(
                "the drift function ({}) could not compare the live state; see the api function's log",
                self.function
            ))
        };
        let invoke = self
            .client
            .invoke()
            .function_name(&self.function)
            .payload(Blob::new(request(app, commit).to_string()))
            .send();
        // The HTTP API answers 503 after 30 s: answer before it, saying why.
        let out = tokio::time::timeout(ANSWER_WITHIN, invoke)
            .await
            .map_err(|_| unavailable(format!("no answer within {ANSWER_WITHIN:?}")))?
            .map_err(|e| {
                unavailable(aws_smithy_types::error::display::DisplayErrorContext(e).to_string())
            })?;
        let payload = out.payload().map(|b| b.as_ref()).unwrap_or_default();
        if let Some(error) = out.function_error() {
            return Err(unavailable(format!(
                "{error}: {}",
                String::from_utf8_lossy(payload)
            )));
        }
        let answer: Value = serde_json::from_slice(payload)
            .map_err(|e| unavailable(format!("an answer that is not JSON: {e}")))?;
        gannet_controller::diff_from_answer(&answer).map_err(|e| match e {
            Some(api) => api,
            None => unavailable(format!("an answer of another shape: {answer}")),
        })
    }
}
