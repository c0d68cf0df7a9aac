//! The small typed client of the Cloud Run Admin API v2 that the stages need: get, create and
//! update a service, get a revision, and get a long-running operation. JSON over HTTPS
//! (rustls on ring, the system's roots), a bearer token from [`crate::auth`], and Google's error
//! shape turned into a [`StepError`]: throttling, 5xx and aborted writes are transient (with the
//! delay Google asks for), anything else fails the stage with Google's own message.

use std::time::Duration;

use gannet_domain::GoDuration;
use gannet_sdk::plugin::StepError;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::Auth;
use crate::target::DeployTarget;

/// The largest response gannet reads: a service with every field set is a few kilobytes.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Google's message is shown whole up to this length.
const MAX_MESSAGE_CHARS: usize = 2000;

/// A call that failed.
#[derive(Debug, thiserror::Error)]
#[error("{operation}: {detail}")]
pub struct ApiError {
    /// What gannet asked for, such as `update service web`.
    pub operation: String,
    /// Google's status and message, or the transport's error.
    pub detail: String,
    /// The HTTP status, when there was a response.
    pub status: Option<u16>,
    pub retryable: bool,
    /// How long Google asked gannet to wait (`Retry-After`, or a `RetryInfo` detail).
    pub retry_after: Option<Duration>,
}

impl ApiError {
    /// A failure retrying cannot mend (an answer gannet cannot read, a bad operation name).
    pub(crate) fn permanent(operation: &str, detail: impl Into<String>) -> Self {
        Self {
            operation: operation.to_owned(),
            detail: detail.into(),
            status: None,
            retryable: false,
            retry_after: None,
        }
    }

    pub(crate) fn transport(operation: &str, err: &reqwest::Error) -> Self {
        // reqwest names the URL; the chain underneath says why (refused, timed out, TLS).
        Self {
            operation: operation.to_owned(),
            detail: gannet_domain::report::error_chain(err),
            status: None,
            retryable: true,
            retry_after: None,
        }
    }

    pub(crate) fn is_not_found(&self) -> bool {
        self.status == Some(404)
    }
}

impl From<ApiError> for StepError {
    fn from(e: ApiError) -> Self {
        if !e.retryable {
            return StepError::permanent(format!("Cloud Run: {e}"));
        }
        let after = e.retry_after;
        let err = StepError::transient(format!("Cloud Run: {}", e.operation), e.detail);
        match after {
            Some(d) => err.retry_after(GoDuration::from_millis(d.as_millis() as u64)),
            None => err,
        }
    }
}

/// Google's error body: `{"error": {"code", "message", "status", "details"}}`.
#[derive(Deserialize)]
struct ErrorBody {
    error: GoogleError,
}

#[derive(Deserialize)]
struct GoogleError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    details: Vec<Value>,
}

/// A response read whole (up to [`MAX_BODY_BYTES`]), or the error it carries.
pub(crate) async fn read(operation: &str, response: reqwest::Response) -> Result<Value, ApiError> {
    let status = response.status();
    let retry_header = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = read_bounded(operation, response).await?;
    if status.is_success() {
        return serde_json::from_slice(&body).map_err(|e| {
            ApiError::permanent(
                operation,
                format!("the response is not the JSON expected: {e}"),
            )
        });
    }
    let parsed = serde_json::from_slice::<ErrorBody>(&body).ok();
    let (google_status, message, details) = match parsed {
        Some(b) => (b.error.status, b.error.message, b.error.details),
        None => (
            String::new(),
            String::from_utf8_lossy(&body).trim().to_owned(),
            Vec::new(),
        ),
    };
    let retry_info = details
        .iter()
        .filter(|d| {
            d["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| d["retryDelay"].as_str().and_then(parse_seconds));
    let retryable = matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS
            | StatusCode::INTERNAL_SERVER_ERROR
            | StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT
    ) || google_status == "ABORTED";
    let mut message: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("no message").to_owned();
    }
    let detail = match google_status.as_str() {
        "" => format!("{}: {message}", status.as_u16()),
        s => format!("{} {s}: {message}", status.as_u16()),
    };
    Err(ApiError {
        operation: operation.to_owned(),
        detail,
        status: Some(status.as_u16()),
        retryable,
        retry_after: retry_header.or(retry_info),
    })
}

async fn read_bounded(
    operation: &str,
    mut response: reqwest::Response,
) -> Result<Vec<u8>, ApiError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ApiError::transport(operation, &e))?
    {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::permanent(
                operation,
                format!("the response is larger than {MAX_BODY_BYTES} bytes"),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `"5s"`, `"1.5s"` → a duration.
fn parse_seconds(s: &str) -> Option<Duration> {
    let secs: f64 = s.strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

/// The HTTP client every call of the plugin uses: rustls on ring with the system's roots,
/// bounded connect and request times, no redirects (a token is never sent elsewhere).
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .use_rustls_tls()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("HTTP client set-up: {e}"))
}

/// A long-running operation as the API reports it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Operation {
    pub name: String,
    pub done: bool,
    pub error: Option<OperationError>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct OperationError {
    pub code: i32,
    pub message: String,
}

/// The Cloud Run Admin API v2 of one deploy target.
pub(crate) struct Api {
    http: reqwest::Client,
    auth: Auth,
    /// `https://run.googleapis.com/v2`.
    base: String,
    /// `projects/P/locations/R`.
    parent: String,
}

impl Api {
    pub(crate) fn new(target: &DeployTarget, http: reqwest::Client, auth: Auth) -> Self {
        Self {
            base: format!("{}/v2", target.endpoint()),
            parent: format!("projects/{}/locations/{}", target.project, target.region),
            http,
            auth,
        }
    }

    /// `projects/P/locations/R/services/ID`.
    pub(crate) fn service_name(&self, id: &str) -> String {
        format!("{}/services/{id}", self.parent)
    }

    /// One call with the target's token; a 401 gets a new token and one more try.
    async fn call(
        &self,
        operation: &str,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let url = format!("{}/{path}", self.base);
        for attempt in 0..2 {
            let token = self.auth.token(&self.http).await?;
            let mut request = self
                .http
                .request(method.clone(), &url)
                .query(query)
                .bearer_auth(token.secret());
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request
                .send()
                .await
                .map_err(|e| ApiError::transport(operation, &e))?;
            if response.status() == StatusCode::UNAUTHORIZED && attempt == 0 {
                self.auth.forget(&token).await;
                continue;
            }
            return read(operation, response).await;
        }
        unreachable!("the loop returns on its second pass")
    }

    /// The service, or `None` when it does not exist.
    pub(crate) async fn get_service(&self, id: &str) -> Result<Option<Value>, ApiError> {
        let path = self.service_name(id);
        match self
            .call(&format!("get service {id}"), Method::GET, &path, &[], None)
            .await
        {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) async fn create_service(
        &self,
        id: &str,
        body: &Value,
    ) -> Result<Operation, ApiError> {
        let path = format!("{}/services", self.parent);
        let op = format!("create service {id}");
        let v = self
            .call(&op, Method::POST, &path, &[("serviceId", id)], Some(body))
            .await?;
        operation(&op, v)
    }

    /// Replaces the service's settable fields with `body` (its `etag` guards against a write
    /// made since it was read).
    pub(crate) async fn update_service(
        &self,
        id: &str,
        body: &Value,
    ) -> Result<Operation, ApiError> {
        let path = self.service_name(id);
        let op = format!("update service {id}");
        let v = self
            .call(&op, Method::PATCH, &path, &[], Some(body))
            .await?;
        operation(&op, v)
    }

    /// The revision, or `None` when it does not exist.
    pub(crate) async fn get_revision(
        &self,
        service: &str,
        revision: &str,
    ) -> Result<Option<Value>, ApiError> {
        let path = format!("{}/revisions/{revision}", self.service_name(service));
        let op = format!("get revision {revision}");
        match self.call(&op, Method::GET, &path, &[], None).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The operation named `name` (`projects/P/locations/R/operations/ID`; Cloud Run may name
    /// the project by its number). The name comes back from stage metadata, so it must be an
    /// operation's name and nothing else before it becomes a path.
    pub(crate) async fn get_operation(&self, name: &str) -> Result<Operation, ApiError> {
        let parts: Vec<&str> = name.split('/').collect();
        let well_formed = matches!(parts.as_slice(), ["projects", p, "locations", _, "operations", id]
            if !p.is_empty() && !id.is_empty())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'))
            && !name.contains("..");
        if !well_formed {
            return Err(ApiError::permanent(
                "get operation",
                format!("{name:?} is not the name of a Cloud Run operation"),
            ));
        }
        let op = "get operation".to_owned();
        let v = self.call(&op, Method::GET, name, &[], None).await?;
        operation(&op, v)
    }
}

fn operation(op: &str, v: Value) -> Result<Operation, ApiError> {
    let parsed: Operation = serde_json::from_value(v)
        .map_err(|e| ApiError::permanent(op, format!("the response is not an operation: {e}")))?;
    if parsed.name.is_empty() {
        return Err(ApiError::permanent(
            op,
            "the response is an operation without a name",
        ));
    }
    Ok(parsed)
}
