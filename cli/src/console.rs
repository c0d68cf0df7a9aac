//! `gannet console`: the web console of a gannet on AWS, in your browser. The AWS `api`
//! function serves the console and the API behind IAM, so every request must be SigV4-signed,
//! which a browser cannot do. This command listens on loopback and forwards each request to
//! the API signed with your AWS credentials (the standard chain: environment, profile, SSO), as
//! `kubectl proxy` does for Kubernetes: the pages come from the api function, the data with
//! your IAM identity, and nothing is stored anywhere.
//!
//! Only this machine reaches it (a `Host` other than its own address is refused, so a rebound
//! DNS name cannot either), and an API call through it must carry the one-time key it prints
//! at start (the console's sign-in): another local user's process or a web page cannot spend
//! your credentials through it. Changes from a foreign `Origin` are refused too.

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
    let app = axum::Router::new().fallback(forward).with_state(proxy);
    axum::serve(listener, app).await?;
    Ok(())
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

async fn forward(State(proxy): State<Arc<Proxy>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let host = header_text(&parts.headers, header::HOST).unwrap_or("");
    if !proxy.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this console proxy serves only its own address",
        );
    }
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
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    if path.starts_with("/api/") {
        let bearer = header_text(&parts.headers, header::AUTHORIZATION)
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !same(bearer.trim(), &proxy.key) {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "sign in with the one-time key `gannet console` printed when it started",
            );
        }
    }
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

/// Compares in constant time.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
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
}
