//! The HTTP side of GitHub's API: one octocrab client (token or App installation auth, base URI)
//! shared by the git source and the commit statuses, raw requests under a deadline, and GitHub's
//! error answers classified once ([`ApiError`]).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, StatusCode, Uri};
use http_body_util::BodyExt;
use octocrab::models::{AppId, InstallationId};
use octocrab::Octocrab;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::auth::{is_token, GithubAuth};
use super::wire::rfc3339;
use super::SetupError;

/// GitHub's public API.
pub const DEFAULT_BASE_URI: &str = "https://api.github.com";

/// How long one request (its whole answer included) may take unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest JSON answer read (a recursive tree of a big repository is several MB).
const MAX_JSON_BYTES: usize = 64 << 20;
/// Largest error body kept for its message.
const MAX_ERROR_BYTES: usize = 64 << 10;
/// Redirects followed for one download (GitHub answers a tarball with one, to codeload).
const MAX_REDIRECTS: usize = 5;

/// An authenticated GitHub API client. Cheap to clone; clones share the connection pool and the
/// cached installation token. Build it inside a Tokio runtime (octocrab spawns its worker there).
#[derive(Clone)]
pub struct GithubClient {
    inner: Arc<Inner>,
}

struct Inner {
    api: Octocrab,
    /// For following redirects off the API (codeload URLs carry their own token): no
    /// credentials, and no base path that octocrab would put in front of the URL's path.
    plain: OnceCell<Octocrab>,
    origin: Uri,
    timeout: Duration,
    /// Authenticated with a token, not as a GitHub App installation.
    token: bool,
}

impl GithubClient {
    /// A client for the API at `base_uri` ([`DEFAULT_BASE_URI`], or GitHub Enterprise's
    /// `https://HOST/api/v3`). An App's key is tried once here, so a bad key fails now.
    pub fn new(auth: &GithubAuth, base_uri: &str) -> Result<Self, SetupError> {
        tokio::runtime::Handle::try_current().map_err(|_| SetupError::NoRuntime)?;
        let base = parse_base(base_uri)?;
        let origin = origin_of(&base)?;
        let builder = Octocrab::builder()
            .add_header(http::header::USER_AGENT, "gannet".to_owned())
            .base_uri(base)
            .map_err(SetupError::Client)?;
        let token = matches!(auth, GithubAuth::Token(_));
        let api = match auth {
            GithubAuth::Token(token) => {
                if !is_token(token.expose()) {
                    return Err(SetupError::Token);
                }
                builder
                    .personal_token(token.expose().to_owned())
                    .build()
                    .map_err(SetupError::Client)?
            }
            GithubAuth::App {
                app_id,
                installation_id,
                private_key,
            } => {
                let key = octocrab::EncodingKey::from_rsa_pem(private_key.expose().as_bytes())
                    .map_err(|_| SetupError::PrivateKey)?;
                octocrab::auth::create_jwt(AppId(*app_id), &key)
                    .map_err(|_| SetupError::PrivateKey)?;
                builder
                    .app(AppId(*app_id), key)
                    .build()
                    .and_then(|app| app.installation(InstallationId(*installation_id)))
                    .map_err(SetupError::Client)?
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                api,
                plain: OnceCell::new(),
                origin,
                timeout: DEFAULT_TIMEOUT,
                token,
            }),
        })
    }

    /// The same client with another deadline for each request, its whole answer included.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let inner = &self.inner;
        Self {
            inner: Arc::new(Inner {
                api: inner.api.clone(),
                plain: OnceCell::new(),
                origin: inner.origin.clone(),
                timeout,
                token: inner.token,
            }),
        }
    }

    /// `GET path` (from the API root), decoded as `T`.
    pub(crate) async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        let deadline = Instant::now() + self.inner.timeout;
        let call = Call::new("GET", path);
        let response = within(deadline, &call, self.inner.api._get(path)).await?;
        let body = read_body(deadline, &call, response, MAX_JSON_BYTES).await?;
        let de = &mut serde_json::Deserializer::from_slice(&body);
        serde_path_to_error::deserialize(de).map_err(|source| call.error(ErrorKind::Decode(source)))
    }

    /// `POST path` with a JSON body; the answer's body is not read beyond its status.
    pub(crate) async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let deadline = Instant::now() + self.inner.timeout;
        let call = Call::new("POST", path);
        let response = within(deadline, &call, self.inner.api._post(path, Some(body))).await?;
        read_body(deadline, &call, response, MAX_ERROR_BYTES)
            .await
            .map(drop)
    }

    /// `POST` or `PATCH path` with a JSON body; the answer decoded as `T`.
    pub(crate) async fn send_json<T: DeserializeOwned>(
        &self,
        method: Write,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, ApiError> {
        let deadline = Instant::now() + self.inner.timeout;
        let api = &self.inner.api;
        let (call, response) = match method {
            Write::Post => {
                let call = Call::new("POST", path);
                let response = within(deadline, &call, api._post(path, Some(body))).await?;
                (call, response)
            }
            Write::Patch => {
                let call = Call::new("PATCH", path);
                let response = within(deadline, &call, api._patch(path, Some(body))).await?;
                (call, response)
            }
        };
        let body = read_body(deadline, &call, response, MAX_JSON_BYTES).await?;
        let de = &mut serde_json::Deserializer::from_slice(&body);
        serde_path_to_error::deserialize(de).map_err(|source| call.error(ErrorKind::Decode(source)))
    }

    /// Whether the client authenticates with a token rather than as a GitHub App installation
    /// (some APIs, check runs among them, are for Apps only).
    pub(crate) fn is_token(&self) -> bool {
        self.inner.token
    }

    /// `GET path` into the file `dest`, following GitHub's redirects (to codeload, without
    /// sending the API credentials there), at most `limit` bytes.
    pub(crate) async fn download(
        &self,
        path: &str,
        dest: &Path,
        limit: u64,
    ) -> Result<(), ApiError> {
        let deadline = Instant::now() + self.inner.timeout;
        let call = Call::new("GET", path);
        let mut response = within(deadline, &call, self.inner.api._get(path)).await?;
        for _ in 0..MAX_REDIRECTS {
            if !response.status().is_redirection() {
                break;
            }
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| call.error(ErrorKind::Redirect("no Location header")))?;
            let target = self.absolute(location).map_err(|e| call.error(e))?;
            let plain = self
                .inner
                .plain
                .get_or_try_init(|| async { self.plain_client() })
                .await
                .map_err(|source| call.error(ErrorKind::Transport(source)))?;
            response = within(deadline, &call, plain._get(target)).await?;
        }
        let status = response.status();
        if status.is_redirection() {
            return Err(call.error(ErrorKind::Redirect("too many redirects")));
        }
        if !status.is_success() {
            let (parts, body) = response.into_parts();
            let bytes = collect(deadline, &call, body, MAX_ERROR_BYTES).await?;
            return Err(call.status(status, &parts.headers, &bytes));
        }
        let io = |source| call.error(ErrorKind::Io(source));
        let mut file = tokio::fs::File::create(dest).await.map_err(io)?;
        let mut body = response.into_body();
        let mut written: u64 = 0;
        loop {
            let frame = tokio::time::timeout_at(deadline, body.frame())
                .await
                .map_err(|_| call.error(ErrorKind::Timeout))?;
            let Some(frame) = frame else { break };
            let frame = frame.map_err(|source| call.error(ErrorKind::Transport(source)))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            written += data.len() as u64;
            if written > limit {
                return Err(call.error(ErrorKind::TooLarge(limit)));
            }
            file.write_all(&data).await.map_err(io)?;
        }
        file.flush().await.map_err(io)
    }

    fn plain_client(&self) -> Result<Octocrab, octocrab::Error> {
        Octocrab::builder()
            .add_header(http::header::USER_AGENT, "gannet".to_owned())
            .base_uri(self.inner.origin.clone())?
            .build()
    }

    /// A redirect's target as an absolute URI (a bare path is on the API's host).
    fn absolute(&self, location: &str) -> Result<Uri, ErrorKind> {
        let uri: Uri = location
            .parse()
            .map_err(|_| ErrorKind::Redirect("Location is not a URI"))?;
        if uri.authority().is_some() {
            return Ok(uri);
        }
        let origin = &self.inner.origin;
        let mut parts = uri.into_parts();
        parts.scheme = origin.scheme().cloned();
        parts.authority = origin.authority().cloned();
        Uri::from_parts(parts).map_err(|_| ErrorKind::Redirect("Location is not a URI"))
    }
}

/// The methods [`GithubClient::send_json`] sends.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Write {
    Post,
    Patch,
}

fn parse_base(base_uri: &str) -> Result<Uri, SetupError> {
    let bad = || SetupError::BaseUri {
        uri: base_uri.to_owned(),
    };
    let uri: Uri = base_uri.parse().map_err(|_| bad())?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("https" | "http"), Some(_)) if uri.query().is_none() => Ok(uri),
        _ => Err(bad()),
    }
}

fn origin_of(base: &Uri) -> Result<Uri, SetupError> {
    let bad = || SetupError::BaseUri {
        uri: base.to_string(),
    };
    let scheme = base.scheme_str().ok_or_else(bad)?;
    let authority = base.authority().ok_or_else(bad)?;
    format!("{scheme}://{authority}").parse().map_err(|_| bad())
}

type Response = http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, octocrab::Error>>;

/// Runs one request under the deadline.
async fn within(
    deadline: Instant,
    call: &Call,
    request: impl std::future::Future<Output = octocrab::Result<Response>>,
) -> Result<Response, ApiError> {
    match tokio::time::timeout_at(deadline, request).await {
        Err(_) => Err(call.error(ErrorKind::Timeout)),
        Ok(Err(source)) => Err(call.error(ErrorKind::Transport(source))),
        Ok(Ok(response)) => Ok(response),
    }
}

/// The body of a successful answer, or the classified error of a failed one.
async fn read_body(
    deadline: Instant,
    call: &Call,
    response: Response,
    limit: usize,
) -> Result<bytes::Bytes, ApiError> {
    let (parts, body) = response.into_parts();
    let success = parts.status.is_success();
    let bytes = collect(
        deadline,
        call,
        body,
        if success { limit } else { MAX_ERROR_BYTES },
    )
    .await?;
    if success {
        Ok(bytes)
    } else {
        Err(call.status(parts.status, &parts.headers, &bytes))
    }
}

async fn collect(
    deadline: Instant,
    call: &Call,
    body: http_body_util::combinators::BoxBody<bytes::Bytes, octocrab::Error>,
    limit: usize,
) -> Result<bytes::Bytes, ApiError> {
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout_at(deadline, limited.collect()).await {
        Err(_) => Err(call.error(ErrorKind::Timeout)),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(call.error(ErrorKind::TooLarge(limit as u64)))
        }
        Ok(Err(e)) => Err(call.error(ErrorKind::Body(e))),
    }
}

/// One request, for naming it in errors.
struct Call {
    method: &'static str,
    path: String,
}

impl Call {
    fn new(method: &'static str, path: &str) -> Self {
        // Never keep a query string: it could carry a token (codeload URLs do).
        let path = path.split('?').next().unwrap_or_default().to_owned();
        Self { method, path }
    }

    fn error(&self, kind: ErrorKind) -> ApiError {
        ApiError {
            method: self.method,
            path: self.path.clone(),
            kind,
        }
    }

    /// Classifies GitHub's error answer.
    fn status(&self, status: StatusCode, headers: &HeaderMap, body: &[u8]) -> ApiError {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let exhausted = header("x-ratelimit-remaining") == Some("0");
        let retry_after = header("retry-after").and_then(|v| v.trim().parse::<u64>().ok());
        let limited = status == StatusCode::TOO_MANY_REQUESTS
            || (status == StatusCode::FORBIDDEN && (exhausted || retry_after.is_some()));
        if limited {
            let reset = header("x-ratelimit-reset").and_then(|v| v.trim().parse::<u64>().ok());
            return self.error(ErrorKind::RateLimited(describe_reset(
                retry_after,
                reset,
                SystemTime::now(),
            )));
        }
        if status == StatusCode::NOT_FOUND {
            return self.error(ErrorKind::NotFound);
        }
        self.error(ErrorKind::Status {
            status: status.as_u16(),
            message: github_message(body),
        })
    }
}

/// When a rate limit lifts, as a sentence.
fn describe_reset(retry_after: Option<u64>, reset: Option<u64>, now: SystemTime) -> String {
    let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    match (retry_after, reset) {
        (Some(secs), _) => format!("retry after {secs}s"),
        (None, Some(at)) => format!(
            "resets at {} (in {}s)",
            rfc3339(at.saturating_mul(1000)),
            at.saturating_sub(now)
        ),
        (None, None) => "GitHub did not say when it resets".to_owned(),
    }
}

/// GitHub's `{"message": ...}` with the `errors` it lists (a validation failure says what
/// failed there: each a text, or an object with a `message` or a `field` and `code`), or the
/// start of the body.
fn github_message(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        message: String,
        #[serde(default)]
        errors: Vec<serde_json::Value>,
    }
    let text = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => {
            let details: Vec<String> = b
                .errors
                .iter()
                .filter_map(|e| match e {
                    serde_json::Value::String(text) => Some(text.clone()),
                    serde_json::Value::Object(fields) => {
                        let text = |key: &str| fields.get(key).and_then(|v| v.as_str());
                        text("message").map(str::to_owned).or_else(|| {
                            Some(format!("{} {}", text("field")?, text("code").unwrap_or("")))
                        })
                    }
                    _ => None,
                })
                .map(|d| d.trim().to_owned())
                .collect();
            if details.is_empty() {
                b.message
            } else {
                format!("{}: {}", b.message.trim_end(), details.join("; "))
            }
        }
        Err(_) => String::from_utf8_lossy(body).trim().to_owned(),
    };
    text.chars().take(300).collect()
}

/// A GitHub API request that did not give what was asked.
#[derive(Debug, thiserror::Error)]
#[error("{method} {path}: {kind}")]
pub(crate) struct ApiError {
    method: &'static str,
    path: String,
    #[source]
    pub(crate) kind: ErrorKind,
}

impl ApiError {
    /// The HTTP status GitHub answered with, when it answered with an error status.
    pub(crate) fn status(&self) -> Option<u16> {
        match &self.kind {
            ErrorKind::NotFound => Some(404),
            ErrorKind::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ErrorKind {
    #[error("not found")]
    NotFound,
    #[error("GitHub API rate limit exhausted; {0}")]
    RateLimited(String),
    #[error("HTTP {status}: {message}")]
    Status { status: u16, message: String },
    #[error("no complete answer in time")]
    Timeout,
    #[error("request failed")]
    Transport(#[source] octocrab::Error),
    #[error("reading the answer failed")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("answer larger than {0} bytes")]
    TooLarge(u64),
    #[error("unexpected answer")]
    Decode(#[source] serde_path_to_error::Error<serde_json::Error>),
    #[error("bad redirect: {0}")]
    Redirect(&'static str),
    #[error("writing the download failed")]
    Io(#[source] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_resets() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let check = |retry_after, reset, want: &str| {
            assert_eq!(describe_reset(retry_after, reset, now), want);
        };
        check(
            None,
            Some(1_700_000_042),
            "resets at 2023-11-14T22:14:02Z (in 42s)",
        );
        check(Some(60), Some(1_700_000_042), "retry after 60s");
        check(None, None, "GitHub did not say when it resets");
    }

    #[test]
    fn base_uris() {
        for good in [
            "https://api.github.com",
            "https://ghe.example.com/api/v3",
            "http://127.0.0.1:8080/",
        ] {
            assert!(parse_base(good).is_ok(), "{good}");
        }
        for bad in ["api.github.com", "ftp://x", "/api/v3", "https://x/?a=b", ""] {
            assert!(parse_base(bad).is_err(), "{bad}");
        }
        let base = parse_base("https://ghe.example.com/api/v3").unwrap();
        assert_eq!(
            origin_of(&base).unwrap().to_string(),
            "https://ghe.example.com/"
        );
    }

    #[test]
    fn messages() {
        assert_eq!(
            github_message(br#"{"message":"Not Found","documentation_url":"x"}"#),
            "Not Found"
        );
        assert_eq!(github_message(b" oops \n"), "oops");
        assert_eq!(
            github_message(
                br#"{"message":"Validation Failed","errors":[{"resource":"CheckRun","field":"name","code":"missing_field"},{"message":"summary is too long"},"head_sha is not a commit",3]}"#
            ),
            "Validation Failed: name missing_field; summary is too long; head_sha is not a commit"
        );
    }
}
