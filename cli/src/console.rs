//! `gannet console`: the web console of a gannet on AWS, in your browser. The AWS `api`
//! function serves the console and the API behind IAM, so every request must be SigV4-signed,
//! which a browser cannot do. This command listens on loopback, serves the console's pages
//! itself and forwards each API call signed with your AWS credentials (the standard chain:
//! environment, profile, SSO), as `kubectl proxy` does for Kubernetes: the data comes with
//! your IAM identity, and nothing is stored anywhere.
//!
//! Only this machine reaches it (a `Host` other than its own address is refused, so a rebound
//! DNS name cannot either), and every request it signs must carry the one-time key it prints
//! at start (the console's sign-in): another local user's process or a web page cannot spend
//! your credentials through it. Changes from a foreign `Origin` are refused too.
//!
//! The console's pages and files (which hold no data) are served from this binary's own copy
//! of the bundle, never fetched through the signed path: a browser loads them without the key,
//! so nothing that needs no key is ever signed. A path with `.` or `..` segments, `//`, a
//! backslash or an encoded slash, dot or backslash is refused before anything else, so no
//! spelling of a path reaches the API as a different one.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{bail, Context};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use subtle::ConstantTimeEq;

/// The largest request body forwarded (the API's own limit).
const MAX_BODY: usize = 64 * 1024;
/// The headers of the api function's answer passed back to the browser.
const ANSWER_HEADERS: [header::HeaderName; 6] = [
    header::CONTENT_TYPE,
    header::CONTENT_SECURITY_POLICY,
    header::X_CONTENT_TYPE_OPTIONS,
    header::X_FRAME_OPTIONS,
    header::REFERRER_POLICY,
    header::CACHE_CONTROL,
];

#[derive(clap::Args)]
pub struct ConsoleArgs {
    /// Where to listen (loopback only) [example: 127.0.0.1:8080]
    #[arg(long, default_value = "127.0.0.1:7071", value_name = "ADDR")]
    listen: SocketAddr,
    /// The API's AWS region (default: the one in an execute-api host name) [example: eu-west-1]
    #[arg(long, value_name = "REGION")]
    region: Option<String>,
    /// Sign as this role, assumed with your credentials through STS
    /// [example: arn:aws:iam::123456789012:role/gannet-viewer]
    #[arg(long, value_name = "ARN")]
    role_arn: Option<String>,
}

struct Proxy {
    /// The API's base URL, without a trailing slash.
    target: reqwest::Url,
    region: String,
    credentials: SharedCredentialsProvider,
    http: reqwest::Client,
    /// The one-time key API calls must carry.
    key: String,
    /// The `host:port` browsers reach this proxy by.
    hosts: Vec<String>,
}

/// Serves the console of the gannet API at `server` until interrupted.
pub async fn run(server: &str, args: ConsoleArgs) -> anyhow::Result<()> {
    let target = reqwest::Url::parse(server.trim_end_matches('/'))
        .with_context(|| format!("--server {server:?} is not a URL"))?;
    if !args.listen.ip().is_loopback() {
        bail!(
            "--listen {}: the console proxy signs with your AWS credentials, so it listens on loopback only (127.0.0.1 or ::1)",
            args.listen
        );
    }
    let region = match args
        .region
        .or_else(|| region_of(target.host_str().unwrap_or("")))
    {
        Some(region) => region,
        None => {
            bail!("cannot tell the API's region from {server}; give --region (the stack's region)")
        }
    };
    let sdk = gannet_plugin_aws_common::sdk_config(
        gannet_plugin_aws_common::AwsFields {
            name: "console",
            region: &region,
            role_arn: args.role_arn.as_deref(),
            endpoint: None,
        },
        None,
    )
    .await;
    let credentials = sdk.credentials_provider().context(
        "no AWS credentials: sign in (aws sso login, AWS_PROFILE, or the AWS_* variables)",
    )?;
    aws_credential_types::provider::ProvideCredentials::provide_credentials(&credentials)
        .await
        .context(
            "no AWS credentials: sign in (aws sso login, AWS_PROFILE, or the AWS_* variables)",
        )?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let key = fresh_key()?;
    let proxy = Arc::new(Proxy {
        target,
        region,
        credentials,
        http: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()?,
        key: key.clone(),
        hosts: vec![addr.to_string(), format!("localhost:{}", addr.port())],
    });
    println!(
        "gannet console for {server}\n  open http://{addr}/ and sign in with this one-time key (it lasts until you stop this command):\n  {key}"
    );
    axum::serve(listener, app(proxy)).await?;
    Ok(())
}

/// Every request passes [`guard`] first; the console's pages are answered here, anything else
/// is [`forward`]ed, signed, only with the key.
fn app(proxy: Arc<Proxy>) -> axum::Router {
    let routes = gannet_controller::console_routes(gannet_cli::CONSOLE)
        .fallback(forward)
        .with_state(proxy.clone());
    axum::Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn_with_state(proxy, guard))
}

/// The region of an API Gateway host name (`<id>.execute-api.<region>.amazonaws.com`).
fn region_of(host: &str) -> Option<String> {
    let rest = host.split_once(".execute-api.")?.1;
    let region = rest.split('.').next()?;
    (!region.is_empty()).then(|| region.to_owned())
}

/// 32 random bytes from the kernel, as hex.
fn fresh_key() -> anyhow::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for the console's key")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A path every reader spells the same way: no `.` or `..` segment, no empty one (`//`), no
/// backslash, and no encoded slash, dot or backslash (`%2f`, `%2e`, `%5c`, any case), which a
/// server further on might decode into one.
fn plain_path(path: &str) -> bool {
    let encoded = path.as_bytes().windows(3).any(|w| {
        w[0] == b'%' && matches!(&[w[1], w[2].to_ascii_lowercase()], b"2f" | b"2e" | b"5c")
    });
    path.starts_with('/')
        && !path.contains("//")
        && !path.contains('\\')
        && !encoded
        && !path.split('/').any(|segment| matches!(segment, "." | ".."))
}

/// Checked on every request, before anything else: the path's spelling, then the `Host`.
async fn guard(
    State(proxy): State<Arc<Proxy>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    if !plain_path(req.uri().path()) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "a path with `.` or `..` segments, `//`, a backslash or an encoded slash, dot or backslash is refused",
        );
    }
    let host = header_text(req.headers(), header::HOST).unwrap_or("");
    if !proxy.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this console proxy serves only its own address",
        );
    }
    next.run(req).await
}

/// Anything that is not one of the console's own pages: sent on, signed, only with the key,
/// whatever its path.
async fn forward(State(proxy): State<Arc<Proxy>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if parts.method != Method::GET && parts.method != Method::HEAD {
        let own = header_text(&parts.headers, header::ORIGIN)
            .and_then(|o| o.split_once("://"))
            .is_none_or(|(_, authority)| {
                proxy
                    .hosts
                    .iter()
                    .any(|h| h.eq_ignore_ascii_case(authority))
            });
        if !own {
            return refuse(
                StatusCode::FORBIDDEN,
                "changes from another origin are refused",
            );
        }
    }
    let bearer = header_text(&parts.headers, header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !same(bearer.trim(), &proxy.key) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "sign in with the one-time key `gannet console` printed when it started",
        );
    }
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(_) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "a request body over 64 KB"),
    };
    match proxy.send(&parts.method, path, &parts.headers, body).await {
        Ok(response) => response,
        Err(err) => {
            // On this command's stderr too: the browser may show only the first line.
            eprintln!("console: {err:#}");
            refuse(
                StatusCode::BAD_GATEWAY,
                &format!("the API did not answer: {err:#}"),
            )
        }
    }
}

/// Compares in constant time (the length aside).
fn same(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Proxy {
    /// Sends the request on to the API, signed for `execute-api`; the answer as the browser
    /// gets it.
    async fn send(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> anyhow::Result<Response> {
        let url = format!("{}{path}", self.target.as_str().trim_end_matches('/'));
        let host = match self.target.port() {
            Some(port) => format!("{}:{port}", self.target.host_str().unwrap_or_default()),
            None => self.target.host_str().unwrap_or_default().to_owned(),
        };
        let mut outgoing: Vec<(&str, String)> = vec![("host", host)];
        if let Some(kind) = header_text(headers, header::CONTENT_TYPE) {
            outgoing.push(("content-type", kind.to_owned()));
        }
        let credentials = aws_credential_types::provider::ProvideCredentials::provide_credentials(
            &self.credentials,
        )
        .await
        .context("AWS credentials")?;
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("execute-api")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()?
            .into();
        let signable = SignableRequest::new(
            method.as_str(),
            &url,
            outgoing.iter().map(|(k, v)| (*k, v.as_str())),
            SignableBody::Bytes(&body),
        )?;
        let (instructions, _) = sign(signable, &params)?.into_parts();
        let mut request = http::Request::builder().method(method.as_str()).uri(&url);
        for (name, value) in &outgoing {
            request = request.header(*name, value);
        }
        let mut request = request.body(())?;
        instructions.apply_to_request_http1x(&mut request);
        let mut call = self.http.request(method.clone(), &url).body(body.to_vec());
        for (name, value) in request.headers() {
            call = call.header(name.as_str(), value.as_bytes());
        }
        let answer = call.send().await.context("the API")?;
        let mut response = Response::builder().status(answer.status().as_u16());
        for name in ANSWER_HEADERS {
            if let Some(value) = answer.headers().get(name.as_str()) {
                response = response.header(name, HeaderValue::from_bytes(value.as_bytes())?);
            }
        }
        let bytes = answer.bytes().await.context("the API's answer")?;
        Ok(response.body(Body::from(bytes))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_comes_from_an_execute_api_host() {
        assert_eq!(
            region_of("abc123.execute-api.eu-west-1.amazonaws.com").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(region_of("gannet.example.com"), None);
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
    }

    #[test]
    fn only_a_plainly_spelled_path_passes() {
        for path in [
            "/",
            "/api/v1/whoami",
            "/api/v1/apps/web/diff",
            "/api/v1/deployments/d-1/stages/stage.1/logs",
            "/assets/app.js",
            "/apps/web",
            "/apps/",
            "/api/v1/apps/a%20b",
            "/api/v1/apps/%41",
        ] {
            assert!(plain_path(path), "{path}");
        }
        for path in [
            "/./api/v1/whoami",
            "/x/../api/v1/deployments/d/approve",
            "/api/v1/.",
            "/api/v1/..",
            "//api/v1/whoami",
            "/api//v1/whoami",
            "/api/v1//",
            "/%2e/api/v1/whoami",
            "/%2E%2E/api/v1/whoami",
            "/x/.%2e/api/v1/whoami",
            "/x%2f..%2fapi/v1/whoami",
            "/x%2F..%2Fapi/v1/whoami",
            "/x%5c..%5capi/v1/whoami",
            "/x%5C..%5Capi/v1/whoami",
            "/x\\..\\api/v1/whoami",
            "\\api/v1/whoami",
            "api/v1/whoami",
            "",
            "*",
        ] {
            assert!(!plain_path(path), "{path}");
        }
    }
}
